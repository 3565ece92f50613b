/* SPDX-License-Identifier: Apache-2.0 */
#include "collector/store/store.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/store/store_backend.h"
#include "common/profile/model.h"
#include "common/util/log.h"
#include "common/util/sat.h"

struct ep_store *ep_store_open(const char *spec, char *err, size_t errlen)
{
	struct ep_store *s = NULL;
	if (strncmp(spec, "sqlite:", 7) == 0 && spec[7])
		s = ep_store_sqlite_open(spec + 7, err, errlen);
	else if (strncmp(spec, "clickhouse:", 11) == 0 && spec[11])
		s = ep_store_clickhouse_open(spec + 11, err, errlen);
	else
		snprintf(err, errlen, "store '%s': expected sqlite:PATH or clickhouse:URL", spec);
	if (s)
		pthread_mutex_init(&s->lock, NULL);
	return s;
}

void ep_store_close(struct ep_store *s)
{
	if (!s)
		return;
	pthread_mutex_destroy(&s->lock);
	s->ops->close(s);
}

/* Every call ends here: the backend lets go of what it holds between calls
 * (SQLite: a statement left on a row keeps its read open, and an open read
 * pins the WAL, which then grows with every write). */
static void store_unlock(struct ep_store *s)
{
	if (s->ops->release)
		s->ops->release(s);
	pthread_mutex_unlock(&s->lock);
}

bool ep_store_keeps_batches(const struct ep_store *s)
{
	return s->ops->keeps_batches;
}

uint64_t ep_store_memory_bytes(struct ep_store *s)
{
	return s->ops->memory_bytes ? s->ops->memory_bytes(s) : 0;
}

int ep_store_has_batch(struct ep_store *s, const char *agent_id, uint64_t sequence, char *err,
		       size_t errlen)
{
	pthread_mutex_lock(&s->lock);
	int r = s->ops->has_batch(s, agent_id, sequence, err, errlen);
	store_unlock(s);
	return r;
}

int ep_store_known_batches(struct ep_store *s, const struct ep_store_batch_id *ids, size_t n,
			   bool *known, char *err, size_t errlen)
{
	pthread_mutex_lock(&s->lock);
	int r = 0;
	if (s->ops->known_batches) {
		r = s->ops->known_batches(s, ids, n, known, err, errlen);
	} else {
		for (size_t i = 0; i < n && r >= 0; i++) {
			int one =
			    s->ops->has_batch(s, ids[i].agent_id, ids[i].sequence, err, errlen);
			known[i] = one > 0;
			r = one < 0 ? -1 : r + one;
		}
	}
	store_unlock(s);
	return r;
}

int ep_store_write(struct ep_store *s, const struct ep_store_commit *c, char *err, size_t errlen)
{
	pthread_mutex_lock(&s->lock);
	int r = s->ops->write(s, c, err, errlen);
	store_unlock(s);
	return r;
}

int ep_store_prune(struct ep_store *s, int64_t before_s, char *err, size_t errlen)
{
	pthread_mutex_lock(&s->lock);
	int r = s->ops->prune(s, before_s, err, errlen);
	store_unlock(s);
	return r;
}

Edgeprof__V1__BinaryList *ep_store_list_binaries(struct ep_store *s,
						 const struct ep_store_filter *f,
						 const struct ep_store_page *page, char *err,
						 size_t errlen)
{
	struct ep_store_page p = {.labels = EP_STORE_LABELS_DEFAULT};
	if (page)
		p = *page;
	if (!p.limit)
		p.limit = EP_STORE_PAGE_DEFAULT;
	pthread_mutex_lock(&s->lock);
	Edgeprof__V1__BinaryList *r = s->ops->list_binaries(s, f, &p, err, errlen);
	store_unlock(s);
	return r;
}

void ep_store_free_list(Edgeprof__V1__BinaryList *list)
{
	if (list)
		protobuf_c_message_free_unpacked(&list->base, NULL);
}

