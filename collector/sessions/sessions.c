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

/* A node as this collector sees it: what the store says (every replica's
 * writes), overlaid with what this collector's own batches said since. */
struct node {
	char *name, *agent_id, *version;
	bool capable;
	uint64_t seen_ns; /* unix ns of its newest batch */
	/* for the UI's fleet view, from the batches' stats and config */
	char *event;
	uint64_t samples, samples_with_branches, lost; /* the store's sums plus unput */
	double samples_per_s;			       /* of the last batch's window */
	/* this collector's part not yet in the store: the identity (dirty)
	 * and the sums of its batches since the last put */
	bool dirty;
	uint64_t unput_samples, unput_with_branches, unput_lost;
};

/* A session not yet finished, as the store had it at the last reload or
 * as this collector changed it since, and the agents this collector
 * handed it to (in memory only: another replica, or this one restarted,
 * hands it out again, and an agent ignores a session it already runs). */
struct active {
	Edgeprof__V1__Session *s;
	char **offered;
	size_t noffered;
	bool dirty; /* changed since it was last written to the store */
};

static void active_free(struct active *a)
{
	edgeprof__v1__session__free_unpacked(a->s, NULL);
	for (size_t j = 0; j < a->noffered; j++)
		free(a->offered[j]);
	free(a->offered);
}

/* Finished sessions listed for the UI's fleet view (read from the store). */
#define RECENT_MAX 20

