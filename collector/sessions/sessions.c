/* SPDX-License-Identifier: Apache-2.0 */
#include "collector/sessions/sessions.h"
#include "common/util/clock.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "common/profile/pb_copy.h"
#include "common/util/json.h"
#include "common/util/log.h"
#include "common/util/sampling_limits.h"

#define CAPABILITY "profile-session"

struct node {
	char *name, *agent_id, *version;
	bool capable;
	int64_t last_seen_s;
	/* for the UI's fleet view, from the batches' stats and config */
	char *event;
	uint64_t samples, samples_with_branches, lost;
	double samples_per_s; /* of the last batch's window */
};

/* Finished sessions kept in memory for the UI's fleet view (the store has
 * them all), newest last. */
#define RECENT_MAX 20

/* A session not yet finished, and the agents it was handed to (in memory
 * only: after a collector restart it is handed out again, and an agent
 * ignores a session it already runs). */
struct active {
	Edgeprof__V1__Session *s;
	char **offered;
	size_t noffered;
	bool dirty; /* changed since it was last written to the store */
};

struct ep_sessions {
	struct ep_sessions_config cfg;
	struct ep_store *store;
	pthread_mutex_t lock;
	struct node *nodes;
	size_t nnodes;
	struct active *act;
	size_t nact;
	Edgeprof__V1__Session *recent[RECENT_MAX];
	size_t nrecent;
};

static int64_t now_s(void)
{
	return (int64_t)time(NULL);
}

const char *ep_session_state_name(Edgeprof__V1__SessionState state)
{
	switch (state) {
	case EDGEPROF__V1__SESSION_STATE__SESSION_PENDING:
		return "pending";
	case EDGEPROF__V1__SESSION_STATE__SESSION_RUNNING:
		return "running";
	case EDGEPROF__V1__SESSION_STATE__SESSION_DONE:
		return "done";
	case EDGEPROF__V1__SESSION_STATE__SESSION_FAILED:
		return "failed";
	default:
		return "unknown";
	}
}

static bool finished(const Edgeprof__V1__Session *s)
{
	return s->state == EDGEPROF__V1__SESSION_STATE__SESSION_DONE ||
	       s->state == EDGEPROF__V1__SESSION_STATE__SESSION_FAILED;
}

/* Strings of unpacked messages are malloc'd, or protobuf-c's shared empty
 * string, which must never be freed. */
static void set_str(char **field, const char *value)
{
	char *copy = strdup(value ? value : "");
	if (!copy)
		return; /* keeps the old value: a stale message, not a crash */
	if (*field && *field != protobuf_c_empty_string)
		free(*field);
	*field = copy;
}

static Edgeprof__V1__Session *session_copy(const Edgeprof__V1__Session *s)
{
	return ep_pb_copy(&s->base, (ep_pb_unpack_fn)edgeprof__v1__session__unpack);
}

static struct node *find_node(struct ep_sessions *ss, const char *name)
{
	for (size_t i = 0; i < ss->nnodes; i++)
		if (strcmp(ss->nodes[i].name, name) == 0)
			return &ss->nodes[i];
	return NULL;
}

static bool reporting(const struct ep_sessions *ss, const struct node *n, int64_t now)
{
	return now - n->last_seen_s <= (int64_t)ss->cfg.node_silent_s;
}

static bool listed(char *const *list, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(list[i], name) == 0)
			return true;
	return false;
}

static int append(char ***list, size_t *n, const char *name)
{
	char *copy = strdup(name);
	char **grown = copy ? realloc(*list, (*n + 1) * sizeof(*grown)) : NULL;
	if (!grown) {
		free(copy);
		return -1;
	}
	*list = grown;
	(*list)[(*n)++] = copy;
	return 0;
}

