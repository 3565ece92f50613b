/* SPDX-License-Identifier: Apache-2.0 */
/* One function of some 1,000 basic blocks (500 cases of a switch, each with a
 * branch of its own), run with a skewed choice of case so that block counts
 * range over orders of magnitude: the shape of an interpreter's dispatch
 * loop, the function a user opens first and the UI must still draw. */
#include <stdio.h>
#include <stdlib.h>

/* clang-format off */
#define CASE(n)                                                                \
	case n:                                                                \
		acc = acc * 31u + (n);                                         \
		if (acc & 4u) { /* a store: no conditional move */             \
			seen = (n);                                            \
			acc ^= acc >> ((n) % 7u + 1u);                         \
		}                                                              \
		break;
#define CASE10(t) CASE(t##0) CASE(t##1) CASE(t##2) CASE(t##3) CASE(t##4)      \
	CASE(t##5) CASE(t##6) CASE(t##7) CASE(t##8) CASE(t##9)
#define CASE100(h) CASE10(h##0) CASE10(h##1) CASE10(h##2) CASE10(h##3)        \
	CASE10(h##4) CASE10(h##5) CASE10(h##6) CASE10(h##7) CASE10(h##8) CASE10(h##9)

static volatile unsigned sink, seen;

__attribute__((noinline)) static unsigned dispatch(unsigned op, unsigned acc)
{
	switch (op) {
	CASE100(1) CASE100(2) CASE100(3) CASE100(4) CASE100(5)
	default:
		acc++;
	}
	return acc;
}
/* clang-format on */

int main(int argc, char **argv)
{
	unsigned long n = argc > 1 ? strtoul(argv[1], 0, 10) : 1000000;
	unsigned r = 1, acc = 0;
	for (unsigned long i = 0; i < n; i++) {
		r = r * 1103515245u + 12345u;
		unsigned x = r >> 8;
		/* small ops far more often than large ones: x % (1 + x % 500) */
		acc = dispatch(100u + x % (1u + x % 500u), acc);
	}
	sink = acc;
	printf("%u\n", sink);
	return 0;
}
