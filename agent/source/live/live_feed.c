/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/source/live/live_feed.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/attribute/process_labels.h"
#include "agent/pipeline/pipeline.h"
#include "agent/source/live/live_source.h"
#include "common/util/clock.h"
#include "common/util/log.h"

/* a process whose addresses do not resolve gets its maps re-read, at most
 * this often: new libraries appear, but /proc is not free */
#define MAPS_REREAD_NS 1000000000ULL
/* Reads a sample may ask for at once after an exec, when it was taken
 * after the last read and its address is in none of the mappings: the
 * exec's read comes before ld.so maps the libraries, so without them a new
 * program's library samples went unresolved until the once-a-second
 * re-read (a compiler's whole run, often). Bounded: an address that no
 * read finds costs at most this many. */
#define PROMPT_READS_AFTER_EXEC 4
/* an exited process's mappings are dropped this long after its exit event:
 * far longer than a drain interval, so its last samples still resolve */
#define FORGET_AFTER_NS 2000000000ULL
/* the longest maps text read: a process with ~500,000 mappings */
#define MAPS_MAX_BYTES (64u << 20)

void ep_live_feed_init(struct ep_live_feed *f, struct ep_pipeline *pipeline,
		       struct ep_process_labeller *labeller)
{
	*f = (struct ep_live_feed){.pipeline = pipeline, .labeller = labeller};
}

/* /proc/PID/maps whole, in the feed's buffer (kept between reads); NULL
 * when the process is gone. */