static void fail(struct active *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(struct active *a, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	a->s->state = EDGEPROF__V1__SESSION_STATE__SESSION_FAILED;
	set_str(&a->s->message, msg);
	a->s->ended_s = now_s();
	a->dirty = true;
	ep_info("session %s failed: %s", a->s->id, msg);
}

static const char *target_of(const Edgeprof__V1__Session *s, char *buf, size_t len)
{
	if (s->pod[0])
		snprintf(buf, len, "pod %s", s->pod);
	else if (s->container_id[0])
		snprintf(buf, len, "container %s", s->container_id);
	else if (s->cgroup[0])
		snprintf(buf, len, "cgroup %s", s->cgroup);
	else
		snprintf(buf, len, "pid %u", s->pid);
	return buf;
}

/* Timeouts: a session nobody took, or whose agent went quiet. */
static void tick(struct ep_sessions *ss)
{
	int64_t now = now_s();
	uint64_t ns = ep_unix_ns();
	for (size_t i = 0; i < ss->nact; i++) {
		struct active *a = &ss->act[i];
		Edgeprof__V1__Session *s = a->s;
		if (s->state == EDGEPROF__V1__SESSION_STATE__SESSION_PENDING &&
		    now - s->created_s >= (int64_t)ss->cfg.pickup_s) {
			const struct node *n = s->node[0] ? find_node(ss, s->node) : NULL;
			if (s->node[0] && !n)
				fail(a,
				     "no agent on node %s reported in the %u s after the request",
				     s->node, ss->cfg.pickup_s);
			else if (s->node[0])
				fail(a, "the agent on node %s did not take the session within %u s",
				     s->node, ss->cfg.pickup_s);
			else
				fail(a,
				     "no agent took the session within %u s (%zu nodes said "
				     "the target is not theirs)",
				     ss->cfg.pickup_s, s->n_refused_by);
		} else if (s->state == EDGEPROF__V1__SESSION_STATE__SESSION_RUNNING &&
			   s->deadline_ns &&
			   ns > s->deadline_ns + (uint64_t)ss->cfg.node_silent_s * 1000000000ULL) {
			fail(
			    a,
			    "the agent on node %s stopped reporting during the session; the counts "
			    "it sent are kept",
			    s->node);
		}
	}
}

/* Writes what changed and lets finished sessions go (the store keeps them). */
static void flush(struct ep_sessions *ss)
{
	size_t kept = 0;
	for (size_t i = 0; i < ss->nact; i++) {
		struct active *a = &ss->act[i];
		if (a->dirty) {
			char err[512];
			a->s->updated_ns = ep_unix_ns();
			if (ep_store_session_put(ss->store, a->s, err, sizeof(err)) == 0)
				a->dirty = false;
			else
				ep_warn("session %s: %s (kept in memory, written again later)",
					a->s->id, err);
		}
		if (finished(a->s) && !a->dirty) {
			if (ss->nrecent == RECENT_MAX) {
				edgeprof__v1__session__free_unpacked(ss->recent[0], NULL);
				memmove(ss->recent, ss->recent + 1,
					(RECENT_MAX - 1) * sizeof(*ss->recent));
				ss->nrecent--;
			}
			ss->recent[ss->nrecent++] = a->s;
			for (size_t j = 0; j < a->noffered; j++)
				free(a->offered[j]);
			free(a->offered);
			continue;
		}
		ss->act[kept++] = *a;
	}
	ss->nact = kept;
}

static int add_active(struct ep_sessions *ss, Edgeprof__V1__Session *s, bool dirty)
{
	struct active *grown = realloc(ss->act, (ss->nact + 1) * sizeof(*grown));
	if (!grown)
		return -1;
	ss->act = grown;
	ss->act[ss->nact++] = (struct active){.s = s, .dirty = dirty};
	return 0;
}

struct ep_sessions *ep_sessions_new(struct ep_store *store, const struct ep_sessions_config *cfg,
				    char *err, size_t errlen)
{
	struct ep_sessions *ss = calloc(1, sizeof(*ss));
	if (!ss) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	ss->cfg = *cfg;
	if (!ss->cfg.max_duration_s)
		ss->cfg.max_duration_s = 600;
	if (!ss->cfg.node_silent_s)
		ss->cfg.node_silent_s = 60;
	if (!ss->cfg.pickup_s)
		ss->cfg.pickup_s = 30;
	ss->store = store;
	pthread_mutex_init(&ss->lock, NULL);
	Edgeprof__V1__SessionList *list = ep_store_sessions_unfinished(store, err, errlen);
	if (!list) {
		ep_sessions_free(ss);
		return NULL;
	}
	for (size_t i = 0; i < list->n_sessions; i++) {
		Edgeprof__V1__Session *s = session_copy(list->sessions[i]);
		if (!s || add_active(ss, s, false) != 0) {
			if (s)
				edgeprof__v1__session__free_unpacked(s, NULL);
			snprintf(err, errlen, "out of memory loading the sessions");
			ep_store_free_session_list(list);
			ep_sessions_free(ss);
			return NULL;
		}
	}
	if (list->n_sessions)
		ep_info("%zu on-demand sessions resumed from the store", list->n_sessions);
	ep_store_free_session_list(list);
	return ss;
}

void ep_sessions_free(struct ep_sessions *ss)
{
	if (!ss)
		return;
	for (size_t i = 0; i < ss->nact; i++) {
		edgeprof__v1__session__free_unpacked(ss->act[i].s, NULL);
		for (size_t j = 0; j < ss->act[i].noffered; j++)
			free(ss->act[i].offered[j]);
		free(ss->act[i].offered);
	}
	free(ss->act);
	for (size_t i = 0; i < ss->nrecent; i++)
		edgeprof__v1__session__free_unpacked(ss->recent[i], NULL);
	for (size_t i = 0; i < ss->nnodes; i++) {
		free(ss->nodes[i].event);
		free(ss->nodes[i].name);
		free(ss->nodes[i].agent_id);
		free(ss->nodes[i].version);
	}
	free(ss->nodes);
	pthread_mutex_destroy(&ss->lock);
	free(ss);
}

unsigned ep_sessions_max_duration_s(const struct ep_sessions *ss)
{
	return ss->cfg.max_duration_s;
}

/* 409 with why when no agent could run the session, else 0. */
static int check_nodes(struct ep_sessions *ss, const char *node, char *why, size_t whylen)
{
	int64_t now = now_s();
	if (node[0]) {
		const struct node *n = find_node(ss, node);
		if (!n || !reporting(ss, n, now)) {
			if (n)
				snprintf(why, whylen,
					 "node %s is not reporting: its last batch came %" PRId64
					 " s ago (more than %u s)",
					 node, now - n->last_seen_s, ss->cfg.node_silent_s);
			else
				snprintf(why, whylen,
					 "node %s has not sent a batch to this collector since it "
					 "started",
					 node);
			return 409;
		}
		if (!n->capable) {
			snprintf(why, whylen,
				 "the agent on node %s (edgeprof %s) is too old for on-demand "
				 "sessions: upgrade it",
				 node, n->version);
			return 409;
		}
		return 0;
	}
	for (size_t i = 0; i < ss->nnodes; i++)
		if (ss->nodes[i].capable && reporting(ss, &ss->nodes[i], now))
			return 0;
	snprintf(why, whylen,
		 "no agent that can run on-demand sessions has reported in the last %u s",
		 ss->cfg.node_silent_s);
	return 409;
}

int ep_sessions_create(struct ep_sessions *ss, const Edgeprof__V1__Session *req,
		       Edgeprof__V1__Session **out, char *why, size_t whylen)
{
	*out = NULL;
	int targets = (req->container_id[0] != 0) + (req->cgroup[0] != 0) + (req->pid != 0) +
		      (req->pod[0] != 0);
	if (targets != 1) {
		snprintf(why, whylen, "name exactly one target: container_id, cgroup, pid or pod");
		return 400;
	}
	const char *slash = strchr(req->pod, '/');
	if (req->pod[0] && (!slash || slash == req->pod || !slash[1] || strchr(slash + 1, '/'))) {
		snprintf(why, whylen, "pod '%s': expected NAMESPACE/NAME", req->pod);
		return 400;
	}
	if (req->duration_ms == 0) {
		snprintf(why, whylen, "duration: a positive number of seconds is required");
		return 400;
	}
	if (req->duration_ms > (uint64_t)ss->cfg.max_duration_s * 1000) {
		snprintf(why, whylen,
			 "duration %" PRIu64 " s is over this collector's maximum of %u s "
			 "(--max-session-s)",
			 req->duration_ms / 1000, ss->cfg.max_duration_s);
		return 400;
	}
	/* the agent checks again against its own kernel (common/util/
	 * sampling_limits.h); here the default kernel's limit bounds it */
	uint64_t min_period = ep_period_min(EP_KERNEL_SAMPLE_RATE_DEFAULT);
	if (req->period && (req->period < min_period || req->period > EP_PERIOD_MAX)) {
		snprintf(why, whylen,
			 "period %" PRIu64 ": events between samples, at least %" PRIu64
			 " (a CPU retiring 2e9 branches per second would otherwise take more "
			 "than a kernel's default %u samples per second) and at most %llu",
			 req->period, min_period, EP_KERNEL_SAMPLE_RATE_DEFAULT, EP_PERIOD_MAX);
		return 400;
	}
	const char *mode = req->mode[0] ? req->mode : "edges";
	if (strcmp(mode, "edges") != 0 && strcmp(mode, "calls") != 0) {
		snprintf(why, whylen, "mode '%s': expected edges or calls", req->mode);
		return 400;
	}
	uint8_t raw[8];
	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw)) {
		snprintf(why, whylen, "getrandom: %s", strerror(errno));
		return 503;
	}
	char id[17];
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(id + 2 * i, 3, "%02x", raw[i]);

	pthread_mutex_lock(&ss->lock);
	int status = check_nodes(ss, req->node, why, whylen);
	Edgeprof__V1__Session *s = NULL;
	if (status == 0) {
		s = session_copy(req);
		status = s ? 0 : 503;
		if (!s)
			snprintf(why, whylen, "out of memory");
	}
	if (status == 0) {
		set_str(&s->id, id);
		set_str(&s->mode, mode);
		s->state = EDGEPROF__V1__SESSION_STATE__SESSION_PENDING;
		s->created_s = now_s();
		s->started_s = s->ended_s = 0;
		s->deadline_ns = 0;
		s->updated_ns = ep_unix_ns();
		char err[512];
		if (ep_store_session_put(ss->store, s, err, sizeof(err)) != 0) {
			snprintf(why, whylen, "store: %s", err);
			status = 503;
		} else if (!(*out = session_copy(s)) || add_active(ss, s, false) != 0) {
			snprintf(why, whylen, "out of memory");
			status = 503;
		} else {
			char t[300];
			ep_info("session %s: %s for %" PRIu64 " s on %s, asked for", id,
				target_of(s, t, sizeof(t)), s->duration_ms / 1000,
				s->node[0] ? s->node : "any node");
			s = NULL; /* the active list owns it */
		}
	}
	if (status != 0 && *out) {
		edgeprof__v1__session__free_unpacked(*out, NULL);
		*out = NULL;
	}
	if (s)
		edgeprof__v1__session__free_unpacked(s, NULL);
	pthread_mutex_unlock(&ss->lock);
	return status;
}

