/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/source/live/live_source.h"
#include "common/util/clock.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent/source/live/pmu_event.h"
#include "common/util/log.h"
#include "common/util/prime.h"
#include "common/util/sampling_limits.h"
#include "common/util/u64map.h"
#include "edgeprof_bpf.skel.h"

#define MAX_CPUS 1024
/* how often the poll loop looks at the online CPUs (hotplug) */
#define CPU_RESCAN_NS 1000000000ULL
/* Counter indexes, as bpf/edgeprof.bpf.c numbers them. */
enum {
	C_SEEN,
	C_SENT,
	C_FILTERED,
	C_KERNEL,
	C_RESERVE_FAILED,
	C_BRANCH_FAILED,
	C_BETWEEN,
	C_PROC_RESERVE_FAILED,
	C_MMAP_EXEC,
	C_COUNT
};

struct ep_live {
	struct edgeprof_bpf *skel;
	struct ring_buffer *rb;	   /* samples */
	struct ring_buffer *procs; /* process events, drained before and after the samples */
	/* per CPU number: its perf event and the program's link to it */
	int fds[MAX_CPUS];
	struct bpf_link *links[MAX_CPUS];
	uint8_t online[MAX_CPUS];    /* as last read from sysfs */
	struct perf_event_attr attr; /* what every CPU's event is opened with */
	uint64_t last_scan_ns;
	bool stopped;
	/* samples per CPU since it came online (or since the start) */
	uint64_t cpu_samples[MAX_CPUS];
	uint64_t hotplug_changes;
	/* per CPU listed online whose event could not be opened yet: the
	 * looks that failed (sysfs lists a CPU online before perf's hotplug
	 * callback makes it usable, for seconds on a loaded machine) */
	uint32_t attach_failures[MAX_CPUS];
	struct bpf_link *proc_links[4];
	ep_live_proc_cb proc_cb;
	void *proc_ctx;
	uint64_t proc_events;
	/* pid -> time of its latest executable mmap not yet handed on: handed
	 * to proc_cb just before the first sample of that pid taken after it
	 * (the event comes before the mapping exists, and a process mapping
	 * 500 libraries at start gets one re-read, not 500) */
	struct ep_u64map mmap_pending;
	uint64_t mmap_events, mmap_delivered;
	unsigned ncpus;
	bool branch_stacks;
	struct ep_branch_event event;
	/* steps > 1: a countdown of overflows of the prime `step` per sample.
	 * steps == 1: every overflow a sample, each CPU's period drawn from
	 * [period - jitter, period + jitter] and drawn again at every drain. */
	uint64_t step;
	uint32_t steps, steps_jitter;
	uint64_t period, jitter;
	bool rearm;
	uint64_t rng;
	uint64_t rearms, rearm_failures;
	int epoll_fd; /* both rings: the agent sleeps until a drain is due */
	uint64_t polls, early_wakeups, exec_wakeups;
	uint64_t drain_ns, last_rearm_ns; /* periods are drawn once per drain interval */
	char mode[320];
	uint64_t received;
	struct ep_sample_record rec;
	ep_live_sample_cb cb;
	void *cb_ctx;
};

/* xorshift64*: the periods need no secrecy, only independence from the
 * program sampled */
static uint64_t next_random(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dULL;
}

/* The period of one CPU until its next re-arm. */
static uint64_t draw_period(struct ep_live *l)
{
	if (!l->rearm)
		return l->step;
	if (!l->jitter)
		return l->period;
	return l->period - l->jitter + next_random(&l->rng) % (2 * l->jitter + 1);
}

static long perf_event_open(struct perf_event_attr *attr, int cpu)
{
	return syscall(SYS_perf_event_open, attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

/* CapEff from /proc/self/status: the agent needs CAP_BPF and CAP_PERFMON
 * (or CAP_SYS_ADMIN, which implies both), and says which one is missing. */
static int check_capabilities(char *err, size_t errlen)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	unsigned long long eff = 0;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &eff) == 1)
			break;
	if (f)
		fclose(f);
	bool sys_admin = eff & (1ULL << 21), perfmon = eff & (1ULL << 38), bpf = eff & (1ULL << 39);
	if (sys_admin || (perfmon && bpf)) {
		/* what works less well without the others, said once at start */
		static const struct {
			int bit;
			const char *name, *loss;
		} soft[] = {
		    {19, "CAP_SYS_PTRACE", "other users' and privileged processes' mappings"},
		    {40, "CAP_CHECKPOINT_RESTORE",
		     "/proc/PID/map_files (binaries deleted or replaced on disk)"},
		    {2, "CAP_DAC_READ_SEARCH", "binaries other users cannot read"},
		};
		for (size_t i = 0; i < sizeof(soft) / sizeof(soft[0]); i++)
			if (!sys_admin && !(eff & (1ULL << soft[i].bit)))
				ep_warn("without %s the agent cannot read %s: their samples stay "
					"unresolved",
					soft[i].name, soft[i].loss);
		return 0;
	}
	snprintf(err, errlen,
		 "missing capabilit%s %s%s%s: run as root or grant CAP_BPF and "
		 "CAP_PERFMON",
		 perfmon || bpf ? "y" : "ies", bpf ? "" : "CAP_BPF",
		 !bpf && !perfmon ? " and " : "", perfmon ? "" : "CAP_PERFMON");
	return -1;
}

