/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Aggregate stage (SPEC step 5): counts the chopped branches per binary:
 * taken and not-taken edges, straight-line ranges (instruction frequency),
 * call edges and mispredictions. Counters are arrays indexed by the
 * decoder's dense site and range ids, so the hot path is array increments;
 * only indirect targets and edges between binaries use small per-site
 * tables. ep_aggregator_build() turns the counts into the profile message.
 */
#ifndef EP_AGGREGATE_H
#define EP_AGGREGATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/chop/chop.h"
#include "agent/decode/decoder_cache.h"
#include "agent/reconstruct/reconstruct.h"
#include "profile.pb-c.h"

enum ep_range_mode {
	EP_RANGES_SPLIT, /* a range ends at every branch, taken or not (default) */
	EP_RANGES_GAP,	 /* whole gaps between taken branches, AutoFDO's rule */
};

struct ep_aggregator;

/* decoders and binaries are borrowed: the pipeline owns them, and the
 * reconstructor gave the traces' site and range ids from the same decoders. */
struct ep_aggregator *ep_aggregator_new(struct ep_decoder_cache *decoders,
					struct ep_binary_registry *binaries,
					enum ep_range_mode range_mode);
void ep_aggregator_free(struct ep_aggregator *a);

/* Counts trace->branches[first..n). The range ending at the first counted
 * branch is counted only when count_first_range (the whole-stack mode):
 * under a chop the branch that opened it is not among the counted ones. */
void ep_aggregate_trace(struct ep_aggregator *a, const struct ep_trace *trace, size_t first,
			bool count_first_range);

/* The same for what ep_reconstruct_counted() found: spans newest first,
 * the range ending at the oldest branch counted only when
 * count_first_range. */
void ep_aggregate_spans(struct ep_aggregator *a, const struct ep_spans *spans,
			bool count_first_range);

/* Counts one span times times, every range with it; mispredicted: how
 * many of those times its branch was mispredicted. */
void ep_aggregate_span_times(struct ep_aggregator *a, const struct ep_span *span, uint64_t times,
			     uint64_t mispredicted);

/* Counts a sample IP (resolved) and a sample of its binary. */
void ep_aggregate_sample_ip(struct ep_aggregator *a, uint32_t bin, uint64_t vaddr);

/* agent --stacks: the distinct call stacks a profile holds at most
 * (docs/limits.md): each is up to EP_MAX_STACK_DEPTH frames of 12 bytes,
 * so about 15 MiB at worst. A new stack past it is dropped (Stats.stacks_dropped),
 * its sample's IP still counted. */
#define EP_STACKS_MAX 10000

/* One frame of a call stack, resolved: binary index and ELF address. */
struct ep_stack_frame {
	uint32_t bin;
	uint64_t vaddr;
};

/* Counts one sample's call stack, frames[0] its leaf (the sample IP,
 * counted with ep_aggregate_sample_ip as well), then its callers' call
 * sites. Kept in the leaf's binary's profile. Only ep_aggregator_build()
 * carries stacks: a merged build has none. */
void ep_aggregate_stack(struct ep_aggregator *a, const struct ep_stack_frame *frames, size_t n);
void ep_aggregator_set_max_stacks(struct ep_aggregator *a, size_t max);
/* Samples whose new stack was past the bound, since a was made. */
uint64_t ep_aggregator_stacks_dropped(const struct ep_aggregator *a);

/* agent --cycles: an IP sample of the cycles event (resolved), standing
 * for period cycles at vaddr. Summed per address; shared among the ranges
 * holding it when the profile is built (cycles_attr.h). */
void ep_aggregate_cycles_ip(struct ep_aggregator *a, uint32_t bin, uint64_t vaddr, uint64_t period);
/* Whether the profile's cycles come from IP samples, and the factor that
 * puts them on the counts' scale (SamplingConfig.cycles_scale): then every
 * counted range's cycled_instructions is count x its instructions. */
void ep_aggregator_set_ip_cycles(struct ep_aggregator *a, bool on, double scale);

/* Forgets every count (not the totals below): the next build holds only
 * what was counted since, which is how the agent streams deltas. */
void ep_aggregator_reset(struct ep_aggregator *a);

/* Sets in_use[i] for every binary i with counts not yet taken (since the
 * last reset): the registry must keep them. */
void ep_aggregator_mark_binaries(const struct ep_aggregator *a, uint8_t *in_use, size_t n);
/* Frees what was kept for the binaries with evicted[i] set (none has
 * counts): their indexes may name other binaries from now on. */
void ep_aggregator_forget_binaries(struct ep_aggregator *a, const uint8_t *evicted, size_t n);

/* Edges, ranges and IPs counted so far (for logs and tests). */
uint64_t ep_aggregator_branches(const struct ep_aggregator *a);
uint64_t ep_aggregator_ranges(const struct ep_aggregator *a);

/* The proto's name for a decoder branch kind. */
Edgeprof__V1__BranchKind ep_proto_branch_kind(uint8_t kind);

/* Builds the profile of everything counted: one BinaryProfile per binary
 * with counts, sorted by address. Free with ep_profile_free(). Stats and
 * config are filled by the caller. NULL when memory runs out. */
Edgeprof__V1__Profile *ep_aggregator_build(struct ep_aggregator *a);

/* The same for aggregators that each counted a share of one recording:
 * the sums, byte for byte what one aggregator counting everything builds
 * (fall-throughs and functions come from the summed counts). Their
 * registries must hold the same binaries at the same indexes (NULL
 * otherwise, and when memory runs out). */
Edgeprof__V1__Profile *ep_aggregator_build_merged(struct ep_aggregator *const *aggs, size_t n);

#endif
