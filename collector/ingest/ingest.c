/* SPDX-License-Identifier: Apache-2.0 */
#include "collector/ingest/ingest.h"
#include "common/util/clock.h"

#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/profile/merge.h"
#include "common/util/log.h"
#include "common/wire/wire.h"

#define RESULTS 64 /* generations whose outcome waiters can still read */
/* A batch or a commit this big gives its memory back to the system once
 * freed: each connection's thread allocates from a malloc arena of its
 * own, which kept what six batches of a million edges freed (RSS 1 GB for
 * 400 MB in use, OOM-killed at 1 GiB). */
#define TRIM_BYTES (8u << 20)
/* What a batch in flight holds, from unpacked to written, over what
 * unpacking it takes: its merged rows (hash and vector, ~110 bytes an
 * edge) and their messages while the commit writes them (~96) against the
 * unpacked edge's ~112 (measured: six batches of a million edges peaked at
 * 640 MB RSS, the 384 MiB reserved plus SQLite's cache and the
 * decompressed bytes). */
#define IN_FLIGHT_FACTOR 2
#define TRIM_ROWS	 65536

const char *const ep_ingest_bound_names[EP_INGEST_NBOUNDS] = {
    "binaries", "edges", "ranges", "ips", "functions", "label_sets", "memory", "strings"};

struct batch_key {
	char *agent_id;
	char *node;
	uint64_t sequence;
	struct ep_merge *own; /* the batch's counts, when the store keeps batches apart */
	/* the waiting request's answer: set (lock held) when the committer
	 * finds the batch stored already; NULL when nobody waits */
	bool *duplicate;
};

struct key_list {
	struct batch_key *items;
	size_t n, cap;
};

struct ep_ingest {
	struct ep_ingest_config cfg;
	struct ep_store *store;
	bool keeps_batches;
	size_t pending_rows; /* rows waiting for the next commit */

	pthread_mutex_t lock;
	pthread_cond_t work;  /* something to commit, or stopping */
	pthread_cond_t done;  /* a generation finished */
	pthread_cond_t space; /* pending rows went down */
	struct ep_merge *pending, *committing;
	struct key_list pending_keys, committing_keys;
	uint64_t gen_open;    /* batches are merged into this generation */
	uint64_t gen_done;    /* every generation up to this one is finished */
	int results[RESULTS]; /* 0 or -1 per generation */
	char last_error[512];
	uint64_t failing_logged_ns; /* when the store's failing was last said */
	bool pending_poisoned;	    /* part of a batch could not be merged: fail the generation */
	uint64_t first_pending_ns;
	bool stopping;
	pthread_t committer;
	struct ep_ingest_counters counters;

	/* The heap batches in flight hold, from their decompression until
	 * they are merged (ep_ingest_config.memory_bytes): two budgets, taken
	 * in that order and never the other, so no batch holding one waits on
	 * a batch waiting for it. */
	pthread_mutex_t mem_lock;
	pthread_cond_t mem_freed;
	size_t plain_budget, decoded_budget, plain_held, decoded_held;
	uint64_t memory_waits;
};

static void keys_clear(struct key_list *k)
{
	for (size_t i = 0; i < k->n; i++) {
		free(k->items[i].agent_id);
		free(k->items[i].node);
		ep_merge_free(k->items[i].own);
	}
	k->n = 0;
}

static void keys_free(struct key_list *k)
{
	keys_clear(k);
	free(k->items);
	k->items = NULL;
	k->cap = 0;
}

static bool keys_has(const struct key_list *k, const char *agent_id, uint64_t sequence)
{
	for (size_t i = 0; i < k->n; i++)
		if (k->items[i].sequence == sequence && strcmp(k->items[i].agent_id, agent_id) == 0)
			return true;
	return false;
}