int ep_cpu_list_parse(const char *text, uint8_t *online, unsigned max)
{
	memset(online, 0, max);
	int n = 0;
	const char *p = text;
	while (*p && *p != '\n') {
		char *end;
		unsigned long a = strtoul(p, &end, 10), b = a;
		if (end == p || *p == '-' || *p == '+' || *p == ' ')
			return -1;
		p = end;
		if (*p == '-') {
			p++;
			b = strtoul(p, &end, 10);
			if (end == p || *p == '-' || *p == '+' || *p == ' ' || b < a)
				return -1;
			p = end;
		}
		if (*p == ',')
			p++;
		else if (*p && *p != '\n')
			return -1;
		for (unsigned long c = a; c <= b && c < max; c++)
			if (!online[c]) {
				online[c] = 1;
				n++;
			}
	}
	return n;
}

/* The online CPUs from sysfs; -1 when it cannot be read or parsed. */
static int read_online(uint8_t *online)
{
	FILE *f = fopen("/sys/devices/system/cpu/online", "r");
	char buf[4096];
	bool got = f && fgets(buf, sizeof(buf), f);
	if (f)
		fclose(f);
	return got ? ep_cpu_list_parse(buf, online, MAX_CPUS) : -1;
}

/* Opens the sampling event on one CPU and attaches the program to it. */
/* What the program reports as each sample's period (see cpu_period in
 * bpf/edgeprof.bpf.c). */
static void note_period(struct ep_live *l, int cpu, uint64_t period)
{
	uint32_t key = (uint32_t)cpu;
	bpf_map_update_elem(bpf_map__fd(l->skel->maps.cpu_period), &key, &period, BPF_ANY);
}

static int cpu_attach(struct ep_live *l, int cpu, char *err, size_t errlen)
{
	l->attr.sample_period = draw_period(l);
	note_period(l, cpu, l->attr.sample_period);
	long fd = perf_event_open(&l->attr, cpu);
	if (fd < 0) {
		snprintf(err, errlen, "cannot open the perf event on CPU %d: %s", cpu,
			 strerror(errno));
		return -1;
	}
	l->fds[cpu] = (int)fd;
	l->links[cpu] = bpf_program__attach_perf_event(l->skel->progs.on_overflow, (int)fd);
	if (!l->links[cpu]) {
		snprintf(err, errlen, "cannot attach to CPU %d: %s", cpu, strerror(errno));
		close(l->fds[cpu]);
		l->fds[cpu] = -1;
		return -1;
	}
	return 0;
}

static void cpu_detach(struct ep_live *l, int cpu)
{
	if (l->links[cpu])
		bpf_link__destroy(l->links[cpu]);
	l->links[cpu] = NULL;
	if (l->fds[cpu] >= 0)
		close(l->fds[cpu]);
	l->fds[cpu] = -1;
}

/* A CPU listed online: its event, one line when it is sampled. One not
 * openable yet is tried again at each look, with one warning, not one a
 * second. */
static void cpu_came_online(struct ep_live *l, int cpu)
{
	char err[256];
	l->cpu_samples[cpu] = 0;
	if (cpu_attach(l, cpu, err, sizeof(err)) != 0) {
		if (l->attach_failures[cpu]++ == 0)
			ep_warn("CPU %d came online but %s; trying again every second", cpu, err);
		return;
	}
	if (l->attach_failures[cpu])
		ep_info("CPU %d came online: sampling it (its perf event opened at try %u)", cpu,
			l->attach_failures[cpu] + 1);
	else
		ep_info("CPU %d came online: sampling it", cpu);
	l->attach_failures[cpu] = 0;
	l->ncpus++;
	l->online[cpu] = 1;
	l->hotplug_changes++;
}

