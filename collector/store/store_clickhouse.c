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
 *
 * Sharded (cluster=NAME in the location): every shard of the cluster (from
 * the server's system.clusters) holds the same local tables, and the server
 * named in the location holds Distributed tables over them (TABLE_all),
 * through which every read goes. The collector routes writes itself, by a
 * hash of the row's key (build-id for counts and metadata, so one binary's
 * rows and all their resends meet on one shard, and FINAL on each shard
 * still sees every version of a row; a session's id; a node's name). The
 * Distributed tables take no sharding key, so nothing can insert through
 * them and land elsewhere. The rule "a batch counts once its row is in
 * batches" holds per shard: the batch's row is written to every shard,
 * last, reads check it on the shard that holds the rows (a non-GLOBAL IN
 * on the local table), and a batch is known (a resend answered "already
 * stored") only when every shard has its row.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/store/clickhouse_query.h"
#include "collector/store/store_backend.h"
#include "common/profile/model.h"

struct ch_store {
	struct ep_store base;
	struct ch_conn conn; /* reads; unsharded, everything */
	/* writes, schema and retention: &conn when unsharded */
	struct ch_conn *shards;
	size_t nshards;
	char *cluster;	 /* NULL when unsharded */
	const char *all; /* what reads append to a table's name: "" or "_all" */
};

/* The shard that holds key's rows: FNV-1a, the same in every collector. */
static struct ch_conn *shard_of(struct ch_store *s, const char *key)
{
	uint64_t h = 1469598103934665603ULL;
	for (const unsigned char *p = (const unsigned char *)(key ? key : ""); *p; p++)
		h = (h ^ *p) * 1099511628211ULL;
	return &s->shards[h % s->nshards];
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
    " end_addr UInt64, count UInt64, agent_id String, sequence UInt64, session_id String,"
    " cycles UInt64, cycled_insns UInt64, ns UInt64, ns_insns UInt64)"
    " ENGINE = ReplacingMergeTree() PARTITION BY intDiv(bucket, 604800) ORDER BY (build_id,"
    " bucket, container_id, pod, namespace, cgroup, process, start_addr, end_addr, agent_id,"
    " sequence, session_id)",
    "CREATE TABLE IF NOT EXISTS ips (build_id String, bucket Int64, container_id String,"
    " pod String, namespace String, cgroup String, process String, ip UInt64, count UInt64,"
    " agent_id String, sequence UInt64, session_id String, cycles UInt64, ns UInt64)"
    " ENGINE = ReplacingMergeTree()"
    " PARTITION BY intDiv(bucket, 604800) ORDER BY (build_id, bucket, container_id, pod,"
    " namespace, cgroup, process, ip, agent_id, sequence, session_id)",
    "CREATE TABLE IF NOT EXISTS paths (build_id String, path String)"
    " ENGINE = ReplacingMergeTree() ORDER BY (build_id, path)",
    "CREATE TABLE IF NOT EXISTS functions (build_id String, start_addr UInt64, name String,"
    " size UInt64, local_index UInt32) ENGINE = ReplacingMergeTree() ORDER BY (build_id, "
    "start_addr, name)",
    "CREATE TABLE IF NOT EXISTS segments (build_id String, vaddr UInt64, file_offset UInt64,"
    " size UInt64) ENGINE = ReplacingMergeTree() ORDER BY (build_id, vaddr, file_offset, size)",
    /* record: the serialised Session, hex (TabSeparated has no bytes type);
     * the newest updated_ns wins, read FINAL */
    "CREATE TABLE IF NOT EXISTS sessions (id String, state UInt8, created_s Int64,"
    " ended_s Int64, updated_ns UInt64, record String)"
    " ENGINE = ReplacingMergeTree(updated_ns) ORDER BY id",
    /* nodes (collector.proto Node, hex, its sums zeroed): every replica
     * writes what its agents' batches said, the newest seen_ns wins */
    "CREATE TABLE IF NOT EXISTS nodes (name String, seen_ns UInt64, record String)"
    " ENGINE = ReplacingMergeTree(seen_ns) ORDER BY name",
    /* their sums: each replica adds what it received since its last
     * write; weekly partitions dropped with the counts' */
    "CREATE TABLE IF NOT EXISTS node_stats (name String, week Int64, samples UInt64,"
    " samples_with_branches UInt64, lost UInt64) ENGINE = SummingMergeTree((samples,"
    " samples_with_branches, lost)) PARTITION BY week ORDER BY name",
    /* binaries' images for the UI (collector/binaries), hex like session
     * records; keep = 2^64 - 1 - uploaded_s, so FINAL keeps the first of
     * each trust (ep_image_trust; 0 in rows from before it: provisional),
     * and reads take the most trusted */
    "CREATE TABLE IF NOT EXISTS binary_images (build_id String, uploaded_s Int64, keep UInt64,"
    " image String, trust UInt8) ENGINE = ReplacingMergeTree(keep) ORDER BY (build_id, trust)",
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
    "INSERT INTO ranges (build_id, bucket, " LABEL_COLS ", start_addr, end_addr, count, cycles,"
    " cycled_insns, ns, ns_insns, " BATCH_COLS ") FORMAT TabSeparated",
    "INSERT INTO ips (build_id, bucket, " LABEL_COLS ", ip, count, cycles, ns, " BATCH_COLS
    ") FORMAT TabSeparated",
    "INSERT INTO paths FORMAT TabSeparated",
    "INSERT INTO functions FORMAT TabSeparated",
    "INSERT INTO segments FORMAT TabSeparated",
};

/* One row's key head in a count table: build-id, bucket, the labels. */
static void count_key(FILE *f, const char *build_id, int64_t bucket_s,
		      const Edgeprof__V1__Labels *l)
{
	ch_tsv_string(f, build_id);
	fprintf(f, "\t%" PRId64 "\t", bucket_s);
	const char *v[5] = {l ? l->container_id : "", l ? l->pod : "", l ? l->namespace_ : "",
			    l ? l->cgroup : "", l ? l->process : ""};
	for (int i = 0; i < 5; i++) {
		ch_tsv_string(f, v[i]);
		fputc('\t', f);
	}
}

/* A slice's count rows; tail ends each: its batch and session, newline. */
static void count_rows(FILE *const f[NT], const Edgeprof__V1__BinaryProfile *bp, int64_t bucket_s,
		       const Edgeprof__V1__Labels *l, bool ns, const char *tail)
{
	if (bp->samples) {
		/* samples carry the arch between build-id and bucket */
		ch_tsv_string(f[T_SAMPLES], bp->build_id);
		fputc('\t', f[T_SAMPLES]);
		count_key(f[T_SAMPLES], bp->arch, bucket_s, l);
		fprintf(f[T_SAMPLES], "%" PRIu64 "\t%s", bp->samples, tail);
	}
	for (size_t j = 0; j < bp->n_edges; j++) {
		const Edgeprof__V1__Edge *e = bp->edges[j];
		count_key(f[T_EDGES], bp->build_id, bucket_s, l);
		fprintf(f[T_EDGES],
			"%" PRIu64 "\t%" PRIu64 "\t%d\t%d\t%" PRIu64 "\t%" PRIu64 "\t%s", e->from,
			e->to,
			(e->taken ? 1 : 0) | (e->from_external ? 2 : 0) | (e->to_external ? 4 : 0),
			(int)e->kind, e->count, e->mispredicted, tail);
	}
	for (size_t j = 0; j < bp->n_ranges; j++) {
		count_key(f[T_RANGES], bp->build_id, bucket_s, l);
		const Edgeprof__V1__Range *r = bp->ranges[j];
		/* one pair of columns per unit (ep_store_slice) */
		fprintf(f[T_RANGES], "%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t", r->start, r->end,
			r->count);
		fprintf(f[T_RANGES],
			ns ? "0\t0\t%" PRIu64 "\t%" PRIu64 "\t%s"
			   : "%" PRIu64 "\t%" PRIu64 "\t0\t0\t%s",
			r->cycles, r->cycled_instructions, tail);
	}
	for (size_t j = 0; j < bp->n_ips; j++) {
		count_key(f[T_IPS], bp->build_id, bucket_s, l);
		fprintf(f[T_IPS],
			ns ? "%" PRIu64 "\t%" PRIu64 "\t0\t%" PRIu64 "\t%s"
			   : "%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t0\t%s",
			bp->ips[j]->ip, bp->ips[j]->count, bp->ips[j]->cycles, tail);
	}
}

/* A slice's metadata rows: paths, functions, segments. */
static void metadata_rows(FILE *const f[NT], const Edgeprof__V1__BinaryProfile *bp)
{
	for (size_t j = 0; j < bp->n_paths; j++) {
		ch_tsv_string(f[T_PATHS], bp->build_id);
		fputc('\t', f[T_PATHS]);
		ch_tsv_string(f[T_PATHS], bp->paths[j]);
		fputc('\n', f[T_PATHS]);
	}
	for (size_t j = 0; j < bp->n_functions; j++) {
		ch_tsv_string(f[T_FUNCTIONS], bp->build_id);
		fprintf(f[T_FUNCTIONS], "\t%" PRIu64 "\t", bp->functions[j]->start);
		ch_tsv_string(f[T_FUNCTIONS], bp->functions[j]->name);
		fprintf(f[T_FUNCTIONS], "\t%" PRIu64 "\t%" PRIu32 "\n", bp->functions[j]->size,
			bp->functions[j]->local_index);
	}
	for (size_t j = 0; j < bp->n_segments; j++) {
		ch_tsv_string(f[T_SEGMENTS], bp->build_id);
		fprintf(f[T_SEGMENTS], "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\n",
			bp->segments[j]->vaddr, bp->segments[j]->offset, bp->segments[j]->size);
	}
}

/* Writes a slice's rows into each table's rows. */
static int slice_rows(struct ch_store *s, struct ch_text (*shard_rows)[NT],
		      const struct ep_store_commit *c, const struct ep_store_slice *sl, char *err,
		      size_t errlen)
{
	struct ch_text *rows = shard_rows[shard_of(s, sl->delta->profile->build_id) - s->shards];
	if (sl->batch < 0 || (size_t)sl->batch >= c->nbatches) {
		snprintf(err, errlen, "clickhouse store: a slice without its batch");
		return -1;
	}
	const struct ep_store_batch_id *b = &c->batches[sl->batch];
	const Edgeprof__V1__Labels *l = sl->delta->labels;
	/* the row's key tail: which batch it came from, and the session */
	struct ch_text tail;
	if (ch_text_open(&tail, err, errlen) != 0)
		return -1;
	ch_tsv_string(tail.f, b->agent_id);
	fprintf(tail.f, "\t%" PRIu64 "\t", b->sequence);
	ch_tsv_string(tail.f, l ? l->session_id : "");
	fputc('\n', tail.f);
	int rc = ch_text_close(&tail, err, errlen);
	if (rc == 0) {
		FILE *f[NT];
		for (int t = 0; t < NT; t++)
			f[t] = rows[t].f;
		count_rows(f, sl->delta->profile, sl->bucket_s, l, sl->cycles_ns, tail.data);
		metadata_rows(f, sl->delta->profile);
	}
	ch_text_free(&tail);
	return rc;
}

/* The batches' rows, on every shard. */
static int insert_batches(struct ch_store *s, const struct ep_store_commit *c, char *err,
			  size_t errlen)
{
	for (size_t k = 0; k < s->nshards; k++) {
		struct ch_text rows;
		if (ch_text_open(&rows, err, errlen) != 0)
			return -1;
		for (size_t i = 0; i < c->nbatches; i++) {
			ch_tsv_string(rows.f, c->batches[i].agent_id);
			fprintf(rows.f, "\t%" PRIu64 "\t", c->batches[i].sequence);
			ch_tsv_string(rows.f, c->batches[i].node);
			fprintf(rows.f, "\t%" PRId64 "\n", c->batches[i].received_s);
		}
		if (ch_insert(&s->shards[k], "INSERT INTO batches FORMAT TabSeparated", &rows, err,
			      errlen) != 0)
			return -1;
	}
	return 0;
}

static int ch_write(struct ep_store *base, const struct ep_store_commit *c, char *err,
		    size_t errlen)
{
	struct ch_store *s = (struct ch_store *)base;
	struct ch_text(*rows)[NT] = calloc(s->nshards, sizeof(*rows));
	if (!rows) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	int rc = 0;
	for (size_t k = 0; k < s->nshards; k++)
		for (int t = 0; t < NT && rc == 0; t++)
			rc = ch_text_open(&rows[k][t], err, errlen);
	for (size_t i = 0; i < c->nslices && rc == 0; i++)
		rc = slice_rows(s, rows, c, &c->slices[i], err, errlen);
	/* metadata first, counts next, the batches that make counts visible
	 * last (on every shard, after every shard's counts) */
	static const int order[NT] = {T_PATHS, T_FUNCTIONS, T_SEGMENTS, T_SAMPLES,
				      T_EDGES, T_RANGES,    T_IPS};
	for (size_t k = 0; k < s->nshards; k++)
		for (int i = 0; i < NT && rc == 0; i++)
			rc = ch_insert(&s->shards[k], insert_sql[order[i]], &rows[k][order[i]], err,
				       errlen);
	if (rc == 0)
		rc = insert_batches(s, c, err, errlen);
	for (size_t k = 0; k < s->nshards; k++)
		for (int t = 0; t < NT; t++)
			ch_text_free(&rows[k][t]);
	free(rows);
	return rc;
}

/* Finished sessions that ended before the cut (one that failed before it
 * started has no end: its creation counts). A mutation sees every version
 * of a row, so the ids are chosen on the newest versions (FINAL) and then
 * every version of them goes. The ids are chosen here and listed in the
 * mutation because 18.16 cannot run a mutation whose IN subquery reads a
 * subquery ("There is no query"), and the filter on the non-key state must
 * stay outside FINAL (a PREWHERE under FINAL would see old versions). */
static int prune_sessions(struct ch_store *s, int64_t before_s, char *err, size_t errlen)
{
	struct ep_http_body out = {0};
	if (ch_runf(&s->conn, CH_DATABASE, &out, err, errlen,
		    "SELECT id FROM (SELECT id, state, created_s, ended_s FROM sessions%s FINAL)"
		    " WHERE state IN (%d, %d) AND if(ended_s != 0, ended_s, created_s) < %lld"
		    " FORMAT TabSeparated",
		    s->all, EDGEPROF__V1__SESSION_STATE__SESSION_DONE,
		    EDGEPROF__V1__SESSION_STATE__SESSION_FAILED, (long long)before_s) != 0)
		return -1;
	char *cur = out.data, *fields[1];
	int rc = 0;
	bool more = ch_next_row(&cur, fields, 1) == 1;
	while (rc == 0 && more) {
		/* in pieces, well under max_query_size (256 KiB) */
		struct ch_text del;
		if ((rc = ch_text_open(&del, err, errlen)) != 0)
			break;
		fputs("ALTER TABLE sessions DELETE WHERE id IN (", del.f);
		for (int n = 0; more && ftell(del.f) < 64 * 1024; n++) {
			if (n)
				fputs(", ", del.f);
			ch_sql_string(del.f, fields[0]);
			more = ch_next_row(&cur, fields, 1) == 1;
		}
		fputc(')', del.f);
		if ((rc = ch_text_close(&del, err, errlen)) != 0) {
			ch_text_free(&del);
			break;
		}
		/* on every shard: the ids are not sorted by shard */
		for (size_t k = 0; k < s->nshards && rc == 0; k++)
			rc = ch_runf(&s->shards[k], CH_DATABASE, NULL, err, errlen, "%s", del.data);
		ch_text_free(&del);
	}
	free(out.data);
	return rc;
}

/* Drops table's weekly partitions that ended before the cut, on one shard. */
static int drop_weeks(struct ch_conn *shard, const char *table, int64_t before_s, char *err,
		      size_t errlen)
{
	struct ep_http_body out = {0};
	if (ch_runf(shard, CH_SERVER, &out, err, errlen,
		    "SELECT DISTINCT partition FROM system.parts WHERE database = '%s' AND "
		    "table = '%s' AND active FORMAT TabSeparated",
		    shard->database, table) != 0)
		return -1;
	char *cur = out.data, *fields[1];
	int rc = 0;
	while (rc == 0 && ch_next_row(&cur, fields, 1) == 1) {
		long long week = strtoll(fields[0], NULL, 10);
		if ((week + 1) * 604800LL > before_s)
			continue;
		rc = ch_runf(shard, CH_DATABASE, NULL, err, errlen,
			     "ALTER TABLE %s DROP PARTITION %lld", table, week);
	}
	free(out.data);
	return rc;
}

/* Images stored before the cut whose build-id has no counts left on this
 * shard (which holds all of a build-id's rows): looked up a page of build-ids
 * at a time, so the answer and the mutation's text stay small whatever the
 * number of images, and deleted by a mutation (in the background). Samples
 * say whether a binary has counts (ingest refuses edges, ranges and IPs
 * beyond what its samples allow). */
#define PRUNE_PAGE 500
static int prune_images(struct ch_conn *shard, int64_t before_s, char *err, size_t errlen)
{
	char *last = strdup("");
	int rc = last ? 0 : -1, n = PRUNE_PAGE;
	if (rc)
		snprintf(err, errlen, "out of memory");
	while (rc == 0 && n == PRUNE_PAGE) {
		struct ch_text q;
		if (ch_text_open(&q, err, errlen) != 0) {
			rc = -1;
			break;
		}
		fprintf(q.f,
			"SELECT build_id FROM binary_images WHERE uploaded_s < %" PRId64
			" AND build_id > ",
			before_s);
		ch_sql_string(q.f, last);
		fprintf(q.f,
			" AND build_id NOT IN (SELECT build_id FROM samples) GROUP BY build_id"
			" ORDER BY build_id LIMIT %d FORMAT TabSeparated",
			PRUNE_PAGE);
		struct ep_http_body out = {0};
		if (ch_run(shard, CH_DATABASE, &q, &out, err, errlen) != 0) {
			rc = -1;
			break;
		}
		struct ch_text del;
		if (ch_text_open(&del, err, errlen) != 0) {
			free(out.data);
			rc = -1;
			break;
		}
		fprintf(del.f,
			"ALTER TABLE binary_images DELETE WHERE uploaded_s < %" PRId64
			" AND build_id IN (",
			before_s);
		char *cur = out.data, *f[1];
		for (n = 0; ch_next_row(&cur, f, 1) == 1; n++) {
			fputs(n ? ", " : "", del.f);
			ch_sql_string(del.f, f[0]);
			free(last);
			if (!(last = strdup(f[0]))) {
				snprintf(err, errlen, "out of memory");
				rc = -1;
				break;
			}
		}
		fputc(')', del.f);
		free(out.data);
		if (rc == 0 && n)
			rc = ch_run(shard, CH_DATABASE, &del, NULL, err, errlen);
		else
			ch_text_free(&del);
	}
	free(last);
	return rc;
}

/* Counts live in weekly partitions (intDiv(bucket, 604800)): whole weeks
 * that ended before the cut are dropped, which ClickHouse does at once;
 * nodes' sums too. Batch ids and nodes' old records are deleted by
 * mutations (in the background). Each shard keeps its own retention, the
 * same cut on all. */
static int ch_prune(struct ep_store *base, int64_t before_s, char *err, size_t errlen)
{
	struct ch_store *s = (struct ch_store *)base;
	for (size_t k = 0; k < s->nshards; k++) {
		struct ch_conn *shard = &s->shards[k];
		for (size_t t = 0; t < sizeof(count_tables) / sizeof(count_tables[0]); t++)
			if (drop_weeks(shard, count_tables[t], before_s, err, errlen) != 0)
				return -1;
		if (drop_weeks(shard, "node_stats", before_s, err, errlen) != 0)
			return -1;
		if (ch_runf(shard, CH_DATABASE, NULL, err, errlen,
			    "ALTER TABLE batches DELETE WHERE received < %lld",
			    (long long)before_s) != 0)
			return -1;
		/* every version older than the cut: a node seen since keeps its newest */
		if (ch_runf(shard, CH_DATABASE, NULL, err, errlen,
			    "ALTER TABLE nodes DELETE WHERE seen_ns < %llu",
			    (unsigned long long)(before_s > 0 ? before_s : 0) * 1000000000ULL) != 0)
			return -1;
		if (prune_images(shard, before_s, err, errlen) != 0)
			return -1;
	}
	return prune_sessions(s, before_s, err, errlen);
}

/* Stored: its row is on every shard (written last, to each in turn). */
static int ch_has_batch(struct ep_store *base, const char *agent_id, uint64_t sequence, char *err,
			size_t errlen)
{
	struct ch_store *s = (struct ch_store *)base;
	int rc = 1;
	for (size_t k = 0; k < s->nshards && rc == 1; k++) {
		struct ch_text q;
		if (ch_text_open(&q, err, errlen) != 0)
			return -1;
		fputs("SELECT count() FROM batches WHERE agent_id = ", q.f);
		ch_sql_string(q.f, agent_id);
		fprintf(q.f, " AND sequence = %" PRIu64, sequence);
		struct ep_http_body out = {0};
		if (ch_run(&s->shards[k], CH_DATABASE, &q, &out, err, errlen) != 0)
			return -1;
		rc = out.data && strtoull(out.data, NULL, 10) > 0 ? 1 : 0;
		free(out.data);
	}
	return rc;
}

/* Which of n batch ids `batches` holds, in one query: the ingest asks once
 * per group commit rather than once per batch under its lock, which at
 * hundreds of agents was a round trip per batch, one at a time. Agent ids
 * come back hex, so no agent id can break the answer's lines. */
static int known_on(struct ch_conn *shard, const struct ep_store_batch_id *ids, size_t n,
		    bool *known, char *err, size_t errlen)
{
	for (size_t i = 0; i < n; i++)
		known[i] = false;
	if (!n)
		return 0;
	struct ch_text q;
	if (ch_text_open(&q, err, errlen) != 0)
		return -1;
	fputs(
	    "SELECT DISTINCT hex(agent_id), sequence FROM batches WHERE (agent_id, sequence) IN (",
	    q.f);
	for (size_t i = 0; i < n; i++) {
		fputs(i ? ", (" : "(", q.f);
		ch_sql_string(q.f, ids[i].agent_id);
		fprintf(q.f, ", %" PRIu64 ")", ids[i].sequence);
	}
	fputs(")", q.f);
	struct ep_http_body out = {0};
	if (ch_run(shard, CH_DATABASE, &q, &out, err, errlen) != 0)
		return -1;
	int found = 0;
	for (char *line = out.data, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		char *tab = strchr(line, '\t');
		if (!tab)
			continue;
		*tab = '\0';
		uint64_t seq = strtoull(tab + 1, NULL, 10);
		for (size_t i = 0; i < n; i++) {
			const char *a = ids[i].agent_id;
			size_t len = strlen(a);
			if (known[i] || ids[i].sequence != seq || strlen(line) != 2 * len)
				continue;
			bool same = true;
			for (size_t k = 0; k < len && same; k++) {
				char two[3];
				snprintf(two, sizeof(two), "%02X", (unsigned char)a[k]);
				same = line[2 * k] == two[0] && line[2 * k + 1] == two[1];
			}
			if (same) {
				known[i] = true;
				found++;
			}
		}
	}
	free(out.data);
	return found;
}

/* Known: on every shard (see ch_has_batch). */
static int ch_known_batches(struct ep_store *base, const struct ep_store_batch_id *ids, size_t n,
			    bool *known, char *err, size_t errlen)
{
	struct ch_store *s = (struct ch_store *)base;
	int found = known_on(&s->shards[0], ids, n, known, err, errlen);
	if (found <= 0 || s->nshards == 1)
		return found;
	bool *here = calloc(n, sizeof(*here));
	if (!here) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (size_t k = 1; k < s->nshards && found > 0; k++) {
		if (known_on(&s->shards[k], ids, n, here, err, errlen) < 0) {
			found = -1;
			break;
		}
		found = 0;
		for (size_t i = 0; i < n; i++) {
			known[i] = known[i] && here[i];
			found += known[i];
		}
	}
	free(here);
	if (found < 0)
		for (size_t i = 0; i < n; i++)
			known[i] = false;
	return found;
}

/* " AND ..." for a filter, over a table with the label columns. The batch
 * check names the local table in its database: through a Distributed
 * table each shard runs it on its own batches. */
static void filter_sql(FILE *f, const char *database, const struct ep_store_filter *flt)
{
	if (flt->build_id) {
		fputs(" AND build_id = ", f);
		ch_sql_string(f, flt->build_id);
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
		fprintf(f, flt->prefix ? " AND startsWith(%s, " : " AND %s = ", labels[i].col);
		ch_sql_string(f, labels[i].value);
		fputs(flt->prefix ? ")" : "", f);
	}
	/* always one side: the continuous profile or one session */
	fputs(" AND session_id = ", f);
	ch_sql_string(f, flt->session_id ? flt->session_id : "");
	fprintf(f, " AND (agent_id, sequence) IN (SELECT agent_id, sequence FROM %s.batches)",
		database);
}

/* Runs "SELECT ... FROM table FINAL WHERE 1 <filter> <tail>" and returns the
 * TabSeparated answer. */
static int query_rows(struct ch_store *s, const char *select, const char *table,
		      const struct ep_store_filter *flt, const char *tail, struct ep_http_body *out,
		      char *err, size_t errlen)
{
	struct ch_text q;
	if (ch_text_open(&q, err, errlen) != 0)
		return -1;
	fprintf(q.f, "SELECT %s FROM %s%s FINAL WHERE 1", select, table, s->all);
	filter_sql(q.f, s->conn.database, flt);
	fprintf(q.f, " %s FORMAT TabSeparated", tail);
	return ch_run(&s->conn, CH_DATABASE, &q, out, err, errlen);
}

/* Runs "SELECT DISTINCT ... FROM table WHERE build_id = ... ORDER BY ..."
 * over a metadata table (paths, functions, segments). */
static int metadata_query(struct ch_store *s, const char *select, const char *table,
			  const char *build_id, const char *order, struct ep_http_body *out,
			  char *err, size_t errlen)
{
	struct ch_text q;
	if (ch_text_open(&q, err, errlen) != 0)
		return -1;
	bool grouped = strstr(select, "max(") != NULL;
	fprintf(q.f, "SELECT %s%s FROM %s%s WHERE build_id = ", grouped ? "" : "DISTINCT ", select,
		table, s->all);
	ch_sql_string(q.f, build_id);
	if (grouped)
		fprintf(q.f, " GROUP BY %s", order);
	fprintf(q.f, " ORDER BY %s FORMAT TabSeparated", order);
	return ch_run(&s->conn, CH_DATABASE, &q, out, err, errlen);
}

/* A TabSeparated row's fields as ep_store_row reads them. */
static uint64_t field_number(void *ctx, int column)
{
	return strtoull(((char **)ctx)[column], NULL, 10);
}

static const char *field_text(void *ctx, int column)
{
	return ((char **)ctx)[column];
}

/* sum() of UInt64 wraps silently past 2^64, so one agent's huge count could
 * lower everyone's. ClickHouse 18 (Debian's) has no UInt128: the high and
 * low 32 bits are summed apart (neither sum can wrap below 2^32 rows) and a
 * total of 2^64 or more is answered as 2^64 - 1. */
/* clang-format off */
#define SAT_LO(col) "sum(modulo(" col ", 4294967296))"
#define SAT_HI(col) "(sum(intDiv(" col ", 4294967296)) + intDiv(" SAT_LO(col) ", 4294967296))"
#define SAT_SUM(col)                                                                               \
	"if(" SAT_HI(col) " >= 4294967296, 18446744073709551615,"                                  \
	" " SAT_HI(col) " * 4294967296 + modulo(" SAT_LO(col) ", 4294967296))"
/* clang-format on */

/* The binary of list whose build-id is id; NULL when none is. */
static Edgeprof__V1__BinaryInfo *page_binary(Edgeprof__V1__BinaryList *list, const char *id)
{
	for (size_t i = 0; i < list->n_binaries; i++)
		if (strcmp(list->binaries[i]->build_id, id) == 0)
			return list->binaries[i];
	return NULL;
}

/* " AND build_id IN (...)": the page's binaries. */
static void page_ids(FILE *f, const Edgeprof__V1__BinaryList *list)
{
	fputs(" AND build_id IN (", f);
	for (size_t i = 0; i < list->n_binaries; i++) {
		fputs(i ? ", " : "", f);
		ch_sql_string(f, list->binaries[i]->build_id);
	}
	fputc(')', f);
}

/* Runs the statement q holds (the caller wrote its start) once the page's
 * filter and tail are added. */
static int page_query(struct ch_store *s, struct ch_text *q, const struct ep_store_filter *flt,
		      const Edgeprof__V1__BinaryList *list, const char *tail,
		      struct ep_http_body *out, char *err, size_t errlen)
{
	filter_sql(q->f, s->conn.database, flt);
	page_ids(q->f, list);
	fprintf(q->f, " %s FORMAT TabSeparated", tail);
	return ch_run(&s->conn, CH_DATABASE, q, out, err, errlen);
}

/* The page's paths, the first EP_STORE_PATHS_MAX of each by name, in one
 * query for the page. */
static int page_paths(struct ch_store *s, Edgeprof__V1__BinaryList *list, char *err, size_t errlen)
{
	struct ch_text q;
	if (ch_text_open(&q, err, errlen) != 0)
		return -1;
	fprintf(q.f, "SELECT build_id, path FROM paths%s WHERE 1", s->all);
	page_ids(q.f, list);
	fprintf(q.f,
		" GROUP BY build_id, path ORDER BY build_id, path LIMIT %d BY build_id"
		" FORMAT TabSeparated",
		EP_STORE_PATHS_MAX);
	struct ep_http_body out = {0};
	if (ch_run(&s->conn, CH_DATABASE, &q, &out, err, errlen) != 0)
		return -1;
	char *cur = out.data, *fields[2];
	int rc = 0;
	while (rc == 0 && ch_next_row(&cur, fields, 2) == 2) {
		Edgeprof__V1__BinaryInfo *b = page_binary(list, fields[0]);
		char *p = b ? strdup(fields[1]) : NULL;
		if (b && (!p || EP_PB_APPEND(b->paths, b->n_paths, p) != 0)) {
			free(p);
			snprintf(err, errlen, "out of memory");
			rc = -1;
		}
	}
	free(out.data);
	return rc;
}

#define LABEL_SET "container_id, pod, namespace, cgroup, process, session_id"

/* The page's labels, summarised in the queries (ep_store_labels_done's
 * rules): per binary the number of label sets and of each dimension's
 * values (uniqExact), its n most sampled label sets and values of each
 * dimension (LIMIT n BY): an answer of at most n rows per binary and
 * dimension, whatever the store holds. */
static int page_labels(struct ch_store *s, const struct ep_store_filter *flt,
		       Edgeprof__V1__BinaryList *list, size_t n, char *err, size_t errlen)
{
	struct ch_text q;
	struct ep_http_body out = {0};
	char *cur, *fields[8], tail[256];
	if (ch_text_open(&q, err, errlen) != 0)
		return -1;
	fprintf(q.f, "SELECT build_id, uniqExact(" LABEL_SET ")");
	for (int k = 0; k < EP_STORE_NDIMS; k++)
		fprintf(q.f, ", uniqExact(%s)", ep_store_dims[k]);
	fprintf(q.f, " FROM samples%s FINAL WHERE 1", s->all);
	if (page_query(s, &q, flt, list, "GROUP BY build_id", &out, err, errlen) != 0)
		return -1;
	cur = out.data;
	while (ch_next_row(&cur, fields, 2 + EP_STORE_NDIMS) == 2 + EP_STORE_NDIMS) {
		Edgeprof__V1__BinaryInfo *b = page_binary(list, fields[0]);
		if (!b)
			continue;
		b->label_sets = strtoull(fields[1], NULL, 10);
		for (int k = 0; k < EP_STORE_NDIMS; k++) {
			Edgeprof__V1__LabelDimension *d = ep_store_dimension(b, k);
			if (!d)
				goto oom;
			d->distinct = strtoull(fields[2 + k], NULL, 10);
		}
	}
	free(out.data);
	out.data = NULL;

	if (ch_text_open(&q, err, errlen) != 0)
		return -1;
	fprintf(q.f,
		"SELECT build_id, " LABEL_SET ", " SAT_SUM("count") " AS s FROM samples%s FINAL"
								    " WHERE 1",
		s->all);
	snprintf(tail, sizeof(tail),
		 "GROUP BY build_id, " LABEL_SET " ORDER BY build_id, s DESC, " LABEL_SET
		 " LIMIT %zu BY build_id",
		 n);
	if (page_query(s, &q, flt, list, tail, &out, err, errlen) != 0)
		return -1;
	cur = out.data;
	struct ep_store_row row = {.ctx = &fields[1], .number = field_number, .text = field_text};
	while (ch_next_row(&cur, fields, 8) == 8) {
		Edgeprof__V1__BinaryInfo *b = page_binary(list, fields[0]);
		if (b && (ep_store_add_labels(b, &row) != 0 ||
			  ep_store_add_label_samples(b, strtoull(fields[7], NULL, 10)) != 0))
			goto oom;
	}
	free(out.data);
	out.data = NULL;

	for (int k = 0; k < EP_STORE_NDIMS; k++) {
		if (ch_text_open(&q, err, errlen) != 0)
			return -1;
		fprintf(q.f,
			"SELECT build_id, %s, " SAT_SUM("count") " AS s FROM samples%s FINAL"
								 " WHERE 1",
			ep_store_dims[k], s->all);
		snprintf(
		    tail, sizeof(tail),
		    "GROUP BY build_id, %s ORDER BY build_id, s DESC, %s LIMIT %zu BY build_id",
		    ep_store_dims[k], ep_store_dims[k], n);
		if (page_query(s, &q, flt, list, tail, &out, err, errlen) != 0)
			return -1;
		cur = out.data;
		while (ch_next_row(&cur, fields, 3) == 3) {
			Edgeprof__V1__BinaryInfo *b = page_binary(list, fields[0]);
			Edgeprof__V1__LabelDimension *d = b ? ep_store_dimension(b, k) : NULL;
			if (b && (!d || ep_store_add_dim_value(d, fields[1],
							       strtoull(fields[2], NULL, 10)) != 0))
				goto oom;
		}
		free(out.data);
		out.data = NULL;
	}
	for (size_t i = 0; i < list->n_binaries; i++)
		if (!ep_store_dimension(list->binaries[i], 0) ||
		    ep_store_labels_done(list->binaries[i], n) != 0)
			goto oom;
	return 0;
oom:
	free(out.data);
	snprintf(err, errlen, "out of memory");
	return -1;
}

static Edgeprof__V1__BinaryList *ch_list(struct ep_store *base, const struct ep_store_filter *flt,
					 const struct ep_store_page *page, char *err, size_t errlen)
{
	struct ch_store *s = (struct ch_store *)base;
	Edgeprof__V1__BinaryList *list = malloc(sizeof(*list));
	if (!list) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	edgeprof__v1__binary_list__init(list);
	struct ep_http_body out = {0};
	struct ch_text q;
	if (ch_text_open(&q, err, errlen) != 0)
		goto fail;
	fprintf(
	    q.f,
	    "SELECT build_id, any(arch), " SAT_SUM("count") " AS total, min(bucket), max(bucket)"
							    " FROM samples%s FINAL WHERE 1",
	    s->all);
	filter_sql(q.f, s->conn.database, flt);
	if (page->after && !page->by_samples) {
		fputs(" AND build_id > ", q.f);
		ch_sql_string(q.f, page->after);
	}
	/* one more than the page: whether others follow */
	fprintf(q.f, " GROUP BY build_id ORDER BY %s LIMIT %zu, %zu FORMAT TabSeparated",
		page->by_samples ? "total DESC, build_id" : "build_id",
		page->by_samples ? page->offset : 0, page->limit + 1);
	if (ch_run(&s->conn, CH_DATABASE, &q, &out, err, errlen) != 0)
		goto fail;
	char *cur = out.data, *fields[5];
	struct ep_store_row row = {.ctx = fields, .number = field_number, .text = field_text};
	while (ch_next_row(&cur, fields, 5) == 5) {
		Edgeprof__V1__BinaryInfo *b;
		if (list->n_binaries == page->limit)
			list->more = true;
		else if (ep_store_add_binary(list, &row, &b) != 0)
			goto oom;
	}
	free(out.data);
	out.data = NULL;
	if (list->n_binaries &&
	    (page_paths(s, list, err, errlen) != 0 ||
	     (page->labels && page_labels(s, flt, list, page->labels, err, errlen) != 0)))
		goto fail;
	if (page->totals) {
		if (ch_text_open(&q, err, errlen) != 0)
			goto fail;
		fprintf(q.f,
			"SELECT uniqExact(build_id), " SAT_SUM("count") " FROM samples%s FINAL"
									" WHERE 1",
			s->all);
		filter_sql(q.f, s->conn.database, flt);
		fputs(" FORMAT TabSeparated", q.f);
		if (ch_run(&s->conn, CH_DATABASE, &q, &out, err, errlen) != 0)
			goto fail;
		cur = out.data;
		if (ch_next_row(&cur, fields, 2) == 2) {
			list->total_binaries = strtoull(fields[0], NULL, 10);
			list->total_samples = strtoull(fields[1], NULL, 10);
		}
		free(out.data);
	}
	return list;
oom:
	snprintf(err, errlen, "out of memory");
fail:
	free(out.data);
	ep_store_free_list(list);
	return NULL;
}

/* Each part's query: counts summed under the filter, metadata by build-id. */
static const struct {
	const char *select, *table, *tail; /* tail: GROUP BY, or for metadata ORDER BY */
	int columns;
	bool metadata;
} parts[EP_STORE_NPARTS] = {
    [EP_PART_EDGES] = {"from_addr, to_addr, flags, max(kind), " SAT_SUM("count") ", " SAT_SUM(
			   "mispredicted"),
		       "edges", "GROUP BY from_addr, to_addr, flags", 6, false},
    [EP_PART_RANGES] =
	{"start_addr, end_addr, " SAT_SUM("count") ", " SAT_SUM("cycles") ", " SAT_SUM(
	     "cycled_insns") ", " SAT_SUM("ns") ", " SAT_SUM("ns_insns"),
	 "ranges", "GROUP BY start_addr, end_addr", 7, false},
    [EP_PART_IPS] = {"ip, " SAT_SUM("count") ", " SAT_SUM("cycles") ", " SAT_SUM("ns"), "ips",
		     "GROUP BY ip", 4, false},
    /* grouped (max): rows from agents before local_index carry 0 beside the
     * newer rows of the same function */
    [EP_PART_FUNCTIONS] = {"start_addr, name, max(size), max(local_index)", "functions",
			   "start_addr, name", 4, true},
    [EP_PART_SEGMENTS] = {"vaddr, file_offset, size", "segments", "vaddr", 3, true},
};

static int ch_read_part(struct ep_store *base, const struct ep_store_filter *flt,
			enum ep_store_part part, struct ep_store_read *rd, char *err, size_t errlen)
{
	struct ch_store *s = (struct ch_store *)base;
	struct ep_http_body out = {0};
	if ((parts[part].metadata
		 ? metadata_query(s, parts[part].select, parts[part].table, flt->build_id,
				  parts[part].tail, &out, err, errlen)
		 : query_rows(s, parts[part].select, parts[part].table, flt, parts[part].tail, &out,
			      err, errlen)) != 0)
		return -1;
	char *cur = out.data, *fields[7];
	struct ep_store_row row = {.ctx = fields, .number = field_number, .text = field_text};
	int rc = 0;
	while (rc == 0 && ch_next_row(&cur, fields, parts[part].columns) == parts[part].columns)
		rc = ep_store_add_row(rd, part, &row);
	free(out.data);
	if (rc != 0)
		snprintf(err, errlen, "out of memory");
	return rc;
}

static int ch_session_put(struct ep_store *base, const Edgeprof__V1__Session *session,
			  const uint8_t *record, size_t len, char *err, size_t errlen)
{
	struct ch_store *s = (struct ch_store *)base;
	struct ch_text row;
	if (ch_text_open(&row, err, errlen) != 0)
		return -1;
	ch_tsv_string(row.f, session->id);
	fprintf(row.f, "\t%d\t%" PRId64 "\t%" PRId64 "\t%" PRIu64 "\t", (int)session->state,
		session->created_s, session->ended_s, session->updated_ns);
	for (size_t i = 0; i < len; i++)
		fprintf(row.f, "%02x", record[i]);
	fputc('\n', row.f);
	/* an older update is written too; FINAL keeps the highest updated_ns */
	return ch_insert(shard_of(s, session->id),
			 "INSERT INTO sessions (id, state, created_s, ended_s, updated_ns, record)"
			 " FORMAT TabSeparated",
			 &row, err, errlen);
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

/* Calls add with each record (first column, hex) of the answer to q, which
 * is freed. */
static int session_records(struct ch_store *s, struct ch_text *q,
			   int (*add)(void *ctx, const uint8_t *record, size_t len), void *ctx,
			   char *err, size_t errlen)
{
	struct ep_http_body out = {0};
	if (ch_run(&s->conn, CH_DATABASE, q, &out, err, errlen) != 0)
		return -1;
	char *cur = out.data, *fields[1];
	int rc = 0;
	while (rc == 0 && ch_next_row(&cur, fields, 1) == 1) {
		long n = unhex_in_place(fields[0]);
		if (n < 0) {
			snprintf(err, errlen, "clickhouse %s: a session record is not hex",
				 s->conn.base_url);
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
	struct ch_text q;
	if (ch_text_open(&q, err, errlen) != 0)
		return -1;
	fprintf(q.f, "SELECT record FROM sessions%s FINAL WHERE id = ", s->all);
	ch_sql_string(q.f, id);
	fputs(" FORMAT TabSeparated", q.f);
	struct one_record o = {0};
	int rc = session_records(s, &q, keep_record, &o, err, errlen);
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
	struct ch_store *s = (struct ch_store *)base;
	struct ch_text q;
	if (ch_text_open(&q, err, errlen) != 0)
		return -1;
	/* the filter on the non-key state stays outside FINAL (see ch_prune) */
	fprintf(q.f,
		"SELECT record FROM (SELECT id, state, created_s, record FROM sessions%s FINAL)"
		" WHERE state IN (0, 1) ORDER BY created_s, id FORMAT TabSeparated",
		s->all);
	return session_records(s, &q, add, ctx, err, errlen);
}

static int ch_sessions_finished(struct ep_store *base, size_t limit,
				int (*add)(void *ctx, const uint8_t *record, size_t len), void *ctx,
				char *err, size_t errlen)
{
	struct ch_store *s = (struct ch_store *)base;
	struct ch_text q;
	if (ch_text_open(&q, err, errlen) != 0)
		return -1;
	/* the filter on the non-key state stays outside FINAL (see ch_prune) */
	fprintf(q.f,
		"SELECT record FROM (SELECT id, state, created_s, ended_s, record FROM sessions%s"
		" FINAL) WHERE state IN (%d, %d) ORDER BY if(ended_s != 0, ended_s, created_s)"
		" DESC, id LIMIT %zu FORMAT TabSeparated",
		s->all, EDGEPROF__V1__SESSION_STATE__SESSION_DONE,
		EDGEPROF__V1__SESSION_STATE__SESSION_FAILED, limit);
	return session_records(s, &q, add, ctx, err, errlen);
}

/* The rows of the nodes that live on shard. */
static int nodes_put_on(struct ch_store *s, struct ch_conn *shard,
			const struct ep_store_node_row *rows, size_t n, char *err, size_t errlen)
{
	struct ch_text recs, sums;
	if (ch_text_open(&recs, err, errlen) != 0)
		return -1;
	if (ch_text_open(&sums, err, errlen) != 0) {
		ch_text_free(&recs);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		if (shard_of(s, rows[i].name) != shard)
			continue;
		ch_tsv_string(recs.f, rows[i].name);
		fprintf(recs.f, "\t%" PRIu64 "\t", rows[i].seen_ns);
		for (size_t k = 0; k < rows[i].len; k++)
			fprintf(recs.f, "%02x", rows[i].record[k]);
		fputc('\n', recs.f);
		if (!rows[i].samples && !rows[i].samples_with_branches && !rows[i].lost)
			continue;
		ch_tsv_string(sums.f, rows[i].name);
		fprintf(sums.f, "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\n",
			(uint64_t)(rows[i].seen_ns / 1000000000ULL / 604800ULL), rows[i].samples,
			rows[i].samples_with_branches, rows[i].lost);
	}
	/* the sums first: a failure between the two leaves the records to the
	 * next put, which carries no sum twice (a retried put may: the sums
	 * are for the UI, not the profiles) */
	int rc =
	    ch_insert(shard,
		      "INSERT INTO node_stats (name, week, samples, samples_with_branches, lost)"
		      " FORMAT TabSeparated",
		      &sums, err, errlen);
	if (rc == 0)
		rc = ch_insert(shard,
			       "INSERT INTO nodes (name, seen_ns, record) FORMAT TabSeparated",
			       &recs, err, errlen);
	else
		ch_text_free(&recs);
	return rc;
}

/* A node's record and sums live on the shard of its name, so the join in
 * ch_nodes_get meets them. */
static int ch_nodes_put(struct ep_store *base, const struct ep_store_node_row *rows, size_t n,
			char *err, size_t errlen)
{
	struct ch_store *s = (struct ch_store *)base;
	for (size_t k = 0; k < s->nshards; k++)
		if (nodes_put_on(s, &s->shards[k], rows, n, err, errlen) != 0)
			return -1;
	return 0;
}

/* One node of the answer: name, record (hex), then its sums. */
static int ch_nodes_get(struct ep_store *base,
			int (*add)(void *ctx, const struct ep_store_node_row *row), void *ctx,
			char *err, size_t errlen)
{
	struct ch_store *s = (struct ch_store *)base;
	struct ep_http_body out = {0};
	/* sums of the names that have a record (a pruned node's sums wait for
	 * their week's partition to go) */
	if (ch_runf(&s->conn, CH_DATABASE, &out, err, errlen,
		    "SELECT n.name, n.seen_ns, n.record, st.samples, st.swb, st.lost FROM"
		    " (SELECT name, seen_ns, record FROM nodes%s FINAL) AS n ANY LEFT JOIN"
		    " (SELECT name, sum(samples) AS samples, sum(samples_with_branches) AS swb,"
		    " sum(lost) AS lost FROM node_stats%s GROUP BY name) AS st USING name"
		    " FORMAT TabSeparated",
		    s->all, s->all) != 0)
		return -1;
	char *cur = out.data, *f[6];
	int rc = 0;
	while (rc == 0 && ch_next_row(&cur, f, 6) == 6) {
		long len = unhex_in_place(f[2]);
		if (len < 0) {
			snprintf(err, errlen, "clickhouse %s: a node record is not hex",
				 s->conn.base_url);
			rc = -1;
			break;
		}
		struct ep_store_node_row row = {.name = f[0],
						.seen_ns = strtoull(f[1], NULL, 10),
						.record = (const uint8_t *)f[2],
						.len = (size_t)len,
						.samples = strtoull(f[3], NULL, 10),
						.samples_with_branches = strtoull(f[4], NULL, 10),
						.lost = strtoull(f[5], NULL, 10)};
		if (add(ctx, &row) != 0) {
			snprintf(err, errlen, "out of memory");
			rc = -1;
		}
	}
	free(out.data);
	return rc;
}

static int ch_image_get(struct ep_store *base, const char *build_id, uint8_t **image, size_t *len,
			char *err, size_t errlen)
{
	struct ch_store *s = (struct ch_store *)base;
	struct ch_text q;
	if (ch_text_open(&q, err, errlen) != 0)
		return -1;
	fprintf(q.f, "SELECT trust, %s FROM binary_images%s FINAL WHERE build_id = ",
		image ? "image" : "''", s->all);
	ch_sql_string(q.f, build_id);
	fputs(" ORDER BY trust DESC LIMIT 1 FORMAT TabSeparated", q.f);
	struct ep_http_body out = {0};
	if (ch_run(&s->conn, CH_DATABASE, &q, &out, err, errlen) != 0)
		return -1;
	char *cur = out.data, *f[2];
	int rc = 0;
	if (ch_next_row(&cur, f, 2) == 2) {
		rc = strtoul(f[0], NULL, 10) >= EP_IMAGE_TRUSTED ? EP_IMAGE_TRUSTED
								 : EP_IMAGE_PROVISIONAL;
		long n = image ? unhex_in_place(f[1]) : 0;
		if (n < 0) {
			snprintf(err, errlen, "clickhouse %s: an image is not hex",
				 s->conn.base_url);
			rc = -1;
		} else if (image && !(*image = malloc(n ? (size_t)n : 1))) {
			snprintf(err, errlen, "out of memory");
			rc = -1;
		} else if (image) {
			memcpy(*image, f[1], (size_t)n);
			*len = (size_t)n;
		}
	}
	free(out.data);
	return rc;
}

/* Several collectors may put the same build-id at once: both rows are
 * written, FINAL keeps the first of each trust (see binary_images). */
static int ch_image_put(struct ep_store *base, const char *build_id, int64_t uploaded_s,
			enum ep_image_trust trust, const uint8_t *image, size_t len, char *err,
			size_t errlen)
{
	struct ch_store *s = (struct ch_store *)base;
	int had = ch_image_get(base, build_id, NULL, NULL, err, errlen);
	if (had < 0)
		return -1;
	if (had >= (int)trust)
		return 0;
	struct ch_text row;
	if (ch_text_open(&row, err, errlen) != 0)
		return -1;
	ch_tsv_string(row.f, build_id);
	fprintf(row.f, "\t%" PRId64 "\t%" PRIu64 "\t", uploaded_s,
		UINT64_MAX - (uint64_t)(uploaded_s > 0 ? uploaded_s : 0));
	for (size_t i = 0; i < len; i++)
		fprintf(row.f, "%02x", image[i]);
	fprintf(row.f, "\t%d\n", (int)trust);
	if (ch_insert(shard_of(s, build_id),
		      "INSERT INTO binary_images (build_id, uploaded_s, keep, image, trust)"
		      " FORMAT TabSeparated",
		      &row, err, errlen) != 0)
		return -1;
	return had ? 2 : 1;
}

static void ch_close(struct ep_store *base)
{
	struct ch_store *s = (struct ch_store *)base;
	if (s->shards != &s->conn) {
		for (size_t k = 0; k < s->nshards; k++)
			ch_conn_close(&s->shards[k]);
		free(s->shards);
	}
	ch_conn_close(&s->conn);
	free(s->cluster);
	free(s);
}

static const struct ep_store_ops clickhouse_ops = {
    .kind = "clickhouse",
    .keeps_batches = true,
    .close = ch_close,
    .has_batch = ch_has_batch,
    .known_batches = ch_known_batches,
    .write = ch_write,
    .prune = ch_prune,
    .list_binaries = ch_list,
    .read_part = ch_read_part,
    .session_put = ch_session_put,
    .session_get = ch_session_get,
    .sessions_unfinished = ch_sessions_unfinished,
    .sessions_finished = ch_sessions_finished,
    .nodes_put = ch_nodes_put,
    .nodes_get = ch_nodes_get,
    .image_put = ch_image_put,
    .image_get = ch_image_get,
};

/* 1 when table has the column, 0 when not, -1 with err. */
static int has_column(struct ch_conn *c, const char *table, const char *column, char *err,
		      size_t errlen)
{
	struct ep_http_body n = {0};
	if (ch_runf(c, CH_SERVER, &n, err, errlen,
		    "SELECT count() FROM system.columns WHERE database = '%s'"
		    " AND table = '%s' AND name = '%s'",
		    c->database, table, column) != 0)
		return -1;
	int rc = n.data && strtoul(n.data, NULL, 10) != 0 ? 1 : 0;
	free(n.data);
	return rc;
}

/* Count tables from before sessions: session_id added at the end of the
 * columns and of the sorting key (see count_tables). Several collectors may
 * start at once: an ALTER that fails because another one added the column
 * first is fine. */
static int add_session_column(struct ch_conn *c, const char *table, char *err, size_t errlen)
{
	struct ep_http_body out = {0};
	if (ch_runf(c, CH_SERVER, &out, err, errlen,
		    "SELECT sorting_key, (SELECT count() FROM system.columns WHERE"
		    " database = '%s' AND table = '%s' AND name = 'session_id') FROM"
		    " system.tables WHERE database = '%s' AND name = '%s' FORMAT TabSeparated",
		    c->database, table, c->database, table) != 0)
		return -1;
	char *cur = out.data, *fields[2];
	int rc = 0;
	if (ch_next_row(&cur, fields, 2) == 2 && strcmp(fields[1], "0") == 0 &&
	    ch_runf(c, CH_DATABASE, NULL, err, errlen,
		    "ALTER TABLE %s ADD COLUMN session_id String, MODIFY ORDER BY (%s, session_id)",
		    table, fields[0]) != 0) {
		char ignored[64];
		if (has_column(c, table, "session_id", ignored, sizeof(ignored)) != 1)
			rc = -1; /* err says why the ALTER failed */
	}
	free(out.data);
	return rc;
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

/* Adds column to table unless it has it: 0, or -1 with err. */
static int add_column(struct ch_conn *c, const char *table, const char *column, const char *type,
		      char *err, size_t errlen)
{
	int has = has_column(c, table, column, err, errlen);
	if (has != 0)
		return has < 0 ? -1 : 0;
	if (ch_runf(c, CH_DATABASE, NULL, err, errlen, "ALTER TABLE %s ADD COLUMN %s %s", table,
		    column, type) != 0) {
		char ignored[64];
		if (has_column(c, table, column, ignored, sizeof(ignored)) != 1)
			return -1;
	}
	return 0;
}

/* Creates the database and its tables, or brings older tables up to date. */
static int set_up_schema(struct ch_conn *c, char *err, size_t errlen)
{
	if (ch_runf(c, CH_SERVER, NULL, err, errlen, "CREATE DATABASE IF NOT EXISTS %s",
		    c->database) != 0)
		return -1;
	for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++)
		if (ch_runf(c, CH_DATABASE, NULL, err, errlen, "%s", tables[i]) != 0)
			return -1;
	for (size_t t = 0; t < sizeof(count_tables) / sizeof(count_tables[0]); t++)
		if (add_session_column(c, count_tables[t], err, errlen) != 0)
			return -1;
	/* functions from before local_index (BOLT's NAME/N): 0, "global". No
	 * ADD COLUMN IF NOT EXISTS before ClickHouse 19; an ALTER that fails
	 * because another collector added it first is fine. */
	if (add_column(c, "functions", "local_index", "UInt32", err, errlen) != 0)
		return -1;
	/* ranges from before the branch records' cycles (issue 14): 0 */
	if (add_column(c, "ranges", "cycles", "UInt64", err, errlen) != 0 ||
	    add_column(c, "ranges", "cycled_insns", "UInt64", err, errlen) != 0)
		return -1;
	/* agent --cycles' cycles at IPs, and cpu-clock nanoseconds apart from
	 * cycles (ep_store_slice): 0 in older rows */
	if (add_column(c, "ips", "cycles", "UInt64", err, errlen) != 0 ||
	    add_column(c, "ips", "ns", "UInt64", err, errlen) != 0 ||
	    add_column(c, "ranges", "ns", "UInt64", err, errlen) != 0 ||
	    add_column(c, "ranges", "ns_insns", "UInt64", err, errlen) != 0)
		return -1;
	/* images from before trust was kept: 0 (provisional), and in the
	 * sorting key, so that a trusted row never replaces nor is replaced
	 * by a provisional one (ClickHouse takes no default for it there) */
	int has = has_column(c, "binary_images", "trust", err, errlen);
	if (has < 0)
		return -1;
	if (!has && ch_runf(c, CH_DATABASE, NULL, err, errlen,
			    "ALTER TABLE binary_images ADD COLUMN trust UInt8,"
			    " MODIFY ORDER BY (build_id, trust)") != 0) {
		char ignored[64];
		if (has_column(c, "binary_images", "trust", ignored, sizeof(ignored)) != 1)
			return -1;
	}
	return 0;
}

/* A table's name in a CREATE TABLE statement. */
static void created_table(const char *create, char *name, size_t len)
{
	const char *p = create + strlen("CREATE TABLE IF NOT EXISTS ");
	size_t n = strcspn(p, " (");
	snprintf(name, len, "%.*s", (int)(n < len ? n : len - 1), p);
}

/* On the server reads go to: TABLE_all over every shard's TABLE, with the
 * columns the local table has now (a column a later version adds to the
 * local tables is added to the Distributed one as well). */
static int set_up_distributed(struct ch_store *s, char *err, size_t errlen)
{
	for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
		char t[64];
		created_table(tables[i], t, sizeof(t));
		if (ch_runf(
			&s->conn, CH_DATABASE, NULL, err, errlen,
			"CREATE TABLE IF NOT EXISTS %s_all AS %s ENGINE = Distributed(%s, %s, %s)",
			t, t, s->cluster, s->conn.database, t) != 0)
			return -1;
		struct ep_http_body out = {0};
		if (ch_runf(
			&s->conn, CH_SERVER, &out, err, errlen,
			"SELECT name, type FROM system.columns WHERE database = '%s' AND table ="
			" '%s' AND name NOT IN (SELECT name FROM system.columns WHERE database ="
			" '%s' AND table = '%s_all') FORMAT TabSeparated",
			s->conn.database, t, s->conn.database, t) != 0)
			return -1;
		char *cur = out.data, *f[2], dt[72];
		snprintf(dt, sizeof(dt), "%s_all", t);
		int rc = 0;
		while (rc == 0 && ch_next_row(&cur, f, 2) == 2)
			if (valid_identifier(f[0]))
				rc = add_column(&s->conn, dt, f[0], f[1], err, errlen);
		free(out.data);
		if (rc != 0)
			return -1;
	}
	return 0;
}

/* The shards of the cluster, as the server in the location lists them (its
 * remote_servers), each reached over HTTP on the location's port: shards of
 * one cluster listen alike. One replica per shard: the tables are plain
 * MergeTrees, which a Distributed read would look for on any replica. */
static int find_shards(struct ch_store *s, const char *location, char *err, size_t errlen)
{
	struct ep_http_body out = {0};
	if (ch_runf(
		&s->conn, CH_SERVER, &out, err, errlen,
		"SELECT shard_num, max(replica_num), any(host_address) FROM system.clusters"
		" WHERE cluster = '%s' GROUP BY shard_num ORDER BY shard_num FORMAT TabSeparated",
		s->cluster) != 0)
		return -1;
	const char *scheme_end = strstr(s->conn.base_url, "://") + 3;
	const char *port = strrchr(scheme_end, ':');
	if (port && strchr(port, ']'))
		port = NULL; /* [v6] without a port */
	size_t n = 0;
	for (const char *c = out.data; c && (c = strchr(c, '\n')); c++)
		n++;
	int rc = 0;
	if (!n) {
		snprintf(err, errlen,
			 "clickhouse '%s': the server has no cluster '%s' (its remote_servers)",
			 location, s->cluster);
		rc = -1;
	} else if (!(s->shards = calloc(n, sizeof(*s->shards)))) {
		snprintf(err, errlen, "out of memory");
		rc = -1;
	}
	char *cur = out.data, *f[3];
	while (rc == 0 && s->nshards < n && ch_next_row(&cur, f, 3) == 3) {
		if (strcmp(f[1], "1") != 0) {
			snprintf(
			    err, errlen,
			    "clickhouse '%s': shard %s of cluster '%s' has %s replicas; edgeprof's"
			    " tables are not replicated (that needs ZooKeeper): name a cluster"
			    " of one replica per shard",
			    location, f[0], s->cluster, f[1]);
			rc = -1;
			break;
		}
		char *url = NULL;
		bool v6 = strchr(f[2], ':') != NULL;
		if (asprintf(&url, "%.*s%s%s%s%s", (int)(scheme_end - s->conn.base_url),
			     s->conn.base_url, v6 ? "[" : "", f[2], v6 ? "]" : "",
			     port ? port : "") < 0) {
			snprintf(err, errlen, "out of memory");
			rc = -1;
			break;
		}
		rc = ch_conn_open(&s->shards[s->nshards++], url, strlen(url), s->conn.database, err,
				  errlen);
		free(url);
	}
	free(out.data);
	return rc;
}

/* The value of query parameter key= in location (a copy), or NULL. */
static char *location_parameter(const char *location, const char *key)
{
	const char *q = strchr(location, '?');
	size_t klen = strlen(key);
	for (const char *p = q; p && *p; p = strchr(p + 1, '&')) {
		if (strncmp(p + 1, key, klen) == 0 && p[1 + klen] == '=')
			return strndup(p + 2 + klen, strcspn(p + 2 + klen, "&"));
	}
	return NULL;
}

struct ep_store *ep_store_clickhouse_open(const char *location, char *err, size_t errlen)
{
	if (strncmp(location, "http://", 7) != 0 && strncmp(location, "https://", 8) != 0) {
		snprintf(err, errlen,
			 "clickhouse '%s': expected http://HOST:PORT[/?database=DB][&cluster=NAME]",
			 location);
		return NULL;
	}
	struct ch_store *s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	s->base.ops = &clickhouse_ops;
	s->shards = &s->conn;
	s->nshards = 1;
	s->all = "";
	const char *q = strchr(location, '?');
	size_t base_len = q ? (size_t)(q - location) : strlen(location);
	while (base_len && location[base_len - 1] == '/')
		base_len--;
	char *db = location_parameter(location, "database");
	s->cluster = location_parameter(location, "cluster");
	int rc = ch_conn_open(&s->conn, location, base_len, db ? db : "edgeprof", err, errlen);
	free(db);
	if (rc != 0) {
		ch_close(&s->base);
		return NULL;
	}
	if (!valid_identifier(s->conn.database)) {
		snprintf(err, errlen, "clickhouse '%s': database name '%s' must be [A-Za-z0-9_]+",
			 location, s->conn.database);
		ch_close(&s->base);
		return NULL;
	}
	if (s->cluster) {
		s->shards = NULL;
		s->nshards = 0;
		s->all = "_all";
		if (!valid_identifier(s->cluster)) {
			snprintf(err, errlen,
				 "clickhouse '%s': cluster name '%s' must be [A-Za-z0-9_]+",
				 location, s->cluster);
			ch_close(&s->base);
			return NULL;
		}
		if (find_shards(s, location, err, errlen) != 0) {
			ch_close(&s->base);
			return NULL;
		}
	}
	/* the local tables on every shard; sharded, on the server reads go to
	 * as well, unless it is one of them (TABLE_all copies their columns) */
	bool reads_on_a_shard = false;
	for (size_t k = 0; k < s->nshards; k++) {
		reads_on_a_shard |= strcmp(s->shards[k].base_url, s->conn.base_url) == 0;
		if (set_up_schema(&s->shards[k], err, errlen) != 0) {
			ch_close(&s->base);
			return NULL;
		}
	}
	if (s->cluster && ((!reads_on_a_shard && set_up_schema(&s->conn, err, errlen) != 0) ||
			   set_up_distributed(s, err, errlen) != 0)) {
		ch_close(&s->base);
		return NULL;
	}
	return &s->base;
}
