/* SPDX-License-Identifier: Apache-2.0 */
/*
 * edgeprof collector: receives agents' batches, merges them per build-id
 * into the store, serves profiles (collector/).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "collector/ingest/ingest.h"
#include "collector/server/server.h"
#include "collector/sessions/sessions.h"
#include "collector/store/store.h"
#include "common/elf/elf_image.h"
#include "common/util/log.h"
#include "common/util/options.h"
#include "common/util/output_file.h"

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: edgeprof collector --store sqlite:PATH|clickhouse:URL [--listen HOST:PORT]\n"
	    "       [--token-file F] [--upload-token-file F]\n"
	    "       [--tls-cert F --tls-key F [--client-ca F]]\n"
	    "       [--commit-ms MS] [--max-body BYTES] [--port-file F]\n"
	    "       [--retention-days D] [--max-session-s S] [--session-pickup-s S]\n"
	    "       [--node-silent-s S] [--max-sessions N] [--max-nodes N] [--header-timeout-s S]\n"
	    "       [--max-client-conns N] [--idle-timeout-s S] [--max-token-conns N]\n"
	    "       [--max-bodies-mib N] [--body-timeout-s S] [--body-min-rate KIB]\n"
	    "       [--max-binary-mib N] [--max-image-symbols-mib N] [--debuginfod URLS]\n"
	    "       [--max-batch KIND=N]... [--ingest-memory-mib N] [--max-page N]\n"
	    "       [--max-label-values N]\n"
	    "  --max-batch KIND=N  what one batch may hold, past it 400: binaries (65536),\n"
	    "                      edges, ranges, ips, functions (1048576 each), label-sets\n"
	    "                      (16384), mib (decompressed MiB, 64)\n"
	    "  --ingest-memory-mib N  heap for batches in flight and merged rows awaiting\n"
	    "                      their commit (default 384; a batch needing more: 413)\n"
	    "  --max-page N        binaries one list answer may hold (default 1000)\n"
	    "  --max-label-values N  label sets and values per label listed per binary\n"
	    "                      (default 100; past it counted and the most sampled)\n"
	    "  --listen HOST:PORT  default 127.0.0.1:7070; port 0 picks a free one; the web\n"
	    "                      UI is at / (sign in with the token when there is one)\n"
	    "  --max-binary-mib N  largest ELF file, and image of one, kept for the UI's\n"
	    "                      code views (POST /v1/images, debuginfod; default 64)\n"
	    "  --max-image-symbols-mib N  what one such file's tables read and symbols kept\n"
	    "                      may take (default 64; past it the rest is left out)\n"
	    "  --debuginfod URLS   fetch code not sent from these debuginfod servers (space\n"
	    "                      separated; default $DEBUGINFOD_URLS)\n"
	    "  --token-file F      bearer token required on /v1/ (file must not be "
	    "world-readable)\n"
	    "  --upload-token-file F  CI's token: only it sends trusted code (edgeprof upload)\n"
	    "                      to /v1/images, replacing agents' provisional code; without\n"
	    "                      it, --token-file's holders may\n"
	    "  --tls-cert/--tls-key  serve https; --client-ca also requires client "
	    "certificates\n"
	    "  --commit-ms MS      wait before each group commit, for more merging "
	    "(default 0)\n"
	    "  --port-file F       write the port listened on to F once ready\n"
	    "  --retention-days D  forget counts older than D days (default 30, 0: never)\n"
	    "  --max-session-s S   longest on-demand session accepted (default 600)\n"
	    "  --session-pickup-s S  a session no agent takes within S fails (default 30)\n"
	    "  --node-silent-s S   a node silent this long is not reporting (default 60)\n"
	    "  --header-timeout-s S  a connection without the token must send a whole\n"
	    "                      request header within S (default 10)\n"
	    "  --max-client-conns N  connections without the token from one address "
	    "(default 32)\n"
	    "  --idle-timeout-s S  a connection with the token idle this long between\n"
	    "                      requests is closed (default 15)\n"
	    "  --max-token-conns N  connections with the token from one address (default\n"
	    "                      16; behind a NAT or load balancer, raise it)\n"
	    "  --max-bodies-mib N  request bodies held at once, all connections (default\n"
	    "                      256); past it a body that fell behind --body-min-rate\n"
	    "                      is closed to make room, else the new one gets 503\n"
	    "  --body-timeout-s S  a body that falls S behind --body-min-rate is closed\n"
	    "                      (default 30)\n"
	    "  --body-min-rate KIB  KiB/s a request body must arrive at (default 64)\n"
	    "  --max-sessions N    on-demand sessions pending or running at once; past\n"
	    "                      it POST /v1/sessions gets 429 (default 256)\n"
	    "  --max-nodes N       nodes listed and offered sessions (default 20000);\n"
	    "                      batches of nodes past it are stored all the same\n");
}

/* What the command line sets up. */
struct collector_setup {
	struct ep_server_config server;
	struct ep_ingest_config ingest;
	struct ep_sessions_config sessions;
	const char *store_spec, *port_file;
	unsigned retention_days;
	unsigned max_binary_mib, max_image_symbols_mib;
	const char *debuginfod;
};