/* CPU hotplug: the kernel does not move a per-CPU event to a CPU that
 * comes online, and one on a CPU gone offline never fires again. Looked at
 * from the poll loop at most once a second: a CPU that came online gets
 * its event, one that went offline loses it, one line each. */
static void rescan_cpus(struct ep_live *l)
{
	uint64_t now = ep_mono_ns();
	if (l->stopped || now - l->last_scan_ns < CPU_RESCAN_NS)
		return;
	l->last_scan_ns = now;
	uint8_t online[MAX_CPUS];
	if (read_online(online) <= 0)
		return; /* unreadable for a moment: keep what there is */
	for (int cpu = 0; cpu < MAX_CPUS; cpu++) {
		if (online[cpu] == l->online[cpu]) {
			if (!online[cpu])
				l->attach_failures[cpu] = 0; /* offline again before it opened */
			continue;
		}
		if (online[cpu]) {
			cpu_came_online(l, cpu);
			continue;
		}
		cpu_detach(l, cpu);
		l->ncpus--;
		ep_info("CPU %d went offline: its event closed", cpu);
		l->online[cpu] = 0;
		l->hotplug_changes++;
	}
}

/* Splits the period into `steps` overflows of a prime step: the BPF
 * program's countdown then draws how many overflows make each sample's
 * period (see bpf/edgeprof.bpf.c). */
static void plan_period(struct ep_live *l, uint64_t period, uint64_t jitter, unsigned steps)
{
	l->rearm = steps <= 1;
	if (l->rearm) {
		l->period = period ? period : 1;
		l->jitter = jitter < l->period ? jitter : l->period - 1;
		l->step = l->period;
		l->steps = 1;
		l->steps_jitter = 0;
		return;
	}
	if (steps == 0 || steps > period)
		steps = period < 2 ? 1 : (unsigned)(period < steps ? period : steps);
	uint64_t step = period / steps;
	while (step > 2 && !ep_is_prime(step))
		step--;
	l->step = step ? step : 1;
	l->steps = (uint32_t)((period + l->step / 2) / l->step);
	l->steps_jitter = (uint32_t)((jitter + l->step / 2) / l->step);
	if (l->steps_jitter >= l->steps)
		l->steps_jitter = l->steps - 1;
}

void ep_live_period(const struct ep_live *l, uint64_t *mean, uint64_t *jitter)
{
	if (l->rearm) {
		*mean = l->period;
		*jitter = l->jitter;
		return;
	}
	*mean = (uint64_t)l->steps * l->step;
	*jitter = (uint64_t)l->steps_jitter * l->step;
}

/* The branch-stack event chosen for this PMU, user-mode stacks. */
static void branch_attr(struct perf_event_attr *a, const struct ep_live_config *cfg,
			const struct ep_branch_event *ev, uint64_t step)
{
	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->type = ev->type;
	a->config = ev->config;
	a->precise_ip = ev->precise_ip;
	a->sample_period = step;
	a->sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_BRANCH_STACK;
	/* call-graph mode: the hardware filters the stack to calls and
	 * returns, so the same N entries reach N calls back instead of N
	 * branches (Intel LBR_SELECT, AMD and Arm branch filters) */
	a->branch_sample_type =
	    (cfg->calls_only ? PERF_SAMPLE_BRANCH_ANY_CALL | PERF_SAMPLE_BRANCH_ANY_RETURN
			     : PERF_SAMPLE_BRANCH_ANY) |
	    (cfg->want_kernel ? PERF_SAMPLE_BRANCH_KERNEL : 0) | PERF_SAMPLE_BRANCH_USER;
	a->exclude_kernel = !cfg->want_kernel;
	a->exclude_hv = 1;
}

/* cpu-clock counts nanoseconds: the step is a time */
static void clock_attr(struct perf_event_attr *a, uint64_t step_ns)
{
	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->type = PERF_TYPE_SOFTWARE;
	a->config = PERF_COUNT_SW_CPU_CLOCK;
	a->sample_period = step_ns;
	a->sample_type = PERF_SAMPLE_IP;
}

static int on_proc_record(void *ctx, void *data, size_t size)
{
	struct ep_live *l = ctx;
	const struct ep_proc_record *rec = data;
	if (size < sizeof(struct ep_proc_record))
		return 0;
	l->proc_events++;
	if (rec->type == EP_PROC_MMAP) {
		l->mmap_events++;
		uint64_t *at = ep_u64map_upsert(&l->mmap_pending, rec->pid, NULL);
		if (at) {
			if (rec->time_ns > *at)
				*at = rec->time_ns;
			return 0;
		}
		/* out of memory: handed on now rather than lost */
	} else if (rec->type == EP_PROC_EXIT || rec->type == EP_PROC_EXEC) {
		/* a new program's maps are read whole at exec; a gone process
		 * needs none */
		ep_u64map_remove(&l->mmap_pending, rec->pid);
	}
	if (l->proc_cb)
		l->proc_cb(l->proc_ctx, rec);
	return 0;
}

