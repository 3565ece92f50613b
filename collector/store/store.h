/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Store stage (SPEC step 7): where the collector keeps the merged counts.
 * Two backends behind one interface: "sqlite:PATH" (embedded, the default:
 * one file, WAL) and "clickhouse:URL" (HTTP interface, for fleets where many
 * stateless collectors write to one cluster). Both pass the same suite,
 * tests/unit/test_store.c.
 *
 * Every call may come from any thread (they are serialised here).
 *
 * Counts are kept per (binary, time bucket of EP_STORE_BUCKET_S seconds,
 * label set) and only ever added to. Every stored batch leaves its
 * (agent_id, sequence) behind so a resent batch is recognised and never
 * counted twice.
 *
 * Counts of on-demand sessions (Labels.session_id != "") are sampled at
 * their own rate: they are kept as a label set of their own and a filter
 * selects either the continuous profile or one session, never both.
 *
 * Session records (collector.proto Session) are kept too, so sessions
 * survive a collector restart, and so are nodes (Node): collector replicas
 * sharing one store read both from it and answer alike.
 */
#ifndef EP_STORE_H
#define EP_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collector.pb-c.h"
#include "ingest.pb-c.h"
#include "profile.pb-c.h"

#define EP_STORE_BUCKET_S 60

struct ep_store;

struct ep_store_batch_id {
	const char *agent_id;
	uint64_t sequence;
	const char *node;
	int64_t received_s; /* unix seconds */
};

/* One binary's counts for one label set in one bucket: the unit of writing.
 * delta->profile carries build_id, paths, arch, samples, edges (keyed by
 * from, to, taken, from_external, to_external), ranges (start, end), ips,
 * functions and segments; delta->labels may be NULL (all labels empty). */
struct ep_store_slice {
	int64_t bucket_s; /* start of the bucket, unix seconds, a multiple of EP_STORE_BUCKET_S */
	const Edgeprof__V1__BinaryDelta *delta;
	int batch; /* index in the commit's batches it came from; -1: merged from several */
	/* delta's Range.cycles and IpCount.cycles are cpu-clock nanoseconds
	 * (its batch's config.cycles_unit "ns"): stored apart from cycles */
	bool cycles_ns;
};

struct ep_store_commit {
	const struct ep_store_batch_id *batches;
	size_t nbatches;
	const struct ep_store_slice *slices;
	size_t nslices;
};

/* A selection of stored counts. NULL/0 fields select everything. */
struct ep_store_filter {
	const char *build_id; /* lowercase hex; required by ep_store_profile */
	int64_t from_s;	      /* buckets starting at or after from_s ... */
	int64_t to_s;	      /* ... and before to_s (0 = no upper bound) */
	/* label filter: every non-NULL field must equal the stored label */
	const char *container_id, *pod, *namespace_, *cgroup, *process;
	/* NULL or "": the continuous profile only (session_id ""); any other
	 * value: that session's counts only. Never both: they are sampled at
	 * different rates, so their sum means nothing. */
	const char *session_id;
	/* the label fields are prefixes of the stored values, not the values:
	 * what the UI shows (a container id's first 12 digits) finds what it
	 * shows (issue 36) */
	bool prefix;
};

/* spec: "sqlite:PATH" or "clickhouse:http://HOST:PORT[/?database=DB]".
 * NULL with err naming the spec and the problem. Creates the schema when
 * missing. */
struct ep_store *ep_store_open(const char *spec, char *err, size_t errlen);
void ep_store_close(struct ep_store *s);
/* True when the store needs each slice to come from one batch (batch >= 0):
 * its rows carry the batch they came from (ClickHouse, where that is how a
 * resend is recognised without transactions). False: slices may be merged
 * across batches before writing (SQLite). */
bool ep_store_keeps_batches(const struct ep_store *s);

/* Heap the store's library holds in this process (SQLite: its page cache,
 * which fills up to cache_size as the store grows, and its statements); 0
 * when the backend keeps none (ClickHouse). Read without the store's lock,
 * so a scrape never waits for a commit. */
