/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The collector's on-demand session logic (collector/sessions) driven by
 * hand-made batches, as the ingest hands them over: which agent is handed a
 * session, how its reports move it, what is refused and why, and that a
 * restarted collector (a new ep_sessions on the same store) carries on, and
 * that collector replicas on one store act as one.
 */
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test_util.h"

#include "collector/sessions/sessions.h"
#include "collector/store/store.h"

static char dir[64];
static char spec[128];

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/edgeprof-sessions-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(spec, sizeof(spec), "sqlite:%s/store.db", dir);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	char p[128];
	const char *files[] = {"store.db", "store.db-wal", "store.db-shm"};
	for (size_t i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, files[i]);
		unlink(p);
	}
	rmdir(dir);
	return 0;
}

struct fixture {
	struct ep_store *store;
	struct ep_sessions *ss;
};

static void open_all(struct fixture *f, const struct ep_sessions_config *cfg)
{
	char err[512];
	if (!f->store)
		f->store = ep_store_open(spec, err, sizeof(err));
	assert_non_null(f->store);
	f->ss = ep_sessions_new(f->store, cfg, err, sizeof(err));
	assert_non_null(f->ss);
}

static void close_all(struct fixture *f)
{
	ep_sessions_free(f->ss);
	ep_store_close(f->store);
	f->ss = NULL;
	f->store = NULL;
	char p[128];
	snprintf(p, sizeof(p), "%s/store.db", dir);
	unlink(p);
}

/* One batch from an agent, with its identity, capability and reports, as
 * the ingest hands it over; resp gets the answer's instructions. */
static void batch_answer(struct ep_sessions *ss, const char *node, const char *agent, bool capable,
			 Edgeprof__V1__SessionReport **reports, size_t nreports,
			 Edgeprof__V1__IngestResponse *resp)
{
	Edgeprof__V1__AgentIdentity id = EDGEPROF__V1__AGENT_IDENTITY__INIT;
	id.node = (char *)node;
	id.agent_id = (char *)agent;
	id.version = (char *)"0.1.0";
	Edgeprof__V1__Batch b = EDGEPROF__V1__BATCH__INIT;
	b.agent = &id;
	char *caps[] = {(char *)"profile-session"};
	b.capabilities = capable ? caps : NULL;
	b.n_capabilities = capable ? 1 : 0;
	b.sessions = reports;
	b.n_sessions = nreports;
	ep_sessions_on_batch(ss, &b, resp);
}

/* The same, returning the ids of the sessions handed over (comma-separated). */
static const char *batch(struct ep_sessions *ss, const char *node, const char *agent, bool capable,
			 Edgeprof__V1__SessionReport **reports, size_t nreports)
{
	static char handed[512];
	Edgeprof__V1__IngestResponse resp = EDGEPROF__V1__INGEST_RESPONSE__INIT;
	batch_answer(ss, node, agent, capable, reports, nreports, &resp);
	handed[0] = '\0';
	for (size_t i = 0; i < resp.n_instructions; i++) {
		assert_int_equal(resp.instructions[i]->kind_case,
				 EDGEPROF__V1__INSTRUCTION__KIND_PROFILE_SESSION);
		if (i)
			strcat(handed, ",");
		strncat(handed, resp.instructions[i]->profile_session->session_id,
			sizeof(handed) - strlen(handed) - 2);
	}
	ep_sessions_response_free(&resp);
	return handed;
}

static void report(struct ep_sessions *ss, const char *node, const char *agent, const char *id,
		   Edgeprof__V1__SessionState state, bool absent, uint64_t ends_ns)
{
	Edgeprof__V1__SessionReport r = EDGEPROF__V1__SESSION_REPORT__INIT;
	r.session_id = (char *)id;
	r.state = state;
	r.message = (char *)(absent ? "container abc: unknown" : "cgroup /x");
	r.target_absent = absent;
	r.started_ns = (uint64_t)time(NULL) * 1000000000ULL;
	r.ended_ns = ends_ns;
	r.samples = 42;
	Edgeprof__V1__SessionReport *rs[] = {&r};
	batch(ss, node, agent, true, rs, 1);
}

/* Creates a session on container "abc" (node may be ""); its id, or NULL
 * with the status in *status and the reason in why. */
