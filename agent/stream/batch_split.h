/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An interval's delta cut into parts that each fit one batch within the
 * collector's default bounds (common/wire/wire.h EP_WIRE_BATCH_*): a
 * collector refuses a bigger batch with 400, which the agent drops, so an
 * interval must never make one (issue 32, item 3). Binaries go whole into
 * a part while they fit; one binary with more rows than a part holds is cut
 * into pieces of its edges, ranges, IPs and functions, the first piece
 * keeping its samples, paths and segments.
 */
#ifndef EP_BATCH_SPLIT_H
#define EP_BATCH_SPLIT_H

#include <stdbool.h>
#include <stddef.h>

#include "profile.pb-c.h"

struct ep_batch_piece {
	/* a shallow copy of a binary of the delta, or of a part of it: its
	 * arrays point into the delta's; labels left out (below) */
	Edgeprof__V1__BinaryProfile *profile;
	const Edgeprof__V1__Labels *labels; /* the binary's own, or NULL */
};

struct ep_batch_parts {
	struct ep_batch_piece *pieces;
	size_t npieces;
	size_t *end; /* part k: pieces [end[k - 1], end[k]) (end[-1] = 0) */
	size_t nparts;
};

/* Bounds of one part: 0 fields take EP_WIRE_BATCH_*. */
struct ep_batch_bounds {
	size_t rows;	 /* edges, ranges, IPs and functions together */
	size_t binaries; /* pieces */
};

/* delta's binaries in parts within b (NULL: the defaults); at least one
 * part, empty when the delta has no binaries. The delta must outlive the
 * parts. 0, or -1 when memory runs out. */
int ep_batch_split(const Edgeprof__V1__Profile *delta, const struct ep_batch_bounds *b,
		   struct ep_batch_parts *out);
void ep_batch_parts_free(struct ep_batch_parts *p);

#endif
