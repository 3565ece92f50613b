/* SPDX-License-Identifier: Apache-2.0 */
/* Every instruction type the instruction mix tells apart, each in a loop of
 * its own with a known trip count: loads and stores, divides (integer and
 * floating point), vector arithmetic, atomics (lock add, cmpxchg, xchg),
 * indirect calls and a jump table, calls and returns. */
#include <stdio.h>
#include <stdlib.h>

static volatile long vsink;
static long counter;
static double vec_a[256], vec_b[256];

__attribute__((noinline)) static long divides(long n)
{
	long s = 1;
	double d = 1e9;
	for (long i = 1; i <= n; i++) {
		s += (s + 1000003) / i + (s % (i + 7));
		d = d / 1.0000001 + 1.0;
	}
	return s + (long)d;
}

__attribute__((noinline)) static double vectors(long n)
{
	double s = 0;
	for (long r = 0; r < n; r++)
		for (int i = 0; i < 256; i++) {
			vec_a[i] = vec_a[i] * 0.5 + vec_b[i];
			s += vec_a[i];
		}
	return s;
}

__attribute__((noinline)) static long atomics(long n)
{
	long old = 0;
	for (long i = 0; i < n; i++) {
		__atomic_fetch_add(&counter, 1, __ATOMIC_SEQ_CST);
		long expected = counter;
		__atomic_compare_exchange_n(&counter, &expected, expected + 1, 0, __ATOMIC_SEQ_CST,
					    __ATOMIC_SEQ_CST);
		old += __atomic_exchange_n(&counter, i, __ATOMIC_SEQ_CST);
	}
	return old;
}

__attribute__((noinline)) static long op_add(long x)
{
	return x + 3;
}
__attribute__((noinline)) static long op_mul(long x)
{
	return x * 5;
}
__attribute__((noinline)) static long op_xor(long x)
{
	return x ^ 0x55;
}

__attribute__((noinline)) static long dispatch(long n)
{
	static long (*const ops[])(long) = {op_add, op_mul, op_xor};
	long x = 1;
	for (long i = 0; i < n; i++) {
		x = ops[i % 3](x);
		switch ((x ^ i) & 7) {
		case 0:
			x += 11;
			break;
		case 1:
			x -= 3;
			break;
		case 2:
			x ^= 0x1234;
			break;
		case 3:
			x = x * 3 + 1;
			break;
		case 4:
			x >>= 1;
			break;
		case 5:
			x += i;
			break;
		case 6:
			x -= i >> 2;
			break;
		default:
			x = ~x;
		}
	}
	return x;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? strtol(argv[1], 0, 10) : 100000;
	for (int i = 0; i < 256; i++)
		vec_b[i] = i * 0.25;
	vsink = divides(n) + (long)vectors(n / 64) + atomics(n) + dispatch(n);
	printf("%ld\n", vsink);
	return 0;
}
