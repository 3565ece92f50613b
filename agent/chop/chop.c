/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/chop/chop.h"

size_t ep_chop(const struct ep_trace *trace, unsigned chop, struct ep_chop_stats *stats)
{
	if (chop == 0) {
		stats->branches_kept += trace->n;
		return 0;
	}
	size_t first = trace->n > chop ? trace->n - chop : 0;
	if (first < trace->last_cut)
		first = trace->last_cut;
	size_t kept = trace->n - first;
	stats->branches_kept += kept;
	/* an empty trace (no usable stack) is not a short one */
	if (trace->n > 0 && kept < chop)
		stats->branches_short += chop - kept;
	return first;
}

size_t ep_chop_taken(const struct ep_trace *trace, unsigned chop, struct ep_chop_stats *stats)
{
	/* from the newest back: the (C+1)-th taken branch, or the oldest one
	 * after the last cut, bounds what is kept (exclusive) */
	size_t bound = SIZE_MAX;
	unsigned taken = 0;
	for (size_t k = trace->n; k-- > trace->last_cut;) {
		if (!trace->branches[k].taken)
			continue;
		bound = k;
		if (taken++ == chop)
			break;
	}
	if (bound == SIZE_MAX)
		return trace->n; /* no taken branch: no pair is whole */
	/* the branch at bound closes the pair before the counted ones */
	unsigned kept_taken = taken - 1;
	stats->branches_kept += trace->n - (bound + 1);
	if (kept_taken < chop)
		stats->branches_short += chop - kept_taken;
	return bound + 1;
}
