/* SPDX-License-Identifier: Apache-2.0 */
/* Ends badly on purpose, for the tests of what record does then: "crash"
 * dies of SIGSEGV after some work, "fail" exits with status 3. */
#include <stdio.h>
#include <string.h>

static volatile long sink;

int main(int argc, char **argv)
{
	for (long i = 0; i < 3000000; i++)
		if (i % 3 == 0)
			sink += i;
	if (argc > 1 && strcmp(argv[1], "crash") == 0) {
		volatile int *nowhere = NULL;
		*nowhere = 1;
	}
	return argc > 1 && strcmp(argv[1], "fail") == 0 ? 3 : 0;
}
