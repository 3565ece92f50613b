/* SPDX-License-Identifier: Apache-2.0 */
/*
 * AutoFDO's text profile (create_llvm_prof --profiler text): three sections,
 * each a count line and then "start-end:count" ranges, "addr:count" sample
 * addresses, "from->to:count" taken branches, hex without 0x. AutoFDO's
 * addresses are offsets into the binary file (what its perf reader computes
 * from the mappings), so ELF virtual addresses go back through the
 * profile's load segments; an address in none is left out.
 */
#include <inttypes.h>
#include <stdio.h>

#include "export_internal.h"

static bool file_offset(const Edgeprof__V1__BinaryProfile *bp, uint64_t vaddr, uint64_t *off)
{
	for (size_t i = 0; i < bp->n_segments; i++) {
		const Edgeprof__V1__LoadSegment *s = bp->segments[i];
		if (vaddr >= s->vaddr && vaddr - s->vaddr < s->size) {
			*off = vaddr - s->vaddr + s->offset;
			return true;
		}
	}
	return false;
}

int ep_export_afdo(const Edgeprof__V1__BinaryProfile *bp, FILE *out)
{
	uint64_t a, b;
	size_t n = 0;
	for (size_t i = 0; i < bp->n_ranges; i++)
		n += file_offset(bp, bp->ranges[i]->start, &a) &&
		     file_offset(bp, bp->ranges[i]->end, &b);
	fprintf(out, "%zu\n", n);
	for (size_t i = 0; i < bp->n_ranges; i++) {
		const Edgeprof__V1__Range *r = bp->ranges[i];
		if (file_offset(bp, r->start, &a) && file_offset(bp, r->end, &b))
			fprintf(out, "%" PRIx64 "-%" PRIx64 ":%" PRIu64 "\n", a, b, r->count);
	}
	n = 0;
	for (size_t i = 0; i < bp->n_ips; i++)
		n += file_offset(bp, bp->ips[i]->ip, &a);
	fprintf(out, "%zu\n", n);
	for (size_t i = 0; i < bp->n_ips; i++)
		if (file_offset(bp, bp->ips[i]->ip, &a))
			fprintf(out, "%" PRIx64 ":%" PRIu64 "\n", a, bp->ips[i]->count);
	n = 0;
	for (size_t i = 0; i < bp->n_edges; i++) {
		const Edgeprof__V1__Edge *e = bp->edges[i];
		n += e->taken && !e->to_external && !e->from_external &&
		     file_offset(bp, e->from, &a) && file_offset(bp, e->to, &b);
	}
	fprintf(out, "%zu\n", n);
	for (size_t i = 0; i < bp->n_edges; i++) {
		const Edgeprof__V1__Edge *e = bp->edges[i];
		if (e->taken && !e->to_external && !e->from_external &&
		    file_offset(bp, e->from, &a) && file_offset(bp, e->to, &b))
			fprintf(out, "%" PRIx64 "->%" PRIx64 ":%" PRIu64 "\n", a, b, e->count);
	}
	return ferror(out) ? -1 : 0;
}
