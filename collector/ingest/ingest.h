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

#include "collector/store/store.h"

struct ep_ingest_config {
	unsigned commit_ms;	 /* extra wait before a commit, for more merging; 0: none */
	size_t max_pending_rows; /* back-pressure beyond this; 0: 4M */
	size_t max_batch_bytes;	 /* decompressed; 0: EP_WIRE_MAX_BATCH */
};

enum ep_ingest_result {
	EP_INGEST_STORED,
	EP_INGEST_DUPLICATE,
	EP_INGEST_BAD_REQUEST, /* undecodable, bad version, bad identity: never retry */
	EP_INGEST_TOO_LARGE,
	EP_INGEST_STORE_ERROR, /* retry later */
};

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
};

struct ep_ingest;

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

#endif
