/* SPDX-License-Identifier: Apache-2.0 */
/* Data-dependent branches over pseudo-random data (a fixed seed): taken
 * with probabilities 1/2, 1/8 and 7/8, unpredictable to a predictor. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 2000000;
	uint64_t x = 88172645463325252ULL, a = 0, b = 0, c = 0;
	for (long i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		if (x & 1)
			a++;
		if ((x >> 8 & 7) == 0)
			b += i;
		if ((x >> 16 & 7) != 0)
			c ^= x;
	}
	printf("%llu %llu %llu\n", (unsigned long long)a, (unsigned long long)b,
	       (unsigned long long)c);
	return 0;
}