uint64_t ep_store_memory_bytes(struct ep_store *s);

/* 1 when (agent_id, sequence) was stored by an earlier write, 0 when not,
 * -1 with err on failure. */
int ep_store_has_batch(struct ep_store *s, const char *agent_id, uint64_t sequence, char *err,
		       size_t errlen);

/* known[i] = whether ids[i] was stored by an earlier write, for n ids in one
 * round trip where the backend can (ClickHouse: one query for a whole group
 * commit instead of one per batch); the number known, or -1 with err. */
int ep_store_known_batches(struct ep_store *s, const struct ep_store_batch_id *ids, size_t n,
			   bool *known, char *err, size_t errlen);

/* Adds every slice's counts and records every batch id, all or nothing: after
 * a crash either the whole commit is stored or none of it (SQLite: one
 * transaction; ClickHouse: see store_clickhouse.c for how). The caller has
 * already left out batches ep_store_has_batch() or ep_store_known_batches()
 * reported. 0 or -1 with err. */
int ep_store_write(struct ep_store *s, const struct ep_store_commit *c, char *err, size_t errlen);

/* Forgets the counts of buckets that start before before_s, the batch ids
 * received before it, the nodes last seen before it, the finished (DONE,
 * FAILED) sessions that ended before it (those that never started: created
 * before it) and the images (ep_store_image_put) stored before it whose
 * build-id has no counts left (retention; one stored since waits for its
 * counts: CI uploads a build before it runs). Binaries, paths and symbols
 * stay. 0, or -1 with err. */
int ep_store_prune(struct ep_store *s, int64_t before_s, char *err, size_t errlen);

/* Which page of the binaries a listing holds, and how much of each one's
 * labels: every list answer is bounded, whatever the store holds (issue 32:
 * a million label sets on one binary made /v1/binaries 144 MB). */
#define EP_STORE_PAGE_DEFAULT	100  /* binaries per page when not asked */
#define EP_STORE_PAGE_MAX	1000 /* the most a page may ask for (collector --max-page) */
#define EP_STORE_LABELS_DEFAULT 100  /* N: label sets and values listed per binary */
#define EP_STORE_LABELS_MAX	1000
#define EP_STORE_PATHS_MAX	100 /* paths listed per binary, by name */
struct ep_store_page {
	/* the page starts after this build-id (the previous page's last);
	 * NULL: at the first. "" is a build-id too (binaries without one) */
	const char *after;
	/* hottest first (then by build-id), and offset binaries skipped,
	 * instead of by build-id after `after` (the UI's order) */
	bool by_samples;
	size_t offset;
	size_t limit; /* binaries at most; 0: EP_STORE_PAGE_DEFAULT */
	/* N: label sets and values per dimension listed per binary at most;
	 * more are summarised (BinaryInfo.label_sets, dimensions). 0: no labels
	 * at all (a profile's own lookup) */
	size_t labels;
	bool totals; /* also BinaryList.total_binaries and total_samples */
};

/* The binaries with counts under the filter (build_id may be NULL here),
 * sorted by build_id (or page->by_samples), one page of them: more is set
 * when others follow. page NULL: the first page, default sizes. Free with
 * ep_store_free_list(). NULL with err. */
Edgeprof__V1__BinaryList *ep_store_list_binaries(struct ep_store *s,
						 const struct ep_store_filter *f,
						 const struct ep_store_page *page, char *err,
						 size_t errlen);
void ep_store_free_list(Edgeprof__V1__BinaryList *list);

/* The profile of f->build_id under the filter: one BinaryProfile with the
 * counts summed over buckets and label sets, edges in ep_edge_cmp order,
 * ranges by (start, end), ips by address, the binary's functions, segments
 * and paths; stats.samples = its samples; config.source = "collector".
 * A build-id with no counts under the filter gives a profile with no
 * binaries. Free with ep_profile_free(). NULL with err. */
