/* SPDX-License-Identifier: Apache-2.0 */
/* Branches that a signal cuts short: a fault in the middle of a block goes
 * to a SIGSEGV handler that jumps back (siglongjmp), and raise() enters a
 * SIGUSR1 handler on its way back from the kernel. The emulator then sees
 * a block followed by one that is neither its target nor its fall-through,
 * the path its tests must cover too. usage: signals N */
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

static sigjmp_buf back;
static volatile long faults, usr1;
static volatile int *volatile nowhere;

static void on_segv(int sig)
{
	(void)sig;
	faults++;
	siglongjmp(back, 1);
}

static void on_usr1(int sig)
{
	(void)sig;
	usr1++;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000;
	struct sigaction sa = {.sa_handler = on_segv};
	sigaction(SIGSEGV, &sa, NULL);
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);
	long sum = 0;
	for (long i = 0; i < n; i++) {
		for (long k = 0; k < 50; k++)
			sum += (i ^ k) & 3 ? k : -k;
		if (i % 3 == 0)
			raise(SIGUSR1);
		if (sigsetjmp(back, 1) == 0 && i % 2 == 0)
			sum += *nowhere; /* faults: the handler jumps back */
	}
	printf("%ld %ld %ld\n", sum, (long)faults, (long)usr1);
	return 0;
}
