/* SPDX-License-Identifier: Apache-2.0 */
/* The human report: what was read, and per binary the hottest edges and
 * functions. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "export_internal.h"

struct func_total {
	const Edgeprof__V1__Function *f;
	uint64_t branches;
	uint64_t instructions_hit; /* range hits (instruction frequency proxy) */
	uint64_t samples;	   /* sample IPs in it (all an IP-only profile has) */
};

static int by_count(const void *pa, const void *pb)
{
	const Edgeprof__V1__Edge *a = *(Edgeprof__V1__Edge *const *)pa;
	const Edgeprof__V1__Edge *b = *(Edgeprof__V1__Edge *const *)pb;
	return a->count < b->count ? 1 : a->count > b->count ? -1 : 0;
}

static int by_branches(const void *pa, const void *pb)
{
	const struct func_total *a = pa, *b = pb;
	if (a->branches != b->branches)
		return a->branches < b->branches ? 1 : -1;
	return a->samples < b->samples ? 1 : a->samples > b->samples ? -1 : 0;
}

static void name_addr(FILE *out, const Edgeprof__V1__BinaryProfile *bp, uint64_t addr,
		      bool external)
{
	if (external) {
		fputs("[external]", out);
		return;
	}
	const Edgeprof__V1__Function *f = ep_export_function_at(bp, addr);
	if (f)
		fprintf(out, "%s+0x%" PRIx64, f->name, addr - f->start);
	else
		fprintf(out, "0x%" PRIx64, addr);
}

static int report_binary(const Edgeprof__V1__BinaryProfile *bp, unsigned top, FILE *out)
{
	uint64_t branches = 0;
	for (size_t i = 0; i < bp->n_edges; i++)
		branches += bp->edges[i]->count;
	fprintf(out,
		"\n%s  build-id %s  %s  %" PRIu64 " samples, %zu edges, %" PRIu64
		" branch executions counted\n",
		bp->n_paths ? bp->paths[0] : "?", bp->build_id[0] ? bp->build_id : "none", bp->arch,
		bp->samples, bp->n_edges, branches);

	const Edgeprof__V1__Edge **edges = malloc((bp->n_edges + 1) * sizeof(*edges));
	struct func_total *funcs = calloc(bp->n_functions + 1, sizeof(*funcs));
	if (!edges || !funcs) {
		free(edges);
		free(funcs);
		return -1;
	}
	size_t ntaken = 0;
	for (size_t i = 0; i < bp->n_edges; i++)
		if (bp->edges[i]->taken)
			edges[ntaken++] = bp->edges[i];
	qsort(edges, ntaken, sizeof(*edges), by_count);
	fprintf(out, "  hottest taken edges:\n  %12s  %6s  %-14s %s\n", "count", "mispr", "kind",
		"from -> to");
	for (size_t i = 0; i < ntaken && i < top; i++) {
		const Edgeprof__V1__Edge *e = edges[i];
		fprintf(out, "  %12" PRIu64 "  %5.1f%%  %-14s ", e->count,
			e->count ? 100.0 * (double)e->mispredicted / (double)e->count : 0.0,
			ep_export_kind_name(e->kind));
		name_addr(out, bp, e->from, e->from_external);
		fputs(" -> ", out);
		name_addr(out, bp, e->to, e->to_external);
		fputc('\n', out);
	}

	for (size_t i = 0; i < bp->n_functions; i++)
		funcs[i].f = bp->functions[i];
	for (size_t i = 0; i < bp->n_edges; i++) {
		const Edgeprof__V1__Edge *e = bp->edges[i];
		long k = e->from_external ? -1 : ep_export_function_index(bp, e->from);
		if (k >= 0)
			funcs[k].branches += e->count;
	}
	for (size_t i = 0; i < bp->n_ranges; i++) {
		long k = ep_export_function_index(bp, bp->ranges[i]->start);
		if (k >= 0)
			funcs[k].instructions_hit += bp->ranges[i]->count;
	}
	uint64_t samples = 0;
	for (size_t i = 0; i < bp->n_ips; i++) {
		long k = ep_export_function_index(bp, bp->ips[i]->ip);
		samples += bp->ips[i]->count;
		if (k >= 0)
			funcs[k].samples += bp->ips[i]->count;
	}
	qsort(funcs, bp->n_functions, sizeof(*funcs), by_branches);
	fprintf(out, "  hottest functions:\n  %12s  %12s  %12s  %s\n", "branches", "range hits",
		"samples", "function");
	for (size_t i = 0; i < bp->n_functions && i < top; i++) {
		if (!funcs[i].branches && !funcs[i].instructions_hit && !funcs[i].samples)
			break;
		fprintf(out, "  %12" PRIu64 "  %12" PRIu64 "  %5.1f%% %5" PRIu64 "  %s\n",
			funcs[i].branches, funcs[i].instructions_hit,
			samples ? 100.0 * (double)funcs[i].samples / (double)samples : 0.0,
			funcs[i].samples, funcs[i].f->name);
	}
	free(edges);
	free(funcs);
	return 0;
}

static int by_samples(const void *pa, const void *pb)
{
	const Edgeprof__V1__BinaryProfile *a = *(Edgeprof__V1__BinaryProfile *const *)pa;
	const Edgeprof__V1__BinaryProfile *b = *(Edgeprof__V1__BinaryProfile *const *)pb;
	return a->samples < b->samples ? 1 : a->samples > b->samples ? -1 : 0;
}

int ep_report(const Edgeprof__V1__Profile *p, unsigned top, FILE *out)
{
	const Edgeprof__V1__Stats *s = p->stats;
	if (s) {
		fprintf(out,
			"%" PRIu64 " samples (%" PRIu64 " with branch stacks), %" PRIu64
			" branch entries (%" PRIu64 " user, %" PRIu64 " kernel), %" PRIu64
			" gaps: %" PRIu64 " inconsistent (%.2f%%), %" PRIu64
			" unknown code; %" PRIu64 " branches counted",
			s->samples, s->samples_with_branches, s->branch_entries,
			s->branch_entries_user, s->branch_entries_kernel, s->gaps,
			s->gaps_inconsistent,
			s->gaps ? 100.0 * (double)s->gaps_inconsistent / (double)s->gaps : 0.0,
			s->gaps_unknown_code, s->branches_counted);
		if (p->config)
			fprintf(out, " (chop %u of %u entries)", p->config->chop,
				p->config->entries);
		fputc('\n', out);
		if (s->lost_records)
			fprintf(out, "warning: %" PRIu64 " records were lost while recording\n",
				s->lost_records);
	}
	Edgeprof__V1__BinaryProfile **order = malloc((p->n_binaries + 1) * sizeof(*order));
	if (!order)
		return -1;
	memcpy(order, p->binaries, p->n_binaries * sizeof(*order));
	qsort(order, p->n_binaries, sizeof(*order), by_samples);
	int rc = 0;
	for (size_t i = 0; i < p->n_binaries && rc == 0; i++)
		rc = report_binary(order[i], top, out);
	free(order);
	return rc == 0 && !ferror(out) ? 0 : -1;
}
