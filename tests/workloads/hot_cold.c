/* SPDX-License-Identifier: Apache-2.0 */
/* A program with one hot function and one cold one, in a known ratio: a
 * workload whose profile is easy to check. */
#include <stdio.h>
#include <stdlib.h>
static volatile unsigned long sink;
__attribute__((noinline)) static unsigned long hot_loop(unsigned long n)
{
	unsigned long s = 0;
	for (unsigned long i = 0; i < n; i++)
		s += (i * 2654435761u) >> 7 ^ (s << 1);
	return s;
}
__attribute__((noinline)) static unsigned long cold_loop(unsigned long n)
{
	unsigned long s = 0;
	for (unsigned long i = 0; i < n; i++)
		s ^= i;
	return s;
}
int main(int argc, char **argv)
{
	unsigned long n = argc > 1 ? strtoul(argv[1], 0, 10) : 200000000;
	sink = hot_loop(n) + cold_loop(n / 20);
	printf("%lu\n", sink);
	return 0;
}
