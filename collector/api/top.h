/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The hottest functions of a selection across its binaries (issue 36):
 * what /v1/top answers and the UI's "Top functions" view shows. Each
 * function's branch executions (the branches leaving it) and IP samples,
 * summed over the selection's label sets and buckets, ranked by branch
 * executions then IP samples; counts in no symbol are an "[unknown]" row
 * per binary. The work is bounded: the profiles of the selection's
 * EP_TOP_BINARIES hottest binaries (by samples) are read, no others.
 */
#ifndef EP_API_TOP_H
#define EP_API_TOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collector/api/api.h"

#define EP_TOP_BINARIES 20   /* binaries whose profiles a request reads */
#define EP_TOP_DEFAULT	50   /* rows when n= is not given */
#define EP_TOP_MAX	1000 /* the most rows n= may ask for */

struct ep_top_row {
	char *build_id, *binary; /* binary: its first path's file name */
	char *name;		 /* raw (NAME/N for a local); NULL: [unknown] */
	uint64_t addr;		 /* the function's start, or the hottest unknown address */
	uint64_t branches, samples;
};

struct ep_top {
	struct ep_top_row *rows; /* ranked, every function with counts */
	size_t n, cap;
	uint64_t total_branches, total_samples; /* of the binaries read */
	uint64_t selection_samples;		/* of every binary in the selection */
	size_t binaries;			/* binaries read */
	bool binaries_more;			/* the selection has more than were read */
};

/* The index in bp's (address-ordered) functions of the one holding addr,
 * -1 when none does: the binary page's and this ranking's one rule. */
long ep_top_function_index(const Edgeprof__V1__BinaryProfile *bp, uint64_t addr);

/* Fills t for the selection f (f->build_id ignored). 0, or -1 with err. */
int ep_top_compute(struct ep_store *store, const struct ep_store_filter *f, struct ep_top *t,
		   char *err, size_t errlen);
void ep_top_free(struct ep_top *t);

/* n=N: the rows asked for (1 .. EP_TOP_MAX, default EP_TOP_DEFAULT); 0 when
 * invalid */
size_t ep_top_rows_arg(const char *v);

/* GET /v1/top: the ranking as JSON, its n first rows */
void ep_api_top(struct ep_store *store, const struct ep_store_filter *f, size_t n,
		struct ep_api_response *r);

#endif
