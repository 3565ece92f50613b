/* SPDX-License-Identifier: Apache-2.0 */
/* A known call chain for agent --stacks: main -> outer -> inner, inner
 * spinning. Built with and without frame pointers, the stacks must read
 * inner <- outer <- main, or be flagged. */
#include <stdio.h>
#include <stdlib.h>

volatile unsigned long sink;

__attribute__((noinline)) static void tick(unsigned long x)
{
	sink = x;
}

/* Not a leaf: gcc 12 and clang 14 give a leaf no frame even with
 * -fno-omit-frame-pointer, and a frame-pointer walk from a leaf skips its
 * caller (the agent flags such stacks). */
__attribute__((noinline)) static unsigned long inner(unsigned long n)
{
	unsigned long x = 1;
	for (unsigned long i = 0; i < n; i++) {
		x = x * 6364136223846793005UL + i;
		if ((i & 0xfffff) == 0)
			tick(x);
	}
	return x;
}

__attribute__((noinline)) static unsigned long outer(unsigned long n)
{
	/* work after the call: a tail call would leave outer off the stack */
	return inner(n) ^ (sink = n);
}

int main(int argc, char **argv)
{
	unsigned long n = argc > 1 ? strtoul(argv[1], NULL, 10) : 1000000000UL;
	for (;;) {
		sink += outer(n);
		if (argc > 2)
			break;
	}
	printf("%lu\n", sink);
	return 0;
}
