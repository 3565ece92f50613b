/* SPDX-License-Identifier: Apache-2.0 */
/*
 * edgeprof profile: one on-demand session. The collector records the
 * request and hands it to the agent of the target's node (see
 * collector/sessions); this command waits for the session to end and writes
 * its profile, which holds only what ran in the target.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
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
#include "common/util/options.h"
#include "common/util/sampling_limits.h"

static void usage(FILE *out)
{
	fprintf(out, "usage: edgeprof profile (--container ID | --cgroup PATH | --pid PID |\n"
		     "                         --pod NAMESPACE/NAME) [--node NAME]\n"
		     "         --duration S [--period P] [--mode edges|calls] [--cycles]\n"
		     "         --collector URL\n"
		     "         [--token-file F] [--cacert F] [--cert F --key F]\n"
		     "         [-o OUT [--format json|fdata|preagg|afdo|profgen|pprof]] [--top N]\n"
		     "  --duration S   how long to sample: 30, 30s or 2m\n"
		     "  --period P     events between samples (default: a quarter of the agent's)\n"
		     "  --cycles       the time per address too: a cycles event (cpu-clock ns\n"
		     "                 where the node has none), for report --cpi\n"
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
	char *path = ep_collector_path("/v1/sessions?format=proto", args);
	if (!path)
		return NULL;
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

/* What the command line asks for. */
struct profile_request {
	struct ep_collector_query q;
	const char *container, *cgroup, *pod, *node, *duration, *output;
	unsigned pid, period, top;
	bool pid_given, period_given, cycles;
	int mode, format;
};

static const char *const modes[] = {"edges", "calls", NULL};

static int check_pod(void *value, const char *arg, char *err, size_t errlen)
{
	const char *slash = strchr(arg, '/');
	if (!slash || slash == arg || !slash[1] || strchr(slash + 1, '/')) {
		snprintf(err, errlen, "'%s' is not NAMESPACE/NAME", arg);
		return -1;
	}
	*(const char **)value = arg;
	return 0;
}

/* The request from argv: 0, or -1 when the command ends here with
 * *exit_code (0 after --help, 2 after a usage error). */
static int parse_request(int argc, char **argv, struct profile_request *r, int *exit_code)
{
	*r = (struct profile_request){.top = 10, .mode = -1, .format = -1};
	const struct ep_option profile_opts[] = {
	    EP_OPTION("container", 0, EP_OPT_STRING, &r->container),
	    EP_OPTION("cgroup", 0, EP_OPT_STRING, &r->cgroup),
	    EP_OPTION("pid", 0, EP_OPT_UINT, &r->pid, .min = 1, .max = 1u << 30,
		      .given = &r->pid_given),
	    EP_OPTION("pod", 0, EP_OPT_CALL, &r->pod, .call = check_pod),
	    EP_OPTION("node", 0, EP_OPT_STRING, &r->node),
	    EP_OPTION("duration", 0, EP_OPT_STRING, &r->duration),
	    EP_OPTION("period", 0, EP_OPT_UINT, &r->period,
		      .min = ep_period_min(EP_KERNEL_SAMPLE_RATE_DEFAULT), .max = EP_PERIOD_MAX,
		      .given = &r->period_given),
	    EP_OPTION("mode", 0, EP_OPT_CHOICE, &r->mode, .choices = modes),
	    EP_OPTION("cycles", 0, EP_OPT_TRUE, &r->cycles),
	    EP_OPTION("output", 'o', EP_OPT_OUTPUT, &r->output),
	    EP_OPTION("format", 0, EP_OPT_CHOICE, &r->format, .choices = ep_export_format_names),
	    EP_OPTION("top", 0, EP_OPT_UINT, &r->top, .min = 1, .max = 100000),
	    EP_OPTION_END,
	};
	struct ep_option query_opts[EP_COLLECTOR_QUERY_OPTION_COUNT + 1];
	ep_collector_query_options(query_opts, &r->q);
	const struct ep_option *const tables[] = {profile_opts, query_opts, NULL};
	int first = ep_options_parse("profile", argc, argv, tables, usage);
	if (first < 0) {
		*exit_code = ep_options_exit_code(first);
		return -1;
	}
	int targets =
	    (r->container != NULL) + (r->cgroup != NULL) + r->pid_given + (r->pod != NULL);
	if (targets != 1 || !r->duration || !r->q.url || first != argc) {
		ep_error("profile needs one target (--container, --cgroup, --pid or --pod), "
			 "--duration and "
			 "--collector URL");
		*exit_code = 2;
		return -1;
	}
	if (r->format >= 0 && !r->output) {
		ep_error("--format needs -o OUT");
		*exit_code = 2;
		return -1;
	}
	return 0;
}

