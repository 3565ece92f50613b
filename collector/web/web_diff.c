/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A diff (/diff?build_id=NEW&base=OLD, and/or time windows: from, to for
 * the new side, base_from, base_to for the base): which functions and
 * branches got hotter or colder, for regression hunting. Two profiles are
 * sampled at different rates over different times, so they are compared by
 * share: a function's branch executions over all of its binary's. Functions
 * are matched by name, NAME/N for a local (two builds move code, as BOLT
 * matches them); branches by address, so only
 * when both sides are the same build-id.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "collector/web/web_internal.h"
#include "common/profile/model.h"
#include "common/profile/profile_file.h"

#define TOP 30

struct fn_share {
	const char *name;
	uint32_t local_index; /* BOLT's NAME/N */
	uint64_t start_new;
	double now, before; /* shares, 0..1 */
	bool in_new, in_base;
};

struct site_share {
	uint64_t from;
	double now, before;
	double ratio_now, ratio_before; /* taken ratio, -1 when not executed */
};

static int by_change(const void *a, const void *b)
{
	const struct fn_share *x = a, *y = b;
	double dx = fabs(x->now - x->before), dy = fabs(y->now - y->before);
	if (dx != dy)
		return dx < dy ? 1 : -1;
	int c = strcmp(x->name, y->name);
	return c ? c : (x->local_index > y->local_index) - (x->local_index < y->local_index);
}

static int by_site_change(const void *a, const void *b)
{
	const struct site_share *x = a, *y = b;
	double dx = fabs(x->now - x->before), dy = fabs(y->now - y->before);
	return dx < dy ? 1 : dx > dy ? -1 : (x->from > y->from) - (x->from < y->from);
}

static uint64_t total_branches(const Edgeprof__V1__BinaryProfile *bp)
{
	uint64_t t = 0;
	for (size_t i = 0; i < bp->n_edges; i++)
		if (ep_web_is_branch(bp->edges[i]))
			t += bp->edges[i]->count;
	return t;
}

/* Adds bp's functions' shares to rows[*n] (matched by name and N), side 0 new, 1 base. */
static void add_functions(struct fn_share *rows, size_t *n, const Edgeprof__V1__BinaryProfile *bp,
			  int side)
{
	uint64_t total = total_branches(bp);
	double *per = calloc(bp->n_functions + 1, sizeof(*per));
	if (!per)
		return;
	for (size_t i = 0; i < bp->n_edges; i++) {
		const Edgeprof__V1__Edge *e = bp->edges[i];
		long k = ep_web_is_branch(e) ? ep_web_function_index(bp, e->from) : -1;
		if (k >= 0)
			per[k] += (double)e->count;
	}
	for (size_t i = 0; i < bp->n_functions; i++) {
		if (!per[i])
			continue;
		const char *name = bp->functions[i]->name;
		uint32_t local = bp->functions[i]->local_index;
		struct fn_share *r = NULL;
		for (size_t j = 0; j < *n && !r; j++)
			if (rows[j].local_index == local && strcmp(rows[j].name, name) == 0)
				r = &rows[j];
		if (!r) {
			r = &rows[(*n)++];
			*r = (struct fn_share){.name = name, .local_index = local};
		}
		double share = total ? per[i] / (double)total : 0.0;
		if (side == 0) {
			r->now += share;
			r->in_new = true;
			r->start_new = bp->functions[i]->start;
		} else {
			r->before += share;
			r->in_base = true;
		}
	}
	free(per);
}

static void share_cell(FILE *out, double share, bool present)
{
	if (present)
		fprintf(out, "<td class=\"num\">%.2f%%</td>", 100.0 * share);
	else
		fputs("<td class=\"num dim\">-</td>", out);
}

static void change_cell(FILE *out, double now, double before)
{
	double d = 100.0 * (now - before);
	fprintf(out, "<td class=\"num %s\">%+.2f pt</td>",
		d > 0.005    ? "hotter"
		: d < -0.005 ? "colder"
			     : "",
		d);
}

