/* SPDX-License-Identifier: Apache-2.0 */
/*
 * AutoFDO's text profile, what `create_llvm_prof --profiler text` reads
 * (TextSampleReaderWriter): three sections, each a decimal count line and
 * then that many records, hex without "0x":
 *
 *   N                  ranges executed, end inclusive: the address of the
 *   start-end:count    instruction closing the range (1000-1010:10)
 *   N                  sample addresses
 *   addr:count         (1012:4)
 *   N                  taken branches
 *   from->to:count     (1010->1030:7)
 *
 * AutoFDO's addresses are file offsets: its perf reader computes
 * "runtime address - mmap start + mmap page offset", and create_llvm_prof
 * maps them back with the binary's executable PT_LOAD segments. So ELF
 * virtual addresses become "vaddr - segment vaddr + segment file offset"
 * through the load segments the profile carries (for a non-PIE binary
 * linked at 0x400000 that is vaddr - 0x400000). An address in no segment,
 * and an edge with an end outside the binary, has no offset to write and
 * is left out. Not-taken edges are not written: AutoFDO's branches are the
 * taken ones the LBR records, and the ranges already count the code.
 *
 * llvm-profgen's unsymbolized profile (`llvm-profgen --unsymbolized-profile
 * F --use-offset=false`) is the same ranges and taken branches without the
 * sample addresses, in ELF virtual addresses:
 *
 *   N                  ranges
 *   start-end:count    (401000-401010:10)
 *   N                  taken branches
 *   from->to:count     (401010->401030:7)
 *
 * It is the route that works with Debian 12's tools: create_llvm_prof 0.19
 * writes callee names of inlined code from freed memory, which clang
 * refuses (see README, AutoFDO). Without --use-offset=false, LLVM 14 reads
 * the addresses as offsets from a base it picks differently when it writes
 * them, so virtual addresses are the one unambiguous choice.
 */
#include <inttypes.h>
#include <stdlib.h>

#include "common/export/export_internal.h"
#include "common/profile/model.h"

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

/* Whether vaddr lies in one of the profile's load segments (any address
 * when the profile lists none: llvm-profgen needs no offsets). */
static bool in_segments(const Edgeprof__V1__BinaryProfile *bp, uint64_t vaddr)
{
	uint64_t off;
	return bp->n_segments == 0 || file_offset(bp, vaddr, &off);
}

static bool range_offsets(const Edgeprof__V1__BinaryProfile *bp, const Edgeprof__V1__Range *r,
			  uint64_t *a, uint64_t *b)
{
	return r->count && r->end >= r->start && file_offset(bp, r->start, a) &&
	       file_offset(bp, r->end, b);
}

static bool edge_offsets(const Edgeprof__V1__BinaryProfile *bp, const Edgeprof__V1__Edge *e,
			 uint64_t *a, uint64_t *b)
{
	return e->count && e->taken && !e->from_external && !e->to_external &&
	       file_offset(bp, e->from, a) && file_offset(bp, e->to, b);
}

int ep_export_afdo(const Edgeprof__V1__BinaryProfile *bp, FILE *out, char *err, size_t errlen)
{
	if (bp->n_segments == 0) {
		snprintf(err, errlen,
			 "%s: the profile has no load segments for this binary, so its addresses "
			 "cannot be turned into the file offsets AutoFDO reads",
			 bp->n_paths ? bp->paths[0] : bp->build_id);
		return -1;
	}
	const Edgeprof__V1__Range **ranges = ep_export_sorted_ranges(bp);
	const Edgeprof__V1__Edge **edges = ep_export_sorted_edges(bp);
	const Edgeprof__V1__IpCount **ips = malloc((bp->n_ips ? bp->n_ips : 1) * sizeof(*ips));
	if (!ranges || !edges || !ips) {
		free(ranges);
		free(edges);
		free(ips);
		return ep_export_oom(err, errlen);
	}
	for (size_t i = 0; i < bp->n_ips; i++)
		ips[i] = bp->ips[i];
	qsort(ips, bp->n_ips, sizeof(*ips), ep_ip_cmp);

	uint64_t a, b;
	size_t n = 0;
	for (size_t i = 0; i < bp->n_ranges; i++)
		n += range_offsets(bp, ranges[i], &a, &b);
	fprintf(out, "%zu\n", n);
	for (size_t i = 0; i < bp->n_ranges; i++)
		if (range_offsets(bp, ranges[i], &a, &b))
			fprintf(out, "%" PRIx64 "-%" PRIx64 ":%" PRIu64 "\n", a, b,
				ranges[i]->count);

	n = 0;
	for (size_t i = 0; i < bp->n_ips; i++)
		n += ips[i]->count && file_offset(bp, ips[i]->ip, &a);
	fprintf(out, "%zu\n", n);
	for (size_t i = 0; i < bp->n_ips; i++)
		if (ips[i]->count && file_offset(bp, ips[i]->ip, &a))
			fprintf(out, "%" PRIx64 ":%" PRIu64 "\n", a, ips[i]->count);

	n = 0;
	for (size_t i = 0; i < bp->n_edges; i++)
		n += edge_offsets(bp, edges[i], &a, &b);
	fprintf(out, "%zu\n", n);
	for (size_t i = 0; i < bp->n_edges; i++)
		if (edge_offsets(bp, edges[i], &a, &b))
			fprintf(out, "%" PRIx64 "->%" PRIx64 ":%" PRIu64 "\n", a, b,
				edges[i]->count);
	free(ranges);
	free(edges);
	free(ips);
	return ep_export_finish(out, err, errlen);
}

static bool profgen_range(const Edgeprof__V1__BinaryProfile *bp, const Edgeprof__V1__Range *r)
{
	return r->count && r->end >= r->start && in_segments(bp, r->start) &&
	       in_segments(bp, r->end);
}

static bool profgen_edge(const Edgeprof__V1__BinaryProfile *bp, const Edgeprof__V1__Edge *e)
{
	return e->count && e->taken && !e->from_external && !e->to_external &&
	       in_segments(bp, e->from) && in_segments(bp, e->to);
}

int ep_export_profgen(const Edgeprof__V1__BinaryProfile *bp, FILE *out, char *err, size_t errlen)
{
	const Edgeprof__V1__Range **ranges = ep_export_sorted_ranges(bp);
	const Edgeprof__V1__Edge **edges = ep_export_sorted_edges(bp);
	if (!ranges || !edges) {
		free(ranges);
		free(edges);
		return ep_export_oom(err, errlen);
	}
	size_t n = 0;
	for (size_t i = 0; i < bp->n_ranges; i++)
		n += profgen_range(bp, ranges[i]);
	fprintf(out, "%zu\n", n);
	for (size_t i = 0; i < bp->n_ranges; i++)
		if (profgen_range(bp, ranges[i]))
			fprintf(out, "%" PRIx64 "-%" PRIx64 ":%" PRIu64 "\n", ranges[i]->start,
				ranges[i]->end, ranges[i]->count);
	n = 0;
	for (size_t i = 0; i < bp->n_edges; i++)
		n += profgen_edge(bp, edges[i]);
	fprintf(out, "%zu\n", n);
	for (size_t i = 0; i < bp->n_edges; i++)
		if (profgen_edge(bp, edges[i]))
			fprintf(out, "%" PRIx64 "->%" PRIx64 ":%" PRIu64 "\n", edges[i]->from,
				edges[i]->to, edges[i]->count);
	free(ranges);
	free(edges);
	return ep_export_finish(out, err, errlen);
}