Edgeprof__V1__Session *ep_sessions_get(struct ep_sessions *ss, const char *id, char *why,
				       size_t whylen)
{
	why[0] = '\0';
	pthread_mutex_lock(&ss->lock);
	tick(ss);
	Edgeprof__V1__Session *copy = NULL;
	bool found = false;
	for (size_t i = 0; i < ss->nact && !found; i++) {
		if (strcmp(ss->act[i].s->id, id) == 0) {
			found = true;
			copy = session_copy(ss->act[i].s);
			if (!copy)
				snprintf(why, whylen, "out of memory");
		}
	}
	flush(ss);
	pthread_mutex_unlock(&ss->lock);
	if (!found) {
		Edgeprof__V1__Session *stored = ep_store_session_get(ss->store, id, why, whylen);
		if (stored) {
			copy = session_copy(stored);
			ep_store_free_session(stored);
			if (!copy)
				snprintf(why, whylen, "out of memory");
		}
	}
	return copy;
}

static void note_node(struct ep_sessions *ss, const Edgeprof__V1__Batch *b, const char *name)
{
	bool capable = false;
	for (size_t i = 0; i < b->n_capabilities; i++)
		capable |= strcmp(b->capabilities[i], CAPABILITY) == 0;
	struct node *n = find_node(ss, name);
	if (!n) {
		struct node *grown = realloc(ss->nodes, (ss->nnodes + 1) * sizeof(*grown));
		if (!grown)
			return;
		ss->nodes = grown;
		n = &ss->nodes[ss->nnodes];
		*n = (struct node){.name = strdup(name)};
		if (!n->name)
			return;
		ss->nnodes++;
	}
	set_str(&n->agent_id, b->agent->agent_id);
	set_str(&n->version, b->agent->version ? b->agent->version : "");
	n->capable = capable;
	n->last_seen_s = now_s();
	if (b->config && b->config->event)
		set_str(&n->event, b->config->event);
	if (b->stats) {
		n->samples += b->stats->samples;
		n->samples_with_branches += b->stats->samples_with_branches;
		n->lost += b->stats->lost_records;
		uint64_t ns = b->window_end_ns > b->window_start_ns
				  ? b->window_end_ns - b->window_start_ns
				  : 0;
		n->samples_per_s = ns ? (double)b->stats->samples * 1e9 / (double)ns : 0.0;
	}
}

