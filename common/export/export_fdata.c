/* SPDX-License-Identifier: Apache-2.0 */
/*
 * BOLT's branch profile, what `llvm-bolt BIN -data F` reads (plain LBR
 * mode: no "no_lbr" or "boltedcollection" header). One line per edge:
 *
 *   <is_sym> <name> <hex offset> <is_sym> <name> <hex offset> <mispredicted> <count>
 *   1 main 3e 1 main 44 0 13073
 *
 * An end inside a function of the profile is "1 NAME OFFSET" (offset from
 * the function's start). An end in another binary or unknown code is
 * "0 [unknown] 0", as perf2bolt writes it; an address of this binary that
 * no function covers keeps its address, "0 [unknown] ADDR", which BOLT
 * ignores but people can read. Lines with no function at either end are
 * left out: BOLT drops them too.
 *
 * Taken edges are branch lines. Not-taken edges are written the way
 * perf2bolt writes the fall-throughs it derives from LBR traces: a line
 * from the conditional branch (the last instruction of its basic block) to
 * the next instruction (the start of the fall-through block), which BOLT's
 * reader attaches to exactly that CFG edge. So conditional branches carry
 * measured counts on both edges and BOLT needs no inference for them.
 *
 * The fall-through between two blocks that no branch joins (straight-line
 * code running into a branch target) comes as BRANCH_FALLTHROUGH edges,
 * which the agent derives from the ranges and its disassembly of the
 * function: from the start of the instruction before the target, the form
 * perf2bolt writes and the only one BOLT's reader accepts (the source must
 * be an instruction of the block before; any other offset makes BOLT
 * discard the function's profile as stale). Profiles from older agents have
 * none, and BOLT then infers those edges.
 *
 * BOLT names a local (STB_LOCAL) function "NAME/N" and matches profile to
 * it by that name only, so a local is written so (the profile carries N in
 * Function.local_index). PLT entries are functions "SYM@PLT", as BOLT
 * names them. Names BOLT cannot parse (empty, blanks, backslashes) become
 * unknown ends.
 */
#include <inttypes.h>
#include <stdlib.h>

#include "common/export/export_internal.h"
#include "common/util/sat.h"

struct fdata_end {
	bool sym;
	const char *name;
	uint32_t local_index; /* "NAME/N" when not 0 */
	uint64_t offset;
};

static bool bolt_name_ok(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\\')
			return false;
	return true;
}

static struct fdata_end locate(const struct ep_func_index *fx, uint64_t addr, bool external)
{
	if (external)
		return (struct fdata_end){false, "[unknown]", 0, 0};
	long k = ep_func_index_find(fx, addr);
	if (k < 0 || !bolt_name_ok(fx->f[k]->name))
		return (struct fdata_end){false, "[unknown]", 0, addr};
	return (struct fdata_end){true, fx->f[k]->name, fx->f[k]->local_index,
				  addr - fx->f[k]->start};
}

static void put_end(FILE *out, const struct fdata_end *e)
{
	if (e->local_index)
		fprintf(out, "%d %s/%" PRIu32 " %" PRIx64, e->sym, e->name, e->local_index,
			e->offset);
	else
		fprintf(out, "%d %s %" PRIx64, e->sym, e->name, e->offset);
}

int ep_export_fdata(const Edgeprof__V1__BinaryProfile *bp, FILE *out, char *err, size_t errlen)
{
	struct ep_func_index fx;
	if (ep_func_index_init(&fx, bp) != 0)
		return ep_export_oom(err, errlen);
	const Edgeprof__V1__Edge **edges = ep_export_sorted_edges(bp);
	if (!edges) {
		ep_func_index_free(&fx);
		return ep_export_oom(err, errlen);
	}
	for (size_t i = 0; i < bp->n_edges;) {
		const Edgeprof__V1__Edge *e = edges[i];
		uint64_t count = 0, mispredicted = 0;
		for (; i < bp->n_edges && ep_export_same_ends(e, edges[i]); i++) {
			ep_add_sat(&count, edges[i]->count);
			ep_add_sat(&mispredicted, edges[i]->mispredicted);
		}
		struct fdata_end from = locate(&fx, e->from, e->from_external);
		struct fdata_end to = locate(&fx, e->to, e->to_external);
		if (count == 0 || (!from.sym && !to.sym))
			continue;
		put_end(out, &from);
		fputc(' ', out);
		put_end(out, &to);
		fprintf(out, " %" PRIu64 " %" PRIu64 "\n", mispredicted, count);
	}
	free(edges);
	ep_func_index_free(&fx);
	return ep_export_finish(out, err, errlen);
}
