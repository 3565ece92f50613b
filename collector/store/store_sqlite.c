/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The embedded store: one SQLite file in WAL mode. A commit is one
 * transaction, so the counts and the batch ids that make resends harmless
 * are stored together or not at all. synchronous=FULL: the collector
 * acknowledges a batch once ep_store_write returns, and the agent then
 * deletes its copy, so the commit must be on disk by then (NORMAL would
 * only lose commits on an OS crash, but that is still a lost batch), and
 * an fdatasync's 0 is checked as well (confirm_on_disk).
 * Addresses are uint64 kept in SQLite's int64 by bit pattern.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "collector/store/store_backend.h"
#include "common/profile/model.h"
#include "common/util/sat.h"
#include "common/util/u64map.h"

/* 2: label_sets.session_id (in its UNIQUE key), the sessions table
 * 3: functions.local_index (BOLT's NAME/N of a local function)
 * 4: ranges.cycles, ranges.cycled_insns
 * 5: ips.cycles, and the cpu-clock nanoseconds apart from cycles: ranges.ns,
 *    ranges.ns_insns, ips.ns */
#define SCHEMA_VERSION 5

enum stmt_id {
	S_BINARY_INSERT,
	S_BINARY_ID,
	S_PATH,
	S_LABELS_INSERT,
	S_LABELS_ID,
	S_SAMPLES,
	S_EDGE,
	S_RANGE,
	S_IP,
	S_FUNCTION,
	S_SEGMENT,
	S_BATCH,
	S_HAS_BATCH,
	S_SESSION_PUT,
	S_SESSION_GET,
	S_SESSIONS_UNFINISHED,
	S_SESSIONS_FINISHED,
	S_NODE_PUT,
	S_NODES,
	NSTMTS
};

static const char *const stmt_sql[NSTMTS] = {
    [S_BINARY_INSERT] = "INSERT INTO binaries(build_id, arch) VALUES(?1, ?2) "
			"ON CONFLICT(build_id) DO UPDATE SET arch = excluded.arch "
			"WHERE binaries.arch = ''",
    [S_BINARY_ID] = "SELECT id FROM binaries WHERE build_id = ?1",
    [S_PATH] = "INSERT OR IGNORE INTO binary_paths(binary_id, path) VALUES(?1, ?2)",
    [S_LABELS_INSERT] = "INSERT OR IGNORE INTO label_sets(container_id, pod, namespace, cgroup, "
			"process, session_id) VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
    [S_LABELS_ID] = "SELECT id FROM label_sets WHERE container_id = ?1 AND pod = ?2 AND "
		    "namespace = ?3 AND cgroup = ?4 AND process = ?5 AND session_id = ?6",
    [S_SAMPLES] = "INSERT INTO samples(binary_id, bucket, label_set, count) VALUES(?1, ?2, ?3, ?4) "
		  "ON CONFLICT DO UPDATE SET count = sat_add(count, excluded.count)",
    [S_EDGE] = "INSERT INTO edges(binary_id, bucket, label_set, from_addr, to_addr, flags, kind, "
	       "count, mispredicted) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) "
	       "ON CONFLICT DO UPDATE SET count = sat_add(count, excluded.count), "
	       "mispredicted = sat_add(mispredicted, excluded.mispredicted)",
    [S_RANGE] =
	"INSERT INTO ranges(binary_id, bucket, label_set, start_addr, end_addr, count, "
	"cycles, cycled_insns, ns, ns_insns) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) "
	"ON CONFLICT DO UPDATE SET count = sat_add(count, excluded.count), "
	"cycles = sat_add(cycles, excluded.cycles), "
	"cycled_insns = sat_add(cycled_insns, excluded.cycled_insns), "
	"ns = sat_add(ns, excluded.ns), ns_insns = sat_add(ns_insns, excluded.ns_insns)",
    [S_IP] = "INSERT INTO ips(binary_id, bucket, label_set, ip, count, cycles, ns) "
	     "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7) "
	     "ON CONFLICT DO UPDATE SET count = sat_add(count, excluded.count), "
	     "cycles = sat_add(cycles, excluded.cycles), ns = sat_add(ns, excluded.ns)",
    /* an older agent sends 0 for every function: it never overwrites */
    [S_FUNCTION] = "INSERT INTO functions(binary_id, start_addr, name, size, local_index) "
		   "VALUES(?1, ?2, ?3, ?4, ?5) ON CONFLICT DO UPDATE SET local_index ="
		   " excluded.local_index WHERE excluded.local_index != 0",
    [S_SEGMENT] = "INSERT OR IGNORE INTO segments(binary_id, vaddr, file_offset, size) "
		  "VALUES(?1, ?2, ?3, ?4)",
    [S_BATCH] = "INSERT INTO batches(agent_id, sequence, node, received) VALUES(?1, ?2, ?3, ?4)",
    [S_HAS_BATCH] = "SELECT 1 FROM batches WHERE agent_id = ?1 AND sequence = ?2",
    /* newest wins: an update older than the stored record changes nothing */
    [S_SESSION_PUT] = "INSERT INTO sessions(id, state, created_s, ended_s, updated_ns, record) "
		      "VALUES(?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT(id) DO UPDATE SET "
		      "state = excluded.state, created_s = excluded.created_s, "
		      "ended_s = excluded.ended_s, updated_ns = excluded.updated_ns, "
		      "record = excluded.record WHERE excluded.updated_ns >= sessions.updated_ns",
    [S_SESSION_GET] = "SELECT record FROM sessions WHERE id = ?1",
    [S_SESSIONS_UNFINISHED] = "SELECT record FROM sessions WHERE state IN (?1, ?2) "
			      "ORDER BY created_s, id",
    /* one that failed before it started has no end: its creation counts */
    [S_SESSIONS_FINISHED] = "SELECT record FROM sessions WHERE state IN (?1, ?2) ORDER BY "
			    "(CASE WHEN ended_s != 0 THEN ended_s ELSE created_s END) DESC, id "
			    "LIMIT ?3",
    /* the newest record wins; the sums are added */
    [S_NODE_PUT] = "INSERT INTO nodes(name, seen_ns, record, samples, samples_with_branches, lost)"
		   " VALUES(?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT(name) DO UPDATE SET"
		   " record = CASE WHEN excluded.seen_ns >= nodes.seen_ns THEN excluded.record"
		   " ELSE nodes.record END,"
		   " seen_ns = max(nodes.seen_ns, excluded.seen_ns),"
		   " samples = sat_add(nodes.samples, excluded.samples),"
		   " samples_with_branches = sat_add(nodes.samples_with_branches,"
		   " excluded.samples_with_branches),"
		   " lost = sat_add(nodes.lost, excluded.lost)",
    [S_NODES] = "SELECT name, seen_ns, record, samples, samples_with_branches, lost FROM nodes",
};