/* The setup from argv: 0, or -1 when the command ends here with *exit_code
 * (0 after --help, 2 after a usage error). */
static int parse_setup(int argc, char **argv, struct collector_setup *c, int *exit_code)
{
	*c = (struct collector_setup){.server = {.listen = "127.0.0.1:7070"}, .retention_days = 30};
	unsigned max_body = 0, max_bodies_mib = 0, body_min_rate_kib = 0, ingest_mib = 0,
		 max_page = 0, label_values = 0;
	const struct ep_option opts[] = {
	    EP_OPTION("store", 0, EP_OPT_STRING, &c->store_spec),
	    EP_OPTION("listen", 0, EP_OPT_STRING, &c->server.listen),
	    EP_OPTION("token-file", 0, EP_OPT_FILE, &c->server.token_file),
	    EP_OPTION("tls-cert", 0, EP_OPT_FILE, &c->server.tls_cert),
	    EP_OPTION("tls-key", 0, EP_OPT_FILE, &c->server.tls_key),
	    EP_OPTION("client-ca", 0, EP_OPT_FILE, &c->server.client_ca),
	    EP_OPTION("upload-token-file", 0, EP_OPT_FILE, &c->server.upload_token_file),
	    EP_OPTION("commit-ms", 0, EP_OPT_UINT, &c->ingest.commit_ms, .min = 1, .max = 1u << 30),
	    EP_OPTION("max-body", 0, EP_OPT_UINT, &max_body, .min = 1, .max = 1u << 30),
	    EP_OPTION("port-file", 0, EP_OPT_OUTPUT, &c->port_file),
	    EP_OPTION("max-binary-mib", 0, EP_OPT_UINT, &c->max_binary_mib, .min = 1, .max = 4096),
	    EP_OPTION("max-image-symbols-mib", 0, EP_OPT_UINT, &c->max_image_symbols_mib, .min = 1,
		      .max = 4096),
	    EP_OPTION("debuginfod", 0, EP_OPT_STRING, &c->debuginfod),
	    EP_OPTION("retention-days", 0, EP_OPT_UINT, &c->retention_days, .max = 100000),
	    EP_OPTION("max-session-s", 0, EP_OPT_UINT, &c->sessions.max_duration_s, .min = 1,
		      .max = 86400),
	    EP_OPTION("session-pickup-s", 0, EP_OPT_UINT, &c->sessions.pickup_s, .min = 1,
		      .max = 86400),
	    EP_OPTION("node-silent-s", 0, EP_OPT_UINT, &c->sessions.node_silent_s, .min = 1,
		      .max = 86400),
	    EP_OPTION("header-timeout-s", 0, EP_OPT_UINT, &c->server.header_timeout_s, .min = 1,
		      .max = 3600),
	    EP_OPTION("max-client-conns", 0, EP_OPT_UINT, &c->server.max_client_conns, .min = 1,
		      .max = 512),
	    EP_OPTION("idle-timeout-s", 0, EP_OPT_UINT, &c->server.idle_timeout_s, .min = 1,
		      .max = 3600),
	    EP_OPTION("max-token-conns", 0, EP_OPT_UINT, &c->server.max_token_conns, .min = 1,
		      .max = 512),
	    EP_OPTION("max-bodies-mib", 0, EP_OPT_UINT, &max_bodies_mib, .min = 1, .max = 65536),
	    EP_OPTION("body-timeout-s", 0, EP_OPT_UINT, &c->server.body_timeout_s, .min = 1,
		      .max = 3600),
	    EP_OPTION("body-min-rate", 0, EP_OPT_UINT, &body_min_rate_kib, .min = 1,
		      .max = 1u << 20),
	    EP_OPTION("max-sessions", 0, EP_OPT_UINT, &c->sessions.max_open, .min = 1,
		      .max = 1u << 20),
	    EP_OPTION("max-nodes", 0, EP_OPT_UINT, &c->sessions.max_nodes, .min = 1,
		      .max = 1u << 22),
	    EP_OPTION("max-batch", 0, EP_OPT_CALL, &c->ingest, .call = ep_ingest_limit_option),
	    EP_OPTION("ingest-memory-mib", 0, EP_OPT_UINT, &ingest_mib, .min = 16, .max = 1u << 20),
	    EP_OPTION("max-page", 0, EP_OPT_UINT, &max_page, .min = 1, .max = 100000),
	    EP_OPTION("max-label-values", 0, EP_OPT_UINT, &label_values, .min = 1,
		      .max = EP_STORE_LABELS_MAX),
	    EP_OPTION_END,
	};
	const struct ep_option *const tables[] = {opts, NULL};
	int first = ep_options_parse("collector", argc, argv, tables, usage);
	if (first < 0) {
		*exit_code = ep_options_exit_code(first);
		return -1;
	}
	c->server.max_body = max_body;
	c->server.max_bodies = (size_t)max_bodies_mib << 20;
	c->server.body_min_rate = body_min_rate_kib << 10;
	c->ingest.memory_bytes = (size_t)ingest_mib << 20;
	c->server.api = (struct ep_api_limits){max_page, label_values};
	if (!c->store_spec || first != argc) {
		ep_error("collector needs --store sqlite:PATH or clickhouse:URL");
		*exit_code = 2;
		return -1;
	}
	return 0;
}

