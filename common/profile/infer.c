/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The flow solver of profile inference (infer.h).
 *
 * Each block is two nodes, in and out, joined by an arc that carries the
 * block's count; an edge is an arc from its source's out to its target's in;
 * outside the function is one more node, so entries and exits are arcs like
 * any other and a flow through the function is a circulation.
 *
 * What a count costs is piecewise linear around its sample w: each unit
 * below w costs DEC, each unit above costs INC. That is two parallel arcs:
 * one of capacity w and cost -DEC, one unbounded of cost INC (the constant
 * DEC * w dropped). The negative arcs are filled up front (every sample
 * taken at its word), which leaves every residual arc at a cost >= 0 and
 * some nodes with more flow in than out (or less) wherever the samples
 * disagree with flow. The cheapest way to even those out is then found by
 * successive shortest paths from a source feeding the surplus to a sink
 * draining the deficit (Dijkstra with Johnson's potentials). Samples that
 * agree with flow make no surplus: a function whose counts are consistent
 * costs one pass over its arcs.
 *
 * Lowering costs more than raising: a sample is a count that did happen,
 * and the error of a small count is mostly a miss. Raising a count the
 * samples saw as zero costs a little more than raising a seen one, so flow
 * takes the seen way when there is one (LLVM's profi weighs them alike).
 */
#include "common/profile/infer.h"

#include <stdint.h>
#include <stdlib.h>

enum {
	COST_INC = 10,
	COST_DEC = 20,
	COST_INC_ZERO = 11,
	COST_INC_UNKNOWN = 2,
	/* the last unit of a count a sample saw: what ran is not lowered to
	 * "never ran" unless flow cannot get there any other way */
	COST_DEC_SEEN = 300,
};

#define CAP_INF	 (INT64_C(1) << 60)
#define DIST_INF INT64_MAX

struct net {
	size_t nnodes, narcs, arcs_cap;
	uint32_t *to, *next; /* arc a's head; the next arc out of the same tail */
	int64_t *cap, *cost; /* residual capacity and cost; arc a^1 is a's reverse */
	uint32_t *head;	     /* first arc out of each node, UINT32_MAX none */
	int64_t *excess;
	uint64_t work, max_work;
};

const char *ep_infer_status_name(enum ep_infer_status s)
{
	switch (s) {
	case EP_INFER_OK:
		return "ok";
	case EP_INFER_TOO_BIG:
		return "more blocks or edges than --infer-max-blocks allows";
	case EP_INFER_TOO_SLOW:
		return "past the solver's work limit";
	case EP_INFER_TOO_MANY:
		return "counts too large to add up";
	case EP_INFER_NO_MEMORY:
		return "out of memory";
	case EP_INFER_BAD_GRAPH:
		return "an edge names no block";
	}
	return "?";
}

void ep_infer_limits_default(struct ep_infer_limits *l)
{
	l->max_blocks = EP_INFER_MAX_BLOCKS_DEFAULT;
	l->max_work = EP_INFER_MAX_WORK_DEFAULT;
	l->max_count = EP_INFER_MAX_COUNT;
	l->spread_depth = EP_INFER_SPREAD_DEPTH_DEFAULT;
	l->scale = EP_INFER_SCALE_DEFAULT;
}

static void net_free(struct net *n)
{
	free(n->to);
	free(n->next);
	free(n->cap);
	free(n->cost);
	free(n->head);
	free(n->excess);
}

static int net_init(struct net *n, size_t nnodes, size_t arcs_cap)
{
	*n = (struct net){.nnodes = nnodes, .arcs_cap = arcs_cap};
	n->to = malloc(arcs_cap * sizeof(*n->to));
	n->next = malloc(arcs_cap * sizeof(*n->next));
	n->cap = malloc(arcs_cap * sizeof(*n->cap));
	n->cost = malloc(arcs_cap * sizeof(*n->cost));
	n->head = malloc(nnodes * sizeof(*n->head));
	n->excess = calloc(nnodes, sizeof(*n->excess));
	if (!n->to || !n->next || !n->cap || !n->cost || !n->head || !n->excess) {
		net_free(n);
		return -1;
	}
	for (size_t i = 0; i < nnodes; i++)
		n->head[i] = UINT32_MAX;
	return 0;
}

/* An arc u -> v and its reverse; returns the arc's index. */
static uint32_t add_arc(struct net *n, uint32_t u, uint32_t v, int64_t cap, int64_t cost)
{
	uint32_t a = (uint32_t)n->narcs;
	n->to[a] = v, n->cap[a] = cap, n->cost[a] = cost, n->next[a] = n->head[u];
	n->head[u] = a;
	n->to[a + 1] = u, n->cap[a + 1] = 0, n->cost[a + 1] = -cost, n->next[a + 1] = n->head[v];
	n->head[v] = a + 1;
	n->narcs += 2;
	return a;
}

/* A count from u to v with sample w: the arcs of its cost (see the top),
 * the negative one filled. *taken is the filled arc (UINT32_MAX when none),
 * *more the unbounded one. */
static void add_count(struct net *n, uint32_t u, uint32_t v, uint64_t w, bool known, uint32_t *seen,
		      uint32_t *taken, uint32_t *more)
{
	*taken = UINT32_MAX;
	int64_t inc = !known ? COST_INC_UNKNOWN : w ? COST_INC : COST_INC_ZERO;
	*seen = UINT32_MAX;
	if (known && w) {
		*seen = add_arc(n, u, v, 0, -COST_DEC_SEEN);
		n->cap[*seen + 1] = 1;
		n->excess[v] += (int64_t)w;
		n->excess[u] -= (int64_t)w;
	}
	if (known && w > 1) {
		*taken = add_arc(n, u, v, 0, -COST_DEC);
		n->cap[*taken + 1] = (int64_t)w - 1;
	}
	*more = add_arc(n, u, v, CAP_INF, inc);
}

static uint64_t count_flow(const struct net *n, const uint32_t *arcs)
{
	uint32_t seen = arcs[0], taken = arcs[1], more = arcs[2];
	int64_t f = n->cap[more + 1];
	if (seen != UINT32_MAX)
		f += n->cap[seen + 1];
	if (taken != UINT32_MAX)
		f += n->cap[taken + 1];
	return (uint64_t)f;
}

struct heap {
	int64_t *key;
	uint32_t *node;
	size_t n;
};

static void heap_push(struct heap *h, int64_t key, uint32_t node)
{
	size_t i = h->n++;
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (h->key[p] <= key)
			break;
		h->key[i] = h->key[p], h->node[i] = h->node[p];
		i = p;
	}
	h->key[i] = key, h->node[i] = node;
}

static void heap_pop(struct heap *h)
{
	int64_t key = h->key[--h->n];
	uint32_t node = h->node[h->n];
	size_t i = 0;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= h->n)
			break;
		if (c + 1 < h->n && h->key[c + 1] < h->key[c])
			c++;
		if (h->key[c] >= key)
			break;
		h->key[i] = h->key[c], h->node[i] = h->node[c];
		i = c;
	}
	h->key[i] = key, h->node[i] = node;
}