static const char schema[] =
    "CREATE TABLE IF NOT EXISTS binaries(id INTEGER PRIMARY KEY, build_id TEXT NOT NULL UNIQUE,"
    " arch TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS binary_paths(binary_id INTEGER NOT NULL, path TEXT NOT NULL,"
    " PRIMARY KEY(binary_id, path)) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS label_sets(id INTEGER PRIMARY KEY, container_id TEXT NOT NULL,"
    " pod TEXT NOT NULL, namespace TEXT NOT NULL, cgroup TEXT NOT NULL, process TEXT NOT NULL,"
    " session_id TEXT NOT NULL,"
    " UNIQUE(container_id, pod, namespace, cgroup, process, session_id));"
    "CREATE TABLE IF NOT EXISTS samples(binary_id INTEGER NOT NULL, bucket INTEGER NOT NULL,"
    " label_set INTEGER NOT NULL, count INTEGER NOT NULL,"
    " PRIMARY KEY(binary_id, bucket, label_set)) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS edges(binary_id INTEGER NOT NULL, bucket INTEGER NOT NULL,"
    " label_set INTEGER NOT NULL, from_addr INTEGER NOT NULL, to_addr INTEGER NOT NULL,"
    " flags INTEGER NOT NULL, kind INTEGER NOT NULL, count INTEGER NOT NULL,"
    " mispredicted INTEGER NOT NULL,"
    " PRIMARY KEY(binary_id, bucket, label_set, from_addr, to_addr, flags)) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS ranges(binary_id INTEGER NOT NULL, bucket INTEGER NOT NULL,"
    " label_set INTEGER NOT NULL, start_addr INTEGER NOT NULL, end_addr INTEGER NOT NULL,"
    " count INTEGER NOT NULL, cycles INTEGER NOT NULL DEFAULT 0,"
    " cycled_insns INTEGER NOT NULL DEFAULT 0, ns INTEGER NOT NULL DEFAULT 0,"
    " ns_insns INTEGER NOT NULL DEFAULT 0,"
    " PRIMARY KEY(binary_id, bucket, label_set, start_addr, end_addr)) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS ips(binary_id INTEGER NOT NULL, bucket INTEGER NOT NULL,"
    " label_set INTEGER NOT NULL, ip INTEGER NOT NULL, count INTEGER NOT NULL,"
    " cycles INTEGER NOT NULL DEFAULT 0, ns INTEGER NOT NULL DEFAULT 0,"
    " PRIMARY KEY(binary_id, bucket, label_set, ip)) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS functions(binary_id INTEGER NOT NULL, start_addr INTEGER NOT NULL,"
    " name TEXT NOT NULL, size INTEGER NOT NULL, local_index INTEGER NOT NULL DEFAULT 0,"
    " PRIMARY KEY(binary_id, start_addr, name))"
    " WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS segments(binary_id INTEGER NOT NULL, vaddr INTEGER NOT NULL,"
    " file_offset INTEGER NOT NULL, size INTEGER NOT NULL,"
    " PRIMARY KEY(binary_id, vaddr, file_offset, size)) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS batches(agent_id TEXT NOT NULL, sequence INTEGER NOT NULL,"
    " node TEXT NOT NULL, received INTEGER NOT NULL, PRIMARY KEY(agent_id, sequence))"
    " WITHOUT ROWID;"
    /* the record is the serialised Session; the columns beside it are what
     * queries select and sort by */
    "CREATE TABLE IF NOT EXISTS sessions(id TEXT PRIMARY KEY, state INTEGER NOT NULL,"
    " created_s INTEGER NOT NULL, ended_s INTEGER NOT NULL, updated_ns INTEGER NOT NULL,"
    " record BLOB NOT NULL) WITHOUT ROWID;"
    "CREATE INDEX IF NOT EXISTS sessions_by_state ON sessions(state, created_s, id);"
    /* the few label sets of sessions, which a listing of the continuous
     * profile leaves out (filter_sql) */
    "CREATE INDEX IF NOT EXISTS label_sets_by_session ON label_sets(session_id);"
    /* a binary's samples by label set: a listing sums each label set's in
     * this order, with no sort (SQLite sorts in memory here: temp_store),
     * however many buckets the label sets span */
    "CREATE INDEX IF NOT EXISTS samples_by_label_set ON samples(binary_id, label_set, bucket,"
    " count);"
    /* nodes as their agents' batches describe them (collector.proto
     * Node, its sums in the columns beside it) */
    "CREATE TABLE IF NOT EXISTS nodes(name TEXT PRIMARY KEY, seen_ns INTEGER NOT NULL,"
    " record BLOB NOT NULL, samples INTEGER NOT NULL, samples_with_branches INTEGER NOT NULL,"
    " lost INTEGER NOT NULL) WITHOUT ROWID;"
    /* binaries' code and symbols for the UI (collector/binaries): the image
     * is a serialised BinaryImage, the first one uploaded for its build-id
     * unless a more trusted one (ep_image_trust) came later */
    "CREATE TABLE IF NOT EXISTS binary_images(build_id TEXT PRIMARY KEY,"
    " uploaded_s INTEGER NOT NULL, image BLOB NOT NULL, trust INTEGER NOT NULL DEFAULT 1)"
    " WITHOUT ROWID;";

/* Version 1 to 2: label_sets gains session_id, and its UNIQUE key must
 * include it, which SQLite cannot alter: the table is rebuilt, ids kept
 * (the count tables refer to them), every existing set continuous (''). */
static const char migrate_v1[] =
    "CREATE TABLE label_sets_v2(id INTEGER PRIMARY KEY, container_id TEXT NOT NULL,"
    " pod TEXT NOT NULL, namespace TEXT NOT NULL, cgroup TEXT NOT NULL, process TEXT NOT NULL,"
    " session_id TEXT NOT NULL,"
    " UNIQUE(container_id, pod, namespace, cgroup, process, session_id));"
    "INSERT INTO label_sets_v2(id, container_id, pod, namespace, cgroup, process, session_id)"
    " SELECT id, container_id, pod, namespace, cgroup, process, '' FROM label_sets;"
    "DROP TABLE label_sets;"
    "ALTER TABLE label_sets_v2 RENAME TO label_sets;";

/* Counts are uint64 kept in int64 by bit pattern, and SQLite's own + and
 * SUM() work on int64: past 2^63 a sum became a REAL or failed with "integer
 * overflow", and SUM() of one binary's rows then failed every listing. These
 * add as uint64 and stop at 2^64 - 1: a count never wraps below what was
 * added, and never fails. A REAL (what + left in files written before) is a
 * sum that already overflowed: it reads as 2^64 - 1. */
static bool count_value(sqlite3_value *v, uint64_t *out)
{
	switch (sqlite3_value_type(v)) {
	case SQLITE_INTEGER:
		*out = (uint64_t)sqlite3_value_int64(v);
		return true;
	case SQLITE_NULL:
		*out = 0;
		return true;
	default:
		*out = UINT64_MAX;
		return false;
	}
}

static void sat_add_fn(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	(void)argc;
	uint64_t a, b;
	count_value(argv[0], &a);
	count_value(argv[1], &b);
	ep_add_sat(&a, b);
	sqlite3_result_int64(ctx, (sqlite3_int64)a);
}

static void sat_sum_step(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	(void)argc;
	uint64_t *sum = sqlite3_aggregate_context(ctx, sizeof(*sum));
	uint64_t v;
	if (!sum) {
		sqlite3_result_error_nomem(ctx);
		return;
	}
	count_value(argv[0], &v);
	ep_add_sat(sum, v);
}

static void sat_sum_final(sqlite3_context *ctx)
{
	uint64_t *sum = sqlite3_aggregate_context(ctx, 0);
	sqlite3_result_int64(ctx, sum ? (sqlite3_int64)*sum : 0);
}

static int register_functions(sqlite3 *db)
{
	int flags = SQLITE_UTF8 | SQLITE_DETERMINISTIC;
	return sqlite3_create_function(db, "sat_add", 2, flags, NULL, sat_add_fn, NULL, NULL) ==
			   SQLITE_OK &&
		       sqlite3_create_function(db, "sat_sum", 1, flags, NULL, NULL, sat_sum_step,
					       sat_sum_final) == SQLITE_OK
		   ? 0
		   : -1;
}

/* The read queries, prepared once per text: a profile request prepared
 * eight statements, and SQLite's parser took more of its time than the
 * reading (45% of fuzz_http's under ASan). The texts are few, a format for
 * each filter's set of fields, so a small cache holds the ones in use; the
 * least recently used one goes when it is full. */
#define QUERY_CACHE 48
struct cached_query {
	char *sql;
	uint64_t hash; /* of sql: most texts differ only near their end */
	sqlite3_stmt *st;
	uint64_t used;
};

struct sqlite_store {
	struct ep_store base;
	sqlite3 *db;
	char *path;
	sqlite3_stmt *stmts[NSTMTS];
	struct cached_query queries[QUERY_CACHE];
	uint64_t query_clock;
	/* the last commit could not be confirmed on disk (confirm_on_disk):
	 * what SQLite shows of it may be gone after a repair */
	bool unconfirmed;
};

/* 0 when a file can be created beside the store (it is removed at once),
 * else the errno of the attempt. */
