/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The fleet store: ClickHouse through its HTTP interface, so any number of
 * stateless collectors can write to one cluster.
 *
 * ClickHouse has no transactions, so "all or nothing" and "a resend is
 * counted once" are built from two rules:
 *  - every count row carries the (agent_id, sequence) of the batch it came
 *    from (the ingest keeps batches apart for this store: keeps_batches);
 *    the tables are ReplacingMergeTree keyed by everything including the
 *    batch, so the same batch written twice (a resend after a crash, or the
 *    same resend reaching two collectors) is the same rows, and queries read
 *    them FINAL, once;
 *  - the batch's row in `batches` is written last, and queries only count
 *    rows whose batch is there: a commit cut short by a crash stays
 *    invisible until its resend completes it.
 * The price: counts are summed at query time over batches instead of in
 * place. Compacting old buckets into one summed row per key (a rollup) is
 * the follow-up for long retention.
 */
#include <curl/curl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/store/store_backend.h"
#include "common/profile/model.h"
#include "common/util/http_body.h"

struct ch_store {
	struct ep_store base;
	CURL *curl;
	char *base_url; /* http://host:port */
	char *database;
};

/* Runs one statement. query goes in the URL (with the database) when body
 * carries data (INSERT ... FORMAT TabSeparated), else in the body. The
 * answer is returned in *out when out is not NULL. */
static int ch_request(struct ch_store *s, bool with_db, const char *query, const char *body,
		      size_t body_len, struct ep_http_body *out, char *err, size_t errlen)
{
	char *url = NULL;
	char *q = body ? curl_easy_escape(s->curl, query, 0) : NULL;
	char *db = with_db ? curl_easy_escape(s->curl, s->database, 0) : NULL;
	int n = asprintf(&url, "%s/?%s%s%s%s", s->base_url, db ? "database=" : "", db ? db : "",
			 q ? (db ? "&query=" : "query=") : "", q ? q : "");
	curl_free(q);
	curl_free(db);
	if (n < 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	struct ep_http_body answer = {0};
	curl_easy_setopt(s->curl, CURLOPT_URL, url);
	curl_easy_setopt(s->curl, CURLOPT_POSTFIELDS, body ? body : query);
	curl_easy_setopt(s->curl, CURLOPT_POSTFIELDSIZE_LARGE,
			 (curl_off_t)(body ? body_len : strlen(query)));
	curl_easy_setopt(s->curl, CURLOPT_WRITEFUNCTION, ep_http_body_write);
	curl_easy_setopt(s->curl, CURLOPT_WRITEDATA, &answer);
	CURLcode cc = curl_easy_perform(s->curl);
	long status = 0;
	curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &status);
	int rc = 0;
	if (cc != CURLE_OK) {
		snprintf(err, errlen, "clickhouse %s: %s", s->base_url, curl_easy_strerror(cc));
		rc = -1;
	} else if (status != 200) {
		snprintf(err, errlen, "clickhouse %s: HTTP %ld: %.300s", s->base_url, status,
			 answer.data ? answer.data : "");
		err[strcspn(err, "\n")] = '\0';
		rc = -1;
	}
	free(url);
	if (rc == 0 && out)
		*out = answer;
	else
		free(answer.data);
	return rc;
}

/* TabSeparated escaping: the format's own, so paths with tabs survive. */
static void tsv_string(FILE *f, const char *s)
{
	for (const char *p = s ? s : ""; *p; p++) {
		switch (*p) {
		case '\t':
			fputs("\\t", f);
			break;
		case '\n':
			fputs("\\n", f);
			break;
		case '\\':
			fputs("\\\\", f);
			break;
		default:
			fputc(*p, f);
		}
	}
}

/* SQL string literal for the filters (single quotes, backslashes). */
static void sql_string(FILE *f, const char *s)
{
	fputc('\'', f);
	for (const char *p = s; *p; p++) {
		if (*p == '\'' || *p == '\\')
			fputc('\\', f);
		fputc(*p, f);
	}
	fputc('\'', f);
}

