/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fall-throughs between blocks that no branch joins.
 *
 * BOLT's fdata carries a block's fall-through into the next block only as
 * a line "last instruction of block A -> start of block B"; where B starts
 * at a branch target with no branch before it, nothing the LBR records
 * says so. perf2bolt derives these from the traces and its CFG; the fdata
 * export has neither, so they are made here, where the code is at hand
 * (FINDINGS rule 3): for each range [s, e] and each block start T of its
 * function with s < T <= e, an edge from the start of the instruction
 * before T (BOLT's reader wants an instruction of block A there: T-1 or an
 * earlier block start makes the function stale) to T, counted as often as
 * the range ran. Block starts are the function's direct jump and
 * conditional targets (BOLT starts a block at each, taken in the samples
 * or not) and the sampled targets of its indirect jumps (jump tables);
 * never a return landing site, where BOLT starts no block.
 */
#include <stdlib.h>
#include <string.h>

#include "agent/aggregate/aggregate_internal.h"
#include "common/profile/model.h"
#include "common/util/sorted_u64.h"

struct sweep_insn {
	uint64_t addr;
	uint8_t kind;
};

struct sweep {
	struct sweep_insn *insns;
	size_t ninsns, insns_cap;
	uint64_t *targets;
	size_t ntargets, targets_cap;
};

static int push_insn(struct sweep *w, uint64_t addr, uint8_t kind)
{
	if (w->ninsns == w->insns_cap) {
		size_t cap = w->insns_cap ? w->insns_cap * 2 : 256;
		struct sweep_insn *p = realloc(w->insns, cap * sizeof(*p));
		if (!p)
			return -1;
		w->insns = p;
		w->insns_cap = cap;
	}
	w->insns[w->ninsns++] = (struct sweep_insn){addr, kind};
	return 0;
}

static int push_target(struct sweep *w, uint64_t t)
{
	if (w->ntargets == w->targets_cap) {
		size_t cap = w->targets_cap ? w->targets_cap * 2 : 64;
		uint64_t *p = realloc(w->targets, cap * sizeof(*p));
		if (!p)
			return -1;
		w->targets = p;
		w->targets_cap = cap;
	}
	w->targets[w->ntargets++] = t;
	return 0;
}

static int cmp_addr(const void *pa, const void *pb)
{
	uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
	return a < b ? -1 : a > b;
}

/* The function's instructions (a linear sweep from its symbol, stopped at
 * bytes that do not decode) and its block starts, sorted and unique. */
static int sweep_function(struct ep_decoder *dec, const struct ep_symbol *sym,
			  const Edgeprof__V1__BinaryProfile *bp, struct sweep *w)
{
	uint64_t end = sym->start + sym->size;
	w->ninsns = w->ntargets = 0;
	for (uint64_t pc = sym->start; pc < end;) {
		struct ep_insn_info info;
		if (!ep_decoder_insn(dec, pc, &info) || info.len == 0)
			break;
		if (push_insn(w, pc, info.kind) != 0)
			return -1;
		if ((info.kind == EP_BRANCH_COND || info.kind == EP_BRANCH_JUMP) &&
		    info.target > sym->start && info.target < end &&
		    push_target(w, info.target) != 0)
			return -1;
		pc += info.len;
	}
	/* edges are sorted by from: the function's own start at lo */
	size_t lo = 0, hi = bp->n_edges;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (bp->edges[mid]->from < sym->start)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo; i < bp->n_edges && bp->edges[i]->from < end; i++) {
		const Edgeprof__V1__Edge *e = bp->edges[i];
		if (e->kind == EDGEPROF__V1__BRANCH_KIND__BRANCH_JUMP_INDIRECT && e->taken &&
		    !e->from_external && !e->to_external && e->to > sym->start && e->to < end &&
		    push_target(w, e->to) != 0)
			return -1;
	}
	if (w->ntargets > 1)
		qsort(w->targets, w->ntargets, sizeof(*w->targets), cmp_addr);
	size_t out = 0;
	for (size_t i = 0; i < w->ntargets; i++)
		if (out == 0 || w->targets[out - 1] != w->targets[i])
			w->targets[out++] = w->targets[i];
	w->ntargets = out;
	return 0;
}

