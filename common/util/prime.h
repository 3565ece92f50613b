/* SPDX-License-Identifier: Apache-2.0 */
/* Sampling steps are prime so that only a loop exactly that long could line
 * up with them: the live agent's countdown step and the emulator's model of
 * it pick the same one. */
#ifndef EP_PRIME_H
#define EP_PRIME_H

#include <stdbool.h>
#include <stdint.h>

static inline bool ep_is_prime(uint64_t n)
{
	if (n < 2)
		return false;
	for (uint64_t d = 2; d * d <= n; d++)
		if (n % d == 0)
			return false;
	return true;
}

#endif