static const char *const tables[] = {
    "CREATE TABLE IF NOT EXISTS batches (agent_id String, sequence UInt64, node String,"
    " received Int64) ENGINE = ReplacingMergeTree() ORDER BY (agent_id, sequence)",
    "CREATE TABLE IF NOT EXISTS samples (build_id String, arch String, bucket Int64,"
    " container_id String, pod String, namespace String, cgroup String, process String,"
    " count UInt64, agent_id String, sequence UInt64, session_id String)"
    " ENGINE = ReplacingMergeTree() PARTITION BY intDiv(bucket, 604800) ORDER BY (build_id,"
    " bucket, container_id, pod, namespace, cgroup, process, agent_id, sequence, session_id)",
    "CREATE TABLE IF NOT EXISTS edges (build_id String, bucket Int64, container_id String,"
    " pod String, namespace String, cgroup String, process String, from_addr UInt64,"
    " to_addr UInt64, flags UInt8, kind UInt8, count UInt64, mispredicted UInt64,"
    " agent_id String, sequence UInt64, session_id String) ENGINE = ReplacingMergeTree()"
    " PARTITION BY intDiv(bucket, 604800) ORDER BY (build_id, bucket, container_id, pod,"
    " namespace, cgroup, process, from_addr, to_addr, flags, agent_id, sequence, session_id)",
    "CREATE TABLE IF NOT EXISTS ranges (build_id String, bucket Int64, container_id String,"
    " pod String, namespace String, cgroup String, process String, start_addr UInt64,"
    " end_addr UInt64, count UInt64, agent_id String, sequence UInt64, session_id String)"
    " ENGINE = ReplacingMergeTree() PARTITION BY intDiv(bucket, 604800) ORDER BY (build_id,"
    " bucket, container_id, pod, namespace, cgroup, process, start_addr, end_addr, agent_id,"
    " sequence, session_id)",
    "CREATE TABLE IF NOT EXISTS ips (build_id String, bucket Int64, container_id String,"
    " pod String, namespace String, cgroup String, process String, ip UInt64, count UInt64,"
    " agent_id String, sequence UInt64, session_id String) ENGINE = ReplacingMergeTree()"
    " PARTITION BY intDiv(bucket, 604800) ORDER BY (build_id, bucket, container_id, pod,"
    " namespace, cgroup, process, ip, agent_id, sequence, session_id)",
    "CREATE TABLE IF NOT EXISTS paths (build_id String, path String)"
    " ENGINE = ReplacingMergeTree() ORDER BY (build_id, path)",
    "CREATE TABLE IF NOT EXISTS functions (build_id String, start_addr UInt64, name String,"
    " size UInt64) ENGINE = ReplacingMergeTree() ORDER BY (build_id, start_addr, name)",
    "CREATE TABLE IF NOT EXISTS segments (build_id String, vaddr UInt64, file_offset UInt64,"
    " size UInt64) ENGINE = ReplacingMergeTree() ORDER BY (build_id, vaddr, file_offset, size)",
    /* record: the serialised Session, hex (TabSeparated has no bytes type);
     * the newest updated_ns wins, read FINAL */
    "CREATE TABLE IF NOT EXISTS sessions (id String, state UInt8, created_s Int64,"
    " ended_s Int64, updated_ns UInt64, record String)"
    " ENGINE = ReplacingMergeTree(updated_ns) ORDER BY id",
};

/* Count tables created before sessions lack session_id. It is added at the
 * end of the columns and of the sorting key, as the tables above have it:
 * in the key because ReplacingMergeTree keeps one row per key, and a
 * session's row must not replace the continuous row of the same batch. */
static const char *const count_tables[] = {"samples", "edges", "ranges", "ips"};

enum { T_SAMPLES, T_EDGES, T_RANGES, T_IPS, T_PATHS, T_FUNCTIONS, T_SEGMENTS, NT };
/* Columns named: tables upgraded in place and tables created new must take
 * the same rows. */
#define LABEL_COLS "container_id, pod, namespace, cgroup, process"
#define BATCH_COLS "agent_id, sequence, session_id"
static const char *const insert_sql[NT] = {
    "INSERT INTO samples (build_id, arch, bucket, " LABEL_COLS ", count, " BATCH_COLS
    ") FORMAT TabSeparated",
    "INSERT INTO edges (build_id, bucket, " LABEL_COLS ", from_addr, to_addr, flags, kind, count,"
    " mispredicted, " BATCH_COLS ") FORMAT TabSeparated",
    "INSERT INTO ranges (build_id, bucket, " LABEL_COLS ", start_addr, end_addr, count, " BATCH_COLS
    ") FORMAT TabSeparated",
    "INSERT INTO ips (build_id, bucket, " LABEL_COLS ", ip, count, " BATCH_COLS
    ") FORMAT TabSeparated",
    "INSERT INTO paths FORMAT TabSeparated",
    "INSERT INTO functions FORMAT TabSeparated",
    "INSERT INTO segments FORMAT TabSeparated",
};

static void labels_tsv(FILE *f, const Edgeprof__V1__Labels *l)
{
	const char *v[5] = {l ? l->container_id : "", l ? l->pod : "", l ? l->namespace_ : "",
			    l ? l->cgroup : "", l ? l->process : ""};
	for (int i = 0; i < 5; i++) {
		tsv_string(f, v[i]);
		fputc('\t', f);
	}
}