struct ep_sessions {
	struct ep_sessions_config cfg;
	struct ep_store *store;
	pthread_mutex_t lock;
	struct node *nodes;
	size_t nnodes;
	uint64_t nodes_loaded_ns; /* monotonic: the last reload of the nodes */
	bool nodes_failing;	  /* the last put failed: said once */
	/* flush and reload run one at a time: a reload between a put and the
	 * clearing of what it carried would count those sums twice */
	pthread_mutex_t sync_lock;
	struct active *act;
	size_t nact;
	uint64_t refused_full;	  /* requests refused: max_open sessions were open */
	uint64_t nodes_untracked; /* batches of nodes past max_nodes */
	int64_t untracked_said_s; /* when that was last logged */
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

/* ss->nodes is kept sorted by name: a fleet's thousands of nodes are
 * looked up per batch and merged with the store's (sorted) list. */
static size_t node_slot(const struct ep_sessions *ss, const char *name, bool *found)
{
	size_t lo = 0, hi = ss->nnodes;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(ss->nodes[mid].name, name);
		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = false;
	return lo;
}

static struct node *find_node(struct ep_sessions *ss, const char *name)
{
	bool found;
	size_t i = node_slot(ss, name, &found);
	return found ? &ss->nodes[i] : NULL;
}

static int64_t seen_s(const struct node *n)
{
	return (int64_t)(n->seen_ns / EP_NS_PER_S);
}

static bool reporting(const struct ep_sessions *ss, const struct node *n, int64_t now)
{
	return now - seen_s(n) <= (int64_t)ss->cfg.node_silent_s;
}

static void node_clear(struct node *n)
{
	free(n->name);
	free(n->agent_id);
	free(n->version);
	free(n->event);
}

static void node_msg_free(Edgeprof__V1__Node *m)
{
	free(m->name);
	free(m->agent_id);
	free(m->version);
	free(m->event);
}

/* Writes what this collector's batches said of their nodes since the last
 * write, all in one put (ClickHouse takes few big inserts better than many
 * small ones). Under sync_lock, so no reload reads the store between the
 * put and the clearing of what it carried. */
static void flush_nodes(struct ep_sessions *ss)
{
	pthread_mutex_lock(&ss->lock);
	size_t n = 0;
	for (size_t i = 0; i < ss->nnodes; i++)
		n += ss->nodes[i].dirty;
	Edgeprof__V1__Node *msgs = n ? calloc(n, sizeof(*msgs)) : NULL;
	Edgeprof__V1__Node **ptrs = n ? calloc(n, sizeof(*ptrs)) : NULL;
	size_t k = 0;
	bool oom = n && (!msgs || !ptrs);
	/* copies: a batch may replace a node's strings while the put runs */
	for (size_t i = 0; !oom && i < ss->nnodes; i++) {
		struct node *x = &ss->nodes[i];
		if (!x->dirty)
			continue;
		Edgeprof__V1__Node *m = &msgs[k];
		edgeprof__v1__node__init(m);
		m->name = strdup(x->name);
		m->agent_id = strdup(x->agent_id ? x->agent_id : "");
		m->version = strdup(x->version ? x->version : "");
		m->event = strdup(x->event ? x->event : "");
		ptrs[k++] = m;
		if (!m->name || !m->agent_id || !m->version || !m->event) {
			oom = true;
			break;
		}
		m->sessions = x->capable;
		m->seen_ns = x->seen_ns;
		m->samples_per_s = x->samples_per_s;
		m->samples = x->unput_samples;
		m->samples_with_branches = x->unput_with_branches;
		m->lost = x->unput_lost;
	}
	if (!oom && !k) {
		pthread_mutex_unlock(&ss->lock);
		return;
	}
	if (!oom) {
		for (size_t i = 0; i < ss->nnodes; i++) {
			struct node *x = &ss->nodes[i];
			x->dirty = false;
			x->unput_samples = x->unput_with_branches = x->unput_lost = 0;
		}
	}
	pthread_mutex_unlock(&ss->lock);
	char err[512] = "out of memory";
	int rc = oom ? -1 : ep_store_nodes_put(ss->store, ptrs, k, err, sizeof(err));
	if (rc != 0 && !oom) {
		/* what did not get out is put with the next */
		pthread_mutex_lock(&ss->lock);
		for (size_t i = 0; i < k; i++) {
			struct node *x = find_node(ss, ptrs[i]->name);
			if (!x)
				continue;
			x->dirty = true;
			x->unput_samples += ptrs[i]->samples;
			x->unput_with_branches += ptrs[i]->samples_with_branches;
			x->unput_lost += ptrs[i]->lost;
		}
		pthread_mutex_unlock(&ss->lock);
	}
	if (rc != 0 && !ss->nodes_failing)
		ep_warn("nodes: %s (kept here, written again later)", err);
	else if (rc == 0 && ss->nodes_failing)
		ep_info("nodes: written to the store again");
	ss->nodes_failing = rc != 0;
	for (size_t i = 0; i < k; i++)
		node_msg_free(ptrs[i]);
	free(msgs);
	free(ptrs);
}

/* A node from the store's record, or a copy of one of ours; either way
 * with its strings copied. 0, or -1 (out of memory). */
static int node_from(struct node *x, const Edgeprof__V1__Node *m, const struct node *ours)
{
	if (ours)
		*x = (struct node){.name = strdup(ours->name),
				   .agent_id = strdup(ours->agent_id ? ours->agent_id : ""),
				   .version = strdup(ours->version ? ours->version : ""),
				   .event = strdup(ours->event ? ours->event : ""),
				   .capable = ours->capable,
				   .seen_ns = ours->seen_ns,
				   .samples_per_s = ours->samples_per_s};
	else
		*x = (struct node){.name = strdup(m->name),
				   .agent_id = strdup(m->agent_id),
				   .version = strdup(m->version),
				   .event = strdup(m->event),
				   .capable = m->sessions,
				   .seen_ns = m->seen_ns,
				   .samples_per_s = m->samples_per_s};
	if (x->name && x->agent_id && x->version && x->event)
		return 0;
	node_clear(x);
	return -1;
}

/* The store's nodes, merged with this collector's own news: a node this
 * collector heard from more recently than any replica wrote keeps what it
 * heard; sums not yet put are added to the store's. Both lists are sorted
 * by name. Under sync_lock (after flush_nodes). 0, or -1 with err. */
static int reload_nodes(struct ep_sessions *ss, char *err, size_t errlen)
{
	Edgeprof__V1__NodeList *l = ep_store_nodes(ss->store, err, errlen);
	if (!l)
		return -1;
	pthread_mutex_lock(&ss->lock);
	struct node *fresh = calloc(l->n_nodes + ss->nnodes + 1, sizeof(*fresh));
	size_t nf = 0, i = 0, j = 0;
	int rc = fresh ? 0 : -1;
	while (rc == 0 && (i < l->n_nodes || j < ss->nnodes)) {
		int c = i == l->n_nodes	  ? 1
			: j == ss->nnodes ? -1
					  : strcmp(l->nodes[i]->name, ss->nodes[j].name);
		const Edgeprof__V1__Node *st = c <= 0 ? l->nodes[i++] : NULL;
		const struct node *old = c >= 0 ? &ss->nodes[j++] : NULL;
		if (!st && !old->dirty)
			continue; /* pruned from the store, nothing of ours to put */
		bool ours = old && (!st || old->seen_ns >= st->seen_ns);
		struct node *x = &fresh[nf];
		if ((rc = node_from(x, st, ours ? old : NULL)) != 0)
			break;
		nf++;
		x->samples = (st ? st->samples : 0) + (old ? old->unput_samples : 0);
		x->samples_with_branches =
		    (st ? st->samples_with_branches : 0) + (old ? old->unput_with_branches : 0);
		x->lost = (st ? st->lost : 0) + (old ? old->unput_lost : 0);
		if (old) {
			x->dirty = old->dirty;
			x->unput_samples = old->unput_samples;
			x->unput_with_branches = old->unput_with_branches;
			x->unput_lost = old->unput_lost;
		}
	}
	if (rc != 0) {
		for (size_t k = 0; k < nf; k++)
			node_clear(&fresh[k]);
		free(fresh);
		snprintf(err, errlen, "out of memory");
	} else {
		for (size_t k = 0; k < ss->nnodes; k++)
			node_clear(&ss->nodes[k]);
		free(ss->nodes);
		ss->nodes = fresh;
		ss->nnodes = nf;
		ss->nodes_loaded_ns = ep_mono_ns();
	}
	pthread_mutex_unlock(&ss->lock);
	ep_store_free_node_list(l);
	return rc;
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

static struct active *find_active(struct ep_sessions *ss, const char *id)
{
	for (size_t i = 0; i < ss->nact; i++)
		if (strcmp(ss->act[i].s->id, id) == 0)
			return &ss->act[i];
	return NULL;
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

/* Takes stored (a session as the store has it) into a unless a holds
 * something newer: another replica moved the session since. */
static void take_newer(struct active *a, Edgeprof__V1__Session *stored)
{
	if (!a->dirty && stored->updated_ns > a->s->updated_ns) {
		edgeprof__v1__session__free_unpacked(a->s, NULL);
		a->s = stored;
	} else {
		edgeprof__v1__session__free_unpacked(stored, NULL);
	}
}

/* The session as the store has it now (another replica may have moved it
 * since the last reload: a report or a timeout must start from there), in
 * the active list: its entry, possibly finished (flush() lets it go), or
 * NULL when it is not there and not unfinished in the store. Lock held;
 * may grow ss->act. */
static struct active *refresh(struct ep_sessions *ss, const char *id)
{
	struct active *a = find_active(ss, id);
	if (a && a->dirty)
		return a; /* not written yet: newer than anything stored */
	char err[512];
	Edgeprof__V1__Session *st = ep_store_session_get(ss->store, id, err, sizeof(err));
	if (!st) {
		if (err[0])
			ep_warn("session %s: %s (going on with what this collector knows)", id,
				err);
		return a;
	}
	if (a) {
		take_newer(a, st);
		return a;
	}
	if (finished(st) || add_active(ss, st, false) != 0) {
		edgeprof__v1__session__free_unpacked(st, NULL);
		return NULL;
	}
	return &ss->act[ss->nact - 1];
}

/* Timeouts: a session nobody took, or whose agent went quiet. Each replica
 * checks; before one says a session failed it reads the session again, so
 * a report another replica stored since is not overwritten. */
static bool timed_out(const struct ep_sessions *ss, const Edgeprof__V1__Session *s, int64_t now,
		      uint64_t ns)
{
	if (s->state == EDGEPROF__V1__SESSION_STATE__SESSION_PENDING)
		return now - s->created_s >= (int64_t)ss->cfg.pickup_s;
	return s->state == EDGEPROF__V1__SESSION_STATE__SESSION_RUNNING && s->deadline_ns &&
	       ns > s->deadline_ns + (uint64_t)ss->cfg.node_silent_s * 1000000000ULL;
}

static void tick(struct ep_sessions *ss)
{
	int64_t now = now_s();
	uint64_t ns = ep_unix_ns();
	for (size_t i = 0; i < ss->nact; i++) {
		if (!timed_out(ss, ss->act[i].s, now, ns))
			continue;
		/* the entry is in the list: refresh() does not grow it */
		struct active *a = refresh(ss, ss->act[i].s->id);
		Edgeprof__V1__Session *s = a->s;
		if (!timed_out(ss, s, now, ns))
			continue;
		if (s->state == EDGEPROF__V1__SESSION_STATE__SESSION_PENDING) {
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
		} else {
			fail(
			    a,
			    "the agent on node %s stopped reporting during the session; the counts "
			    "it sent are kept",
			    s->node);
		}
	}
}

/* Writes what changed and lets finished sessions go (the store keeps
 * them, and every replica reads them there). */
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
			active_free(a);
			continue;
		}
		ss->act[kept++] = *a;
	}
	ss->nact = kept;
}

