/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Profile inference's second step (infer.h, ep_infer_spread): a unit of
 * flow through the blocks the samples never saw next to code that ran.
 *
 * A minimum-cost flow puts nothing where nothing asks for it: an arm of a
 * branch whose other arm the samples saw, a jump-table case no sample
 * reached. Such a block ran up to a few thousand times per unit of count
 * without being seen, and BOLT splits every block of count zero off as cold,
 * so when another input runs it, each visit jumps far away and back. LLVM's
 * profi gives blocks of unknown count on executed paths a small flow for the
 * same reason. Here a unit (counts are scaled up first, so a unit is a
 * fraction of a sample) goes along the shortest way from an entry through
 * the block to an exit, which keeps flow conserved.
 */
#include <stdlib.h>

#include "common/profile/infer.h"

struct adj {
	size_t *start; /* per block + 1: its edges in list[start[b] .. start[b+1]) */
	uint32_t *list;
};

static int adj_build(struct adj *a, const struct ep_infer_edge *edges, size_t nedges,
		     size_t nblocks, bool out)
{
	a->start = calloc(nblocks + 2, sizeof(*a->start));
	a->list = malloc((nedges ? nedges : 1) * sizeof(*a->list));
	if (!a->start || !a->list)
		return -1;
	for (size_t i = 0; i < nedges; i++) {
		uint32_t b = out ? edges[i].src : edges[i].dst;
		if (b != EP_INFER_OUTSIDE)
			a->start[b + 2]++;
	}
	for (size_t b = 0; b < nblocks; b++)
		a->start[b + 2] += a->start[b + 1];
	for (size_t i = 0; i < nedges; i++) {
		uint32_t b = out ? edges[i].src : edges[i].dst;
		if (b != EP_INFER_OUTSIDE)
			a->list[a->start[b + 1]++] = (uint32_t)i;
	}
	return 0;
}

static void adj_free(struct adj *a)
{
	free(a->start);
	free(a->list);
}

struct walk {
	uint32_t *queue, *via; /* via: the edge a block was reached by */
	uint32_t *seen;	       /* the round a block was last reached in */
	uint32_t round;
	uint64_t work, max_work;
};

/* The shortest way from b over edges (forward: out edges) to outside;
 * returns the last edge (to or from outside), via[] holds the rest, or
 * UINT32_MAX when none. */
static uint32_t way_out(struct walk *w, const struct adj *a, const struct ep_infer_edge *edges,
			uint32_t b, bool forward)
{
	size_t head = 0, tail = 0;
	w->round++;
	w->seen[b] = w->round;
	w->queue[tail++] = b;
	while (head < tail) {
		uint32_t u = w->queue[head++];
		for (size_t k = a->start[u]; k < a->start[u + 1]; k++) {
			w->work++;
			uint32_t e = a->list[k];
			uint32_t v = forward ? edges[e].dst : edges[e].src;
			if (v == EP_INFER_OUTSIDE)
				return e;
			if (w->seen[v] == w->round)
				continue;
			w->seen[v] = w->round;
			w->via[v] = e;
			w->queue[tail++] = v;
		}
		if (w->work > w->max_work)
			return UINT32_MAX;
	}
	return UINT32_MAX;
}

/* The way found from b (via[], ending with last): its edges into ways[],
 * its blocks but b into path[]. */
static void take_way(const struct walk *w, const struct ep_infer_edge *edges, uint32_t b,
		     uint32_t last, bool forward, uint32_t *ways, size_t *nways, uint32_t *path,
		     size_t *npath)
{
	uint32_t u = forward ? edges[last].src : edges[last].dst;
	ways[(*nways)++] = last;
	while (u != b) {
		uint32_t e = w->via[u];
		ways[(*nways)++] = e;
		path[(*npath)++] = u;
		u = forward ? edges[e].src : edges[e].dst;
	}
}