static int create_beside(const struct sqlite_store *s)
{
	char probe[4096];
	snprintf(probe, sizeof(probe), "%s-probe-XXXXXX", s->path);
	int fd = mkostemp(probe, O_CLOEXEC);
	if (fd < 0)
		return errno;
	close(fd);
	unlink(probe);
	return 0;
}

/* Why an I/O failure happened, as the file system says: SQLite says "disk
 * I/O error" for a file system gone read-only (errors=remount-ro after an
 * I/O error) and keeps no usable errno, so the operator would not know what
 * to fix. "" when the file system shows nothing. */
static const char *os_reason(struct sqlite_store *s, char *buf, size_t len)
{
	int code = sqlite3_errcode(s->db);
	struct statvfs fs;
	buf[0] = '\0';
	if (code != SQLITE_IOERR && code != SQLITE_FULL && code != SQLITE_READONLY &&
	    code != SQLITE_CANTOPEN)
		return buf;
	if (statvfs(s->path, &fs) != 0)
		return buf;
	if (fs.f_flag & ST_RDONLY) {
		snprintf(buf, len, " (its file system is read-only)");
	} else if (fs.f_bavail == 0) {
		snprintf(buf, len, " (no space left on its file system)");
	} else {
		/* a file system shut to writes after an error (ext4's emergency
		 * read-only) still says rw in its flags: ask it */
		int e = create_beside(s);
		if (e)
			snprintf(buf, len, " (creating a file beside it: %s)", strerror(e));
	}
	return buf;
}

static void db_error(struct sqlite_store *s, const char *what, char *err, size_t errlen)
{
	char os[128];
	snprintf(err, errlen, "sqlite %s: %s: %s%s", s->path, what, sqlite3_errmsg(s->db),
		 os_reason(s, os, sizeof(os)));
}

static int exec(struct sqlite_store *s, const char *sql, char *err, size_t errlen)
{
	char *msg = NULL, os[128];
	if (sqlite3_exec(s->db, sql, NULL, NULL, &msg) == SQLITE_OK)
		return 0;
	snprintf(err, errlen, "sqlite %s: %s%s", s->path, msg ? msg : sqlite3_errmsg(s->db),
		 os_reason(s, os, sizeof(os)));
	sqlite3_free(msg);
	return -1;
}

static sqlite3_stmt *stmt(struct sqlite_store *s, enum stmt_id id)
{
	sqlite3_stmt *st = s->stmts[id];
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return st;
}

static void bind_text(sqlite3_stmt *st, int i, const char *v)
{
	sqlite3_bind_text(st, i, v ? v : "", -1, SQLITE_STATIC);
}

static void bind_u64(sqlite3_stmt *st, int i, uint64_t v)
{
	sqlite3_bind_int64(st, i, (sqlite3_int64)v);
}

static int step_done(struct sqlite_store *s, sqlite3_stmt *st, const char *what, char *err,
		     size_t errlen)
{
	if (sqlite3_step(st) == SQLITE_DONE)
		return 0;
	db_error(s, what, err, errlen);
	return -1;
}

/* The id of a row found by a unique key, inserting it first when missing. */
static int64_t upsert_id(struct sqlite_store *s, sqlite3_stmt *ins, sqlite3_stmt *sel,
			 const char *what, char *err, size_t errlen)
{
	if (step_done(s, ins, what, err, errlen) != 0)
		return -1;
	if (sqlite3_step(sel) != SQLITE_ROW) {
		db_error(s, what, err, errlen);
		return -1;
	}
	return sqlite3_column_int64(sel, 0);
}

static int64_t binary_id(struct sqlite_store *s, const Edgeprof__V1__BinaryProfile *bp, char *err,
			 size_t errlen)
{
	sqlite3_stmt *ins = stmt(s, S_BINARY_INSERT), *sel = stmt(s, S_BINARY_ID);
	bind_text(ins, 1, bp->build_id);
	bind_text(ins, 2, bp->arch);
	bind_text(sel, 1, bp->build_id);
	return upsert_id(s, ins, sel, "binary", err, errlen);
}

static int64_t labels_id(struct sqlite_store *s, const Edgeprof__V1__Labels *l, char *err,
			 size_t errlen)
{
	sqlite3_stmt *ins = stmt(s, S_LABELS_INSERT), *sel = stmt(s, S_LABELS_ID);
	const char *v[6] = {l ? l->container_id : "", l ? l->pod : "",	   l ? l->namespace_ : "",
			    l ? l->cgroup : "",	      l ? l->process : "", l ? l->session_id : ""};
	for (int i = 0; i < 6; i++) {
		bind_text(ins, i + 1, v[i]);
		bind_text(sel, i + 1, v[i]);
	}
	return upsert_id(s, ins, sel, "label set", err, errlen);
}

static int write_slice(struct sqlite_store *s, const struct ep_store_slice *sl, char *err,
		       size_t errlen)
{
	const Edgeprof__V1__BinaryProfile *bp = sl->delta->profile;
	int64_t bin = binary_id(s, bp, err, errlen);
	int64_t lab = bin < 0 ? -1 : labels_id(s, sl->delta->labels, err, errlen);
	if (bin < 0 || lab < 0)
		return -1;
	sqlite3_stmt *st;
	for (size_t i = 0; i < bp->n_paths; i++) {
		st = stmt(s, S_PATH);
		sqlite3_bind_int64(st, 1, bin);
		bind_text(st, 2, bp->paths[i]);
		if (step_done(s, st, "path", err, errlen) != 0)
			return -1;
	}
	if (bp->samples) {
		st = stmt(s, S_SAMPLES);
		sqlite3_bind_int64(st, 1, bin);
		sqlite3_bind_int64(st, 2, sl->bucket_s);
		sqlite3_bind_int64(st, 3, lab);
		bind_u64(st, 4, bp->samples);
		if (step_done(s, st, "samples", err, errlen) != 0)
			return -1;
	}
	for (size_t i = 0; i < bp->n_edges; i++) {
		const Edgeprof__V1__Edge *e = bp->edges[i];
		st = stmt(s, S_EDGE);
		sqlite3_bind_int64(st, 1, bin);
		sqlite3_bind_int64(st, 2, sl->bucket_s);
		sqlite3_bind_int64(st, 3, lab);
		bind_u64(st, 4, e->from);
		bind_u64(st, 5, e->to);
		sqlite3_bind_int(st, 6,
				 (e->taken ? 1 : 0) | (e->from_external ? 2 : 0) |
				     (e->to_external ? 4 : 0));
		sqlite3_bind_int(st, 7, (int)e->kind);
		bind_u64(st, 8, e->count);
		bind_u64(st, 9, e->mispredicted);
		if (step_done(s, st, "edge", err, errlen) != 0)
			return -1;
	}
	for (size_t i = 0; i < bp->n_ranges; i++) {
		st = stmt(s, S_RANGE);
		sqlite3_bind_int64(st, 1, bin);
		sqlite3_bind_int64(st, 2, sl->bucket_s);
		sqlite3_bind_int64(st, 3, lab);
		bind_u64(st, 4, bp->ranges[i]->start);
		bind_u64(st, 5, bp->ranges[i]->end);
		bind_u64(st, 6, bp->ranges[i]->count);
		/* one pair of columns per unit (ep_store_slice) */
		int c = sl->cycles_ns ? 9 : 7;
		sqlite3_bind_int64(st, sl->cycles_ns ? 7 : 9, 0);
		sqlite3_bind_int64(st, sl->cycles_ns ? 8 : 10, 0);
		bind_u64(st, c, bp->ranges[i]->cycles);
		bind_u64(st, c + 1, bp->ranges[i]->cycled_instructions);
		if (step_done(s, st, "range", err, errlen) != 0)
			return -1;
	}
	for (size_t i = 0; i < bp->n_ips; i++) {
		st = stmt(s, S_IP);
		sqlite3_bind_int64(st, 1, bin);
		sqlite3_bind_int64(st, 2, sl->bucket_s);
		sqlite3_bind_int64(st, 3, lab);
		bind_u64(st, 4, bp->ips[i]->ip);
		bind_u64(st, 5, bp->ips[i]->count);
		sqlite3_bind_int64(st, sl->cycles_ns ? 6 : 7, 0);
		bind_u64(st, sl->cycles_ns ? 7 : 6, bp->ips[i]->cycles);
		if (step_done(s, st, "ip", err, errlen) != 0)
			return -1;
	}
	for (size_t i = 0; i < bp->n_functions; i++) {
		st = stmt(s, S_FUNCTION);
		sqlite3_bind_int64(st, 1, bin);
		bind_u64(st, 2, bp->functions[i]->start);
		bind_text(st, 3, bp->functions[i]->name);
		bind_u64(st, 4, bp->functions[i]->size);
		sqlite3_bind_int64(st, 5, bp->functions[i]->local_index);
		if (step_done(s, st, "function", err, errlen) != 0)
			return -1;
	}
	for (size_t i = 0; i < bp->n_segments; i++) {
		st = stmt(s, S_SEGMENT);
		sqlite3_bind_int64(st, 1, bin);
		bind_u64(st, 2, bp->segments[i]->vaddr);
		bind_u64(st, 3, bp->segments[i]->offset);
		bind_u64(st, 4, bp->segments[i]->size);
		if (step_done(s, st, "segment", err, errlen) != 0)
			return -1;
	}
	return 0;
}