static int ch_write(struct ep_store *base, const struct ep_store_commit *c, char *err,
		    size_t errlen)
{
	struct ch_store *s = (struct ch_store *)base;
	char *data[NT] = {0};
	size_t len[NT] = {0};
	FILE *f[NT] = {0};
	int rc = -1;
	for (int t = 0; t < NT; t++) {
		if (!(f[t] = open_memstream(&data[t], &len[t]))) {
			snprintf(err, errlen, "out of memory");
			goto out;
		}
	}
	for (size_t i = 0; i < c->nslices; i++) {
		const struct ep_store_slice *sl = &c->slices[i];
		if (sl->batch < 0 || (size_t)sl->batch >= c->nbatches) {
			snprintf(err, errlen, "clickhouse store: a slice without its batch");
			goto out;
		}
		const struct ep_store_batch_id *b = &c->batches[sl->batch];
		const Edgeprof__V1__BinaryProfile *bp = sl->delta->profile;
		const Edgeprof__V1__Labels *l = sl->delta->labels;
		/* the row's key tail: which batch it came from, and the session */
		char *tail = NULL;
		size_t tail_len = 0;
		FILE *tf = open_memstream(&tail, &tail_len);
		if (!tf) {
			snprintf(err, errlen, "out of memory");
			goto out;
		}
		tsv_string(tf, b->agent_id);
		fprintf(tf, "\t%" PRIu64 "\t", b->sequence);
		tsv_string(tf, l ? l->session_id : "");
		fputc('\n', tf);
		if (fclose(tf) != 0 || !tail) {
			free(tail);
			snprintf(err, errlen, "out of memory");
			goto out;
		}
		if (bp->samples) {
			tsv_string(f[T_SAMPLES], bp->build_id);
			fputc('\t', f[T_SAMPLES]);
			tsv_string(f[T_SAMPLES], bp->arch);
			fprintf(f[T_SAMPLES], "\t%" PRId64 "\t", sl->bucket_s);
			labels_tsv(f[T_SAMPLES], l);
			fprintf(f[T_SAMPLES], "%" PRIu64 "\t%s", bp->samples, tail);
		}
		for (size_t j = 0; j < bp->n_edges; j++) {
			const Edgeprof__V1__Edge *e = bp->edges[j];
			tsv_string(f[T_EDGES], bp->build_id);
			fprintf(f[T_EDGES], "\t%" PRId64 "\t", sl->bucket_s);
			labels_tsv(f[T_EDGES], l);
			fprintf(f[T_EDGES],
				"%" PRIu64 "\t%" PRIu64 "\t%d\t%d\t%" PRIu64 "\t%" PRIu64 "\t%s",
				e->from, e->to,
				(e->taken ? 1 : 0) | (e->from_external ? 2 : 0) |
				    (e->to_external ? 4 : 0),
				(int)e->kind, e->count, e->mispredicted, tail);
		}
		for (size_t j = 0; j < bp->n_ranges; j++) {
			tsv_string(f[T_RANGES], bp->build_id);
			fprintf(f[T_RANGES], "\t%" PRId64 "\t", sl->bucket_s);
			labels_tsv(f[T_RANGES], l);
			fprintf(f[T_RANGES], "%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%s",
				bp->ranges[j]->start, bp->ranges[j]->end, bp->ranges[j]->count,
				tail);
		}
		for (size_t j = 0; j < bp->n_ips; j++) {
			tsv_string(f[T_IPS], bp->build_id);
			fprintf(f[T_IPS], "\t%" PRId64 "\t", sl->bucket_s);
			labels_tsv(f[T_IPS], l);
			fprintf(f[T_IPS], "%" PRIu64 "\t%" PRIu64 "\t%s", bp->ips[j]->ip,
				bp->ips[j]->count, tail);
		}
		for (size_t j = 0; j < bp->n_paths; j++) {
			tsv_string(f[T_PATHS], bp->build_id);
			fputc('\t', f[T_PATHS]);
			tsv_string(f[T_PATHS], bp->paths[j]);
			fputc('\n', f[T_PATHS]);
		}
		for (size_t j = 0; j < bp->n_functions; j++) {
			tsv_string(f[T_FUNCTIONS], bp->build_id);
			fprintf(f[T_FUNCTIONS], "\t%" PRIu64 "\t", bp->functions[j]->start);
			tsv_string(f[T_FUNCTIONS], bp->functions[j]->name);
			fprintf(f[T_FUNCTIONS], "\t%" PRIu64 "\n", bp->functions[j]->size);
		}
		for (size_t j = 0; j < bp->n_segments; j++) {
			tsv_string(f[T_SEGMENTS], bp->build_id);
			fprintf(f[T_SEGMENTS], "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\n",
				bp->segments[j]->vaddr, bp->segments[j]->offset,
				bp->segments[j]->size);
		}
		free(tail);
	}
	for (int t = 0; t < NT; t++) {
		fclose(f[t]);
		f[t] = NULL;
	}
	/* metadata first, counts next, the batches that make counts visible last */
	static const int order[NT] = {T_PATHS, T_FUNCTIONS, T_SEGMENTS, T_SAMPLES,
				      T_EDGES, T_RANGES,    T_IPS};
	for (int i = 0; i < NT; i++) {
		int t = order[i];
		if (len[t] &&
		    ch_request(s, true, insert_sql[t], data[t], len[t], NULL, err, errlen) != 0)
			goto out;
	}
	char *rows = NULL;
	size_t rows_len = 0;
	FILE *bf = open_memstream(&rows, &rows_len);
	if (!bf) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < c->nbatches; i++) {
		tsv_string(bf, c->batches[i].agent_id);
		fprintf(bf, "\t%" PRIu64 "\t", c->batches[i].sequence);
		tsv_string(bf, c->batches[i].node);
		fprintf(bf, "\t%" PRId64 "\n", c->batches[i].received_s);
	}
	fclose(bf);
	rc = rows_len ? ch_request(s, true, "INSERT INTO batches FORMAT TabSeparated", rows,
				   rows_len, NULL, err, errlen)
		      : 0;
	free(rows);
out:
	for (int t = 0; t < NT; t++) {
		if (f[t])
			fclose(f[t]);
		free(data[t]);
	}
	return rc;
}

static int next_row(char **cursor, char **fields, int max);

/* Finished sessions that ended before the cut (one that failed before it
 * started has no end: its creation counts). A mutation sees every version
 * of a row, so the ids are chosen on the newest versions (FINAL) and then
 * every version of them goes. The ids are chosen here and listed in the
 * mutation because 18.16 cannot run a mutation whose IN subquery reads a
 * subquery ("There is no query"), and the filter on the non-key state must
 * stay outside FINAL (a PREWHERE under FINAL would see old versions). */