void ep_live_on_process_events(struct ep_live *l, ep_live_proc_cb cb, void *ctx)
{
	l->proc_cb = cb;
	l->proc_ctx = ctx;
}

/* Records carry only the branch entries there are: copied into a whole
 * record, checked against their size. */
static int on_record(void *ctx, void *data, size_t size)
{
	struct ep_live *l = ctx;
	const size_t head = offsetof(struct ep_sample_record, entries);
	if (size < head || size > sizeof(l->rec))
		return 0;
	memcpy(&l->rec, data, size);
	if (l->rec.nr_entries > (size - head) / sizeof(struct ep_branch_entry))
		return 0;
	l->received++;
	if (l->rec.cpu < MAX_CPUS)
		l->cpu_samples[l->rec.cpu]++;
	if (l->mmap_pending.count) {
		uint64_t *at = ep_u64map_get(&l->mmap_pending, l->rec.pid);
		if (at && l->rec.time_ns >= *at) {
			struct ep_proc_record m = {
			    .type = EP_PROC_MMAP, .pid = l->rec.pid, .time_ns = *at};
			ep_u64map_remove(&l->mmap_pending, l->rec.pid);
			l->mmap_delivered++;
			if (l->proc_cb)
				l->proc_cb(l->proc_ctx, &m);
		}
	}
	if (l->cb)
		l->cb(l->cb_ctx, &l->rec);
	return 0;
}

/* Ring buffer bytes: record size x samples per second x drain interval,
 * four times over for bursts, a power of two as the kernel wants. */
static uint32_t ring_size(unsigned ncpus, double per_cpu_rate, unsigned drain_ms,
			  bool branch_stacks)
{
	/* the bytes a record really takes (the program copies out only the
	 * entries read; 32, Intel's LBR, when stacks come) plus the ring's 8-byte
	 * header: the whole struct (1.6 KB) would make an IP-only ring 20 times
	 * too big, and every page of it is mapped twice into the agent */
	double record = offsetof(struct ep_sample_record, entries) + 8 +
			(branch_stacks ? 32 * sizeof(struct ep_branch_entry) : 0);
	double bytes = record * per_cpu_rate * ncpus * drain_ms / 1000.0 * 4;
	/* at least 1 MiB: the first drains are slow (each process's maps and
	 * binaries are read at its first sample) and the ring holds what comes
	 * meanwhile: with 256 KiB a 5 s whole-machine run at 4 kHz per CPU lost
	 * 10-25% of its samples here, with 1 MiB none */
	uint32_t size = 1u << 20;
	while (size < bytes && size < EP_RING_MAX_KIB * 1024u)
		size <<= 1;
	return size;
}

/* The online CPUs at start: a kernel hiding sysfs gets CPU 0 at least. */
static void read_initial_cpus(struct ep_live *l)
{
	int n = read_online(l->online);
	if (n <= 0) {
		memset(l->online, 0, sizeof(l->online));
		l->online[0] = 1;
		n = 1;
	}
	l->ncpus = (unsigned)n;
}

static int first_online_cpu(const struct ep_live *l)
{
	for (int c = 0; c < MAX_CPUS; c++)
		if (l->online[c])
			return c;
	return 0;
}

/* The branch-stack event at the most precise level the PMU takes (like
 * perf's :pp falling back to :p), tried on one CPU. 0 with l->attr set, or
 * the errno that refused it. */
static int try_branch_stacks(struct ep_live *l, const struct ep_live_config *cfg)
{
	long fd;
	for (int precise = l->event.precise_ip;; precise--) {
		l->event.precise_ip = (uint8_t)precise;
		branch_attr(&l->attr, cfg, &l->event, l->step);
		fd = perf_event_open(&l->attr, first_online_cpu(l));
		if (fd >= 0 || precise == 0 || (errno != EINVAL && errno != EOPNOTSUPP))
			break;
	}
	if (fd < 0)
		return errno;
	close((int)fd);
	return 0;
}

/* Without a branch stack: IPs on cpu-clock at cfg->ip_hz, the period's
 * jitter scaled to nanoseconds. */
