/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `agent --replay`: a recording through the same path as live samples (the
 * same pipeline, the same batches), so old recordings join the fleet's
 * store.
 */
#ifndef EP_REPLAY_H
#define EP_REPLAY_H

struct ep_binary_registry;
struct ep_sink;

/* Reads the perf.data file at path into sink, a batch every batch_samples
 * samples and one at the end. 0, or 1 (logged) when the file is damaged
 * (what was read before is still sent) or a batch cannot be built. */
int ep_replay_run(const char *path, struct ep_binary_registry *reg, struct ep_sink *sink,
		  unsigned batch_samples);

#endif
