/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/daemon/replay.h"

#include <stdio.h>

#include "agent/pipeline/pipeline.h"
#include "agent/source/perf_data/perf_data_feed.h"
#include "agent/stream/sink.h"
#include "common/util/log.h"

struct replay_ctx {
	struct ep_sink *sink;
	struct ep_pipeline *pipeline;
	uint64_t samples, batch_samples;
	int rc;
};

static void after_sample(void *ctx)
{
	struct replay_ctx *r = ctx;
	if (++r->samples % r->batch_samples == 0 && ep_sink_emit(r->sink, r->pipeline) != 0)
		r->rc = 1;
}

int ep_replay_run(const char *path, struct ep_binary_registry *reg, struct ep_sink *sink,
		  unsigned batch_samples)
{
	struct ep_pipeline_config pcfg;
	ep_pipeline_config_default(&pcfg);
	struct ep_pipeline *p = ep_pipeline_new(&pcfg, reg);
	if (!p) {
		ep_error("out of memory");
		return 1;
	}
	snprintf(sink->source, sizeof(sink->source), "perf.data:%s", path);
	struct replay_ctx rc = {.sink = sink, .pipeline = p, .batch_samples = batch_samples};
	struct ep_perf_data_feed_info info = {0};
	sink->event = info.event; /* the feed fills it in from the header */
	char err[512];
	if (ep_feed_perf_data_hooked(path, p, &info, after_sample, &rc, err, sizeof(err)) != 0) {
		ep_error("%s", err);
		rc.rc = 1; /* what was read before the damage is still sent */
	}
	if (!info.event[0])
		sink->event = "unknown";
	if (ep_sink_emit(sink, p) != 0)
		rc.rc = 1;
	ep_info("%s: %llu samples replayed", path, (unsigned long long)rc.samples);
	ep_pipeline_free(p);
	return rc.rc;
}
