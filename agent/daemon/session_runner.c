/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/daemon/session_runner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/attribute/container.h"
#include "agent/daemon/session_target.h"
#include "agent/pipeline/pipeline.h"
#include "agent/source/live/live_feed.h"
#include "agent/source/live/live_source.h"
#include "agent/stream/sink.h"
#include "common/util/clock.h"
#include "common/util/log.h"

#define MAX_SESSIONS 8
#define FINISHED_IDS 64

struct agent_session {
	Edgeprof__V1__ProfileSession *req;
	struct ep_live *live;
	struct ep_live_feed feed;
	struct ep_sink sink;
	Edgeprof__V1__Labels labels;
	struct ep_session_target target;
	char container_id[sizeof(((struct ep_container_ref *)0)->id)];
	uint64_t started_ns, deadline_ns; /* unix time */
	uint64_t lost_added;
};

struct ep_session_runner {
	struct ep_sink *main_sink; /* its streamer carries the sessions' batches too */
	const struct ep_live_config *main_cfg;
	struct ep_binary_registry *reg;
	struct ep_k8s *k8s;
	struct agent_session *active[MAX_SESSIONS];
	size_t nactive;
	/* sessions ended here, so one handed over again is not run twice */
	char finished[FINISHED_IDS][40];
	size_t nfinished;
};

struct ep_session_runner *ep_session_runner_new(struct ep_sink *main_sink,
						const struct ep_live_config *main_cfg,
						struct ep_binary_registry *reg, struct ep_k8s *k8s)
{
	struct ep_session_runner *r = malloc(sizeof(*r));
	if (r)
		*r = (struct ep_session_runner){
		    .main_sink = main_sink, .main_cfg = main_cfg, .reg = reg, .k8s = k8s};
	return r;
}

static void report(struct ep_session_runner *r, const char *id, Edgeprof__V1__SessionState state,
		   const char *message, bool target_absent, uint64_t started_ns, uint64_t ended_ns,
		   uint64_t samples)
{
	Edgeprof__V1__SessionReport rep = EDGEPROF__V1__SESSION_REPORT__INIT;
	rep.session_id = (char *)id;
	rep.state = state;
	rep.message = (char *)message;
	rep.target_absent = target_absent;
	rep.started_ns = started_ns;
	rep.ended_ns = ended_ns;
	rep.samples = samples;
	if (ep_streamer_report_session(r->main_sink->streamer, &rep) != 0)
		ep_error("session %s: out of memory queueing its report", id);
}

static bool known(const struct ep_session_runner *r, const char *id)
{
	for (size_t i = 0; i < r->nactive; i++)
		if (strcmp(r->active[i]->req->session_id, id) == 0)
			return true;
	for (size_t i = 0; i < r->nfinished; i++)
		if (strcmp(r->finished[i], id) == 0)
			return true;
	return false;
}

static void note_finished(struct ep_session_runner *r, const char *id)
{
	if (r->nfinished < FINISHED_IDS)
		snprintf(r->finished[r->nfinished++], sizeof(r->finished[0]), "%s", id);
}

static void session_free(struct agent_session *x)
{
	if (!x)
		return;
	ep_live_close(x->live);
	ep_live_feed_free(&x->feed);
	edgeprof__v1__profile_session__free_unpacked(x->req, NULL);
	free(x);
}

/* Whether the session can run here; -1 with why, absent when its target is
 * not on this node. */
static int check(struct ep_session_runner *r, struct agent_session *x, uint64_t now, char *why,
		 size_t whylen, bool *absent)
{
	if (r->nactive == MAX_SESSIONS) {
		snprintf(why, whylen, "this agent already runs %d sessions", MAX_SESSIONS);
		return -1;
	}
	if (x->deadline_ns <= now) {
		snprintf(why, whylen, "the session ended before this agent could resume it");
		return -1;
	}
	int rc = ep_session_target_resolve(x->req, r->k8s, &x->target, why, whylen);
	*absent = rc == -1;
	return rc == 0 ? 0 : -1;
}

/* The target only, sampled more often than the continuous profile, through
 * a pipeline of its own. 0, or -1 with why. */
