/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/source/perf_data/perf_data_feed.h"
#include "common/util/clock.h"

#include <linux/perf_event.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util/log.h"

struct feed_ctx {
	struct ep_pipeline *pipeline;
	struct ep_perf_data_feed_info *info;
	const char *path;
	uint64_t samples;
	uint64_t last_progress_ns;
	void (*after_sample)(void *ctx);
	void *after_ctx;
};

#define PROGRESS_EVERY_S 5

/* Long imports say how far they are, every few seconds, one line each. */
static void progress(struct feed_ctx *c)
{
	if (ep_mono_ns() - c->last_progress_ns < PROGRESS_EVERY_S * EP_NS_PER_S)
		return;
	c->last_progress_ns = ep_mono_ns();
	const struct ep_perf_data_stats *st = &c->info->stats;
	ep_info("%s: %.0f%% read, %llu samples", c->path,
		st->file_size ? 100.0 * (double)st->bytes_read / (double)st->file_size : 0.0,
		(unsigned long long)st->samples);
}

static int on_event_desc(void *ctx, const struct ep_perf_event_desc *desc)
{
	struct feed_ctx *c = ctx;
	if (!c->info->event[0])
		snprintf(c->info->event, sizeof(c->info->event), "%s", desc->name);
	if (desc->sample_type & PERF_SAMPLE_BRANCH_STACK)
		c->info->branch_stacks = true;
	return 0;
}

static int on_build_id(void *ctx, const struct ep_perf_build_id *bid)
{
	struct feed_ctx *c = ctx;
	if (!bid->kernel && bid->filename)
		ep_pipeline_note_build_id(c->pipeline, bid->filename, bid->build_id,
					  bid->build_id_len);
	return 0;
}

static int on_mmap(void *ctx, const struct ep_mmap_event *ev)
{
	struct feed_ctx *c = ctx;
	if (ev->executable && !ev->kernel)
		ep_pipeline_mmap(c->pipeline, ev->pid, ev->start, ev->len, ev->pgoff, ev->filename,
				 ev->build_id_len ? ev->build_id : NULL, ev->build_id_len);
	return 0;
}

static int on_comm(void *ctx, uint32_t pid, uint32_t tid, const char *comm, bool exec)
{
	struct feed_ctx *c = ctx;
	(void)tid;
	(void)comm;
	if (exec)
		ep_pipeline_exec(c->pipeline, pid);
	return 0;
}

static int on_fork(void *ctx, uint32_t pid, uint32_t ppid, uint32_t tid, uint32_t ptid)
{
	struct feed_ctx *c = ctx;
	(void)tid;
	(void)ptid;
	/* a new thread shares its process's mappings: only new processes copy */
	if (pid != ppid)
		ep_pipeline_fork(c->pipeline, pid, ppid);
	return 0;
}

static int on_exit_event(void *ctx, uint32_t pid, uint32_t ppid, uint32_t tid, uint32_t ptid)
{
	struct feed_ctx *c = ctx;
	(void)ppid;
	(void)ptid;
	if (pid == tid)
		ep_pipeline_exit(c->pipeline, pid);
	return 0;
}

static int on_other_sample(void *ctx, const struct ep_sample_record *rec)
{
	struct feed_ctx *c = ctx;
	ep_pipeline_skip_sample(c->pipeline, rec);
	return 0;
}

static int on_sample(void *ctx, const struct ep_sample_record *rec)
{
	struct feed_ctx *c = ctx;
	ep_pipeline_sample(c->pipeline, rec);
	if (c->after_sample)
		c->after_sample(c->after_ctx);
	if ((++c->samples & 0xffff) == 0)
		progress(c);
	return 0;
}

int ep_feed_perf_data(const char *path, struct ep_pipeline *pipeline,
		      struct ep_perf_data_feed_info *info, char *err, size_t errlen)
{
	return ep_feed_perf_data_hooked(path, pipeline, info, NULL, NULL, err, errlen);
}

