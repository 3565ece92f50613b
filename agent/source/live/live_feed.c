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
#include "agent/process/process.h"
#include "agent/source/live/live_source.h"
#include "common/util/clock.h"
#include "common/util/log.h"
#include "common/util/u64map.h"

/* Reads a sample may ask for at once after a new program's first read,
 * when it was taken after that read and its address is in none of the
 * mappings: a library mapped since (dlopen, or ld.so's own when the first
 * sample came before it was done) went unresolved until the once-a-second
 * re-read, a compiler's whole run often. Bounded: an address that no read
 * finds costs at most this many. */
#define PROMPT_READS_AFTER_EXEC 4
/* an exited process's mappings are dropped this long after its exit event:
 * far longer than a drain interval, so its last samples still resolve */
#define FORGET_AFTER_NS 2000000000ULL
/* how long a mapped file's stat() is taken for its (device, inode) */
#define STAT_FRESH_NS 1000000000ULL

void ep_live_feed_init(struct ep_live_feed *f, struct ep_pipeline *pipeline,
		       struct ep_process_labeller *labeller)
{
	*f = (struct ep_live_feed){.pipeline = pipeline, .labeller = labeller};
	if (pipeline)
		f->procs = ep_pipeline_process_table(pipeline);
}

struct reading {
	struct ep_live_feed *f;
	uint32_t pid;
};

/* The stat() of the file m maps, as the registry knows files (device,
 * inode, size, mtime): taken again at most once a second per file the
 * kernel names by (device, inode), so a library every new program maps
 * costs no system call per program. A file rewritten in place (the same
 * inode) is taken for new within that second. NULL when the file cannot
 * be stat()ed. */
static const struct stat *stat_mapped(struct ep_live_feed *f, const struct ep_maps_entry *m,
				      const char *file)
{
	struct ep_stat_memo *s = NULL;
	if (m->ino && (f->stats || (f->stats = calloc(EP_STAT_MEMOS, sizeof(*f->stats))))) {
		/* two places a file may be in: the older of them is taken */
		size_t h = ep_hash_u64(m->dev * 31 + m->ino) % EP_STAT_MEMOS;
		struct ep_stat_memo *a = &f->stats[h], *b = &f->stats[(h + 1) % EP_STAT_MEMOS];
		uint64_t now = ep_mono_ns();
		if (a->ino == m->ino && a->dev == m->dev)
			s = a;
		else if (b->ino == m->ino && b->dev == m->dev)
			s = b;
		if (s && now - s->at < STAT_FRESH_NS)
			return &s->st;
		if (!s)
			s = a->at <= b->at ? a : b;
		s->at = now;
	}
	struct stat st;
	if (stat(file, &st) != 0) {
		if (s)
			s->ino = 0;
		return NULL;
	}
	if (!s) {
		f->last_stat = st;
		return &f->last_stat;
	}
	s->dev = m->dev;
	s->ino = m->ino;
	s->st = st;
	return &s->st;
}

/* One executable file mapping. The file is opened through
 * /proc/PID/map_files/START-END: the very file mapped, even when it has
 * since been deleted or replaced on disk (an upgrade under a running
 * process), and inside containers. Without the right to read map_files
 * (CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE) /proc/PID/root/PATH is the
 * fallback, and deleted files are skipped. The registry knows files by
 * identity (device, inode, size, mtime), so a library mapped by a thousand
 * processes is read once. */
