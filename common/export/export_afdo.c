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
 * refuses (see docs/exports.md, AutoFDO). Without --use-offset=false, LLVM 14 reads
 * the addresses as offsets from a base it picks differently when it writes
 * them, so virtual addresses are the one unambiguous choice.
 *
 * Its counts are estimated executions, not samples: each count times P/C
 * (see execution_scale), as an exact profile would have them. The scale of
 * a sample profile is not neutral to clang: its loader adds 1 to every
 * branch weight and entry count, so where the counts are a few samples a
 * rarely run loop looks short (weights (b+1)/(x+1)) and branches never
 * sampled on one side look taken. On zstd (86.7k samples, C = 32) a loop of
 * 8 iterations run 500 times, inlined into the hottest function, got ~12
 * samples and was peeled 7 times; at estimated counts it is unrolled as with
 * the exact counts, and the hottest functions come out within 5% of the
 * exact profile's code size instead of 15-36% larger (bench/fdo/README.md).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

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

/* A ratio num/den that every count is multiplied by. */
struct count_scale {
	uint64_t num, den;
};

/* Executions per counted branch. With a chop of C branches per sample and a
 * sample every ~P events, every branch is counted with probability C/P when
 * the chop counts what the event counts (SPEC step 4; chop.h's taken chop
 * for the taken-branches event), so P/C. Whole stacks (C = 0) on the
 * branches event: P over the mean branches counted per sample, an average
 * (such a profile is not uniform anyway). Anything else, a merged profile
 * from the collector (no period) or an event that counts no branches, is
 * left as it is: 1. */
static struct count_scale execution_scale(const Edgeprof__V1__Profile *p)
{
	const struct count_scale one = {1, 1};
	const Edgeprof__V1__SamplingConfig *c = p->config;
	if (!c || !c->period || !c->event)
		return one;
	/* profiles from before chop_unit was recorded chopped in branches */
	const char *unit = c->chop_unit && c->chop_unit[0] ? c->chop_unit : "branches";
	if (c->chop)
		return strcmp(c->event, unit) == 0 ? (struct count_scale){c->period, c->chop} : one;
	const Edgeprof__V1__Stats *st = p->stats;
	if (strcmp(c->event, "branches") != 0 || !st || !st->samples || !st->branches_counted)
		return one;
	uint64_t mean = (st->branches_counted + st->samples / 2) / st->samples;
	return (struct count_scale){c->period, mean ? mean : 1};
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* The most executions of any one address in the ranges written (sorted by
 * start): ranges overlap, one per branch that ends them, so an address's
 * count is the sum of those that hold it. Sets *max; -1 out of memory. */
static int max_address_count(const Edgeprof__V1__BinaryProfile *bp,
			     const Edgeprof__V1__Range **ranges, uint64_t *max)
{
	/* (end, count) pairs in one array, sorted by end */
	uint64_t *ends = malloc((bp->n_ranges ? bp->n_ranges : 1) * 2 * sizeof(*ends));
	if (!ends)
		return -1;
	size_t n = 0;
	for (size_t i = 0; i < bp->n_ranges; i++)
		if (profgen_range(bp, ranges[i])) {
			ends[2 * n] = ranges[i]->end;
			ends[2 * n + 1] = ranges[i]->count;
			n++;
		}
	qsort(ends, n, 2 * sizeof(*ends), cmp_u64);
	uint64_t cur = 0, best = 0;
	for (size_t i = 0, j = 0; i < bp->n_ranges; i++) {
		if (!profgen_range(bp, ranges[i]))
			continue;
		for (; j < n && ends[2 * j] < ranges[i]->start; j++)
			cur -= ends[2 * j + 1];
		cur += ranges[i]->count;
		best = cur > best ? cur : best;
	}
	free(ends);
	*max = best;
	return 0;
}

/* The most any address may count once scaled: clang keeps branch weights in
 * 32 bits and saturates each one alone, which would make the hottest
 * branches look equally likely; 1/16 of that leaves room for the factor by
 * which llvm-profgen multiplies unrolled and vectorized lines. */
#define PROFGEN_MAX_COUNT (UINT32_MAX / 16)

/* execution_scale(), lowered where it would take the hottest address past
 * PROFGEN_MAX_COUNT (never below 1: counts that large need no help). */
static int profgen_scale(const Edgeprof__V1__Profile *p, const Edgeprof__V1__BinaryProfile *bp,
			 const Edgeprof__V1__Range **ranges, struct count_scale *s)
{
	*s = execution_scale(p);
	uint64_t max;
	if (max_address_count(bp, ranges, &max) != 0)
		return -1;
	if (max && (unsigned __int128)max * s->num > (unsigned __int128)PROFGEN_MAX_COUNT * s->den)
		*s = max < PROFGEN_MAX_COUNT ? (struct count_scale){PROFGEN_MAX_COUNT, max}
					     : (struct count_scale){1, 1};
	return 0;
}

/* count * num / den, rounded; a count is at most 2^64 and num/den keeps the
 * largest one within PROFGEN_MAX_COUNT, so the product fits 128 bits. */
static uint64_t scaled(uint64_t count, struct count_scale s)
{
	return (uint64_t)(((unsigned __int128)count * s.num + s.den / 2) / s.den);
}

int ep_export_profgen(const Edgeprof__V1__Profile *p, const Edgeprof__V1__BinaryProfile *bp,
		      FILE *out, char *err, size_t errlen)
{
	const Edgeprof__V1__Range **ranges = ep_export_sorted_ranges(bp);
	const Edgeprof__V1__Edge **edges = ep_export_sorted_edges(bp);
	struct count_scale s;
	if (!ranges || !edges || profgen_scale(p, bp, ranges, &s) != 0) {
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
				ranges[i]->end, scaled(ranges[i]->count, s));
	n = 0;
	for (size_t i = 0; i < bp->n_edges; i++)
		n += profgen_edge(bp, edges[i]);
	fprintf(out, "%zu\n", n);
	for (size_t i = 0; i < bp->n_edges; i++)
		if (profgen_edge(bp, edges[i]))
			fprintf(out, "%" PRIx64 "->%" PRIx64 ":%" PRIu64 "\n", edges[i]->from,
				edges[i]->to, scaled(edges[i]->count, s));
	free(ranges);
	free(edges);
	return ep_export_finish(out, err, errlen);
}
