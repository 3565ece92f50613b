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

#endif