static char *ask(struct ep_sessions *ss, const char *node, uint64_t duration_ms, int *status,
		 char *why, size_t whylen)
{
	Edgeprof__V1__Session req = EDGEPROF__V1__SESSION__INIT;
	req.container_id = (char *)"abc";
	req.node = (char *)node;
	req.duration_ms = duration_ms;
	Edgeprof__V1__Session *got = NULL;
	*status = ep_sessions_create(ss, &req, &got, why, whylen);
	if (*status != 0)
		return NULL;
	char *id = strdup(got->id);
	ep_store_free_session(got);
	return id;
}

static Edgeprof__V1__SessionState state_of(struct ep_sessions *ss, const char *id, char *msg,
					   size_t msglen)
{
	char why[512];
	Edgeprof__V1__Session *s = ep_sessions_get(ss, id, why, sizeof(why));
	assert_non_null(s);
	Edgeprof__V1__SessionState st = s->state;
	if (msg)
		snprintf(msg, msglen, "%s", s->message);
	ep_store_free_session(s);
	return st;
}

static void test_refused_requests_say_why(void **state)
{
	(void)state;
	struct fixture f = {0};
	struct ep_sessions_config cfg = {.max_duration_s = 60};
	open_all(&f, &cfg);
	int status;
	char why[512];
	assert_null(ask(f.ss, "", 10000, &status, why, sizeof(why)));
	assert_int_equal(status, 409);
	assert_non_null(strstr(why, "no agent that can run on-demand sessions has reported"));
	batch(f.ss, "old", "agent-old", false, NULL, 0);
	assert_null(ask(f.ss, "old", 10000, &status, why, sizeof(why)));
	assert_int_equal(status, 409);
	assert_non_null(strstr(why, "the agent on node old (edgeprof 0.1.0) is too old"));
	assert_null(ask(f.ss, "nowhere", 10000, &status, why, sizeof(why)));
	assert_int_equal(status, 409);
	assert_non_null(strstr(why, "node nowhere has not sent a batch"));
	batch(f.ss, "n1", "agent-1", true, NULL, 0);
	assert_null(ask(f.ss, "n1", 61000, &status, why, sizeof(why)));
	assert_int_equal(status, 400);
	assert_non_null(strstr(why, "duration 61 s is over this collector's maximum of 60 s"));
	Edgeprof__V1__Session two = EDGEPROF__V1__SESSION__INIT;
	two.container_id = (char *)"abc";
	two.pid = 7;
	two.duration_ms = 1000;
	Edgeprof__V1__Session *got = NULL;
	assert_int_equal(ep_sessions_create(f.ss, &two, &got, why, sizeof(why)), 400);
	assert_non_null(strstr(why, "exactly one target"));
	assert_null(got);
	/* a period asking more samples than a kernel allows (1: ~2e9 per
	 * second per CPU), or one no counter can hold (2^64-1, what "-1" once
	 * became) */
	two.pid = 0;
	two.period = 1;
	assert_int_equal(ep_sessions_create(f.ss, &two, &got, why, sizeof(why)), 400);
	assert_non_null(strstr(why, "period 1: "));
	assert_non_null(strstr(why, "at least 20000"));
	two.period = UINT64_MAX;
	assert_int_equal(ep_sessions_create(f.ss, &two, &got, why, sizeof(why)), 400);
	assert_non_null(strstr(why, "period 18446744073709551615: "));
	assert_null(got);
	close_all(&f);
}

