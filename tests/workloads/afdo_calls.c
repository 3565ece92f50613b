/* SPDX-License-Identifier: Apache-2.0 */
/* A sample profile's checkable shape: hot() is called 100 times as often as
 * cold(), runs a loop of 40 trips per call, mix() is inlined into main
 * (a callsite the sample profile names), and never() does not run with one
 * argument (no samples: a cold function, as instrumented PGO would make it).
 * Built with clang (the pragma). */
#include <stdio.h>
#include <stdlib.h>

static volatile unsigned sink;

__attribute__((noinline)) static unsigned hot(unsigned x)
{
	unsigned s = x;
#pragma clang loop vectorize(disable) unroll(disable)
	for (unsigned i = 0; i < 40; i++)
		s = s * 2654435761u + (s >> 13) + i;
	return s;
}

__attribute__((noinline)) static unsigned cold(unsigned x)
{
	return x * 7 + (x >> 3);
}

__attribute__((noinline)) static unsigned never(unsigned x)
{
	for (unsigned i = 0; i < x % 7; i++)
		x = x * 31 + (x >> 7);
	return x;
}

static inline unsigned mix(unsigned a, unsigned b)
{
	return (a << 5) ^ (a >> 2) ^ b;
}

int main(int argc, char **argv)
{
	unsigned n = argc > 1 ? (unsigned)strtoul(argv[1], 0, 10) : 100000;
	unsigned s = 0;
	for (unsigned i = 0; i < n; i++) {
		s = mix(s, hot(i));
		if (i % 100 == 0)
			s = mix(s, cold(s));
	}
	if (argc > 2)
		s = never(s);
	sink = s;
	printf("%u\n", s);
	return 0;
}