/* Every node that can run sessions and reports has said the target is not
 * there. */
static bool refused_everywhere(struct ep_sessions *ss, const Edgeprof__V1__Session *s)
{
	int64_t now = now_s();
	for (size_t i = 0; i < ss->nnodes; i++) {
		const struct node *n = &ss->nodes[i];
		if (n->capable && reporting(ss, n, now) &&
		    !listed(s->refused_by, s->n_refused_by, n->name))
			return false;
	}
	return true;
}

static void apply_report(struct ep_sessions *ss, struct active *a,
			 const Edgeprof__V1__SessionReport *r, const char *agent_id,
			 const char *node)
{
	Edgeprof__V1__Session *s = a->s;
	if (finished(s))
		return;
	/* one agent runs per node: any agent of the session's node speaks for
	 * it (a restarted agent may report DONE before its RUNNING got out);
	 * an agent elsewhere does not */
	bool current =
	    !s->agent_id[0] || strcmp(s->agent_id, agent_id) == 0 || strcmp(s->node, node) == 0;
	char t[300];
	switch (r->state) {
	case EDGEPROF__V1__SESSION_STATE__SESSION_RUNNING:
		if (!current)
			return;
		if (s->state == EDGEPROF__V1__SESSION_STATE__SESSION_PENDING)
			ep_info("session %s: running on node %s (%s)", s->id, node, r->message);
		else if (strcmp(s->agent_id, agent_id) != 0)
			ep_info("session %s: resumed by agent %s on node %s", s->id, agent_id,
				node);
		s->state = EDGEPROF__V1__SESSION_STATE__SESSION_RUNNING;
		set_str(&s->agent_id, agent_id);
		set_str(&s->node, node);
		set_str(&s->message, r->message);
		if (!s->started_s)
			s->started_s = (int64_t)(r->started_ns / 1000000000ULL);
		if (r->ended_ns)
			s->deadline_ns = r->ended_ns;
		s->samples = r->samples;
		a->dirty = true;
		break;
	case EDGEPROF__V1__SESSION_STATE__SESSION_DONE:
		if (!current)
			return;
		s->state = EDGEPROF__V1__SESSION_STATE__SESSION_DONE;
		set_str(&s->agent_id, agent_id);
		set_str(&s->node, node);
		if (r->message[0])
			set_str(&s->message, r->message);
		s->ended_s = (int64_t)(r->ended_ns / 1000000000ULL);
		if (!s->started_s)
			s->started_s = (int64_t)(r->started_ns / 1000000000ULL);
		s->samples = r->samples;
		a->dirty = true;
		ep_info("session %s: done on node %s, %" PRIu64 " samples", s->id, node,
			s->samples);
		break;
	case EDGEPROF__V1__SESSION_STATE__SESSION_FAILED:
		if (r->target_absent) {
			if (!listed(s->refused_by, s->n_refused_by, node) &&
			    append(&s->refused_by, &s->n_refused_by, node) == 0)
				a->dirty = true;
			if (s->node[0])
				fail(a, "node %s: %s", node, r->message);
			else if (refused_everywhere(ss, s))
				fail(a, "%s is on none of the %zu nodes reporting (node %s: %s)",
				     target_of(s, t, sizeof(t)), s->n_refused_by, node, r->message);
			return;
		}
		if (!current)
			return;
		fail(a, "node %s: %s", node, r->message);
		break;
	default:
		break;
	}
}