static void test_handed_once_to_the_node_then_done(void **state)
{
	(void)state;
	struct fixture f = {0};
	struct ep_sessions_config cfg = {0};
	open_all(&f, &cfg);
	batch(f.ss, "n1", "agent-1", true, NULL, 0);
	batch(f.ss, "n2", "agent-2", true, NULL, 0);
	int status;
	char why[512], msg[512];
	char *id = ask(f.ss, "n2", 5000, &status, why, sizeof(why));
	assert_non_null(id);
	assert_int_equal(state_of(f.ss, id, NULL, 0), EDGEPROF__V1__SESSION_STATE__SESSION_PENDING);
	/* another node's agent is never handed it; its own agent once */
	assert_string_equal(batch(f.ss, "n1", "agent-1", true, NULL, 0), "");
	assert_string_equal(batch(f.ss, "n2", "agent-2", true, NULL, 0), id);
	assert_string_equal(batch(f.ss, "n2", "agent-2", true, NULL, 0), "");
	uint64_t ends = ((uint64_t)time(NULL) + 5) * 1000000000ULL;
	report(f.ss, "n2", "agent-2", id, EDGEPROF__V1__SESSION_STATE__SESSION_RUNNING, false,
	       ends);
	assert_int_equal(state_of(f.ss, id, msg, sizeof(msg)),
			 EDGEPROF__V1__SESSION_STATE__SESSION_RUNNING);
	assert_string_equal(msg, "cgroup /x");
	/* a report from an agent the session is not on changes nothing */
	report(f.ss, "n1", "agent-1", id, EDGEPROF__V1__SESSION_STATE__SESSION_DONE, false, ends);
	assert_int_equal(state_of(f.ss, id, NULL, 0), EDGEPROF__V1__SESSION_STATE__SESSION_RUNNING);
	report(f.ss, "n2", "agent-2", id, EDGEPROF__V1__SESSION_STATE__SESSION_DONE, false, ends);
	Edgeprof__V1__Session *s = ep_sessions_get(f.ss, id, why, sizeof(why));
	assert_non_null(s);
	assert_int_equal(s->state, EDGEPROF__V1__SESSION_STATE__SESSION_DONE);
	assert_string_equal(s->agent_id, "agent-2");
	assert_string_equal(s->node, "n2");
	assert_int_equal(s->samples, 42);
	assert_int_equal(s->deadline_ns, ends);
	ep_store_free_session(s);
	/* finished: read back from the store, handed to nobody */
	assert_string_equal(batch(f.ss, "n2", "agent-3", true, NULL, 0), "");
	free(id);
	close_all(&f);
}

static void test_target_on_no_node_fails_naming_it(void **state)
{
	(void)state;
	struct fixture f = {0};
	struct ep_sessions_config cfg = {0};
	open_all(&f, &cfg);
	batch(f.ss, "n1", "agent-1", true, NULL, 0);
	batch(f.ss, "n2", "agent-2", true, NULL, 0);
	batch(f.ss, "old", "agent-old", false, NULL, 0);
	int status;
	char why[512], msg[512];
	char *id = ask(f.ss, "", 5000, &status, why, sizeof(why));
	assert_non_null(id);
	/* every node that can run it is asked; the old agent is not */
	assert_string_equal(batch(f.ss, "n1", "agent-1", true, NULL, 0), id);
	assert_string_equal(batch(f.ss, "n2", "agent-2", true, NULL, 0), id);
	assert_string_equal(batch(f.ss, "old", "agent-old", false, NULL, 0), "");
	report(f.ss, "n1", "agent-1", id, EDGEPROF__V1__SESSION_STATE__SESSION_FAILED, true, 0);
	assert_int_equal(state_of(f.ss, id, NULL, 0), EDGEPROF__V1__SESSION_STATE__SESSION_PENDING);
	report(f.ss, "n2", "agent-2", id, EDGEPROF__V1__SESSION_STATE__SESSION_FAILED, true, 0);
	assert_int_equal(state_of(f.ss, id, msg, sizeof(msg)),
			 EDGEPROF__V1__SESSION_STATE__SESSION_FAILED);
	assert_non_null(strstr(msg, "container abc is on none of the 2 nodes reporting"));
	free(id);
	close_all(&f);
}