/*
 * Whether the commit SQLite just reported done is on disk: it is answered as
 * failed (503, the agents keep their batches) unless a file can be created
 * beside the store afterwards. ext4 under errors=remount-ro aborts its
 * journal on an error and shuts the file system to writes only once it has
 * written its superblock; an fdatasync in that window returns 0 for the
 * transaction the abort discarded, which held the WAL's growth, so the
 * commit is gone after e2fsck (issue 12: a batch acknowledged and lost in
 * about one run in four of the read-only test). Creating a file starts a
 * journal transaction, which an aborted journal refuses, and only a
 * remount undoes an abort: a file created after the fdatasync returned
 * shows that it returned before any abort, truthfully. One create and
 * unlink per commit, beside an fdatasync.
 */
static int confirm_on_disk(struct sqlite_store *s, char *err, size_t errlen)
{
	int e = create_beside(s);
	s->unconfirmed = e != 0;
	if (e)
		snprintf(err, errlen,
			 "sqlite %s: a commit may not be on disk: creating a file beside it: %s",
			 s->path, strerror(e));
	return e ? -1 : 0;
}

static int sqlite_write(struct ep_store *base, const struct ep_store_commit *c, char *err,
			size_t errlen)
{
	struct sqlite_store *s = (struct sqlite_store *)base;
	if (exec(s, "BEGIN IMMEDIATE", err, errlen) != 0)
		return -1;
	int rc = 0;
	for (size_t i = 0; i < c->nslices && rc == 0; i++)
		rc = write_slice(s, &c->slices[i], err, errlen);
	for (size_t i = 0; i < c->nbatches && rc == 0; i++) {
		sqlite3_stmt *st = stmt(s, S_BATCH);
		bind_text(st, 1, c->batches[i].agent_id);
		bind_u64(st, 2, c->batches[i].sequence);
		bind_text(st, 3, c->batches[i].node);
		sqlite3_bind_int64(st, 4, c->batches[i].received_s);
		rc = step_done(s, st, "batch id", err, errlen);
	}
	if (rc == 0 && exec(s, "COMMIT", err, errlen) == 0)
		return confirm_on_disk(s, err, errlen);
	char ignored[64];
	exec(s, "ROLLBACK", ignored, sizeof(ignored));
	return -1;
}

static int sqlite_prune(struct ep_store *base, int64_t before_s, char *err, size_t errlen)
{
	struct sqlite_store *s = (struct sqlite_store *)base;
	static const char *const sql[] = {
	    "DELETE FROM samples WHERE bucket < ?1",
	    "DELETE FROM edges WHERE bucket < ?1",
	    "DELETE FROM ranges WHERE bucket < ?1",
	    "DELETE FROM ips WHERE bucket < ?1",
	    "DELETE FROM batches WHERE received < ?1",
	    /* finished sessions; one that failed before it started has no end */
	    ("DELETE FROM sessions WHERE state IN (2, 3) AND"
	     " (CASE WHEN ended_s != 0 THEN ended_s ELSE created_s END) < ?1"),
	    "DELETE FROM nodes WHERE seen_ns < ?1 * 1000000000",
	    /* after the counts: an image goes with the last of them. Samples
	     * say whether a binary has counts (ingest refuses edges, ranges
	     * and IPs beyond what its samples allow) */
	    ("DELETE FROM binary_images WHERE uploaded_s < ?1 AND NOT EXISTS (SELECT 1 FROM"
	     " binaries b JOIN samples m ON m.binary_id = b.id"
	     " WHERE b.build_id = binary_images.build_id)"),
	};
	if (exec(s, "BEGIN IMMEDIATE", err, errlen) != 0)
		return -1;
	for (size_t i = 0; i < sizeof(sql) / sizeof(sql[0]); i++) {
		sqlite3_stmt *st = NULL;
		int rc = sqlite3_prepare_v2(s->db, sql[i], -1, &st, NULL) == SQLITE_OK ? 0 : -1;
		if (rc == 0) {
			sqlite3_bind_int64(st, 1, before_s);
			rc = step_done(s, st, "prune", err, errlen);
		} else {
			db_error(s, "prune", err, errlen);
		}
		sqlite3_finalize(st);
		if (rc != 0) {
			char ignored[64];
			exec(s, "ROLLBACK", ignored, sizeof(ignored));
			return -1;
		}
	}
	return exec(s, "COMMIT", err, errlen);
}

static int sqlite_has_batch(struct ep_store *base, const char *agent_id, uint64_t sequence,
			    char *err, size_t errlen)
{
	struct sqlite_store *s = (struct sqlite_store *)base;
	/* SQLite shows an unconfirmed commit's batch ids: "already stored"
	 * would make an agent drop a batch that a repair may take away */
	if (s->unconfirmed && confirm_on_disk(s, err, errlen) != 0)
		return -1;
	sqlite3_stmt *st = stmt(s, S_HAS_BATCH);
	bind_text(st, 1, agent_id);
	bind_u64(st, 2, sequence);
	int r = sqlite3_step(st);
	if (r == SQLITE_ROW)
		return 1;
	if (r == SQLITE_DONE)
		return 0;
	db_error(s, "batch lookup", err, errlen);
	return -1;
}

/* The WHERE clause of a filter over a count table aliased t; parameters are
 * bound by bind_filter. The label sets the filter takes are chosen once per
 * query, not looked up for every count row: with a million label sets (a
 * cluster's pod churn) joining label_sets to each row took most of a
 * listing's time. Always one side: the continuous profile (every set but the
 * few of sessions, found by label_sets_by_session) or one session. */
static void filter_sql(const struct ep_store_filter *f, char *out, size_t len)
{
	bool labels = f->container_id || f->pod || f->namespace_ || f->cgroup || f->process ||
		      (f->session_id && *f->session_id);
	snprintf(out, len, "%s%s%s%s%s%s%s%s%s%s",
		 f->build_id ? " AND t.binary_id = (SELECT id FROM binaries "
			       "WHERE build_id = :build_id)"
			     : "",
		 f->from_s ? " AND t.bucket >= :from" : "", f->to_s ? " AND t.bucket < :to" : "",
		 labels ? " AND t.label_set IN (SELECT l.id FROM label_sets l"
			  " WHERE l.session_id = :session_id"
			: " AND t.label_set NOT IN (SELECT l.id FROM label_sets l"
			  " WHERE l.session_id > ''",
		 f->container_id ? " AND l.container_id = :container_id" : "",
		 f->pod ? " AND l.pod = :pod" : "",
		 f->namespace_ ? " AND l.namespace = :namespace" : "",
		 f->cgroup ? " AND l.cgroup = :cgroup" : "",
		 f->process ? " AND l.process = :process" : "", ")");
}

