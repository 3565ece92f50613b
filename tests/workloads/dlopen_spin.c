/* SPDX-License-Identifier: Apache-2.0 */
/* Loads a shared library late, after its first samples were taken, and
 * spins in it: the agent must find code mapped after a process's start.
 * usage: dlopen_spin LIB.so SLEEP_MS SECONDS [GO_FILE] (the library
 * exports unsigned long lib_spin(unsigned long n)). With GO_FILE it spins
 * until that file exists before the SLEEP_MS count starts: a test creates
 * it once the agent samples, whose start a loaded machine can make longer
 * than any SLEEP_MS (the library was then mapped before the agent looked). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

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
		fprintf(stderr, "usage: dlopen_spin LIB.so SLEEP_MS SECONDS [GO_FILE]\n");
		return 2;
	}
	while (argc > 4 && access(argv[4], F_OK) != 0)
		busy_ms(10);
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
