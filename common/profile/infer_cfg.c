/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Profile inference on a binary's functions (infer.h): each sampled
 * function's control-flow graph from its code, its samples as evidence, the
 * solver's counts written back as the branches the exports read.
 *
 * Blocks start where BOLT starts them: the function's entry, the direct
 * targets of its jumps and conditional branches, the sampled targets of its
 * indirect jumps, the instruction after any branch but a call, and any
 * address entered from outside (a call, a tail call, a landing pad); never
 * a return's landing site, which continues the block of its call.
 *
 * Evidence, in the profile's own units:
 * - a block ran as often as the ranges that hold its first instruction (a
 *   range starting at a return site holds the rest of its call's block, not
 *   that block's start, so it is not counted again);
 * - a conditional branch's taken and not-taken edges, a jump's, an indirect
 *   jump's per target, a return's: their sampled counts;
 * - the fall-through between blocks no branch joins: the ranges that run
 *   across the boundary; after a call it is unknown (ranges stop at calls);
 * - the function's entries: the calls and jumps into its blocks from
 *   outside it (its own recursive calls too).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/profile/infer.h"
#include "common/profile/model.h"
#include "common/profile/pb_copy.h"
#include "common/util/sorted_u64.h"

/* What an edge of the graph writes back. */
enum what {
	W_ENTRY,     /* from outside: other functions' edges say it */
	W_TAKEN,     /* a direct branch's taken edge: from, to */
	W_NOT_TAKEN, /* a conditional branch's fall-through: from, to */
	W_FALL,	     /* a fall-through no branch makes: BRANCH_FALLTHROUGH */
	W_SCALED,    /* the sampled edges from `from` that leave the function */
	W_NONE,	     /* after a call: BOLT infers it */
};

struct meta {
	uint8_t what, kind; /* kind: the branch's Edgeprof__V1__BranchKind */
	uint64_t from, to, mispredicted;
};

struct insn {
	uint64_t addr, target;
	uint8_t kind, len;
};

struct cfg {
	const Edgeprof__V1__Function *fn;
	uint64_t lo, hi; /* [lo, hi): the function */
	struct insn *insns;
	size_t ninsns, insns_cap;
	uint64_t *leaders; /* block starts, sorted */
	size_t nleaders, leaders_cap;
	size_t *first; /* the index of each block's first instruction */
	struct ep_infer_block *blocks;
	struct ep_infer_edge *edges;
	struct meta *meta;
	size_t nedges, edges_cap;
};

/* The profile being rewritten: edges sorted by from (the copy's own order)
 * and by to; ranges by start. */
struct work {
	Edgeprof__V1__BinaryProfile *bp;
	const Edgeprof__V1__Edge **by_to;
	bool *drop; /* per edge of bp: replaced */
	Edgeprof__V1__Edge **added;
	size_t nadded, added_cap;
	const struct ep_infer_limits *limits;
	struct ep_infer_stats *stats;
};

static int grow(void **p, size_t *cap, size_t need, size_t size)
{
	if (need <= *cap)
		return 0;
	size_t c = *cap ? *cap : 64;
	while (c < need)
		c *= 2;
	void *q = realloc(*p, c * size);
	if (!q)
		return -1;
	*p = q;
	*cap = c;
	return 0;
}

static size_t first_from(const Edgeprof__V1__BinaryProfile *bp, uint64_t addr)
{
	size_t lo = 0, hi = bp->n_edges;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (bp->edges[mid]->from_external || bp->edges[mid]->from < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static size_t first_to(const struct work *w, uint64_t addr)
{
	size_t lo = 0, hi = w->bp->n_edges;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (w->by_to[mid]->to < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static size_t first_range(const Edgeprof__V1__BinaryProfile *bp, uint64_t addr)
{
	size_t lo = 0, hi = bp->n_ranges;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (bp->ranges[mid]->start < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The block starting at addr, or EP_INFER_OUTSIDE. */
static uint32_t block_at(const struct cfg *g, uint64_t addr)
{
	size_t k = ep_lower_bound_u64(g->leaders, g->nleaders, addr);
	return k < g->nleaders && g->leaders[k] == addr ? (uint32_t)k : EP_INFER_OUTSIDE;
}

static bool inside(const struct cfg *g, uint64_t addr)
{
	return addr >= g->lo && addr < g->hi;
}

static int add_leader(struct cfg *g, uint64_t addr)
{
	if (grow((void **)&g->leaders, &g->leaders_cap, g->nleaders + 1, sizeof(uint64_t)))
		return -1;
	g->leaders[g->nleaders++] = addr;
	return 0;
}

static int cmp_u64(const void *pa, const void *pb)
{
	uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
	return a < b ? -1 : a > b;
}

/* An edge entering the function's block at e->to from outside it. */
static bool enters(const struct cfg *g, const Edgeprof__V1__Edge *e)
{
	if (e->to_external || e->kind == EDGEPROF__V1__BRANCH_KIND__BRANCH_RETURN ||
	    e->kind == EDGEPROF__V1__BRANCH_KIND__BRANCH_FALLTHROUGH || !e->taken)
		return false;
	return e->from_external || !inside(g, e->from) ||
	       e->kind == EDGEPROF__V1__BRANCH_KIND__BRANCH_CALL ||
	       e->kind == EDGEPROF__V1__BRANCH_KIND__BRANCH_CALL_INDIRECT;
}

/* The function's instructions (a sweep, stopped at bytes that do not
 * decode) and its block starts. 1 when past the limits. */
static int sweep(struct cfg *g, struct ep_decoder *dec, const struct work *w)
{
	size_t max_insns = 16 * w->limits->max_blocks;
	if (add_leader(g, g->lo))
		return -1;
	for (uint64_t pc = g->lo; pc < g->hi;) {
		struct ep_insn_info info;
		if (!ep_decoder_insn(dec, pc, &info) || info.len == 0)
			break;
		if (g->ninsns == max_insns)
			return 1;
		if (grow((void **)&g->insns, &g->insns_cap, g->ninsns + 1, sizeof(*g->insns)))
			return -1;
		g->insns[g->ninsns++] = (struct insn){pc, info.target, info.kind, info.len};
		pc += info.len;
		bool direct = info.kind == EP_BRANCH_COND || info.kind == EP_BRANCH_JUMP;
		if (direct && inside(g, info.target) && add_leader(g, info.target))
			return -1;
		if (info.kind != EP_BRANCH_NONE && info.kind != EP_BRANCH_CALL &&
		    info.kind != EP_BRANCH_CALL_INDIRECT && pc < g->hi && add_leader(g, pc))
			return -1;
	}
	const Edgeprof__V1__BinaryProfile *bp = w->bp;
	for (size_t i = first_from(bp, g->lo); i < bp->n_edges && bp->edges[i]->from < g->hi; i++) {
		const Edgeprof__V1__Edge *e = bp->edges[i];
		if (e->kind == EDGEPROF__V1__BRANCH_KIND__BRANCH_JUMP_INDIRECT && e->taken &&
		    !e->to_external && inside(g, e->to) && add_leader(g, e->to))
			return -1;
	}
	for (size_t i = first_to(w, g->lo); i < bp->n_edges && w->by_to[i]->to < g->hi; i++)
		if (enters(g, w->by_to[i]) && add_leader(g, w->by_to[i]->to))
			return -1;
	qsort(g->leaders, g->nleaders, sizeof(*g->leaders), cmp_u64);
	/* unique, and only instruction starts (a target inside an instruction
	 * is code the sweep does not see) */
	size_t out = 0, k = 0;
	g->first = malloc((g->nleaders ? g->nleaders : 1) * sizeof(*g->first));
	if (!g->first)
		return -1;
	for (size_t i = 0; i < g->nleaders; i++) {
		if (out && g->leaders[out - 1] == g->leaders[i])
			continue;
		while (k < g->ninsns && g->insns[k].addr < g->leaders[i])
			k++;
		if (k == g->ninsns || g->insns[k].addr != g->leaders[i])
			continue;
		g->first[out] = k;
		g->leaders[out++] = g->leaders[i];
	}
	g->nleaders = out;
	return out > w->limits->max_blocks ? 1 : 0;
}

static int add_edge(struct cfg *g, uint32_t src, uint32_t dst, uint64_t count, bool known,
		    struct meta m)
{
	if (grow((void **)&g->edges, &g->edges_cap, g->nedges + 1, sizeof(*g->edges)))
		return -1;
	struct meta *mm = realloc(g->meta, g->edges_cap * sizeof(*mm));
	if (!mm)
		return -1;
	g->meta = mm;
	g->edges[g->nedges] =
	    (struct ep_infer_edge){.src = src, .dst = dst, .count = count, .known = known};
	g->meta[g->nedges++] = m;
	return 0;
}

/* Sampled counts of the edges from addr: taken to `to` (or, any_to, to
 * anywhere outside the function), or not taken. */
static uint64_t sampled(const struct work *w, const struct cfg *g, uint64_t addr, bool taken,
			bool any_outside, uint64_t to, uint64_t *mispredicted)
{
	const Edgeprof__V1__BinaryProfile *bp = w->bp;
	uint64_t n = 0;
	for (size_t i = first_from(bp, addr);
	     i < bp->n_edges && bp->edges[i]->from == addr && !bp->edges[i]->from_external; i++) {
		const Edgeprof__V1__Edge *e = bp->edges[i];
		if (!e->taken != !taken || e->kind == EDGEPROF__V1__BRANCH_KIND__BRANCH_FALLTHROUGH)
			continue;
		bool out = e->to_external || !inside(g, e->to);
		if (any_outside ? out : (!out && e->to == to)) {
			n += e->count;
			*mispredicted += e->mispredicted;
		}
	}
	return n;
}

/* Ranges running from before addr across it: the fall-through into addr. */
static uint64_t ranges_across(const struct work *w, const struct cfg *g, uint64_t addr)
{
	uint64_t n = 0;
	const Edgeprof__V1__BinaryProfile *bp = w->bp;
	for (size_t i = first_range(bp, g->lo); i < bp->n_ranges && bp->ranges[i]->start < addr;
	     i++)
		if (bp->ranges[i]->end >= addr)
			n += bp->ranges[i]->count;
	return n;
}

/* The edges out of block b, by the instruction that ends it. */
static int block_edges(struct cfg *g, const struct work *w, uint32_t b)
{
	size_t end = b + 1 < g->nleaders ? g->first[b + 1] : g->ninsns;
	const struct insn *l = &g->insns[end - 1];
	uint64_t next_addr = l->addr + l->len;
	uint32_t next = b + 1 < g->nleaders ? b + 1 : EP_INFER_OUTSIDE;
	uint64_t mis = 0;
	uint8_t kind = l->kind;
	if (kind == EP_BRANCH_COND || kind == EP_BRANCH_JUMP) {
		bool in = inside(g, l->target);
		uint64_t n = sampled(w, g, l->addr, true, !in, l->target, &mis);
		struct meta m = {W_TAKEN,
				 kind == EP_BRANCH_COND
				     ? EDGEPROF__V1__BRANCH_KIND__BRANCH_CONDITIONAL
				     : EDGEPROF__V1__BRANCH_KIND__BRANCH_JUMP,
				 l->addr, l->target, mis};
		if (add_edge(g, b, in ? block_at(g, l->target) : EP_INFER_OUTSIDE, n, true, m))
			return -1;
		if (kind == EP_BRANCH_JUMP)
			return 0;
		mis = 0;
		n = sampled(w, g, l->addr, false, false, next_addr, &mis);
		return add_edge(g, b, next, n, true,
				(struct meta){W_NOT_TAKEN,
					      EDGEPROF__V1__BRANCH_KIND__BRANCH_CONDITIONAL,
					      l->addr, next_addr, mis});
	}
	if (kind == EP_BRANCH_JUMP_INDIRECT) {
		const Edgeprof__V1__BinaryProfile *bp = w->bp;
		for (size_t i = first_from(bp, l->addr);
		     i < bp->n_edges && bp->edges[i]->from == l->addr; i++) {
			const Edgeprof__V1__Edge *e = bp->edges[i];
			uint32_t t = !e->taken || e->to_external || !inside(g, e->to)
					 ? EP_INFER_OUTSIDE
					 : block_at(g, e->to);
			if (t != EP_INFER_OUTSIDE &&
			    add_edge(g, b, t, e->count, true,
				     (struct meta){W_TAKEN,
						   EDGEPROF__V1__BRANCH_KIND__BRANCH_JUMP_INDIRECT,
						   l->addr, e->to, e->mispredicted}))
				return -1;
		}
	}
	if (kind == EP_BRANCH_JUMP_INDIRECT || kind == EP_BRANCH_RETURN ||
	    kind == EP_BRANCH_OTHER) {
		uint64_t n = sampled(w, g, l->addr, true, true, 0, &mis);
		return add_edge(g, b, EP_INFER_OUTSIDE, n, true,
				(struct meta){W_SCALED, 0, l->addr, 0, mis});
	}
	if (kind == EP_BRANCH_NONE && next != EP_INFER_OUTSIDE)
		return add_edge(g, b, next, ranges_across(w, g, next_addr), true,
				(struct meta){W_FALL, EDGEPROF__V1__BRANCH_KIND__BRANCH_FALLTHROUGH,
					      l->addr, next_addr, 0});
	/* after a call, or off the end of what decodes */
	return add_edge(g, b, next, 0, false, (struct meta){W_NONE, 0, l->addr, next_addr, 0});
}

/* A block no edge enters is the target of an indirect jump the samples did
 * not see take it there (a jump table's case) or a landing pad: it may be
 * entered from outside, at the cost of a count no sample speaks for, so
 * that what the samples saw in it is not lowered to nothing. */
static int unreached_entries(struct cfg *g)
{
	bool *entered = calloc(g->nleaders ? g->nleaders : 1, sizeof(*entered));
	if (!entered)
		return -1;
	for (size_t i = 0; i < g->nedges; i++)
		if (g->edges[i].dst != EP_INFER_OUTSIDE && g->edges[i].src != g->edges[i].dst)
			entered[g->edges[i].dst] = true;
	int rc = 0;
	for (uint32_t b = 0; b < g->nleaders && rc == 0; b++)
		if (!entered[b])
			rc = add_edge(g, EP_INFER_OUTSIDE, b, 0, false,
				      (struct meta){.what = W_ENTRY});
	free(entered);
	return rc;
}

/* Block counts from the ranges, entries from the edges into the blocks. */
static int evidence(struct cfg *g, const struct work *w)
{
	g->blocks = calloc(g->nleaders ? g->nleaders : 1, sizeof(*g->blocks));
	if (!g->blocks)
		return -1;
	const Edgeprof__V1__BinaryProfile *bp = w->bp;
	for (size_t i = first_range(bp, g->lo); i < bp->n_ranges && bp->ranges[i]->start < g->hi;
	     i++) {
		const Edgeprof__V1__Range *r = bp->ranges[i];
		for (size_t k = ep_lower_bound_u64(g->leaders, g->nleaders, r->start);
		     k < g->nleaders && g->leaders[k] <= r->end; k++)
			g->blocks[k].count += r->count;
	}
	for (size_t k = 0; k < g->nleaders; k++) {
		g->blocks[k].known = true;
		uint64_t n = 0;
		for (size_t i = first_to(w, g->leaders[k]);
		     i < bp->n_edges && w->by_to[i]->to == g->leaders[k]; i++)
			if (enters(g, w->by_to[i]))
				n += w->by_to[i]->count;
		if ((k == 0 || n) && add_edge(g, EP_INFER_OUTSIDE, (uint32_t)k, n, true,
					      (struct meta){.what = W_ENTRY}))
			return -1;
	}
	for (uint32_t b = 0; b < g->nleaders; b++)
		if (block_edges(g, w, b))
			return -1;
	return unreached_entries(g);
}

static int push_added(struct work *w, const struct meta *m, uint64_t count)
{
	if (grow((void **)&w->added, &w->added_cap, w->nadded + 1, sizeof(*w->added)))
		return -1;
	Edgeprof__V1__Edge *e = malloc(sizeof(*e));
	if (!e)
		return -1;
	edgeprof__v1__edge__init(e);
	e->from = m->from;
	e->to = m->to;
	e->taken = m->what == W_TAKEN;
	e->count = count;
	e->mispredicted = m->mispredicted < count ? m->mispredicted : count;
	e->kind = (Edgeprof__V1__BranchKind)m->kind;
	w->added[w->nadded++] = e;
	return 0;
}

/* The sampled edges m replaces are dropped; those it scales, scaled. */
static void replace(struct work *w, const struct cfg *g, const struct meta *m,
		    const struct ep_infer_edge *ie)
{
	Edgeprof__V1__BinaryProfile *bp = w->bp;
	for (size_t i = first_from(bp, m->from); i < bp->n_edges && bp->edges[i]->from == m->from;
	     i++) {
		Edgeprof__V1__Edge *e = bp->edges[i];
		if (e->from_external)
			continue;
		bool fall = e->kind == EDGEPROF__V1__BRANCH_KIND__BRANCH_FALLTHROUGH;
		bool out = e->to_external || !inside(g, e->to);
		if (m->what == W_SCALED) {
			if (e->taken && out && !fall && ie->count) {
				e->count =
				    (uint64_t)((unsigned __int128)e->count * ie->flow / ie->count);
				/* what was mispredicted scales alike, and never past the count */
				if (e->mispredicted > e->count)
					e->mispredicted = e->count;
			}
		} else if (m->what == W_FALL ? fall
					     : !fall && !e->taken == (m->what == W_NOT_TAKEN) &&
						   !e->to_external && e->to == m->to) {
			w->drop[i] = true;
		}
	}
}

static int write_back(struct work *w, const struct cfg *g)
{
	for (size_t i = 0; i < g->nedges; i++) {
		const struct meta *m = &g->meta[i];
		if (m->what == W_ENTRY || m->what == W_NONE)
			continue;
		replace(w, g, m, &g->edges[i]);
		if (m->what != W_SCALED && g->edges[i].flow && push_added(w, m, g->edges[i].flow))
			return -1;
	}
	struct ep_infer_stats *s = w->stats;
	s->functions++;
	for (size_t k = 0; k < g->nleaders; k++) {
		s->blocks++;
		s->blocks_zero_sampled += g->blocks[k].count == 0;
		s->blocks_zero_inferred += g->blocks[k].flow == 0;
	}
	return 0;
}

static int spread_and_write(struct work *w, struct cfg *g)
{
	size_t n = 0;
	/* past its work limit the units already spread stay (each keeps flow
	 * conserved) */
	if (ep_infer_spread(g->blocks, g->nleaders, g->edges, g->nedges, w->limits, &n) ==
	    EP_INFER_NO_MEMORY)
		return -1;
	w->stats->blocks_spread += n;
	return write_back(w, g);
}

static void cfg_free(struct cfg *g)
{
	free(g->insns);
	free(g->leaders);
	free(g->first);
	free(g->blocks);
	free(g->edges);
	free(g->meta);
}

static void refused(struct work *w, const char *name, enum ep_infer_status st)
{
	w->stats->functions_refused++;
	w->stats->last_refusal = st;
	snprintf(w->stats->last_refused, sizeof(w->stats->last_refused), "%s", name);
}

static bool sampled_function(const Edgeprof__V1__BinaryProfile *bp, uint64_t lo, uint64_t hi)
{
	size_t r = first_range(bp, lo);
	if (r < bp->n_ranges && bp->ranges[r]->start < hi)
		return true;
	size_t e = first_from(bp, lo);
	return e < bp->n_edges && bp->edges[e]->from < hi;
}

static bool is_plt(const char *name)
{
	size_t len = strlen(name);
	return (len > 4 && strcmp(name + len - 4, "@PLT") == 0) ||
	       strncmp(name, "__BOLT_PSEUDO", 13) == 0;
}

static int infer_function(struct work *w, struct ep_decoder *dec, const Edgeprof__V1__Function *fn)
{
	struct cfg g = {.fn = fn, .lo = fn->start, .hi = fn->start + fn->size};
	int rc = sweep(&g, dec, w);
	if (rc == 1) {
		refused(w, fn->name, EP_INFER_TOO_BIG);
		rc = 0;
	} else if (rc == 0 && g.ninsns > 0 && (rc = evidence(&g, w)) == 0) {
		enum ep_infer_status st =
		    ep_infer_solve(g.blocks, g.nleaders, g.edges, g.nedges, w->limits);
		if (st == EP_INFER_NO_MEMORY)
			rc = -1;
		else if (st != EP_INFER_OK)
			refused(w, fn->name, st);
		else
			rc = spread_and_write(w, &g);
	}
	cfg_free(&g);
	return rc;
}

static int cmp_edge_to(const void *pa, const void *pb)
{
	const Edgeprof__V1__Edge *a = *(const Edgeprof__V1__Edge *const *)pa;
	const Edgeprof__V1__Edge *b = *(const Edgeprof__V1__Edge *const *)pb;
	return a->to < b->to ? -1 : a->to > b->to;
}

/* bp's edges: the kept ones and the added ones, in the model's order. */
static int rebuild_edges(struct work *w)
{
	Edgeprof__V1__BinaryProfile *bp = w->bp;
	Edgeprof__V1__Edge **all = malloc((bp->n_edges + w->nadded + 1) * sizeof(*all));
	if (!all)
		return -1;
	size_t n = 0;
	for (size_t i = 0; i < bp->n_edges; i++) {
		if (w->drop[i])
			edgeprof__v1__edge__free_unpacked(bp->edges[i], NULL);
		else
			all[n++] = bp->edges[i];
	}
	for (size_t i = 0; i < w->nadded; i++)
		all[n++] = w->added[i];
	w->nadded = 0;
	free(bp->edges);
	bp->edges = all;
	bp->n_edges = n;
	qsort(bp->edges, bp->n_edges, sizeof(*bp->edges), ep_edge_cmp);
	return 0;
}

/* Every count times limits->scale, so that the unit ep_infer_spread() adds
 * is a fraction of a sample; -1 when a count would pass max_count. */
static int scale(Edgeprof__V1__BinaryProfile *bp, const struct ep_infer_limits *l)
{
	uint64_t k = l->scale ? l->scale : 1, max = l->max_count / k;
	for (size_t i = 0; i < bp->n_edges; i++)
		if (bp->edges[i]->count > max)
			return -1;
	for (size_t i = 0; i < bp->n_ranges; i++)
		if (bp->ranges[i]->count > max)
			return -1;
	for (size_t i = 0; i < bp->n_edges; i++) {
		bp->edges[i]->count *= k;
		bp->edges[i]->mispredicted *= k;
	}
	for (size_t i = 0; i < bp->n_ranges; i++)
		bp->ranges[i]->count *= k;
	return 0;
}

int ep_infer_profile(const Edgeprof__V1__BinaryProfile *in, struct ep_decoder *dec,
		     const struct ep_infer_limits *limits, Edgeprof__V1__BinaryProfile **out,
		     struct ep_infer_stats *stats)
{
	memset(stats, 0, sizeof(*stats));
	struct work w = {.limits = limits, .stats = stats};
	w.bp = ep_pb_copy(&in->base, (ep_pb_unpack_fn)edgeprof__v1__binary_profile__unpack);
	if (!w.bp)
		return -1;
	ep_binary_profile_sort(w.bp);
	if (scale(w.bp, limits) != 0) {
		edgeprof__v1__binary_profile__free_unpacked(w.bp, NULL);
		stats->last_refusal = EP_INFER_TOO_MANY;
		return 1;
	}
	size_t n = w.bp->n_edges ? w.bp->n_edges : 1;
	w.by_to = malloc(n * sizeof(*w.by_to));
	w.drop = calloc(n, sizeof(*w.drop));
	int rc = w.by_to && w.drop ? 0 : -1;
	if (rc == 0 && w.bp->n_edges) { /* edges is NULL when there are none */
		memcpy(w.by_to, w.bp->edges, w.bp->n_edges * sizeof(*w.by_to));
		qsort(w.by_to, w.bp->n_edges, sizeof(*w.by_to), cmp_edge_to);
	}
	for (size_t i = 0; rc == 0 && i < w.bp->n_functions; i++) {
		const Edgeprof__V1__Function *fn = w.bp->functions[i];
		if (fn->size && !is_plt(fn->name) &&
		    sampled_function(w.bp, fn->start, fn->start + fn->size))
			rc = infer_function(&w, dec, fn);
	}
	free(w.by_to);
	if (rc == 0)
		rc = rebuild_edges(&w);
	for (size_t i = 0; i < w.nadded; i++)
		edgeprof__v1__edge__free_unpacked(w.added[i], NULL);
	free(w.added);
	free(w.drop);
	if (rc != 0) {
		edgeprof__v1__binary_profile__free_unpacked(w.bp, NULL);
		return -1;
	}
	*out = w.bp;
	return 0;
}