Edgeprof__V1__Profile *ep_store_profile(struct ep_store *s, const struct ep_store_filter *f,
					char *err, size_t errlen);

/* Session records, kept whole as their serialised message so new fields
 * need no schema change. */

/* Inserts the session or replaces the one with its id, unless the stored
 * one has a newer updated_ns (then the put is ignored and still returns 0):
 * newest wins, so collectors racing cannot move a session backwards. At
 * equal updated_ns the later put wins. 0, or -1 with err. */
int ep_store_session_put(struct ep_store *s, const Edgeprof__V1__Session *session, char *err,
			 size_t errlen);
/* The session with this id; NULL with err "" when there is none, NULL with
 * err saying what went wrong on failure. Free with ep_store_free_session(). */
Edgeprof__V1__Session *ep_store_session_get(struct ep_store *s, const char *id, char *err,
					    size_t errlen);
void ep_store_free_session(Edgeprof__V1__Session *session);
/* Every session in SESSION_PENDING or SESSION_RUNNING, sorted by created_s
 * then id (bytewise). NULL with err. Free with ep_store_free_session_list(). */
Edgeprof__V1__SessionList *ep_store_sessions_unfinished(struct ep_store *s, char *err,
							size_t errlen);
void ep_store_free_session_list(Edgeprof__V1__SessionList *list);

/* The last limit finished sessions (DONE, FAILED), the latest ended first
 * (one that never started: by its creation), then by id. NULL with err.
 * Free with ep_store_free_session_list(). */
Edgeprof__V1__SessionList *ep_store_sessions_finished(struct ep_store *s, size_t limit, char *err,
						      size_t errlen);

/* Nodes (collector.proto Node), so that collector replicas sharing the
 * store answer /v1/nodes alike. Each put node's record (name, agent,
 * capability, event, rate) replaces the stored one unless that one has a
 * newer seen_ns (newest wins, as for sessions); its samples,
 * samples_with_branches and lost are added to the stored sums (each
 * replica puts what it received since its last put). 0, or -1 with err. */
int ep_store_nodes_put(struct ep_store *s, Edgeprof__V1__Node *const *nodes, size_t n, char *err,
		       size_t errlen);
/* Every node seen since the retention cut, sorted by name, with its sums.
 * NULL with err. Free with ep_store_free_node_list(). */
Edgeprof__V1__NodeList *ep_store_nodes(struct ep_store *s, char *err, size_t errlen);
void ep_store_free_node_list(Edgeprof__V1__NodeList *list);

/* Binaries' images (proto/binaries.proto BinaryImage, serialised; what the
 * UI draws code from, collector/binaries), at most one of each trust per
 * build-id, kept across restarts and forgotten with the counts that need
 * them (ep_store_prune). An agent's image is provisional: it sends what a
 * process it profiles mapped, and that process chose the file. An
 * authenticated upload's or debuginfod's is trusted. */
enum ep_image_trust { EP_IMAGE_PROVISIONAL = 1, EP_IMAGE_TRUSTED = 2 };

/* Stores image for build_id unless the store has one at least as trusted:
 * a trusted image replaces a provisional one, and of equal trust the first
 * stays. 1 when it stored this one and there was none, 2 when it stored
 * this one in place of a provisional one, 0 when the store kept the one it
 * had, -1 with err (also when the backend keeps no images). */
int ep_store_image_put(struct ep_store *s, const char *build_id, int64_t uploaded_s,
		       enum ep_image_trust trust, const uint8_t *image, size_t len, char *err,
		       size_t errlen);
/* The trust (EP_IMAGE_*) of the image kept for build_id, with *image
 * (malloc'd, *len bytes) unless image is NULL; 0 when there is none, -1
 * with err. */
int ep_store_image_get(struct ep_store *s, const char *build_id, uint8_t **image, size_t *len,
		       char *err, size_t errlen);

#endif