/* The store's unfinished sessions into the active list: one another
 * replica created is added, one it moved is taken unless this collector
 * has news of its own, and one that is no longer unfinished there (another
 * replica finished it, or retention pruned it) goes, unless this
 * collector changed it after the read began. 0, or -1 with err. */
static int reload_sessions(struct ep_sessions *ss, char *err, size_t errlen)
{
	uint64_t began = ep_unix_ns();
	Edgeprof__V1__SessionList *l = ep_store_sessions_unfinished(ss->store, err, errlen);
	if (!l)
		return -1;
	pthread_mutex_lock(&ss->lock);
	int rc = 0;
	for (size_t i = 0; i < l->n_sessions && rc == 0; i++) {
		Edgeprof__V1__Session *st = l->sessions[i];
		struct active *a = find_active(ss, st->id);
		Edgeprof__V1__Session *copy = session_copy(st);
		if (!copy)
			rc = -1;
		else if (a)
			take_newer(a, copy);
		else if (add_active(ss, copy, false) != 0) {
			edgeprof__v1__session__free_unpacked(copy, NULL);
			rc = -1;
		}
	}
	size_t kept = 0;
	for (size_t i = 0; i < ss->nact && rc == 0; i++) {
		struct active *a = &ss->act[i];
		bool listed_there = false;
		for (size_t k = 0; k < l->n_sessions && !listed_there; k++)
			listed_there = strcmp(l->sessions[k]->id, a->s->id) == 0;
		if (!listed_there && !a->dirty && a->s->updated_ns < began) {
			active_free(a);
			continue;
		}
		ss->act[kept++] = *a;
	}
	if (rc == 0)
		ss->nact = kept;
	pthread_mutex_unlock(&ss->lock);
	ep_store_free_session_list(l);
	if (rc != 0)
		snprintf(err, errlen, "out of memory loading the sessions");
	return rc;
}