struct sp {
	int64_t *pot, *dist;
	uint32_t *via; /* the arc a node was reached by */
	struct heap heap;
};

/* Shortest path from s to t in reduced costs; updates the potentials.
 * false when t is unreachable or the work runs out. */
static bool dijkstra(struct net *n, struct sp *sp, uint32_t s, uint32_t t)
{
	for (size_t i = 0; i < n->nnodes; i++)
		sp->dist[i] = DIST_INF;
	sp->dist[s] = 0;
	sp->heap.n = 0;
	heap_push(&sp->heap, 0, s);
	while (sp->heap.n) {
		int64_t d = sp->heap.key[0];
		uint32_t u = sp->heap.node[0];
		heap_pop(&sp->heap);
		if (d != sp->dist[u])
			continue;
		if (u == t)
			break;
		for (uint32_t a = n->head[u]; a != UINT32_MAX; a = n->next[a]) {
			n->work++;
			if (n->cap[a] <= 0)
				continue;
			uint32_t v = n->to[a];
			int64_t nd = d + n->cost[a] + sp->pot[u] - sp->pot[v];
			if (nd < sp->dist[v]) {
				sp->dist[v] = nd;
				sp->via[v] = a;
				heap_push(&sp->heap, nd, v);
			}
		}
		if (n->work > n->max_work)
			return false;
	}
	int64_t dt = sp->dist[t];
	if (dt == DIST_INF)
		return false;
	/* nodes not settled are at least dt away: capping at dt keeps every
	 * reduced cost >= 0 */
	for (size_t i = 0; i < n->nnodes; i++)
		sp->pot[i] += sp->dist[i] < dt ? sp->dist[i] : dt;
	return true;
}

