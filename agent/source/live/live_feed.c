/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/source/live/live_feed.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/attribute/process_labels.h"
#include "agent/pipeline/pipeline.h"
#include "agent/source/live/live_source.h"
#include "common/util/clock.h"
#include "common/util/log.h"

/* a process whose addresses do not resolve gets its maps re-read, at most
 * this often: new libraries appear, but /proc is not free */
#define MAPS_REREAD_NS 1000000000ULL
/* an exited process's mappings are dropped this long after its exit event:
 * far longer than a drain interval, so its last samples still resolve */
#define FORGET_AFTER_NS 2000000000ULL

void ep_live_feed_init(struct ep_live_feed *f, struct ep_pipeline *pipeline,
		       struct ep_process_labeller *labeller)
{
	*f = (struct ep_live_feed){.pipeline = pipeline, .labeller = labeller};
}

/* The process's executable mappings from /proc. Each file is opened
 * through /proc/PID/map_files/START-END: the very file mapped, even when it
 * has since been deleted or replaced on disk (an upgrade under a running
 * process), and inside containers. Without the right to read map_files
 * (CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE) /proc/PID/root/PATH is the
 * fallback, and deleted files are skipped. The registry caches files by
 * identity (device, inode, size, mtime), so a library mapped by a thousand
 * processes is read once. */
static void read_maps(struct ep_live_feed *f, uint32_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%u/maps", pid);
	FILE *maps = fopen(path, "r");
	if (!maps) {
		f->unresolved_pids++;
		return;
	}
	char line[PATH_MAX + 256];
	while (fgets(line, sizeof(line), maps)) {
		unsigned long long start, end, offset;
		char perms[8];
		int at = 0;
		if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %n", &start, &end, perms, &offset,
			   &at) != 4 ||
		    perms[2] != 'x' || line[at] != '/')
			continue;
		line[strcspn(line, "\n")] = '\0';
		char *deleted = strstr(line + at, " (deleted)");
		if (deleted && deleted[10] == '\0')
			*deleted = '\0';
		char file[PATH_MAX + 64];
		snprintf(file, sizeof(file), "/proc/%u/map_files/%llx-%llx", pid, start, end);
		if (access(file, R_OK) != 0) {
			if (deleted)
				continue;
			snprintf(file, sizeof(file), "/proc/%u/root%s", pid, line + at);
		}
		ep_pipeline_mmap_at(f->pipeline, pid, start, end - start, offset, line + at, file);
	}
	fclose(maps);
}

/* Reads the maps and notes when, for the next re-read. */
static void read_maps_now(struct ep_live_feed *f, uint32_t pid, uint64_t *last)
{
	read_maps(f, pid);
	if (last)
		*last = ep_mono_ns();
}

/* The process's maps are known as of now: read, or a forked child's
 * inherited from its parent. */
static void maps_known_now(struct ep_live_feed *f, uint32_t pid)
{
	uint64_t *last = ep_u64map_upsert(&f->maps_read, pid, NULL);
	if (last)
		*last = ep_mono_ns();
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
		ep_pipeline_forget(f->pipeline, e.pid);
		f->forgotten++;
	}
}

static void label(struct ep_live_feed *f, uint32_t pid)
{
	if (f->labeller)
		ep_process_label(f->labeller, pid);
}

/* exec, fork and exit as they happen: a forked child starts with its
 * parent's mappings, an exec'd process gets its new ones read at once (a
 * short-lived program may be gone by its first sample's turn). */
static void on_process_event(void *ctx, const struct ep_proc_record *rec)
{
	struct ep_live_feed *f = ctx;
	uint64_t *last;
	switch (rec->type) {
	case EP_PROC_FORK:
		ep_u64map_remove(&f->exited, rec->pid); /* a reused pid is a new process */
		ep_pipeline_fork(f->pipeline, rec->pid, rec->ppid);
		maps_known_now(f, rec->pid);
		break;
	case EP_PROC_EXEC:
		ep_pipeline_exec(f->pipeline, rec->pid);
		/* runtimes move a container's first process into its cgroup
		 * between fork and exec: look again */
		label(f, rec->pid);
		read_maps(f, rec->pid);
		maps_known_now(f, rec->pid);
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
		read_maps_now(f, rec->pid, last);
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

static void on_sample(void *ctx, const struct ep_sample_record *rec)
{
	struct ep_live_feed *f = ctx;
	note_period(&f->periods, rec->period);
	bool inserted = false;
	uint64_t *last = ep_u64map_upsert(&f->maps_read, rec->pid, &inserted);
	if (inserted) {
		label(f, rec->pid);
		read_maps_now(f, rec->pid, last);
	} else if (last && !(rec->flags & EP_SAMPLE_IP_KERNEL)) {
		struct ep_resolved r;
		if (ep_pipeline_resolve(f->pipeline, rec->pid, rec->ip, &r) != EP_RESOLVE_OK &&
		    ep_mono_ns() - *last > MAPS_REREAD_NS)
			read_maps_now(f, rec->pid, last);
	}
	ep_pipeline_sample(f->pipeline, rec);
}

void ep_live_feed_attach(struct ep_live_feed *f, struct ep_live *live)
{
	ep_live_on_process_events(live, on_process_event, f);
}

int ep_live_feed_poll(struct ep_live_feed *f, struct ep_live *live, int timeout_ms)
{
	return ep_live_poll(live, timeout_ms, on_sample, f);
}

void ep_live_feed_log_periods(const struct ep_live_feed *f)
{
	const struct ep_period_stats *ps = &f->periods;
	if (ps->n <= 1)
		return;
	double mean = ps->sum / (double)ps->n;
	double var = ps->sumsq / (double)ps->n - mean * mean;
	ep_info("sampling periods: n=%llu mean=%.0f min=%llu max=%llu stddev=%.0f",
		(unsigned long long)ps->n, mean, (unsigned long long)ps->min,
		(unsigned long long)ps->max, var > 0 ? sqrt(var) : 0.0);
}

void ep_live_feed_free(struct ep_live_feed *f)
{
	ep_u64map_free(&f->maps_read);
	ep_u64map_free(&f->exited);
	free(f->exits);
	ep_pipeline_free(f->pipeline);
}
