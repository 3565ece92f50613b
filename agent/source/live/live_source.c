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
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent/source/live/event_set.h"
#include "agent/source/live/pmu_event.h"
#include "common/util/log.h"
#include "common/util/sampling_limits.h"
#include "edgeprof_bpf.skel.h"

#define MAX_CPUS EP_LIVE_MAX_CPUS
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
	C_PROC_RESERVE_FAILED,
	C_MMAP_EXEC,
	C_CYCLES_SEEN,
	C_CYCLES_SENT,
	C_CYCLES_FILTERED,
	C_CYCLES_KERNEL,
	C_CYCLES_RESERVE_FAILED,
	C_FIRST_SAMPLES,
	C_STACK_FAILED,
	C_COUNT
};

struct ep_live {
	struct edgeprof_bpf *skel;
	struct ring_buffer *rb;	       /* samples */
	struct ring_buffer *procs;     /* process events, drained before and after the samples */
	struct ring_buffer *cycles_rb; /* --cycles: the cycles event's IP samples */
	/* the branch event (cpu-clock without a branch-stack PMU), and with
	 * --cycles the cycles event, on every online CPU */
	struct ep_event_set branch, cyc;
	bool cycles_on; /* cyc is opened on the CPUs that come online */
	struct ep_live_cycles cycles;
	char cycles_mode[400];
	ep_live_cycles_cb cycles_cb;
	void *cycles_ctx;
	uint64_t cycles_received, cycles_held_back;
	uint8_t online[MAX_CPUS]; /* as last read from sysfs */
	uint64_t last_scan_ns;
	bool stopped;
	/* samples per CPU since it came online (or since the start) */
	uint64_t cpu_samples[MAX_CPUS];
	uint64_t hotplug_changes;
	/* per CPU listed online whose event could not be opened yet: the
	 * looks that failed (sysfs lists a CPU online before perf's hotplug
	 * callback makes it usable, for seconds on a loaded machine) */
	uint32_t attach_failures[MAX_CPUS];
	struct bpf_link *proc_links[5];
	ep_live_proc_cb proc_cb;
	void *proc_ctx;
	uint64_t proc_events;
	/* pid -> time of its latest executable mmap not yet handed on: handed
	 * to proc_cb just before the first sample of that pid taken after it
	 * (the event comes before the mapping exists, and a process mapping
	 * 500 libraries at start gets one re-read, not 500) */
	uint64_t mmap_events;
	unsigned ncpus;
	bool branch_stacks;
	struct ep_branch_event event;
	uint64_t rng; /* the periods' draws (event_set.h) */
	int epoll_fd; /* every ring: the agent sleeps until a drain is due */
	uint64_t polls, early_wakeups;
	uint64_t drain_ns, last_rearm_ns; /* periods are drawn once per drain interval */
	char mode[480];
	uint64_t received;
	struct ep_sample_record rec;
	ep_live_sample_cb cb;
	void *cb_ctx;
};

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

/* Opens the sampling events on one CPU and attaches the programs to them:
 * both or neither. */
static int cpu_attach(struct ep_live *l, int cpu, char *err, size_t errlen)
{
	if (ep_event_set_attach(&l->branch, cpu, &l->rng, err, errlen) != 0)
		return -1;
	if (l->cycles_on && ep_event_set_attach(&l->cyc, cpu, &l->rng, err, errlen) != 0) {
		ep_event_set_detach(&l->branch, cpu);
		return -1;
	}
	return 0;
}

