/* SPDX-License-Identifier: Apache-2.0 */
/* What a storage backend provides; only store.c and the backends see this. */
#ifndef EP_STORE_BACKEND_H
#define EP_STORE_BACKEND_H

#include <pthread.h>

#include "collector/store/store.h"

/* The parts of a profile a backend reads as rows; each row's columns in order. */
enum ep_store_part {
	EP_PART_EDGES,	   /* from, to, flags (1 taken, 2 from external, 4 to external),
			      kind, count, mispredicted */
	EP_PART_RANGES,	   /* start, end, count, cycles, cycled_insns, ns, ns_insns */
	EP_PART_IPS,	   /* ip, count, cycles, ns */
	EP_PART_FUNCTIONS, /* start, name, size */
	EP_PART_SEGMENTS,  /* vaddr, file offset, size */
	EP_STORE_NPARTS
};

/* A node as backends keep it: the newest record by seen_ns, the sums added. */
struct ep_store_node_row {
	const char *name;
	uint64_t seen_ns;
	const uint8_t *record;
	size_t len;
	uint64_t samples, samples_with_branches, lost;
};

struct ep_store_read;

struct ep_store_ops {
	const char *kind;
	bool keeps_batches;
	void (*close)(struct ep_store *s);
	/* optional: called at the end of every call, under the store's lock:
	 * nothing the backend holds stays open between calls */
	void (*release)(struct ep_store *s);
	/* optional: ep_store_memory_bytes, without the store's lock */
	uint64_t (*memory_bytes)(struct ep_store *s);
	int (*has_batch)(struct ep_store *s, const char *agent_id, uint64_t sequence, char *err,
			 size_t errlen);
	/* optional: ep_store_known_batches in one round trip (else has_batch
	 * for each) */
	int (*known_batches)(struct ep_store *s, const struct ep_store_batch_id *ids, size_t n,
			     bool *known, char *err, size_t errlen);
	int (*write)(struct ep_store *s, const struct ep_store_commit *c, char *err, size_t errlen);
	int (*prune)(struct ep_store *s, int64_t before_s, char *err, size_t errlen);
	/* page is never NULL here, its limit and labels set (store.c);
	 * fills each binary's labels with ep_store_labels_done's rules */
	Edgeprof__V1__BinaryList *(*list_binaries)(struct ep_store *s,
						   const struct ep_store_filter *f,
						   const struct ep_store_page *page, char *err,
						   size_t errlen);
	/* Calls ep_store_add_row(bp, part, row) for each row of part under f
	 * (counts summed over buckets, labels and batches; functions and
	 * segments of f->build_id ordered by address); 0, or -1 with err. */
	int (*read_part)(struct ep_store *s, const struct ep_store_filter *f,
			 enum ep_store_part part, struct ep_store_read *rd, char *err,
			 size_t errlen);
	/* record: the session serialised (len bytes), session: the same decoded */
	int (*session_put)(struct ep_store *s, const Edgeprof__V1__Session *session,
			   const uint8_t *record, size_t len, char *err, size_t errlen);
	/* 1 with *record (malloc'd, *len bytes) when found, 0 when not, -1 with err */
	int (*session_get)(struct ep_store *s, const char *id, uint8_t **record, size_t *len,
			   char *err, size_t errlen);
	/* the serialised records of pending and running sessions, sorted by
	 * created_s then id: calls add for each; -1 with err (add failing: "out
	 * of memory") */
	int (*sessions_unfinished)(struct ep_store *s,
				   int (*add)(void *ctx, const uint8_t *record, size_t len),
				   void *ctx, char *err, size_t errlen);
	/* the serialised records of finished sessions, the latest ended
	 * first (ep_store_sessions_finished), at most limit */
	int (*sessions_finished)(struct ep_store *s, size_t limit,
				 int (*add)(void *ctx, const uint8_t *record, size_t len),
				 void *ctx, char *err, size_t errlen);
	/* ep_store_nodes_put: rows[i].record is the node serialised with its
	 * sums zeroed; the sums travel beside it, to be added */
	int (*nodes_put)(struct ep_store *s, const struct ep_store_node_row *rows, size_t n,
			 char *err, size_t errlen);
	/* every node, its record and its summed sums: calls add for each
	 * (add failing: "out of memory") */
	int (*nodes_get)(struct ep_store *s,
			 int (*add)(void *ctx, const struct ep_store_node_row *row), void *ctx,
			 char *err, size_t errlen);
	/* Binaries' images (ep_store_image_put/get, which say what each
	 * answers); NULL when the backend keeps none. prune forgets them too. */
	int (*image_put)(struct ep_store *s, const char *build_id, int64_t uploaded_s,
			 enum ep_image_trust trust, const uint8_t *image, size_t len, char *err,
			 size_t errlen);
	int (*image_get)(struct ep_store *s, const char *build_id, uint8_t **image, size_t *len,
			 char *err, size_t errlen);
};

