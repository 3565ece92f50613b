/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Sums binary profiles that come in pieces, the one place profiles are
 * summed: the collector folds many agents' batches into one set of rows
 * per (time bucket, binary, label set) before a single store write
 * (pre-aggregation), the agent folds its per-interval deltas into the
 * cumulative profile it writes with -o and its label sets into one profile
 * per binary, and import --jobs sums its threads' counts of each binary.
 * Edges are keyed by (from, to, taken, from_external, to_external), ranges
 * by (start, end), IPs by address; functions, segments and paths are kept
 * once per binary.
 */
#ifndef EP_MERGE_H
#define EP_MERGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ingest.pb-c.h"
#include "profile.pb-c.h"

struct ep_merge;

struct ep_merged_slice {
	int64_t bucket;
	Edgeprof__V1__BinaryDelta *delta; /* owned by the ep_merged array */
	bool ns;			  /* its cycles are nanoseconds (ep_merge_add_unit) */
};

struct ep_merged {
	struct ep_merged_slice *slices;
	size_t n;
};

struct ep_merge *ep_merge_new(void);
void ep_merge_free(struct ep_merge *m);

/* Adds d's counts to the slice (bucket, d's build-id, d's labels). labels
 * may be NULL (all empty). 0, or -1 when memory runs out (m unchanged for
 * the counts not yet added: the caller drops the whole merge then). */
int ep_merge_add(struct ep_merge *m, int64_t bucket, const Edgeprof__V1__BinaryProfile *bp,
		 const Edgeprof__V1__Labels *labels);
/* The same, ns saying whether bp's cycles (Range.cycles, IpCount.cycles)
 * are nanoseconds (config.cycles_unit "ns": cpu-clock stood in): those are
 * kept in slices of their own, so that the collector never adds one node's
 * nanoseconds to another's cycles. */
int ep_merge_add_unit(struct ep_merge *m, int64_t bucket, const Edgeprof__V1__BinaryProfile *bp,
		      const Edgeprof__V1__Labels *labels, bool ns);

/* Rows held (edges + ranges + IPs over all slices): what bounds memory. */
size_t ep_merge_rows(const struct ep_merge *m);
size_t ep_merge_slices(const struct ep_merge *m);

/* The sums as messages, slices by (bucket, build-id, labels), edges in
 * ep_edge_cmp order, ranges by (start, end), IPs by address. 0 or -1 when
 * memory runs out. Release with ep_merged_free(). */
int ep_merge_build(const struct ep_merge *m, struct ep_merged *out);
void ep_merged_free(struct ep_merged *out);
/* Moves slice i's profile out of out, to the caller (out still frees the
 * rest of the slice). */
Edgeprof__V1__BinaryProfile *ep_merged_take_profile(struct ep_merged *out, size_t i);

/* Adds every counter of delta to into (the agent's running totals). */
void ep_stats_add(Edgeprof__V1__Stats *into, const Edgeprof__V1__Stats *delta);

/* Forgets everything (keeps the allocation for the next round). */
void ep_merge_clear(struct ep_merge *m);

#endif
