/* SPDX-License-Identifier: Apache-2.0 */
/* The second file of bolt_mix.c's program: another static `step`. */
static __attribute__((noinline)) long step(long x)
{
	long s = 0;
	for (int i = 0; i < 16; i++)
		s += (x >> i) & 3 ? x % (i + 3) : i;
	return s;
}

long mix_b(long x, int round)
{
	long t = 0;
	for (int i = 0; i < 4 + (round & 3); i++)
		t += step(x + i);
	return t;
}