static int prune_sessions(struct ch_store *s, int64_t before_s, char *err, size_t errlen)
{
	char q[512];
	snprintf(q, sizeof(q),
		 "SELECT id FROM (SELECT id, state, created_s, ended_s FROM sessions FINAL)"
		 " WHERE state IN (%d, %d) AND if(ended_s != 0, ended_s, created_s) < %lld"
		 " FORMAT TabSeparated",
		 EDGEPROF__V1__SESSION_STATE__SESSION_DONE,
		 EDGEPROF__V1__SESSION_STATE__SESSION_FAILED, (long long)before_s);
	struct ep_http_body out = {0};
	if (ch_request(s, true, q, NULL, 0, &out, err, errlen) != 0)
		return -1;
	char *cur = out.data, *fields[1];
	int rc = 0;
	bool more = next_row(&cur, fields, 1) == 1;
	while (rc == 0 && more) {
		/* in pieces, well under max_query_size (256 KiB) */
		char *del = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&del, &len);
		if (!f) {
			snprintf(err, errlen, "out of memory");
			rc = -1;
			break;
		}
		fputs("ALTER TABLE sessions DELETE WHERE id IN (", f);
		for (int n = 0; more && ftell(f) < 64 * 1024; n++) {
			if (n)
				fputs(", ", f);
			sql_string(f, fields[0]);
			more = next_row(&cur, fields, 1) == 1;
		}
		fputc(')', f);
		if (fclose(f) != 0 || !del) {
			snprintf(err, errlen, "out of memory");
			rc = -1;
		} else {
			rc = ch_request(s, true, del, NULL, 0, NULL, err, errlen);
		}
		free(del);
	}
	free(out.data);
	return rc;
}

/* Counts live in weekly partitions (intDiv(bucket, 604800)): whole weeks
 * that ended before the cut are dropped, which ClickHouse does at once.
 * Batch ids are deleted by a mutation (in the background). */
static int ch_prune(struct ep_store *base, int64_t before_s, char *err, size_t errlen)
{
	struct ch_store *s = (struct ch_store *)base;
	for (size_t t = 0; t < sizeof(count_tables) / sizeof(count_tables[0]); t++) {
		char q[512];
		snprintf(q, sizeof(q),
			 "SELECT DISTINCT partition FROM system.parts WHERE database = '%s' AND "
			 "table = '%s' AND active FORMAT TabSeparated",
			 s->database, count_tables[t]);
		struct ep_http_body out = {0};
		if (ch_request(s, false, q, NULL, 0, &out, err, errlen) != 0)
			return -1;
		char *cur = out.data, *fields[1];
		int rc = 0;
		while (rc == 0 && next_row(&cur, fields, 1) == 1) {
			long long week = strtoll(fields[0], NULL, 10);
			if ((week + 1) * 604800LL > before_s)
				continue;
			snprintf(q, sizeof(q), "ALTER TABLE %s DROP PARTITION %lld",
				 count_tables[t], week);
			rc = ch_request(s, true, q, NULL, 0, NULL, err, errlen);
		}
		free(out.data);
		if (rc != 0)
			return -1;
	}
	char q[256];
	snprintf(q, sizeof(q), "ALTER TABLE batches DELETE WHERE received < %lld",
		 (long long)before_s);
	if (ch_request(s, true, q, NULL, 0, NULL, err, errlen) != 0)
		return -1;
	return prune_sessions(s, before_s, err, errlen);
}

static int ch_has_batch(struct ep_store *base, const char *agent_id, uint64_t sequence, char *err,
			size_t errlen)
{
	struct ch_store *s = (struct ch_store *)base;
	char *q = NULL;
	size_t qlen = 0;
	FILE *f = open_memstream(&q, &qlen);
	if (!f) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	fputs("SELECT count() FROM batches WHERE agent_id = ", f);
	sql_string(f, agent_id);
	fprintf(f, " AND sequence = %" PRIu64, sequence);
	fclose(f);
	struct ep_http_body out = {0};
	int rc = ch_request(s, true, q, NULL, 0, &out, err, errlen);
	free(q);
	if (rc != 0)
		return -1;
	rc = out.data && strtoull(out.data, NULL, 10) > 0 ? 1 : 0;
	free(out.data);
	return rc;
}

/* " AND ..." for a filter, over a table with the label columns. */
static void filter_sql(FILE *f, const struct ep_store_filter *flt)
{
	if (flt->build_id) {
		fputs(" AND build_id = ", f);
		sql_string(f, flt->build_id);
	}
	if (flt->from_s)
		fprintf(f, " AND bucket >= %" PRId64, flt->from_s);
	if (flt->to_s)
		fprintf(f, " AND bucket < %" PRId64, flt->to_s);
	const struct {
		const char *col, *value;
	} labels[] = {{"container_id", flt->container_id},
		      {"pod", flt->pod},
		      {"namespace", flt->namespace_},
		      {"cgroup", flt->cgroup},
		      {"process", flt->process}};
	for (size_t i = 0; i < sizeof(labels) / sizeof(labels[0]); i++) {
		if (!labels[i].value)
			continue;
		fprintf(f, " AND %s = ", labels[i].col);
		sql_string(f, labels[i].value);
	}
	/* always one side: the continuous profile or one session */
	fputs(" AND session_id = ", f);
	sql_string(f, flt->session_id ? flt->session_id : "");
	fputs(" AND (agent_id, sequence) IN (SELECT agent_id, sequence FROM batches)", f);
}

