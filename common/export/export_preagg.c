/* SPDX-License-Identifier: Apache-2.0 */
/*
 * BOLT's pre-aggregated profile, what `perf2bolt -pa -p F -o OUT.fdata BIN`
 * reads (BOLT 16's DataAggregator):
 *
 *   B <from> <to> <count> <mispredicted>   a branch taken count times
 *   F <start> <end> <count>                a fall-through trace: straight-line
 *                                          code from start to the branch at end
 *   f <start> <end> <count>                the same, entered from another
 *                                          function or binary
 *
 * Addresses are hex without "0x". In -pa mode perf2bolt reads no mmap
 * events and looks every address up as it stands in the binary, so ELF
 * virtual addresses are right for PIE and non-PIE alike. BOLT 16 also
 * takes "BUILDID:ADDR" but ignores the build-id, so it is not written. An
 * end outside the binary is 0: perf2bolt counts a branch from 0 into a
 * function as an entry (the function's execution count), as it does for
 * LBR entries from unknown code.
 *
 * Not-taken edges are B lines from the branch to the next instruction,
 * which perf2bolt records as that fall-through edge. With ranges split at
 * every branch (range_mode "split") no F trace crosses a branch, so the
 * two never count the same edge; with AutoFDO's whole gaps ("gap") the F
 * traces already walk over the not-taken branches, so those B lines are
 * left out.
 *
 * perf2bolt expands each trace into the fall-throughs between BOLT's own
 * basic blocks, which is how this format carries what fdata cannot. For a
 * trace entered from outside its function (a return, a call from another
 * binary) perf2bolt also credits the fall-through from the block ending
 * with the call to the block the trace starts in, when the return lands on
 * a block start; it knows this from the LBR, the profile from the edges
 * into the range's start. So each range's count is split between f and F
 * in the proportion of its start's incoming edge counts from outside the
 * function and from inside.
 *
 * Traces inside a PLT entry ("SYM@PLT", or PLT0, "__BOLT_PSEUDO_.plt", which
 * a lazily bound first call goes through) are left out: perf2bolt does not
 * disassemble PLT entries as code it can lay traces on and would only count
 * them as "traces mismatching disassembled function contents", hiding a
 * real mismatch in that figure. Fall-through edges (BRANCH_FALLTHROUGH) are
 * left out too: perf2bolt derives them from the F traces itself.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/export/export_internal.h"
#include "common/util/sat.h"

static bool is_fallthrough(const Edgeprof__V1__Edge *e)
{
	return e->kind == EDGEPROF__V1__BRANCH_KIND__BRANCH_FALLTHROUGH;
}

static bool in_plt(const struct ep_func_index *fx, uint64_t addr)
{
	long k = ep_func_index_find(fx, addr);
	if (k < 0)
		return false;
	const char *name = fx->f[k]->name;
	size_t len = strlen(name);
	return (len > 4 && strcmp(name + len - 4, "@PLT") == 0) ||
	       strncmp(name, "__BOLT_PSEUDO_.plt", sizeof("__BOLT_PSEUDO_.plt") - 1) == 0;
}

static int cmp_edge_to(const void *pa, const void *pb)
{
	const Edgeprof__V1__Edge *a = *(const Edgeprof__V1__Edge *const *)pa;
	const Edgeprof__V1__Edge *b = *(const Edgeprof__V1__Edge *const *)pb;
	return a->to < b->to ? -1 : a->to > b->to;
}

/* How many of the range's executions entered from outside its function. */
static uint64_t entered_from_outside(const struct ep_func_index *fx,
				     const Edgeprof__V1__Edge **by_to, size_t n,
				     const Edgeprof__V1__Range *r)
{
	long fn = ep_func_index_find(fx, r->start);
	/* a function's entry is no block after a call: nothing to credit */
	if (fn < 0 || fx->f[fn]->start == r->start)
		return 0;
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (by_to[mid]->to < r->start)
			lo = mid + 1;
		else
			hi = mid;
	}
	uint64_t all = 0, outside = 0;
	for (size_t i = lo; i < n && by_to[i]->to == r->start; i++) {
		const Edgeprof__V1__Edge *e = by_to[i];
		if (e->to_external)
			continue;
		all += e->count;
		if (e->from_external || ep_func_index_find(fx, e->from) != fn)
			outside += e->count;
	}
	if (outside == 0)
		return 0;
	if (outside >= all)
		return r->count;
	return (uint64_t)((unsigned __int128)r->count * outside / all);
}

int ep_export_preagg(const Edgeprof__V1__Profile *p, const Edgeprof__V1__BinaryProfile *bp,
		     FILE *out, char *err, size_t errlen)
{
	bool gap_ranges = p->config && strcmp(p->config->range_mode, "gap") == 0;
	struct ep_func_index fx = {0};
	const Edgeprof__V1__Edge **edges = ep_export_sorted_edges(bp);
	const Edgeprof__V1__Range **ranges = ep_export_sorted_ranges(bp);
	const Edgeprof__V1__Edge **by_to = malloc((bp->n_edges ? bp->n_edges : 1) * sizeof(*by_to));
	int rc;
	if (!edges || !ranges || !by_to || ep_func_index_init(&fx, bp) != 0) {
		rc = ep_export_oom(err, errlen);
		goto out;
	}
	size_t nby_to = 0;
	for (size_t i = 0; i < bp->n_edges; i++)
		if (!is_fallthrough(bp->edges[i]))
			by_to[nby_to++] = bp->edges[i];
	qsort(by_to, nby_to, sizeof(*by_to), cmp_edge_to);

	for (size_t i = 0; i < bp->n_edges;) {
		const Edgeprof__V1__Edge *e = edges[i];
		uint64_t count = 0, mispredicted = 0;
		for (; i < bp->n_edges && ep_export_same_ends(e, edges[i]); i++) {
			if ((gap_ranges && !edges[i]->taken) || is_fallthrough(edges[i]))
				continue;
			ep_add_sat(&count, edges[i]->count);
			ep_add_sat(&mispredicted, edges[i]->mispredicted);
		}
		if (count == 0 || (e->from_external && e->to_external))
			continue;
		fprintf(out, "B %" PRIx64 " %" PRIx64 " %" PRIu64 " %" PRIu64 "\n",
			e->from_external ? 0 : e->from, e->to_external ? 0 : e->to, count,
			mispredicted);
	}
	for (size_t i = 0; i < bp->n_ranges; i++) {
		const Edgeprof__V1__Range *r = ranges[i];
		if (in_plt(&fx, r->start))
			continue;
		uint64_t outside = entered_from_outside(&fx, by_to, nby_to, r);
		if (outside)
			fprintf(out, "f %" PRIx64 " %" PRIx64 " %" PRIu64 "\n", r->start, r->end,
				outside);
		if (r->count > outside)
			fprintf(out, "F %" PRIx64 " %" PRIx64 " %" PRIu64 "\n", r->start, r->end,
				r->count - outside);
	}
	rc = ep_export_finish(out, err, errlen);
out:
	ep_func_index_free(&fx);
	free(edges);
	free(ranges);
	free(by_to);
	return rc;
}
