/* SPDX-License-Identifier: Apache-2.0 */
/* Feeds a perf.data recording (source stage) into a pipeline. */
#ifndef EP_PERF_DATA_FEED_H
#define EP_PERF_DATA_FEED_H

#include <stdbool.h>
#include <stddef.h>

#include "agent/pipeline/pipeline.h"
#include "agent/source/perf_data/perf_data.h"

struct ep_perf_data_feed_info {
	char event[64];	    /* the first event's name */
	bool branch_stacks; /* some event sampled branch stacks */
	struct ep_perf_data_stats stats;
};

/* 0, or -1 with err saying where the file is damaged; everything before the
 * damage has gone into the pipeline either way. */
int ep_feed_perf_data(const char *path, struct ep_pipeline *pipeline,
		      struct ep_perf_data_feed_info *info, char *err, size_t errlen);

/* The same, calling after_sample(after_ctx) after each sample went in: the
 * agent's replay cuts its batches there. */
int ep_feed_perf_data_hooked(const char *path, struct ep_pipeline *pipeline,
			     struct ep_perf_data_feed_info *info, void (*after_sample)(void *ctx),
			     void *after_ctx, char *err, size_t errlen);

/* The same with the samples shared among n pipelines, one thread each (the
 * caller's runs ps[0]): each reads the whole file, so each sees every
 * process event, and counts every n-th sample (ep_pipeline_skip_sample()
 * for the others); ep_pipeline_profile_merged() then gives the profile one
 * pipeline would have. Each pipeline needs its own binary registry
 * (ep_binreg_clone()). Only ps[0]'s reader logs warnings and progress. */
int ep_feed_perf_data_parallel(const char *path, struct ep_pipeline *const *ps, unsigned n,
			       struct ep_perf_data_feed_info *info, char *err, size_t errlen);

#endif
