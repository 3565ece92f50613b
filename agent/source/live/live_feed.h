/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The live source's adapter: its samples and process events (exec, fork,
 * exit, mmap) into a pipeline, and the reading of /proc. The BPF program
 * reports no mappings, so a process's mappings are read from /proc at its
 * first sample (most processes a node starts are never sampled: an exec
 * costs no read), and again when its addresses stop resolving; an exited
 * process is forgotten a while later. A sample goes to the process table
 * (ep_process_sampled, agent/process/process.h: the record says when a read
 * is due), is labelled and has its maps read here when that is due, then
 * goes to the pipeline with its record. The perf.data source's
 * counterpart is agent/source/perf_data/perf_data_feed.h.
 */
#ifndef EP_LIVE_FEED_H
#define EP_LIVE_FEED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sys/stat.h>

#include "agent/process/process.h"
#include "agent/source/live/proc_maps.h"

struct ep_live;
struct ep_pipeline;
struct ep_proc_record;
struct ep_sample_record;
struct ep_cycles_record;
struct ep_process_labeller;

/* The sampling periods as the samples report them. */
struct ep_period_stats {
	uint64_t n, min, max;
	double sum, sumsq;
};

/* mapped files whose stat() is remembered at once: the libraries of most
 * programs a node runs */
#define EP_STAT_MEMOS 256

struct ep_live_feed {
	struct ep_pipeline *pipeline;	/* owned */
	struct ep_process_table *procs; /* the pipeline's: what the policy reads and notes */
	/* NULL: processes are not labelled one by one (an on-demand session's
	 * counts carry the session's labels, not each process's container) */
	struct ep_process_labeller *labeller;
	struct ep_period_stats periods;
	struct ep_period_stats cycles_periods; /* agent --cycles: the cycles event's */
	struct ep_proc_maps maps;
	bool no_map_files; /* without CAP_CHECKPOINT_RESTORE: /proc/PID/root only */
	/* moves between cgroups are seen: a new program not moved since its
	 * fork has its parent's labels */
	bool sees_cgroup_moves;
	/* mapped files' stat() by (device, inode), EP_STAT_MEMOS of them
	 * (made at the first), for a while (live_feed.c: stat_mapped) */
	struct ep_stat_memo {
		uint64_t dev, ino, at;
		struct stat st;
	} * stats;
	struct stat last_stat; /* without the memos (no memory) */
	/* processes gone before their maps were read, and binaries not opened
	 * because their process had exited (Stats.processes_gone) */
	uint64_t gone;
	uint64_t maps_reads[EP_MAPS_READ_KINDS];
	uint64_t forgotten;
};

/* Zeroes f, which owns pipeline from now on (NULL is allowed: nothing to
 * feed, only to free). */
void ep_live_feed_init(struct ep_live_feed *f, struct ep_pipeline *pipeline,
		       struct ep_process_labeller *labeller);
/* The live source's process events (and --cycles samples) go to the feed
 * from now on. */
void ep_live_feed_attach(struct ep_live_feed *f, struct ep_live *live);
/* ep_live_poll into the feed: what is there, waiting up to timeout_ms. */
int ep_live_feed_poll(struct ep_live_feed *f, struct ep_live *live, int timeout_ms);
/* Drops the processes that exited long enough ago: memory stays bounded by
 * the processes alive, not by all the machine ever ran. */
void ep_live_feed_forget_exited(struct ep_live_feed *f);
/* At each interval: the processes whose pods were not listed yet labelled
 * again (with a labeller). */
void ep_live_feed_label_pending(struct ep_live_feed *f);
/* Reads pid's executable mappings into the pipeline now, as a new
 * program's first sample does (tests compare the two ways of reading them:
 * f->maps.text). */
void ep_live_feed_read_maps(struct ep_live_feed *f, uint32_t pid);
/* A process event and a sample, as the live source hands them to the feed
 * (tests drive the feed with them). */
void ep_live_feed_process_event(struct ep_live_feed *f, const struct ep_proc_record *rec);
void ep_live_feed_sample(struct ep_live_feed *f, const struct ep_sample_record *rec);
void ep_live_feed_cycles(struct ep_live_feed *f, const struct ep_cycles_record *rec);
/* Processes whose executable mmaps were seen, their maps not read again
 * yet (--watch-mmaps: each at its next sample). */
size_t ep_live_feed_mmaps_pending(const struct ep_live_feed *f);
/* One info line on the sampling periods seen, when there are some (and
 * one on the cycles event's). */
void ep_live_feed_log_periods(const struct ep_live_feed *f);
/* The buffers and the pipeline. */
void ep_live_feed_free(struct ep_live_feed *f);

#endif