static char *slurp_maps(struct ep_live_feed *f, uint32_t pid, size_t *len)
{
	char path[40];
	snprintf(path, sizeof(path), "/proc/%u/maps", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	size_t n = 0;
	for (;;) {
		if (f->maps_cap - n < 4096) {
			size_t cap = f->maps_cap ? f->maps_cap * 2 : 64 * 1024;
			char *b = cap <= MAPS_MAX_BYTES ? realloc(f->maps_buf, cap) : NULL;
			if (!b)
				break; /* what was read is used: lines cut short are skipped */
			f->maps_buf = b;
			f->maps_cap = cap;
		}
		ssize_t r = read(fd, f->maps_buf + n, f->maps_cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (r < 0 && n == 0) {
				close(fd);
				return NULL;
			}
			break;
		}
		n += (size_t)r;
	}
	close(fd);
	*len = n;
	return f->maps_buf;
}

/* One executable file mapping. The file is opened through
 * /proc/PID/map_files/START-END: the very file mapped, even when it has
 * since been deleted or replaced on disk (an upgrade under a running
 * process), and inside containers. Without the right to read map_files
 * (CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE) /proc/PID/root/PATH is the
 * fallback, and deleted files are skipped. The registry knows files by
 * identity (device, inode, size, mtime), so a library mapped by a thousand
 * processes is read once, and each later mapping of it costs one stat(). */
static void add_file_mapping(struct ep_live_feed *f, uint32_t pid, const struct ep_maps_entry *m)
{
	char file[PATH_MAX + 64];
	struct stat st;
	uint64_t len = m->end - m->start;
	if (!f->no_map_files) {
		snprintf(file, sizeof(file), "/proc/%u/map_files/%llx-%llx", pid,
			 (unsigned long long)m->start, (unsigned long long)m->end);
		if (stat(file, &st) == 0) {
			if (!ep_pipeline_mmap_known(f->pipeline, pid, m->start, len, m->offset,
						    m->path, &st))
				ep_pipeline_mmap_at(f->pipeline, pid, m->start, len, m->offset,
						    m->path, file);
			return;
		}
		/* the agent lacks the capability: so it stays */
		f->no_map_files = errno == EPERM;
	}
	if (m->deleted)
		return;
	snprintf(file, sizeof(file), "/proc/%u/root%s", pid, m->path);
	if (stat(file, &st) != 0 ||
	    !ep_pipeline_mmap_known(f->pipeline, pid, m->start, len, m->offset, m->path, &st))
		ep_pipeline_mmap_at(f->pipeline, pid, m->start, len, m->offset, m->path, file);
}

/* PROCMAP_QUERY (Linux 6.11): the kernel answers for the executable
 * mappings alone, one ioctl each, without writing every mapping's line
 * (~3x less CPU than reading the text of a just-started process here).
 * Declared here: Debian 12's headers predate it. */
struct ep_procmap_query {
	uint64_t size, query_flags, query_addr;
	uint64_t vma_start, vma_end, vma_flags, vma_page_size, vma_offset, inode;
	uint32_t dev_major, dev_minor, vma_name_size, build_id_size;
	uint64_t vma_name_addr, build_id_addr;
};
#define EP_PROCMAP_QUERY	    _IOWR('f', 17, struct ep_procmap_query)
#define EP_PROCMAP_VMA_EXECUTABLE   0x04
#define EP_PROCMAP_COVERING_OR_NEXT 0x10

static void add_mapping(struct ep_live_feed *f, uint32_t pid, const struct ep_maps_entry *m)
{
	if (m->path[0] == '/')
		add_file_mapping(f, pid, m);
	else
		ep_pipeline_mmap_anon(f->pipeline, pid, m->start, m->end - m->start);
}

/* 1: read; 0: the process is gone; -1: this kernel has no PROCMAP_QUERY. */
static int query_maps(struct ep_live_feed *f, uint32_t pid)
{
	static const char deleted[] = " (deleted)";
	const size_t dlen = sizeof(deleted) - 1;
	char path[40], name[PATH_MAX + 16];
	snprintf(path, sizeof(path), "/proc/%u/maps", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	int rc = 1;
	for (uint64_t addr = 0;;) {
		struct ep_procmap_query q = {.size = sizeof(q),
					     .query_flags = EP_PROCMAP_VMA_EXECUTABLE |
							    EP_PROCMAP_COVERING_OR_NEXT,
					     .query_addr = addr,
					     .vma_name_addr = (uint64_t)(uintptr_t)name,
					     .vma_name_size = sizeof(name)};
		if (ioctl(fd, EP_PROCMAP_QUERY, &q) != 0) {
			/* ENOENT: no mapping past addr; ESRCH: gone meanwhile */
			if (addr == 0 && (errno == ENOTTY || errno == EINVAL))
				rc = -1;
			break;
		}
		if (q.vma_end <= addr)
			break; /* never seen; a loop guard */
		addr = q.vma_end;
		if (!q.vma_name_size)
			name[0] = '\0';
		struct ep_maps_entry m = {
		    .start = q.vma_start, .end = q.vma_end, .offset = q.vma_offset, .path = name};
		size_t len = strlen(name);
		if (name[0] == '/' && len > dlen && strcmp(name + len - dlen, deleted) == 0) {
			name[len - dlen] = '\0';
			m.deleted = true;
		}
		add_mapping(f, pid, &m);
	}
	close(fd);
	return rc;
}

/* The process's executable mappings from /proc: asked of the kernel where
 * it answers PROCMAP_QUERY, else the maps text read in one go and parsed in
 * place. The agent does this for every process the machine starts. */
static void read_maps(struct ep_live_feed *f, uint32_t pid, enum ep_maps_read why)
{
	int queried = f->maps_text ? -1 : query_maps(f, pid);
	if (queried < 0) {
		f->maps_text = true;
		size_t len, pos = 0;
		char *text = slurp_maps(f, pid, &len);
		queried = text != NULL;
		struct ep_maps_entry m;
		while (text && ep_maps_next_exec(text, len, &pos, &m))
			add_mapping(f, pid, &m);
	}
	if (queried)
		f->maps_reads[why]++;
	else
		f->unresolved_pids++;
}

void ep_live_feed_read_maps(struct ep_live_feed *f, uint32_t pid)
{
	read_maps(f, pid, EP_MAPS_AT_EXEC);
}

/* Reads the maps and notes when the read began: a sample taken after that
 * saw mappings the read may have missed. */
static void read_maps_now(struct ep_live_feed *f, uint32_t pid, uint64_t *last,
			  enum ep_maps_read why)
{
	uint64_t began = ep_mono_ns();
	read_maps(f, pid, why);
	if (last)
		*last = began;
}

/* The process's maps are known as of at (a read's start), or now (a
 * forked child's, inherited from its parent). */
static void maps_known_at(struct ep_live_feed *f, uint32_t pid, uint64_t at)
{
	uint64_t *last = ep_u64map_upsert(&f->maps_read, pid, NULL);
	if (last)
		*last = at;
}

/* One of pid's reads after its exec, if it has any left. */
static bool take_prompt_read(struct ep_live_feed *f, uint32_t pid)
{
	uint64_t *left = ep_u64map_get(&f->prompt_reads, pid);
	if (!left)
		return false;
	if (--*left == 0)
		ep_u64map_remove(&f->prompt_reads, pid);
	return true;
}

static void note_exit(struct ep_live_feed *f, uint32_t pid)
{
	if (f->exits_head + f->exits_n == f->exits_cap) {
		if (f->exits_head > 0) {
			memmove(f->exits, f->exits + f->exits_head, f->exits_n * sizeof(*f->exits));
			f->exits_head = 0;
		} else {
			size_t cap = f->exits_cap ? f->exits_cap * 2 : 256;
			struct ep_live_exit *e = realloc(f->exits, cap * sizeof(*e));
			if (!e)
				return; /* kept until the agent exits: a leak, not an error */
			f->exits = e;
			f->exits_cap = cap;
		}
	}
	uint64_t at = ep_mono_ns();
	uint64_t *slot = ep_u64map_upsert(&f->exited, pid, NULL);
	if (!slot)
		return;
	*slot = at;
	f->exits[f->exits_head + f->exits_n++] = (struct ep_live_exit){pid, at};
}

void ep_live_feed_forget_exited(struct ep_live_feed *f)
{
	uint64_t now = ep_mono_ns();
	while (f->exits_n && now - f->exits[f->exits_head].at >= FORGET_AFTER_NS) {
		struct ep_live_exit e = f->exits[f->exits_head++];
		f->exits_n--;
		const uint64_t *at = ep_u64map_get(&f->exited, e.pid);
		if (!at || *at != e.at)
			continue; /* the pid was reused since */
		ep_u64map_remove(&f->exited, e.pid);
		ep_u64map_remove(&f->maps_read, e.pid);
		ep_u64map_remove(&f->prompt_reads, e.pid);
		ep_pipeline_forget(f->pipeline, e.pid);
		f->forgotten++;
	}
}

static void label(struct ep_live_feed *f, uint32_t pid, uint64_t cgroup_id)
{
	if (f->labeller)
		ep_process_label(f->labeller, pid, cgroup_id);
}

/* exec, fork and exit as they happen: a forked child starts with its
 * parent's mappings, an exec'd process gets its new ones read at once (a
 * short-lived program may be gone by its first sample's turn). */
static void on_process_event(void *ctx, const struct ep_proc_record *rec)
{
	struct ep_live_feed *f = ctx;
	uint64_t *last, began;
	switch (rec->type) {
	case EP_PROC_FORK:
		ep_u64map_remove(&f->exited, rec->pid); /* a reused pid is a new process */
		ep_u64map_remove(&f->prompt_reads, rec->pid);
		ep_pipeline_fork(f->pipeline, rec->pid, rec->ppid);
		maps_known_at(f, rec->pid, ep_mono_ns());
		break;
	case EP_PROC_EXEC:
		ep_pipeline_exec(f->pipeline, rec->pid);
		/* runtimes move a container's first process into its cgroup
		 * between fork and exec: look again */
		label(f, rec->pid, rec->cgroup_id);
		began = ep_mono_ns();
		read_maps(f, rec->pid, EP_MAPS_AT_EXEC);
		maps_known_at(f, rec->pid, began);
		last = ep_u64map_upsert(&f->prompt_reads, rec->pid, NULL);
		if (last)
			*last = PROMPT_READS_AFTER_EXEC;
		break;
	case EP_PROC_EXIT:
		ep_pipeline_exit(f->pipeline, rec->pid);
		note_exit(f, rec->pid);
		break;
	case EP_PROC_MMAP:
		/* new code mapped (dlopen), handed on at the process's next
		 * sample: read its maps again. A process not seen yet gets them
		 * read whole at its first sample anyway. */
		last = ep_u64map_get(&f->maps_read, rec->pid);
		if (!last)
			break;
		read_maps_now(f, rec->pid, last, EP_MAPS_AT_MMAP);
		ep_debug("pid %u mapped executable code: its maps read again", rec->pid);
		break;
	default:
		break;
	}
}

static void note_period(struct ep_period_stats *ps, uint64_t period)
{
	/* a CPU's first sample has no previous one to measure from */
	if (period == 0)
		return;
	if (ps->n == 0 || period < ps->min)
		ps->min = period;
	if (period > ps->max)
		ps->max = period;
	ps->n++;
	ps->sum += (double)period;
	ps->sumsq += (double)period * (double)period;
}

/* Before a sample of pid at ip is counted: its maps read at its first
 * sample, and again when ip is in none of them. */
static void know_maps(struct ep_live_feed *f, uint32_t pid, uint64_t cgroup_id, uint64_t ip,
		      bool kernel, uint64_t time_ns)
{
	bool inserted = false;
	uint64_t *last = ep_u64map_upsert(&f->maps_read, pid, &inserted);
	if (inserted) {
		label(f, pid, cgroup_id);
		read_maps_now(f, pid, last, EP_MAPS_AT_FIRST_SAMPLE);
	} else if (last && !kernel) {
		/* code of no file (JIT output) resolves as such: a re-read would
		 * find nothing new, and a JIT's maps are long */
		struct ep_resolved r;
		enum ep_resolve_status st = ep_pipeline_resolve(f->pipeline, pid, ip, &r);
		bool unresolved = st != EP_RESOLVE_OK && st != EP_RESOLVE_ANON_CODE;
		if (unresolved && ep_mono_ns() - *last > MAPS_REREAD_NS)
			read_maps_now(f, pid, last, EP_MAPS_UNRESOLVED);
		else if (st == EP_RESOLVE_NO_MAPPING && time_ns > *last && take_prompt_read(f, pid))
			read_maps_now(f, pid, last, EP_MAPS_AFTER_EXEC);
	}
}

static void on_sample(void *ctx, const struct ep_sample_record *rec)
{
	struct ep_live_feed *f = ctx;
	note_period(&f->periods, rec->period);
	know_maps(f, rec->pid, rec->cgroup_id, rec->ip, rec->flags & EP_SAMPLE_IP_KERNEL,
		  rec->time_ns);
	ep_pipeline_sample(f->pipeline, rec);
}

static void on_cycles(void *ctx, const struct ep_cycles_record *rec)
{
	struct ep_live_feed *f = ctx;
	note_period(&f->cycles_periods, rec->period);
	know_maps(f, rec->pid, rec->cgroup_id, rec->ip, rec->flags & EP_SAMPLE_IP_KERNEL,
		  rec->time_ns);
	ep_pipeline_cycles_sample(f->pipeline, rec);
}

void ep_live_feed_process_event(struct ep_live_feed *f, const struct ep_proc_record *rec)
{
	on_process_event(f, rec);
}

void ep_live_feed_sample(struct ep_live_feed *f, const struct ep_sample_record *rec)
{
	on_sample(f, rec);
}

void ep_live_feed_cycles(struct ep_live_feed *f, const struct ep_cycles_record *rec)
{
	on_cycles(f, rec);
}

void ep_live_feed_attach(struct ep_live_feed *f, struct ep_live *live)
{
	ep_live_on_process_events(live, on_process_event, f);
	ep_live_on_cycles(live, on_cycles, f);
}

/* What --cycles found, for the profile's config: it may change at the
 * first branch stacks (ep_live_cycles_info). */
static void tell_cycles(struct ep_live_feed *f, struct ep_live *live)
{
	struct ep_live_cycles c;
	ep_live_cycles_info(live, &c);
	struct ep_pipeline_cycles pc = {.period = c.period, .jitter = c.jitter};
	ep_live_period(live, &pc.branch_period, &(uint64_t){0});
	switch (c.source) {
	case EP_CYCLES_BRANCH_RECORDS:
		pc = (struct ep_pipeline_cycles){.source = "branch_records", .unit = "cycles"};
		break;
	case EP_CYCLES_EVENT:
		pc.source = "cycles_event";
		pc.unit = "cycles";
		break;
	case EP_CYCLES_CPU_CLOCK:
		pc.source = "cpu_clock";
		pc.unit = "ns";
		break;
	default:
		break;
	}
	ep_pipeline_set_cycles(f->pipeline, &pc);
}

int ep_live_feed_poll(struct ep_live_feed *f, struct ep_live *live, int timeout_ms)
{
	int n = ep_live_poll(live, timeout_ms, on_sample, f);
	tell_cycles(f, live);
	return n;
}

static void log_periods(const char *what, const struct ep_period_stats *ps)
{
	if (ps->n <= 1)
		return;
	double mean = ps->sum / (double)ps->n;
	double var = ps->sumsq / (double)ps->n - mean * mean;
	ep_info("%s: n=%llu mean=%.0f min=%llu max=%llu stddev=%.0f", what,
		(unsigned long long)ps->n, mean, (unsigned long long)ps->min,
		(unsigned long long)ps->max, var > 0 ? sqrt(var) : 0.0);
}

void ep_live_feed_log_periods(const struct ep_live_feed *f)
{
	log_periods("sampling periods", &f->periods);
	log_periods("cycles event periods", &f->cycles_periods);
}

void ep_live_feed_free(struct ep_live_feed *f)
{
	ep_u64map_free(&f->maps_read);
	ep_u64map_free(&f->prompt_reads);
	ep_u64map_free(&f->exited);
	free(f->exits);
	free(f->maps_buf);
	ep_pipeline_free(f->pipeline);
}