static int keys_add(struct key_list *k, const char *agent_id, const char *node, uint64_t sequence,
		    struct ep_merge *own, bool *duplicate)
{
	if (k->n == k->cap) {
		size_t cap = k->cap ? k->cap * 2 : 64;
		struct batch_key *items = realloc(k->items, cap * sizeof(*items));
		if (!items)
			return -1;
		k->items = items;
		k->cap = cap;
	}
	struct batch_key *b = &k->items[k->n];
	b->agent_id = strdup(agent_id);
	b->node = strdup(node);
	b->sequence = sequence;
	b->own = own;
	b->duplicate = duplicate;
	if (!b->agent_id || !b->node) {
		free(b->agent_id);
		free(b->node);
		return -1;
	}
	k->n++;
	return 0;
}

/* known: the batches (by index in keys) the store has already, left out;
 * NULL when none is. */
static int commit(struct ep_ingest *in, struct ep_merge *m, const struct key_list *keys,
		  const bool *known, char *err, size_t errlen)
{
	/* one merged set, or one per batch when the store keeps batches apart */
	size_t nsets = in->keeps_batches ? keys->n : 1;
	struct ep_merged *sets = calloc(nsets ? nsets : 1, sizeof(*sets));
	struct ep_store_batch_id *ids = calloc(keys->n ? keys->n : 1, sizeof(*ids));
	struct ep_store_slice *slices = NULL;
	size_t nslices = 0, built = 0;
	int rc = -1;
	snprintf(err, errlen, "out of memory building the commit");
	if (!sets || !ids)
		goto out;
	for (; built < nsets; built++) {
		const struct ep_merge *src = in->keeps_batches ? keys->items[built].own : m;
		if (known && known[built])
			continue; /* its set stays empty */
		if (ep_merge_build(src, &sets[built]) != 0)
			goto out;
		nslices += sets[built].n;
	}
	slices = calloc(nslices ? nslices : 1, sizeof(*slices));
	if (!slices)
		goto out;
	/* the batches written, numbered in the order ids[] lists them */
	int64_t now = (int64_t)time(NULL);
	size_t nids = 0, k = 0;
	for (size_t i = 0; i < keys->n; i++) {
		if (known && known[i])
			continue;
		if (in->keeps_batches)
			for (size_t j = 0; j < sets[i].n; j++)
				slices[k++] = (struct ep_store_slice){
				    sets[i].slices[j].bucket, sets[i].slices[j].delta, (int)nids,
				    sets[i].slices[j].ns};
		ids[nids++] = (struct ep_store_batch_id){
		    keys->items[i].agent_id, keys->items[i].sequence, keys->items[i].node, now};
	}
	if (!in->keeps_batches)
		for (size_t j = 0; j < sets[0].n; j++)
			slices[k++] = (struct ep_store_slice){sets[0].slices[j].bucket,
							      sets[0].slices[j].delta, -1,
							      sets[0].slices[j].ns};
	rc = 0;
	if (!nids)
		goto out; /* every batch of the group was stored already */
	struct ep_store_commit c = {ids, nids, slices, nslices};
	rc = ep_store_write(in->store, &c, err, errlen);
out:
	for (size_t i = 0; i < built; i++)
		ep_merged_free(&sets[i]);
	free(sets);
	free(slices);
	free(ids);
	return rc;
}

/* Lock held. One line when the store starts failing, one a minute while it
 * still fails, one when it writes again: a full disk under hundreds of
 * agents' retries is hundreds of failed writes a minute, each counted in
 * /metrics, and a line for each would bury the log. */
static void log_outcome(struct ep_ingest *in, int rc, const char *err)
{
	struct ep_ingest_counters *c = &in->counters;
	uint64_t now = ep_mono_ns();
	if (rc == 0) {
		if (c->store_failing)
			ep_info("store: writing again after %" PRIu64
				" failed writes; the batches answered 503 meanwhile are resent by "
				"their agents",
				c->failing_writes);
		c->store_failing = 0;
		c->failing_writes = 0;
		return;
	}
	c->failing_writes++;
	if (!c->store_failing)
		ep_error("store write of %zu batches failed: %s; ingest answers 503 and agents "
			 "keep their batches until a write succeeds",
			 in->committing_keys.n, err);
	else if (now - in->failing_logged_ns >= 60 * 1000000000ULL)
		ep_error("store: still failing, %" PRIu64 " failed writes so far: %s",
			 c->failing_writes, err);
	else
		return;
	c->store_failing = 1;
	in->failing_logged_ns = now;
}

