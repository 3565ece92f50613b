/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The aggregator's counters as its files share them: count.c fills them
 * per branch (the hot path), message.c turns them into a BinaryProfile,
 * fallthrough.c adds the fall-throughs no branch records, merged.c sums
 * several aggregators' messages. Included from agent/aggregate/ only.
 */
#ifndef EP_AGGREGATE_INTERNAL_H
#define EP_AGGREGATE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/aggregate/aggregate.h"
#include "common/util/u64map.h"

/* Targets of one site that has no fixed target (indirect jumps and calls,
 * returns, branches into other binaries). Kept as a short unsorted list:
 * most such sites have a handful of targets. */
struct target_count {
	uint64_t to;
	uint64_t count;
	uint64_t mispredicted;
	uint64_t cycles, cycled_insns; /* whole-gap ranges: see Range in profile.proto */
	uint32_t insns;		       /* whole-gap ranges: the gap's instructions */
	bool external;
};

struct target_list {
	uint32_t n, cap;
	struct target_count *items;
};

struct bin_counts {
	bool active;
	uint64_t samples;
	uint32_t site_cap;
	uint64_t *taken;
	uint64_t *taken_mispredicted;
	uint64_t *not_taken;
	uint32_t range_cap;
	uint64_t *ranges;
	/* the cycles of the branch records, by the range ending at their source,
	 * and the instructions of the straight lines they measured */
	uint64_t *range_cycles, *range_cycled_insns;
	uint32_t *site_list;	     /* site -> 1 + its index in lists, 0: none */
	struct ep_u64map gap_ranges; /* gap start -> index in lists (to = end) */
	struct target_list *lists;
	size_t nlists, lists_cap;
	struct ep_u64map from_external; /* target vaddr -> count */
	struct ep_u64map ips;		/* sample IP -> count */
	/* agent --cycles: IP -> the cycles event's periods summed there,
	 * attributed to ranges when the profile is built (cycles_attr.h) */
	struct ep_u64map ip_cycles;
};

struct ep_aggregator {
	struct ep_decoder_cache *decoders;
	struct ep_binary_registry *binaries;
	enum ep_range_mode range_mode;
	struct bin_counts *bins;
	size_t nbins;
	uint64_t branches;
	uint64_t ranges;
	/* cycles from IP samples (ep_aggregator_set_ip_cycles): every counted
	 * range gets count x instructions as the instructions its cycles ran */
	bool ip_cycles;
	double cycles_scale;
	struct ep_agg_stacks *stacks; /* agent --stacks (stacks.c); NULL: none yet */
};

/* stacks.c: freed, forgotten at a reset, their binaries kept, and the
 * stacks whose leaf is in binary index added to its bp (and
 * stack_samples_no_frame_pointer): 0, or -1 when memory runs out. */
void ep_agg_stacks_free(struct ep_aggregator *a);
void ep_agg_stacks_reset(struct ep_aggregator *a);
void ep_agg_stacks_mark(const struct ep_aggregator *a, uint8_t *in_use, size_t n);
int ep_agg_stacks_attach(struct ep_aggregator *a, uint32_t index, Edgeprof__V1__BinaryProfile *bp);

/* Whether a counted anything of binary index since its last reset. */
static inline bool ep_agg_counts_binary(const struct ep_aggregator *a, uint32_t index)
{
	return index < a->nbins && a->bins[index].active;
}

/* A growable array of edges, each its own message. */
struct ep_agg_edges {
	Edgeprof__V1__Edge **items;
	size_t n, cap;
};

/* Appends an initialised edge; NULL when memory runs out. */
Edgeprof__V1__Edge *ep_agg_edge_push(struct ep_agg_edges *v);

/* Binary index's counts in a: samples, edges, ranges and IPs, each sorted;
 * no names, and no fall-throughs yet: those are made from every
 * aggregator's counts at once. NULL when memory runs out. */
Edgeprof__V1__BinaryProfile *ep_agg_counts(struct ep_aggregator *a, uint32_t index);

/* Binary index's counts summed over the aggregators that have any, as
 * ep_agg_counts() gives them, with no names yet. NULL when memory
 * runs out. */
Edgeprof__V1__BinaryProfile *ep_agg_sum_counts(struct ep_aggregator *const *aggs, size_t n,
					       uint32_t index);

/* Adds the fall-through edges between blocks that no branch joins to bp
 * (its ranges sorted by start), keeping its edges sorted. */
int ep_agg_fallthroughs(struct ep_decoder *dec, const struct ep_binary *bin,
			Edgeprof__V1__BinaryProfile *bp);

#endif
