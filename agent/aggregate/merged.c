/* SPDX-License-Identifier: Apache-2.0 */
/* Several aggregators' counts of one binary (import --jobs: each counted a
 * share of one recording) summed by common/profile/merge, the one place
 * profiles are summed. */
#include <stdlib.h>
#include <string.h>

#include "agent/aggregate/aggregate_internal.h"
#include "common/profile/merge.h"

Edgeprof__V1__BinaryProfile *ep_agg_sum_counts(struct ep_aggregator *const *aggs, size_t n,
					       uint32_t index)
{
	struct ep_merge *m = ep_merge_new();
	int rc = m ? 0 : -1;
	for (size_t i = 0; i < n && rc == 0; i++) {
		if (!ep_agg_counts_binary(aggs[i], index))
			continue;
		Edgeprof__V1__BinaryProfile *part = ep_agg_counts(aggs[i], index);
		rc = part ? ep_merge_add(m, 0, part, NULL) : -1;
		if (part)
			protobuf_c_message_free_unpacked(&part->base, NULL);
	}
	struct ep_merged out = {0};
	if (rc == 0)
		rc = ep_merge_build(m, &out);
	ep_merge_free(m);
	Edgeprof__V1__BinaryProfile *bp =
	    rc == 0 && out.n == 1 ? ep_merged_take_profile(&out, 0) : NULL;
	ep_merged_free(&out);
	if (bp) {
		/* the parts carry no names: the profile's build gives them */
		free(bp->build_id);
		free(bp->arch);
		bp->build_id = bp->arch = NULL;
	}
	return bp;
}
