/* SPDX-License-Identifier: Apache-2.0 */
/* What a storage backend provides; only store.c and the backends see this. */
#ifndef EP_STORE_BACKEND_H
#define EP_STORE_BACKEND_H

#include <pthread.h>

#include "collector/store/store.h"

struct ep_store_ops {
	const char *kind;
	bool keeps_batches;
	void (*close)(struct ep_store *s);
	int (*has_batch)(struct ep_store *s, const char *agent_id, uint64_t sequence, char *err,
			 size_t errlen);
	int (*write)(struct ep_store *s, const struct ep_store_commit *c, char *err, size_t errlen);
	int (*prune)(struct ep_store *s, int64_t before_s, char *err, size_t errlen);
	Edgeprof__V1__BinaryList *(*list_binaries)(struct ep_store *s,
						   const struct ep_store_filter *f, char *err,
						   size_t errlen);
	Edgeprof__V1__Profile *(*profile)(struct ep_store *s, const struct ep_store_filter *f,
					  char *err, size_t errlen);
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
};

/* Every backend's handle starts with this; backends set ops only. */
struct ep_store {
	const struct ep_store_ops *ops;
	pthread_mutex_t lock; /* set up by store.c: backends need not be thread-safe */
};

/* Where every backend's profile starts: a Profile (config.source
 * "collector") and, when the listing finds f->build_id under f, its one
 * BinaryProfile (*bp) with build-id, arch, paths and samples from the
 * listing, for the backend to add counts to; *bp = NULL when there are
 * none. NULL with err. Called with the store's lock held. */
Edgeprof__V1__Profile *ep_store_profile_start(struct ep_store *s, const struct ep_store_filter *f,
					      Edgeprof__V1__BinaryProfile **bp, char *err,
					      size_t errlen);

/* location: what follows "sqlite:" / "clickhouse:" in the spec */
struct ep_store *ep_store_sqlite_open(const char *location, char *err, size_t errlen);
struct ep_store *ep_store_clickhouse_open(const char *location, char *err, size_t errlen);

#endif
