/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Chop stage (SPEC step 4): keep the last C branches of a full branch trace,
 * ending at the trigger. Each sample then contributes exactly C branches and
 * one is taken every ~P branches, so every executed branch is counted with
 * the same probability C/P: the profile is uniform. C = 0 keeps everything,
 * the way perf2bolt and AutoFDO count whole stacks (biased; for comparison).
 */
#ifndef EP_CHOP_H
#define EP_CHOP_H

#include <stddef.h>
#include <stdint.h>

#include "agent/reconstruct/reconstruct.h"

struct ep_chop_stats {
	uint64_t branches_kept;
	/* Slots of the C a cut left empty: the trace after the last cut was
	 * shorter than C. Large values mean the uniformity guarantee is weak. */
	uint64_t branches_short;
};

/* Index of the first branch of trace to count. Never reaches back over a
 * cut: a trace is only known to be contiguous after its last cut. */
size_t ep_chop(const struct ep_trace *trace, unsigned chop, struct ep_chop_stats *stats);

/* The chop when the sampled event counts taken branches only: the last C
 * taken branches, each with the not-taken ones between it and the taken
 * branch before it. The samples fall every ~P taken branches, and each
 * branch, taken or not, is then in the counted part of exactly C of the
 * possible sample points, so the profile is uniform without throwing half
 * of each stack away (a chop in branches would be biased here: it reaches
 * back over fewer taken branches where not-taken ones are dense). C = N-1
 * of an N-entry stack keeps all of it but the oldest entry's branch, whose
 * gap before it is unknown. The first range of what is kept is known (it
 * starts at a taken branch's target): count it. Slots: taken branches. */
size_t ep_chop_taken(const struct ep_trace *trace, unsigned chop, struct ep_chop_stats *stats);

#endif
