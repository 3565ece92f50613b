/* SPDX-License-Identifier: Apache-2.0 */
/* Recursion: deep call/return chains whose branch counts follow Fibonacci. */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) static long fib(int n)
{
	return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 27;
	printf("%ld\n", fib(n));
	return 0;
}