static void plan_ip_sampling(struct ep_live *l, const struct ep_live_config *cfg)
{
	uint64_t period_ns = 1000000000ULL / (cfg->ip_hz ? cfg->ip_hz : 1);
	uint64_t jitter_ns = cfg->jitter ? cfg->jitter * period_ns / cfg->period : 0;
	plan_period(l, period_ns, jitter_ns, cfg->steps);
	clock_attr(&l->attr, l->step);
}

/* Interrupts per second per CPU the kernel allows (it may lower this
 * itself when they take too long; this is the value at start). */
static uint64_t kernel_max_sample_rate(void)
{
	unsigned long long v = 0;
	FILE *f = fopen("/proc/sys/kernel/perf_event_max_sample_rate", "r");
	if (!f || fscanf(f, "%llu", &v) != 1 || v == 0)
		v = EP_KERNEL_SAMPLE_RATE_DEFAULT;
	if (f)
		fclose(f);
	return v;
}

uint64_t ep_live_period_min(void)
{
	return ep_period_min(kernel_max_sample_rate());
}

/* What was asked against what the kernel allows (common/util/
 * sampling_limits.h): the branch period, the IP rate and the interrupts a
 * countdown of steps takes, whichever mode runs. 0, or -1 with the reason. */
static int check_rates(const struct ep_live *l, const struct ep_live_config *cfg, char *err,
		       size_t errlen)
{
	uint64_t max = kernel_max_sample_rate(), min_period = ep_period_min(max);
	const char *limit = "the kernel's perf_event_max_sample_rate";
	if (cfg->period < min_period || cfg->period > EP_PERIOD_MAX) {
		snprintf(err, errlen,
			 "period %llu: expected %llu to %llu events between samples (below %llu "
			 "a CPU retiring 2e9 branches per second takes more sample interrupts than "
			 "%s, %llu per second per CPU)",
			 (unsigned long long)cfg->period, (unsigned long long)min_period,
			 (unsigned long long)EP_PERIOD_MAX, (unsigned long long)min_period, limit,
			 (unsigned long long)max);
		return -1;
	}
	if (cfg->ip_hz > max) {
		snprintf(err, errlen, "--ip-hz %u: over %s (%llu per second per CPU)", cfg->ip_hz,
			 limit, (unsigned long long)max);
		return -1;
	}
	/* a countdown of K steps interrupts K times per sample */
	uint64_t per_s = l->branch_stacks ? (EP_CPU_BRANCHES_PER_S_MAX + l->step - 1) / l->step
					  : 1000000000ULL / l->step;
	if (l->steps > 1 && per_s > max) {
		snprintf(err, errlen,
			 "--steps %u: %llu interrupts per second per CPU (one per %llu %s), over "
			 "%s (%llu)",
			 l->steps, (unsigned long long)per_s, (unsigned long long)l->step,
			 l->branch_stacks ? "branches" : "ns", limit, (unsigned long long)max);
		return -1;
	}
	return 0;
}

/* Which event: the branch stack where the PMU has one, else cpu-clock; the
 * period split into steps, and the operators' line saying so. */
static int choose_event(struct ep_live *l, const struct ep_live_config *cfg, char *err,
			size_t errlen)
{
	enum ep_pmu_vendor vendor = ep_pmu_vendor_detect();
	if (ep_pmu_branch_event(vendor, cfg->event ? cfg->event : "branches", &l->event, err,
				errlen) != 0)
		return -1;
	plan_period(l, cfg->period, cfg->jitter, cfg->steps);
	int branch_errno = try_branch_stacks(l, cfg);
	l->branch_stacks = branch_errno == 0;
	if (!l->branch_stacks)
		plan_ip_sampling(l, cfg);
	if (check_rates(l, cfg, err, errlen) != 0)
		return -1;
	uint64_t mean, jitter;
	ep_live_period(l, &mean, &jitter);
	char how[96];
	if (l->rearm)
		snprintf(how, sizeof(how),
			 "one overflow per sample, the period drawn again every %u ms",
			 cfg->drain_ms);
	else
		snprintf(how, sizeof(how), "%u overflows of %llu per sample", l->steps,
			 (unsigned long long)l->step);
	if (l->branch_stacks)
		snprintf(l->mode, sizeof(l->mode),
			 "branch stacks on %s (%s PMU, precise_ip %u), every %llu +- %llu events "
			 "(%s), on %u CPUs",
			 l->event.name, ep_pmu_vendor_name(vendor), l->event.precise_ip,
			 (unsigned long long)mean, (unsigned long long)jitter, how, l->ncpus);
	else
		snprintf(
		    l->mode, sizeof(l->mode),
		    "no branch-stack PMU (%s; event %s, %s CPU): sampling IPs on cpu-clock every "
		    "%llu +- %llu ns (%s) on %u CPUs; %s",
		    strerror(branch_errno), l->event.name, ep_pmu_vendor_name(vendor),
		    (unsigned long long)mean, (unsigned long long)jitter, how, l->ncpus,
		    cfg->calls_only ? "--mode calls needs a branch stack: IP-only profile"
				    : "the profile is IP-only");
	return 0;
}