static void functions_diff(FILE *out, const Edgeprof__V1__BinaryProfile *a,
			   const Edgeprof__V1__BinaryProfile *b, const struct ep_store_filter *f)
{
	struct fn_share *rows = calloc(a->n_functions + b->n_functions + 1, sizeof(*rows));
	if (!rows)
		return;
	size_t n = 0;
	add_functions(rows, &n, a, 0);
	add_functions(rows, &n, b, 1);
	qsort(rows, n, sizeof(*rows), by_change);
	fputs("<h2>Functions that changed most</h2>\n<p class=\"hint\">Share: the function's "
	      "branch executions over all of its binary's, on each side (profiles sampled over "
	      "different times compare by share).</p>\n<table class=\"list\" id=\"diff-functions\">"
	      "<thead><tr><th>Function</th><th class=\"num\">Share now</th><th class=\"num\">Share "
	      "before</th><th class=\"num\">Change</th></tr></thead><tbody>\n",
	      out);
	for (size_t i = 0; i < n && i < TOP; i++) {
		const struct fn_share *r = &rows[i];
		fputs("<tr class=\"fn-diff\" data-name=\"", out);
		ep_web_function_name(out, r->name, r->local_index);
		fprintf(out, "\" data-now=\"%.6f\" data-before=\"%.6f\"><td class=\"fn\">", r->now,
			r->before);
		if (r->in_new) {
			fputs("<a href=\"/function?build_id=", out);
			ep_web_urlenc(out, a->build_id);
			fprintf(out, "&amp;addr=0x%llx", (unsigned long long)r->start_new);
			ep_web_filter_args(out, f);
			fputs("\">", out);
		}
		ep_web_function_label(out, r->name, r->local_index);
		fputs(r->in_new ? "</a>" : "", out);
		if (!r->in_base)
			fputs(" <span class=\"hotter\">new</span>", out);
		else if (!r->in_new)
			fputs(" <span class=\"colder\">gone</span>", out);
		fputs("</td>", out);
		share_cell(out, r->now, r->in_new);
		share_cell(out, r->before, r->in_base);
		change_cell(out, r->now, r->before);
		fputs("</tr>\n", out);
	}
	if (!n)
		fputs("<tr><td colspan=\"4\" class=\"dim\">No function has counts on either "
		      "side.</td></tr>",
		      out);
	fputs("</tbody></table>\n", out);
	free(rows);
}

/* Branch sites of one build-id on two sides: edges are in ep_edge_cmp order
 * (by source) on both. */
static size_t collect_sites(const Edgeprof__V1__BinaryProfile *bp, struct site_share *rows,
			    size_t n, int side)
{
	uint64_t total = total_branches(bp);
	for (size_t i = 0; i < bp->n_edges;) {
		uint64_t from = bp->edges[i]->from, taken = 0, all = 0;
		for (; i < bp->n_edges && bp->edges[i]->from == from; i++) {
			const Edgeprof__V1__Edge *e = bp->edges[i];
			if (!ep_web_is_branch(e))
				continue;
			all += e->count;
			taken += e->taken ? e->count : 0;
		}
		if (!all)
			continue;
		struct site_share *r = NULL;
		for (size_t j = 0; side == 1 && j < n && !r; j++)
			if (rows[j].from == from)
				r = &rows[j];
		if (!r) {
			r = &rows[n++];
			*r = (struct site_share){.from = from, .ratio_now = -1, .ratio_before = -1};
		}
		double share = total ? (double)all / (double)total : 0.0;
		double ratio = (double)taken / (double)all;
		if (side == 0) {
			r->now = share;
			r->ratio_now = ratio;
		} else {
			r->before = share;
			r->ratio_before = ratio;
		}
	}
	return n;
}

static void ratio_cell(FILE *out, double r)
{
	if (r < 0)
		fputs("<td class=\"num dim\">-</td>", out);
	else
		fprintf(out, "<td class=\"num\">%.1f%%</td>", 100.0 * r);
}

