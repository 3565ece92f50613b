/* SPDX-License-Identifier: Apache-2.0 */
/* Built to alias with a fixed sampling period: every iteration takes one of
 * 16 arms, chosen by the iteration number, through the same number of
 * branches, so the branch pattern repeats every 16 iterations. A fixed
 * period that is a multiple of the pattern's length in branches samples the
 * same arms every time; a randomized period does not. */
#include <stdio.h>
#include <stdlib.h>

/* volatile stores keep every arm a real branch: a compiler may not turn a
 * store into a conditional move */
static volatile long sink, arm[16];

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	long acc = 0;
	for (long i = 0; i < n; i++) {
		unsigned k = (unsigned)i & 15;
		/* 15 conditional branches plus the loop's back edge */
		if (k == 0)
			arm[0] = i;
		if (k == 1)
			arm[1] = i;
		if (k == 2)
			arm[2] = i;
		if (k == 3)
			arm[3] = i;
		if (k == 4)
			arm[4] = i;
		if (k == 5)
			arm[5] = i;
		if (k == 6)
			arm[6] = i;
		if (k == 7)
			arm[7] = i;
		if (k == 8)
			arm[8] = i;
		if (k == 9)
			arm[9] = i;
		if (k == 10)
			arm[10] = i;
		if (k == 11)
			arm[11] = i;
		if (k == 12)
			arm[12] = i;
		if (k == 13)
			arm[13] = i;
		if (k == 14)
			arm[14] = i;
		acc += k;
	}
	printf("%ld\n", acc);
	return 0;
}
