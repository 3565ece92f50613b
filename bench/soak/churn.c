/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a busy node does to an agent, for the soak (bench/soak/run.sh):
 *   churn execs RATE   fork+exec RATE short processes (/bin/true) a second
 *   churn dlopen RATE  dlopen, use and dlclose a library (libz) RATE times a
 *                      second, so mappings come and go inside one process
 * Runs until SIGTERM/SIGINT, then prints "churn_MODE: N" (N done) and exits 0.
 * The rate is kept over wall time (a late tick catches up, at most 1 s'
 * worth), so a loaded machine gets fewer only when it cannot keep up.
 */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;
static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int one_exec(void)
{
	pid_t pid;
	char *argv[] = {"true", NULL};
	if (posix_spawn(&pid, "/bin/true", NULL, NULL, argv, environ) != 0)
		return -1;
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return 0;
}

static int one_dlopen(void)
{
	void *h = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return -1;
	typedef unsigned long (*crc_fn)(unsigned long, const unsigned char *, unsigned);
	crc_fn crc;
	*(void **)&crc = dlsym(h, "crc32");
	static unsigned char buf[65536];
	unsigned long c = 0;
	if (crc)
		for (int i = 0; i < 4; i++)
			c = crc(c, buf, sizeof(buf));
	buf[c % sizeof(buf)]++;
	dlclose(h);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 3 || (strcmp(argv[1], "execs") != 0 && strcmp(argv[1], "dlopen") != 0)) {
		fprintf(stderr, "usage: churn execs|dlopen RATE\n");
		return 2;
	}
	char *end;
	double rate = strtod(argv[2], &end);
	if (*end || rate <= 0 || rate > 100000) {
		fprintf(stderr, "churn: RATE '%s': expected a number from 1 to 100000\n", argv[2]);
		return 2;
	}
	int (*one)(void) = strcmp(argv[1], "execs") == 0 ? one_exec : one_dlopen;
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	uint64_t done = 0, failed = 0;
	double t0 = now_s();
	while (!stop) {
		double due = (now_s() - t0) * rate;
		if ((double)done + (double)failed < due - rate)
			failed += (uint64_t)(due - rate -
					     (double)(done + failed)); /* give up a backlog */
		if ((double)(done + failed) < due) {
			if (one() == 0)
				done++;
			else
				failed++;
			continue;
		}
		struct timespec ts = {0, 5000000};
		nanosleep(&ts, NULL);
	}
	printf("churn_%s: %llu\n", argv[1], (unsigned long long)done);
	return 0;
}
