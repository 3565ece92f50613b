/* SPDX-License-Identifier: Apache-2.0 */
/* Searches of sorted arrays of addresses, written once. */
#ifndef EP_SORTED_U64_H
#define EP_SORTED_U64_H

#include <stddef.h>
#include <stdint.h>

/* Index of the first element of v (n of them, ascending) that is >= key;
 * n when there is none. */
static inline size_t ep_lower_bound_u64(const uint64_t *v, size_t n, uint64_t key)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid] < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

#endif