static Edgeprof__V1__Instruction *instruction_for(const Edgeprof__V1__Session *s)
{
	Edgeprof__V1__Instruction *in = malloc(sizeof(*in));
	Edgeprof__V1__ProfileSession *ps = malloc(sizeof(*ps));
	if (!in || !ps) {
		free(in);
		free(ps);
		return NULL;
	}
	edgeprof__v1__instruction__init(in);
	edgeprof__v1__profile_session__init(ps);
	in->kind_case = EDGEPROF__V1__INSTRUCTION__KIND_PROFILE_SESSION;
	in->profile_session = ps;
	set_str(&ps->session_id, s->id);
	set_str(&ps->cgroup, s->cgroup);
	set_str(&ps->container_id, s->container_id);
	set_str(&ps->pod, s->pod);
	set_str(&ps->mode, s->mode);
	ps->pid = s->pid;
	ps->duration_ms = s->duration_ms;
	ps->period = s->period;
	ps->deadline_ns = s->deadline_ns;
	return in;
}

static bool should_offer(const struct active *a, const char *agent_id, const char *node)
{
	const Edgeprof__V1__Session *s = a->s;
	if (listed(a->offered, a->noffered, agent_id))
		return false;
	if (s->state == EDGEPROF__V1__SESSION_STATE__SESSION_PENDING)
		return (!s->node[0] || strcmp(s->node, node) == 0) &&
		       !listed(s->refused_by, s->n_refused_by, node);
	/* the node's agent restarted: the new one runs the rest */
	return s->state == EDGEPROF__V1__SESSION_STATE__SESSION_RUNNING &&
	       strcmp(s->node, node) == 0 && strcmp(s->agent_id, agent_id) != 0 &&
	       s->deadline_ns > ep_unix_ns() + 1000000000ULL;
}