static int open_sampling(struct ep_session_runner *r, struct agent_session *x,
			 struct ep_live_config *cfg, char *why, size_t whylen)
{
	const Edgeprof__V1__ProfileSession *req = x->req;
	const char *cgroups[1] = {x->target.cgroup};
	*cfg = *r->main_cfg;
	cfg->pids = x->target.pid ? &x->target.pid : NULL;
	cfg->npids = x->target.pid ? 1 : 0;
	cfg->cgroups = x->target.pid ? NULL : cgroups;
	cfg->ncgroups = x->target.pid ? 0 : 1;
	/* 4x the rate by default, as far as the kernel lets it go; a period the
	 * session asks for is checked by ep_live_open(), which says why not */
	uint64_t min = ep_live_period_min();
	cfg->period = req->period ? req->period : (cfg->period / 4 > min ? cfg->period / 4 : min);
	cfg->jitter = cfg->period / 16;
	cfg->ip_hz = cfg->ip_hz * 4 > 10000 ? 10000 : cfg->ip_hz * 4;
	cfg->calls_only = strcmp(req->mode, "calls") == 0;
	/* a cycles event only when the session asks: it doubles the node's
	 * interrupts; at the agent's own cycles rate (--cycles-period) */
	cfg->cycles = req->cycles;
	char err[512];
	x->live = ep_live_open(cfg, err, sizeof(err));
	cfg->cgroups = NULL; /* cgroups[] ends here; the BPF map holds the cgroup now */
	if (!x->live) {
		snprintf(why, whylen, "%s", err);
		return -1;
	}
	if (!req->deadline_ns) {
		/* loading the program takes a while (BTF): the session's time
		 * starts when its sampling does */
		x->started_ns = ep_unix_ns();
		x->deadline_ns = x->started_ns + req->duration_ms * 1000000ULL;
	}
	struct ep_pipeline_config pcfg;
	ep_pipeline_config_default(&pcfg);
	pcfg.append_trigger = ep_live_counts_all_branches(x->live);
	pcfg.chop_taken = ep_live_counts_taken_only(x->live);
	pcfg.calls_only = cfg->calls_only && ep_live_has_branch_stacks(x->live);
	ep_live_feed_init(&x->feed, ep_pipeline_new(&pcfg, r->reg), NULL);
	if (!x->feed.pipeline) {
		snprintf(why, whylen, "agent out of memory");
		return -1;
	}
	ep_live_feed_attach(&x->feed, x->live);
	return 0;
}

/* Its counts travel with the session's id and its target's labels. */
static void open_sink(struct ep_session_runner *r, struct agent_session *x, bool calls_only,
		      uint64_t now)
{
	edgeprof__v1__labels__init(&x->labels);
	x->labels.session_id = x->req->session_id;
	x->labels.cgroup = x->target.cgroup_label;
	struct ep_container_ref ref;
	if (x->target.cgroup_label[0] && ep_container_from_cgroup(x->target.cgroup_label, &ref) &&
	    !ref.monitor) {
		snprintf(x->container_id, sizeof(x->container_id), "%s", ref.id);
		x->labels.container_id = x->container_id;
	}
	if (x->target.pod_name[0]) {
		x->labels.pod = x->target.pod_name;
		x->labels.namespace_ = x->target.pod_ns;
	}
	x->sink = (struct ep_sink){.streamer = r->main_sink->streamer,
				   .event = ep_live_event(x->live),
				   .mode = calls_only ? "calls" : "edges",
				   .labels = &x->labels,
				   .window_start_ns = now};
	snprintf(x->sink.source, sizeof(x->sink.source), "bpf");
	ep_live_period(x->live, &x->sink.period, &x->sink.jitter);
}