static void branches_diff(FILE *out, const Edgeprof__V1__BinaryProfile *a,
			  const Edgeprof__V1__BinaryProfile *b)
{
	struct site_share *rows = calloc(a->n_edges + b->n_edges + 1, sizeof(*rows));
	if (!rows)
		return;
	size_t n = collect_sites(a, rows, 0, 0);
	n = collect_sites(b, rows, n, 1);
	qsort(rows, n, sizeof(*rows), by_site_change);
	fputs("<h2>Branches that changed most</h2>\n<table class=\"list\" id=\"diff-branches\">"
	      "<thead><tr><th>Branch</th><th class=\"num\">Share now</th><th class=\"num\">Share "
	      "before</th><th class=\"num\">Change</th><th class=\"num\">Taken now</th>"
	      "<th class=\"num\">Taken before</th></tr></thead><tbody>\n",
	      out);
	for (size_t i = 0; i < n && i < TOP; i++) {
		const struct site_share *r = &rows[i];
		char where[512];
		fprintf(out, "<tr class=\"branch-diff\" data-from=\"0x%llx\"><td class=\"fn\">",
			(unsigned long long)r->from);
		ep_web_text(out, ep_web_where(a, r->from, where, sizeof(where)));
		fputs("</td>", out);
		share_cell(out, r->now, r->ratio_now >= 0);
		share_cell(out, r->before, r->ratio_before >= 0);
		change_cell(out, r->now, r->before);
		ratio_cell(out, r->ratio_now);
		ratio_cell(out, r->ratio_before);
		fputs("</tr>\n", out);
	}
	fputs("</tbody></table>\n", out);
	free(rows);
}

static void side_line(FILE *out, const char *label, const char *build_id, int64_t from, int64_t to,
		      uint64_t samples)
{
	fprintf(out, "<dt>%s</dt><dd><span class=\"mono\">", label);
	ep_web_text(out, build_id);
	fputs("</span>, ", out);
	if (from || to) {
		ep_web_time(out, from);
		fputs(" to ", out);
		ep_web_time(out, to);
	} else {
		fputs("all time", out);
	}
	fputs(", ", out);
	ep_web_count(out, samples);
	fputs(" samples</dd>", out);
}

int ep_web_diff_page(FILE *out, const struct ep_web_ctx *w, ep_web_arg_fn arg, void *argctx)
{
	struct ep_store_filter now, before;
	ep_web_filter(arg, argctx, &now);
	if (!now.build_id)
		return ep_web_fail(out, w, 400,
				   "which binary? /diff?build_id=NEW&base=OLD (and/or from, to, "
				   "base_from, base_to)");
	before = now;
	const char *v = arg(argctx, "base");
	if (v && *v)
		before.build_id = v;
	before.from_s = (v = arg(argctx, "base_from")) && *v ? strtoll(v, NULL, 10) : now.from_s;
	before.to_s = (v = arg(argctx, "base_to")) && *v ? strtoll(v, NULL, 10) : now.to_s;
	char err[512];
	Edgeprof__V1__Profile *pa = ep_store_profile(w->store, &now, err, sizeof(err));
	Edgeprof__V1__Profile *pb =
	    pa ? ep_store_profile(w->store, &before, err, sizeof(err)) : NULL;
	if (!pa || !pb) {
		ep_profile_free(pa);
		return ep_web_fail(out, w, 503, "store: %s", err);
	}
	if (!pa->n_binaries || !pb->n_binaries) {
		const char *which = !pa->n_binaries ? now.build_id : before.build_id;
		ep_profile_free(pa);
		ep_profile_free(pb);
		return ep_web_fail(out, w, 404, "build-id %s has no counts in that window", which);
	}
	Edgeprof__V1__BinaryProfile *a = pa->binaries[0], *b = pb->binaries[0];
	ep_binary_profile_sort(a);
	ep_binary_profile_sort(b);
	ep_web_begin(out, w, "Diff");
	fputs("<p class=\"crumbs\">", out);
	ep_web_home_link(out, &now);
	fputs(" › <a href=\"/binary?build_id=", out);
	ep_web_urlenc(out, a->build_id);
	ep_web_filter_args(out, &now);
	fputs("\">", out);
	const char *path = a->n_paths ? a->paths[0] : a->build_id;
	const char *base = strrchr(path, '/');
	ep_web_text(out, base ? base + 1 : path);
	fputs("</a> ›</p><h1>What changed</h1>\n<dl class=\"facts\">", out);
	side_line(out, "Now", a->build_id, now.from_s, now.to_s, a->samples);
	side_line(out, "Before", b->build_id, before.from_s, before.to_s, b->samples);
	fputs("</dl>\n", out);
	ep_web_chips(out, &now, "/diff", arg, argctx);
	functions_diff(out, a, b, &now);
	if (strcmp(a->build_id, b->build_id) == 0)
		branches_diff(out, a, b);
	else
		fputs("<p class=\"hint\">Branches are compared only within one build-id: another "
		      "build moves the code.</p>\n",
		      out);
	ep_web_end(out);
	ep_profile_free(pa);
	ep_profile_free(pb);
	return 200;
}