/* What the store has: nodes (after putting this collector's news) and
 * sessions. 0, or -1 with err. */
static int sync_with_store(struct ep_sessions *ss, bool sessions, char *err, size_t errlen)
{
	pthread_mutex_lock(&ss->sync_lock);
	flush_nodes(ss);
	int rc = reload_nodes(ss, err, errlen);
	if (rc == 0 && sessions)
		rc = reload_sessions(ss, err, errlen);
	pthread_mutex_unlock(&ss->sync_lock);
	return rc;
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
	if (!ss->cfg.sync_ms)
		ss->cfg.sync_ms = 1000;
	if (!ss->cfg.max_open)
		ss->cfg.max_open = 256;
	if (!ss->cfg.max_nodes)
		ss->cfg.max_nodes = EP_SESSIONS_NODES_MAX;
	ss->store = store;
	pthread_mutex_init(&ss->lock, NULL);
	pthread_mutex_init(&ss->sync_lock, NULL);
	if (sync_with_store(ss, true, err, errlen) != 0) {
		ep_sessions_free(ss);
		return NULL;
	}
	if (ss->nact)
		ep_info("%zu on-demand sessions resumed from the store", ss->nact);
	return ss;
}

void ep_sessions_maintain(struct ep_sessions *ss)
{
	char err[512];
	if (sync_with_store(ss, true, err, sizeof(err)) != 0)
		ep_debug("sessions: %s (the next round tries again)", err);
	pthread_mutex_lock(&ss->lock);
	tick(ss);
	flush(ss);
	pthread_mutex_unlock(&ss->lock);
}

