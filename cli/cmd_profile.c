/* SPDX-License-Identifier: Apache-2.0 */
/*
 * edgeprof profile: one on-demand session. The collector records the
 * request and hands it to the agent of the target's node (see
 * collector/sessions); this command waits for the session to end and writes
 * its profile, which holds only what ran in the target.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli_util.h"
#include "cli/collector_query.h"
#include "cli/commands.h"
#include "collector.pb-c.h"
#include "common/export/export.h"
#include "common/profile/profile_file.h"
#include "common/util/log.h"

static void usage(FILE *out)
{
	fprintf(out, "usage: edgeprof profile (--container ID | --cgroup PATH | --pid PID |\n"
		     "                         --pod NAMESPACE/NAME) [--node NAME]\n"
		     "         --duration S [--period P] [--mode edges|calls] --collector URL\n"
		     "         [--token-file F] [--cacert F] [--cert F --key F]\n"
		     "         [-o OUT [--format json|fdata|preagg|afdo]] [--top N]\n"
		     "  --duration S   how long to sample: 30, 30s or 2m\n"
		     "  --period P     events between samples (default: a quarter of the agent's)\n"
		     "  -o OUT         the session's profile: an edgeprof profile file, or with\n"
		     "                 --format an export; without -o a report is printed\n");
}

static Edgeprof__V1__Session *unpack_session(const struct ep_http_body *b)
{
	return edgeprof__v1__session__unpack(NULL, b->len, (const uint8_t *)b->data);
}

/* The collector's one-line reason, from a text answer. */
static const char *reason(struct ep_http_body *b)
{
	return b->data ? strtok(b->data, "\n") : "(no reason given)";
}

/* Asks for the session: NULL with the collector's reason logged. */
static Edgeprof__V1__Session *ask(const struct ep_collector_query *q, const char *const *args)
{
	char *path = strdup("/v1/sessions?format=proto");
	int rc = path ? 0 : -1;
	for (size_t i = 0; rc == 0 && args[i]; i += 2)
		if (args[i + 1])
			rc = ep_url_append_arg(&path, args[i], args[i + 1]);
	if (rc != 0) {
		ep_error("out of memory");
		free(path);
		return NULL;
	}
	struct ep_http_body body;
	long status;
	Edgeprof__V1__Session *s = NULL;
	if (ep_collector_request(q, "POST", path, &body, &status) == 0) {
		if (status != 201)
			ep_error("collector %s refused the session (HTTP %ld): %s", q->url, status,
				 reason(&body));
		else if (!(s = unpack_session(&body)))
			ep_error("collector %s: the answer is not a session", q->url);
	}
	free(body.data);
	free(path);
	return s;
}

static Edgeprof__V1__Session *poll_session(const struct ep_collector_query *q, const char *id)
{
	char path[128];
	snprintf(path, sizeof(path), "/v1/sessions/%s?format=proto", id);
	struct ep_http_body body;
	long status;
	Edgeprof__V1__Session *s = NULL;
	if (ep_collector_request(q, "GET", path, &body, &status) == 0) {
		if (status != 200)
			ep_error("collector %s: session %s: HTTP %ld: %s", q->url, id, status,
				 reason(&body));
		else if (!(s = unpack_session(&body)))
			ep_error("collector %s: the answer is not a session", q->url);
	}
	free(body.data);
	return s;
}

/* The session's profile to -o (a profile file, or an export) or as a report. */
static int write_profile(const struct ep_collector_query *q, const char *output, int format,
			 unsigned top)
{
	Edgeprof__V1__Profile *p = ep_collector_fetch_profile(q);
	if (!p)
		return 1;
	char err[512];
	int rc = 0;
	if (!output) {
		rc = ep_report(p, top, stdout) != 0;
	} else if (format < 0) {
		if (ep_profile_write(output, p, err, sizeof(err)) != 0) {
			ep_error("%s", err);
			rc = 1;
		}
	} else {
		rc = ep_cli_write_export(p, format, NULL, output);
	}
	ep_profile_free(p);
	return rc;
}

