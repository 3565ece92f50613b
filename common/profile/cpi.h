/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Cycles per function from a profile's cycles (Range.cycles over
 * Range.cycled_instructions, and IpCount.cycles at addresses no counted
 * range holds): what `report --cpi`, the JSON export and the web UI give
 * per function, summed one way for all of them.
 */
#ifndef EP_CPI_H
#define EP_CPI_H

#include <stddef.h>
#include <stdint.h>

#include "profile.pb-c.h"

struct ep_cpi_sum {
	uint64_t cycles, insns; /* of the counted ranges */
	uint64_t outside;	/* IP samples' cycles in no counted range */
};

/* Index of the function holding addr among nfuncs, or -1. */
typedef long (*ep_cpi_function_of)(const void *ctx, uint64_t addr);

/* Sums per function (*per_func, nfuncs + 1 of them, the last for addresses
 * in no function; free() it) and over the binary. A range goes to the
 * function holding its end (its branch). 0, or -1 when memory runs out. */
int ep_cpi_sums(const Edgeprof__V1__BinaryProfile *bp, size_t nfuncs,
		ep_cpi_function_of function_of, const void *ctx, struct ep_cpi_sum **per_func,
		struct ep_cpi_sum *total);

/* All the time measured in a sum: its ranges' and the outside IPs'. */
uint64_t ep_cpi_time(const struct ep_cpi_sum *s);

/* Cycles per instruction over the counted ranges; 0 when none has any. */
double ep_cpi_of(const struct ep_cpi_sum *s);

#endif