static void test_restarts_of_collector_and_agent(void **state)
{
	(void)state;
	struct fixture f = {0};
	struct ep_sessions_config cfg = {0};
	open_all(&f, &cfg);
	batch(f.ss, "n1", "agent-1", true, NULL, 0);
	int status;
	char why[512];
	char *pending = ask(f.ss, "n1", 5000, &status, why, sizeof(why));
	char *running = ask(f.ss, "n1", 30000, &status, why, sizeof(why));
	assert_non_null(pending);
	assert_non_null(running);
	uint64_t ends = ((uint64_t)time(NULL) + 30) * 1000000000ULL;
	report(f.ss, "n1", "agent-1", running, EDGEPROF__V1__SESSION_STATE__SESSION_RUNNING, false,
	       ends);
	/* the collector restarts: both come back from the store; the pending
	 * one is handed out again (the agent ignores one it already runs) */
	ep_sessions_free(f.ss);
	open_all(&f, &cfg);
	assert_int_equal(state_of(f.ss, running, NULL, 0),
			 EDGEPROF__V1__SESSION_STATE__SESSION_RUNNING);
	assert_string_equal(batch(f.ss, "n1", "agent-1", true, NULL, 0), pending);
	/* the agent restarts: the new one on the node gets the running
	 * session with its original deadline */
	Edgeprof__V1__IngestResponse resp = EDGEPROF__V1__INGEST_RESPONSE__INIT;
	batch_answer(f.ss, "n1", "agent-1b", true, NULL, 0, &resp);
	bool resumed = false;
	for (size_t i = 0; i < resp.n_instructions; i++) {
		const Edgeprof__V1__ProfileSession *ps = resp.instructions[i]->profile_session;
		if (strcmp(ps->session_id, running) == 0) {
			resumed = true;
			assert_int_equal(ps->deadline_ns, ends);
			assert_string_equal(ps->container_id, "abc");
		}
	}
	ep_sessions_response_free(&resp);
	assert_true(resumed);
	report(f.ss, "n1", "agent-1b", running, EDGEPROF__V1__SESSION_STATE__SESSION_DONE, false,
	       ends);
	Edgeprof__V1__Session *s = ep_sessions_get(f.ss, running, why, sizeof(why));
	assert_non_null(s);
	assert_int_equal(s->state, EDGEPROF__V1__SESSION_STATE__SESSION_DONE);
	assert_string_equal(s->agent_id, "agent-1b");
	ep_store_free_session(s);
	assert_null(ep_sessions_get(f.ss, "0000000000000000", why, sizeof(why)));
	assert_string_equal(why, "");
	free(pending);
	free(running);
	close_all(&f);
}

static void test_nodes_listed_with_capability(void **state)
{
	(void)state;
	struct fixture f = {0};
	struct ep_sessions_config cfg = {0};
	open_all(&f, &cfg);
	batch(f.ss, "n\"1", "agent-1", true, NULL, 0);
	batch(f.ss, "old", "agent-old", false, NULL, 0);
	size_t len = 0;
	char *json = ep_sessions_nodes_json(f.ss, &len);
	assert_non_null(json);
	assert_int_equal(strlen(json), len);
	/* escaped, not replaced: the name stays readable */
	assert_non_null(strstr(json,
			       "{\"name\": \"n\\\"1\", \"agent_id\": \"agent-1\", \"version\": "
			       "\"0.1.0\", \"sessions\": true"));
	assert_non_null(strstr(json, "\"name\": \"old\", \"agent_id\": \"agent-old\", \"version\": "
				     "\"0.1.0\", \"sessions\": false"));
	free(json);
	close_all(&f);
}

/* The UI's fleet view: nodes as copies, and a finished session still
 * listed (kept in memory) after it left the active ones. */
static void test_fleet_view(void **state)
{
	(void)state;
	struct fixture f = {0};
	struct ep_sessions_config cfg = {0};
	open_all(&f, &cfg);
	batch(f.ss, "n1", "agent-1", true, NULL, 0);
	int status;
	char why[512];
	char *id = ask(f.ss, "n1", 5000, &status, why, sizeof(why));
	assert_non_null(id);
	assert_string_equal(batch(f.ss, "n1", "agent-1", true, NULL, 0), id);
	Edgeprof__V1__SessionList *l = ep_sessions_list(f.ss);
	assert_non_null(l);
	assert_int_equal(l->n_sessions, 1);
	assert_int_equal(l->sessions[0]->state, EDGEPROF__V1__SESSION_STATE__SESSION_PENDING);
	ep_store_free_session_list(l);
	uint64_t ends = ((uint64_t)time(NULL) + 5) * 1000000000ULL;
	report(f.ss, "n1", "agent-1", id, EDGEPROF__V1__SESSION_STATE__SESSION_DONE, false, ends);
	l = ep_sessions_list(f.ss);
	assert_non_null(l);
	assert_int_equal(l->n_sessions, 1);
	assert_string_equal(l->sessions[0]->id, id);
	assert_int_equal(l->sessions[0]->state, EDGEPROF__V1__SESSION_STATE__SESSION_DONE);
	ep_store_free_session_list(l);
	struct ep_node_info *nodes = NULL;
	size_t n = ep_sessions_nodes(f.ss, &nodes);
	assert_int_equal(n, 1);
	assert_string_equal(nodes[0].name, "n1");
	assert_string_equal(nodes[0].agent_id, "agent-1");
	assert_true(nodes[0].capable);
	assert_true(nodes[0].reporting);
	ep_sessions_free_nodes(nodes, n);
	free(id);
	close_all(&f);
}