/* Runs "SELECT ... FROM table FINAL WHERE 1 <filter> <tail>" and returns the
 * TabSeparated answer. */
static int query_rows(struct ch_store *s, const char *select, const char *table,
		      const struct ep_store_filter *flt, const char *tail, struct ep_http_body *out,
		      char *err, size_t errlen)
{
	char *q = NULL;
	size_t qlen = 0;
	FILE *f = open_memstream(&q, &qlen);
	if (!f) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	fprintf(f, "SELECT %s FROM %s FINAL WHERE 1", select, table);
	filter_sql(f, flt);
	fprintf(f, " %s FORMAT TabSeparated", tail);
	fclose(f);
	int rc = ch_request(s, true, q, NULL, 0, out, err, errlen);
	free(q);
	return rc;
}

/* Splits the next line of a TabSeparated answer into at most max fields,
 * unescaping in place. Returns the field count, 0 at the end. */
static int next_row(char **cursor, char **fields, int max)
{
	char *p = *cursor;
	if (!p || !*p)
		return 0;
	char *end = strchr(p, '\n');
	if (end)
		*end = '\0';
	*cursor = end ? end + 1 : p + strlen(p);
	int n = 0;
	char *field = p, *w = p;
	for (;; p++) {
		if (*p == '\\' && p[1]) {
			p++;
			*w++ = *p == 't' ? '\t' : *p == 'n' ? '\n' : *p == '0' ? '\0' : *p;
			continue;
		}
		if (*p == '\t' || *p == '\0') {
			bool last = *p == '\0';
			*w = '\0';
			if (n < max)
				fields[n++] = field;
			if (last)
				break;
			field = w = p + 1;
			continue;
		}
		*w++ = *p;
	}
	return n;
}

#define PUSH(array, n, item)                                                                       \
	do {                                                                                       \
		void *grown_ = realloc((array), ((n) + 1) * sizeof(*(array)));                     \
		if (!grown_)                                                                       \
			goto oom;                                                                  \
		(array) = grown_;                                                                  \
		(array)[(n)++] = (item);                                                           \
	} while (0)

static int add_paths(struct ch_store *s, Edgeprof__V1__BinaryInfo *b, char *err, size_t errlen)
{
	char *q = NULL;
	size_t qlen = 0;
	FILE *f = open_memstream(&q, &qlen);
	if (!f)
		goto oom;
	fputs("SELECT DISTINCT path FROM paths WHERE build_id = ", f);
	sql_string(f, b->build_id);
	fputs(" ORDER BY path FORMAT TabSeparated", f);
	fclose(f);
	struct ep_http_body out = {0};
	int rc = ch_request(s, true, q, NULL, 0, &out, err, errlen);
	free(q);
	if (rc != 0)
		return -1;
	char *cur = out.data, *fields[1];
	while (next_row(&cur, fields, 1) == 1) {
		char *p = strdup(fields[0]);
		if (!p) {
			free(out.data);
			goto oom;
		}
		void *grown = realloc(b->paths, (b->n_paths + 1) * sizeof(*b->paths));
		if (!grown) {
			free(p);
			free(out.data);
			goto oom;
		}
		b->paths = grown;
		b->paths[b->n_paths++] = p;
	}
	free(out.data);
	return 0;
oom:
	snprintf(err, errlen, "out of memory");
	return -1;
}

static Edgeprof__V1__BinaryList *ch_list(struct ep_store *base, const struct ep_store_filter *flt,
					 char *err, size_t errlen)
{
	struct ch_store *s = (struct ch_store *)base;
	Edgeprof__V1__BinaryList *list = malloc(sizeof(*list));
	if (!list) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	edgeprof__v1__binary_list__init(list);
	struct ep_http_body out = {0}, lab = {0};
	if (query_rows(s, "build_id, any(arch), sum(count), min(bucket), max(bucket)", "samples",
		       flt, "GROUP BY build_id ORDER BY build_id", &out, err, errlen) != 0 ||
	    query_rows(
		s, "DISTINCT build_id, container_id, pod, namespace, cgroup, process, session_id",
		"samples", flt,
		"ORDER BY build_id, container_id, pod, namespace, cgroup, process, session_id",
		&lab, err, errlen) != 0)
		goto fail;
	char *cur = out.data, *fields[7];
	while (next_row(&cur, fields, 5) == 5) {
		Edgeprof__V1__BinaryInfo *b = malloc(sizeof(*b));
		if (!b)
			goto oom;
		edgeprof__v1__binary_info__init(b);
		if (EP_PB_APPEND(list->binaries, list->n_binaries, b) != 0)
			goto oom;
		b->build_id = strdup(fields[0]);
		b->arch = strdup(fields[1]);
		if (!b->build_id || !b->arch)
			goto oom;
		b->samples = strtoull(fields[2], NULL, 10);
		b->first_seen_s = strtoll(fields[3], NULL, 10);
		b->last_seen_s = strtoll(fields[4], NULL, 10);
		if (add_paths(s, b, err, errlen) != 0)
			goto fail;
	}
	cur = lab.data;
	while (next_row(&cur, fields, 7) == 7) {
		for (size_t i = 0; i < list->n_binaries; i++) {
			Edgeprof__V1__BinaryInfo *b = list->binaries[i];
			if (strcmp(b->build_id, fields[0]) != 0)
				continue;
			Edgeprof__V1__Labels *l = malloc(sizeof(*l));
			if (!l)
				goto oom;
			edgeprof__v1__labels__init(l);
			if (EP_PB_APPEND(b->labels, b->n_labels, l) != 0)
				goto oom;
			l->container_id = strdup(fields[1]);
			l->pod = strdup(fields[2]);
			l->namespace_ = strdup(fields[3]);
			l->cgroup = strdup(fields[4]);
			l->process = strdup(fields[5]);
			l->session_id = strdup(fields[6]);
			if (!l->container_id || !l->pod || !l->namespace_ || !l->cgroup ||
			    !l->process || !l->session_id)
				goto oom;
		}
	}
	free(out.data);
	free(lab.data);
	return list;
oom:
	snprintf(err, errlen, "out of memory");
fail:
	free(out.data);
	free(lab.data);
	ep_store_free_list(list);
	return NULL;
}

