/* SPDX-License-Identifier: Apache-2.0 */
/* The selection's hottest functions across its binaries (/top, and the
 * first rows of it on / when a selection is active; issue 36): finding a
 * pod's hottest function took a page per binary before. */
#include <stdlib.h>
#include <string.h>

#include "collector/api/top.h"
#include "collector/web/web_internal.h"

static void share_cell(FILE *out, uint64_t part, uint64_t total)
{
	double share = total ? (double)part / (double)total : 0.0;
	fprintf(out,
		"<td class=\"num share\"><span class=\"bar\" style=\"width:%.1f%%\"></span>"
		"<span>%.1f%%</span></td>",
		100.0 * share, 100.0 * share);
}

static void top_row(FILE *out, const struct ep_top *t, const struct ep_top_row *r,
		    const struct ep_store_filter *f)
{
	fprintf(out,
		"<tr class=\"top-fn%s\" data-build-id=\"%s\" data-addr=\"0x%llx\" "
		"data-branches=\"%llu\" "
		"data-samples=\"%llu\" data-name=\"",
		r->name ? "" : " unknown", r->build_id, (unsigned long long)r->addr,
		(unsigned long long)r->branches, (unsigned long long)r->samples);
	ep_web_text(out, r->name ? r->name : "[unknown]");
	fputs("\"><td class=\"fn\"><a class=\"fnlink\" href=\"/function?build_id=", out);
	ep_web_urlenc(out, r->build_id);
	fprintf(out, "&amp;addr=0x%llx", (unsigned long long)r->addr);
	ep_web_filter_args(out, f);
	fputs("\">", out);
	if (r->name)
		ep_web_function_label(out, r->name, 0);
	else
		fputs("[unknown]", out);
	fputs("</a></td><td><a class=\"binlink\" href=\"/binary?build_id=", out);
	ep_web_urlenc(out, r->build_id);
	ep_web_filter_args(out, f);
	fputs("\">", out);
	ep_web_text(out, r->binary);
	fputs("</a></td><td class=\"num\">", out);
	ep_web_count(out, r->branches);
	fputs("</td>", out);
	share_cell(out, r->branches, t->total_branches);
	fputs("<td class=\"num\">", out);
	ep_web_count(out, r->samples);
	fputs("</td>", out);
	share_cell(out, r->samples, t->total_samples);
	fputs("</tr>\n", out);
}

/* "/top?n=N&..." keeping the filter */
static void top_link(FILE *out, const struct ep_store_filter *f, size_t n, const char *text)
{
	fprintf(out, "<a class=\"button\" id=\"top-more\" href=\"/top?n=%zu", n);
	ep_web_filter_args(out, f);
	fprintf(out, "\">%s</a>", text);
}

int ep_web_top_table(FILE *out, const struct ep_web_ctx *w, const struct ep_store_filter *f,
		     size_t n, char *err, size_t errlen)
{
	struct ep_top t;
	if (ep_top_compute(w->store, f, &t, err, errlen) != 0)
		return -1;
	fprintf(out,
		"<p class=\"summary\" id=\"top-summary\">Functions of the selection's %zu hottest "
		"binaries%s, ranked by branch executions, then IP samples: <b>",
		t.binaries, t.binaries_more ? " (the colder ones are not read)" : "");
	ep_web_count(out, t.total_branches);
	fputs("</b> branch executions, <b>", out);
	ep_web_count(out, t.total_samples);
	fputs("</b> IP samples.</p>\n", out);
	fprintf(out,
		"<table class=\"list\" id=\"top\" data-total-branches=\"%llu\" "
		"data-total-samples=\"%llu\"><thead><tr><th>Function</th><th>Binary</th>"
		"<th class=\"num\">Branch executions</th><th class=\"num share\" title=\"of the "
		"selection's branch executions\">Share</th><th class=\"num\">IP samples</th>"
		"<th class=\"num share\" title=\"of the selection's IP samples\">Share</th>"
		"</tr></thead><tbody>\n",
		(unsigned long long)t.total_branches, (unsigned long long)t.total_samples);
	for (size_t i = 0; i < t.n && i < n; i++)
		top_row(out, &t, &t.rows[i], f);
	if (!t.n)
		fputs("<tr><td colspan=\"6\" class=\"dim\">No function has counts in this "
		      "selection.</td></tr>\n",
		      out);
	fputs("</tbody></table>\n", out);
	if (t.n > n) {
		fputs("<p class=\"pages\">", out);
		top_link(out, f,
			 n < EP_TOP_DEFAULT   ? EP_TOP_DEFAULT
			 : n * 2 > EP_TOP_MAX ? EP_TOP_MAX
					      : n * 2,
			 "show more");
		fputs("</p>\n", out);
	}
	ep_top_free(&t);
	return 0;
}

int ep_web_top_page(FILE *out, const struct ep_web_ctx *w, ep_web_arg_fn arg, void *argctx)
{
	struct ep_store_filter f;
	ep_web_filter(arg, argctx, &f);
	f.build_id = NULL;
	size_t n = ep_top_rows_arg(arg(argctx, "n"));
	if (!n)
		return ep_web_fail(out, w, 400, "n: 1 to %d rows", EP_TOP_MAX);
	char *body = NULL;
	size_t len = 0;
	FILE *table = open_memstream(&body, &len);
	if (!table)
		return ep_web_fail(out, w, 500, "out of memory");
	char err[512];
	int rc = ep_web_top_table(table, w, &f, n, err, sizeof(err));
	fclose(table);
	if (rc != 0) {
		free(body);
		return ep_web_fail(out, w, 503, "store: %s", err);
	}
	ep_web_begin(out, w, "Top functions");
	fputs("<p class=\"crumbs\">", out);
	ep_web_home_link(out, &f);
	fputs(" ›</p><h1>Top functions</h1>\n", out);
	ep_web_chips(out, &f, "/top", arg, argctx);
	fwrite(body, 1, len, out);
	free(body);
	ep_web_end(out);
	return 200;
}
