/* SPDX-License-Identifier: Apache-2.0 */
/*
 * edgeprof collector: receives agents' batches, merges them per build-id
 * into the store, serves profiles (collector/).
 */
#include <getopt.h>
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
#include "common/util/log.h"

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
	    "       [--token-file F] [--tls-cert F --tls-key F [--client-ca F]]\n"
	    "       [--commit-ms MS] [--max-body BYTES] [--port-file F] [--log-level L]\n"
	    "       [--retention-days D] [--max-session-s S] [--session-pickup-s S]\n"
	    "       [--node-silent-s S]\n"
	    "  --listen HOST:PORT  default 127.0.0.1:7070; port 0 picks a free one\n"
	    "  --token-file F      bearer token required on /v1/ (file must not be "
	    "world-readable)\n"
	    "  --tls-cert/--tls-key  serve https; --client-ca also requires client "
	    "certificates\n"
	    "  --commit-ms MS      wait before each group commit, for more merging "
	    "(default 0)\n"
	    "  --port-file F       write the port listened on to F once ready\n"
	    "  --retention-days D  forget counts older than D days (default 30, 0: never)\n"
	    "  --max-session-s S   longest on-demand session accepted (default 600)\n"
	    "  --session-pickup-s S  a session no agent takes within S fails (default 30)\n"
	    "  --node-silent-s S   a node silent this long is not reporting (default 60)\n");
}

int ep_cmd_collector(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"store", required_argument, NULL, 's'},
	    {"listen", required_argument, NULL, 'L'},
	    {"token-file", required_argument, NULL, 't'},
	    {"tls-cert", required_argument, NULL, 'c'},
	    {"tls-key", required_argument, NULL, 'k'},
	    {"client-ca", required_argument, NULL, 'a'},
	    {"commit-ms", required_argument, NULL, 'm'},
	    {"max-body", required_argument, NULL, 'b'},
	    {"port-file", required_argument, NULL, 'p'},
	    {"log-level", required_argument, NULL, 'l'},
	    {"retention-days", required_argument, NULL, 'r'},
	    {"max-session-s", required_argument, NULL, 'M'},
	    {"session-pickup-s", required_argument, NULL, 'U'},
	    {"node-silent-s", required_argument, NULL, 'N'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	struct ep_server_config scfg = {.listen = "127.0.0.1:7070"};
	struct ep_ingest_config icfg = {0};
	struct ep_sessions_config sess_cfg = {0};
	const char *store_spec = NULL, *port_file = NULL;
	unsigned retention_days = 30;
	optind = 1;
	int ch;
	while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		unsigned v;
		switch (ch) {
		case 's':
			store_spec = optarg;
			break;
		case 'L':
			scfg.listen = optarg;
			break;
		case 't':
			scfg.token_file = optarg;
			break;
		case 'c':
			scfg.tls_cert = optarg;
			break;
		case 'k':
			scfg.tls_key = optarg;
			break;
		case 'a':
			scfg.client_ca = optarg;
			break;
		case 'p':
			port_file = optarg;
			break;
		case 'r':
			if (ep_parse_uint(optarg, 0, 100000, &retention_days) != 0) {
				ep_error(
				    "--retention-days: '%s' is not a number of days (0: forever)",
				    optarg);
				return 2;
			}
			break;
		case 'M':
		case 'U':
		case 'N':
			if (ep_parse_uint(optarg, 1, 86400, &v) != 0) {
				ep_error("--%s: '%s' is not a number of seconds (1-86400)",
					 ch == 'M'   ? "max-session-s"
					 : ch == 'U' ? "session-pickup-s"
						     : "node-silent-s",
					 optarg);
				return 2;
			}
			if (ch == 'M')
				sess_cfg.max_duration_s = v;
			else if (ch == 'U')
				sess_cfg.pickup_s = v;
			else
				sess_cfg.node_silent_s = v;
			break;
		case 'm':
		case 'b':
			if (ep_parse_uint(optarg, 1, 1u << 30, &v) != 0) {
				ep_error("--%s: '%s' is not a positive number",
					 ch == 'm' ? "commit-ms" : "max-body", optarg);
				return 2;
			}
			if (ch == 'm')
				icfg.commit_ms = v;
			else
				scfg.max_body = v;
			break;
		case 'l': {
			int level = ep_log_parse_level(optarg);
			if (level < 0) {
				ep_error("--log-level: '%s' is not error|warn|info|debug", optarg);
				return 2;
			}
			ep_log_set_level((enum ep_log_level)level);
			break;
		}
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!store_spec || optind != argc) {
		ep_error("collector needs --store sqlite:PATH or clickhouse:URL");
		return 2;
	}
	char err[512];
	struct ep_store *store = ep_store_open(store_spec, err, sizeof(err));
	if (!store) {
		ep_error("%s", err);
		return 1;
	}
	struct ep_ingest *ingest = ep_ingest_new(store, &icfg, err, sizeof(err));
	struct ep_sessions *sessions =
	    ingest ? ep_sessions_new(store, &sess_cfg, err, sizeof(err)) : NULL;
	struct ep_server *server =
	    sessions ? ep_server_start(&scfg, store, ingest, sessions, err, sizeof(err)) : NULL;
	if (!server) {
		ep_error("%s", err);
		ep_sessions_free(sessions);
		ep_ingest_free(ingest);
		ep_store_close(store);
		return 1;
	}
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	ep_info("collector listening on %s (port %u, %s%s%s), store %s", scfg.listen,
		ep_server_port(server), scfg.tls_cert ? "https" : "http",
		scfg.client_ca ? ", client certificates required" : "",
		scfg.token_file ? ", bearer token required" : "", store_spec);
	if (port_file) {
		char tmp[4096];
		snprintf(tmp, sizeof(tmp), "%s.tmp", port_file);
		FILE *f = fopen(tmp, "w");
		if (!f || fprintf(f, "%u\n", ep_server_port(server)) < 0 || fclose(f) != 0 ||
		    rename(tmp, port_file) != 0)
			ep_warn("--port-file %s: cannot write it", port_file);
	}
	/* retention: counts and batch ids older than the window go, at start
	 * and hourly, so a collector that runs for months keeps a bounded store */
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
		sleep(1);
	}
	ep_info("collector stopping: finishing requests and the last commit");
	ep_server_stop(server);
	ep_sessions_free(sessions);
	ep_ingest_free(ingest);
	ep_store_close(store);
	return 0;
}