static int metadata_rows(struct ch_store *s, const char *select, const char *table,
			 const char *build_id, const char *order, struct ep_http_body *out,
			 char *err, size_t errlen)
{
	char *q = NULL;
	size_t qlen = 0;
	FILE *f = open_memstream(&q, &qlen);
	if (!f) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	fprintf(f, "SELECT DISTINCT %s FROM %s WHERE build_id = ", select, table);
	sql_string(f, build_id);
	fprintf(f, " ORDER BY %s FORMAT TabSeparated", order);
	fclose(f);
	int rc = ch_request(s, true, q, NULL, 0, out, err, errlen);
	free(q);
	return rc;
}

static Edgeprof__V1__Profile *ch_profile(struct ep_store *base, const struct ep_store_filter *flt,
					 char *err, size_t errlen)
{
	struct ch_store *s = (struct ch_store *)base;
	struct ep_http_body out = {0};
	Edgeprof__V1__BinaryProfile *bp;
	Edgeprof__V1__Profile *p = ep_store_profile_start(base, flt, &bp, err, errlen);
	if (!p || !bp)
		return p;

	char *cur, *fields[6];
	if (query_rows(s, "from_addr, to_addr, flags, max(kind), sum(count), sum(mispredicted)",
		       "edges", flt, "GROUP BY from_addr, to_addr, flags", &out, err, errlen) != 0)
		goto fail;
	cur = out.data;
	while (next_row(&cur, fields, 6) == 6) {
		Edgeprof__V1__Edge *e = malloc(sizeof(*e));
		if (!e)
			goto oom;
		edgeprof__v1__edge__init(e);
		if (EP_PB_APPEND(bp->edges, bp->n_edges, e) != 0)
			goto oom;
		e->from = strtoull(fields[0], NULL, 10);
		e->to = strtoull(fields[1], NULL, 10);
		int flags = atoi(fields[2]);
		e->taken = flags & 1;
		e->from_external = (flags & 2) != 0;
		e->to_external = (flags & 4) != 0;
		e->kind = (Edgeprof__V1__BranchKind)atoi(fields[3]);
		e->count = strtoull(fields[4], NULL, 10);
		e->mispredicted = strtoull(fields[5], NULL, 10);
	}
	free(out.data);
	out.data = NULL;
	if (bp->n_edges > 1)
		qsort(bp->edges, bp->n_edges, sizeof(*bp->edges), ep_edge_cmp);

	if (query_rows(s, "start_addr, end_addr, sum(count)", "ranges", flt,
		       "GROUP BY start_addr, end_addr", &out, err, errlen) != 0)
		goto fail;
	cur = out.data;
	while (next_row(&cur, fields, 3) == 3) {
		Edgeprof__V1__Range *r = malloc(sizeof(*r));
		if (!r)
			goto oom;
		edgeprof__v1__range__init(r);
		if (EP_PB_APPEND(bp->ranges, bp->n_ranges, r) != 0)
			goto oom;
		r->start = strtoull(fields[0], NULL, 10);
		r->end = strtoull(fields[1], NULL, 10);
		r->count = strtoull(fields[2], NULL, 10);
	}
	free(out.data);
	out.data = NULL;
	if (bp->n_ranges > 1)
		qsort(bp->ranges, bp->n_ranges, sizeof(*bp->ranges), ep_range_cmp);

	if (query_rows(s, "ip, sum(count)", "ips", flt, "GROUP BY ip", &out, err, errlen) != 0)
		goto fail;
	cur = out.data;
	while (next_row(&cur, fields, 2) == 2) {
		Edgeprof__V1__IpCount *c = malloc(sizeof(*c));
		if (!c)
			goto oom;
		edgeprof__v1__ip_count__init(c);
		if (EP_PB_APPEND(bp->ips, bp->n_ips, c) != 0)
			goto oom;
		c->ip = strtoull(fields[0], NULL, 10);
		c->count = strtoull(fields[1], NULL, 10);
	}
	free(out.data);
	out.data = NULL;
	if (bp->n_ips > 1)
		qsort(bp->ips, bp->n_ips, sizeof(*bp->ips), ep_ip_cmp);

	if (metadata_rows(s, "start_addr, name, size", "functions", flt->build_id,
			  "start_addr, name", &out, err, errlen) != 0)
		goto fail;
	cur = out.data;
	while (next_row(&cur, fields, 3) == 3) {
		Edgeprof__V1__Function *fn = malloc(sizeof(*fn));
		if (!fn)
			goto oom;
		edgeprof__v1__function__init(fn);
		if (EP_PB_APPEND(bp->functions, bp->n_functions, fn) != 0)
			goto oom;
		fn->start = strtoull(fields[0], NULL, 10);
		fn->size = strtoull(fields[2], NULL, 10);
		if (!(fn->name = strdup(fields[1])))
			goto oom;
	}
	free(out.data);
	out.data = NULL;
	if (metadata_rows(s, "vaddr, file_offset, size", "segments", flt->build_id, "vaddr", &out,
			  err, errlen) != 0)
		goto fail;
	cur = out.data;
	while (next_row(&cur, fields, 3) == 3) {
		Edgeprof__V1__LoadSegment *g = malloc(sizeof(*g));
		if (!g)
			goto oom;
		edgeprof__v1__load_segment__init(g);
		if (EP_PB_APPEND(bp->segments, bp->n_segments, g) != 0)
			goto oom;
		g->vaddr = strtoull(fields[0], NULL, 10);
		g->offset = strtoull(fields[1], NULL, 10);
		g->size = strtoull(fields[2], NULL, 10);
	}
	free(out.data);
	return p;
oom:
	snprintf(err, errlen, "out of memory");
fail:
	free(out.data);
	protobuf_c_message_free_unpacked(&p->base, NULL);
	return NULL;
}