/* Collector replicas: each its own store handle and sessions on one store
 * (a SQLite file here, as ClickHouse in test_collector_replicas.sh). */
struct replicas {
	struct ep_store *store[3];
	struct ep_sessions *ss[3];
};

static void open_replicas(struct replicas *r, const struct ep_sessions_config *cfg)
{
	char err[512];
	for (int i = 0; i < 3; i++) {
		r->store[i] = ep_store_open(spec, err, sizeof(err));
		assert_non_null(r->store[i]);
		r->ss[i] = ep_sessions_new(r->store[i], cfg, err, sizeof(err));
		assert_non_null(r->ss[i]);
	}
}

static void sync_all(struct replicas *r)
{
	for (int i = 0; i < 3; i++)
		ep_sessions_maintain(r->ss[i]);
	/* twice: what one put after another read is read the second time */
	for (int i = 0; i < 3; i++)
		ep_sessions_maintain(r->ss[i]);
}

static void close_replicas(struct replicas *r)
{
	for (int i = 0; i < 3; i++) {
		ep_sessions_free(r->ss[i]);
		ep_store_close(r->store[i]);
	}
	char p[128];
	snprintf(p, sizeof(p), "%s/store.db", dir);
	unlink(p);
}

/* A batch with stats, as stored or as a duplicate of one stored elsewhere. */
static void batch_stats(struct ep_sessions *ss, const char *node, const char *agent,
			uint64_t samples, bool duplicate)
{
	Edgeprof__V1__AgentIdentity id = EDGEPROF__V1__AGENT_IDENTITY__INIT;
	id.node = (char *)node;
	id.agent_id = (char *)agent;
	id.version = (char *)"0.1.0";
	Edgeprof__V1__Stats st = EDGEPROF__V1__STATS__INIT;
	st.samples = samples;
	st.lost_records = 1;
	Edgeprof__V1__Batch b = EDGEPROF__V1__BATCH__INIT;
	b.agent = &id;
	b.stats = &st;
	Edgeprof__V1__IngestResponse resp = EDGEPROF__V1__INGEST_RESPONSE__INIT;
	resp.status = duplicate ? EDGEPROF__V1__INGEST_RESPONSE__STATUS__DUPLICATE
				: EDGEPROF__V1__INGEST_RESPONSE__STATUS__STORED;
	ep_sessions_on_batch(ss, &b, &resp);
	ep_sessions_response_free(&resp);
}

/* A session created through replica 0 reaches the node's agent through
 * replica 2, which it talks to; its reports may arrive at any replica (the
 * agent failed over), a stale report retried late at another replica does
 * not move a done session back, and every replica reads the same session
 * and the same nodes. */