int ep_store_session_put(struct ep_store *s, const Edgeprof__V1__Session *session, char *err,
			 size_t errlen)
{
	if (!session->id || !*session->id) {
		snprintf(err, errlen, "a session needs an id");
		return -1;
	}
	size_t len = edgeprof__v1__session__get_packed_size(session);
	uint8_t *record = malloc(len ? len : 1);
	if (!record) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	edgeprof__v1__session__pack(session, record);
	pthread_mutex_lock(&s->lock);
	int r = s->ops->session_put(s, session, record, len, err, errlen);
	store_unlock(s);
	free(record);
	return r;
}

static Edgeprof__V1__Session *unpack_session(const uint8_t *record, size_t len, char *err,
					     size_t errlen)
{
	Edgeprof__V1__Session *session = edgeprof__v1__session__unpack(NULL, len, record);
	if (!session)
		snprintf(err, errlen, "a stored session record (%zu bytes) does not decode", len);
	return session;
}

Edgeprof__V1__Session *ep_store_session_get(struct ep_store *s, const char *id, char *err,
					    size_t errlen)
{
	uint8_t *record = NULL;
	size_t len = 0;
	pthread_mutex_lock(&s->lock);
	int r = s->ops->session_get(s, id ? id : "", &record, &len, err, errlen);
	store_unlock(s);
	Edgeprof__V1__Session *session = NULL;
	if (r == 0 && errlen)
		err[0] = '\0';
	else if (r == 1)
		session = unpack_session(record, len, err, errlen);
	free(record);
	return session;
}

void ep_store_free_session(Edgeprof__V1__Session *session)
{
	if (session)
		protobuf_c_message_free_unpacked(&session->base, NULL);
}

struct session_collect {
	Edgeprof__V1__SessionList *list;
	bool undecodable;
	size_t len;
};

static int add_session(void *ctx, const uint8_t *record, size_t len)
{
	struct session_collect *c = ctx;
	Edgeprof__V1__Session *session = edgeprof__v1__session__unpack(NULL, len, record);
	if (!session) {
		c->undecodable = true;
		c->len = len;
		return -1;
	}
	Edgeprof__V1__SessionList *l = c->list;
	void *grown = realloc(l->sessions, (l->n_sessions + 1) * sizeof(*l->sessions));
	if (!grown) {
		ep_store_free_session(session);
		return -1;
	}
	l->sessions = grown;
	l->sessions[l->n_sessions++] = session;
	return 0;
}

/* The unfinished sessions, or the last limit finished ones; NULL with err. */
static Edgeprof__V1__SessionList *session_list(struct ep_store *s, bool finished, size_t limit,
					       char *err, size_t errlen)
{
	struct session_collect c = {.list = malloc(sizeof(*c.list))};
	if (!c.list) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	edgeprof__v1__session_list__init(c.list);
	pthread_mutex_lock(&s->lock);
	int r = finished ? s->ops->sessions_finished(s, limit, add_session, &c, err, errlen)
			 : s->ops->sessions_unfinished(s, add_session, &c, err, errlen);
	store_unlock(s);
	if (r == 0)
		return c.list;
	if (c.undecodable)
		snprintf(err, errlen, "a stored session record (%zu bytes) does not decode", c.len);
	ep_store_free_session_list(c.list);
	return NULL;
}

Edgeprof__V1__SessionList *ep_store_sessions_unfinished(struct ep_store *s, char *err,
							size_t errlen)
{
	return session_list(s, false, 0, err, errlen);
}

void ep_store_free_session_list(Edgeprof__V1__SessionList *list)
{
	if (list)
		protobuf_c_message_free_unpacked(&list->base, NULL);
}

Edgeprof__V1__SessionList *ep_store_sessions_finished(struct ep_store *s, size_t limit, char *err,
						      size_t errlen)
{
	return session_list(s, true, limit, err, errlen);
}