static void bind_filter(sqlite3_stmt *st, const struct ep_store_filter *f)
{
	const struct {
		const char *name, *value;
	} texts[] = {{":build_id", f->build_id},
		     {":container_id", f->container_id},
		     {":pod", f->pod},
		     {":namespace", f->namespace_},
		     {":cgroup", f->cgroup},
		     {":process", f->process},
		     {":session_id", f->session_id ? f->session_id : ""}};
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		int idx = sqlite3_bind_parameter_index(st, texts[i].name);
		if (idx)
			bind_text(st, idx, texts[i].value);
	}
	int idx = sqlite3_bind_parameter_index(st, ":from");
	if (idx)
		sqlite3_bind_int64(st, idx, f->from_s);
	idx = sqlite3_bind_parameter_index(st, ":to");
	if (idx)
		sqlite3_bind_int64(st, idx, f->to_s);
}

/* A statement for sql, reset with no bindings, from the cache (prepared on
 * first use); give it back with done_query before the store is unlocked, so
 * that no read stays open. NULL with err. */
static sqlite3_stmt *query(struct sqlite_store *s, const char *sql, char *err, size_t errlen)
{
	uint64_t hash = ep_hash_bytes(sql, strlen(sql));
	struct cached_query *slot = &s->queries[0];
	for (size_t i = 0; i < QUERY_CACHE; i++) {
		struct cached_query *q = &s->queries[i];
		if (q->sql && q->hash == hash && strcmp(q->sql, sql) == 0) {
			q->used = ++s->query_clock;
			return q->st;
		}
		if (!q->sql || q->used < slot->used)
			slot = q;
	}
	char *copy = strdup(sql);
	sqlite3_stmt *st = NULL;
	if (!copy) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL) != SQLITE_OK) {
		db_error(s, "query", err, errlen);
		sqlite3_finalize(st);
		free(copy);
		return NULL;
	}
	sqlite3_finalize(slot->st);
	free(slot->sql);
	*slot =
	    (struct cached_query){.sql = copy, .hash = hash, .st = st, .used = ++s->query_clock};
	return st;
}

static void done_query(sqlite3_stmt *st)
{
	if (st) {
		sqlite3_reset(st);
		sqlite3_clear_bindings(st);
	}
}

static sqlite3_stmt *prepare_filtered(struct sqlite_store *s, const char *fmt,
				      const struct ep_store_filter *f, char *err, size_t errlen)
{
	char where[1024], sql[4096];
	filter_sql(f, where, sizeof(where));
	snprintf(sql, sizeof(sql), fmt, where);
	sqlite3_stmt *st = query(s, sql, err, errlen);
	if (st)
		bind_filter(st, f);
	return st;
}

/* A row of a statement as ep_store_row reads it, from column first on. */
struct sqlite_row {
	sqlite3_stmt *st;
	int first;
};

static uint64_t row_number(void *ctx, int column)
{
	const struct sqlite_row *r = ctx;
	return (uint64_t)sqlite3_column_int64(r->st, r->first + column);
}

static const char *row_text(void *ctx, int column)
{
	const struct sqlite_row *r = ctx;
	const unsigned char *t = sqlite3_column_text(r->st, r->first + column);
	return t ? (const char *)t : "";
}

static char *dup_col(sqlite3_stmt *st, int col)
{
	const unsigned char *t = sqlite3_column_text(st, col);
	return strdup(t ? (const char *)t : "");
}

/* b's paths (the first EP_STORE_PATHS_MAX by name). */
static int list_paths(Edgeprof__V1__BinaryInfo *b, int64_t id, sqlite3_stmt *paths)
{
	sqlite3_reset(paths);
	sqlite3_bind_int64(paths, 1, id);
	while (sqlite3_step(paths) == SQLITE_ROW) {
		char *p = dup_col(paths, 0);
		if (!p || EP_PB_APPEND(b->paths, b->n_paths, p) != 0) {
			free(p);
			return -1;
		}
	}
	return 0;
}

/* b's label sets under the filter labels was prepared with, grouped in the
 * query and summarised as they come (ep_label_summary): a million of them
 * take the same memory as a hundred. */
static int list_labels(Edgeprof__V1__BinaryInfo *b, int64_t id, sqlite3_stmt *labels, size_t n)
{
	struct ep_label_summary *sum = ep_label_summary_new(n);
	if (!sum)
		return -1;
	sqlite3_reset(labels);
	sqlite3_bind_int64(labels, sqlite3_bind_parameter_index(labels, ":bin"), id);
	struct sqlite_row r = {.st = labels};
	struct ep_store_row row = {.ctx = &r, .number = row_number, .text = row_text};
	int rc = 0;
	while (rc == 0 && sqlite3_step(labels) == SQLITE_ROW)
		rc = ep_label_summary_add(sum, &row);
	if (rc == 0)
		rc = ep_label_summary_finish(sum, b);
	ep_label_summary_free(sum);
	sqlite3_reset(labels);
	return rc;
}

/* The binaries under f and their totals, when asked: one pass over the
 * samples. */
static int list_totals(struct sqlite_store *s, const struct ep_store_filter *f,
		       Edgeprof__V1__BinaryList *list, char *err, size_t errlen)
{
	sqlite3_stmt *q = prepare_filtered(
	    s, "SELECT COUNT(DISTINCT t.binary_id), SAT_SUM(t.count) FROM samples t WHERE 1%s", f,
	    err, errlen);
	if (!q)
		return -1;
	int rc = sqlite3_step(q) == SQLITE_ROW ? 0 : -1;
	if (rc == 0) {
		list->total_binaries = (uint64_t)sqlite3_column_int64(q, 0);
		list->total_samples = (uint64_t)sqlite3_column_int64(q, 1);
	} else {
		db_error(s, "list", err, errlen);
	}
	done_query(q);
	return rc;
}

static Edgeprof__V1__BinaryList *sqlite_list(struct ep_store *base, const struct ep_store_filter *f,
					     const struct ep_store_page *page, char *err,
					     size_t errlen)
{
	struct sqlite_store *s = (struct sqlite_store *)base;
	Edgeprof__V1__BinaryList *list = malloc(sizeof(*list));
	if (!list) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	edgeprof__v1__binary_list__init(list);
	/* one more than the page: whether others follow. Grouped by build-id
	 * (unique), so that in its order the groups come from its index and
	 * the LIMIT ends the scan */
	char fmt[1024];
	snprintf(fmt, sizeof(fmt),
		 "SELECT b.id, b.build_id, b.arch, SAT_SUM(t.count), MIN(t.bucket), MAX(t.bucket)"
		 " FROM binaries b JOIN samples t ON t.binary_id = b.id WHERE 1%s%%s"
		 " GROUP BY b.build_id ORDER BY %s LIMIT :limit OFFSET :offset",
		 page->after && !page->by_samples ? " AND b.build_id > :after" : "",
		 page->by_samples ? "4 DESC, b.build_id" : "b.build_id");
	sqlite3_stmt *q = prepare_filtered(s, fmt, f, err, errlen);
	sqlite3_stmt *paths = NULL, *labels = NULL;
	if (!q)
		goto fail;
	int idx = sqlite3_bind_parameter_index(q, ":after");
	if (idx)
		bind_text(q, idx, page->after);
	sqlite3_bind_int64(q, sqlite3_bind_parameter_index(q, ":limit"),
			   (sqlite3_int64)page->limit + 1);
	sqlite3_bind_int64(q, sqlite3_bind_parameter_index(q, ":offset"),
			   page->by_samples ? (sqlite3_int64)page->offset : 0);
	paths =
	    query(s, "SELECT path FROM binary_paths WHERE binary_id = ?1 ORDER BY path LIMIT 100",
		  err, errlen);
	if (!paths)
		goto fail;
	if (page->labels) {
		/* summed as they come, in samples_by_label_set's order: no
		 * sort, and no table of the sums, whose size the label sets
		 * decide */
		labels = prepare_filtered(
		    s,
		    "SELECT l.container_id, l.pod, l.namespace, l.cgroup, l.process, l.session_id,"
		    " SAT_SUM(t.count) FROM samples t INDEXED BY samples_by_label_set"
		    " JOIN label_sets l ON l.id = t.label_set WHERE t.binary_id = :bin%s"
		    " GROUP BY t.label_set",
		    f, err, errlen);
		if (!labels)
			goto fail;
	}
	struct sqlite_row r = {.st = q, .first = 1}; /* column 0: the binary's id */
	struct ep_store_row row = {.ctx = &r, .number = row_number, .text = row_text};
	int step;
	while ((step = sqlite3_step(q)) == SQLITE_ROW) {
		if (list->n_binaries == page->limit) {
			list->more = true;
			continue;
		}
		Edgeprof__V1__BinaryInfo *b;
		int64_t id = sqlite3_column_int64(q, 0);
		if (ep_store_add_binary(list, &row, &b) != 0 || list_paths(b, id, paths) != 0 ||
		    (labels && list_labels(b, id, labels, page->labels) != 0))
			goto oom;
	}
	if (step != SQLITE_DONE) {
		db_error(s, "list", err, errlen);
		goto fail;
	}
	done_query(q);
	done_query(paths);
	done_query(labels);
	if (page->totals && list_totals(s, f, list, err, errlen) != 0)
		goto fail;
	return list;
oom:
	snprintf(err, errlen, "out of memory");
fail:
	done_query(q);
	done_query(paths);
	done_query(labels);
	ep_store_free_list(list);
	return NULL;
}