/* One reader of the file: part of parts of its samples into pipeline. */
static int feed_part(const char *path, struct ep_pipeline *pipeline,
		     struct ep_perf_data_feed_info *info, void (*after_sample)(void *ctx),
		     void *after_ctx, unsigned part, unsigned parts, char *err, size_t errlen)
{
	memset(info, 0, sizeof(*info));
	struct feed_ctx ctx = {.pipeline = pipeline,
			       .info = info,
			       .path = path,
			       .after_sample = after_sample,
			       .after_ctx = after_ctx};
	ctx.last_progress_ns = ep_mono_ns();
	struct ep_perf_data_callbacks cb = {
	    .ctx = &ctx,
	    .on_event_desc = on_event_desc,
	    .on_build_id = on_build_id,
	    .on_mmap = on_mmap,
	    .on_comm = on_comm,
	    .on_fork = on_fork,
	    .on_exit = on_exit_event,
	    .on_sample = on_sample,
	    .on_other_sample = on_other_sample,
	};
	int rc = ep_perf_data_read_part(path, &cb, part, parts, &info->stats, err, errlen);
	if (!info->branch_stacks && info->stats.samples > 0)
		ep_warn("%s: recorded without branch stacks (perf record -b): IP-only profile",
			path);
	/* every reader reads them: counted once */
	if (part == 0)
		ep_pipeline_add_lost(pipeline, info->stats.lost_records);
	if (part == 0 && info->stats.build_ids_dropped)
		ep_warn("%s: %llu of its %llu build-id entries not read: past the %llu MiB "
			"--perf-data-tables-max-mib allows the recording's tables (their files "
			"are found by path alone)",
			path, (unsigned long long)info->stats.build_ids_dropped,
			(unsigned long long)info->stats.build_ids,
			(unsigned long long)(info->stats.tables_max >> 20));
	return rc;
}

int ep_feed_perf_data_hooked(const char *path, struct ep_pipeline *pipeline,
			     struct ep_perf_data_feed_info *info, void (*after_sample)(void *ctx),
			     void *after_ctx, char *err, size_t errlen)
{
	return feed_part(path, pipeline, info, after_sample, after_ctx, 0, 1, err, errlen);
}

struct worker {
	pthread_t thread;
	const char *path;
	struct ep_pipeline *pipeline;
	unsigned part, parts;
	struct ep_perf_data_feed_info info;
	int rc;
	char err[512];
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	/* what it would say, the first reader says too */
	ep_log_mute_thread(true);
	w->rc = feed_part(w->path, w->pipeline, &w->info, NULL, NULL, w->part, w->parts, w->err,
			  sizeof(w->err));
	return NULL;
}

int ep_feed_perf_data_parallel(const char *path, struct ep_pipeline *const *ps, unsigned n,
			       struct ep_perf_data_feed_info *info, char *err, size_t errlen)
{
	if (n <= 1)
		return feed_part(path, ps[0], info, NULL, NULL, 0, 1, err, errlen);
	struct worker *ws = calloc(n, sizeof(*ws));
	if (!ws) {
		snprintf(err, errlen, "%s: out of memory", path);
		memset(info, 0, sizeof(*info));
		return -1;
	}
	unsigned started = 1;
	for (unsigned i = 1; i < n; i++) {
		ws[i] = (struct worker){.path = path, .pipeline = ps[i], .part = i, .parts = n};
		if (pthread_create(&ws[i].thread, NULL, worker_main, &ws[i]) != 0)
			break;
		started++;
	}
	/* parts no thread could take: this thread reads them after its own */
	int rc = feed_part(path, ps[0], info, NULL, NULL, 0, n, err, errlen);
	for (unsigned i = started; i < n; i++) {
		struct ep_perf_data_feed_info unused;
		char unused_err[512];
		ep_log_mute_thread(true);
		feed_part(path, ps[i], &unused, NULL, NULL, i, n, unused_err, sizeof(unused_err));
		ep_log_mute_thread(false);
	}
	for (unsigned i = 1; i < started; i++)
		pthread_join(ws[i].thread, NULL);
	/* every reader stops at the same damage; a reader that failed alone
	 * (memory) is reported */
	for (unsigned i = 1; i < started && rc == 0; i++) {
		if (ws[i].rc != 0) {
			snprintf(err, errlen, "%s", ws[i].err);
			rc = ws[i].rc;
		}
	}
	free(ws);
	return rc;
}
