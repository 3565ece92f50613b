/* SPDX-License-Identifier: Apache-2.0 */
/* Two builds of one program, for profiles that must survive a new build:
 * built plain it is version A; with -DNEXT_BUILD it is version B, the same
 * program after a small edit of several functions (code inserted, so every
 * address after it moves and some blocks change), printing the same
 * output. Its hot branches go against __builtin_expect, so the compiler's
 * layout takes them and only a profile can lay them out straight: what a
 * stale profile is worth shows in the taken branches BOLT saves. */
#include <stdio.h>
#include <stdlib.h>

/* written by version B's new code, never printed: both print the same */
static volatile unsigned long audit;

#ifdef NEXT_BUILD
/* new code before the hot functions: each of them moves */
static __attribute__((noinline)) void note(unsigned long x)
{
	if ((x & 0xffff) == 0x1234)
		audit += x >> 3;
}
#endif

static __attribute__((noinline)) unsigned long classify(unsigned long x)
{
	unsigned long r;
#ifdef NEXT_BUILD
	note(x);
#endif
	if (__builtin_expect((x & 7) != 0, 0))
		r = x * 3 + 1;
	else
		r = x >> 1;
	if (__builtin_expect((x & 48) != 48, 0))
		r ^= 0x5a5a;
	return r;
}

static __attribute__((noinline)) unsigned long mix(unsigned long a, unsigned long b)
{
	unsigned long s = 0;
	for (int i = 0; i < 4; i++) {
		if (__builtin_expect(((a >> i) & 3) != 3, 0))
			s += a ^ (b << i);
		else
			s -= b;
#ifdef NEXT_BUILD
		if (__builtin_expect(s == 0x9e3779b9, 0))
			audit++;
#endif
	}
	return s;
}

static __attribute__((noinline)) unsigned long scan(const unsigned char *p, int n)
{
	unsigned long words = 0;
	int in = 0;
	for (int i = 0; i < n; i++) {
#ifdef NEXT_BUILD
		if (__builtin_expect(p[i] == 127, 0))
			audit++;
#endif
		if (__builtin_expect(p[i] > 40, 0)) {
			if (!in)
				words++;
			in = 1;
		} else {
			in = 0;
		}
	}
	return words;
}

static __attribute__((noinline)) unsigned long rare(unsigned long x)
{
	/* called once in 64: stays cold */
	for (int i = 0; i < 16; i++)
		x = x * 6364136223846793005ul + 1442695040888963407ul;
	return x;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 20000;
	unsigned char buf[64];
	unsigned long total = 0, seed = 12345;
	for (long r = 0; r < n; r++) {
		for (int i = 0; i < 64; i++) {
			seed = seed * 6364136223846793005ul + 1442695040888963407ul;
			buf[i] = (unsigned char)(seed >> 57);
		}
		total += scan(buf, 64);
		total += mix(classify(seed), seed >> 17);
#ifdef NEXT_BUILD
		note(total);
#endif
		if (__builtin_expect((r & 63) == 0, 1))
			total ^= rare(total);
	}
	printf("%lu\n", total);
	return 0;
}