static void add_file_mapping(struct ep_live_feed *f, uint32_t pid, const struct ep_maps_entry *m)
{
	char file[PATH_MAX + 64];
	const struct stat *st;
	uint64_t len = m->end - m->start;
	if (!f->no_map_files) {
		snprintf(file, sizeof(file), "/proc/%u/map_files/%llx-%llx", pid,
			 (unsigned long long)m->start, (unsigned long long)m->end);
		if ((st = stat_mapped(f, m, file))) {
			if (!ep_pipeline_mmap_known(f->pipeline, pid, m->start, len, m->offset,
						    m->path, st))
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
	if (!(st = stat_mapped(f, m, file)) ||
	    !ep_pipeline_mmap_known(f->pipeline, pid, m->start, len, m->offset, m->path, st))
		ep_pipeline_mmap_at(f->pipeline, pid, m->start, len, m->offset, m->path, file);
}

static void add_mapping(void *ctx, const struct ep_maps_entry *m)
{
	const struct reading *r = ctx;
	if (m->path[0] == '/')
		add_file_mapping(r->f, r->pid, m);
	else
		ep_pipeline_mmap_anon(r->f->pipeline, r->pid, m->start, m->end - m->start);
}

/* The process's executable mappings from /proc, noted as known as of the
 * read's start: a sample taken after that saw mappings the read may have
 * missed. A process gone before they could be read is counted (with those
 * whose binaries could not be opened for that reason), and forgotten in a
 * while like one whose exit was seen. */
static void read_maps(struct ep_live_feed *f, struct ep_process *pr, enum ep_maps_read why)
{
	struct ep_binary_registry *reg = ep_pipeline_binaries(f->pipeline);
	struct ep_binreg_proc_failures was, now;
	ep_binreg_proc_failures(reg, &was);
	uint64_t began = ep_mono_ns();
	struct reading r = {f, pr->pid};
	int read = ep_proc_maps_read(&f->maps, pr->pid, add_mapping, &r);
	pr->maps_read_ns = began;
	pr->execd = false;
	if (pr->mmap_ns <= began)
		pr->mmap_ns = 0;
	ep_binreg_proc_failures(reg, &now);
	uint64_t gone = now.gone - was.gone;
	if (read) {
		f->maps_reads[why]++;
	} else {
		gone++;
		if (!pr->exit_ns)
			ep_process_exit(f->procs, pr->pid, began);
	}
	if (gone) {
		f->gone += gone;
		ep_pipeline_add_gone(f->pipeline, gone);
	}
}

void ep_live_feed_read_maps(struct ep_live_feed *f, uint32_t pid)
{
	struct ep_process *pr = ep_process_get(f->procs, pid);
	if (pr)
		read_maps(f, pr, EP_MAPS_AT_EXEC);
}

void ep_live_feed_forget_exited(struct ep_live_feed *f)
{
	uint64_t now = ep_mono_ns();
	if (now > FORGET_AFTER_NS)
		f->forgotten += ep_process_forget_exited(f->procs, now - FORGET_AFTER_NS);
}

/* The process labelled as it is now, where its cgroup was last seen: its
 * counts go to its container's label set from now on. */
static void label(struct ep_live_feed *f, struct ep_process *pr)
{
	const Edgeprof__V1__Labels *labels;
	enum ep_labelled got = ep_process_label(f->labeller, pr->pid, pr->cgroup_id, &labels);
	if (got != EP_LABELS_GONE)
		ep_pipeline_label(f->pipeline, pr, labels);
	pr->labelled = got == EP_LABELS_FOR_GOOD;
}

static void apply_pending(void *ctx, uint32_t pid, const Edgeprof__V1__Labels *labels)
{
	struct ep_live_feed *f = ctx;
	ep_pipeline_label_pid(f->pipeline, pid, labels);
}

void ep_live_feed_label_pending(struct ep_live_feed *f)
{
	if (f->labeller)
		ep_process_label_pending(f->labeller, apply_pending, f);
}

/* A process that forks, labelled then if it is not yet: its children have
 * its labels while they stay where they were forked, so a host with v1
 * hierarchies reads /proc/PID/cgroup once per parent, not once per new
 * program. */
static void label_parent(struct ep_live_feed *f, uint32_t pid, uint64_t cgroup_id)
{
	if (!f->labeller || !f->sees_cgroup_moves)
		return;
	struct ep_process *pr = ep_process_get(f->procs, pid);
	if (!pr || pr->exit_ns)
		return;
	ep_process_seen_in(pr, cgroup_id);
	if (!pr->labelled)
		label(f, pr);
}

/* exec, fork and exit as they happen: a forked child starts with its
 * parent's mappings; a new program has its own read at its first sample
 * (most programs a node starts are never sampled, and by then ld.so has
 * mapped its libraries), which the BPF program makes wake the agent at
 * once: a short-lived one is read while it lives. */
static void on_process_event(void *ctx, const struct ep_proc_record *rec)
{
	struct ep_live_feed *f = ctx;
	struct ep_process *pr;
	switch (rec->type) {
	case EP_PROC_FORK:
		if (rec->pid != rec->ppid)
			label_parent(f, rec->ppid, rec->cgroup_id);
		ep_pipeline_fork(f->pipeline, rec->pid, rec->ppid);
		pr = ep_process_find(f->procs, rec->pid);
		if (pr) /* the parent's, where the child starts */
			ep_process_seen_in(pr, rec->cgroup_id);
		break;
	case EP_PROC_EXEC:
		ep_pipeline_exec(f->pipeline, rec->pid);
		pr = ep_process_find(f->procs, rec->pid);
		if (pr) {
			pr->rereads_left = PROMPT_READS_AFTER_EXEC;
			ep_process_seen_in(pr, rec->cgroup_id);
		}
		break;
	case EP_PROC_CGROUP:
		pr = ep_process_find(f->procs, rec->pid);
		if (pr)
			pr->labelled = false;
		break;
	case EP_PROC_EXIT:
		ep_process_exit(f->procs, rec->pid, ep_mono_ns());
		break;
	case EP_PROC_MMAP:
		/* new code mapped (dlopen): its maps are read again at its next
		 * sample (the mapping does not exist yet: the probe runs as the
		 * call starts, and a burst of mappings costs one read). A process
		 * whose maps were not read yet gets them read whole at its first
		 * sample anyway. */
		pr = ep_process_find(f->procs, rec->pid);
		if (pr && pr->maps_read_ns && rec->time_ns > pr->mmap_ns)
			pr->mmap_ns = rec->time_ns;
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

/* What a sample asked of /proc before it is counted: the process labelled
 * at its first sample (where moves are seen, one still where its parent
 * was labelled keeps its parent's labels: on a host with v1 hierarchies
 * that spares a read of /proc/PID/cgroup per program), its maps read. */
static void read_due(struct ep_live_feed *f, struct ep_process *pr, enum ep_maps_read due)
{
	bool first = due == EP_MAPS_AT_EXEC || due == EP_MAPS_AT_FIRST_SAMPLE;
	if (first && f->labeller && !(f->sees_cgroup_moves && pr->labelled))
		label(f, pr);
	read_maps(f, pr, due);
	if (due == EP_MAPS_AT_MMAP)
		ep_debug("pid %u mapped executable code: its maps read again", pr->pid);
}

/* A sample's process from the table, its maps read first when that is
 * due, and its IP resolved in them. */
static struct ep_process *process_of(struct ep_live_feed *f, const struct ep_process_sample *s,
				     struct ep_sample_ip *ip)
{
	enum ep_maps_read due;
	struct ep_process *pr = ep_process_sampled(f->procs, s, &due, ip);
	if (due != EP_MAPS_NOT_DUE) {
		read_due(f, pr, due);
		ep_mappings_resolve_ip(&pr->maps, ip);
	}
	return pr;
}

/* What the process table is told of a sample and of a cycles record:
 * both carry the same fields. */
#define PROCESS_SAMPLE_OF(rec)                                                                     \
	((struct ep_process_sample){.pid = (rec)->pid,                                             \
				    .kernel = (rec)->flags & EP_SAMPLE_IP_KERNEL,                  \
				    .ip = (rec)->ip,                                               \
				    .cgroup_id = (rec)->cgroup_id,                                 \
				    .time_ns = (rec)->time_ns})

/* A sample's way: its process from the table, then the pipeline with
 * both (no second look-up of the pid, nor of the IP). */
static void on_sample(void *ctx, const struct ep_sample_record *rec)
{
	struct ep_live_feed *f = ctx;
	note_period(&f->periods, rec->period);
	struct ep_sample_ip ip;
	struct ep_process *pr = process_of(f, &PROCESS_SAMPLE_OF(rec), &ip);
	ep_pipeline_sample_of(f->pipeline, rec, pr, &ip);
}

static void on_cycles(void *ctx, const struct ep_cycles_record *rec)
{
	struct ep_live_feed *f = ctx;
	note_period(&f->cycles_periods, rec->period);
	struct ep_sample_ip ip;
	process_of(f, &PROCESS_SAMPLE_OF(rec), &ip);
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
	f->sees_cgroup_moves = ep_live_sees_cgroup_moves(live);
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

static void count_pending(void *ctx, struct ep_process *pr)
{
	*(size_t *)ctx += pr->mmap_ns != 0;
}

size_t ep_live_feed_mmaps_pending(const struct ep_live_feed *f)
{
	size_t n = 0;
	if (f->procs)
		ep_process_each(f->procs, count_pending, &n);
	return n;
}

void ep_live_feed_log_periods(const struct ep_live_feed *f)
{
	log_periods("sampling periods", &f->periods);
	log_periods("cycles event periods", &f->cycles_periods);
}

void ep_live_feed_free(struct ep_live_feed *f)
{
	free(f->stats);
	ep_proc_maps_free(&f->maps);
	ep_pipeline_free(f->pipeline);
}