void ep_sessions_on_batch(struct ep_sessions *ss, const Edgeprof__V1__Batch *b,
			  Edgeprof__V1__IngestResponse *resp)
{
	const char *agent_id = b->agent->agent_id;
	const char *node = b->agent->node && b->agent->node[0] ? b->agent->node : "unknown";
	pthread_mutex_lock(&ss->lock);
	note_node(ss, b, node);
	for (size_t i = 0; i < b->n_sessions; i++)
		for (size_t j = 0; j < ss->nact; j++)
			if (strcmp(ss->act[j].s->id, b->sessions[i]->session_id) == 0)
				apply_report(ss, &ss->act[j], b->sessions[i], agent_id, node);
	tick(ss);
	const struct node *n = find_node(ss, node);
	for (size_t j = 0; n && n->capable && j < ss->nact; j++) {
		struct active *a = &ss->act[j];
		if (!should_offer(a, agent_id, node))
			continue;
		Edgeprof__V1__Instruction *in = instruction_for(a->s);
		Edgeprof__V1__Instruction **grown =
		    in ? realloc(resp->instructions, (resp->n_instructions + 1) * sizeof(*grown))
		       : NULL;
		if (!grown) {
			if (in)
				edgeprof__v1__instruction__free_unpacked(in, NULL);
			break;
		}
		resp->instructions = grown;
		resp->instructions[resp->n_instructions++] = in;
		append(&a->offered, &a->noffered, agent_id);
		ep_debug("session %s: handed to agent %s on node %s", a->s->id, agent_id, node);
	}
	flush(ss);
	pthread_mutex_unlock(&ss->lock);
}

void ep_sessions_response_free(Edgeprof__V1__IngestResponse *resp)
{
	for (size_t i = 0; i < resp->n_instructions; i++)
		edgeprof__v1__instruction__free_unpacked(resp->instructions[i], NULL);
	free(resp->instructions);
	resp->instructions = NULL;
	resp->n_instructions = 0;
}

