/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The live agent's run: the BPF program samples the machine (or the pids
 * and cgroups asked for), the samples go through the pipeline, the counts
 * go to the sink every interval and at the end (a stop request or the end
 * of the duration), and the collector's on-demand sessions run beside it
 * when the sink streams.
 */
#ifndef EP_DAEMON_H
#define EP_DAEMON_H

#include <signal.h>
#include <stdbool.h>

#include "agent/source/live/live_source.h"

struct ep_binary_registry;
struct ep_sink;
struct ep_k8s;

struct ep_daemon_config {
	struct ep_live_config live; /* jitter filled in here when not given */
	bool jitter_given;	    /* else P/16 */
	unsigned duration_s;	    /* 0: until stop is set */
	unsigned interval_s;	    /* how often the counts go to the sink */
	/* binaries no process maps, with no counts left to send, are
	 * forgotten once idle for an interval, and past this memory bound
	 * the least recently used of them */
	unsigned binaries_max_mib;
	struct ep_k8s *k8s; /* this node's pods; NULL outside a cluster */
	/* set by the caller's signal handler: the run drains what the kernel
	 * holds, sends the last counts and returns */
	volatile sig_atomic_t *stop;
};

/* Samples until stop or the end of the duration. 0, 1 on a runtime failure
 * (logged), 2 when the configuration cannot work (--jitter too large). */
int ep_daemon_run(struct ep_daemon_config *cfg, struct ep_binary_registry *reg,
		  struct ep_sink *sink);

#endif
