/* SPDX-License-Identifier: Apache-2.0 */
/* The selection's hottest functions across its binaries (top.h). */
#include "collector/api/top.h"

#include <stdlib.h>
#include <string.h>

#include "common/elf/demangle.h"
#include "common/elf/elf_symbols.h"
#include "common/profile/profile_file.h"
#include "common/util/json.h"
#include "common/util/sat.h"

long ep_top_function_index(const Edgeprof__V1__BinaryProfile *bp, uint64_t addr)
{
	size_t lo = 0, hi = bp->n_functions;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (bp->functions[mid]->start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* aliases share a start, and symbols nest rarely: look a few back */
	for (size_t i = lo, k = 0; i > 0 && k < 4; i--, k++) {
		const Edgeprof__V1__Function *f = bp->functions[i - 1];
		if (addr - f->start < (f->size ? f->size : 1))
			return (long)(i - 1);
	}
	return -1;
}

struct counts {
	uint64_t branches, samples;
};

static int add_row(struct ep_top *t, const char *build_id, const char *binary, const char *name,
		   uint64_t addr, const struct counts *c)
{
	if (t->n == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 64;
		struct ep_top_row *rows = realloc(t->rows, cap * sizeof(*rows));
		if (!rows)
			return -1;
		t->rows = rows;
		t->cap = cap;
	}
	struct ep_top_row *r = &t->rows[t->n];
	*r = (struct ep_top_row){.addr = addr, .branches = c->branches, .samples = c->samples};
	r->build_id = strdup(build_id);
	r->binary = strdup(binary);
	r->name = name ? strdup(name) : NULL;
	t->n++;
	return r->build_id && r->binary && (!name || r->name) ? 0 : -1;
}

/* One binary's functions with counts, and its [unknown] row, into t. */
static int add_binary(struct ep_top *t, const Edgeprof__V1__BinaryProfile *bp)
{
	struct counts *c = calloc(bp->n_functions + 1, sizeof(*c));
	if (!c)
		return -1;
	struct counts unknown = {0};
	uint64_t hottest = 0, hottest_count = 0;
	for (size_t i = 0; i < bp->n_edges; i++) {
		const Edgeprof__V1__Edge *e = bp->edges[i];
		/* a branch's executions: not a fall-through the export derived
		 * from the ranges, not an arrival from another binary */
		if (e->kind == EDGEPROF__V1__BRANCH_KIND__BRANCH_FALLTHROUGH || e->from_external)
			continue;
		ep_add_sat(&t->total_branches, e->count);
		long k = ep_top_function_index(bp, e->from);
		struct counts *to = k >= 0 ? &c[k] : &unknown;
		ep_add_sat(&to->branches, e->count);
		if (k < 0 && e->count > hottest_count)
			hottest = e->from, hottest_count = e->count;
	}
	for (size_t i = 0; i < bp->n_ips; i++) {
		const Edgeprof__V1__IpCount *ip = bp->ips[i];
		ep_add_sat(&t->total_samples, ip->count);
		long k = ep_top_function_index(bp, ip->ip);
		struct counts *to = k >= 0 ? &c[k] : &unknown;
		ep_add_sat(&to->samples, ip->count);
		if (k < 0 && ip->count > hottest_count)
			hottest = ip->ip, hottest_count = ip->count;
	}
	const char *path = bp->n_paths ? bp->paths[0] : bp->build_id;
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	int rc = 0;
	for (size_t i = 0; i < bp->n_functions && rc == 0; i++) {
		if (!c[i].branches && !c[i].samples)
			continue;
		const Edgeprof__V1__Function *f = bp->functions[i];
		char name[4096];
		ep_symbol_name(f->name, f->local_index, name, sizeof(name));
		rc = add_row(t, bp->build_id, base, name, f->start, &c[i]);
	}
	if (rc == 0 && (unknown.branches || unknown.samples))
		rc = add_row(t, bp->build_id, base, NULL, hottest, &unknown);
	free(c);
	return rc;
}

static int by_heat(const void *a, const void *b)
{
	const struct ep_top_row *x = a, *y = b;
	if (x->branches != y->branches)
		return x->branches < y->branches ? 1 : -1;
	if (x->samples != y->samples)
		return x->samples < y->samples ? 1 : -1;
	int c = strcmp(x->build_id, y->build_id);
	return c ? c : (x->addr > y->addr) - (x->addr < y->addr);
}

int ep_top_compute(struct ep_store *store, const struct ep_store_filter *f, struct ep_top *t,
		   char *err, size_t errlen)
{
	*t = (struct ep_top){0};
	struct ep_store_filter sel = *f;
	sel.build_id = NULL;
	/* the hottest binaries only: a request reads EP_TOP_BINARIES
	 * profiles whatever the store holds */
	struct ep_store_page page = {
	    .by_samples = true, .limit = EP_TOP_BINARIES, .labels = 0, .totals = true};
	Edgeprof__V1__BinaryList *list = ep_store_list_binaries(store, &sel, &page, err, errlen);
	if (!list)
		return -1;
	t->selection_samples = list->total_samples;
	t->binaries_more = list->more;
	int rc = 0;
	for (size_t i = 0; i < list->n_binaries && rc == 0; i++) {
		const char *id = list->binaries[i]->build_id;
		if (!*id)
			continue; /* no build-id: no function pages, no symbols */
		sel.build_id = id;
		Edgeprof__V1__Profile *p = ep_store_profile(store, &sel, err, errlen);
		if (!p) {
			rc = -1;
			break;
		}
		for (size_t k = 0; k < p->n_binaries && rc == 0; k++)
			if ((rc = add_binary(t, p->binaries[k])) != 0)
				snprintf(err, errlen, "out of memory");
		ep_profile_free(p);
		t->binaries++;
	}
	ep_store_free_list(list);
	if (rc != 0) {
		ep_top_free(t);
		return -1;
	}
	if (t->n) /* rows is NULL when none: qsort's is never-NULL */
		qsort(t->rows, t->n, sizeof(*t->rows), by_heat);
	return 0;
}

void ep_top_free(struct ep_top *t)
{
	for (size_t i = 0; i < t->n; i++) {
		free(t->rows[i].build_id);
		free(t->rows[i].binary);
		free(t->rows[i].name);
	}
	free(t->rows);
	*t = (struct ep_top){0};
}

size_t ep_top_rows_arg(const char *v)
{
	if (!v || !*v)
		return EP_TOP_DEFAULT;
	char *end;
	unsigned long n = strtoul(v, &end, 10);
	return *end || n < 1 || n > EP_TOP_MAX ? 0 : (size_t)n;
}

static void json_row(FILE *out, const struct ep_top *t, const struct ep_top_row *r)
{
	fputs("{\"build_id\": ", out);
	ep_json_string(out, r->build_id);
	fputs(", \"binary\": ", out);
	ep_json_string(out, r->binary);
	fputs(", \"name\": ", out);
	ep_json_string(out, r->name ? r->name : "[unknown]");
	char shown[4096];
	const char *d = r->name ? ep_demangle(r->name, shown, sizeof(shown)) : "[unknown]";
	fputs(", \"demangled\": ", out);
	ep_json_string(out, d);
	fprintf(out,
		", \"unknown\": %s, \"addr\": \"0x%llx\", \"branches\": %llu, \"samples\": %llu, "
		"\"branch_share\": %.6f, \"sample_share\": %.6f}",
		r->name ? "false" : "true", (unsigned long long)r->addr,
		(unsigned long long)r->branches, (unsigned long long)r->samples,
		t->total_branches ? (double)r->branches / (double)t->total_branches : 0.0,
		t->total_samples ? (double)r->samples / (double)t->total_samples : 0.0);
}

void ep_api_top(struct ep_store *store, const struct ep_store_filter *f, size_t n,
		struct ep_api_response *r)
{
	char err[512];
	struct ep_top t;
	r->body = NULL;
	r->len = 0;
	r->content_type = "text/plain";
	if (ep_top_compute(store, f, &t, err, sizeof(err)) != 0) {
		r->status = 503;
		FILE *e = open_memstream(&r->body, &r->len);
		if (e) {
			fprintf(e, "store: %s\n", err);
			fclose(e);
		}
		return;
	}
	FILE *out = open_memstream(&r->body, &r->len);
	if (!out) {
		ep_top_free(&t);
		r->status = 500;
		return;
	}
	fprintf(out,
		"{\"total_branches\": %llu, \"total_samples\": %llu, \"selection_samples\": %llu, "
		"\"binaries\": %zu, \"binaries_more\": %s, \"more\": %s, \"functions\": [",
		(unsigned long long)t.total_branches, (unsigned long long)t.total_samples,
		(unsigned long long)t.selection_samples, t.binaries,
		t.binaries_more ? "true" : "false", t.n > n ? "true" : "false");
	for (size_t i = 0; i < t.n && i < n; i++) {
		fputs(i ? ",\n  " : "\n  ", out);
		json_row(out, &t, &t.rows[i]);
	}
	fputs("]}\n", out);
	fclose(out);
	ep_top_free(&t);
	r->status = 200;
	r->content_type = "application/json";
}
