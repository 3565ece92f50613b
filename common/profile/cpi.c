/* SPDX-License-Identifier: Apache-2.0 */
#include "common/profile/cpi.h"

#include <stdlib.h>

#include "common/util/sat.h"

int ep_cpi_sums(const Edgeprof__V1__BinaryProfile *bp, size_t nfuncs,
		ep_cpi_function_of function_of, const void *ctx, struct ep_cpi_sum **per_func,
		struct ep_cpi_sum *total)
{
	*total = (struct ep_cpi_sum){0};
	struct ep_cpi_sum *f = calloc(nfuncs + 1, sizeof(*f));
	if (!f)
		return -1;
	/* with IP samples' cycles a range they missed still ran its
	 * instructions (in an estimated 0 cycles): counted by its instructions */
	for (size_t i = 0; i < bp->n_ranges; i++) {
		const Edgeprof__V1__Range *r = bp->ranges[i];
		if (!r->cycles && !r->cycled_instructions)
			continue;
		long k = function_of(ctx, r->end);
		struct ep_cpi_sum *s = &f[k < 0 ? nfuncs : (size_t)k];
		ep_add_sat(&s->cycles, r->cycles);
		ep_add_sat(&s->insns, r->cycled_instructions);
		ep_add_sat(&total->cycles, r->cycles);
		ep_add_sat(&total->insns, r->cycled_instructions);
	}
	for (size_t i = 0; i < bp->n_ips; i++) {
		const Edgeprof__V1__IpCount *ip = bp->ips[i];
		if (!ip->cycles)
			continue;
		long k = function_of(ctx, ip->ip);
		ep_add_sat(&f[k < 0 ? nfuncs : (size_t)k].outside, ip->cycles);
		ep_add_sat(&total->outside, ip->cycles);
	}
	*per_func = f;
	return 0;
}

uint64_t ep_cpi_time(const struct ep_cpi_sum *s)
{
	uint64_t n = s->cycles;
	ep_add_sat(&n, s->outside);
	return n;
}

double ep_cpi_of(const struct ep_cpi_sum *s)
{
	return s->insns ? (double)s->cycles / (double)s->insns : 0.0;
}