/* The BPF program with its settings and its samples ring sized. */
static int load_program(struct ep_live *l, const struct ep_live_config *cfg, char *err,
			size_t errlen)
{
	l->skel = edgeprof_bpf__open();
	if (!l->skel) {
		snprintf(err, errlen, "cannot open the BPF program: %s", strerror(errno));
		return -1;
	}
	l->skel->rodata->agent_tgid = (uint32_t)getpid();
	l->skel->rodata->filter_pids = cfg->npids > 0;
	l->skel->rodata->ncgroups = (uint32_t)cfg->ncgroups;
	l->skel->rodata->want_kernel = cfg->want_kernel;
	l->skel->rodata->calls_only = cfg->calls_only && l->branch_stacks;
	l->skel->rodata->steps = l->steps;
	l->skel->rodata->steps_jitter = l->steps_jitter;
	double rate = l->branch_stacks ? 2e9 / (double)(cfg->period ? cfg->period : 1)
				       : (double)(cfg->ip_hz ? cfg->ip_hz : 1);
	uint32_t ring =
	    ring_size(l->ncpus, rate, cfg->drain_ms ? cfg->drain_ms : 100, l->branch_stacks);
	if (cfg->ring_kib) {
		/* the kernel wants a power of two of at least a page */
		ring = 4096;
		while (ring < cfg->ring_kib * 1024u && ring < EP_RING_MAX_KIB * 1024u)
			ring <<= 1;
	}
	bpf_map__set_max_entries(l->skel->maps.samples, ring);
	if (edgeprof_bpf__load(l->skel) != 0) {
		snprintf(err, errlen,
			 "cannot load the BPF program (verifier or kernel refused it): %s",
			 strerror(errno));
		return -1;
	}
	return 0;
}