/* Every backend's handle starts with this; backends set ops only. */
struct ep_store {
	const struct ep_store_ops *ops;
	pthread_mutex_t lock; /* set up by store.c: backends need not be thread-safe */
};

/* One row of a backend's answer, read column by column (from 0): both
 * backends' rows become the same messages through the same code. */
struct ep_store_row {
	void *ctx;
	uint64_t (*number)(void *ctx, int column);
	const char *(*text)(void *ctx, int column); /* NULL when out of memory */
};

/* A profile being read. The stores keep cpu-clock nanoseconds in columns
 * apart from cycles; a range's or IP's nanoseconds wait here, beside bp's
 * messages in the same order, until ep_store_profile has seen them all and
 * chosen the one unit the profile gives. */
struct ep_store_read {
	Edgeprof__V1__BinaryProfile *bp;
	uint64_t *range_ns; /* per range: ns, ns_insns */
	uint64_t *ip_ns;    /* per IP */
	size_t range_cap, ip_cap;
};

/* Adds the message that row describes to rd->bp; 0, or -1 (out of memory). */
int ep_store_add_row(struct ep_store_read *rd, enum ep_store_part part,
		     const struct ep_store_row *row);
/* Adds the binary that row describes (build_id, arch, samples,
 * first_seen_s, last_seen_s) to list, *added = it; 0, or -1. */
int ep_store_add_binary(Edgeprof__V1__BinaryList *list, const struct ep_store_row *row,
			Edgeprof__V1__BinaryInfo **added);
/* Adds the label set that row describes (container_id, pod, namespace,
 * cgroup, process, session_id) to b; 0, or -1. */
int ep_store_add_labels(Edgeprof__V1__BinaryInfo *b, const struct ep_store_row *row);

/* A binary's labels in a listing (store_labels.c): the label dimensions
 * in BinaryInfo.dimensions' order, by their column names. */
#define EP_STORE_NDIMS 5
extern const char *const ep_store_dims[EP_STORE_NDIMS];
/* b's dimension dim, the five made (exact, no values) on the first call;
 * NULL when out of memory. */
Edgeprof__V1__LabelDimension *ep_store_dimension(Edgeprof__V1__BinaryInfo *b, int dim);
/* Appends a value and its samples to d, in any order; 0, or -1. */
int ep_store_add_dim_value(Edgeprof__V1__LabelDimension *d, const char *value, uint64_t samples);
/* Appends the samples of the label set just added (ep_store_add_labels). */
int ep_store_add_label_samples(Edgeprof__V1__BinaryInfo *b, uint64_t samples);
/* Once b's label_sets, labels (with their samples, at least the n most
 * sampled of them) and dimensions (distinct, exact, values) are in: keeps
 * n label sets (all of them by their values, or the n most sampled: then
 * labels_truncated) and n values per dimension (the most sampled first;
 * summarized when it has more). 0, or -1 (out of memory). */
int ep_store_labels_done(Edgeprof__V1__BinaryInfo *b, size_t n);

/* For a backend that cannot summarise in its queries (SQLite): the label
 * sets of one binary, each given once with its samples, in any order, as
 * the ids its label values are interned to (0 stands for "", and equal
 * ids for equal values), summarised for N = n in memory that does not
 * grow with their number. text reads a value's text (malloc'd; NULL when
 * it cannot); only what is listed, and what decides between label sets
 * that tie, is read. */
#define EP_LABEL_FIELDS 6 /* container_id, pod, namespace, cgroup, process, session_id */
typedef char *(*ep_label_text_fn)(void *ctx, uint64_t id);
struct ep_label_summary;
struct ep_label_summary *ep_label_summary_new(size_t n, ep_label_text_fn text, void *ctx);
int ep_label_summary_add(struct ep_label_summary *sum, uint64_t label_set,
			 const uint64_t ids[EP_LABEL_FIELDS], uint64_t samples);
/* Once every label set is added: false when the n most sampled are known.
 * True when more label sets (*tied) than there is room left for share the
 * least samples among them (*samples): the *need of those that go first by
 * their values (ep_store_labels_done's order) are then for the backend to
 * give with ep_label_summary_tie, at least those, in any order, before
 * finish. */
bool ep_label_summary_ties(struct ep_label_summary *sum, uint64_t *samples, size_t *need,
			   uint64_t *tied);
int ep_label_summary_tie(struct ep_label_summary *sum, uint64_t label_set,
			 const uint64_t ids[EP_LABEL_FIELDS]);
/* Sets b's labels and dimensions (ep_store_labels_done); 0, or -1. */
int ep_label_summary_finish(struct ep_label_summary *sum, Edgeprof__V1__BinaryInfo *b);
void ep_label_summary_free(struct ep_label_summary *sum);

/* location: what follows "sqlite:" / "clickhouse:" in the spec */
struct ep_store *ep_store_sqlite_open(const char *location, char *err, size_t errlen);
struct ep_store *ep_store_clickhouse_open(const char *location, char *err, size_t errlen);

#endif