static int ch_session_put(struct ep_store *base, const Edgeprof__V1__Session *session,
			  const uint8_t *record, size_t len, char *err, size_t errlen)
{
	struct ch_store *s = (struct ch_store *)base;
	char *row = NULL;
	size_t row_len = 0;
	FILE *f = open_memstream(&row, &row_len);
	if (!f) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	tsv_string(f, session->id);
	fprintf(f, "\t%d\t%" PRId64 "\t%" PRId64 "\t%" PRIu64 "\t", (int)session->state,
		session->created_s, session->ended_s, session->updated_ns);
	for (size_t i = 0; i < len; i++)
		fprintf(f, "%02x", record[i]);
	fputc('\n', f);
	if (fclose(f) != 0 || !row) {
		free(row);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	/* an older update is written too; FINAL keeps the highest updated_ns */
	int rc =
	    ch_request(s, true,
		       "INSERT INTO sessions (id, state, created_s, ended_s, updated_ns, record)"
		       " FORMAT TabSeparated",
		       row, row_len, NULL, err, errlen);
	free(row);
	return rc;
}

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* hex -> bytes in place; the byte count, or -1 when it is not hex */
static long unhex_in_place(char *hex)
{
	size_t n = strlen(hex);
	if (n % 2)
		return -1;
	for (size_t i = 0; i < n / 2; i++) {
		int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -1;
		hex[i] = (char)(hi << 4 | lo);
	}
	return (long)(n / 2);
}

/* Calls add with each record (first column, hex) of the answer to q. */
static int session_records(struct ch_store *s, const char *q,
			   int (*add)(void *ctx, const uint8_t *record, size_t len), void *ctx,
			   char *err, size_t errlen)
{
	struct ep_http_body out = {0};
	if (ch_request(s, true, q, NULL, 0, &out, err, errlen) != 0)
		return -1;
	char *cur = out.data, *fields[1];
	int rc = 0;
	while (rc == 0 && next_row(&cur, fields, 1) == 1) {
		long n = unhex_in_place(fields[0]);
		if (n < 0) {
			snprintf(err, errlen, "clickhouse %s: a session record is not hex",
				 s->base_url);
			rc = -1;
		} else if (add(ctx, (const uint8_t *)fields[0], (size_t)n) != 0) {
			snprintf(err, errlen, "out of memory");
			rc = -1;
		}
	}
	free(out.data);
	return rc;
}

struct one_record {
	uint8_t *record;
	size_t len;
	bool found;
};

static int keep_record(void *ctx, const uint8_t *record, size_t len)
{
	struct one_record *o = ctx;
	free(o->record);
	o->record = malloc(len ? len : 1);
	if (!o->record)
		return -1;
	memcpy(o->record, record, len);
	o->len = len;
	o->found = true;
	return 0;
}

static int ch_session_get(struct ep_store *base, const char *id, uint8_t **record, size_t *len,
			  char *err, size_t errlen)
{
	struct ch_store *s = (struct ch_store *)base;
	char *q = NULL;
	size_t qlen = 0;
	FILE *f = open_memstream(&q, &qlen);
	if (!f) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	fputs("SELECT record FROM sessions FINAL WHERE id = ", f);
	sql_string(f, id);
	fputs(" FORMAT TabSeparated", f);
	fclose(f);
	struct one_record o = {0};
	int rc = session_records(s, q, keep_record, &o, err, errlen);
	free(q);
	if (rc != 0 || !o.found) {
		free(o.record);
		return rc;
	}
	*record = o.record;
	*len = o.len;
	return 1;
}

static int ch_sessions_unfinished(struct ep_store *base,
				  int (*add)(void *ctx, const uint8_t *record, size_t len),
				  void *ctx, char *err, size_t errlen)
{
	/* the filter on the non-key state stays outside FINAL (see ch_prune) */
	return session_records((struct ch_store *)base,
			       "SELECT record FROM (SELECT id, state, created_s, record FROM"
			       " sessions FINAL) WHERE state IN (0, 1) ORDER BY created_s, id"
			       " FORMAT TabSeparated",
			       add, ctx, err, errlen);
}

static void ch_close(struct ep_store *base)
{
	struct ch_store *s = (struct ch_store *)base;
	if (s->curl)
		curl_easy_cleanup(s->curl);
	free(s->base_url);
	free(s->database);
	free(s);
}

static const struct ep_store_ops clickhouse_ops = {
    .kind = "clickhouse",
    .keeps_batches = true,
    .close = ch_close,
    .has_batch = ch_has_batch,
    .write = ch_write,
    .prune = ch_prune,
    .list_binaries = ch_list,
    .profile = ch_profile,
    .session_put = ch_session_put,
    .session_get = ch_session_get,
    .sessions_unfinished = ch_sessions_unfinished,
};

/* Count tables from before sessions: session_id added at the end of the
 * columns and of the sorting key (see count_tables). Several collectors may
 * start at once: an ALTER that fails because another one added the column
 * first is fine. */
static int add_session_columns(struct ch_store *s, char *err, size_t errlen)
{
	for (size_t t = 0; t < sizeof(count_tables) / sizeof(count_tables[0]); t++) {
		char q[512];
		snprintf(q, sizeof(q),
			 "SELECT sorting_key, (SELECT count() FROM system.columns WHERE"
			 " database = '%s' AND table = '%s' AND name = 'session_id') FROM"
			 " system.tables WHERE database = '%s' AND name = '%s' FORMAT TabSeparated",
			 s->database, count_tables[t], s->database, count_tables[t]);
		struct ep_http_body out = {0};
		if (ch_request(s, false, q, NULL, 0, &out, err, errlen) != 0)
			return -1;
		char *cur = out.data, *fields[2];
		int rc = 0;
		if (next_row(&cur, fields, 2) == 2 && strcmp(fields[1], "0") == 0) {
			char *alter = NULL;
			if (asprintf(&alter,
				     "ALTER TABLE %s ADD COLUMN session_id String,"
				     " MODIFY ORDER BY (%s, session_id)",
				     count_tables[t], fields[0]) < 0) {
				snprintf(err, errlen, "out of memory");
				rc = -1;
			} else if (ch_request(s, true, alter, NULL, 0, NULL, err, errlen) != 0) {
				char again[512];
				snprintf(again, sizeof(again),
					 "SELECT count() FROM system.columns WHERE database = '%s'"
					 " AND table = '%s' AND name = 'session_id'",
					 s->database, count_tables[t]);
				struct ep_http_body n = {0};
				char ignored[64];
				if (ch_request(s, false, again, NULL, 0, &n, ignored,
					       sizeof(ignored)) != 0 ||
				    !n.data || strtoul(n.data, NULL, 10) == 0)
					rc = -1; /* err says why the ALTER failed */
				free(n.data);
			}
			free(alter);
		}
		free(out.data);
		if (rc != 0)
			return -1;
	}
	return 0;
}

static bool valid_identifier(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '_'))
			return false;
	return true;
}