static enum ep_infer_status spread(struct ep_infer_block *blocks, size_t nblocks,
				   struct ep_infer_edge *edges, const struct adj *out,
				   const struct adj *in, struct walk *w, uint32_t depth,
				   uint32_t *dist, uint32_t *ways, uint32_t *path, size_t *nspread)
{
	/* how far each block is from one that ran, over blocks that did not */
	size_t head = 0, tail = 0;
	for (uint32_t b = 0; b < nblocks; b++) {
		dist[b] = blocks[b].flow ? 0 : UINT32_MAX;
		if (blocks[b].flow)
			w->queue[tail++] = b;
	}
	while (head < tail) {
		uint32_t u = w->queue[head++];
		if (dist[u] >= depth)
			continue;
		for (size_t k = out->start[u]; k < out->start[u + 1]; k++) {
			uint32_t v = edges[out->list[k]].dst;
			if (v != EP_INFER_OUTSIDE && dist[v] == UINT32_MAX) {
				dist[v] = dist[u] + 1;
				w->queue[tail++] = v;
			}
		}
	}
	/* the queue's order: nearest first, so a block given flow carries it
	 * on to those behind it */
	uint32_t *order = malloc((tail ? tail : 1) * sizeof(*order));
	if (!order)
		return EP_INFER_NO_MEMORY;
	size_t norder = 0;
	for (size_t i = 0; i < tail; i++)
		if (dist[w->queue[i]] > 0)
			order[norder++] = w->queue[i];
	enum ep_infer_status st = EP_INFER_OK;
	for (size_t i = 0; i < norder && st == EP_INFER_OK; i++) {
		uint32_t b = order[i];
		if (blocks[b].flow)
			continue;
		size_t nways = 0, npath = 0;
		uint32_t back = way_out(w, in, edges, b, false);
		if (back != UINT32_MAX)
			take_way(w, edges, b, back, false, ways, &nways, path, &npath);
		uint32_t fwd = back == UINT32_MAX ? UINT32_MAX : way_out(w, out, edges, b, true);
		if (w->work > w->max_work) {
			st = EP_INFER_TOO_SLOW;
			break;
		}
		if (fwd == UINT32_MAX)
			continue;
		take_way(w, edges, b, fwd, true, ways, &nways, path, &npath);
		for (size_t k = 0; k < nways; k++)
			edges[ways[k]].flow++;
		for (size_t k = 0; k < npath; k++)
			blocks[path[k]].flow++;
		blocks[b].flow++;
		(*nspread)++;
	}
	free(order);
	return st;
}

enum ep_infer_status ep_infer_spread(struct ep_infer_block *blocks, size_t nblocks,
				     struct ep_infer_edge *edges, size_t nedges,
				     const struct ep_infer_limits *limits, size_t *nspread)
{
	*nspread = 0;
	if (!limits->spread_depth || !nblocks)
		return EP_INFER_OK;
	struct adj out = {0}, in = {0};
	struct walk w = {.max_work = limits->max_work};
	w.queue = malloc(nblocks * sizeof(*w.queue));
	w.via = malloc(nblocks * sizeof(*w.via));
	w.seen = calloc(nblocks, sizeof(*w.seen));
	uint32_t *dist = malloc(nblocks * sizeof(*dist));
	uint32_t *ways = malloc((2 * nblocks + 2) * sizeof(*ways));
	uint32_t *path = malloc((2 * nblocks + 2) * sizeof(*path));
	enum ep_infer_status st = EP_INFER_NO_MEMORY;
	if (w.queue && w.via && w.seen && dist && ways && path &&
	    adj_build(&out, edges, nedges, nblocks, true) == 0 &&
	    adj_build(&in, edges, nedges, nblocks, false) == 0)
		st = spread(blocks, nblocks, edges, &out, &in, &w, limits->spread_depth, dist, ways,
			    path, nspread);
	adj_free(&out);
	adj_free(&in);
	free(w.queue);
	free(w.via);
	free(w.seen);
	free(dist);
	free(ways);
	free(path);
	return st;
}
