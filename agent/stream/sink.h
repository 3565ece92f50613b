/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Where a command's counts go: a profile file (-o), the collector
 * (--collector: deltas through agent/stream), or both; with both, the file
 * holds the running totals of the deltas. Shared by `agent` (live and
 * --replay) and `record --emulate`.
 */
#ifndef EP_PROFILE_SINK_H
#define EP_PROFILE_SINK_H

#include <limits.h>
#include <stdint.h>

#include "agent/pipeline/pipeline.h"
#include "agent/stream/binary_upload.h"
#include "agent/stream/streamer.h"
#include "common/profile/merge.h"
#include "common/util/collector_list.h"
#include "common/util/options.h"

struct ep_sink_options {
	struct ep_streamer_config streamer;
	unsigned spool_mib;
	unsigned flush_s; /* how long to wait for acknowledgements at exit */
	/* binaries at most this big are sent to the collector for its UI
	 * (agent/stream/binary_upload.h); 0: none */
	unsigned upload_max_mib;
	/* --collector, repeatable: streamer.collector points into it */
	struct ep_collector_arg collector_arg;
};

void ep_sink_options_init(struct ep_sink_options *o);

/* The streaming side's options (--collector, --collector-order, --spool,
 * --spool-max-mib, --token-file, --cacert, --cert, --key, --node,
 * --flush-timeout, --retry-max-ms, --upload-max-mib) as an option table
 * into o; the last entry ends it. */
#define EP_SINK_OPTION_COUNT 12
void ep_sink_option_table(struct ep_option out[EP_SINK_OPTION_COUNT + 1],
			  struct ep_sink_options *o);

struct ep_sink {
	const char *output;
	struct ep_streamer *streamer;
	struct ep_uploader *uploader; /* binaries' code to the collector; NULL: off */
	struct ep_merge *totals;
	Edgeprof__V1__Stats totals_stats;
	char source[PATH_MAX + 16];	    /* config.source of what is written */
	const char *event;		    /* config.event */
	const char *mode;		    /* config.mode when the caller decides it, else NULL */
	uint64_t period, jitter;	    /* config.period/jitter, when the source knows them */
	const Edgeprof__V1__Labels *labels; /* of every batch, when one container is watched */
	uint64_t window_start_ns;
};

/* output and/or o->streamer.collector; 0 or -1 (logged). */
int ep_sink_open(struct ep_sink *k, const char *output, struct ep_sink_options *o);
/* The pipeline's counts to the file and/or as the next batch. 0 or -1. */
int ep_sink_emit(struct ep_sink *k, struct ep_pipeline *p);
/* Waits up to flush_s for acknowledgements; 1 when batches are left unsent. */
int ep_sink_finish(struct ep_sink *k, unsigned flush_s);
void ep_sink_free(struct ep_sink *k);

#endif