static void test_replicas_share_sessions_and_nodes(void **state)
{
	(void)state;
	struct replicas r = {0};
	struct ep_sessions_config cfg = {0};
	open_replicas(&r, &cfg);
	batch(r.ss[2], "n1", "agent-1", true, NULL, 0);
	int status;
	char why[512], msg[512];
	/* replica 0 has not heard of n1 until replica 2 put it in the store */
	char *none = ask(r.ss[0], "n1", 5000, &status, why, sizeof(why));
	assert_null(none);
	assert_int_equal(status, 409);
	assert_non_null(strstr(why, "node n1 has not sent a batch to any collector on this store"));
	sync_all(&r);
	char *id = ask(r.ss[0], "n1", 5000, &status, why, sizeof(why));
	assert_non_null(id);
	assert_int_equal(state_of(r.ss[1], id, NULL, 0),
			 EDGEPROF__V1__SESSION_STATE__SESSION_PENDING);
	sync_all(&r);
	assert_string_equal(batch(r.ss[2], "n1", "agent-1", true, NULL, 0), id);
	uint64_t ends = ((uint64_t)time(NULL) + 5) * 1000000000ULL;
	report(r.ss[2], "n1", "agent-1", id, EDGEPROF__V1__SESSION_STATE__SESSION_RUNNING, false,
	       ends);
	/* read where it was not reported, without waiting for a sync */
	assert_int_equal(state_of(r.ss[0], id, msg, sizeof(msg)),
			 EDGEPROF__V1__SESSION_STATE__SESSION_RUNNING);
	assert_string_equal(msg, "cgroup /x");
	/* the agent fails over to replica 1: its DONE lands there */
	report(r.ss[1], "n1", "agent-1", id, EDGEPROF__V1__SESSION_STATE__SESSION_DONE, false,
	       ends);
	/* an earlier batch's RUNNING, answered late by replica 2, whose copy
	 * still says running */
	report(r.ss[2], "n1", "agent-1", id, EDGEPROF__V1__SESSION_STATE__SESSION_RUNNING, false,
	       ends);
	sync_all(&r);
	Edgeprof__V1__Session *got[3];
	for (int i = 0; i < 3; i++) {
		got[i] = ep_sessions_get(r.ss[i], id, why, sizeof(why));
		assert_non_null(got[i]);
		assert_int_equal(got[i]->state, EDGEPROF__V1__SESSION_STATE__SESSION_DONE);
		assert_int_equal(got[i]->samples, 42);
		assert_int_equal(got[i]->updated_ns, got[0]->updated_ns);
	}
	for (int i = 0; i < 3; i++)
		ep_store_free_session(got[i]);
	/* done: handed to nobody, at any replica */
	for (int i = 0; i < 3; i++)
		assert_string_equal(batch(r.ss[i], "n1", "agent-2", true, NULL, 0), "");
	/* nodes: the same answer everywhere; sums of every replica's
	 * batches, a duplicate (stored at another replica) counted once */
	batch_stats(r.ss[0], "n2", "agent-x", 10, false);
	batch_stats(r.ss[1], "n2", "agent-x", 5, false);
	batch_stats(r.ss[2], "n2", "agent-x", 5, true);
	sync_all(&r);
	char *json[3];
	size_t len;
	for (int i = 0; i < 3; i++) {
		json[i] = ep_sessions_nodes_json(r.ss[i], &len);
		assert_non_null(json[i]);
	}
	assert_string_equal(json[0], json[1]);
	assert_string_equal(json[0], json[2]);
	/* n1's agent is agent-2 now: its newest batch said so */
	assert_non_null(strstr(json[0], "{\"name\": \"n1\", \"agent_id\": \"agent-2\""));
	assert_non_null(strstr(json[0], "{\"name\": \"n2\", \"agent_id\": \"agent-x\""));
	for (int i = 0; i < 3; i++)
		free(json[i]);
	for (int i = 0; i < 3; i++) {
		struct ep_node_info *nodes = NULL;
		size_t n = ep_sessions_nodes(r.ss[i], &nodes);
		assert_int_equal(n, 2);
		assert_string_equal(nodes[1].name, "n2");
		assert_int_equal(nodes[1].samples, 15);
		assert_int_equal(nodes[1].lost, 2);
		ep_sessions_free_nodes(nodes, n);
	}
	free(id);
	close_replicas(&r);
}

/* A session for any node: each node's agent says "not here" through the
 * replica it talks to; the refusals add up in the store, and the session
 * fails once every reporting node refused, not after the pickup time. */
