/* SPDX-License-Identifier: Apache-2.0 */
/* The fleet (/fleet): the nodes whose agents report, what each samples
 * (plainly when it has no branch-stack PMU), the on-demand sessions running
 * and recent, and a form that starts one (POST /fleet/start). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collector/web/web_internal.h"

static void nodes_table(FILE *out, struct ep_sessions *ss)
{
	struct ep_node_info *nodes = NULL;
	size_t n = ep_sessions_nodes(ss, &nodes);
	int64_t now = (int64_t)time(NULL);
	fputs("<h2>Nodes</h2>\n<table class=\"list\" id=\"nodes\"><thead><tr><th>Node</th>"
	      "<th>Agent</th><th>Version</th><th>Reporting</th><th>Last batch</th>"
	      "<th>Sampling</th><th class=\"num\">Samples/s</th><th class=\"num\">Samples</th>"
	      "<th class=\"num\">Lost records</th><th>Sessions</th></tr></thead><tbody>\n",
	      out);
	for (size_t i = 0; i < n; i++) {
		const struct ep_node_info *k = &nodes[i];
		bool ip_only =
		    strcmp(k->event, "cpu-clock") == 0 || (k->samples && !k->samples_with_branches);
		fputs("<tr class=\"node\" data-node=\"", out);
		ep_web_text(out, k->name);
		fputs("\"><td><b>", out);
		ep_web_text(out, k->name);
		fputs("</b></td><td class=\"mono\">", out);
		ep_web_text(out, k->agent_id);
		fputs("</td><td>", out);
		ep_web_text(out, k->version);
		fprintf(out, "</td><td>%s</td><td>",
			k->reporting ? "<span class=\"ok\">yes</span>"
				     : "<span class=\"error\">silent</span>");
		ep_web_time(out, k->last_seen_s);
		fprintf(out, " <span class=\"dim\">(%" PRId64 " s ago)</span></td><td>",
			now - k->last_seen_s);
		if (ip_only)
			fputs("<span class=\"error\">no branch-stack PMU: IP samples only "
			      "(cpu-clock), no edges</span>",
			      out);
		else
			ep_web_text(out, *k->event ? k->event : "-");
		fprintf(out, "</td><td class=\"num\">%.1f</td><td class=\"num\">",
			k->samples_per_s);
		ep_web_count(out, k->samples);
		fputs("</td><td class=\"num\">", out);
		if (k->lost)
			fputs("<span class=\"error\">", out);
		ep_web_count(out, k->lost);
		fputs(k->lost ? "</span>" : "", out);
		fprintf(out, "</td><td>%s</td></tr>\n",
			k->capable ? "can run" : "cannot (replay, or an older agent)");
	}
	if (!n)
		fputs("<tr><td colspan=\"10\" class=\"dim\">No agent has sent a batch to the "
		      "collectors on this store.</td></tr>\n",
		      out);
	fputs("</tbody></table>\n", out);
	ep_sessions_free_nodes(nodes, n);
}

static void session_target(FILE *out, const Edgeprof__V1__Session *s)
{
	if (s->container_id && *s->container_id) {
		fputs("container ", out);
		ep_web_text(out, s->container_id);
	} else if (s->pod && *s->pod) {
		fputs("pod ", out);
		ep_web_text(out, s->pod);
	} else if (s->cgroup && *s->cgroup) {
		fputs("cgroup ", out);
		ep_web_text(out, s->cgroup);
	} else {
		fprintf(out, "pid %u", s->pid);
	}
}

static void sessions_table(FILE *out, struct ep_sessions *ss)
{
	Edgeprof__V1__SessionList *l = ep_sessions_list(ss);
	fputs("<h2>On-demand sessions</h2>\n<table class=\"list\" id=\"sessions\"><thead><tr>"
	      "<th>Session</th><th>Target</th><th>Node</th><th>State</th><th>Duration</th>"
	      "<th>Started</th><th class=\"num\">Samples</th><th>Message</th></tr></thead>"
	      "<tbody>\n",
	      out);
	for (size_t i = 0; l && i < l->n_sessions; i++) {
		const Edgeprof__V1__Session *s = l->sessions[i];
		const char *state = ep_session_state_name(s->state);
		fputs("<tr class=\"session\" data-id=\"", out);
		ep_web_text(out, s->id);
		fprintf(out, "\" data-state=\"%s\"><td class=\"mono\"><a href=\"/?session=", state);
		ep_web_urlenc(out, s->id);
		fputs("\" title=\"its counts\">", out);
		ep_web_text(out, s->id);
		fputs("</a></td><td>", out);
		session_target(out, s);
		fputs("</td><td>", out);
		ep_web_text(out, s->node && *s->node ? s->node : "any");
		fprintf(out, "</td><td class=\"state %s\">%s</td><td>%" PRIu64 " s</td><td>", state,
			state, s->duration_ms / 1000);
		ep_web_time(out, s->started_s);
		fputs("</td><td class=\"num\">", out);
		ep_web_count(out, s->samples);
		fputs("</td><td>", out);
		ep_web_text(out, s->message);
		fputs("</td></tr>\n", out);
	}
	if (!l || !l->n_sessions)
		fputs("<tr><td colspan=\"8\" class=\"dim\">No session in the store.</td></tr>\n",
		      out);
	fputs("</tbody></table>\n", out);
	ep_store_free_session_list(l);
}

static void start_form(FILE *out, unsigned max_s)
{
	fprintf(
	    out,
	    "<h2>Start a session</h2>\n<form class=\"filters\" id=\"start\" method=\"post\" "
	    "action=\"/fleet/start\"><label>Target <select name=\"kind\">"
	    "<option value=\"container_id\">container id</option>"
	    "<option value=\"pod\">pod (namespace/name)</option>"
	    "<option value=\"pid\">pid</option><option value=\"cgroup\">cgroup path</option>"
	    "</select></label> <input type=\"text\" name=\"target\" size=\"28\" required> "
	    "<label>Node <input type=\"text\" name=\"node\" size=\"12\" "
	    "placeholder=\"any\"></label> <label>Duration (s) <input type=\"number\" "
	    "name=\"duration_s\" value=\"30\" min=\"1\" max=\"%u\"></label> "
	    "<label>Mode <select name=\"mode\"><option>edges</option><option>calls</option>"
	    "</select></label> <label title=\"a cycles event beside the branch event (cpu-clock "
	    "ns on a node without one): time and CPI per function\"><input type=\"checkbox\" "
	    "name=\"cycles\" value=\"1\"> Cycles</label> "
	    "<button type=\"submit\">Start</button></form>\n"
	    "<p class=\"hint\">The agent of the target's node samples it at 4x its rate for the "
	    "duration, on top of the continuous profile; the session's counts are kept apart "
	    "(its id links to them).</p>\n",
	    max_s);
}

int ep_web_fleet_page(FILE *out, const struct ep_web_ctx *w, ep_web_arg_fn arg, void *argctx)
{
	if (!w->sessions)
		return ep_web_fail(out, w, 404, "this collector runs no on-demand sessions");
	ep_web_begin(out, w, "Fleet");
	fputs("<h1>Fleet</h1>\n", out);
	const char *started = arg(argctx, "started");
	if (started && *started) {
		fputs("<p class=\"ok\" id=\"started\">Session ", out);
		ep_web_text(out, started);
		fputs(" asked for: it runs once its node's agent sends its next batch.</p>\n", out);
	}
	nodes_table(out, w->sessions);
	sessions_table(out, w->sessions);
	start_form(out, ep_sessions_max_duration_s(w->sessions));
	ep_web_end(out);
	return 200;
}

int ep_web_start_session(FILE *out, const struct ep_web_ctx *w, const char *body, size_t len,
			 char *location, size_t loclen)
{
	if (!w->sessions)
		return ep_web_fail(out, w, 404, "this collector runs no on-demand sessions");
	char kind[32], target[512], node[256] = "", duration[32], mode[16] = "edges";
	if (!ep_web_form_value(body, len, "kind", kind, sizeof(kind)) ||
	    !ep_web_form_value(body, len, "target", target, sizeof(target)) || !*target ||
	    !ep_web_form_value(body, len, "duration_s", duration, sizeof(duration)))
		return ep_web_fail(out, w, 400, "a session needs a target and a duration");
	ep_web_form_value(body, len, "node", node, sizeof(node));
	ep_web_form_value(body, len, "mode", mode, sizeof(mode));
	char cycles[4] = "";
	ep_web_form_value(body, len, "cycles", cycles, sizeof(cycles));
	Edgeprof__V1__Session req = EDGEPROF__V1__SESSION__INIT;
	char *end;
	unsigned long long secs = strtoull(duration, &end, 10);
	if (*end || !*duration || secs == 0 || secs > ep_sessions_max_duration_s(w->sessions))
		return ep_web_fail(out, w, 400, "duration '%s': 1 to %u seconds", duration,
				   ep_sessions_max_duration_s(w->sessions));
	req.duration_ms = secs * 1000;
	req.node = node;
	req.mode = mode;
	req.cycles = strcmp(cycles, "1") == 0;
	if (strcmp(kind, "container_id") == 0)
		req.container_id = target;
	else if (strcmp(kind, "pod") == 0)
		req.pod = target;
	else if (strcmp(kind, "cgroup") == 0)
		req.cgroup = target;
	else if (strcmp(kind, "pid") == 0) {
		unsigned long long pid = strtoull(target, &end, 10);
		if (*end || !pid || pid > UINT32_MAX)
			return ep_web_fail(out, w, 400, "pid '%s': not a process id", target);
		req.pid = (uint32_t)pid;
	} else
		return ep_web_fail(out, w, 400, "target kind '%s': unknown", kind);
	char why[512];
	Edgeprof__V1__Session *created = NULL;
	int status = ep_sessions_create(w->sessions, &req, &created, why, sizeof(why));
	if (status != 0)
		return ep_web_fail(out, w, status, "%s", why);
	snprintf(location, loclen, "/fleet?started=%s", created->id);
	ep_store_free_session(created);
	ep_web_redirect_body(out, location);
	return 303;
}