/* Each part's query: counts under the filter (prepare_filtered), metadata
 * by build-id (?1). */
static const char *const part_sql[EP_STORE_NPARTS] = {
    [EP_PART_EDGES] = "SELECT t.from_addr, t.to_addr, t.flags, MAX(t.kind), SAT_SUM(t.count),"
		      " SAT_SUM(t.mispredicted) FROM edges t WHERE 1%s GROUP BY 1, 2, 3",
    [EP_PART_RANGES] = "SELECT t.start_addr, t.end_addr, SAT_SUM(t.count), SAT_SUM(t.cycles),"
		       " SAT_SUM(t.cycled_insns), SAT_SUM(t.ns), SAT_SUM(t.ns_insns) FROM ranges t"
		       " WHERE 1%s GROUP BY 1, 2",
    [EP_PART_IPS] = "SELECT t.ip, SAT_SUM(t.count), SAT_SUM(t.cycles), SAT_SUM(t.ns) FROM ips t"
		    " WHERE 1%s GROUP BY 1 ORDER BY 1",
    [EP_PART_FUNCTIONS] = "SELECT f.start_addr, f.name, f.size, f.local_index FROM functions f"
			  " JOIN binaries b"
			  " ON b.id = f.binary_id WHERE b.build_id = ?1 ORDER BY 1, 2",
    [EP_PART_SEGMENTS] = ("SELECT g.vaddr, g.file_offset, g.size FROM segments g JOIN binaries b"
			  " ON b.id = g.binary_id WHERE b.build_id = ?1 ORDER BY 1"),
};

static int sqlite_read_part(struct ep_store *base, const struct ep_store_filter *f,
			    enum ep_store_part part, struct ep_store_read *rd, char *err,
			    size_t errlen)
{
	struct sqlite_store *s = (struct sqlite_store *)base;
	sqlite3_stmt *q = NULL;
	if (part == EP_PART_FUNCTIONS || part == EP_PART_SEGMENTS) {
		if (!(q = query(s, part_sql[part], err, errlen)))
			return -1;
		bind_text(q, 1, f->build_id);
	} else if (!(q = prepare_filtered(s, part_sql[part], f, err, errlen))) {
		return -1;
	}
	struct sqlite_row r = {.st = q};
	struct ep_store_row row = {.ctx = &r, .number = row_number, .text = row_text};
	int rc = 0;
	while (rc == 0 && sqlite3_step(q) == SQLITE_ROW)
		rc = ep_store_add_row(rd, part, &row);
	done_query(q);
	if (rc != 0)
		snprintf(err, errlen, "out of memory");
	return rc;
}

static int sqlite_session_put(struct ep_store *base, const Edgeprof__V1__Session *session,
			      const uint8_t *record, size_t len, char *err, size_t errlen)
{
	struct sqlite_store *s = (struct sqlite_store *)base;
	sqlite3_stmt *st = stmt(s, S_SESSION_PUT);
	bind_text(st, 1, session->id);
	sqlite3_bind_int(st, 2, (int)session->state);
	sqlite3_bind_int64(st, 3, session->created_s);
	sqlite3_bind_int64(st, 4, session->ended_s);
	bind_u64(st, 5, session->updated_ns);
	sqlite3_bind_blob(st, 6, len ? (const void *)record : "", (int)len, SQLITE_STATIC);
	return step_done(s, st, "session", err, errlen);
}

/* The record of the row st stands on, copied (column 0). */
static int copy_record(sqlite3_stmt *st, uint8_t **record, size_t *len)
{
	const void *blob = sqlite3_column_blob(st, 0);
	*len = (size_t)sqlite3_column_bytes(st, 0);
	*record = malloc(*len ? *len : 1);
	if (!*record)
		return -1;
	if (*len)
		memcpy(*record, blob, *len);
	return 0;
}

static int sqlite_session_get(struct ep_store *base, const char *id, uint8_t **record, size_t *len,
			      char *err, size_t errlen)
{
	struct sqlite_store *s = (struct sqlite_store *)base;
	sqlite3_stmt *st = stmt(s, S_SESSION_GET);
	bind_text(st, 1, id);
	int r = sqlite3_step(st);
	if (r == SQLITE_DONE)
		return 0;
	if (r != SQLITE_ROW) {
		db_error(s, "session lookup", err, errlen);
		return -1;
	}
	int rc = copy_record(st, record, len) == 0 ? 1 : -1;
	/* a statement left on a row holds its read snapshot, and another
	 * handle's write since would then make this handle's next write fail
	 * as busy (tests open replicas' handles on one file) */
	sqlite3_reset(st);
	if (rc < 0)
		snprintf(err, errlen, "out of memory");
	return rc;
}

/* Calls add with each row's first column (a serialised session) of the bound
 * statement st; 0, or -1 with err. */
static int session_records(struct sqlite_store *s, sqlite3_stmt *st,
			   int (*add)(void *ctx, const uint8_t *record, size_t len), void *ctx,
			   char *err, size_t errlen)
{
	int r;
	while ((r = sqlite3_step(st)) == SQLITE_ROW) {
		const void *blob = sqlite3_column_blob(st, 0);
		int n = sqlite3_column_bytes(st, 0);
		if (add(ctx, blob ? blob : "", (size_t)n) != 0) {
			snprintf(err, errlen, "out of memory");
			sqlite3_reset(st);
			return -1;
		}
	}
	if (r != SQLITE_DONE) {
		db_error(s, "sessions", err, errlen);
		sqlite3_reset(st);
		return -1;
	}
	sqlite3_reset(st);
	return 0;
}

static int sqlite_sessions_unfinished(struct ep_store *base,
				      int (*add)(void *ctx, const uint8_t *record, size_t len),
				      void *ctx, char *err, size_t errlen)
{
	struct sqlite_store *s = (struct sqlite_store *)base;
	sqlite3_stmt *st = stmt(s, S_SESSIONS_UNFINISHED);
	sqlite3_bind_int(st, 1, EDGEPROF__V1__SESSION_STATE__SESSION_PENDING);
	sqlite3_bind_int(st, 2, EDGEPROF__V1__SESSION_STATE__SESSION_RUNNING);
	return session_records(s, st, add, ctx, err, errlen);
}

static int sqlite_sessions_finished(struct ep_store *base, size_t limit,
				    int (*add)(void *ctx, const uint8_t *record, size_t len),
				    void *ctx, char *err, size_t errlen)
{
	struct sqlite_store *s = (struct sqlite_store *)base;
	sqlite3_stmt *st = stmt(s, S_SESSIONS_FINISHED);
	sqlite3_bind_int(st, 1, EDGEPROF__V1__SESSION_STATE__SESSION_DONE);
	sqlite3_bind_int(st, 2, EDGEPROF__V1__SESSION_STATE__SESSION_FAILED);
	sqlite3_bind_int64(st, 3, limit > INT64_MAX ? INT64_MAX : (sqlite3_int64)limit);
	return session_records(s, st, add, ctx, err, errlen);
}