static void test_replicas_merge_refusals(void **state)
{
	(void)state;
	struct replicas r = {0};
	struct ep_sessions_config cfg = {0};
	open_replicas(&r, &cfg);
	batch(r.ss[0], "n1", "agent-1", true, NULL, 0);
	batch(r.ss[2], "n2", "agent-2", true, NULL, 0);
	sync_all(&r);
	int status;
	char why[512], msg[512];
	char *id = ask(r.ss[1], "", 5000, &status, why, sizeof(why));
	assert_non_null(id);
	sync_all(&r);
	assert_string_equal(batch(r.ss[0], "n1", "agent-1", true, NULL, 0), id);
	assert_string_equal(batch(r.ss[2], "n2", "agent-2", true, NULL, 0), id);
	report(r.ss[0], "n1", "agent-1", id, EDGEPROF__V1__SESSION_STATE__SESSION_FAILED, true, 0);
	assert_int_equal(state_of(r.ss[1], id, NULL, 0),
			 EDGEPROF__V1__SESSION_STATE__SESSION_PENDING);
	/* replica 2 has not synced since n1's refusal: it reads it first */
	report(r.ss[2], "n2", "agent-2", id, EDGEPROF__V1__SESSION_STATE__SESSION_FAILED, true, 0);
	assert_int_equal(state_of(r.ss[1], id, msg, sizeof(msg)),
			 EDGEPROF__V1__SESSION_STATE__SESSION_FAILED);
	assert_non_null(strstr(msg, "container abc is on none of the 2 nodes reporting"));
	free(id);
	close_replicas(&r);
}

/* Open sessions are bounded (max_open: 429 past it, counted) and an answer
 * carries at most EP_SESSIONS_PER_ANSWER of them, the node's own first; the
 * rest go with the next answers (issue 32: 4,000 pending sessions made
 * every answer 144 KB). */
static void test_open_sessions_bounded_and_answers_capped(void **state)
{
	(void)state;
	struct fixture f = {0};
	struct ep_sessions_config cfg = {.max_open = 30};
	open_all(&f, &cfg);
	batch(f.ss, "node-a", "agent-a", true, NULL, 0);
	batch(f.ss, "node-b", "agent-b", true, NULL, 0);
	char why[512];
	int status;
	size_t created = 0;
	for (int i = 0; i < 40; i++) {
		char *id = ask(f.ss, i < 20 ? "node-a" : "", 5000, &status, why, sizeof(why));
		if (id) {
			created++;
			free(id);
			continue;
		}
		assert_int_equal(status, 429);
		assert_non_null(strstr(why, "--max-sessions 30"));
	}
	assert_int_equal(created, 30);
	struct ep_sessions_counters c;
	ep_sessions_counters(f.ss, &c);
	assert_int_equal(c.open, 30);
	assert_int_equal(c.max_open, 30);
	assert_int_equal(c.refused_full, 10);

	/* node-a: its 20 first, 16 at a time, then the 10 for any node */
	size_t counts[3];
	for (int round = 0; round < 3; round++) {
		Edgeprof__V1__IngestResponse resp = EDGEPROF__V1__INGEST_RESPONSE__INIT;
		batch_answer(f.ss, "node-a", "agent-a", true, NULL, 0, &resp);
		counts[round] = resp.n_instructions;
		for (size_t i = 0; round == 0 && i < resp.n_instructions; i++) {
			char w[512];
			Edgeprof__V1__Session *s = ep_sessions_get(
			    f.ss, resp.instructions[i]->profile_session->session_id, w, sizeof(w));
			assert_non_null(s);
			assert_string_equal(s->node, "node-a");
			ep_store_free_session(s);
		}
		ep_sessions_response_free(&resp);
	}
	assert_int_equal(counts[0], EP_SESSIONS_PER_ANSWER);
	assert_int_equal(counts[1], 30 - EP_SESSIONS_PER_ANSWER);
	assert_int_equal(counts[2], 0);
	/* node-b: the 10 for any node, none of node-a's */
	Edgeprof__V1__IngestResponse resp = EDGEPROF__V1__INGEST_RESPONSE__INIT;
	batch_answer(f.ss, "node-b", "agent-b", true, NULL, 0, &resp);
	assert_int_equal(resp.n_instructions, 10);
	ep_sessions_response_free(&resp);
	close_all(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_refused_requests_say_why),
	    cmocka_unit_test(test_handed_once_to_the_node_then_done),
	    cmocka_unit_test(test_target_on_no_node_fails_naming_it),
	    cmocka_unit_test(test_restarts_of_collector_and_agent),
	    cmocka_unit_test(test_nodes_listed_with_capability),
	    cmocka_unit_test(test_fleet_view),
	    cmocka_unit_test(test_replicas_share_sessions_and_nodes),
	    cmocka_unit_test(test_replicas_merge_refusals),
	    cmocka_unit_test(test_open_sessions_bounded_and_answers_capped),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