/* Polls the session until it ends (or the collector stops answering about
 * it): the last state seen, NULL when it was lost; *waited in seconds. */
static Edgeprof__V1__Session *wait_for_end(const struct ep_collector_query *q, const char *id,
					   Edgeprof__V1__Session *s, unsigned *waited)
{
	/* the collector fails a session nobody takes, or whose agent goes
	 * quiet; this bound only guards against a collector that stops answering
	 * about it */
	unsigned give_up = (unsigned)(s->duration_ms / 1000) + 600;
	Edgeprof__V1__SessionState last = s->state;
	*waited = 0;
	while (s && s->state != EDGEPROF__V1__SESSION_STATE__SESSION_DONE &&
	       s->state != EDGEPROF__V1__SESSION_STATE__SESSION_FAILED && *waited < give_up) {
		sleep(1);
		(*waited)++;
		edgeprof__v1__session__free_unpacked(s, NULL);
		s = poll_session(q, id);
		if (s && s->state != last) {
			if (s->state == EDGEPROF__V1__SESSION_STATE__SESSION_RUNNING)
				ep_info("session %s: running on node %s (%s)", id, s->node,
					s->message);
			last = s->state;
		}
	}
	return s;
}

int ep_cmd_profile(int argc, char **argv)
{
	struct profile_request r;
	int rc;
	if (parse_request(argc, argv, &r, &rc) != 0)
		return rc;
	char err[512];
	if (r.output && r.format < 0 && ep_profile_check_target(r.output, err, sizeof(err)) != 0) {
		ep_error("%s", err); /* before the session, not after it */
		return 2;
	}
	char pid[16], period[16];
	snprintf(pid, sizeof(pid), "%u", r.pid);
	snprintf(period, sizeof(period), "%u", r.period);
	const char *args[] = {"container_id",
			      r.container,
			      "cgroup",
			      r.cgroup,
			      "pid",
			      r.pid_given ? pid : NULL,
			      "pod",
			      r.pod,
			      "node",
			      r.node,
			      "duration_s",
			      r.duration,
			      "period",
			      r.period_given ? period : NULL,
			      "mode",
			      r.mode >= 0 ? modes[r.mode] : NULL,
			      "cycles",
			      r.cycles ? "1" : NULL,
			      NULL};
	Edgeprof__V1__Session *s = ask(&r.q, args);
	if (!s)
		return 1;
	char id[64];
	snprintf(id, sizeof(id), "%s", s->id);
	ep_info("session %s: asked for %" PRIu64 " s on %s", id, s->duration_ms / 1000,
		s->node[0] ? s->node : "the node that has the target");
	unsigned waited;
	s = wait_for_end(&r.q, id, s, &waited);
	rc = 1;
	if (!s)
		ep_error("session %s: lost track of it (the collector stopped answering)", id);
	else if (s->state == EDGEPROF__V1__SESSION_STATE__SESSION_FAILED)
		ep_error("session %s failed: %s", id, s->message);
	else if (s->state != EDGEPROF__V1__SESSION_STATE__SESSION_DONE)
		ep_error("session %s: still not done after %u s; its profile can be read later "
			 "with: edgeprof export --collector %s --session %s",
			 id, waited, r.q.url, id);
	else {
		ep_info("session %s: done on node %s, %" PRIu64 " samples", id, s->node,
			s->samples);
		r.q.session = id;
		rc = write_profile(&r.q, r.output, r.format, r.top);
	}
	if (s)
		edgeprof__v1__session__free_unpacked(s, NULL);
	return rc;
}