int ep_store_nodes_put(struct ep_store *s, Edgeprof__V1__Node *const *nodes, size_t n, char *err,
		       size_t errlen)
{
	struct ep_store_node_row *rows = calloc(n ? n : 1, sizeof(*rows));
	int r = rows ? 0 : -1;
	size_t packed = 0;
	for (; r == 0 && packed < n; packed++) {
		/* the sums travel beside the record, to be added: the record
		 * holds none, so the newest record cannot carry old sums */
		Edgeprof__V1__Node bare = *nodes[packed];
		bare.samples = bare.samples_with_branches = bare.lost = 0;
		size_t len = edgeprof__v1__node__get_packed_size(&bare);
		uint8_t *record = malloc(len ? len : 1);
		if (!record) {
			r = -1;
			break;
		}
		edgeprof__v1__node__pack(&bare, record);
		rows[packed] = (struct ep_store_node_row){.name = bare.name,
							  .seen_ns = bare.seen_ns,
							  .record = record,
							  .len = len,
							  .samples = nodes[packed]->samples,
							  .samples_with_branches =
							      nodes[packed]->samples_with_branches,
							  .lost = nodes[packed]->lost};
	}
	if (r != 0) {
		snprintf(err, errlen, "out of memory");
	} else if (n) {
		pthread_mutex_lock(&s->lock);
		r = s->ops->nodes_put(s, rows, n, err, errlen);
		store_unlock(s);
	}
	for (size_t i = 0; rows && i < packed; i++)
		free((void *)rows[i].record);
	free(rows);
	return r;
}

struct node_collect {
	Edgeprof__V1__NodeList *list;
	bool undecodable;
	size_t len;
};

static int add_node(void *ctx, const struct ep_store_node_row *row)
{
	struct node_collect *c = ctx;
	Edgeprof__V1__Node *node = edgeprof__v1__node__unpack(NULL, row->len, row->record);
	if (!node) {
		c->undecodable = true;
		c->len = row->len;
		return -1;
	}
	node->samples = row->samples;
	node->samples_with_branches = row->samples_with_branches;
	node->lost = row->lost;
	Edgeprof__V1__NodeList *l = c->list;
	void *grown = realloc(l->nodes, (l->n_nodes + 1) * sizeof(*l->nodes));
	if (!grown) {
		protobuf_c_message_free_unpacked(&node->base, NULL);
		return -1;
	}
	l->nodes = grown;
	l->nodes[l->n_nodes++] = node;
	return 0;
}

static int node_by_name(const void *a, const void *b)
{
	return strcmp((*(Edgeprof__V1__Node *const *)a)->name,
		      (*(Edgeprof__V1__Node *const *)b)->name);
}

Edgeprof__V1__NodeList *ep_store_nodes(struct ep_store *s, char *err, size_t errlen)
{
	struct node_collect c = {.list = malloc(sizeof(*c.list))};
	if (!c.list) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	edgeprof__v1__node_list__init(c.list);
	pthread_mutex_lock(&s->lock);
	int r = s->ops->nodes_get(s, add_node, &c, err, errlen);
	store_unlock(s);
	if (r != 0) {
		if (c.undecodable)
			snprintf(err, errlen, "a stored node record (%zu bytes) does not decode",
				 c.len);
		ep_store_free_node_list(c.list);
		return NULL;
	}
	/* bytewise, whatever the backend's collation */
	if (c.list->n_nodes > 1)
		qsort(c.list->nodes, c.list->n_nodes, sizeof(*c.list->nodes), node_by_name);
	return c.list;
}

void ep_store_free_node_list(Edgeprof__V1__NodeList *list)
{
	if (list)
		protobuf_c_message_free_unpacked(&list->base, NULL);
}

/* Where every profile starts: a Profile (config.source "collector") and,
 * when the listing finds f->build_id under f, its one BinaryProfile (*bp)
 * with build-id, arch, paths and samples from the listing, for the parts'
 * rows to be added to; *bp = NULL when there are none. NULL with err.
 * Called with the store's lock held. */