int ep_cmd_profile_session(int argc, char **argv)
{
	enum { O_CONTAINER = 1300, O_CGROUP, O_PID, O_POD, O_NODE, O_DURATION, O_PERIOD, O_MODE };
	static const struct option opts[] = {
	    {"container", required_argument, NULL, O_CONTAINER},
	    {"cgroup", required_argument, NULL, O_CGROUP},
	    {"pid", required_argument, NULL, O_PID},
	    {"pod", required_argument, NULL, O_POD},
	    {"node", required_argument, NULL, O_NODE},
	    {"duration", required_argument, NULL, O_DURATION},
	    {"period", required_argument, NULL, O_PERIOD},
	    {"mode", required_argument, NULL, O_MODE},
	    {"output", required_argument, NULL, 'o'},
	    {"format", required_argument, NULL, 'f'},
	    {"top", required_argument, NULL, 't'},
	    {"help", no_argument, NULL, 'h'},
	    EP_COLLECTOR_QUERY_OPTIONS,
	    {0},
	};
	struct ep_collector_query q = {0};
	const char *container = NULL, *cgroup = NULL, *pid = NULL, *pod = NULL, *node = NULL,
		   *duration = NULL, *period = NULL, *mode = NULL, *output = NULL;
	int format = -1;
	unsigned top = 10, v;
	optind = 1;
	int ch;
	while ((ch = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		int qo = ep_collector_query_option(&q, ch, optarg);
		if (qo < 0)
			return 2;
		if (qo > 0)
			continue;
		switch (ch) {
		case O_CONTAINER:
			container = optarg;
			break;
		case O_CGROUP:
			cgroup = optarg;
			break;
		case O_PID:
			if (ep_parse_uint(optarg, 1, 1u << 30, &v) != 0) {
				ep_error("--pid: '%s' is not a process id", optarg);
				return 2;
			}
			pid = optarg;
			break;
		case O_POD: {
			const char *slash = strchr(optarg, '/');
			if (!slash || slash == optarg || !slash[1] || strchr(slash + 1, '/')) {
				ep_error("--pod: '%s' is not NAMESPACE/NAME", optarg);
				return 2;
			}
			pod = optarg;
			break;
		}
		case O_NODE:
			node = optarg;
			break;
		case O_DURATION:
			duration = optarg;
			break;
		case O_PERIOD:
			if (ep_parse_uint(optarg, 1, 1u << 31, &v) != 0) {
				ep_error("--period: '%s' is not a positive number", optarg);
				return 2;
			}
			period = optarg;
			break;
		case O_MODE:
			if (strcmp(optarg, "edges") != 0 && strcmp(optarg, "calls") != 0) {
				ep_error("--mode: '%s' is not edges or calls", optarg);
				return 2;
			}
			mode = optarg;
			break;
		case 'o':
			output = optarg;
			break;
		case 'f':
			format = ep_export_parse_format(optarg);
			if (format < 0) {
				ep_error("--format: '%s' is not json, fdata, preagg or afdo",
					 optarg);
				return 2;
			}
			break;
		case 't':
			if (ep_parse_uint(optarg, 1, 100000, &top) != 0) {
				ep_error("--top: '%s' is not a positive number", optarg);
				return 2;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	int targets = (container != NULL) + (cgroup != NULL) + (pid != NULL) + (pod != NULL);
	if (targets != 1 || !duration || !q.url || optind != argc) {
		ep_error("profile needs one target (--container, --cgroup, --pid or --pod), "
			 "--duration and "
			 "--collector URL");
		return 2;
	}
	if (format >= 0 && !output) {
		ep_error("--format needs -o OUT");
		return 2;
	}
	const char *args[] = {"container_id", container, "cgroup", cgroup, "pid",	 pid,
			      "pod",	      pod,	 "node",   node,   "duration_s", duration,
			      "period",	      period,	 "mode",   mode,   NULL};
	Edgeprof__V1__Session *s = ask(&q, args);
	if (!s)
		return 1;
	char id[64];
	snprintf(id, sizeof(id), "%s", s->id);
	uint64_t duration_s = s->duration_ms / 1000;
	ep_info("session %s: asked for %" PRIu64 " s on %s", id, duration_s,
		s->node[0] ? s->node : "the node that has the target");
	/* the collector fails a session nobody takes, or whose agent goes
	 * quiet; this bound only guards against a collector that stops answering
	 * about it */
	unsigned waited = 0, give_up = (unsigned)duration_s + 600;
	Edgeprof__V1__SessionState last = s->state;
	while (s && s->state != EDGEPROF__V1__SESSION_STATE__SESSION_DONE &&
	       s->state != EDGEPROF__V1__SESSION_STATE__SESSION_FAILED && waited < give_up) {
		sleep(1);
		waited++;
		edgeprof__v1__session__free_unpacked(s, NULL);
		s = poll_session(&q, id);
		if (s && s->state != last) {
			if (s->state == EDGEPROF__V1__SESSION_STATE__SESSION_RUNNING)
				ep_info("session %s: running on node %s (%s)", id, s->node,
					s->message);
			last = s->state;
		}
	}
	int rc = 1;
	if (!s)
		ep_error("session %s: lost track of it (the collector stopped answering)", id);
	else if (s->state == EDGEPROF__V1__SESSION_STATE__SESSION_FAILED)
		ep_error("session %s failed: %s", id, s->message);
	else if (s->state != EDGEPROF__V1__SESSION_STATE__SESSION_DONE)
		ep_error("session %s: still not done after %u s; its profile can be read later "
			 "with: edgeprof export --collector %s --session %s",
			 id, waited, q.url, id);
	else {
		ep_info("session %s: done on node %s, %" PRIu64 " samples", id, s->node,
			s->samples);
		q.session = id;
		rc = write_profile(&q, output, format, top);
	}
	if (s)
		edgeprof__v1__session__free_unpacked(s, NULL);
	return rc;
}