/* The pids and cgroups asked for, into the program's maps. */
static int set_targets(struct ep_live *l, const struct ep_live_config *cfg, char *err,
		       size_t errlen)
{
	for (size_t i = 0; i < cfg->npids; i++) {
		uint8_t one = 1;
		bpf_map_update_elem(bpf_map__fd(l->skel->maps.target_pids), &cfg->pids[i], &one,
				    BPF_ANY);
	}
	for (size_t i = 0; i < cfg->ncgroups; i++) {
		int cg = open(cfg->cgroups[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		uint32_t key = (uint32_t)i;
		if (cg < 0 || bpf_map_update_elem(bpf_map__fd(l->skel->maps.target_cgroups), &key,
						  &cg, BPF_ANY)) {
			snprintf(err, errlen, "%s: not a cgroup v2 directory we can use: %s",
				 cfg->cgroups[i], strerror(errno));
			if (cg >= 0)
				close(cg);
			return -1;
		}
		close(cg);
	}
	return 0;
}

static int attach_cpus(struct ep_live *l, char *err, size_t errlen)
{
	for (int cpu = 0; cpu < MAX_CPUS; cpu++)
		if (l->online[cpu] && cpu_attach(l, cpu, err, errlen) != 0)
			return -1;
	l->last_scan_ns = ep_mono_ns();
	return 0;
}

/* exec, fork, exit, and with cfg->watch_mmaps executable mmaps. */
static int attach_process_probes(struct ep_live *l, const struct ep_live_config *cfg, char *err,
				 size_t errlen)
{
	struct bpf_program *proc_progs[4] = {l->skel->progs.on_exec, l->skel->progs.on_fork,
					     l->skel->progs.on_exit, l->skel->progs.on_mmap};
	/* the mmap probe runs on every system call of the machine: measured
	 * here (bench/run.sh, mmap_probe_ns_per_syscall) at ~0.7 us of BPF per
	 * call and several times a cheap call's cost, so it is opt-in; without
	 * it a library mapped later is found by the once-a-second maps re-read */
	int nprogs = cfg->watch_mmaps ? 4 : 3;
	for (int i = 0; i < nprogs; i++) {
		l->proc_links[i] = bpf_program__attach(proc_progs[i]);
		if (!l->proc_links[i] && i == 3) {
			/* still usable: unresolved addresses make the agent re-read */
			ep_warn("cannot attach to the sys_enter tracepoint (%s): libraries mapped "
				"later are found by a re-read of /proc/PID/maps at most once a "
				"second",
				strerror(errno));
			continue;
		}
		if (!l->proc_links[i]) {
			snprintf(err, errlen, "cannot attach to the %s tracepoint: %s",
				 bpf_program__name(proc_progs[i]), strerror(errno));
			return -1;
		}
	}
	return 0;
}

/* Both rings behind one epoll: the program wakes the agent only for an
 * exec or a samples ring past half full; otherwise it sleeps until the next
 * drain. */
static int open_ring_buffers(struct ep_live *l, char *err, size_t errlen)
{
	l->rb = ring_buffer__new(bpf_map__fd(l->skel->maps.samples), on_record, l, NULL);
	l->procs = ring_buffer__new(bpf_map__fd(l->skel->maps.procs), on_proc_record, l, NULL);
	l->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (!l->rb || !l->procs || l->epoll_fd < 0) {
		snprintf(err, errlen, "cannot map the ring buffers: %s", strerror(errno));
		return -1;
	}
	/* edge-triggered on the maps themselves: a ring is readable whenever it
	 * holds data, so level-triggered waits would return at once while
	 * samples trickle in; only the kernel's wake-ups should end a wait */
	struct epoll_event rb_ev = {.events = EPOLLIN | EPOLLET, .data.u32 = 0},
			   procs_ev = {.events = EPOLLIN | EPOLLET, .data.u32 = 1};
	if (epoll_ctl(l->epoll_fd, EPOLL_CTL_ADD, bpf_map__fd(l->skel->maps.samples), &rb_ev) !=
		0 ||
	    epoll_ctl(l->epoll_fd, EPOLL_CTL_ADD, bpf_map__fd(l->skel->maps.procs), &procs_ev) !=
		0) {
		snprintf(err, errlen, "cannot wait on the ring buffers: %s", strerror(errno));
		return -1;
	}
	return 0;
}

struct ep_live *ep_live_open(const struct ep_live_config *cfg, char *err, size_t errlen)
{
	if (check_capabilities(err, errlen) != 0)
		return NULL;
	struct ep_live *l = calloc(1, sizeof(*l));
	if (!l) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	for (unsigned i = 0; i < MAX_CPUS; i++)
		l->fds[i] = -1;
	l->epoll_fd = -1;
	l->rng = ep_unix_ns() ^ ((uint64_t)getpid() << 32) ^ 0x9e3779b97f4a7c15ULL;
	l->drain_ns = (uint64_t)(cfg->drain_ms ? cfg->drain_ms : 200) * 1000000ULL;
	read_initial_cpus(l);
	if (choose_event(l, cfg, err, errlen) != 0 || load_program(l, cfg, err, errlen) != 0 ||
	    set_targets(l, cfg, err, errlen) != 0 || attach_cpus(l, err, errlen) != 0 ||
	    attach_process_probes(l, cfg, err, errlen) != 0 ||
	    open_ring_buffers(l, err, errlen) != 0) {
		ep_live_close(l);
		return NULL;
	}
	return l;
}

void ep_live_stop(struct ep_live *l)
{
	for (int i = 0; i < 4; i++) {
		if (l->proc_links[i])
			bpf_link__destroy(l->proc_links[i]);
		l->proc_links[i] = NULL;
	}
	for (int cpu = 0; cpu < MAX_CPUS; cpu++)
		cpu_detach(l, cpu);
	l->stopped = true;
}

void ep_live_close(struct ep_live *l)
{
	if (!l)
		return;
	if (l->rb && l->procs)
		ep_info("executable mmaps: %llu events, %llu maps re-reads (one per process's next "
			"sample), %llu still pending",
			(unsigned long long)l->mmap_events, (unsigned long long)l->mmap_delivered,
			(unsigned long long)l->mmap_pending.count);
	if (l->rb && l->procs) {
		/* per CPU, so a CPU that came back is seen sampled again */
		char line[2048];
		size_t len = 0;
		for (int cpu = 0; cpu < MAX_CPUS && len < sizeof(line) - 32; cpu++)
			if (l->online[cpu])
				len +=
				    (size_t)snprintf(line + len, sizeof(line) - len, " %d:%llu",
						     cpu, (unsigned long long)l->cpu_samples[cpu]);
		line[len] = '\0';
		ep_info("samples per online CPU (since it came online):%s; %llu CPU hotplug "
			"changes",
			line, (unsigned long long)l->hotplug_changes);
	}
	ring_buffer__free(l->rb);
	ring_buffer__free(l->procs);
	if (l->epoll_fd >= 0)
		close(l->epoll_fd);
	ep_u64map_free(&l->mmap_pending);
	ep_live_stop(l);
	edgeprof_bpf__destroy(l->skel);
	free(l);
}

const char *ep_live_mode(const struct ep_live *l)
{
	return l->mode;
}
const char *ep_live_event(const struct ep_live *l)
{
	return l->branch_stacks ? l->event.name : "cpu-clock";
}

bool ep_live_counts_all_branches(const struct ep_live *l)
{
	return l->branch_stacks && l->event.counts_all;
}

bool ep_live_counts_taken_only(const struct ep_live *l)
{
	return l->branch_stacks && l->event.taken_only;
}

bool ep_live_has_branch_stacks(const struct ep_live *l)
{
	return l->branch_stacks;
}
unsigned ep_live_cpus(const struct ep_live *l)
{
	return l->ncpus;
}

/* Every CPU's event gets a new random period, counted from now
 * (PERF_EVENT_IOC_PERIOD restarts the count): the drains come at moments
 * unrelated to the program, so each period starts at a new phase. Once per
 * drain interval, not per wake-up: every exec wakes the agent, and each
 * re-arm is an interrupt of every CPU. */
static void rearm_periods(struct ep_live *l)
{
	uint64_t now = ep_mono_ns();
	if (!l->rearm || !l->jitter || l->stopped || now - l->last_rearm_ns < l->drain_ns)
		return;
	l->last_rearm_ns = now;
	for (int cpu = 0; cpu < MAX_CPUS; cpu++) {
		if (l->fds[cpu] < 0)
			continue;
		uint64_t period = draw_period(l);
		if (ioctl(l->fds[cpu], PERF_EVENT_IOC_PERIOD, &period) == 0) {
			note_period(l, cpu, period);
			l->rearms++;
		} else if (l->rearm_failures++ == 0) {
			ep_warn(
			    "cannot re-arm the perf event on CPU %d (%s): its period stays %llu "
			    "until it can",
			    cpu, strerror(errno), (unsigned long long)l->attr.sample_period);
		}
	}
}

int ep_live_poll(struct ep_live *l, int timeout_ms, ep_live_sample_cb cb, void *ctx)
{
	l->cb = cb;
	l->cb_ctx = ctx;
	struct epoll_event ev[2];
	int woken = timeout_ms > 0 ? epoll_wait(l->epoll_fd, ev, 2, timeout_ms) : 0;
	if (woken < 0 && errno != EINTR)
		return -1;
	l->polls++;
	if (woken > 0)
		l->early_wakeups++;
	/* the process events' ring wakes the agent only for an exec */
	for (int i = 0; i < woken; i++)
		if (ev[i].data.u32 == 1) {
			l->exec_wakeups++;
			break;
		}
	/* process events first: a sample taken after an exec or an mmap then
	 * finds it known, whichever buffer the kernel filled first */
	int before = ring_buffer__consume(l->procs);
	int n = ring_buffer__consume(l->rb);
	int after = ring_buffer__consume(l->procs);
	rearm_periods(l);
	rescan_cpus(l);
	if (n < 0 || before < 0 || after < 0)
		return -1;
	return n + before + after;
}

void ep_live_counters(const struct ep_live *l, struct ep_live_counters *out)
{
	memset(out, 0, sizeof(*out));
	int ncpus = libbpf_num_possible_cpus();
	uint64_t *values = calloc(ncpus > 0 ? (size_t)ncpus : 1, sizeof(*values));
	uint64_t sums[C_COUNT] = {0};
	for (uint32_t k = 0; values && k < C_COUNT; k++) {
		if (bpf_map_lookup_elem(bpf_map__fd(l->skel->maps.counters), &k, values) != 0)
			continue;
		for (int c = 0; c < ncpus; c++)
			sums[k] += values[c];
	}
	free(values);
	out->seen = sums[C_SEEN];
	out->sent = sums[C_SENT];
	out->filtered = sums[C_FILTERED];
	out->kernel = sums[C_KERNEL];
	out->reserve_failed = sums[C_RESERVE_FAILED];
	out->branch_read_failed = sums[C_BRANCH_FAILED];
	out->between_samples = sums[C_BETWEEN];
	out->proc_reserve_failed = sums[C_PROC_RESERVE_FAILED];
	out->mmap_exec = sums[C_MMAP_EXEC];
	out->mmap_events = l->mmap_events;
	out->mmap_rereads = l->mmap_delivered;
	out->proc_events = l->proc_events;
	out->received = l->received;
	out->drains = l->polls;
	out->early_wakeups = l->early_wakeups;
	out->exec_wakeups = l->exec_wakeups;
	out->rearms = l->rearms;
}