static Edgeprof__V1__Profile *profile_start(struct ep_store *s, const struct ep_store_filter *f,
					    Edgeprof__V1__BinaryProfile **bp, char *err,
					    size_t errlen)
{
	*bp = NULL;
	if (!f->build_id) {
		snprintf(err, errlen, "a profile needs a build-id");
		return NULL;
	}
	Edgeprof__V1__Profile *p = malloc(sizeof(*p));
	Edgeprof__V1__Stats *stats = malloc(sizeof(*stats));
	Edgeprof__V1__SamplingConfig *cfg = malloc(sizeof(*cfg));
	if (!p || !stats || !cfg) {
		free(p);
		free(stats);
		free(cfg);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	edgeprof__v1__profile__init(p);
	edgeprof__v1__stats__init(stats);
	edgeprof__v1__sampling_config__init(cfg);
	p->format_version = 1;
	p->stats = stats;
	p->config = cfg;
	cfg->source = strdup("collector");
	cfg->event = strdup("");
	cfg->range_mode = strdup("");
	Edgeprof__V1__BinaryList *info = NULL;
	if (!cfg->source || !cfg->event || !cfg->range_mode)
		goto oom;
	/* the binary's own row: its label sets are no part of a profile */
	const struct ep_store_page one = {.limit = 1};
	info = s->ops->list_binaries(s, f, &one, err, errlen);
	if (!info)
		goto fail;
	if (info->n_binaries == 0) {
		ep_store_free_list(info);
		return p;
	}
	p->binaries = malloc(sizeof(*p->binaries));
	Edgeprof__V1__BinaryProfile *b = malloc(sizeof(*b));
	char *empty1 = strdup(""), *empty2 = strdup("");
	if (!p->binaries || !b || !empty1 || !empty2) {
		free(b);
		free(empty1);
		free(empty2);
		goto oom;
	}
	edgeprof__v1__binary_profile__init(b);
	p->binaries[p->n_binaries++] = b;
	/* move what the listing found; the list keeps valid empty strings */
	Edgeprof__V1__BinaryInfo *bi = info->binaries[0];
	b->build_id = bi->build_id;
	b->arch = bi->arch;
	b->paths = bi->paths;
	b->n_paths = bi->n_paths;
	b->samples = stats->samples = bi->samples;
	bi->build_id = empty1;
	bi->arch = empty2;
	bi->paths = NULL;
	bi->n_paths = 0;
	ep_store_free_list(info);
	*bp = b;
	return p;
oom:
	snprintf(err, errlen, "out of memory");
fail:
	ep_store_free_list(info);
	protobuf_c_message_free_unpacked(&p->base, NULL);
	return NULL;
}

/* The one unit a profile read back gives its cycles in. Cycles and
 * cpu-clock nanoseconds are kept in separate columns (ep_store_slice), so
 * neither was ever added to the other; a selection holding both (nodes with
 * a cycles event and nodes without, profiling one binary) gives the cycles,
 * the measure CPI means, and says in a log line how much time it left out,
 * rather than a sum of two units or two profiles in one. 0, or -1 (out of
 * memory). */
static int choose_unit(Edgeprof__V1__Profile *p, const struct ep_store_read *rd)
{
	Edgeprof__V1__BinaryProfile *bp = rd->bp;
	bool cycles = false;
	uint64_t ns = 0;
	for (size_t i = 0; i < bp->n_ranges; i++) {
		cycles = cycles || bp->ranges[i]->cycles;
		ep_add_sat(&ns, rd->range_ns[2 * i]);
	}
	for (size_t i = 0; i < bp->n_ips; i++) {
		cycles = cycles || bp->ips[i]->cycles;
		ep_add_sat(&ns, rd->ip_ns[i]);
	}
	if (!cycles && !ns)
		return 0;
	if (cycles && ns) {
		/* every read of such a binary meets it (a UI refreshing reads
		 * often): the operator is told once, at the warning level */
		static atomic_bool told;
		bool first = !atomic_exchange(&told, true);
		ep_log(first ? EP_LOG_WARN : EP_LOG_INFO,
		       "store: build-id %s has both cycles and cpu-clock time (%" PRIu64
		       " ns, from nodes without a cycles event) under the query: the profile "
		       "gives the cycles only%s",
		       bp->build_id, ns,
		       first ? " (said once; later reads at the info level)" : "");
	} else if (ns) {
		for (size_t i = 0; i < bp->n_ranges; i++) {
			bp->ranges[i]->cycles = rd->range_ns[2 * i];
			bp->ranges[i]->cycled_instructions = rd->range_ns[2 * i + 1];
		}
		for (size_t i = 0; i < bp->n_ips; i++)
			bp->ips[i]->cycles = rd->ip_ns[i];
	}
	/* only cpu-clock gives nanoseconds; cycles may come from the branch
	 * records or a cycles event, which the stores do not tell apart */
	p->config->cycles_unit = strdup(cycles ? "cycles" : "ns");
	p->config->cycles_source = strdup(cycles ? "" : "cpu_clock");
	return p->config->cycles_unit && p->config->cycles_source ? 0 : -1;
}

Edgeprof__V1__Profile *ep_store_profile(struct ep_store *s, const struct ep_store_filter *f,
					char *err, size_t errlen)
{
	Edgeprof__V1__BinaryProfile *bp;
	pthread_mutex_lock(&s->lock);
	Edgeprof__V1__Profile *p = profile_start(s, f, &bp, err, errlen);
	struct ep_store_read rd = {.bp = p ? bp : NULL};
	for (int part = 0; p && bp && part < EP_STORE_NPARTS; part++) {
		if (s->ops->read_part(s, f, (enum ep_store_part)part, &rd, err, errlen) != 0) {
			protobuf_c_message_free_unpacked(&p->base, NULL);
			p = NULL;
		}
	}
	store_unlock(s);
	if (p && bp && choose_unit(p, &rd) != 0) {
		snprintf(err, errlen, "out of memory");
		protobuf_c_message_free_unpacked(&p->base, NULL);
		p = NULL;
	}
	free(rd.range_ns);
	free(rd.ip_ns);
	/* the backends sum counts by GROUP BY, which leaves no order; sorted
	 * here in the model's (unsigned) order, which SQLite's int64 ORDER BY
	 * would not give for addresses >= 2^63 */
	if (p && bp) {
		if (bp->n_edges > 1)
			qsort(bp->edges, bp->n_edges, sizeof(*bp->edges), ep_edge_cmp);
		if (bp->n_ranges > 1)
			qsort(bp->ranges, bp->n_ranges, sizeof(*bp->ranges), ep_range_cmp);
		if (bp->n_ips > 1)
			qsort(bp->ips, bp->n_ips, sizeof(*bp->ips), ep_ip_cmp);
	}
	return p;
}

int ep_store_image_put(struct ep_store *s, const char *build_id, int64_t uploaded_s,
		       enum ep_image_trust trust, const uint8_t *image, size_t len, char *err,
		       size_t errlen)
{
	if (!s->ops->image_put) {
		snprintf(err, errlen, "the %s store keeps no binaries' code", s->ops->kind);
		return -1;
	}
	pthread_mutex_lock(&s->lock);
	int r = s->ops->image_put(s, build_id, uploaded_s, trust, image, len, err, errlen);
	store_unlock(s);
	return r;
}

int ep_store_image_get(struct ep_store *s, const char *build_id, uint8_t **image, size_t *len,
		       char *err, size_t errlen)
{
	if (!s->ops->image_get) {
		snprintf(err, errlen, "the %s store keeps no binaries' code", s->ops->kind);
		return -1;
	}
	pthread_mutex_lock(&s->lock);
	int r = s->ops->image_get(s, build_id, image, len, err, errlen);
	store_unlock(s);
	return r;
}