/* Takes req (freed here one way or another). */
static void session_start(struct ep_session_runner *r, Edgeprof__V1__ProfileSession *req)
{
	if (known(r, req->session_id)) {
		edgeprof__v1__profile_session__free_unpacked(req, NULL);
		return;
	}
	uint64_t now = ep_unix_ns();
	char why[PATH_MAX + 600];
	struct agent_session *x = calloc(1, sizeof(*x));
	if (!x) {
		report(r, req->session_id, EDGEPROF__V1__SESSION_STATE__SESSION_FAILED,
		       "agent out of memory", false, now, now, 0);
		edgeprof__v1__profile_session__free_unpacked(req, NULL);
		return;
	}
	x->req = req;
	x->started_ns = now;
	x->deadline_ns = req->deadline_ns ? req->deadline_ns : now + req->duration_ms * 1000000ULL;
	bool absent = false;
	struct ep_live_config cfg;
	if (check(r, x, now, why, sizeof(why), &absent) != 0 ||
	    open_sampling(r, x, &cfg, why, sizeof(why)) != 0) {
		ep_warn("session %s: %s", req->session_id, why);
		report(r, req->session_id, EDGEPROF__V1__SESSION_STATE__SESSION_FAILED, why, absent,
		       now, now, 0);
		note_finished(r, req->session_id);
		session_free(x);
		return;
	}
	open_sink(r, x, cfg.calls_only, now);
	r->active[r->nactive++] = x;
	ep_info("session %s: sampling %s for %llu s (%s%s%s)", req->session_id, x->target.what,
		(unsigned long long)((x->deadline_ns - now) / 1000000000ULL), ep_live_mode(x->live),
		cfg.cycles ? "; " : "", cfg.cycles ? ep_live_cycles_mode(x->live) : "");
	report(r, req->session_id, EDGEPROF__V1__SESSION_STATE__SESSION_RUNNING, x->target.what,
	       false, now, x->deadline_ns, 0);
}

static uint64_t session_samples(struct agent_session *x)
{
	struct ep_live_counters lc;
	ep_live_counters(x->live, &lc);
	return lc.received;
}

static void session_emit(struct agent_session *x)
{
	struct ep_live_counters lc;
	ep_live_counters(x->live, &lc);
	ep_pipeline_add_lost(x->feed.pipeline, lc.reserve_failed - x->lost_added);
	x->lost_added = lc.reserve_failed;
	ep_sink_emit(&x->sink, x->feed.pipeline);
}

/* Stops the session's sampling and sends the rest of its counts. done: it
 * reached its end (DONE travels with its last counts); otherwise the agent
 * is stopping and the session stays running for the next agent. */
static void session_end(struct ep_session_runner *r, size_t i, bool done)
{
	struct agent_session *x = r->active[i];
	ep_live_stop(x->live);
	ep_live_feed_poll(&x->feed, x->live, 0);
	uint64_t samples = session_samples(x);
	report(r, x->req->session_id,
	       done ? EDGEPROF__V1__SESSION_STATE__SESSION_DONE
		    : EDGEPROF__V1__SESSION_STATE__SESSION_RUNNING,
	       x->target.what, false, x->started_ns, done ? ep_unix_ns() : x->deadline_ns, samples);
	session_emit(x);
	ep_info("session %s: %s, %llu samples of %s", x->req->session_id,
		done ? "done" : "left running for the next agent (this one is stopping)",
		(unsigned long long)samples, x->target.what);
	if (done)
		note_finished(r, x->req->session_id);
	session_free(x);
	r->active[i] = r->active[--r->nactive];
}

void ep_session_runner_turn(struct ep_session_runner *r, bool emit)
{
	Edgeprof__V1__ProfileSession **got = NULL;
	size_t n = ep_streamer_take_sessions(r->main_sink->streamer, &got);
	for (size_t i = 0; i < n; i++)
		session_start(r, got[i]);
	free(got);
	uint64_t now = ep_unix_ns();
	for (size_t i = 0; i < r->nactive;) {
		struct agent_session *x = r->active[i];
		ep_live_feed_poll(&x->feed, x->live, 0);
		ep_live_feed_forget_exited(&x->feed);
		if (now >= x->deadline_ns) {
			session_end(r, i, true);
			continue;
		}
		if (emit) {
			session_emit(x);
			report(r, x->req->session_id, EDGEPROF__V1__SESSION_STATE__SESSION_RUNNING,
			       x->target.what, false, x->started_ns, x->deadline_ns,
			       session_samples(x));
		}
		i++;
	}
}

void ep_session_runner_leave(struct ep_session_runner *r)
{
	while (r && r->nactive)
		session_end(r, r->nactive - 1, false);
}

void ep_session_runner_free(struct ep_session_runner *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->nactive; i++)
		session_free(r->active[i]);
	free(r);
}
