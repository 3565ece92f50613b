/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target over the collector's HTTP front: its request parsing
 * (libmicrohttpd's, then the routes, query strings, headers and bodies of
 * collector/server/server.c) and the answers behind it (collector/api,
 * collector/sessions, collector/ingest over an SQLite store in /dev/shm).
 * The input is the bytes a client sends on one connection, any number of
 * requests; the collector runs as `edgeprof collector` runs it (no token,
 * no TLS: every route is open), on loopback, except that one thread serves
 * every connection (one_thread: ~4x the inputs a second under ASan; the
 * same parsing and answers, only libmicrohttpd's event loop differs; the
 * thread-per-connection loop is what tests/integration's load and
 * slow-client tests drive). Each input is sent, the
 * sending side shut, and the answer read to the end. Invariants: the
 * collector answers or closes within the time limit (a hang is a finding),
 * whatever it answers starts as HTTP/1.x, and it never crashes. The store
 * is started afresh every RESTART inputs, so it stays small.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "collector/ingest/ingest.h"
#include "collector/server/server.h"
#include "collector/sessions/sessions.h"
#include "collector/store/store.h"
#include "common/util/log.h"
#include "tests/fuzz/fuzz_util.h"

#define FAIL(...) EP_FUZZ_FAIL("fuzz_http", __VA_ARGS__)
#define RESTART	  5000
/* an answer taking longer is a hang: far above what a loaded machine takes */
#define ANSWER_MS 20000

static struct {
	char dir[64];
	struct ep_store *store;
	struct ep_ingest *ingest;
	struct ep_sessions *sessions;
	struct ep_server *server;
	unsigned port;
	unsigned inputs;
} c;

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(path);
}

static void stop(void)
{
	ep_server_stop(c.server);
	ep_sessions_free(c.sessions);
	ep_ingest_free(c.ingest);
	ep_store_close(c.store);
	c.server = NULL, c.sessions = NULL, c.ingest = NULL, c.store = NULL;
	if (c.dir[0])
		nftw(c.dir, remove_one, 8, FTW_DEPTH | FTW_PHYS);
	c.dir[0] = '\0';
}

static const char *store_base(void)
{
	return access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
}

/* libFuzzer leaves with _Exit when it is stopped or finds a crash, so
 * stop() never runs and the store stays behind, in memory when in
 * /dev/shm: each run removes those whose process is gone (named by pid). */
static void remove_stale_stores(void)
{
	DIR *d = opendir(store_base());
	struct dirent *de;
	while (d && (de = readdir(d))) {
		int pid;
		char path[PATH_MAX];
		if (sscanf(de->d_name, "edgeprof-fuzz-http-%d-", &pid) != 1 || pid <= 0 ||
		    kill(pid, 0) == 0 || errno != ESRCH)
			continue;
		snprintf(path, sizeof(path), "%s/%s", store_base(), de->d_name);
		nftw(path, remove_one, 8, FTW_DEPTH | FTW_PHYS);
	}
	if (d)
		closedir(d);
}

static void start(void)
{
	snprintf(c.dir, sizeof(c.dir), "%s/edgeprof-fuzz-http-%d-XXXXXX", store_base(),
		 (int)getpid());
	if (!mkdtemp(c.dir))
		FAIL("mkdtemp %s: %s", c.dir, strerror(errno));
	char spec[128], err[512];
	snprintf(spec, sizeof(spec), "sqlite:%s/store.db", c.dir);
	struct ep_ingest_config ic = {0};
	struct ep_sessions_config sc = {0};
	struct ep_server_config cfg = {
	    .listen = "127.0.0.1:0", .max_body = 1 << 20, .one_thread = true};
	c.store = ep_store_open(spec, err, sizeof(err));
	c.ingest = c.store ? ep_ingest_new(c.store, &ic, err, sizeof(err)) : NULL;
	c.sessions = c.ingest ? ep_sessions_new(c.store, &sc, err, sizeof(err)) : NULL;
	c.server = c.sessions
		       ? ep_server_start(&cfg, c.store, c.ingest, c.sessions, err, sizeof(err))
		       : NULL;
	if (!c.server)
		FAIL("cannot start the collector: %s", err);
	c.port = ep_server_port(c.server);
}

/* libmicrohttpd frees a closed connection from its own thread, after the
 * client has seen the connection end: libFuzzer's leak check after an
 * input (-detect_leaks) then found one in flight now and then (456 + 16
 * bytes, its struct and address), never at exit after hundreds of runs of
 * the same input. So leaks are checked once, at exit, after stop() has
 * stopped the collector and freed everything (LeakSanitizer's own check),
 * where a leak of ours still shows with its stack. */
static void no_per_input_leak_check(int *argc, char ***argv)
{
	static char flag[] = "-detect_leaks=0";
	char **args = calloc((size_t)*argc + 2, sizeof(*args));
	if (!args)
		return;
	memcpy(args, *argv, (size_t)*argc * sizeof(*args));
	args[(*argc)++] = flag;
	*argv = args;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	no_per_input_leak_check(argc, argv);
	ep_log_set_level(EP_LOG_ERROR);
	remove_stale_stores();
	start();
	atexit(stop);
	return 0;
}

/* libFuzzer's timeout alarm (SIGALRM, no SA_RESTART) can land in a
 * connect() held up by a loaded machine (17 s once, under make test, with no
 * SYN retransmitted), which then fails with EINTR while the connection goes
 * on being made: wait for it, as connect(2) says. */
static void wait_connected(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	int r;
	while ((r = poll(&p, 1, ANSWER_MS)) < 0 && errno == EINTR)
		;
	int e = 0;
	socklen_t len = sizeof(e);
	if (r == 0)
		FAIL("cannot connect to the collector: no answer in %d ms", ANSWER_MS);
	if (r < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) != 0)
		FAIL("cannot connect to the collector: %s", strerror(errno));
	if (e)
		FAIL("cannot connect to the collector: %s", strerror(e));
}

static int connect_collector(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)c.port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0)
		FAIL("cannot make a socket: %s", strerror(errno));
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		if (errno != EINTR)
			FAIL("cannot connect to the collector: %s", strerror(errno));
		wait_connected(fd);
	}
	return fd;
}

/* Sends what it can: the collector may answer and close before reading
 * everything (a refused body). */
static void send_all(int fd, const uint8_t *data, size_t size)
{
	while (size) {
		ssize_t n = send(fd, data, size, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		data += n;
		size -= (size_t)n;
	}
}

static void read_answer(int fd)
{
	char buf[65536];
	size_t total = 0;
	char head[8] = "";
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int r = poll(&p, 1, ANSWER_MS);
		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0)
			FAIL("no answer, and the connection still open, after %d ms", ANSWER_MS);
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (total < sizeof(head) - 1) {
			size_t k = sizeof(head) - 1 - total;
			memcpy(head + total, buf, (size_t)n < k ? (size_t)n : k);
		}
		total += (size_t)n;
	}
	if (total >= 7 && memcmp(head, "HTTP/1.", 7) != 0)
		FAIL("answer starts '%.7s', not HTTP/1.x", head);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (++c.inputs % RESTART == 0) {
		stop();
		start();
	}
	int fd = connect_collector();
	send_all(fd, data, size);
	shutdown(fd, SHUT_WR);
	read_answer(fd);
	close(fd);
	return 0;
}
