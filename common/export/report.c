/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The human report: what was read, then per binary (most samples first) the
 * hottest taken edges and the hottest functions, by branches counted out of
 * them and by code run. Code run is the ranges' count x length in bytes
 * (end is the closing branch's address, counted as one byte, as AutoFDO
 * does): instruction frequency without decoding. An IP-only profile has
 * neither, so its functions are ranked by samples. Every function line ends
 * with the name and has the samples share third, for scripts. With agent
 * --stacks the hottest call stacks follow (report_stacks.c).
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/export/export_internal.h"

struct func_total {
	const Edgeprof__V1__Function *f;
	uint64_t branches; /* executions of edges leaving a branch in it */
	uint64_t bytes;	   /* range count x range length */
	uint64_t samples;  /* sample IPs in it */
};

static int cmp_u64_desc(uint64_t a, uint64_t b)
{
	return a > b ? -1 : a < b;
}

static int by_count(const void *pa, const void *pb)
{
	const Edgeprof__V1__Edge *a = *(const Edgeprof__V1__Edge *const *)pa;
	const Edgeprof__V1__Edge *b = *(const Edgeprof__V1__Edge *const *)pb;
	int c = cmp_u64_desc(a->count, b->count);
	if (!c)
		c = -cmp_u64_desc(a->from, b->from);
	return c ? c : -cmp_u64_desc(a->to, b->to);
}

static int tie(const struct func_total *a, const struct func_total *b)
{
	return -cmp_u64_desc(a->f->start, b->f->start);
}

static int by_branches(const void *pa, const void *pb)
{
	const struct func_total *a = pa, *b = pb;
	int c = cmp_u64_desc(a->branches, b->branches);
	if (!c)
		c = cmp_u64_desc(a->bytes, b->bytes);
	if (!c)
		c = cmp_u64_desc(a->samples, b->samples);
	return c ? c : tie(a, b);
}

static int by_bytes(const void *pa, const void *pb)
{
	const struct func_total *a = pa, *b = pb;
	int c = cmp_u64_desc(a->bytes, b->bytes);
	if (!c)
		c = cmp_u64_desc(a->branches, b->branches);
	if (!c)
		c = cmp_u64_desc(a->samples, b->samples);
	return c ? c : tie(a, b);
}

static int by_samples(const void *pa, const void *pb)
{
	const struct func_total *a = pa, *b = pb;
	int c = cmp_u64_desc(a->samples, b->samples);
	return c ? c : tie(a, b);
}

static void name_addr(FILE *out, const struct ep_func_index *fx, uint64_t addr, bool external)
{
	long k = external ? -1 : ep_func_index_find(fx, addr);
	if (external)
		fputs("[external]", out);
	else if (k >= 0)
		fprintf(out, "%s+0x%" PRIx64, fx->f[k]->name, addr - fx->f[k]->start);
	else
		fprintf(out, "0x%" PRIx64, addr);
}

static void top_edges(const Edgeprof__V1__BinaryProfile *bp, const struct ep_func_index *fx,
		      const Edgeprof__V1__Edge **edges, unsigned top, FILE *out)
{
	size_t n = 0;
	for (size_t i = 0; i < bp->n_edges; i++)
		if (bp->edges[i]->taken && bp->edges[i]->count)
			edges[n++] = bp->edges[i];
	if (n == 0)
		return;
	qsort(edges, n, sizeof(*edges), by_count);
	fprintf(out, "  hottest taken edges:\n  %12s  %6s  %-14s %s\n", "count", "mispr", "kind",
		"from -> to");
	for (size_t i = 0; i < n && i < top; i++) {
		const Edgeprof__V1__Edge *e = edges[i];
		fprintf(out, "  %12" PRIu64 "  %5.1f%%  %-14s ", e->count,
			100.0 * (double)e->mispredicted / (double)e->count,
			ep_export_kind_name(e->kind));
		name_addr(out, fx, e->from, e->from_external);
		fputs(" -> ", out);
		name_addr(out, fx, e->to, e->to_external);
		fputc('\n', out);
	}
}

static void top_functions(const char *title, struct func_total *funcs, size_t n,
			  int (*order)(const void *, const void *), uint64_t samples, unsigned top,
			  FILE *out)
{
	qsort(funcs, n, sizeof(*funcs), order);
	fprintf(out, "  hottest functions by %s:\n  %12s  %12s  %6s %7s  %s\n", title, "branches",
		"bytes run", "share", "samples", "function");
	for (size_t i = 0; i < n && i < top; i++) {
		const struct func_total *t = &funcs[i];
		if (!t->branches && !t->bytes && !t->samples)
			break;
		fprintf(out, "  %12" PRIu64 "  %12" PRIu64 "  %5.1f%% %7" PRIu64 "  %s\n",
			t->branches, t->bytes,
			samples ? 100.0 * (double)t->samples / (double)samples : 0.0, t->samples,
			t->f->name);
	}
}