/* The instruction just before addr in the sweep, or NULL when addr is no
 * instruction start of it (the sweep and the branch disagree: no line is
 * better than one BOLT calls stale). */
static const struct sweep_insn *insn_before(const struct sweep *w, uint64_t addr)
{
	size_t lo = 0, hi = w->ninsns;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (w->insns[mid].addr < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || lo == w->ninsns || w->insns[lo].addr != addr)
		return NULL;
	return &w->insns[lo - 1];
}

static bool is_plt_entry(const struct ep_symbol *sym)
{
	size_t len = strlen(sym->name);
	return len > 4 && strcmp(sym->name + len - 4, "@PLT") == 0;
}

/* Ranges [first, last) start in sym: adds its fall-through edges to v. */
static int function_fallthroughs(struct ep_decoder *dec, const struct ep_symbol *sym,
				 const Edgeprof__V1__BinaryProfile *bp, size_t first, size_t last,
				 struct sweep *w, struct ep_agg_edges *v)
{
	if (sweep_function(dec, sym, bp, w) != 0)
		return -1;
	if (w->ntargets == 0)
		return 0;
	uint64_t *counts = calloc(w->ntargets, sizeof(*counts));
	if (!counts)
		return -1;
	for (size_t i = first; i < last; i++) {
		const Edgeprof__V1__Range *r = bp->ranges[i];
		for (size_t k = ep_lower_bound_u64(w->targets, w->ntargets, r->start + 1);
		     k < w->ntargets && w->targets[k] <= r->end; k++)
			counts[k] += r->count;
	}
	int rc = 0;
	for (size_t k = 0; k < w->ntargets && rc == 0; k++) {
		const struct sweep_insn *prev = counts[k] ? insn_before(w, w->targets[k]) : NULL;
		/* a branch before T has its own not-taken edge to T */
		if (!prev || prev->kind != EP_BRANCH_NONE)
			continue;
		Edgeprof__V1__Edge *e = ep_agg_edge_push(v);
		if (!e) {
			rc = -1;
			break;
		}
		e->from = prev->addr;
		e->to = w->targets[k];
		e->taken = false;
		e->count = counts[k];
		e->kind = EDGEPROF__V1__BRANCH_KIND__BRANCH_FALLTHROUGH;
	}
	free(counts);
	return rc;
}

int ep_agg_fallthroughs(struct ep_decoder *dec, const struct ep_binary *bin,
			Edgeprof__V1__BinaryProfile *bp)
{
	struct sweep w = {0};
	struct ep_agg_edges v = {0};
	int rc = 0;
	/* ranges are sorted by start: each function's are consecutive */
	for (size_t i = 0; i < bp->n_ranges && rc == 0;) {
		const struct ep_symbol *sym = ep_binary_symbol_at(bin, bp->ranges[i]->start);
		size_t j = i + 1;
		while (sym && j < bp->n_ranges && bp->ranges[j]->start - sym->start < sym->size)
			j++;
		if (sym && !is_plt_entry(sym))
			rc = function_fallthroughs(dec, sym, bp, i, j, &w, &v);
		i = j;
	}
	free(w.insns);
	free(w.targets);
	if (rc == 0 && v.n > 0) {
		Edgeprof__V1__Edge **all =
		    realloc(bp->edges, (bp->n_edges + v.n) * sizeof(*bp->edges));
		if (!all) {
			rc = -1;
		} else {
			memcpy(all + bp->n_edges, v.items, v.n * sizeof(*all));
			bp->edges = all;
			bp->n_edges += v.n;
			v.n = 0;
			qsort(bp->edges, bp->n_edges, sizeof(*bp->edges), ep_edge_cmp);
		}
	}
	for (size_t i = 0; i < v.n; i++)
		free(v.items[i]);
	free(v.items);
	return rc;
}