static int sqlite_nodes_put(struct ep_store *base, const struct ep_store_node_row *rows, size_t n,
			    char *err, size_t errlen)
{
	struct sqlite_store *s = (struct sqlite_store *)base;
	if (exec(s, "BEGIN IMMEDIATE", err, errlen) != 0)
		return -1;
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		sqlite3_stmt *st = stmt(s, S_NODE_PUT);
		bind_text(st, 1, rows[i].name);
		bind_u64(st, 2, rows[i].seen_ns);
		sqlite3_bind_blob(st, 3, rows[i].len ? (const void *)rows[i].record : "",
				  (int)rows[i].len, SQLITE_STATIC);
		bind_u64(st, 4, rows[i].samples);
		bind_u64(st, 5, rows[i].samples_with_branches);
		bind_u64(st, 6, rows[i].lost);
		rc = step_done(s, st, "node", err, errlen);
	}
	if (rc == 0 && exec(s, "COMMIT", err, errlen) == 0)
		return 0;
	char ignored[64];
	exec(s, "ROLLBACK", ignored, sizeof(ignored));
	return -1;
}

static int sqlite_nodes_get(struct ep_store *base,
			    int (*add)(void *ctx, const struct ep_store_node_row *row), void *ctx,
			    char *err, size_t errlen)
{
	struct sqlite_store *s = (struct sqlite_store *)base;
	sqlite3_stmt *st = stmt(s, S_NODES);
	int r;
	while ((r = sqlite3_step(st)) == SQLITE_ROW) {
		const void *blob = sqlite3_column_blob(st, 2);
		const unsigned char *name = sqlite3_column_text(st, 0);
		struct ep_store_node_row row = {.name = name ? (const char *)name : "",
						.seen_ns = (uint64_t)sqlite3_column_int64(st, 1),
						.record = blob ? blob : (const void *)"",
						.len = (size_t)sqlite3_column_bytes(st, 2),
						.samples = (uint64_t)sqlite3_column_int64(st, 3),
						.samples_with_branches =
						    (uint64_t)sqlite3_column_int64(st, 4),
						.lost = (uint64_t)sqlite3_column_int64(st, 5)};
		if (add(ctx, &row) != 0) {
			snprintf(err, errlen, "out of memory");
			sqlite3_reset(st);
			return -1;
		}
	}
	if (r != SQLITE_DONE) {
		db_error(s, "nodes", err, errlen);
		sqlite3_reset(st);
		return -1;
	}
	sqlite3_reset(st);
	return 0;
}

/* The trust of build_id's image, 0 when none, -1 on error; with its bytes
 * when image is not NULL. */
static int image_row(struct sqlite_store *s, const char *build_id, uint8_t **image, size_t *len,
		     char *err, size_t errlen)
{
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(s->db,
			       image ? "SELECT image, trust FROM binary_images WHERE build_id = ?1"
				     : "SELECT NULL, trust FROM binary_images WHERE build_id = ?1",
			       -1, &st, NULL) != SQLITE_OK) {
		db_error(s, "binary image", err, errlen);
		return -1;
	}
	bind_text(st, 1, build_id);
	int r = sqlite3_step(st);
	if (r == SQLITE_ROW) {
		/* files from before trust was kept hold agents' images as
		 * much as uploads': provisional, as the column's default */
		r = sqlite3_column_int(st, 1) >= EP_IMAGE_TRUSTED ? EP_IMAGE_TRUSTED
								  : EP_IMAGE_PROVISIONAL;
		if (image && copy_record(st, image, len) != 0)
			r = -2;
	} else if (r == SQLITE_DONE) {
		r = 0;
	} else {
		r = -1;
	}
	if (r == -1)
		db_error(s, "binary image", err, errlen);
	else if (r == -2)
		snprintf(err, errlen, "out of memory");
	sqlite3_finalize(st);
	return r < 0 ? -1 : r;
}

static int sqlite_image_put(struct ep_store *base, const char *build_id, int64_t uploaded_s,
			    enum ep_image_trust trust, const uint8_t *image, size_t len, char *err,
			    size_t errlen)
{
	struct sqlite_store *s = (struct sqlite_store *)base;
	/* what was there decides the answer; the statement alone decides
	 * what is kept, so collectors sharing the file cannot undo a trusted
	 * image between the two */
	int had = image_row(s, build_id, NULL, NULL, err, errlen);
	if (had < 0)
		return -1;
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(s->db,
			       "INSERT INTO binary_images(build_id, uploaded_s, image, trust)"
			       " VALUES(?1, ?2, ?3, ?4) ON CONFLICT(build_id) DO UPDATE SET"
			       " uploaded_s = excluded.uploaded_s, image = excluded.image,"
			       " trust = excluded.trust WHERE excluded.trust > binary_images.trust",
			       -1, &st, NULL) != SQLITE_OK) {
		db_error(s, "binary image", err, errlen);
		return -1;
	}
	bind_text(st, 1, build_id);
	sqlite3_bind_int64(st, 2, uploaded_s);
	sqlite3_bind_blob64(st, 3, len ? (const void *)image : "", len, SQLITE_STATIC);
	sqlite3_bind_int(st, 4, (int)trust);
	int r = sqlite3_step(st) == SQLITE_DONE ? sqlite3_changes(s->db) > 0 : -1;
	if (r < 0)
		db_error(s, "binary image", err, errlen);
	sqlite3_finalize(st);
	return r > 0 && had ? 2 : r;
}

static int sqlite_image_get(struct ep_store *base, const char *build_id, uint8_t **image,
			    size_t *len, char *err, size_t errlen)
{
	return image_row((struct sqlite_store *)base, build_id, image, len, err, errlen);
}

static void sqlite_close(struct ep_store *base)
{
	struct sqlite_store *s = (struct sqlite_store *)base;
	for (int i = 0; i < NSTMTS; i++)
		sqlite3_finalize(s->stmts[i]);
	for (size_t i = 0; i < QUERY_CACHE; i++) {
		sqlite3_finalize(s->queries[i].st);
		free(s->queries[i].sql);
	}
	sqlite3_close(s->db);
	free(s->path);
	free(s);
}

/* All of SQLite's heap in the process: the collector opens one store. */
static uint64_t sqlite_memory_bytes(struct ep_store *base)
{
	(void)base;
	sqlite3_int64 used = 0, highest = 0;
	if (sqlite3_status64(SQLITE_STATUS_MEMORY_USED, &used, &highest, 0) != SQLITE_OK)
		return 0;
	return used > 0 ? (uint64_t)used : 0;
}

/* A statement stepped to a row and left there (a lookup that found what it
 * looked for) holds a read transaction at its snapshot until it is reset:
 * checkpoints cannot pass that snapshot, so the WAL grew with every write
 * for as long as the collector ran (316 MB over a 4 KB database after a
 * million label sets). Every call ends by resetting what is still busy. */
static void sqlite_release(struct ep_store *base)
{
	struct sqlite_store *s = (struct sqlite_store *)base;
	for (sqlite3_stmt *st = sqlite3_next_stmt(s->db, NULL); st;
	     st = sqlite3_next_stmt(s->db, st))
		if (sqlite3_stmt_busy(st))
			sqlite3_reset(st);
}

static const struct ep_store_ops sqlite_ops = {
    .kind = "sqlite",
    .keeps_batches = false,
    .close = sqlite_close,
    .memory_bytes = sqlite_memory_bytes,
    .has_batch = sqlite_has_batch,
    .write = sqlite_write,
    .prune = sqlite_prune,
    .list_binaries = sqlite_list,
    .read_part = sqlite_read_part,
    .session_put = sqlite_session_put,
    .session_get = sqlite_session_get,
    .sessions_unfinished = sqlite_sessions_unfinished,
    .sessions_finished = sqlite_sessions_finished,
    .nodes_put = sqlite_nodes_put,
    .nodes_get = sqlite_nodes_get,
    .image_put = sqlite_image_put,
    .release = sqlite_release,
    .image_get = sqlite_image_get,
};

