/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stream stage (SPEC step 6): the agent's deltas to the collector. Each
 * submitted delta becomes a Batch with the agent's id and the next
 * sequence number, is written to the spool, and a sender thread POSTs the
 * spool's oldest batch until the collector acknowledges it (then it is
 * deleted), with exponential backoff and jitter between failures. The
 * sampling thread never waits on the network.
 *
 * Several collectors (replicas on one store, issue 16): a failed send moves
 * to the next one at once (common/util/collector_list.h); the backoff
 * starts only once every one failed in a row. A batch may so reach two
 * replicas (the first stored it but its answer was lost): the store counts
 * it once by its (agent id, sequence).
 */
#ifndef EP_STREAMER_H
#define EP_STREAMER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/stream/spool.h"
#include "ingest.pb-c.h"
#include "profile.pb-c.h"

struct ep_streamer_config {
	const char *collector; /* base URLs, comma-separated: http(s)://HOST:PORT[,...] */
	const char *spool_dir;
	uint64_t spool_max_bytes;
	const char *token_file;		  /* bearer token; NULL: none */
	const char *ca_file;		  /* trust for https; NULL: the system's */
	const char *cert_file, *key_file; /* client certificate (mTLS); NULL: none */
	const char *node;		  /* NULL: this host's name */
	unsigned backoff_max_ms;	  /* 0: 30 s */
	bool sessions; /* advertise "profile-session": this agent runs on-demand sessions */
	/* the first URL is this agent's home replica; else one picked by the
	 * node's name, so a fleet given one list spreads over the replicas */
	bool collector_listed;
};

struct ep_stream_counters {
	uint64_t batches_spooled;
	uint64_t samples_spooled; /* the sum of BinaryProfile.samples of those batches */
	uint64_t batches_acked;
	uint64_t batches_duplicate; /* acknowledged as already stored */
	uint64_t batches_rejected;  /* refused as malformed: dropped, never retried */
	uint64_t send_failures;	    /* attempts that will be retried */
	uint64_t retry_after_waits; /* of them, waits as long as a Retry-After asked */
	/* batches that could not be put in the spool (its disk full), and the
	 * samples their binaries held (the sum of BinaryProfile.samples, the
	 * unit the collector stores): gone, counted */
	uint64_t batches_lost, samples_lost;
	uint64_t bytes_sent;
	struct ep_spool_counters spool;
};

struct ep_streamer;
struct ep_collector_list;

/* Opens the spool, reads the token and starts the sender. NULL with err. */
struct ep_streamer *ep_streamer_start(const struct ep_streamer_config *cfg, char *err,
				      size_t errlen);

/* Turns a delta (ep_pipeline_take_delta) into the next batch and spools it.
 * labels: where all of it ran (an agent watching one container), or NULL.
 * 0 or -1 (logged, counted in spool.write_failed). */
int ep_streamer_submit(struct ep_streamer *s, const Edgeprof__V1__Profile *delta,
		       const Edgeprof__V1__Labels *labels, uint64_t window_start_ns,
		       uint64_t window_end_ns);

/* Waits up to timeout_ms for every spooled batch to be acknowledged, then
 * stops the sender. Returns the batches left in the spool (sent by the next
 * agent that uses it). */
size_t ep_streamer_finish(struct ep_streamer *s, unsigned timeout_ms);
void ep_streamer_free(struct ep_streamer *s);

void ep_streamer_counters(struct ep_streamer *s, struct ep_stream_counters *out);

/* Queues how a session stands, to travel in the next submitted batch (a
 * newer report of the same session replaces a queued one). Queue a DONE
 * report before submitting the session's last counts: it then travels with
 * them, so the collector marks the session done only once they are stored.
 * The report is copied. 0 or -1 (out of memory). */
int ep_streamer_report_session(struct ep_streamer *s, const Edgeprof__V1__SessionReport *r);

/* The on-demand sessions the collector handed over in its answers since the
 * last call (the sender thread collects them). *out gets an array the caller
 * frees, each element with edgeprof__v1__profile_session__free_unpacked().
 * Returns how many. */
size_t ep_streamer_take_sessions(struct ep_streamer *s, Edgeprof__V1__ProfileSession ***out);
/* The collectors it sends to, for the binary uploader to share which one
 * answers (borrowed: lives as long as s). */
struct ep_collector_list *ep_streamer_collectors(struct ep_streamer *s);

#endif