static void json_field(FILE *out, const char *key, const char *value, bool first)
{
	fprintf(out, "%s\"%s\": ", first ? "" : ", ", key);
	ep_json_string(out, value);
}

char *ep_sessions_nodes_json(struct ep_sessions *ss, size_t *len)
{
	char *body = NULL;
	FILE *out = open_memstream(&body, len);
	if (!out)
		return NULL;
	pthread_mutex_lock(&ss->lock);
	int64_t now = now_s();
	fputs("{\"nodes\": [", out);
	for (size_t i = 0; i < ss->nnodes; i++) {
		const struct node *n = &ss->nodes[i];
		fputs(i ? ", {" : "{", out);
		json_field(out, "name", n->name, true);
		json_field(out, "agent_id", n->agent_id, false);
		json_field(out, "version", n->version, false);
		fprintf(out, ", \"sessions\": %s, \"last_seen\": %lld, \"reporting\": %s}",
			n->capable ? "true" : "false", (long long)n->last_seen_s,
			reporting(ss, n, now) ? "true" : "false");
	}
	fputs("]}\n", out);
	pthread_mutex_unlock(&ss->lock);
	if (fclose(out) != 0) {
		free(body);
		return NULL;
	}
	return body;
}

static char *dup_or_empty(const char *s)
{
	return strdup(s ? s : "");
}

size_t ep_sessions_nodes(struct ep_sessions *ss, struct ep_node_info **out)
{
	pthread_mutex_lock(&ss->lock);
	int64_t now = now_s();
	size_t n = 0;
	*out = calloc(ss->nnodes + 1, sizeof(**out));
	for (size_t i = 0; *out && i < ss->nnodes; i++) {
		const struct node *k = &ss->nodes[i];
		struct ep_node_info *o = &(*out)[n];
		*o = (struct ep_node_info){.name = dup_or_empty(k->name),
					   .agent_id = dup_or_empty(k->agent_id),
					   .version = dup_or_empty(k->version),
					   .event = dup_or_empty(k->event),
					   .capable = k->capable,
					   .reporting = reporting(ss, k, now),
					   .last_seen_s = k->last_seen_s,
					   .samples = k->samples,
					   .samples_with_branches = k->samples_with_branches,
					   .lost = k->lost,
					   .samples_per_s = k->samples_per_s};
		n++;
		if (!o->name || !o->agent_id || !o->version || !o->event) {
			ep_sessions_free_nodes(*out, n);
			*out = NULL;
			n = 0;
		}
	}
	pthread_mutex_unlock(&ss->lock);
	return n;
}

void ep_sessions_free_nodes(struct ep_node_info *nodes, size_t n)
{
	for (size_t i = 0; nodes && i < n; i++) {
		free(nodes[i].name);
		free(nodes[i].agent_id);
		free(nodes[i].version);
		free(nodes[i].event);
	}
	free(nodes);
}

Edgeprof__V1__SessionList *ep_sessions_list(struct ep_sessions *ss)
{
	Edgeprof__V1__SessionList *l = malloc(sizeof(*l));
	if (!l)
		return NULL;
	edgeprof__v1__session_list__init(l);
	pthread_mutex_lock(&ss->lock);
	tick(ss);
	flush(ss);
	l->sessions = calloc(ss->nact + ss->nrecent + 1, sizeof(*l->sessions));
	bool oom = !l->sessions;
	for (size_t i = ss->nact; !oom && i > 0; i--)
		oom = !(l->sessions[l->n_sessions++] = session_copy(ss->act[i - 1].s));
	for (size_t i = ss->nrecent; !oom && i > 0; i--)
		oom = !(l->sessions[l->n_sessions++] = session_copy(ss->recent[i - 1]));
	pthread_mutex_unlock(&ss->lock);
	if (oom) {
		if (l->n_sessions)
			l->n_sessions--; /* the NULL one */
		ep_store_free_session_list(l);
		return NULL;
	}
	return l;
}
