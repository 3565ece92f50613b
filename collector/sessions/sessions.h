/* SPDX-License-Identifier: Apache-2.0 */
/*
 * On-demand sessions: "profile this container for 30 s at a higher rate".
 * The collector records the request (in the store, so it survives a
 * restart), hands it to the agent of the target's node in the answer to that
 * agent's next batch, and follows the agent's reports, which travel in its
 * batches. A session's counts are stored with Labels.session_id and read with
 * GET /v1/profile?session=ID; the continuous profile never includes them.
 *
 * Which agent: the one on --node, or, without a node, every agent that can
 * run sessions; an agent without the target answers "not here" and the
 * session fails once every reporting node has said so. A node whose agent
 * restarts mid-session gets the rest of it (same deadline). Every way a
 * session can go nowhere ends it with a status that says why: refused at
 * once (duration over the maximum, node silent, agent too old, no agent at
 * all), or failed later (not taken in time, target on no node, agent gone).
 *
 * Several collectors on one store (issue 16): the store is where sessions
 * and nodes are; each collector keeps a copy, puts its own news (a batch's
 * node, a report, a timeout) and reads the others' (ep_sessions_maintain,
 * every second; a report or a timeout reads its session again first, and
 * so does GET /v1/sessions/ID). A session created through one collector so
 * reaches its node's agent through whichever collector that agent talks
 * to, and every collector answers the same about it and about the nodes.
 * Newest wins in the store: two collectors changing one session at the same
 * moment (a report at one, a timeout at another) leave the later change.
 */
#ifndef EP_SESSIONS_H
#define EP_SESSIONS_H

#include <stddef.h>
#include <stdint.h>

#include "collector/store/store.h"

struct ep_sessions_config {
	unsigned max_duration_s; /* longer requests are refused; 0: 600 */
	unsigned node_silent_s;	 /* a node without a batch for this long is not reporting; 0: 60 */
	unsigned pickup_s;	 /* a session no agent took within this fails; 0: 30 */
	/* sessions pending or running at once (as this collector last read
	 * the store); past it a request gets 429; 0: 256 */
	unsigned max_open;
	/* a request reads the nodes from the store again when what this
	 * collector has is older than this; 0: 1000 */
	unsigned sync_ms;
	/* nodes this collector keeps (each a few hundred bytes, and a row of
	 * the store's): a batch from a node past it is stored, the node is
	 * neither listed nor offered sessions; 0: EP_SESSIONS_NODES_MAX */
	unsigned max_nodes;
};
#define EP_SESSIONS_NODES_MAX 20000

struct ep_sessions;

/* Loads the unfinished sessions from the store (borrowed). NULL with err. */
struct ep_sessions *ep_sessions_new(struct ep_store *store, const struct ep_sessions_config *cfg,
				    char *err, size_t errlen);
void ep_sessions_free(struct ep_sessions *ss);

/* A request: req's target (exactly one of container_id, cgroup, pid), node
 * (may be ""), duration_ms, period, mode. Returns 0 with *out the recorded
 * session, or the HTTP status to answer (400 bad request, 409 the node or
 * its agent cannot run it, 429 max_open sessions are pending or running,
 * 503 store down) with why. Free *out with ep_store_free_session(). */
int ep_sessions_create(struct ep_sessions *ss, const Edgeprof__V1__Session *req,
		       Edgeprof__V1__Session **out, char *why, size_t whylen);

/* The longest duration a request may ask for (--max-session-s), for
 * refusals made before a request is built. */
unsigned ep_sessions_max_duration_s(const struct ep_sessions *ss);

/* For /metrics: sessions pending or running now, their bound, and the
 * requests refused (429) because that many were. */
struct ep_sessions_counters {
	uint64_t open, max_open, refused_full;
	/* nodes kept, the bound, and batches from nodes past it */
	uint64_t nodes, max_nodes, nodes_untracked;
};
void ep_sessions_counters(struct ep_sessions *ss, struct ep_sessions_counters *out);
/* When a refused request may try again: a pending session is taken or
 * fails within pickup_s. */
unsigned ep_sessions_retry_s(const struct ep_sessions *ss);

/* The session as it stands now (timeouts applied). NULL with why "" when
 * there is no such session, NULL with why set on a store error. */
Edgeprof__V1__Session *ep_sessions_get(struct ep_sessions *ss, const char *id, char *why,
				       size_t whylen);

/* A batch the ingest stored (or had stored already): its agent is alive,
 * its session reports are applied, and resp gets the sessions this agent
 * should run: those of its node first, then those for any node, at most
 * EP_SESSIONS_PER_ANSWER (the rest go with its next batches), so an
 * answer's size does not grow with the sessions waiting. Free what was
 * added with ep_sessions_response_free(). */
#define EP_SESSIONS_PER_ANSWER 16
void ep_sessions_on_batch(struct ep_sessions *ss, const Edgeprof__V1__Batch *b,
			  Edgeprof__V1__IngestResponse *resp);
void ep_sessions_response_free(Edgeprof__V1__IngestResponse *resp);

/* Puts what this collector's batches said of their nodes, reads what every
 * collector on the store put and the sessions they changed, applies the
 * timeouts. The collector calls it every second. */
void ep_sessions_maintain(struct ep_sessions *ss);

/* GET /v1/nodes: the nodes that sent a batch to a collector on this store
 * (within the retention), the first page by name, as JSON: name, agent_id, version,
 * sessions (can run them), last_seen (unix s), reporting (within
 * node_silent_s). malloc'd; NULL when out of memory. */
char *ep_sessions_nodes_json(struct ep_sessions *ss, size_t *len);
/* The same a page at a time (every list answer is bounded): at most limit
 * nodes (0: EP_STORE_PAGE_DEFAULT) after the node named after (NULL: from
 * the first), and "next": the name the next page starts after, or null. */
char *ep_sessions_nodes_page_json(struct ep_sessions *ss, const char *after, size_t limit,
				  size_t *len);

/* The UI's fleet view: the same nodes, copied (free with
 * ep_sessions_free_nodes()); returns how many. */
struct ep_node_info {
	char *name, *agent_id, *version;
	char *event; /* what its agent samples: "cpu-clock" when it has no branch-stack PMU */
	bool capable, reporting;
	int64_t last_seen_s;
	uint64_t samples, samples_with_branches, lost; /* summed over its batches */
	double samples_per_s;			       /* in its last batch's window */
};
size_t ep_sessions_nodes(struct ep_sessions *ss, struct ep_node_info **out);
void ep_sessions_free_nodes(struct ep_node_info *nodes, size_t n);

/* The unfinished sessions, newest first, then the last 20 that finished,
 * the latest ended first: copies (timeouts applied).
 * Free with ep_store_free_session_list(); NULL when out of memory. */
Edgeprof__V1__SessionList *ep_sessions_list(struct ep_sessions *ss);

/* "pending", "running", "done", "failed" */
const char *ep_session_state_name(Edgeprof__V1__SessionState state);

#endif
