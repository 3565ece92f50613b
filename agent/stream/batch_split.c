/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/stream/batch_split.h"

#include <stdlib.h>
#include <string.h>

#include "common/wire/wire.h"

static size_t rows_of(const Edgeprof__V1__BinaryProfile *p)
{
	return p->n_edges + p->n_ranges + p->n_ips + p->n_functions;
}

/* Appends piece k of c of bp (a shallow copy); 0, or -1. */
static int add_piece(struct ep_batch_parts *out, size_t *cap, const Edgeprof__V1__BinaryProfile *bp,
		     size_t k, size_t c)
{
	if (out->npieces == *cap) {
		size_t ncap = *cap ? *cap * 2 : 16;
		struct ep_batch_piece *grown = realloc(out->pieces, ncap * sizeof(*grown));
		if (!grown)
			return -1;
		out->pieces = grown;
		*cap = ncap;
	}
	Edgeprof__V1__BinaryProfile *p = malloc(sizeof(*p));
	if (!p)
		return -1;
	*p = *bp;
	p->labels = NULL;
	if (c > 1) {
		/* an even share of each array: no piece past the bound */
#define SHARE(arr, n)                                                                              \
	do {                                                                                       \
		size_t lo = bp->n * k / c, hi = bp->n * (k + 1) / c;                               \
		p->arr = bp->arr ? bp->arr + lo : NULL;                                            \
		p->n = hi - lo;                                                                    \
	} while (0)
		SHARE(edges, n_edges);
		SHARE(ranges, n_ranges);
		SHARE(ips, n_ips);
		SHARE(functions, n_functions);
#undef SHARE
		if (k > 0) {
			/* counted once: the samples, and what names the binary */
			p->samples = 0;
			p->n_paths = 0;
			p->n_segments = 0;
			/* agent --stacks: at most EP_STACKS_MAX, kept whole
			 * with the names of their binaries */
			p->n_stacks = 0;
			p->n_stack_binaries = 0;
		}
	}
	out->pieces[out->npieces++] = (struct ep_batch_piece){p, bp->labels};
	return 0;
}

int ep_batch_split(const Edgeprof__V1__Profile *delta, const struct ep_batch_bounds *b,
		   struct ep_batch_parts *out)
{
	size_t max_rows = b && b->rows ? b->rows : EP_WIRE_BATCH_ROWS;
	size_t max_bins = b && b->binaries ? b->binaries : EP_WIRE_BATCH_BINARIES;
	memset(out, 0, sizeof(*out));
	size_t cap = 0, rows = 0, in_part = 0, ecap = 0;
	for (size_t i = 0; i < delta->n_binaries; i++) {
		const Edgeprof__V1__BinaryProfile *bp = delta->binaries[i];
		size_t r = rows_of(bp), c = r > max_rows ? (r + max_rows - 1) / max_rows : 1;
		for (size_t k = 0; k < c; k++) {
			size_t pr = c > 1 ? (r * (k + 1) / c - r * k / c) : r;
			if (in_part && (rows + pr > max_rows || in_part == max_bins)) {
				if (out->nparts == ecap) {
					size_t ncap = ecap ? ecap * 2 : 4;
					size_t *grown = realloc(out->end, ncap * sizeof(*grown));
					if (!grown)
						goto oom;
					out->end = grown;
					ecap = ncap;
				}
				out->end[out->nparts++] = out->npieces;
				rows = 0;
				in_part = 0;
			}
			if (add_piece(out, &cap, bp, k, c) != 0)
				goto oom;
			rows += rows_of(out->pieces[out->npieces - 1].profile);
			in_part++;
		}
	}
	size_t *grown = realloc(out->end, (out->nparts + 1) * sizeof(*grown));
	if (!grown)
		goto oom;
	out->end = grown;
	out->end[out->nparts++] = out->npieces;
	return 0;
oom:
	ep_batch_parts_free(out);
	return -1;
}

void ep_batch_parts_free(struct ep_batch_parts *p)
{
	for (size_t i = 0; i < p->npieces; i++)
		free(p->pieces[i].profile);
	free(p->pieces);
	free(p->end);
	memset(p, 0, sizeof(*p));
}