static void cpu_detach(struct ep_live *l, int cpu)
{
	ep_event_set_detach(&l->branch, cpu);
	ep_event_set_detach(&l->cyc, cpu);
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

void ep_live_period(const struct ep_live *l, uint64_t *mean, uint64_t *jitter)
{
	*mean = l->branch.plan.period;
	*jitter = l->branch.plan.jitter;
}

/* cpu-clock counts nanoseconds: the period is a time */
static void clock_attr(struct perf_event_attr *a, uint64_t period_ns)
{
	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->type = PERF_TYPE_SOFTWARE;
	a->config = PERF_COUNT_SW_CPU_CLOCK;
	a->sample_period = period_ns;
	a->sample_type = PERF_SAMPLE_IP;
}

/* --cycles: the CPU's cycles, user mode unless --kernel, IPs only */
static void cycles_attr(struct perf_event_attr *a, const struct ep_live_config *cfg,
			uint64_t period)
{
	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->type = PERF_TYPE_HARDWARE;
	a->config = PERF_COUNT_HW_CPU_CYCLES;
	a->sample_period = period;
	a->sample_type = PERF_SAMPLE_IP;
	a->exclude_kernel = !cfg->want_kernel;
	a->exclude_hv = 1;
}

static int on_proc_record(void *ctx, void *data, size_t size)
{
	struct ep_live *l = ctx;
	const struct ep_proc_record *rec = data;
	if (size < sizeof(struct ep_proc_record))
		return 0;
	l->proc_events++;
	l->mmap_events += rec->type == EP_PROC_MMAP;
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
/* --cycles beside branch stacks: the first record with entries says
 * whether the hardware stamps them with cycles (Intel LBR since Skylake
 * does; AMD and older Intel do not). Where it does, those are the cycles
 * (SPEC: they are exact per range) and the cycles event is closed. */
static void decide_cycles(struct ep_live *l, const struct ep_sample_record *rec)
{
	bool stamped = false;
	for (uint32_t i = 0; i < rec->nr_entries && !stamped; i++)
		stamped = (rec->entries[i].flags & EP_BR_CYCLES_MASK) != 0;
	l->cycles.pending = false;
	if (stamped) {
		l->cycles.source = EP_CYCLES_BRANCH_RECORDS;
		l->cycles_on = false;
		ep_event_set_detach_all(&l->cyc);
		ep_info("--cycles: the branch records carry cycles (%s): the profile's cycles are "
			"theirs; the cycles event is closed (%llu of its samples, drained before "
			"this was known, left unused)",
			l->event.name, (unsigned long long)l->cycles_held_back);
	} else {
		ep_info("--cycles: the branch records carry no cycles: the profile's cycles come "
			"from the cycles event's IP samples (%llu drained before this was known "
			"left unused)",
			(unsigned long long)l->cycles_held_back);
	}
}

static int on_record(void *ctx, void *data, size_t size)
{
	struct ep_live *l = ctx;
	const size_t head = offsetof(struct ep_sample_record, entries);
	if (size < head || size > sizeof(l->rec))
		return 0;
	memcpy(&l->rec, data, size);
	if (l->rec.nr_entries > (size - head) / sizeof(struct ep_branch_entry))
		return 0;
	if (!(l->rec.flags & EP_SAMPLE_HAS_STACK) || l->rec.nr_entries ||
	    l->rec.nr_stack > (size - head) / sizeof(uint64_t))
		l->rec.flags &= ~EP_SAMPLE_HAS_STACK, l->rec.nr_stack = 0;
	l->received++;
	if (l->rec.cpu < MAX_CPUS)
		l->cpu_samples[l->rec.cpu]++;
	if (l->cycles.pending && l->rec.nr_entries > 0)
		decide_cycles(l, &l->rec);
	if (l->cb)
		l->cb(l->cb_ctx, &l->rec);
	return 0;
}

static int on_cycles_record(void *ctx, void *data, size_t size)
{
	struct ep_live *l = ctx;
	struct ep_cycles_record rec;
	if (size < sizeof(rec))
		return 0;
	memcpy(&rec, data, sizeof(rec));
	l->cycles_received++;
	if (l->cycles.pending || l->cycles.source == EP_CYCLES_BRANCH_RECORDS) {
		l->cycles_held_back++;
		return 0;
	}
	if (l->cycles_cb)
		l->cycles_cb(l->cycles_ctx, &rec);
	return 0;
}

void ep_live_on_cycles(struct ep_live *l, ep_live_cycles_cb cb, void *ctx)
{
	l->cycles_cb = cb;
	l->cycles_ctx = ctx;
}

/* Ring buffer bytes (SPEC, "Buffers per record type"): record size x
 * records per second x drain interval, four times over for bursts, a power
 * of two as the kernel wants, at least least_bytes. record is the bytes a
 * record really takes, with the ring's 8-byte header: every page of a ring
 * is mapped twice into the agent. */
static uint32_t ring_size(double record, unsigned ncpus, double per_cpu_rate, unsigned drain_ms,
			  uint32_t least_bytes)
{
	double bytes = (record + 8) * per_cpu_rate * ncpus * drain_ms / 1000.0 * 4;
	uint32_t size = least_bytes;
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
		ep_pmu_branch_attr(&l->branch.attr, &l->event, l->branch.plan.period,
				   cfg->calls_only, cfg->want_kernel);
		fd = perf_event_open(&l->branch.attr, first_online_cpu(l));
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
	ep_period_plan_make(&l->branch.plan, period_ns, jitter_ns);
	clock_attr(&l->branch.attr, l->branch.plan.period);
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

/* A period below MIN lets one CPU at CPU_RATE per second take more sample
 * interrupts than the kernel allows (MAX_RATE per second per CPU). */
static int check_period(const char *option, uint64_t period, uint64_t min, const char *units,
			const char *cpu_rate, uint64_t max_rate, char *err, size_t errlen)
{
	if (period >= min && period <= EP_PERIOD_MAX)
		return 0;
	snprintf(err, errlen,
		 "%s %llu: expected %llu to %llu %s between samples (below %llu a CPU %s per "
		 "second takes more sample interrupts than the kernel's "
		 "perf_event_max_sample_rate, %llu per second per CPU)",
		 option, (unsigned long long)period, (unsigned long long)min,
		 (unsigned long long)EP_PERIOD_MAX, units, (unsigned long long)min, cpu_rate,
		 (unsigned long long)max_rate);
	return -1;
}

/* What was asked against what the kernel allows (common/util/
 * sampling_limits.h): the branch period and the IP rate. 0, or -1 with the
 * reason. */
static int check_rates(const struct ep_live_config *cfg, char *err, size_t errlen)
{
	uint64_t max = kernel_max_sample_rate();
	const char *limit = "the kernel's perf_event_max_sample_rate";
	if (check_period("period", cfg->period, ep_period_min(max), "events",
			 "retiring 2e9 branches", max, err, errlen) < 0)
		return -1;
	if (cfg->ip_hz > max) {
		snprintf(err, errlen, "--ip-hz %u: over %s (%llu per second per CPU)", cfg->ip_hz,
			 limit, (unsigned long long)max);
		return -1;
	}
	if (cfg->cycles &&
	    check_period("--cycles-period", cfg->cycles_period, ep_cycles_period_min(max), "cycles",
			 "running 6e9 cycles", max, err, errlen) < 0)
		return -1;
	return 0;
}

/* Which event: the branch stack where the PMU has one, else cpu-clock; its
 * period, and the operators' line saying so. */
static int choose_event(struct ep_live *l, const struct ep_live_config *cfg, char *err,
			size_t errlen)
{
	enum ep_pmu_vendor vendor = ep_pmu_vendor_detect();
	if (ep_pmu_branch_event(vendor, cfg->event ? cfg->event : "branches", &l->event, err,
				errlen) != 0)
		return -1;
	ep_period_plan_make(&l->branch.plan, cfg->period, cfg->jitter);
	int branch_errno = try_branch_stacks(l, cfg);
	l->branch_stacks = branch_errno == 0;
	if (!l->branch_stacks)
		plan_ip_sampling(l, cfg);
	if (check_rates(cfg, err, errlen) != 0)
		return -1;
	uint64_t mean, jitter;
	ep_live_period(l, &mean, &jitter);
	char how[96];
	snprintf(how, sizeof(how), "one overflow per sample, the period drawn again every %u ms",
		 cfg->drain_ms);
	if (l->branch_stacks)
		snprintf(l->mode, sizeof(l->mode),
			 "branch stacks on %s (%s PMU, precise_ip %u), every %llu +- %llu events "
			 "(%s), on %u CPUs",
			 l->event.name, ep_pmu_vendor_name(vendor), l->event.precise_ip,
			 (unsigned long long)mean, (unsigned long long)jitter, how, l->ncpus);
	else
		snprintf(
		    l->mode, sizeof(l->mode),
		    "no branch-stack PMU (%s; event %s, %s CPU%s%s): sampling IPs on cpu-clock "
		    "every %llu +- %llu ns (%s) on %u CPUs; %s",
		    strerror(branch_errno), l->event.name, ep_pmu_vendor_name(vendor),
		    *ep_pmu_no_branch_stack_hint(vendor, branch_errno) ? "; " : "",
		    ep_pmu_no_branch_stack_hint(vendor, branch_errno), (unsigned long long)mean,
		    (unsigned long long)jitter, how, l->ncpus,
		    cfg->calls_only ? "--mode calls needs a branch stack: IP-only profile"
				    : "the profile is IP-only");
	return 0;
}

/* The CPU's nominal MHz (/proc/cpuinfo), 1000 when it says none: for
 * cpu-clock standing in for the cycles event at the rate asked. */
static unsigned cpu_mhz(void)
{
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[256];
	double mhz = 0;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "cpu MHz : %lf", &mhz) == 1)
			break;
	if (f)
		fclose(f);
	return mhz >= 1 && mhz < 1e5 ? (unsigned)mhz : 1000;
}

/* --cycles: the hardware cycles event where it opens; else cpu-clock at the
 * same rate of samples (period_cycles at the CPU's nominal frequency), its
 * samples nanoseconds: never passed off as cycles. D/P as the branch
 * event's. With branch stacks, their first records decide whether the
 * event is needed at all (decide_cycles). */
static void choose_cycles(struct ep_live *l, const struct ep_live_config *cfg)
{
	if (!cfg->cycles)
		return;
	struct ep_event_set *s = &l->cyc;
	uint64_t period = cfg->cycles_period;
	uint64_t jitter = (uint64_t)((double)period * (double)cfg->jitter /
				     (double)(cfg->period ? cfg->period : 1));
	cycles_attr(&s->attr, cfg, period);
	long fd = perf_event_open(&s->attr, first_online_cpu(l));
	int hw_errno = fd < 0 ? errno : 0;
	if (fd >= 0)
		close((int)fd);
	l->cycles.source = hw_errno ? EP_CYCLES_CPU_CLOCK : EP_CYCLES_EVENT;
	unsigned mhz = cpu_mhz();
	if (hw_errno) {
		period = period * 1000 / mhz;
		jitter = jitter * 1000 / mhz;
	}
	ep_period_plan_make(&s->plan, period, jitter);
	if (hw_errno)
		clock_attr(&s->attr, s->plan.period);
	l->cycles.period = s->plan.period;
	l->cycles.jitter = s->plan.jitter;
	l->cycles.pending = l->branch_stacks;
	l->cycles_on = true;
	if (hw_errno)
		snprintf(
		    l->cycles_mode, sizeof(l->cycles_mode),
		    "--cycles: no hardware cycles event on this machine (%s): cpu-clock stands "
		    "in, an IP sample every %llu +- %llu ns (%llu cycles at %u MHz) on %u CPUs; "
		    "the profile's cycles are nanoseconds of CPU time, not cycles",
		    strerror(hw_errno), (unsigned long long)s->plan.period,
		    (unsigned long long)s->plan.jitter, (unsigned long long)cfg->cycles_period, mhz,
		    l->ncpus);
	else
		snprintf(l->cycles_mode, sizeof(l->cycles_mode),
			 "--cycles: the cycles event, an IP sample every %llu +- %llu cycles on %u "
			 "CPUs%s",
			 (unsigned long long)s->plan.period, (unsigned long long)s->plan.jitter,
			 l->ncpus,
			 l->branch_stacks ? "; where the branch records carry cycles their first "
					    "records say so and the event closes"
					  : "");
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
	/* call stacks stand in for the branch stacks a PMU would give */
	l->skel->rodata->want_stacks = cfg->stacks && !l->branch_stacks;
	double rate = l->branch_stacks ? 2e9 / (double)(cfg->period ? cfg->period : 1)
				       : (double)(cfg->ip_hz ? cfg->ip_hz : 1);
	unsigned drain_ms = cfg->drain_ms ? cfg->drain_ms : 100;
	/* The program copies out only the entries read (the PMU's most: 32
	 * for Intel's LBR, 64 for Arm's BRBE), none without stacks: the whole
	 * struct (1.6 KB) would make an IP-only ring 20 times too big. At least 1 MiB: the first
	 * drains are slow (each process's maps and binaries are read at its first sample) and the
	 * ring holds what comes meanwhile: with 256 KiB a 5 s whole-machine run
	 * at 4 kHz per CPU lost 10-25% of its samples here, with 1 MiB none. */
	double record =
	    offsetof(struct ep_sample_record, entries) +
	    (l->branch_stacks ? l->event.max_entries * sizeof(struct ep_branch_entry) : 0) +
	    /* a typical user stack, not the deepest: 32 frames */
	    (!l->branch_stacks && cfg->stacks ? 32 * sizeof(uint64_t) : 0);
	uint32_t ring = ring_size(record, l->ncpus, rate, drain_ms, 1u << 20);
	if (cfg->ring_kib) {
		/* the kernel wants a power of two of at least a page */
		ring = 4096;
		while (ring < cfg->ring_kib * 1024u && ring < EP_RING_MAX_KIB * 1024u)
			ring <<= 1;
	}
	bpf_map__set_max_entries(l->skel->maps.samples, ring);
	if (l->cycles_on) {
		/* the cycles event's rate: a busy CPU's cycles (or ns) per second
		 * over its period; 256 KiB at least for the slow first drains */
		bool hw = l->cycles.source != EP_CYCLES_CPU_CLOCK;
		double per_s = (hw ? (double)EP_CPU_CYCLES_PER_S_MAX : 1e9) /
			       (double)(l->cycles.period - l->cycles.jitter);
		bpf_map__set_max_entries(l->skel->maps.cycles,
					 ring_size(sizeof(struct ep_cycles_record), l->ncpus, per_s,
						   drain_ms, 256u << 10));
	}
	if (edgeprof_bpf__load(l->skel) != 0) {
		snprintf(err, errlen,
			 "cannot load the BPF program (verifier or kernel refused it): %s",
			 strerror(errno));
		return -1;
	}
	l->branch.prog = l->skel->progs.on_overflow;
	l->branch.periods_fd = bpf_map__fd(l->skel->maps.cpu_period);
	l->cyc.prog = l->skel->progs.on_cycles;
	l->cyc.periods_fd = bpf_map__fd(l->skel->maps.cycles_period);
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
	struct bpf_program *proc_progs[5] = {l->skel->progs.on_exec, l->skel->progs.on_fork,
					     l->skel->progs.on_exit, l->skel->progs.on_cgroup_move,
					     l->skel->progs.on_mmap};
	/* the mmap probe runs on every system call of the machine: measured
	 * here (bench/run.sh, mmap_probe_ns_per_syscall) at ~0.7 us of BPF per
	 * call and several times a cheap call's cost, so it is opt-in; without
	 * it a library mapped later is found by the once-a-second maps re-read */
	int nprogs = cfg->watch_mmaps ? 5 : 4;
	for (int i = 0; i < nprogs; i++) {
		l->proc_links[i] = bpf_program__attach(proc_progs[i]);
		if (!l->proc_links[i] && i == 3) {
			/* still usable: each new program's cgroup is read */
			ep_warn("cannot attach to the cgroup_attach_task tracepoint (%s): every "
				"new program's cgroup is read from /proc",
				strerror(errno));
			continue;
		}
		if (!l->proc_links[i] && i == 4) {
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
			   procs_ev = {.events = EPOLLIN | EPOLLET, .data.u32 = 1},
			   cycles_ev = {.events = EPOLLIN | EPOLLET, .data.u32 = 2};
	if (epoll_ctl(l->epoll_fd, EPOLL_CTL_ADD, bpf_map__fd(l->skel->maps.samples), &rb_ev) !=
		0 ||
	    epoll_ctl(l->epoll_fd, EPOLL_CTL_ADD, bpf_map__fd(l->skel->maps.procs), &procs_ev) !=
		0) {
		snprintf(err, errlen, "cannot wait on the ring buffers: %s", strerror(errno));
		return -1;
	}
	if (!l->cycles_on)
		return 0;
	int fd = bpf_map__fd(l->skel->maps.cycles);
	l->cycles_rb = ring_buffer__new(fd, on_cycles_record, l, NULL);
	if (!l->cycles_rb || epoll_ctl(l->epoll_fd, EPOLL_CTL_ADD, fd, &cycles_ev) != 0) {
		snprintf(err, errlen, "cannot map the cycles ring buffer: %s", strerror(errno));
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
	ep_event_set_init(&l->branch, "perf event");
	ep_event_set_init(&l->cyc, "cycles event");
	l->epoll_fd = -1;
	l->rng = ep_unix_ns() ^ ((uint64_t)getpid() << 32) ^ 0x9e3779b97f4a7c15ULL;
	l->drain_ns = (uint64_t)(cfg->drain_ms ? cfg->drain_ms : 200) * 1000000ULL;
	read_initial_cpus(l);
	if (choose_event(l, cfg, err, errlen) != 0)
		goto fail;
	choose_cycles(l, cfg);
	if (load_program(l, cfg, err, errlen) != 0 || set_targets(l, cfg, err, errlen) != 0 ||
	    attach_cpus(l, err, errlen) != 0 || attach_process_probes(l, cfg, err, errlen) != 0 ||
	    open_ring_buffers(l, err, errlen) != 0)
		goto fail;
	return l;
fail:
	ep_live_close(l);
	return NULL;
}

void ep_live_stop(struct ep_live *l)
{
	for (int i = 0; i < 5; i++) {
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
	ring_buffer__free(l->cycles_rb);
	if (l->epoll_fd >= 0)
		close(l->epoll_fd);
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

bool ep_live_sees_cgroup_moves(const struct ep_live *l)
{
	return l->proc_links[3] != NULL;
}

bool ep_live_has_branch_stacks(const struct ep_live *l)
{
	return l->branch_stacks;
}
unsigned ep_live_cpus(const struct ep_live *l)
{
	return l->ncpus;
}

/* Every CPU's events get new random periods, counted from now
 * (PERF_EVENT_IOC_PERIOD restarts the count): the drains come at moments
 * unrelated to the program, so each period starts at a new phase. Once per
 * drain interval, not per wake-up: every exec wakes the agent, and each
 * re-arm is an interrupt of every CPU. */
static void rearm_periods(struct ep_live *l)
{
	uint64_t now = ep_mono_ns();
	if (l->stopped || now - l->last_rearm_ns < l->drain_ns)
		return;
	l->last_rearm_ns = now;
	ep_event_set_rearm(&l->branch, &l->rng);
	ep_event_set_rearm(&l->cyc, &l->rng);
}

int ep_live_poll(struct ep_live *l, int timeout_ms, ep_live_sample_cb cb, void *ctx)
{
	l->cb = cb;
	l->cb_ctx = ctx;
	struct epoll_event ev[3];
	int woken = timeout_ms > 0 ? epoll_wait(l->epoll_fd, ev, 3, timeout_ms) : 0;
	if (woken < 0 && errno != EINTR)
		return -1;
	l->polls++;
	if (woken > 0)
		l->early_wakeups++;
	/* process events first: a sample taken after an exec or an mmap then
	 * finds it known, whichever buffer the kernel filled first */
	int before = ring_buffer__consume(l->procs);
	int n = ring_buffer__consume(l->rb);
	/* after the branch samples: their first stacks decide whether the
	 * cycles event's samples are used (decide_cycles) */
	int cyc = l->cycles_rb ? ring_buffer__consume(l->cycles_rb) : 0;
	int after = ring_buffer__consume(l->procs);
	rearm_periods(l);
	rescan_cpus(l);
	if (n < 0 || before < 0 || after < 0 || cyc < 0)
		return -1;
	return n + before + after + cyc;
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
	out->proc_reserve_failed = sums[C_PROC_RESERVE_FAILED];
	out->mmap_exec = sums[C_MMAP_EXEC];
	out->mmap_events = l->mmap_events;
	out->proc_events = l->proc_events;
	out->received = l->received;
	out->drains = l->polls;
	out->early_wakeups = l->early_wakeups;
	out->first_sample_wakeups = sums[C_FIRST_SAMPLES];
	out->stack_failed = sums[C_STACK_FAILED];
	out->rearms = l->branch.rearms;
	out->cycles_seen = sums[C_CYCLES_SEEN];
	out->cycles_sent = sums[C_CYCLES_SENT];
	out->cycles_filtered = sums[C_CYCLES_FILTERED];
	out->cycles_kernel = sums[C_CYCLES_KERNEL];
	out->cycles_reserve_failed = sums[C_CYCLES_RESERVE_FAILED];
	out->cycles_received = l->cycles_received;
	out->cycles_held_back = l->cycles_held_back;
	out->cycles_rearms = l->cyc.rearms;
}

void ep_live_cycles_info(const struct ep_live *l, struct ep_live_cycles *out)
{
	*out = l->cycles;
}

const char *ep_live_cycles_mode(const struct ep_live *l)
{
	return l->cycles_mode[0] ? l->cycles_mode : NULL;
}
