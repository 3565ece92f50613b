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
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "collector/store/store_backend.h"
#include "common/profile/model.h"
#include "common/util/clock.h"
#include "common/util/log.h"
#include "common/util/regular_file.h"
#include "common/util/sat.h"
#include "common/util/u64map.h"

/* 2: label_sets.session_id (in its UNIQUE key), the sessions table
 * 3: functions.local_index (BOLT's NAME/N of a local function)
 * 4: ranges.cycles, ranges.cycled_insns
 * 5: ips.cycles, and the cpu-clock nanoseconds apart from cycles: ranges.ns,
 *    ranges.ns_insns, ips.ns
 * 6: label values interned (label_values, label_sets.v_*) and the listings'
 *    rollups (label_totals, label_hours, binary_totals, binary_hours,
 *    binary_minutes), kept in every write's transaction: a collector that
 *    does not keep them must not write the file */
#define SCHEMA_VERSION 6

enum stmt_id {
	S_BINARY_INSERT,
	S_BINARY_ID,
	S_PATH,
	S_LABELS_INSERT,
	S_LABELS_ID,
	S_VALUE_INSERT,
	S_VALUE_ID,
	S_VALUE_TEXT,
	S_SAMPLES,
	S_LABEL_TOTAL,
	S_LABEL_HOUR,
	S_BINARY_MINUTE,
	S_BINARY_HOUR,
	S_BINARY_TOTAL,
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
    [S_LABELS_INSERT] = "INSERT INTO label_sets(container_id, pod, namespace, cgroup, process,"
			" session_id, v_container, v_pod, v_namespace, v_cgroup, v_process,"
			" v_session) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    [S_LABELS_ID] = "SELECT id, v_container, v_pod, v_namespace, v_cgroup, v_process, v_session"
		    " FROM label_sets WHERE container_id = ?1 AND pod = ?2 AND namespace = ?3"
		    " AND cgroup = ?4 AND process = ?5 AND session_id = ?6",
    [S_VALUE_INSERT] = "INSERT INTO label_values(value) VALUES(?1)",
    [S_VALUE_ID] = "SELECT id FROM label_values WHERE value = ?1",
    [S_VALUE_TEXT] = "SELECT value FROM label_values WHERE id = ?1",
    [S_SAMPLES] = "INSERT INTO samples(binary_id, bucket, label_set, count) VALUES(?1, ?2, ?3, ?4) "
		  "ON CONFLICT DO UPDATE SET count = sat_add(count, excluded.count)",
    [S_LABEL_TOTAL] = "INSERT INTO label_totals(binary_id, label_set, count, first_bucket,"
		      " last_bucket, v_container, v_pod, v_namespace, v_cgroup, v_process,"
		      " v_session) VALUES(?1, ?2, ?3, ?4, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"
		      " ON CONFLICT DO UPDATE SET count = sat_add(count, excluded.count),"
		      " first_bucket = min(first_bucket, excluded.first_bucket),"
		      " last_bucket = max(last_bucket, excluded.last_bucket)",
    [S_LABEL_HOUR] = "INSERT INTO label_hours(binary_id, label_set, hour, count)"
		     " VALUES(?1, ?2, ?3, ?4) ON CONFLICT DO UPDATE SET"
		     " count = sat_add(count, excluded.count)",
    [S_BINARY_MINUTE] = "INSERT INTO binary_minutes(bucket, binary_id, count) VALUES(?1, ?2, ?3)"
			" ON CONFLICT DO UPDATE SET count = sat_add(count, excluded.count)",
    [S_BINARY_HOUR] = "INSERT INTO binary_hours(hour, binary_id, count, first_bucket, last_bucket)"
		      " VALUES(?1, ?2, ?3, ?4, ?4) ON CONFLICT DO UPDATE SET"
		      " count = sat_add(count, excluded.count),"
		      " first_bucket = min(first_bucket, excluded.first_bucket),"
		      " last_bucket = max(last_bucket, excluded.last_bucket)",
    [S_BINARY_TOTAL] = "INSERT INTO binary_totals(binary_id, count, first_bucket, last_bucket)"
		       " VALUES(?1, ?2, ?3, ?3) ON CONFLICT DO UPDATE SET"
		       " count = sat_add(count, excluded.count),"
		       " first_bucket = min(first_bucket, excluded.first_bucket),"
		       " last_bucket = max(last_bucket, excluded.last_bucket)",
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

/* label_sets' values as label_values' ids (0: ""), in value_cols' order */
#define VALUE_COLUMNS                                                                              \
	" v_container INTEGER NOT NULL DEFAULT 0, v_pod INTEGER NOT NULL DEFAULT 0,"               \
	" v_namespace INTEGER NOT NULL DEFAULT 0, v_cgroup INTEGER NOT NULL DEFAULT 0,"            \
	" v_process INTEGER NOT NULL DEFAULT 0, v_session INTEGER NOT NULL DEFAULT 0"

static const char schema[] =
    "CREATE TABLE IF NOT EXISTS binaries(id INTEGER PRIMARY KEY, build_id TEXT NOT NULL UNIQUE,"
    " arch TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS binary_paths(binary_id INTEGER NOT NULL, path TEXT NOT NULL,"
    " PRIMARY KEY(binary_id, path)) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS label_sets(id INTEGER PRIMARY KEY, container_id TEXT NOT NULL,"
    " pod TEXT NOT NULL, namespace TEXT NOT NULL, cgroup TEXT NOT NULL, process TEXT NOT NULL,"
    " session_id TEXT NOT NULL," VALUE_COLUMNS ","
    " UNIQUE(container_id, pod, namespace, cgroup, process, session_id));"
    /* every label value but "" (0), once: listings hash and compare these
     * integers, and read the texts of what they show only */
    "CREATE TABLE IF NOT EXISTS label_values(id INTEGER PRIMARY KEY, value TEXT NOT NULL UNIQUE);"
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
    /* The listings' rollups of samples, kept by every write and by
     * retention (sqlite_write, sqlite_prune), so that a listing reads a
     * row per label set and per binary however many minutes they span: a
     * month of pod churn is a sample row per label set per minute. Per
     * (binary, label set): its samples, first and last bucket, and its
     * values' ids (a listing reads no other table); per hour, for time
     * windows. */
    "CREATE TABLE IF NOT EXISTS label_totals(binary_id INTEGER NOT NULL,"
    " label_set INTEGER NOT NULL, count INTEGER NOT NULL, first_bucket INTEGER NOT NULL,"
    " last_bucket INTEGER NOT NULL, v_container INTEGER NOT NULL, v_pod INTEGER NOT NULL,"
    " v_namespace INTEGER NOT NULL, v_cgroup INTEGER NOT NULL, v_process INTEGER NOT NULL,"
    " v_session INTEGER NOT NULL, PRIMARY KEY(binary_id, label_set)) WITHOUT ROWID;"
    /* a window's label sets: those that end in or after it */
    "CREATE INDEX IF NOT EXISTS label_totals_by_last ON label_totals(binary_id, last_bucket);"
    /* the few label sets of sessions */
    "CREATE INDEX IF NOT EXISTS label_totals_by_session ON label_totals(v_session, binary_id)"
    " WHERE v_session != 0;"
    "CREATE TABLE IF NOT EXISTS label_hours(binary_id INTEGER NOT NULL,"
    " label_set INTEGER NOT NULL, hour INTEGER NOT NULL, count INTEGER NOT NULL,"
    " PRIMARY KEY(binary_id, label_set, hour)) WITHOUT ROWID;"
    /* per binary, the continuous profile's only (sessions' label sets are
     * listed from label_totals): all time, per hour and per minute */
    "CREATE TABLE IF NOT EXISTS binary_totals(binary_id INTEGER PRIMARY KEY,"
    " count INTEGER NOT NULL, first_bucket INTEGER NOT NULL, last_bucket INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS binary_hours(hour INTEGER NOT NULL, binary_id INTEGER NOT NULL,"
    " count INTEGER NOT NULL, first_bucket INTEGER NOT NULL, last_bucket INTEGER NOT NULL,"
    " PRIMARY KEY(hour, binary_id)) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS binary_minutes(bucket INTEGER NOT NULL,"
    " binary_id INTEGER NOT NULL, count INTEGER NOT NULL, PRIMARY KEY(bucket, binary_id))"
    " WITHOUT ROWID;"
    "CREATE INDEX IF NOT EXISTS binary_minutes_by_binary ON binary_minutes(binary_id, bucket,"
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

/* a - b as uint64, 0 when b is more: what retention takes off a rollup's
 * sum, which was not saturated (a saturated one is summed again) */
static void sat_sub_fn(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	(void)argc;
	uint64_t a, b;
	count_value(argv[0], &a);
	count_value(argv[1], &b);
	sqlite3_result_int64(ctx, (sqlite3_int64)(a > b ? a - b : 0));
}

static int register_functions(sqlite3 *db)
{
	int flags = SQLITE_UTF8 | SQLITE_DETERMINISTIC;
	return sqlite3_create_function(db, "sat_add", 2, flags, NULL, sat_add_fn, NULL, NULL) ==
			   SQLITE_OK &&
		       sqlite3_create_function(db, "sat_sub", 2, flags, NULL, sat_sub_fn, NULL,
					       NULL) == SQLITE_OK &&
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

/* The id value is interned to (0 for ""), interning it when new. */
static int64_t value_id(struct sqlite_store *s, const char *value, char *err, size_t errlen)
{
	if (!value || !*value)
		return 0;
	sqlite3_stmt *sel = stmt(s, S_VALUE_ID);
	bind_text(sel, 1, value);
	int r = sqlite3_step(sel);
	if (r == SQLITE_ROW)
		return sqlite3_column_int64(sel, 0);
	if (r != SQLITE_DONE) {
		db_error(s, "label value", err, errlen);
		return -1;
	}
	sqlite3_stmt *ins = stmt(s, S_VALUE_INSERT);
	bind_text(ins, 1, value);
	if (step_done(s, ins, "label value", err, errlen) != 0)
		return -1;
	return sqlite3_last_insert_rowid(s->db);
}

/* The label set's id, and its values' (ids), stored first when new. */
static int64_t labels_id(struct sqlite_store *s, const Edgeprof__V1__Labels *l,
			 int64_t ids[EP_LABEL_FIELDS], char *err, size_t errlen)
{
	sqlite3_stmt *sel = stmt(s, S_LABELS_ID);
	const char *v[EP_LABEL_FIELDS] = {l ? l->container_id : "", l ? l->pod : "",
					  l ? l->namespace_ : "",   l ? l->cgroup : "",
					  l ? l->process : "",	    l ? l->session_id : ""};
	for (int i = 0; i < EP_LABEL_FIELDS; i++)
		bind_text(sel, i + 1, v[i]);
	int r = sqlite3_step(sel);
	if (r == SQLITE_ROW) {
		for (int i = 0; i < EP_LABEL_FIELDS; i++)
			ids[i] = sqlite3_column_int64(sel, i + 1);
		return sqlite3_column_int64(sel, 0);
	}
	if (r != SQLITE_DONE) {
		db_error(s, "label set", err, errlen);
		return -1;
	}
	sqlite3_reset(sel);
	for (int i = 0; i < EP_LABEL_FIELDS; i++)
		if ((ids[i] = value_id(s, v[i], err, errlen)) < 0)
			return -1;
	sqlite3_stmt *ins = stmt(s, S_LABELS_INSERT);
	for (int i = 0; i < EP_LABEL_FIELDS; i++) {
		bind_text(ins, i + 1, v[i]);
		sqlite3_bind_int64(ins, i + 7, ids[i]);
	}
	if (step_done(s, ins, "label set", err, errlen) != 0)
		return -1;
	return sqlite3_last_insert_rowid(s->db);
}

#define HOUR_S 3600

/* The start of the hour x is in (x - x mod 3600, the modulo taken >= 0). */
static int64_t hour_floor(int64_t x)
{
	if (x < INT64_MIN + HOUR_S)
		return INT64_MIN;
	int64_t m = x % HOUR_S;
	return x - (m < 0 ? m + HOUR_S : m);
}

static int64_t hour_ceil(int64_t x)
{
	int64_t f = hour_floor(x);
	if (f == x)
		return x;
	return f > INT64_MAX - HOUR_S ? INT64_MAX : f + HOUR_S;
}

/* A label set's samples in a bucket, added to its rollups. */
static int add_label_rollups(struct sqlite_store *s, int64_t bin, int64_t lab,
			     const int64_t ids[EP_LABEL_FIELDS], int64_t bucket, uint64_t samples,
			     char *err, size_t errlen)
{
	sqlite3_stmt *st = stmt(s, S_LABEL_TOTAL);
	sqlite3_bind_int64(st, 1, bin);
	sqlite3_bind_int64(st, 2, lab);
	bind_u64(st, 3, samples);
	sqlite3_bind_int64(st, 4, bucket);
	for (int i = 0; i < EP_LABEL_FIELDS; i++)
		sqlite3_bind_int64(st, 5 + i, ids[i]);
	if (step_done(s, st, "label totals", err, errlen) != 0)
		return -1;
	st = stmt(s, S_LABEL_HOUR);
	sqlite3_bind_int64(st, 1, bin);
	sqlite3_bind_int64(st, 2, lab);
	sqlite3_bind_int64(st, 3, hour_floor(bucket));
	bind_u64(st, 4, samples);
	return step_done(s, st, "label hours", err, errlen);
}

/* A binary's continuous samples in one bucket, summed over the commit's
 * label sets before they go to the binary's rollups (a commit is mostly
 * one bucket of many label sets). */
struct binary_bucket {
	int64_t bin, bucket;
	uint64_t samples;
};

struct commit_sums {
	struct binary_bucket *v;
	size_t n, cap;
	struct ep_u64map at; /* (binary, minute) -> place in v + 1 */
};

static int add_binary_bucket(struct commit_sums *c, int64_t bin, int64_t bucket, uint64_t samples)
{
	/* the key holds both while they fit in 32 bits each (binary ids
	 * count up from 1; minutes since 1970 until the year 10136) */
	bool keyed = bin >= 0 && bin <= UINT32_MAX && bucket >= 0 && bucket / 60 <= UINT32_MAX;
	uint64_t key = (uint64_t)bin << 32 | (uint64_t)(bucket / 60);
	uint64_t *at = keyed ? ep_u64map_get(&c->at, key) : NULL;
	if (at && c->v[*at - 1].bin == bin && c->v[*at - 1].bucket == bucket) {
		ep_add_sat(&c->v[*at - 1].samples, samples);
		return 0;
	}
	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 16;
		struct binary_bucket *grown = realloc(c->v, cap * sizeof(*grown));
		if (!grown)
			return -1;
		c->v = grown;
		c->cap = cap;
	}
	c->v[c->n++] = (struct binary_bucket){bin, bucket, samples};
	bool inserted;
	if (keyed && !at) {
		uint64_t *slot = ep_u64map_upsert(&c->at, key, &inserted);
		if (!slot)
			return -1;
		*slot = c->n;
	}
	return 0;
}

static int write_binary_rollups(struct sqlite_store *s, const struct commit_sums *c, char *err,
				size_t errlen)
{
	for (size_t i = 0; i < c->n; i++) {
		const struct binary_bucket *b = &c->v[i];
		sqlite3_stmt *st = stmt(s, S_BINARY_MINUTE);
		sqlite3_bind_int64(st, 1, b->bucket);
		sqlite3_bind_int64(st, 2, b->bin);
		bind_u64(st, 3, b->samples);
		if (step_done(s, st, "binary minutes", err, errlen) != 0)
			return -1;
		st = stmt(s, S_BINARY_HOUR);
		sqlite3_bind_int64(st, 1, hour_floor(b->bucket));
		sqlite3_bind_int64(st, 2, b->bin);
		bind_u64(st, 3, b->samples);
		sqlite3_bind_int64(st, 4, b->bucket);
		if (step_done(s, st, "binary hours", err, errlen) != 0)
			return -1;
		st = stmt(s, S_BINARY_TOTAL);
		sqlite3_bind_int64(st, 1, b->bin);
		bind_u64(st, 2, b->samples);
		sqlite3_bind_int64(st, 3, b->bucket);
		if (step_done(s, st, "binary totals", err, errlen) != 0)
			return -1;
	}
	return 0;
}

static int write_slice(struct sqlite_store *s, const struct ep_store_slice *sl,
		       struct commit_sums *sums, char *err, size_t errlen)
{
	const Edgeprof__V1__BinaryProfile *bp = sl->delta->profile;
	int64_t ids[EP_LABEL_FIELDS];
	int64_t bin = binary_id(s, bp, err, errlen);
	int64_t lab = bin < 0 ? -1 : labels_id(s, sl->delta->labels, ids, err, errlen);
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
		if (step_done(s, st, "samples", err, errlen) != 0 ||
		    add_label_rollups(s, bin, lab, ids, sl->bucket_s, bp->samples, err, errlen) !=
			0)
			return -1;
		/* sessions' label sets are listed from label_totals */
		if (ids[EP_LABEL_FIELDS - 1] == 0 &&
		    add_binary_bucket(sums, bin, sl->bucket_s, bp->samples) != 0) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
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
	struct commit_sums sums = {0};
	ep_u64map_init(&sums.at);
	for (size_t i = 0; i < c->nslices && rc == 0; i++)
		rc = write_slice(s, &c->slices[i], &sums, err, errlen);
	if (rc == 0)
		rc = write_binary_rollups(s, &sums, err, errlen);
	free(sums.v);
	ep_u64map_free(&sums.at);
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

/* a label_totals row's own rows in samples */
#define LABEL_ROWS                                                                                 \
	" WHERE s.binary_id = label_totals.binary_id AND s.label_set = label_totals.label_set"

static int sqlite_prune(struct ep_store *base, int64_t before_s, char *err, size_t errlen)
{
	struct sqlite_store *s = (struct sqlite_store *)base;
	static const char *const sql[] = {
	    /* the rollups first, from the rows about to go: each label set's
	     * and binary's sum loses what goes (summed again from what stays
	     * when it had saturated) and starts at its first bucket left; one
	     * with none left goes, and the hour the cut falls in is summed
	     * again from its minutes that stay */
	    ("UPDATE label_totals SET count = CASE WHEN count = -1 THEN"
	     " (SELECT SAT_SUM(s.count) FROM samples s INDEXED BY samples_by_label_set" LABEL_ROWS
	     " AND s.bucket >= ?1) ELSE sat_sub(count, (SELECT SAT_SUM(s.count) FROM samples s"
	     " INDEXED BY samples_by_label_set" LABEL_ROWS " AND s.bucket < ?1)) END,"
	     " first_bucket = COALESCE((SELECT MIN(s.bucket) FROM samples s INDEXED BY"
	     " samples_by_label_set" LABEL_ROWS " AND s.bucket >= ?1), first_bucket)"
	     " WHERE first_bucket < ?1"),
	    "DELETE FROM label_totals WHERE first_bucket < ?1",
	    ("UPDATE label_hours SET count = (SELECT SAT_SUM(s.count) FROM samples s INDEXED BY"
	     " samples_by_label_set WHERE s.binary_id = label_hours.binary_id AND"
	     " s.label_set = label_hours.label_set AND s.bucket >= ?1 AND"
	     " s.bucket < label_hours.hour + 3600) WHERE hour < ?1 AND hour > ?1 - 3600"),
	    "DELETE FROM label_hours WHERE hour < ?1 AND (hour <= ?1 - 3600 OR count = 0)",
	    ("UPDATE binary_totals SET count = CASE WHEN count = -1 THEN"
	     " (SELECT SAT_SUM(m.count) FROM binary_minutes m INDEXED BY binary_minutes_by_binary"
	     " WHERE m.binary_id = binary_totals.binary_id AND m.bucket >= ?1) ELSE sat_sub(count,"
	     " (SELECT SAT_SUM(m.count) FROM binary_minutes m INDEXED BY binary_minutes_by_binary"
	     " WHERE m.binary_id = binary_totals.binary_id AND m.bucket < ?1)) END,"
	     " first_bucket = COALESCE((SELECT MIN(m.bucket) FROM binary_minutes m INDEXED BY"
	     " binary_minutes_by_binary WHERE m.binary_id = binary_totals.binary_id AND"
	     " m.bucket >= ?1), first_bucket) WHERE first_bucket < ?1"),
	    "DELETE FROM binary_totals WHERE first_bucket < ?1",
	    ("UPDATE binary_hours SET count = (SELECT SAT_SUM(m.count) FROM binary_minutes m"
	     " INDEXED BY binary_minutes_by_binary WHERE m.binary_id = binary_hours.binary_id AND"
	     " m.bucket >= ?1 AND m.bucket < binary_hours.hour + 3600), first_bucket ="
	     " COALESCE((SELECT MIN(m.bucket) FROM binary_minutes m INDEXED BY"
	     " binary_minutes_by_binary WHERE m.binary_id = binary_hours.binary_id AND"
	     " m.bucket >= ?1 AND m.bucket < binary_hours.hour + 3600), first_bucket)"
	     " WHERE hour < ?1 AND hour > ?1 - 3600"),
	    "DELETE FROM binary_hours WHERE hour < ?1 AND (hour <= ?1 - 3600 OR count = 0)",
	    "DELETE FROM binary_minutes WHERE bucket < ?1",
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
/* col starts with the text bound to p (f->prefix): substr, not LIKE, whose
 * '%' and '_' a label value may hold */
#define PREFIX(col, p) " AND substr(" col ", 1, length(" p ")) = " p
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
		 f->container_id ? (f->prefix ? PREFIX("l.container_id", ":container_id")
					      : " AND l.container_id = :container_id")
				 : "",
		 f->pod ? (f->prefix ? PREFIX("l.pod", ":pod") : " AND l.pod = :pod") : "",
		 f->namespace_ ? (f->prefix ? PREFIX("l.namespace", ":namespace")
					    : " AND l.namespace = :namespace")
			       : "",
		 f->cgroup ? (f->prefix ? PREFIX("l.cgroup", ":cgroup") : " AND l.cgroup = :cgroup")
			   : "",
		 f->process
		     ? (f->prefix ? PREFIX("l.process", ":process") : " AND l.process = :process")
		     : "",
		 ")");
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

/* --- listings, from the rollups ------------------------------------------ */

/* A filter's time window as the rollups read it: the buckets in [from, to);
 * the whole hours in it, [fh, th), from label_hours and binary_hours, and
 * the minutes at its edges, [from, fh) and [th, to), from samples and
 * binary_minutes. */
struct window {
	bool on;
	int64_t from, to, fh, th;
};

static void window_of(const struct ep_store_filter *f, struct window *w)
{
	w->on = f->from_s || f->to_s;
	w->from = f->from_s ? f->from_s : INT64_MIN;
	w->to = f->to_s ? f->to_s : INT64_MAX;
	w->fh = f->from_s ? hour_ceil(w->from) : INT64_MIN;
	w->th = f->to_s ? hour_floor(w->to) : INT64_MAX;
	if (w->fh >= w->th) /* no whole hour in it: minutes only */
		w->fh = w->th = w->to;
}

/* The label values a filter names, as the ids they are interned to (the
 * session's always: "" is the continuous profile); none when one of them
 * was never stored, so that nothing matches. */
static const char *const value_cols[EP_LABEL_FIELDS] = {"v_container", "v_pod",	    "v_namespace",
							"v_cgroup",    "v_process", "v_session"};

struct label_ids {
	bool named[EP_LABEL_FIELDS];
	int64_t id[EP_LABEL_FIELDS];
	/* a prefix (f->prefix): its values' ids are looked up in the query,
	 * a range of label_values' unique index, not here */
	const char *prefix[EP_LABEL_FIELDS];
	bool none;
};

static int filter_ids(struct sqlite_store *s, const struct ep_store_filter *f,
		      struct label_ids *ids, char *err, size_t errlen)
{
	const char *v[EP_LABEL_FIELDS] = {f->container_id, f->pod,
					  f->namespace_,   f->cgroup,
					  f->process,	   f->session_id ? f->session_id : ""};
	*ids = (struct label_ids){0};
	for (int i = 0; i < EP_LABEL_FIELDS; i++) {
		if (!v[i])
			continue;
		ids->named[i] = true;
		if (f->prefix && i < EP_LABEL_FIELDS - 1) {
			ids->prefix[i] = v[i];
			continue;
		}
		if (!*v[i])
			continue;
		sqlite3_stmt *sel = stmt(s, S_VALUE_ID);
		bind_text(sel, 1, v[i]);
		int r = sqlite3_step(sel);
		if (r == SQLITE_ROW) {
			ids->id[i] = sqlite3_column_int64(sel, 0);
		} else if (r == SQLITE_DONE) {
			ids->none = true;
		} else {
			db_error(s, "label value", err, errlen);
			return -1;
		}
		sqlite3_reset(sel);
	}
	return 0;
}

/* Whether the filter takes some label sets only: then binaries' sums come
 * from their label sets' rollups, not from binary_*. */
static bool labelled(const struct label_ids *ids)
{
	for (int i = 0; i < EP_LABEL_FIELDS - 1; i++)
		if (ids->named[i])
			return true;
	return ids->id[EP_LABEL_FIELDS - 1] != 0;
}

/* " AND ..." over label_totals t for the filter's label values. */
static void label_conds(const struct label_ids *ids, char *out, size_t len)
{
	size_t n = 0;
	out[0] = '\0';
	for (int i = 0; i < EP_LABEL_FIELDS && n < len; i++)
		if (ids->prefix[i])
			n += (size_t)snprintf(out + n, len - n,
					      " AND t.%s IN (SELECT id FROM label_values WHERE"
					      " value >= :p%d AND value < :p%d || char(1114111))",
					      value_cols[i], i, i);
		else if (ids->named[i])
			n += (size_t)snprintf(out + n, len - n, " AND t.%s = :v%d", value_cols[i],
					      i);
	/* a session's label sets: what the partial index of them holds */
	if (ids->id[EP_LABEL_FIELDS - 1] && n < len)
		snprintf(out + n, len - n, " AND t.v_session != 0");
}

static void bind_int(sqlite3_stmt *st, const char *name, int64_t v)
{
	int idx = sqlite3_bind_parameter_index(st, name);
	if (idx)
		sqlite3_bind_int64(st, idx, v);
}

/* Binds what a listing's statement names of the filter. */
static void bind_listing(sqlite3_stmt *st, const struct ep_store_filter *f, const struct window *w,
			 const struct label_ids *ids)
{
	int idx = sqlite3_bind_parameter_index(st, ":build_id");
	if (idx)
		bind_text(st, idx, f->build_id);
	bind_int(st, ":from", w->from);
	bind_int(st, ":to", w->to);
	bind_int(st, ":fh", w->fh);
	bind_int(st, ":th", w->th);
	for (int i = 0; i < EP_LABEL_FIELDS; i++) {
		char name[8];
		snprintf(name, sizeof(name), ":v%d", i);
		bind_int(st, name, ids->id[i]);
		snprintf(name, sizeof(name), ":p%d", i);
		int p = sqlite3_bind_parameter_index(st, name);
		if (p && ids->prefix[i])
			bind_text(st, p, ids->prefix[i]);
	}
}

/* A label set's samples in the window (label_totals t): all of them when
 * it lies inside, else summed from its hours and its minutes at the edges;
 * its first and last bucket in it. Only the label sets alive at an edge of
 * the window read more than their row. */
#define RAW_ROWS                                                                                   \
	" FROM samples s INDEXED BY samples_by_label_set WHERE s.binary_id = t.binary_id AND"      \
	" s.label_set = t.label_set"
#define WINDOW_SUM                                                                                 \
	"CASE WHEN t.first_bucket >= :from AND t.last_bucket < :to THEN t.count ELSE"              \
	" sat_add(sat_add((SELECT SAT_SUM(s.count)" RAW_ROWS " AND s.bucket >= :from AND"          \
	" s.bucket < :fh), (SELECT SAT_SUM(h.count) FROM label_hours h WHERE"                      \
	" h.binary_id = t.binary_id AND h.label_set = t.label_set AND h.hour >= :fh AND"           \
	" h.hour < :th)), (SELECT SAT_SUM(s.count)" RAW_ROWS " AND s.bucket >= :th AND"            \
	" s.bucket < :to)) END"
#define WINDOW_FIRST                                                                               \
	"CASE WHEN t.first_bucket >= :from THEN t.first_bucket ELSE (SELECT "                      \
	"MIN(s.bucket)" RAW_ROWS " AND s.bucket >= :from) END"
#define WINDOW_LAST                                                                                \
	"CASE WHEN t.last_bucket < :to THEN t.last_bucket ELSE (SELECT MAX(s.bucket)" RAW_ROWS     \
	" AND s.bucket < :to) END"
#define OVERLAPS    " AND t.last_bucket >= :from AND t.first_bucket < :to"
#define BY_BUILD_ID "(SELECT id FROM binaries WHERE build_id = :build_id)"

/* The binaries under the filter, a row each: binary_id, n (its samples),
 * f and l (its first and last bucket). */
static void binary_sums_sql(const struct ep_store_filter *f, const struct window *w,
			    const struct label_ids *ids, char *out, size_t len)
{
	const char *one = f->build_id ? " AND binary_id = " BY_BUILD_ID : "";
	if (labelled(ids)) {
		char conds[512];
		label_conds(ids, conds, sizeof(conds));
		snprintf(out, len,
			 "SELECT binary_id, SAT_SUM(ws) n, MIN(wf) f, MAX(wl) l FROM"
			 " (SELECT t.binary_id binary_id, %s ws, %s wf, %s wl FROM label_totals t"
			 " WHERE 1%s%s%s) WHERE ws != 0 GROUP BY binary_id",
			 w->on ? WINDOW_SUM : "t.count", w->on ? WINDOW_FIRST : "t.first_bucket",
			 w->on ? WINDOW_LAST : "t.last_bucket",
			 f->build_id ? " AND t.binary_id = " BY_BUILD_ID : "",
			 w->on ? OVERLAPS : "", conds);
	} else if (w->on) {
		snprintf(out, len,
			 "SELECT binary_id, SAT_SUM(n) n, MIN(f) f, MAX(l) l FROM"
			 " (SELECT binary_id, count n, bucket f, bucket l FROM binary_minutes"
			 " WHERE bucket >= :from AND bucket < :fh%s"
			 " UNION ALL SELECT binary_id, count, first_bucket, last_bucket FROM"
			 " binary_hours WHERE hour >= :fh AND hour < :th%s"
			 " UNION ALL SELECT binary_id, count, bucket, bucket FROM binary_minutes"
			 " WHERE bucket >= :th AND bucket < :to%s) GROUP BY binary_id",
			 one, one, one);
	} else {
		snprintf(out, len,
			 "SELECT binary_id, count n, first_bucket f, last_bucket l FROM"
			 " binary_totals WHERE 1%s",
			 one);
	}
}

/* One row per label set of binary :bin under the filter: the label set,
 * its six values' ids and its samples in the window (0: none there). Read
 * in label_totals' order (ROWS_ALL), or only those that end in or after
 * the window (ROWS_RECENT, by label_totals_by_last: a row read through an
 * index costs three read in order, so for windows that hold a small part of
 * a binary's time), or (ROWS_BY_VALUE, ties) in label_sets' unique index's
 * order, which is ep_store_labels_done's by value. */
enum rows { ROWS_ALL, ROWS_RECENT, ROWS_BY_VALUE };
#define LABEL_COLS                                                                                 \
	"%s.v_container, %s.v_pod, %s.v_namespace, %s.v_cgroup, %s.v_process, %s.v_session"
static void label_rows_sql(const struct window *w, const struct label_ids *ids, enum rows how,
			   char *out, size_t len)
{
	bool by_value = how == ROWS_BY_VALUE;
	char conds[512];
	label_conds(ids, conds, sizeof(conds));
	const char *t = by_value ? "l" : "t";
	char cols[256];
	snprintf(cols, sizeof(cols), LABEL_COLS, t, t, t, t, t, t);
	snprintf(out, len, "SELECT %s, %s, %s FROM %s WHERE 1%s%s%s",
		 by_value ? "l.id" : "t.label_set", cols, w->on ? WINDOW_SUM : "t.count",
		 by_value ? "label_sets l CROSS JOIN label_totals t ON t.binary_id = :bin AND"
			    " t.label_set = l.id"
			  : "label_totals t",
		 by_value ? "" : " AND t.binary_id = :bin",
		 !w->on		   ? ""
		 : how == ROWS_ALL ? " AND +t.last_bucket >= :from AND t.first_bucket < :to"
				   : OVERLAPS,
		 conds);
	if (by_value) {
		size_t n = strlen(out);
		snprintf(out + n, len - n,
			 " ORDER BY l.container_id, l.pod, l.namespace, l.cgroup, l.process,"
			 " l.session_id");
	}
}

/* A listing being answered: its filter and the statements it reads. */
struct listing {
	struct sqlite_store *s;
	const struct ep_store_filter *f;
	struct window w;
	struct label_ids ids;
	bool labels;
	sqlite3_stmt *rows[2]; /* label_rows_sql's ROWS_ALL and ROWS_RECENT */
};

/* The statement that reads binary bin's label sets for the listing's
 * window: those that end in it or after when it covers less than a third
 * of the binary's time (label sets are born and die about evenly over
 * time), else all of them. NULL with err. */
static sqlite3_stmt *label_rows(struct listing *ls, int64_t bin, char *err, size_t errlen)
{
	enum rows how = ROWS_ALL;
	if (ls->w.on) {
		sqlite3_stmt *q = query(ls->s,
					"SELECT first_bucket, last_bucket FROM binary_totals"
					" WHERE binary_id = ?1",
					err, errlen);
		if (!q)
			return NULL;
		sqlite3_bind_int64(q, 1, bin);
		how = ROWS_RECENT; /* a session's only: few */
		if (sqlite3_step(q) == SQLITE_ROW) {
			double first = (double)sqlite3_column_int64(q, 0);
			double end = (double)sqlite3_column_int64(q, 1) + 60;
			double from = (double)ls->w.from > first ? (double)ls->w.from : first;
			double to = (double)ls->w.to < end ? (double)ls->w.to : end;
			how = (to - from) * 3 < end - first ? ROWS_RECENT : ROWS_ALL;
		}
		done_query(q);
	}
	if (!ls->rows[how]) {
		char sql[8192];
		label_rows_sql(&ls->w, &ls->ids, how, sql, sizeof(sql));
		if (!(ls->rows[how] = query(ls->s, sql, err, errlen)))
			return NULL;
		bind_listing(ls->rows[how], ls->f, &ls->w, &ls->ids);
	}
	sqlite3_reset(ls->rows[how]);
	bind_int(ls->rows[how], ":bin", bin);
	return ls->rows[how];
}

static char *value_text(void *ctx, uint64_t id)
{
	struct sqlite_store *s = ctx;
	sqlite3_stmt *st = stmt(s, S_VALUE_TEXT);
	sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
	char *t = sqlite3_step(st) == SQLITE_ROW ? dup_col(st, 0) : NULL;
	sqlite3_reset(st);
	return t;
}

/* A label rows statement's row: its label set, ids and samples. */
static uint64_t label_row(sqlite3_stmt *st, uint64_t *label_set, uint64_t ids[EP_LABEL_FIELDS])
{
	*label_set = (uint64_t)sqlite3_column_int64(st, 0);
	for (int i = 0; i < EP_LABEL_FIELDS; i++)
		ids[i] = (uint64_t)sqlite3_column_int64(st, i + 1);
	return (uint64_t)sqlite3_column_int64(st, EP_LABEL_FIELDS + 1);
}

/* More label sets share the least samples of the listed ones (samples)
 * than there is room for: the need first by value of those go in. Read in
 * value order (label_sets' unique index) until need of the binary's tie, or
 * the binary's label sets read again with the texts of those that tie:
 * whichever reads less. Over a million label sets of one sample each, the
 * first reads a hundred. */
static int resolve_ties(struct listing *ls, struct ep_label_summary *sum, sqlite3_stmt *again,
			int64_t bin, uint64_t samples, size_t need, uint64_t tied, uint64_t rows)
{
	struct sqlite_store *s = ls->s;
	sqlite3_stmt *q = NULL;
	int64_t all = 0;
	if (sqlite3_prepare_v2(s->db, "SELECT MAX(id) FROM label_sets", -1, &q, NULL) ==
		SQLITE_OK &&
	    sqlite3_step(q) == SQLITE_ROW)
		all = sqlite3_column_int64(q, 0);
	sqlite3_finalize(q);
	/* a row read in value order costs about as much as a text read, a
	 * row read again in label_totals' order a sixth of it */
	bool by_value = (double)need * (double)all / (double)tied < (double)rows / 6 + (double)tied;
	char err[64], sql[8192];
	if (by_value) {
		label_rows_sql(&ls->w, &ls->ids, ROWS_BY_VALUE, sql, sizeof(sql));
		if (!(q = query(s, sql, err, sizeof(err))))
			return -1;
		bind_listing(q, ls->f, &ls->w, &ls->ids);
	} else {
		q = again;
		sqlite3_reset(q);
	}
	bind_int(q, ":bin", bin);
	size_t found = 0;
	int rc = 0, r;
	while (rc == 0 && (!by_value || found < need) && (r = sqlite3_step(q)) == SQLITE_ROW) {
		uint64_t label_set, ids[EP_LABEL_FIELDS];
		if (label_row(q, &label_set, ids) != samples)
			continue;
		found++;
		rc = ep_label_summary_tie(sum, label_set, ids);
	}
	if (by_value)
		done_query(q);
	else
		sqlite3_reset(q);
	return rc;
}

/* b's label sets under the listing's filter, a row each (label_totals),
 * summarised as they come (ep_label_summary): a million of them take the
 * same memory as a hundred. */
static int list_labels(struct listing *ls, Edgeprof__V1__BinaryInfo *b, int64_t bin, size_t n)
{
	char err[64];
	sqlite3_stmt *q = label_rows(ls, bin, err, sizeof(err));
	struct ep_label_summary *sum = q ? ep_label_summary_new(n, value_text, ls->s) : NULL;
	if (!sum)
		return -1;
	uint64_t rows = 0;
	int rc = 0, r;
	while (rc == 0 && (r = sqlite3_step(q)) == SQLITE_ROW) {
		uint64_t label_set, ids[EP_LABEL_FIELDS];
		uint64_t samples = label_row(q, &label_set, ids);
		rows++;
		if (samples)
			rc = ep_label_summary_add(sum, label_set, ids, samples);
	}
	sqlite3_reset(q);
	uint64_t tie, tied;
	size_t need;
	if (rc == 0 && ep_label_summary_ties(sum, &tie, &need, &tied))
		rc = resolve_ties(ls, sum, q, bin, tie, need, tied, rows);
	if (rc == 0)
		rc = ep_label_summary_finish(sum, b);
	ep_label_summary_free(sum);
	return rc;
}

/* The number of binaries under the filter and their samples. */
static int list_totals(struct listing *ls, const char *sums, Edgeprof__V1__BinaryList *list,
		       char *err, size_t errlen)
{
	char sql[8192];
	snprintf(sql, sizeof(sql), "SELECT COUNT(*), SAT_SUM(g.n) FROM (%s) g", sums);
	sqlite3_stmt *q = query(ls->s, sql, err, errlen);
	if (!q)
		return -1;
	bind_listing(q, ls->f, &ls->w, &ls->ids);
	int rc = sqlite3_step(q) == SQLITE_ROW ? 0 : -1;
	if (rc == 0) {
		list->total_binaries = (uint64_t)sqlite3_column_int64(q, 0);
		list->total_samples = (uint64_t)sqlite3_column_int64(q, 1);
	} else {
		db_error(ls->s, "list", err, errlen);
	}
	done_query(q);
	return rc;
}

/* The binaries under f from the rollups: per binary from binary_totals
 * (all time) or binary_hours and binary_minutes (a window), per label set
 * from label_totals (and label_hours, for the label sets alive at a
 * window's edges) when the filter takes some label sets only. What a
 * listing reads grows with the binaries and label sets it lists, not with
 * the minutes they span. */
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
	struct listing ls = {.s = s, .f = f};
	window_of(f, &ls.w);
	sqlite3_stmt *q = NULL, *paths = NULL;
	if (filter_ids(s, f, &ls.ids, err, errlen) != 0)
		goto fail;
	if (ls.ids.none)
		return list; /* a label value never stored: nothing matches */
	char sums[4096], sql[8192];
	binary_sums_sql(f, &ls.w, &ls.ids, sums, sizeof(sums));
	/* one more than the page: whether others follow */
	snprintf(sql, sizeof(sql),
		 "SELECT b.id, b.build_id, b.arch, g.n, g.f, g.l FROM binaries b JOIN (%s) g"
		 " ON g.binary_id = b.id WHERE 1%s ORDER BY %s LIMIT :limit OFFSET :offset",
		 sums, page->after && !page->by_samples ? " AND b.build_id > :after" : "",
		 page->by_samples ? "g.n DESC, b.build_id" : "b.build_id");
	if (!(q = query(s, sql, err, errlen)))
		goto fail;
	bind_listing(q, f, &ls.w, &ls.ids);
	int idx = sqlite3_bind_parameter_index(q, ":after");
	if (idx)
		bind_text(q, idx, page->after);
	bind_int(q, ":limit", (int64_t)page->limit + 1);
	bind_int(q, ":offset", page->by_samples ? (int64_t)page->offset : 0);
	paths =
	    query(s, "SELECT path FROM binary_paths WHERE binary_id = ?1 ORDER BY path LIMIT 100",
		  err, errlen);
	if (!paths)
		goto fail;
	ls.labels = page->labels > 0;
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
		    (ls.labels && list_labels(&ls, b, id, page->labels) != 0))
			goto oom;
	}
	if (step != SQLITE_DONE) {
		db_error(s, "list", err, errlen);
		goto fail;
	}
	done_query(q);
	done_query(paths);
	done_query(ls.rows[0]);
	done_query(ls.rows[1]);
	if (page->totals && list_totals(&ls, sums, list, err, errlen) != 0)
		goto fail;
	return list;
oom:
	snprintf(err, errlen, "out of memory");
fail:
	done_query(q);
	done_query(paths);
	done_query(ls.rows[0]);
	done_query(ls.rows[1]);
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

/* 1 when table exists, 0 when not, -1 on error. */
static int has_table(struct sqlite_store *s, const char *table, char *err, size_t errlen)
{
	sqlite3_stmt *q = NULL;
	int r = -1;
	if (sqlite3_prepare_v2(
		s->db, "SELECT COUNT(*) FROM sqlite_schema WHERE type = 'table' AND name = ?1", -1,
		&q, NULL) == SQLITE_OK &&
	    sqlite3_bind_text(q, 1, table, -1, SQLITE_STATIC) == SQLITE_OK &&
	    sqlite3_step(q) == SQLITE_ROW)
		r = sqlite3_column_int(q, 0) > 0;
	else
		db_error(s, "schema", err, errlen);
	sqlite3_finalize(q);
	return r;
}

/* Version 5 to 6, first: label sets' values interned (label_values), as
 * new label sets have them. Set a range of label sets at a time: SQLite
 * holds what one UPDATE changes in memory before writing it (temp_store),
 * 265 MB for a million label sets at once. */
#define INTERN_RANGE 65536
static int intern_values(struct sqlite_store *s, char *err, size_t errlen)
{
	int missing = lacks_column(s, "label_sets", "v_container", err, errlen);
	if (missing <= 0)
		return missing;
	static const char *const text_cols[EP_LABEL_FIELDS] = {
	    "container_id", "pod", "namespace", "cgroup", "process", "session_id"};
	char sql[1024];
	for (int i = 0; i < EP_LABEL_FIELDS; i++) {
		snprintf(sql, sizeof(sql),
			 "ALTER TABLE label_sets ADD COLUMN %s INTEGER NOT NULL DEFAULT 0;"
			 "INSERT OR IGNORE INTO label_values(value) SELECT %s FROM label_sets"
			 " WHERE %s != ''",
			 value_cols[i], text_cols[i], text_cols[i]);
		if (exec(s, sql, err, errlen) != 0)
			return -1;
	}
	size_t n = (size_t)snprintf(sql, sizeof(sql), "UPDATE label_sets SET ");
	for (int i = 0; i < EP_LABEL_FIELDS; i++)
		n += (size_t)snprintf(
		    sql + n, sizeof(sql) - n,
		    "%s%s = COALESCE((SELECT id FROM label_values WHERE value = %s), 0)",
		    i ? ", " : "", value_cols[i], text_cols[i]);
	snprintf(sql + n, sizeof(sql) - n, " WHERE id >= ?1 AND id < ?2");
	sqlite3_stmt *up = NULL, *last = NULL;
	int64_t max = 0;
	int rc = -1;
	if (sqlite3_prepare_v2(s->db, sql, -1, &up, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(s->db, "SELECT MAX(id) FROM label_sets", -1, &last, NULL) !=
		SQLITE_OK) {
		db_error(s, "label values", err, errlen);
		goto out;
	}
	if (sqlite3_step(last) == SQLITE_ROW)
		max = sqlite3_column_int64(last, 0);
	for (int64_t lo = 0; lo <= max; lo += INTERN_RANGE) {
		sqlite3_reset(up);
		sqlite3_bind_int64(up, 1, lo);
		sqlite3_bind_int64(up, 2, lo + INTERN_RANGE);
		if (step_done(s, up, "label values", err, errlen) != 0)
			goto out;
	}
	rc = 0;
out:
	sqlite3_finalize(up);
	sqlite3_finalize(last);
	return rc;
}

/* Version 5 to 6, then: the listings' rollups of a file's existing samples,
 * once. A label set's rows come in samples_by_label_set's order (by
 * bucket), so its total and its hours are summed here as they pass, with no
 * sort; a big file's log says how far it got every ten seconds. */
static int build_label_rollups(struct sqlite_store *s, uint64_t *rows, uint64_t *sets, char *err,
			       size_t errlen)
{
	sqlite3_stmt *q = NULL, *total = NULL, *hour = NULL;
	int rc = -1;
	if (sqlite3_prepare_v2(s->db,
			       "SELECT binary_id, label_set, bucket, count FROM samples INDEXED BY"
			       " samples_by_label_set ORDER BY binary_id, label_set, bucket",
			       -1, &q, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(s->db,
			       "INSERT INTO label_totals SELECT ?1, ?2, ?3, ?4, ?5, v_container,"
			       " v_pod, v_namespace, v_cgroup, v_process, v_session FROM label_sets"
			       " WHERE id = ?2",
			       -1, &total, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(s->db, "INSERT INTO label_hours VALUES(?1, ?2, ?3, ?4)", -1, &hour,
			       NULL) != SQLITE_OK) {
		db_error(s, "rollups", err, errlen);
		goto out;
	}
	int64_t bin = 0, lab = 0, first = 0, last = 0, hr = 0;
	uint64_t sum = 0, hsum = 0, said = ep_mono_ns();
	bool open = false;
	int r;
	for (;;) {
		r = sqlite3_step(q);
		bool row = r == SQLITE_ROW;
		int64_t b = row ? sqlite3_column_int64(q, 0) : 0;
		int64_t l = row ? sqlite3_column_int64(q, 1) : 0;
		int64_t bucket = row ? sqlite3_column_int64(q, 2) : 0;
		uint64_t count;
		if (row)
			count_value(sqlite3_column_value(q, 3), &count);
		bool same = open && row && b == bin && l == lab;
		if (open && (!same || hour_floor(bucket) != hr)) {
			sqlite3_reset(hour);
			sqlite3_bind_int64(hour, 1, bin);
			sqlite3_bind_int64(hour, 2, lab);
			sqlite3_bind_int64(hour, 3, hr);
			bind_u64(hour, 4, hsum);
			if (step_done(s, hour, "rollups", err, errlen) != 0)
				goto out;
			hsum = 0;
		}
		if (open && !same) {
			sqlite3_reset(total);
			sqlite3_bind_int64(total, 1, bin);
			sqlite3_bind_int64(total, 2, lab);
			bind_u64(total, 3, sum);
			sqlite3_bind_int64(total, 4, first);
			sqlite3_bind_int64(total, 5, last);
			if (step_done(s, total, "rollups", err, errlen) != 0)
				goto out;
			(*sets)++;
			open = false;
		}
		if (!row)
			break;
		if (!open) {
			open = true;
			bin = b;
			lab = l;
			first = bucket;
			sum = 0;
		}
		last = bucket;
		hr = hour_floor(bucket);
		ep_add_sat(&sum, count);
		ep_add_sat(&hsum, count);
		if ((++*rows & 0xfffff) == 0 && ep_mono_ns() - said > 10 * EP_NS_PER_S) {
			said = ep_mono_ns();
			ep_info("store %s: building the listings' rollups: %" PRIu64
				" sample rows read, %" PRIu64 " label sets",
				s->path, *rows, *sets);
		}
	}
	if (r != SQLITE_DONE)
		db_error(s, "rollups", err, errlen);
	else
		rc = 0;
out:
	sqlite3_finalize(q);
	sqlite3_finalize(total);
	sqlite3_finalize(hour);
	return rc;
}

static int build_rollups(struct sqlite_store *s, int version, char *err, size_t errlen)
{
	uint64_t t0 = ep_mono_ns(), rows = 0, sets = 0;
	ep_info("store %s: schema %d to %d: building the listings' rollups from the stored"
		" samples (once; minutes for a large file)",
		s->path, version, SCHEMA_VERSION);
	if (build_label_rollups(s, &rows, &sets, err, errlen) != 0 ||
	    exec(
		s,
		"INSERT INTO binary_minutes(bucket, binary_id, count) SELECT bucket, binary_id,"
		" SAT_SUM(count) FROM samples WHERE label_set NOT IN (SELECT id FROM label_sets"
		" WHERE session_id > '') GROUP BY binary_id, bucket;"
		"INSERT INTO binary_hours(hour, binary_id, count, first_bucket, last_bucket)"
		" SELECT bucket - ((bucket % 3600) + 3600) % 3600, binary_id, count, bucket, bucket"
		" FROM binary_minutes WHERE 1 ON CONFLICT DO UPDATE SET"
		" count = sat_add(count, excluded.count),"
		" first_bucket = min(first_bucket, excluded.first_bucket),"
		" last_bucket = max(last_bucket, excluded.last_bucket);"
		"INSERT INTO binary_totals(binary_id, count, first_bucket, last_bucket)"
		" SELECT binary_id, SAT_SUM(count), MIN(bucket), MAX(bucket) FROM binary_minutes"
		" INDEXED BY binary_minutes_by_binary GROUP BY binary_id",
		err, errlen) != 0)
		return -1;
	ep_info("store %s: the listings' rollups built from %" PRIu64 " sample rows (%" PRIu64
		" label sets) in %.1f s",
		s->path, rows, sets, (double)(ep_mono_ns() - t0) / 1e9);
	return 0;
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
	int version = user_version(s);
	int rc = newer_schema(s, version, err, errlen);
	int migrate = rc == 0 ? lacks_column(s, "label_sets", "session_id", err, errlen) : -1;
	/* a file from before the rollups (version 5 or older) has samples to
	 * build them from; a new one has none, and this is quick */
	int had = migrate < 0 ? -1 : has_table(s, "samples", err, errlen);
	int rollups = had <= 0 ? had : !has_table(s, "label_totals", err, errlen);
	if (migrate < 0 || had < 0 || (migrate && exec(s, migrate_v1, err, errlen) != 0) ||
	    exec(s, schema, err, errlen) != 0 || add_local_index_column(s, err, errlen) != 0 ||
	    add_cycles_columns(s, err, errlen) != 0 || add_ns_columns(s, err, errlen) != 0 ||
	    add_trust_column(s, err, errlen) != 0 || intern_values(s, err, errlen) != 0 ||
	    (rollups && build_rollups(s, version, err, errlen) != 0) ||
	    exec(s, pragma, err, errlen) != 0 || exec(s, "COMMIT", err, errlen) != 0) {
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
	/* SQLite opens a FIFO or a device and answers "disk I/O error" at its
	 * first read; a file that is there must be a regular one (":memory:"
	 * and "file:" URIs are SQLite's own names) */
	struct stat st;
	if (location[0] != ':' && strncmp(location, "file:", 5) != 0 && stat(location, &st) == 0 &&
	    !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "sqlite %s: is %s, not a regular file (a SQLite database)",
			 location, ep_file_kind(st.st_mode));
		sqlite_close(&s->base);
		return NULL;
	}
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
