/* SPDX-License-Identifier: Apache-2.0 */
/* What BOLT must find by name in a branch profile (with bolt_mix_b.c):
 * static functions, two of them called `step` in different files (BOLT
 * names them step/1 and step/2), calls into libc through the PLT, a switch
 * compiled to a jump table, and loops. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

long mix_b(long x, int round);

/* a file-local with the same name as one in bolt_mix_b.c */
static __attribute__((noinline)) long step(long x)
{
	for (int i = 0; i < 8; i++)
		x = (x & 1) ? 3 * x + 1 : x / 2 + i;
	return x;
}

/* enough dense cases for GCC to use a jump table */
static __attribute__((noinline)) long dispatch(unsigned op, long x)
{
	switch (op & 15) {
	case 0:
		return x + 1;
	case 1:
		return x ^ 0x55;
	case 2:
		return x * 3;
	case 3:
		return x - 7;
	case 4:
		return x << 1;
	case 5:
		return x >> 1;
	case 6:
		return ~x;
	case 7:
		return x + 11;
	case 8:
		return x * 5;
	case 9:
		return x ^ 0x3c3c;
	case 10:
		return x - 100;
	default:
		return x;
	}
}

static int cmp_long(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 400;
	long v[64], total = 0;
	char buf[64];
	unsigned seed = 12345;
	for (int r = 0; r < rounds; r++) {
		for (int i = 0; i < 64; i++) {
			seed = seed * 1103515245u + 12345u;
			v[i] = dispatch(seed >> 16, step((long)(seed >> 8)));
		}
		qsort(v, 64, sizeof(v[0]), cmp_long);
		snprintf(buf, sizeof(buf), "%ld", v[r & 63]);
		total += (long)strlen(buf) + mix_b(v[0], r);
		if (memcmp(buf, "-1", 2) == 0)
			total++;
	}
	printf("%ld\n", total);
	return 0;
}
