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