static int user_version(struct sqlite_store *s)
{
	sqlite3_stmt *v = NULL;
	int version = -1;
	if (sqlite3_prepare_v2(s->db, "PRAGMA user_version", -1, &v, NULL) == SQLITE_OK &&
	    sqlite3_step(v) == SQLITE_ROW)
		version = sqlite3_column_int(v, 0);
	sqlite3_finalize(v);
	return version;
}

static int newer_schema(struct sqlite_store *s, int version, char *err, size_t errlen)
{
	if (version <= SCHEMA_VERSION)
		return 0;
	snprintf(err, errlen,
		 "sqlite %s: schema version %d is newer than this collector's (%d): "
		 "use a newer edgeprof",
		 s->path, version, SCHEMA_VERSION);
	return -1;
}

/* 1 when table exists without column (a file from before that column, or
 * one whose version was never written), 0 when not, -1 on error. Decided by
 * the columns rather than user_version so that both cases migrate. */
static int lacks_column(struct sqlite_store *s, const char *table, const char *column, char *err,
			size_t errlen)
{
	sqlite3_stmt *q = NULL;
	int r = -1;
	if (sqlite3_prepare_v2(s->db,
			       "SELECT COUNT(*), COALESCE(SUM(name = ?2), 0)"
			       " FROM pragma_table_info(?1)",
			       -1, &q, NULL) == SQLITE_OK &&
	    sqlite3_bind_text(q, 1, table, -1, SQLITE_STATIC) == SQLITE_OK &&
	    sqlite3_bind_text(q, 2, column, -1, SQLITE_STATIC) == SQLITE_OK &&
	    sqlite3_step(q) == SQLITE_ROW)
		r = sqlite3_column_int(q, 0) > 0 && sqlite3_column_int(q, 1) == 0;
	else
		db_error(s, "schema", err, errlen);
	sqlite3_finalize(q);
	return r;
}

/* Version 2 to 3: functions gains local_index, a plain column with a
 * default, which SQLite adds in place. */
static int add_local_index_column(struct sqlite_store *s, char *err, size_t errlen)
{
	int missing = lacks_column(s, "functions", "local_index", err, errlen);
	if (missing <= 0)
		return missing;
	return exec(s, "ALTER TABLE functions ADD COLUMN local_index INTEGER NOT NULL DEFAULT 0",
		    err, errlen);
}

/* Version 3 to 4: ranges gain the branch records' cycles (issue 14),
 * plain columns with a default, added in place. */
static int add_cycles_columns(struct sqlite_store *s, char *err, size_t errlen)
{
	int missing = lacks_column(s, "ranges", "cycles", err, errlen);
	if (missing <= 0)
		return missing;
	return exec(s,
		    "ALTER TABLE ranges ADD COLUMN cycles INTEGER NOT NULL DEFAULT 0;"
		    "ALTER TABLE ranges ADD COLUMN cycled_insns INTEGER NOT NULL DEFAULT 0",
		    err, errlen);
}

/* Version 4 to 5: IPs gain agent --cycles' cycles, and ranges and IPs
 * the cpu-clock nanoseconds that stand in for cycles on nodes without a
 * cycles event, in columns of their own so that neither unit is ever added
 * to the other (ep_store_slice). */
static int add_ns_columns(struct sqlite_store *s, char *err, size_t errlen)
{
	int missing = lacks_column(s, "ips", "ns", err, errlen);
	if (missing <= 0)
		return missing;
	return exec(s,
		    "ALTER TABLE ips ADD COLUMN cycles INTEGER NOT NULL DEFAULT 0;"
		    "ALTER TABLE ips ADD COLUMN ns INTEGER NOT NULL DEFAULT 0;"
		    "ALTER TABLE ranges ADD COLUMN ns INTEGER NOT NULL DEFAULT 0;"
		    "ALTER TABLE ranges ADD COLUMN ns_insns INTEGER NOT NULL DEFAULT 0",
		    err, errlen);
}

/* Images from before trust was kept (ep_image_trust): provisional, since
 * anyone who could reach the collector could have sent them. A plain column
 * with a default, added in place: an older collector still writes the file
 * (its images provisional). */
static int add_trust_column(struct sqlite_store *s, char *err, size_t errlen)
{
	int missing = lacks_column(s, "binary_images", "trust", err, errlen);
	if (missing <= 0)
		return missing;
	return exec(s, "ALTER TABLE binary_images ADD COLUMN trust INTEGER NOT NULL DEFAULT 1", err,
		    errlen);
}

/* Creates or upgrades the schema in one transaction: a collector killed
 * half-way leaves the old schema, and two collectors opening one file do it
 * once (the second sees the first's result under its own lock). */
static int set_up_schema(struct sqlite_store *s, char *err, size_t errlen)
{
	if (exec(s, "BEGIN IMMEDIATE", err, errlen) != 0)
		return -1;
	char pragma[64];
	snprintf(pragma, sizeof(pragma), "PRAGMA user_version = %d", SCHEMA_VERSION);
	int rc = newer_schema(s, user_version(s), err, errlen);
	int migrate = rc == 0 ? lacks_column(s, "label_sets", "session_id", err, errlen) : -1;
	if (migrate < 0 || (migrate && exec(s, migrate_v1, err, errlen) != 0) ||
	    exec(s, schema, err, errlen) != 0 || add_local_index_column(s, err, errlen) != 0 ||
	    add_cycles_columns(s, err, errlen) != 0 || add_ns_columns(s, err, errlen) != 0 ||
	    add_trust_column(s, err, errlen) != 0 || exec(s, pragma, err, errlen) != 0 ||
	    exec(s, "COMMIT", err, errlen) != 0) {
		char ignored[64];
		exec(s, "ROLLBACK", ignored, sizeof(ignored));
		return -1;
	}
	return 0;
}

struct ep_store *ep_store_sqlite_open(const char *location, char *err, size_t errlen)
{
	struct sqlite_store *s = calloc(1, sizeof(*s));
	if (!s || !(s->path = strdup(location))) {
		free(s);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	s->base.ops = &sqlite_ops;
	/* no mutex of SQLite's own: store.c serialises every call, and a
	 * listing's million rows each took and gave it back per column */
	if (sqlite3_open_v2(location, &s->db,
			    SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
			    NULL) != SQLITE_OK) {
		snprintf(err, errlen, "sqlite %s: cannot open: %s", location,
			 s->db ? sqlite3_errmsg(s->db) : "out of memory");
		sqlite_close(&s->base);
		return NULL;
	}
	sqlite3_busy_timeout(s->db, 10000);
	if (register_functions(s->db) != 0) {
		db_error(s, "functions", err, errlen);
		sqlite_close(&s->base);
		return NULL;
	}
	int version = user_version(s);
	if (version < 0) {
		db_error(s, "not a database", err, errlen);
		sqlite_close(&s->base);
		return NULL;
	}
	/* refused before anything (journal mode included) is written to it */
	if (newer_schema(s, version, err, errlen) != 0) {
		sqlite_close(&s->base);
		return NULL;
	}
	if (exec(s, "PRAGMA journal_mode = WAL", err, errlen) != 0 ||
	    exec(s, "PRAGMA synchronous = FULL", err, errlen) != 0 ||
	    exec(s, "PRAGMA cache_size = -65536", err, errlen) != 0 ||
	    exec(s, "PRAGMA temp_store = MEMORY", err, errlen) != 0 ||
	    set_up_schema(s, err, errlen) != 0) {
		sqlite_close(&s->base);
		return NULL;
	}
	/* said now rather than as a 503 for every batch: each commit is
	 * confirmed by creating a file beside the store (confirm_on_disk) */
	int e = create_beside(s);
	if (e) {
		snprintf(err, errlen, "sqlite %s: cannot create a file beside it: %s", location,
			 strerror(e));
		sqlite_close(&s->base);
		return NULL;
	}
	for (int i = 0; i < NSTMTS; i++) {
		if (sqlite3_prepare_v3(s->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
				       &s->stmts[i], NULL) != SQLITE_OK) {
			db_error(s, "prepare", err, errlen);
			sqlite_close(&s->base);
			return NULL;
		}
	}
	return &s->base;
}