static int report_binary(const Edgeprof__V1__Profile *p, const Edgeprof__V1__BinaryProfile *bp,
			 unsigned top, FILE *out)
{
	struct ep_func_index fx;
	if (ep_func_index_init(&fx, bp) != 0)
		return -1;
	const Edgeprof__V1__Edge **edges = malloc((bp->n_edges + 1) * sizeof(*edges));
	struct func_total *funcs = calloc(fx.n + 1, sizeof(*funcs));
	if (!edges || !funcs) {
		free(edges);
		free(funcs);
		ep_func_index_free(&fx);
		return -1;
	}
	uint64_t branches = 0, bytes = 0, samples = 0, fbranches = 0, fsamples = 0;
	for (size_t i = 0; i < fx.n; i++)
		funcs[i].f = fx.f[i];
	for (size_t i = 0; i < bp->n_edges; i++) {
		const Edgeprof__V1__Edge *e = bp->edges[i];
		/* a fall-through is no branch: the ranges count that code */
		if (e->kind == EDGEPROF__V1__BRANCH_KIND__BRANCH_FALLTHROUGH)
			continue;
		long k = e->from_external ? -1 : ep_func_index_find(&fx, e->from);
		branches += e->count;
		if (k >= 0) {
			funcs[k].branches += e->count;
			fbranches += e->count;
		}
	}
	for (size_t i = 0; i < bp->n_ranges; i++) {
		const Edgeprof__V1__Range *r = bp->ranges[i];
		long k = ep_func_index_find(&fx, r->start);
		if (k >= 0 && r->end >= r->start) {
			funcs[k].bytes += r->count * (r->end - r->start + 1);
			bytes += r->count * (r->end - r->start + 1);
		}
	}
	for (size_t i = 0; i < bp->n_ips; i++) {
		long k = ep_func_index_find(&fx, bp->ips[i]->ip);
		samples += bp->ips[i]->count;
		if (k >= 0) {
			funcs[k].samples += bp->ips[i]->count;
			fsamples += bp->ips[i]->count;
		}
	}

	fprintf(out,
		"\n%s  build-id %s  %s  %" PRIu64 " samples, %zu edges, %" PRIu64
		" branch executions counted\n",
		bp->n_paths ? bp->paths[0] : "?", bp->build_id[0] ? bp->build_id : "none",
		bp->arch[0] ? bp->arch : "?", bp->samples, bp->n_edges, branches);
	top_edges(bp, &fx, edges, top, out);
	if (fbranches)
		top_functions("branches", funcs, fx.n, by_branches, samples, top, out);
	if (bytes)
		top_functions("code run", funcs, fx.n, by_bytes, samples, top, out);
	/* samples in no known function (a binary without symbols): no table,
	 * rather than its heading over nothing */
	if (!fbranches && !bytes && fsamples)
		top_functions("samples", funcs, fx.n, by_samples, samples, top, out);
	int rc = ep_report_stacks(p, bp, &fx, top, out);
	free(edges);
	free(funcs);
	ep_func_index_free(&fx);
	return rc;
}

static int by_binary_samples(const void *pa, const void *pb)
{
	const Edgeprof__V1__BinaryProfile *a = *(Edgeprof__V1__BinaryProfile *const *)pa;
	const Edgeprof__V1__BinaryProfile *b = *(Edgeprof__V1__BinaryProfile *const *)pb;
	int c = cmp_u64_desc(a->samples, b->samples);
	if (!c)
		c = cmp_u64_desc(a->n_edges, b->n_edges);
	if (!c)
		c = strcmp(a->build_id, b->build_id);
	if (!c)
		c = strcmp(a->n_paths ? a->paths[0] : "", b->n_paths ? b->paths[0] : "");
	return c;
}

int ep_report(const Edgeprof__V1__Profile *p, unsigned top, FILE *out)
{
	const Edgeprof__V1__Stats *s = p->stats;
	bool from_collector =
	    p->config && p->config->source && strcmp(p->config->source, "collector") == 0;
	if (s && from_collector) {
		/* the collector keeps counts per binary, not the agents' recording
		 * statistics: only say what it has */
		fprintf(out, "%" PRIu64 " samples in %zu binaries, from the collector\n",
			s->samples, p->n_binaries);
	} else if (s) {
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
	for (size_t i = 0; i < p->n_binaries; i++)
		order[i] = p->binaries[i];
	qsort(order, p->n_binaries, sizeof(*order), by_binary_samples);
	int rc = 0;
	for (size_t i = 0; i < p->n_binaries && rc == 0; i++)
		rc = report_binary(p, order[i], top, out);
	free(order);
	return rc == 0 && !ferror(out) ? 0 : -1;
}