/* For a store that keeps batches apart (ClickHouse): which of the group's
 * batches it has already, in one round trip. Asking per batch in the request
 * path, under the ingest lock, serialised every request on a store round
 * trip (at 500 agents ClickHouse's collector fell behind). Asking here is as
 * safe: only this thread writes, and a resend still in the pending or
 * committing list is caught there by the request. *known: NULL when the
 * store is not asked (SQLite: its per-batch lookup is a local index read,
 * done by the request). 0, or -1 with err. */
static int known_batches(struct ep_ingest *in, const struct key_list *keys, bool **known, char *err,
			 size_t errlen)
{
	*known = NULL;
	if (!in->keeps_batches || !keys->n)
		return 0;
	struct ep_store_batch_id *ids = calloc(keys->n, sizeof(*ids));
	bool *k = calloc(keys->n, sizeof(*k));
	if (!ids || !k) {
		free(ids);
		free(k);
		snprintf(err, errlen, "out of memory checking the group's batches");
		return -1;
	}
	for (size_t i = 0; i < keys->n; i++)
		ids[i] = (struct ep_store_batch_id){
		    keys->items[i].agent_id, keys->items[i].sequence, keys->items[i].node, 0};
	int r = ep_store_known_batches(in->store, ids, keys->n, k, err, errlen);
	free(ids);
	if (r < 0) {
		free(k);
		return -1;
	}
	*known = k;
	return 0;
}

static void *committer_main(void *arg)
{
	struct ep_ingest *in = arg;
	pthread_mutex_lock(&in->lock);
	for (;;) {
		while (!in->stopping && in->pending_keys.n == 0 && !in->pending_poisoned)
			pthread_cond_wait(&in->work, &in->lock);
		if (in->pending_keys.n == 0 && !in->pending_poisoned)
			break; /* stopping, nothing left */
		/* group commit: batches that arrive while a commit runs share the
		 * next one, so the groups grow with the load by themselves;
		 * commit_ms adds a wait for still more sharing */
		uint64_t due = in->first_pending_ns + (uint64_t)in->cfg.commit_ms * 1000000ULL;
		while (!in->stopping && ep_mono_ns() < due &&
		       in->pending_rows < in->cfg.max_pending_rows / 2) {
			uint64_t left = due - ep_mono_ns();
			if (left > due)
				break;
			struct timespec ts = ep_realtime_after(left);
			if (pthread_cond_timedwait(&in->work, &in->lock, &ts) == ETIMEDOUT)
				break;
		}
		struct ep_merge *m = in->pending;
		in->pending = in->committing;
		in->committing = m;
		struct key_list k = in->pending_keys;
		in->pending_keys = in->committing_keys;
		in->committing_keys = k;
		uint64_t gen = in->gen_open++;
		size_t rows = in->pending_rows;
		in->pending_rows = 0;
		bool poisoned = in->pending_poisoned;
		in->pending_poisoned = false;
		pthread_mutex_unlock(&in->lock);

		char err[512] = "out of memory merging a batch";
		uint64_t t0 = ep_mono_ns();
		bool *known = NULL;
		int rc = poisoned
			     ? -1
			     : known_batches(in, &in->committing_keys, &known, err, sizeof(err));
		if (rc == 0)
			rc = commit(in, in->committing, &in->committing_keys, known, err,
				    sizeof(err));
		double secs = (double)(ep_mono_ns() - t0) / 1e9;
		pthread_mutex_lock(&in->lock);
		log_outcome(in, rc, err);
		in->results[gen % RESULTS] = rc;
		if (rc != 0)
			snprintf(in->last_error, sizeof(in->last_error), "%s", err);
		if (rows >= TRIM_ROWS) {
			/* the merge and its messages were freed by now */
			pthread_mutex_unlock(&in->lock);
			malloc_trim(0);
			pthread_mutex_lock(&in->lock);
		}
		in->gen_done = gen;
		in->counters.commits++;
		in->counters.commit_seconds += secs;
		if (rc == 0)
			in->counters.rows_written += rows;
		else
			in->counters.commit_failures++;
		for (size_t i = 0; known && rc == 0 && i < in->committing_keys.n; i++)
			if (known[i] && in->committing_keys.items[i].duplicate)
				*in->committing_keys.items[i].duplicate = true;
		free(known);
		keys_clear(&in->committing_keys);
		ep_merge_clear(in->committing);
		in->counters.pending_rows = in->pending_rows;
		pthread_cond_broadcast(&in->done);
		pthread_cond_broadcast(&in->space);
	}
	pthread_mutex_unlock(&in->lock);
	return NULL;
}

