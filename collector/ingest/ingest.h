/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Ingest stage: batches from agents into the store. Every accepted batch is
 * merged into an in-memory pre-aggregate (common/profile/merge.h) and a
 * committer thread writes the pre-aggregate with the batches' ids in one
 * store write (group commit: what arrives during a write goes into the
 * next): many agents' identical edges become one row update. A batch is answered only once its
 * commit is durable, so an acknowledged batch survives a collector SIGKILL, and one that was not
 * acknowledged is resent by its agent and stored once thanks to its (agent id, sequence).
 */
#ifndef EP_INGEST_H
#define EP_INGEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "collector/store/store.h"
#include "common/wire/wire.h"

/* What one batch may hold (collector --max-batch-*): well above what an
 * agent sends in an interval (a busy node's 10 s is ~300,000 rows, 20
 * label sets: docs/capacity.md), and the agent splits a larger interval
 * into batches within them (agent/stream/streamer.c). A batch past one is
 * answered 400 naming the count and the bound, which the agent does not
 * resend. */
#define EP_INGEST_MAX_BINARIES	 EP_WIRE_BATCH_BINARIES
#define EP_INGEST_MAX_EDGES	 EP_WIRE_BATCH_EDGES
#define EP_INGEST_MAX_RANGES	 EP_WIRE_BATCH_RANGES
#define EP_INGEST_MAX_IPS	 EP_WIRE_BATCH_IPS
#define EP_INGEST_MAX_FUNCTIONS	 EP_WIRE_BATCH_FUNCTIONS
#define EP_INGEST_MAX_LABEL_SETS EP_WIRE_BATCH_LABEL_SETS
/* The heap the ingest may hold for batches in flight: their decompressed
 * bytes, what unpacking them takes, and their merged rows until written. */
#define EP_INGEST_MEMORY    (384u << 20)
#define EP_INGEST_ROW_BYTES 256

struct ep_ingest_config {
	unsigned commit_ms; /* extra wait before a commit, for more merging; 0: none */
	/* back-pressure beyond this many merged rows (edges, ranges, IPs and
	 * the slices that hold them) waiting for a commit; 0: one per
	 * EP_INGEST_ROW_BYTES of memory_bytes (a merged row, and its copy
	 * while it is written, take about that) */
	size_t max_pending_rows;
	size_t max_batch_bytes; /* decompressed; 0: EP_WIRE_MAX_BATCH */
	/* per batch; a 0 field: its EP_INGEST_MAX_* (segments, paths,
	 * sessions and decoded_bytes are not read: the memory bound covers
	 * them) */
	struct ep_wire_counts limits;
	/* batches in flight hold at most this much (0: EP_INGEST_MEMORY): a
	 * quarter of it, at least max_batch_bytes, for decompressed bytes, the
	 * rest for each batch from unpacked until its rows are written (twice
	 * what unpacking it takes: the merged rows and their copy while
	 * written); more waits its turn, and a batch that alone needs more is
	 * refused (413) */
	size_t memory_bytes;
};

enum ep_ingest_result {
	EP_INGEST_STORED,
	EP_INGEST_DUPLICATE,
	EP_INGEST_BAD_REQUEST, /* undecodable, bad version, bad identity: never retry */
	EP_INGEST_TOO_LARGE,
	EP_INGEST_STORE_ERROR, /* retry later */
};

enum {
	EP_INGEST_BOUND_BINARIES,
	EP_INGEST_BOUND_EDGES,
	EP_INGEST_BOUND_RANGES,
	EP_INGEST_BOUND_IPS,
	EP_INGEST_BOUND_FUNCTIONS,
	EP_INGEST_BOUND_LABEL_SETS,
	EP_INGEST_BOUND_MEMORY,
	EP_INGEST_BOUND_STRINGS, /* a string past its EP_WIRE_MAX_* */
	EP_INGEST_NBOUNDS
};
extern const char *const ep_ingest_bound_names[EP_INGEST_NBOUNDS];

struct ep_ingest_counters {
	uint64_t stored, duplicate, bad_request, too_large, store_error;
	/* of bad_request: counts beyond what the batch's samples allow
	 * (ep_wire_check_counts) */
	uint64_t counts_out_of_range;
	uint64_t edges, ranges, ips; /* rows received, before merging */
	uint64_t commits, commit_failures;
	uint64_t rows_written; /* after merging */
	double commit_seconds; /* total time in store writes */
	uint64_t pending_rows;
	/* 1 while the store's writes fail (disk full, read-only): from the
	 * first failed write to the next one that succeeds */
	uint64_t store_failing;
	uint64_t failing_writes; /* failed writes in the current outage */
	/* batches refused for a bound, by the bound: binaries, edges, ranges,
	 * ips, functions, label_sets (too many in one batch), memory (what
	 * unpacking it takes is more than the ingest may hold) */
	uint64_t refused[EP_INGEST_NBOUNDS];
	/* bytes batches in flight hold now: decompressed, and unpacked */
	uint64_t plain_bytes, decoded_bytes;
	uint64_t memory_waits; /* batches that waited for memory */
};

struct ep_ingest;

/* --max-batch KIND=N (an EP_OPT_CALL option's call, config an
 * ep_ingest_config): KIND binaries, edges, ranges, ips, functions,
 * label-sets, or mib (decompressed MiB). 0, or -1 with err. */
int ep_ingest_limit_option(void *config, const char *arg, char *err, size_t errlen);

/* The store is borrowed. */
struct ep_ingest *ep_ingest_new(struct ep_store *store, const struct ep_ingest_config *cfg,
				char *err, size_t errlen);
/* Commits what is pending, stops the committer. */
void ep_ingest_free(struct ep_ingest *in);

/* Handles one request body. *sequence gets the batch's sequence when it was
 * readable. why explains any result other than STORED/DUPLICATE. Blocks
 * until the batch is durable. keep (may be NULL): for STORED and DUPLICATE,
 * gets the decoded batch (its agent, its session reports), freed by the
 * caller with ep_wire_free(); NULL otherwise. */
enum ep_ingest_result ep_ingest_batch(struct ep_ingest *in, const uint8_t *body, size_t len,
				      bool compressed, uint64_t *sequence, char *why, size_t whylen,
				      Edgeprof__V1__Batch **keep);

void ep_ingest_counters(struct ep_ingest *in, struct ep_ingest_counters *out);
/* The bounds' metrics in Prometheus' text (refusals by bound, bytes in
 * flight, the bounds themselves), for /metrics. */
void ep_ingest_metrics(struct ep_ingest *in, FILE *out);

#endif