/* The port listened on, to port_file once ready (renamed into place, so a
 * reader never sees half of it). */
static void write_port_file(const char *port_file, unsigned port)
{
	char err[512];
	struct ep_output o;
	if (ep_output_open(&o, port_file, "w", err, sizeof(err)) != 0) {
		ep_warn("--port-file: %s", err);
		return;
	}
	if (fprintf(o.f, "%u\n", port) < 0) {
		ep_output_discard(&o);
		ep_warn("--port-file %s: cannot write it", port_file);
	} else if (ep_output_commit(&o, err, sizeof(err)) != 0) {
		ep_warn("--port-file: %s", err);
	}
}

/* Until SIGTERM or SIGINT. Retention: counts and batch ids older than the
 * window go, at start and hourly, so a collector that runs for months keeps
 * a bounded store. Every second the sessions and nodes are synced with the
 * store, where other collectors on it put theirs. */
static void serve_until_stopped(struct ep_store *store, struct ep_sessions *sessions,
				unsigned retention_days)
{
	char err[512];
	time_t next_prune = 0;
	while (!stop_requested) {
		time_t now = time(NULL);
		if (retention_days && now >= next_prune) {
			int64_t cut = (int64_t)now - (int64_t)retention_days * 86400;
			if (ep_store_prune(store, cut, err, sizeof(err)) != 0)
				ep_warn("retention: %s", err);
			else
				ep_debug("retention: counts before %lld forgotten", (long long)cut);
			next_prune = now + 3600;
		}
		ep_sessions_maintain(sessions);
		sleep(1);
	}
}

int ep_cmd_collector(int argc, char **argv)
{
	struct collector_setup c;
	int rc;
	if (parse_setup(argc, argv, &c, &rc) != 0)
		return rc;
	char err[512];
	struct ep_store *store = ep_store_open(c.store_spec, err, sizeof(err));
	if (!store) {
		ep_error("%s", err);
		return 1;
	}
	struct ep_ingest *ingest = ep_ingest_new(store, &c.ingest, err, sizeof(err));
	struct ep_sessions *sessions =
	    ingest ? ep_sessions_new(store, &c.sessions, err, sizeof(err)) : NULL;
	/* code no more than the file, however many segments cover its bytes */
	ep_elf_image_set_limits((uint64_t)c.max_binary_mib << 20,
				(uint64_t)c.max_image_symbols_mib << 20);
	c.server.binaries =
	    sessions ? ep_binaries_new(store, (size_t)c.max_binary_mib << 20) : NULL;
	if (sessions && !c.server.binaries)
		snprintf(err, sizeof(err), "out of memory");
	if (c.server.binaries)
		ep_binaries_set_debuginfod(c.server.binaries, c.debuginfod);
	struct ep_server *server = c.server.binaries ? ep_server_start(&c.server, store, ingest,
								       sessions, err, sizeof(err))
						     : NULL;
	if (!server) {
		ep_error("%s", err);
		ep_binaries_free(c.server.binaries);
		ep_sessions_free(sessions);
		ep_ingest_free(ingest);
		ep_store_close(store);
		return 1;
	}
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	ep_info("collector listening on %s (port %u, %s%s%s), store %s", c.server.listen,
		ep_server_port(server), c.server.tls_cert ? "https" : "http",
		c.server.client_ca ? ", client certificates required" : "",
		c.server.token_file ? ", bearer token required" : "", c.store_spec);
	if (c.port_file)
		write_port_file(c.port_file, ep_server_port(server));
	serve_until_stopped(store, sessions, c.retention_days);
	ep_info("collector stopping: finishing requests and the last commit");
	ep_server_stop(server);
	ep_binaries_free(c.server.binaries);
	ep_sessions_free(sessions);
	ep_ingest_free(ingest);
	ep_store_close(store);
	return 0;
}
