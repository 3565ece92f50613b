/* SPDX-License-Identifier: Apache-2.0 */
/* Built to alias with a fixed sampling period. Every iteration runs the
 * same 15 conditional branches (written in assembly, so no compiler turns
 * them into conditional moves or a jump table) plus the loop's back edge;
 * which one falls through is chosen by the iteration number, so the branch
 * pattern repeats every 16 iterations = 256 branches. A fixed period that is
 * a multiple of 256 samples the same spot of the pattern every time; a
 * randomized period does not. */
#include <stdio.h>
#include <stdlib.h>

#define ARM(c) "cmp $" #c ", %[k]\n\tjne 1f\n\tinc %[acc]\n1:\n\t"

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	long acc = 0;
	for (long i = 0; i < n; i++) {
		long k = i & 15;
		__asm__ volatile(ARM(0) ARM(1) ARM(2) ARM(3) ARM(4) ARM(5) ARM(6) ARM(7) ARM(8)
				     ARM(9) ARM(10) ARM(11) ARM(12) ARM(13) ARM(14)
				 : [acc] "+r"(acc)
				 : [k] "r"(k)
				 : "cc");
	}
	printf("%ld\n", acc);
	return 0;
}