/* Evens out the surplus and deficit of every node the cheapest way. */
static enum ep_infer_status even_out(struct net *n)
{
	size_t real = n->nnodes - 2;
	uint32_t s = (uint32_t)real, t = (uint32_t)real + 1;
	int64_t need = 0;
	for (uint32_t v = 0; v < real; v++) {
		if (n->excess[v] > 0) {
			add_arc(n, s, v, n->excess[v], 0);
			need += n->excess[v];
		} else if (n->excess[v] < 0) {
			add_arc(n, v, t, -n->excess[v], 0);
		}
	}
	if (need == 0)
		return EP_INFER_OK;
	struct sp sp = {0};
	sp.pot = calloc(n->nnodes, sizeof(*sp.pot));
	sp.dist = malloc(n->nnodes * sizeof(*sp.dist));
	sp.via = malloc(n->nnodes * sizeof(*sp.via));
	sp.heap.key = malloc((n->narcs + 1) * sizeof(*sp.heap.key));
	sp.heap.node = malloc((n->narcs + 1) * sizeof(*sp.heap.node));
	enum ep_infer_status st = EP_INFER_OK;
	if (!sp.pot || !sp.dist || !sp.via || !sp.heap.key || !sp.heap.node)
		st = EP_INFER_NO_MEMORY;
	while (st == EP_INFER_OK && need > 0) {
		if (!dijkstra(n, &sp, s, t)) {
			/* the reverse of every filled arc leads back: t stays reachable */
			st = n->work > n->max_work ? EP_INFER_TOO_SLOW : EP_INFER_BAD_GRAPH;
			break;
		}
		int64_t push = need;
		for (uint32_t v = t; v != s; v = n->to[sp.via[v] ^ 1])
			if (n->cap[sp.via[v]] < push)
				push = n->cap[sp.via[v]];
		for (uint32_t v = t; v != s; v = n->to[sp.via[v] ^ 1]) {
			n->cap[sp.via[v]] -= push;
			n->cap[sp.via[v] ^ 1] += push;
		}
		need -= push;
	}
	free(sp.pot);
	free(sp.dist);
	free(sp.via);
	free(sp.heap.key);
	free(sp.heap.node);
	return st;
}

static void keep_samples(struct ep_infer_block *blocks, size_t nblocks, struct ep_infer_edge *edges,
			 size_t nedges)
{
	for (size_t i = 0; i < nblocks; i++)
		blocks[i].flow = blocks[i].count;
	for (size_t i = 0; i < nedges; i++)
		edges[i].flow = edges[i].count;
}

static enum ep_infer_status check_input(const struct ep_infer_block *blocks, size_t nblocks,
					const struct ep_infer_edge *edges, size_t nedges,
					const struct ep_infer_limits *l)
{
	if (nblocks > l->max_blocks || nedges > 4 * l->max_blocks)
		return EP_INFER_TOO_BIG;
	uint64_t sum = 0;
	for (size_t i = 0; i < nblocks; i++) {
		if (blocks[i].count > l->max_count - sum)
			return EP_INFER_TOO_MANY;
		sum += blocks[i].count;
	}
	for (size_t i = 0; i < nedges; i++) {
		const struct ep_infer_edge *e = &edges[i];
		if ((e->src >= nblocks && e->src != EP_INFER_OUTSIDE) ||
		    (e->dst >= nblocks && e->dst != EP_INFER_OUTSIDE))
			return EP_INFER_BAD_GRAPH;
		if (e->count > l->max_count - sum)
			return EP_INFER_TOO_MANY;
		sum += e->count;
	}
	return EP_INFER_OK;
}

enum ep_infer_status ep_infer_solve(struct ep_infer_block *blocks, size_t nblocks,
				    struct ep_infer_edge *edges, size_t nedges,
				    const struct ep_infer_limits *limits)
{
	keep_samples(blocks, nblocks, edges, nedges);
	enum ep_infer_status st = check_input(blocks, nblocks, edges, nedges, limits);
	if (st != EP_INFER_OK)
		return st;
	/* nodes: in and out per block, outside, source, sink; arcs: two counts
	 * (four arcs) per block and edge, one to the source or sink per node */
	size_t outside = 2 * nblocks, nnodes = outside + 3;
	size_t narcs = 6 * (nblocks + nedges) + 2 * (outside + 1);
	uint32_t *arcs = malloc(3 * (nblocks + nedges + 1) * sizeof(*arcs));
	struct net n;
	if (!arcs || net_init(&n, nnodes, narcs) != 0) {
		free(arcs);
		return EP_INFER_NO_MEMORY;
	}
	n.nnodes = nnodes;
	n.max_work = limits->max_work;
	for (size_t i = 0; i < nblocks; i++)
		add_count(&n, (uint32_t)(2 * i), (uint32_t)(2 * i + 1), blocks[i].count,
			  blocks[i].known, &arcs[3 * i], &arcs[3 * i + 1], &arcs[3 * i + 2]);
	for (size_t i = 0; i < nedges; i++) {
		const struct ep_infer_edge *e = &edges[i];
		uint32_t u = e->src == EP_INFER_OUTSIDE ? (uint32_t)outside : 2 * e->src + 1;
		uint32_t v = e->dst == EP_INFER_OUTSIDE ? (uint32_t)outside : 2 * e->dst;
		size_t k = 3 * (nblocks + i);
		add_count(&n, u, v, e->count, e->known, &arcs[k], &arcs[k + 1], &arcs[k + 2]);
	}
	st = even_out(&n);
	if (st == EP_INFER_OK) {
		for (size_t i = 0; i < nblocks; i++)
			blocks[i].flow = count_flow(&n, &arcs[3 * i]);
		for (size_t i = 0; i < nedges; i++) {
			edges[i].flow = count_flow(&n, &arcs[3 * (nblocks + i)]);
		}
	}
	net_free(&n);
	free(arcs);
	return st;
}