int ep_ingest_limit_option(void *config, const char *arg, char *err, size_t errlen)
{
	struct ep_ingest_config *c = config;
	const struct {
		const char *kind;
		uint64_t *field;
	} kinds[] = {{"binaries", &c->limits.binaries},	  {"edges", &c->limits.edges},
		     {"ranges", &c->limits.ranges},	  {"ips", &c->limits.ips},
		     {"functions", &c->limits.functions}, {"label-sets", &c->limits.label_sets}};
	const char *eq = strchr(arg, '=');
	char *end = NULL;
	unsigned long long n = eq && eq[1] >= '0' && eq[1] <= '9' ? strtoull(eq + 1, &end, 10) : 0;
	bool ok = end && !*end && n > 0 && n <= (1ULL << 32);
	size_t klen = eq ? (size_t)(eq - arg) : 0;
	for (size_t i = 0; ok && i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (strlen(kinds[i].kind) == klen && strncmp(arg, kinds[i].kind, klen) == 0) {
			*kinds[i].field = n;
			return 0;
		}
	if (ok && klen == 3 && strncmp(arg, "mib", 3) == 0 && n <= 4096) {
		c->max_batch_bytes = (size_t)n << 20;
		return 0;
	}
	snprintf(err, errlen,
		 "'%s': expected KIND=N, KIND one of binaries, edges, ranges, ips, functions, "
		 "label-sets (1 to 2^32) or mib (1 to 4096)",
		 arg);
	return -1;
}

struct ep_ingest *ep_ingest_new(struct ep_store *store, const struct ep_ingest_config *cfg,
				char *err, size_t errlen)
{
	struct ep_ingest *in = calloc(1, sizeof(*in));
	if (!in) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	in->cfg = *cfg;
	size_t memory = in->cfg.memory_bytes ? in->cfg.memory_bytes : EP_INGEST_MEMORY;
	if (!in->cfg.max_pending_rows)
		in->cfg.max_pending_rows = memory / EP_INGEST_ROW_BYTES;
	if (!in->cfg.max_batch_bytes)
		in->cfg.max_batch_bytes = EP_WIRE_MAX_BATCH;
	struct ep_wire_counts *l = &in->cfg.limits;
	l->binaries = l->binaries ? l->binaries : EP_INGEST_MAX_BINARIES;
	l->edges = l->edges ? l->edges : EP_INGEST_MAX_EDGES;
	l->ranges = l->ranges ? l->ranges : EP_INGEST_MAX_RANGES;
	l->ips = l->ips ? l->ips : EP_INGEST_MAX_IPS;
	l->functions = l->functions ? l->functions : EP_INGEST_MAX_FUNCTIONS;
	l->label_sets = l->label_sets ? l->label_sets : EP_INGEST_MAX_LABEL_SETS;
	in->plain_budget =
	    memory / 4 > in->cfg.max_batch_bytes ? memory / 4 : in->cfg.max_batch_bytes;
	in->decoded_budget = memory > in->plain_budget ? memory - in->plain_budget : memory / 2;
	in->cfg.memory_bytes = memory;
	pthread_mutex_init(&in->mem_lock, NULL);
	pthread_cond_init(&in->mem_freed, NULL);
	in->store = store;
	in->keeps_batches = ep_store_keeps_batches(store);
	/* few arenas, so that what one connection's thread freed serves the
	 * next batch on another (TRIM_BYTES) */
	mallopt(M_ARENA_MAX, 4);
	in->pending = ep_merge_new();
	in->committing = ep_merge_new();
	/* generation 0 counts as finished so the first batches (generation 1)
	 * wait for their own commit */
	in->gen_open = 1;
	pthread_mutex_init(&in->lock, NULL);
	pthread_cond_init(&in->work, NULL);
	pthread_cond_init(&in->done, NULL);
	pthread_cond_init(&in->space, NULL);
	if (!in->pending || !in->committing ||
	    pthread_create(&in->committer, NULL, committer_main, in) != 0) {
		snprintf(err, errlen, "cannot start the committer");
		ep_merge_free(in->pending);
		ep_merge_free(in->committing);
		free(in);
		return NULL;
	}
	return in;
}

void ep_ingest_free(struct ep_ingest *in)
{
	if (!in)
		return;
	pthread_mutex_lock(&in->lock);
	in->stopping = true;
	pthread_cond_broadcast(&in->work);
	pthread_mutex_unlock(&in->lock);
	pthread_join(in->committer, NULL);
	ep_merge_free(in->pending);
	ep_merge_free(in->committing);
	keys_free(&in->pending_keys);
	keys_free(&in->committing_keys);
	pthread_cond_destroy(&in->work);
	pthread_cond_destroy(&in->done);
	pthread_cond_destroy(&in->space);
	pthread_mutex_destroy(&in->lock);
	pthread_cond_destroy(&in->mem_freed);
	pthread_mutex_destroy(&in->mem_lock);
	free(in);
}

/* Waits (lock held) for generation gen; the result of its commit. */
static enum ep_ingest_result wait_generation(struct ep_ingest *in, uint64_t gen, char *why,
					     size_t whylen, enum ep_ingest_result ok)
{
	while (in->gen_done < gen)
		pthread_cond_wait(&in->done, &in->lock);
	/* a waiter that slept through RESULTS later commits would read a
	 * newer generation's outcome in the ring: not known, so not stored */
	if (in->gen_done - gen >= RESULTS) {
		snprintf(why, whylen,
			 "store: the outcome of this batch's commit is no longer known; "
			 "send it again");
		return EP_INGEST_STORE_ERROR;
	}
	if (in->results[gen % RESULTS] == 0)
		return ok;
	snprintf(why, whylen, "store: %s", in->last_error);
	return EP_INGEST_STORE_ERROR;
}

static enum ep_ingest_result count(struct ep_ingest *in, enum ep_ingest_result r)
{
	switch (r) {
	case EP_INGEST_STORED:
		in->counters.stored++;
		break;
	case EP_INGEST_DUPLICATE:
		in->counters.duplicate++;
		break;
	case EP_INGEST_BAD_REQUEST:
		in->counters.bad_request++;
		break;
	case EP_INGEST_TOO_LARGE:
		in->counters.too_large++;
		break;
	case EP_INGEST_STORE_ERROR:
		in->counters.store_error++;
		break;
	}
	return r;
}

static int64_t bucket_of(uint64_t window_end_ns)
{
	int64_t s = window_end_ns ? (int64_t)(window_end_ns / 1000000000ULL) : (int64_t)time(NULL);
	return s - s % EP_STORE_BUCKET_S;
}

/* Takes n bytes of a budget (held of budget), waiting while others hold
 * too much of it. */
static void mem_take(struct ep_ingest *in, size_t *held, size_t budget, size_t n)
{
	pthread_mutex_lock(&in->mem_lock);
	bool waited = false;
	while (*held + n > budget && *held > 0) {
		waited = true;
		pthread_cond_wait(&in->mem_freed, &in->mem_lock);
	}
	*held += n;
	in->memory_waits += waited;
	pthread_mutex_unlock(&in->mem_lock);
}

static void mem_give(struct ep_ingest *in, size_t *held, size_t n)
{
	if (!n)
		return;
	pthread_mutex_lock(&in->mem_lock);
	*held -= n;
	pthread_cond_broadcast(&in->mem_freed);
	pthread_mutex_unlock(&in->mem_lock);
}

/* A batch's profiles, once merged: the rest (its agent, its session
 * reports) stays for the caller. */
static void drop_binaries(Edgeprof__V1__Batch *b)
{
	for (size_t i = 0; i < b->n_binaries; i++)
		edgeprof__v1__binary_delta__free_unpacked(b->binaries[i], NULL);
	free(b->binaries);
	b->binaries = NULL;
	b->n_binaries = 0;
}

/* The batch in body, unpacked within the bounds, holding *decoded bytes of
 * the decoded budget (the caller gives them back once the batch's rows are
 * written); NULL with *r and why. */
static Edgeprof__V1__Batch *unpack_bounded(struct ep_ingest *in, const uint8_t *body, size_t len,
					   bool compressed, size_t *decoded,
					   enum ep_ingest_result *r, char *why, size_t whylen)
{
	*decoded = 0;
	/* the decompressed bytes: what the frame says, held to it, or the bound */
	size_t max = in->cfg.max_batch_bytes;
	uint64_t declared = compressed ? ep_wire_declared_size(body, len) : 0;
	size_t plain_need = !compressed ? 0 : declared && declared < max ? (size_t)declared : max;
	mem_take(in, &in->plain_held, in->plain_budget, plain_need);
	const uint8_t *plain;
	size_t plain_len;
	uint8_t *owned;
	bool too_large;
	Edgeprof__V1__Batch *b = NULL;
	struct ep_wire_counts c;
	const char *which = NULL;
	*r = EP_INGEST_BAD_REQUEST;
	if (ep_wire_inflate(body, len, compressed, max, &plain, &plain_len, &owned, &too_large, why,
			    whylen) != 0) {
		*r = too_large ? EP_INGEST_TOO_LARGE : EP_INGEST_BAD_REQUEST;
		goto out;
	}
	if (ep_wire_count(plain, plain_len, &in->cfg.limits, &c, why, whylen) != 0)
		goto out;
	int bound = -1;
	if (ep_wire_check_limits(&c, &in->cfg.limits, &which, why, whylen) != 0) {
		for (int i = 0; i < EP_INGEST_NBOUNDS; i++)
			if (strcmp(ep_ingest_bound_names[i], which) == 0)
				bound = i;
	} else if (c.decoded_bytes * IN_FLIGHT_FACTOR > in->decoded_budget) {
		bound = EP_INGEST_BOUND_MEMORY;
		*r = EP_INGEST_TOO_LARGE;
		snprintf(why, whylen,
			 "unpacking this batch takes about %" PRIu64 " MiB (%" PRIu64
			 " binaries, %" PRIu64 " edges, %" PRIu64 " ranges, %" PRIu64
			 " IPs, %" PRIu64 " functions, %zu bytes): more than the %zu MiB batches "
			 "in flight may hold (collector --ingest-memory-mib)",
			 c.decoded_bytes * IN_FLIGHT_FACTOR >> 20, c.binaries, c.edges, c.ranges,
			 c.ips, c.functions, plain_len, in->decoded_budget >> 20);
	}
	if (bound >= 0 || which) {
		pthread_mutex_lock(&in->lock);
		if (bound >= 0)
			in->counters.refused[bound]++;
		pthread_mutex_unlock(&in->lock);
		goto out;
	}
	*decoded = (size_t)c.decoded_bytes * IN_FLIGHT_FACTOR;
	mem_take(in, &in->decoded_held, in->decoded_budget, *decoded);
	b = edgeprof__v1__batch__unpack(NULL, plain_len, plain);
	if (!b)
		snprintf(why, whylen, "not an edgeprof.v1.Batch protobuf (%zu bytes)", plain_len);
out:
	free(owned);
	mem_give(in, &in->plain_held, plain_need);
	if (!b) {
		mem_give(in, &in->decoded_held, *decoded);
		*decoded = 0;
	}
	return b;
}

enum ep_ingest_result ep_ingest_batch(struct ep_ingest *in, const uint8_t *body, size_t len,
				      bool compressed, uint64_t *sequence, char *why, size_t whylen,
				      Edgeprof__V1__Batch **keep)
{
	*sequence = 0;
	if (keep)
		*keep = NULL;
	enum ep_ingest_result r;
	size_t decoded;
	Edgeprof__V1__Batch *b =
	    unpack_bounded(in, body, len, compressed, &decoded, &r, why, whylen);
	size_t unpacked = decoded;
	pthread_mutex_lock(&in->lock);
	if (!b) {
		r = count(in, r);
		goto out;
	}
	*sequence = b->sequence;
	int bad = ep_wire_check_batch(b, why, whylen);
	if (bad != 0) {
		if (bad == EP_WIRE_BAD_COUNTS)
			in->counters.counts_out_of_range++;
		if (bad == EP_WIRE_BAD_STRING)
			in->counters.refused[EP_INGEST_BOUND_STRINGS]++;
		r = count(in, EP_INGEST_BAD_REQUEST);
		goto out;
	}
	const char *agent_id = b->agent->agent_id;
	if (keys_has(&in->pending_keys, agent_id, b->sequence)) {
		r = count(in, wait_generation(in, in->gen_open, why, whylen, EP_INGEST_DUPLICATE));
		goto out;
	}
	if (keys_has(&in->committing_keys, agent_id, b->sequence)) {
		r = count(in,
			  wait_generation(in, in->gen_open - 1, why, whylen, EP_INGEST_DUPLICATE));
		goto out;
	}
	/* with the lock held, a batch is either still listed above or its
	 * commit is complete and the store knows it; a store that keeps
	 * batches apart is asked by the committer, once per group */
	char err[512];
	int seen = in->keeps_batches
		       ? 0
		       : ep_store_has_batch(in->store, agent_id, b->sequence, err, sizeof(err));
	if (seen != 0) {
		if (seen < 0)
			snprintf(why, whylen, "store: %s", err);
		r = count(in, seen > 0 ? EP_INGEST_DUPLICATE : EP_INGEST_STORE_ERROR);
		goto out;
	}
	while (in->pending_rows >= in->cfg.max_pending_rows)
		pthread_cond_wait(&in->space, &in->lock);
	int64_t bucket = bucket_of(b->window_end_ns);
	/* cpu-clock nanoseconds stand in for cycles on machines without a
	 * cycles event: they are kept apart from other agents' cycles all the
	 * way to the store's columns */
	bool ns = b->config && b->config->cycles_unit && strcmp(b->config->cycles_unit, "ns") == 0;
	struct ep_merge *own = in->keeps_batches ? ep_merge_new() : NULL;
	struct ep_merge *into = in->keeps_batches ? own : in->pending;
	int rc = into ? 0 : -1;
	for (size_t i = 0; i < b->n_binaries && rc == 0; i++) {
		const Edgeprof__V1__BinaryDelta *d = b->binaries[i];
		rc = ep_merge_add_unit(into, bucket, d->profile, d->labels, ns);
		in->counters.edges += d->profile->n_edges;
		in->counters.ranges += d->profile->n_ranges;
		in->counters.ips += d->profile->n_ips;
	}
	/* merged: the unpacked profiles go now; the batch's reservation
	 * stays for its merged rows until they are written */
	drop_binaries(b);
	const char *node = b->agent->node ? b->agent->node : "";
	bool duplicate = false;
	if (rc != 0 ||
	    keys_add(&in->pending_keys, agent_id, node, b->sequence, own, &duplicate) != 0) {
		ep_merge_free(own);
		/* the pending merge may hold part of this batch, which cannot be
		 * committed without its id: the whole generation fails and its
		 * agents resend */
		snprintf(why, whylen, "collector out of memory");
		in->pending_poisoned = true;
		r = count(in, EP_INGEST_STORE_ERROR);
		goto out;
	}
	if (in->pending_keys.n == 1)
		in->first_pending_ns = ep_mono_ns();
	/* the slices count with the rows: a batch of many label sets and no
	 * edges holds memory too */
	in->pending_rows = in->keeps_batches
			       ? in->pending_rows + ep_merge_rows(own) + ep_merge_slices(own)
			       : ep_merge_rows(in->pending) + ep_merge_slices(in->pending);
	in->counters.pending_rows = in->pending_rows;
	pthread_cond_signal(&in->work);
	r = wait_generation(in, in->gen_open, why, whylen, EP_INGEST_STORED);
	r = count(in, r == EP_INGEST_STORED && duplicate ? EP_INGEST_DUPLICATE : r);
out:
	pthread_mutex_unlock(&in->lock);
	mem_give(in, &in->decoded_held, decoded);
	if (keep && b && (r == EP_INGEST_STORED || r == EP_INGEST_DUPLICATE))
		*keep = b;
	else
		ep_wire_free(b);
	if (unpacked >= TRIM_BYTES)
		malloc_trim(0);
	return r;
}

void ep_ingest_counters(struct ep_ingest *in, struct ep_ingest_counters *out)
{
	pthread_mutex_lock(&in->lock);
	*out = in->counters;
	pthread_mutex_unlock(&in->lock);
	pthread_mutex_lock(&in->mem_lock);
	out->plain_bytes = in->plain_held;
	out->decoded_bytes = in->decoded_held;
	out->memory_waits = in->memory_waits;
	pthread_mutex_unlock(&in->mem_lock);
}

void ep_ingest_metrics(struct ep_ingest *in, FILE *out)
{
	struct ep_ingest_counters c;
	ep_ingest_counters(in, &c);
	fputs(
	    "# HELP edgeprof_ingest_refused_total Batches refused (400; memory: 413) for a bound, "
	    "by bound: too many binaries, edges, ranges, IPs, functions or label sets in one "
	    "batch, or more to unpack than the ingest may hold, or a string (a label, a path, "
	    "a name) longer than the wire allows.\n"
	    "# TYPE edgeprof_ingest_refused_total counter\n",
	    out);
	for (int i = 0; i < EP_INGEST_NBOUNDS; i++)
		fprintf(out, "edgeprof_ingest_refused_total{bound=\"%s\"} %" PRIu64 "\n",
			ep_ingest_bound_names[i], c.refused[i]);
	const struct ep_wire_counts *l = &in->cfg.limits;
	const uint64_t bounds[EP_INGEST_NBOUNDS] = {
	    l->binaries,  l->edges,	 l->ranges,	     l->ips,
	    l->functions, l->label_sets, in->decoded_budget, 0};
	fputs("# HELP edgeprof_ingest_bound What one batch may hold (memory: bytes to unpack "
	      "batches in flight).\n# TYPE edgeprof_ingest_bound gauge\n",
	      out);
	/* the strings' bounds are per field (common/wire/wire.h), not a knob */
	for (int i = 0; i < EP_INGEST_BOUND_STRINGS; i++)
		fprintf(out, "edgeprof_ingest_bound{bound=\"%s\"} %" PRIu64 "\n",
			ep_ingest_bound_names[i], bounds[i]);
	fprintf(out,
		"# HELP edgeprof_ingest_inflight_bytes Heap batches in flight hold: decompressed "
		"bytes, and what unpacking them took, until merged.\n"
		"# TYPE edgeprof_ingest_inflight_bytes gauge\n"
		"edgeprof_ingest_inflight_bytes{part=\"decompressed\"} %" PRIu64 "\n"
		"edgeprof_ingest_inflight_bytes{part=\"unpacked\"} %" PRIu64 "\n"
		"# HELP edgeprof_ingest_memory_waits_total Batches that waited for others to free "
		"the ingest's memory.\n"
		"# TYPE edgeprof_ingest_memory_waits_total counter\n"
		"edgeprof_ingest_memory_waits_total %" PRIu64 "\n",
		c.plain_bytes, c.decoded_bytes, c.memory_waits);
}
