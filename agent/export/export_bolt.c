/* SPDX-License-Identifier: Apache-2.0 */
/*
 * BOLT's two profile inputs.
 *
 * fdata (llvm-bolt BIN -data F): one line per edge,
 *   "<1|0> <function|[unknown]> <hex offset> <1|0> <function|[unknown]> <hex offset> <mispredicted>
 * <count>". Not-taken edges are written as branches to the next instruction: BOLT attaches a branch
 * record to whichever successor block the target starts, so these land on the fall-through edge,
 * which is exactly what they count.
 *
 * preagg (perf2bolt -pa -p F): "B <from> <to> <count> <mispredicted>" for
 * every edge (not-taken ones as above) and "F <start> <end> <count>" for each
 * straight-line range, hex ELF virtual addresses (pre-aggregated data has no
 * mmap events, so BOLT reads addresses as the binary's own).
 */
#include <inttypes.h>
#include <stdio.h>

#include "export_internal.h"

static void location(FILE *out, const Edgeprof__V1__BinaryProfile *bp, uint64_t addr, bool external)
{
	const Edgeprof__V1__Function *f = external ? NULL : ep_export_function_at(bp, addr);
	if (f)
		fprintf(out, "1 %s %" PRIx64, f->name, addr - f->start);
	else if (external)
		fputs("0 [unknown] 0", out);
	else
		fprintf(out, "0 [unknown] %" PRIx64, addr);
}

int ep_export_fdata(const Edgeprof__V1__BinaryProfile *bp, FILE *out)
{
	for (size_t i = 0; i < bp->n_edges; i++) {
		const Edgeprof__V1__Edge *e = bp->edges[i];
		location(out, bp, e->from, e->from_external);
		fputc(' ', out);
		location(out, bp, e->to, e->to_external);
		fprintf(out, " %" PRIu64 " %" PRIu64 "\n", e->mispredicted, e->count);
	}
	return ferror(out) ? -1 : 0;
}

int ep_export_preagg(const Edgeprof__V1__BinaryProfile *bp, FILE *out)
{
	for (size_t i = 0; i < bp->n_edges; i++) {
		const Edgeprof__V1__Edge *e = bp->edges[i];
		if (e->from_external || e->to_external)
			continue; /* no address in this binary to name */
		fprintf(out, "B %" PRIx64 " %" PRIx64 " %" PRIu64 " %" PRIu64 "\n", e->from, e->to,
			e->count, e->mispredicted);
	}
	for (size_t i = 0; i < bp->n_ranges; i++) {
		const Edgeprof__V1__Range *r = bp->ranges[i];
		fprintf(out, "F %" PRIx64 " %" PRIx64 " %" PRIu64 "\n", r->start, r->end, r->count);
	}
	return ferror(out) ? -1 : 0;
}