void ep_sessions_free(struct ep_sessions *ss)
{
	if (!ss)
		return;
	/* what this collector heard last goes to the store for the others */
	flush_nodes(ss);
	flush(ss);
	for (size_t i = 0; i < ss->nact; i++) {
		active_free(&ss->act[i]);
	}
	free(ss->act);
	for (size_t i = 0; i < ss->nnodes; i++)
		node_clear(&ss->nodes[i]);
	free(ss->nodes);
	pthread_mutex_destroy(&ss->sync_lock);
	pthread_mutex_destroy(&ss->lock);
	free(ss);
}

unsigned ep_sessions_max_duration_s(const struct ep_sessions *ss)
{
	return ss->cfg.max_duration_s;
}

unsigned ep_sessions_retry_s(const struct ep_sessions *ss)
{
	return ss->cfg.pickup_s;
}

/* Pending or running, as this collector knows them. Lock held. */
static size_t open_sessions(const struct ep_sessions *ss)
{
	size_t n = 0;
	for (size_t i = 0; i < ss->nact; i++)
		n += !finished(ss->act[i].s);
	return n;
}

void ep_sessions_counters(struct ep_sessions *ss, struct ep_sessions_counters *out)
{
	pthread_mutex_lock(&ss->lock);
	out->open = open_sessions(ss);
	out->max_open = ss->cfg.max_open;
	out->refused_full = ss->refused_full;
	out->nodes = ss->nnodes;
	out->max_nodes = ss->cfg.max_nodes;
	out->nodes_untracked = ss->nodes_untracked;
	pthread_mutex_unlock(&ss->lock);
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
					 node, now - seen_s(n), ss->cfg.node_silent_s);
			else
				snprintf(why, whylen,
					 "node %s has not sent a batch to any collector on this "
					 "store",
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

	/* the node may report to another replica: what the store says of it,
	 * at most sync_ms old */
	pthread_mutex_lock(&ss->lock);
	uint64_t loaded_ns = ss->nodes_loaded_ns;
	pthread_mutex_unlock(&ss->lock);
	if (ep_mono_ns() - loaded_ns >= (uint64_t)ss->cfg.sync_ms * 1000000ULL) {
		char err[512];
		if (sync_with_store(ss, false, err, sizeof(err)) != 0)
			ep_warn("nodes: %s (asking with what this collector knows)", err);
	}
	pthread_mutex_lock(&ss->lock);
	int status = check_nodes(ss, req->node, why, whylen);
	/* each open session is kept here, in the store, and offered in
	 * agents' answers: their number is bounded, not the requests' rate */
	size_t open = open_sessions(ss);
	if (status == 0 && open >= ss->cfg.max_open) {
		snprintf(why, whylen,
			 "%zu sessions are pending or running, the most this collector takes "
			 "(--max-sessions %u): retry once some have ended (a pending one is "
			 "taken or fails within %u s)",
			 open, ss->cfg.max_open, ss->cfg.pickup_s);
		ss->refused_full++;
		ep_warn("session request refused: %s", why);
		status = 429;
	}
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
	/* as the store has it: any replica may have moved it last */
	refresh(ss, id);
	tick(ss);
	Edgeprof__V1__Session *copy = NULL;
	struct active *a = find_active(ss, id);
	if (a && !(copy = session_copy(a->s)))
		snprintf(why, whylen, "out of memory");
	flush(ss);
	pthread_mutex_unlock(&ss->lock);
	if (!a) {
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

/* What a batch says of its node, kept to be put in the store (its stats
 * only once: a batch answered as a duplicate was counted where it was
 * stored). */
static void note_node(struct ep_sessions *ss, const Edgeprof__V1__Batch *b, const char *name,
		      bool count)
{
	bool capable = false;
	for (size_t i = 0; i < b->n_capabilities; i++)
		capable |= strcmp(b->capabilities[i], CAPABILITY) == 0;
	bool found;
	size_t at = node_slot(ss, name, &found);
	if (!found && ss->nnodes >= ss->cfg.max_nodes) {
		/* a token holder naming a new node in each batch must not grow
		 * the list (and the store's) without end; the counts are stored */
		ss->nodes_untracked++;
		if (now_s() - ss->untracked_said_s >= 60) {
			ss->untracked_said_s = now_s();
			ep_warn("node %.64s%s: not listed, and offered no session: this collector "
				"keeps %u nodes (--max-nodes); its batches are stored (%" PRIu64
				" batches of unlisted nodes so far)",
				name, strlen(name) > 64 ? "..." : "", ss->cfg.max_nodes,
				ss->nodes_untracked);
		}
		return;
	}
	if (!found) {
		char *copy = strdup(name);
		struct node *grown =
		    copy ? realloc(ss->nodes, (ss->nnodes + 1) * sizeof(*grown)) : NULL;
		if (!grown) {
			free(copy);
			return;
		}
		ss->nodes = grown;
		memmove(&ss->nodes[at + 1], &ss->nodes[at], (ss->nnodes - at) * sizeof(*grown));
		ss->nodes[at] = (struct node){.name = copy};
		ss->nnodes++;
	}
	struct node *n = &ss->nodes[at];
	set_str(&n->agent_id, b->agent->agent_id);
	set_str(&n->version, b->agent->version ? b->agent->version : "");
	n->capable = capable;
	n->seen_ns = ep_unix_ns();
	n->dirty = true;
	if (b->config && b->config->event)
		set_str(&n->event, b->config->event);
	if (b->stats && count) {
		n->samples += b->stats->samples;
		n->samples_with_branches += b->stats->samples_with_branches;
		n->lost += b->stats->lost_records;
		n->unput_samples += b->stats->samples;
		n->unput_with_branches += b->stats->samples_with_branches;
		n->unput_lost += b->stats->lost_records;
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
	ps->cycles = s->cycles;
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
	note_node(ss, b, node, resp->status != EDGEPROF__V1__INGEST_RESPONSE__STATUS__DUPLICATE);
	for (size_t i = 0; i < b->n_sessions; i++) {
		/* from where the store has it: the session may have been created
		 * at another replica since the last reload, or the agent's
		 * previous report gone through another replica */
		struct active *a = refresh(ss, b->sessions[i]->session_id);
		if (a)
			apply_report(ss, a, b->sessions[i], agent_id, node);
	}
	tick(ss);
	const struct node *n = find_node(ss, node);
	/* the node's own sessions first, then those for any node: a fleet's
	 * worth of the latter cannot keep the node's own out of its answer */
	for (size_t k = 0; n && n->capable && k < 2 * ss->nact; k++) {
		if (resp->n_instructions >= EP_SESSIONS_PER_ANSWER)
			break;
		struct active *a = &ss->act[k % ss->nact];
		if ((k < ss->nact) != (a->s->node[0] != 0) || !should_offer(a, agent_id, node))
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

/* Before answering about nodes: this collector's news put, every
 * replica's read, so all of them answer the same. */
static void fresh_nodes(struct ep_sessions *ss)
{
	char err[512];
	if (sync_with_store(ss, false, err, sizeof(err)) != 0)
		ep_warn("nodes: %s (answering with what this collector knows)", err);
}

char *ep_sessions_nodes_json(struct ep_sessions *ss, size_t *len)
{
	return ep_sessions_nodes_page_json(ss, NULL, 0, len);
}

char *ep_sessions_nodes_page_json(struct ep_sessions *ss, const char *after, size_t limit,
				  size_t *len)
{
	char *body = NULL;
	FILE *out = open_memstream(&body, len);
	if (!out)
		return NULL;
	if (!limit)
		limit = EP_STORE_PAGE_DEFAULT;
	fresh_nodes(ss);
	pthread_mutex_lock(&ss->lock);
	int64_t now = now_s();
	/* the nodes are sorted by name: the page starts after `after` */
	size_t first = 0, hi = ss->nnodes;
	while (after && first < hi) {
		size_t mid = (first + hi) / 2;
		if (strcmp(ss->nodes[mid].name, after) <= 0)
			first = mid + 1;
		else
			hi = mid;
	}
	size_t end = ss->nnodes - first > limit ? first + limit : ss->nnodes;
	fputs("{\"nodes\": [", out);
	for (size_t i = first; i < end; i++) {
		const struct node *n = &ss->nodes[i];
		fputs(i > first ? ", {" : "{", out);
		json_field(out, "name", n->name, true);
		json_field(out, "agent_id", n->agent_id, false);
		json_field(out, "version", n->version, false);
		fprintf(out, ", \"sessions\": %s, \"last_seen\": %lld, \"reporting\": %s}",
			n->capable ? "true" : "false", (long long)seen_s(n),
			reporting(ss, n, now) ? "true" : "false");
	}
	fputs("], \"next\": ", out);
	if (end < ss->nnodes && end > first)
		ep_json_string(out, ss->nodes[end - 1].name);
	else
		fputs("null", out);
	fputs("}\n", out);
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
	fresh_nodes(ss);
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
					   .last_seen_s = seen_s(k),
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

static int newest_first(const void *a, const void *b)
{
	const Edgeprof__V1__Session *x = *(Edgeprof__V1__Session *const *)a;
	const Edgeprof__V1__Session *y = *(Edgeprof__V1__Session *const *)b;
	if (x->created_s != y->created_s)
		return x->created_s > y->created_s ? -1 : 1;
	return strcmp(x->id, y->id);
}

Edgeprof__V1__SessionList *ep_sessions_list(struct ep_sessions *ss)
{
	char err[512];
	pthread_mutex_lock(&ss->sync_lock);
	if (reload_sessions(ss, err, sizeof(err)) != 0)
		ep_warn("sessions: %s (listing what this collector knows)", err);
	pthread_mutex_unlock(&ss->sync_lock);
	Edgeprof__V1__SessionList *done =
	    ep_store_sessions_finished(ss->store, RECENT_MAX, err, sizeof(err));
	if (!done)
		ep_warn("sessions: %s (finished ones not listed)", err);
	Edgeprof__V1__SessionList *l = malloc(sizeof(*l));
	if (!l) {
		ep_store_free_session_list(done);
		return NULL;
	}
	edgeprof__v1__session_list__init(l);
	pthread_mutex_lock(&ss->lock);
	tick(ss);
	flush(ss);
	size_t ndone = done ? done->n_sessions : 0;
	l->sessions = calloc(ss->nact + ndone + 1, sizeof(*l->sessions));
	bool oom = !l->sessions;
	for (size_t i = 0; !oom && i < ss->nact; i++)
		oom = !(l->sessions[l->n_sessions++] = session_copy(ss->act[i].s));
	pthread_mutex_unlock(&ss->lock);
	if (!oom && l->n_sessions > 1)
		qsort(l->sessions, l->n_sessions, sizeof(*l->sessions), newest_first);
	/* a session finished since the reload may be in both: listed once */
	for (size_t i = 0; !oom && i < ndone; i++) {
		bool twice = false;
		for (size_t k = 0; k < l->n_sessions && !twice; k++)
			twice = strcmp(l->sessions[k]->id, done->sessions[i]->id) == 0;
		if (twice)
			continue;
		l->sessions[l->n_sessions++] = done->sessions[i];
		done->sessions[i] = NULL;
	}
	if (done) {
		/* the moved ones are NULL: free only what is left */
		size_t kept = 0;
		for (size_t i = 0; i < done->n_sessions; i++)
			if (done->sessions[i])
				done->sessions[kept++] = done->sessions[i];
		done->n_sessions = kept;
		ep_store_free_session_list(done);
	}
	if (oom) {
		if (l->n_sessions)
			l->n_sessions--; /* the NULL one */
		ep_store_free_session_list(l);
		return NULL;
	}
	return l;
}
