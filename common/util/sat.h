/* SPDX-License-Identifier: Apache-2.0 */
/* Adding counts that came from elsewhere (agents, files): a sum past 2^64
 * stops at 2^64 - 1 instead of wrapping to a small number, which would
 * turn the hottest edge into a cold one. */
#ifndef EP_SAT_H
#define EP_SAT_H

#include <stdint.h>

static inline void ep_add_sat(uint64_t *into, uint64_t v)
{
	if (__builtin_add_overflow(*into, v, into))
		*into = UINT64_MAX;
}

#endif
