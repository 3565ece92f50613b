/* SPDX-License-Identifier: Apache-2.0 */
/* Loads a shared library late, after its first samples were taken, and
 * spins in it: the agent must find code mapped after a process's start.
 * usage: dlopen_spin LIB.so SLEEP_MS SECONDS (the library exports
 * unsigned long lib_spin(unsigned long n)). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;

/* busy before the dlopen, so the process is sampled (and its maps read)
 * while the library is not there yet */
static void busy_ms(long ms)
{
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		for (int i = 0; i < 100000; i++)
			sink += (unsigned long)i * 7;
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: dlopen_spin LIB.so SLEEP_MS SECONDS\n");
		return 2;
	}
	busy_ms(atol(argv[2]));
	void *lib = dlopen(argv[1], RTLD_NOW);
	if (!lib) {
		fprintf(stderr, "%s\n", dlerror());
		return 1;
	}
	unsigned long (*spin)(unsigned long) =
	    (unsigned long (*)(unsigned long))(size_t)dlsym(lib, "lib_spin");
	if (!spin) {
		fprintf(stderr, "%s\n", dlerror());
		return 1;
	}
	time_t end = time(NULL) + atol(argv[3]);
	while (time(NULL) < end)
		sink += spin(1000000);
	printf("%lu\n", sink);
	dlclose(lib);
	return 0;
}