struct ep_store *ep_store_clickhouse_open(const char *location, char *err, size_t errlen)
{
	if (strncmp(location, "http://", 7) != 0 && strncmp(location, "https://", 8) != 0) {
		snprintf(err, errlen, "clickhouse '%s': expected http://HOST:PORT[/?database=DB]",
			 location);
		return NULL;
	}
	struct ch_store *s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	s->base.ops = &clickhouse_ops;
	const char *q = strchr(location, '?');
	const char *db = q ? strstr(q, "database=") : NULL;
	size_t base_len = q ? (size_t)(q - location) : strlen(location);
	while (base_len && location[base_len - 1] == '/')
		base_len--;
	s->base_url = strndup(location, base_len);
	s->database = db ? strndup(db + 9, strcspn(db + 9, "&")) : strdup("edgeprof");
	s->curl = curl_easy_init();
	if (!s->base_url || !s->database || !s->curl) {
		snprintf(err, errlen, "out of memory");
		ch_close(&s->base);
		return NULL;
	}
	if (!valid_identifier(s->database)) {
		snprintf(err, errlen, "clickhouse '%s': database name '%s' must be [A-Za-z0-9_]+",
			 location, s->database);
		ch_close(&s->base);
		return NULL;
	}
	curl_easy_setopt(s->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(s->curl, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
	curl_easy_setopt(s->curl, CURLOPT_TIMEOUT_MS, 120000L);
	char create[256];
	snprintf(create, sizeof(create), "CREATE DATABASE IF NOT EXISTS %s", s->database);
	if (ch_request(s, false, create, NULL, 0, NULL, err, errlen) != 0) {
		ch_close(&s->base);
		return NULL;
	}
	for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
		if (ch_request(s, true, tables[i], NULL, 0, NULL, err, errlen) != 0) {
			ch_close(&s->base);
			return NULL;
		}
	}
	if (add_session_columns(s, err, errlen) != 0) {
		ch_close(&s->base);
		return NULL;
	}
	return &s->base;
}
