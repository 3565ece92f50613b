/* SPDX-License-Identifier: Apache-2.0 */
/* Calls into a shared library (libc): qsort with a callback back into this
 * binary, strlen and memcmp, so branches cross between two binaries. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 200;
	int v[512];
	char s[64];
	long total = 0;
	unsigned seed = 7;
	for (int r = 0; r < rounds; r++) {
		for (int i = 0; i < 512; i++) {
			seed = seed * 1664525u + 1013904223u;
			v[i] = (int)(seed >> 8);
		}
		qsort(v, 512, sizeof(v[0]), cmp_int);
		snprintf(s, sizeof(s), "round %d first %d", r, v[0]);
		total += (long)strlen(s) + (memcmp(s, "round 1", 7) == 0);
	}
	printf("%ld\n", total);
	return 0;
}
