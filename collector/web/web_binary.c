/* SPDX-License-Identifier: Apache-2.0 */
/* One binary's page (/binary?build_id=): its hottest functions (samples,
 * branch executions, share; time and CPI where the profile has cycles) and
 * hottest branches (taken / not taken, mispredictions), with links to the
 * exports. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collector/web/web_internal.h"
#include "common/export/export.h"
#include "common/profile/cpi.h"
#include "common/profile/model.h"
#include "common/profile/profile_file.h"

#define DEFAULT_TOP 50

struct fn_row {
	const Edgeprof__V1__Function *f;
	uint64_t samples, branches;
	struct ep_cpi_sum cpi;
};

struct site_row {
	uint64_t from, to; /* to: the taken target when there is one */
	uint64_t taken, not_taken, mispredicted;
	unsigned targets; /* distinct taken targets */
	int kind;
	bool to_external;
};

static int by_branches(const void *a, const void *b)
{
	const struct fn_row *x = a, *y = b;
	if (x->branches != y->branches)
		return x->branches < y->branches ? 1 : -1;
	if (x->samples != y->samples)
		return x->samples < y->samples ? 1 : -1;
	return x->f->start < y->f->start ? -1 : x->f->start > y->f->start;
}

static int by_executions(const void *a, const void *b)
{
	const struct site_row *x = a, *y = b;
	uint64_t ex = x->taken + x->not_taken, ey = y->taken + y->not_taken;
	if (ex != ey)
		return ex < ey ? 1 : -1;
	return x->from < y->from ? -1 : x->from > y->from;
}

static const char *kind_name(int kind)
{
	switch (kind) {
	case EDGEPROF__V1__BRANCH_KIND__BRANCH_CONDITIONAL:
		return "conditional";
	case EDGEPROF__V1__BRANCH_KIND__BRANCH_JUMP:
		return "jump";
	case EDGEPROF__V1__BRANCH_KIND__BRANCH_JUMP_INDIRECT:
		return "indirect jump";
	case EDGEPROF__V1__BRANCH_KIND__BRANCH_CALL:
		return "call";
	case EDGEPROF__V1__BRANCH_KIND__BRANCH_CALL_INDIRECT:
		return "indirect call";
	case EDGEPROF__V1__BRANCH_KIND__BRANCH_RETURN:
		return "return";
	default:
		return "other";
	}
}

/* A bar of share in [0, 1] behind a cell's number */
static void bar(FILE *out, double share)
{
	fprintf(out, "<span class=\"bar\" style=\"width:%.1f%%\"></span>", 100.0 * share);
}

static void function_link(FILE *out, const char *build_id, uint64_t start,
			  const struct ep_store_filter *f)
{
	fputs("<a href=\"/function?build_id=", out);
	ep_web_urlenc(out, build_id);
	fprintf(out, "&amp;addr=0x%llx", (unsigned long long)start);
	ep_web_filter_args(out, f);
	fputs("\">", out);
}

static long function_of(const void *bp, uint64_t addr)
{
	return ep_web_function_index(bp, addr);
}

/* The time and CPI cells of a function row, where the profile has cycles
 * (agent --cycles, or branch records that carry them). No instructions
 * known (IP samples outside every counted block): no CPI, not a CPI of 0. */
static void cpi_cells(FILE *out, const struct ep_cpi_sum *s, uint64_t total)
{
	uint64_t t = ep_cpi_time(s);
	fputs("<td class=\"num\">", out);
	ep_web_count(out, t);
	fprintf(out, "</td><td class=\"num\">%.1f%%</td><td class=\"num cpi\">",
		total ? 100.0 * (double)t / (double)total : 0.0);
	if (s->cycles && s->insns)
		fprintf(out, "%.3f", ep_cpi_of(s));
	else
		fputs("<span class=\"dim\">-</span>", out);
	fputs("</td>", out);
}

/* The counts in no function (stripped or generated code): a row of their
 * own, so the shares add up to the binary's, linked to the code around
 * the hottest of their addresses. */
struct unknown_row {
	uint64_t branches, samples;
	uint64_t hottest, hottest_count;
};

static void unknown_add(struct unknown_row *u, uint64_t addr, uint64_t branches, uint64_t samples)
{
	u->branches += branches;
	u->samples += samples;
	if (branches + samples > u->hottest_count) {
		u->hottest_count = branches + samples;
		u->hottest = addr;
	}
}

static void unknown_tr(FILE *out, const char *build_id, const struct ep_store_filter *f,
		       const struct unknown_row *u, bool by_samples, uint64_t total, bool time)
{
	uint64_t part = by_samples ? u->samples : u->branches;
	double share = total ? (double)part / (double)total : 0.0;
	fprintf(out,
		"<tr class=\"function unknown\" data-name=\"[unknown]\" data-branches=\"%llu\" "
		"data-samples=\"%llu\" data-time=\"0\"><td class=\"fn\" title=\"counts at "
		"addresses in no symbol; the link shows the code around the hottest\">",
		(unsigned long long)u->branches, (unsigned long long)u->samples);
	function_link(out, build_id, u->hottest, f);
	fputs("[unknown]</a></td><td class=\"num\">", out);
	ep_web_count(out, u->branches);
	fputs("</td><td class=\"num share\">", out);
	bar(out, share);
	fprintf(out, "<span>%.1f%%</span></td><td class=\"num\">", 100.0 * share);
	ep_web_count(out, u->samples);
	fprintf(out, "</td><td class=\"mono\">0x%llx</td><td class=\"num\">-</td>",
		(unsigned long long)u->hottest);
	if (time)
		fputs("<td class=\"num\">-</td><td class=\"num\">-</td><td class=\"num\">-</td>",
		      out);
	fputs("</tr>\n", out);
}

/* unit: the profile's config.cycles_unit ("ns" where cpu-clock stood in) */
static void functions_table(FILE *out, const Edgeprof__V1__BinaryProfile *bp, const char *unit,
			    const struct ep_store_filter *f, size_t top)
{
	struct fn_row *rows = calloc(bp->n_functions + 1, sizeof(*rows));
	struct ep_cpi_sum *cpi = NULL, cpi_total;
	if (!rows || ep_cpi_sums(bp, bp->n_functions, function_of, bp, &cpi, &cpi_total) != 0) {
		free(rows);
		return;
	}
	for (size_t i = 0; i < bp->n_functions; i++) {
		rows[i].f = bp->functions[i];
		rows[i].cpi = cpi[i];
	}
	free(cpi);
	uint64_t total_time = ep_cpi_time(&cpi_total);
	bool ns = unit && strcmp(unit, "ns") == 0;
	struct unknown_row unknown = {0};
	uint64_t total_branches = 0, total_samples = 0;
	for (size_t i = 0; i < bp->n_edges; i++) {
		const Edgeprof__V1__Edge *e = bp->edges[i];
		if (!ep_web_is_branch(e))
			continue;
		total_branches += e->count;
		long k = ep_web_function_index(bp, e->from);
		if (k >= 0)
			rows[k].branches += e->count;
		else
			unknown_add(&unknown, e->from, e->count, 0);
	}
	for (size_t i = 0; i < bp->n_ips; i++) {
		total_samples += bp->ips[i]->count;
		long k = ep_web_function_index(bp, bp->ips[i]->ip);
		if (k >= 0)
			rows[k].samples += bp->ips[i]->count;
		else
			unknown_add(&unknown, bp->ips[i]->ip, 0, bp->ips[i]->count);
	}
	/* the share of branch executions, or of IP samples where the binary
	 * has no branch counts (a node without a branch-stack PMU) */
	bool by_samples = !total_branches;
	uint64_t total = by_samples ? total_samples : total_branches;
	qsort(rows, bp->n_functions, sizeof(*rows), by_branches);
	size_t shown = 0;
	fprintf(out,
		"<h2>Hottest functions</h2>\n<table class=\"list\" id=\"functions\" "
		"data-share-of=\"%s\"><thead><tr><th>Function</th><th class=\"num\">Branch "
		"executions</th><th class=\"num share\" title=\"of the binary's %s\">Share</th>"
		"<th class=\"num\">IP samples</th><th>Address</th><th class=\"num\">Size</th>",
		by_samples ? "samples" : "branches",
		by_samples ? "IP samples (it has no branch counts)" : "branch executions");
	if (total_time)
		fprintf(out,
			"<th class=\"num\">%s</th><th class=\"num\">Time share</th><th "
			"class=\"num\" title=\"%s\">%s</th>",
			ns ? "CPU time (ns)" : "Cycles",
			ns ? "nanoseconds per instruction (cpu-clock stood in for a cycles event)"
			   : "cycles per instruction",
			ns ? "ns/insn" : "CPI");
	fputs("</tr></thead><tbody>\n", out);
	for (size_t i = 0; i < bp->n_functions && shown < top; i++) {
		const struct fn_row *r = &rows[i];
		if (!r->branches && !r->samples && !ep_cpi_time(&r->cpi))
			break;
		shown++;
		uint64_t part = by_samples ? r->samples : r->branches;
		double share = total ? (double)part / (double)total : 0.0;
		fputs("<tr class=\"function\" data-name=\"", out);
		ep_web_function_name(out, r->f->name, r->f->local_index);
		fprintf(out,
			"\" data-branches=\"%llu\" data-samples=\"%llu\" data-time=\"%llu\"><td "
			"class=\"fn\">",
			(unsigned long long)r->branches, (unsigned long long)r->samples,
			(unsigned long long)ep_cpi_time(&r->cpi));
		function_link(out, bp->build_id, r->f->start, f);
		ep_web_function_label(out, r->f->name, r->f->local_index);
		fputs("</a></td><td class=\"num\">", out);
		ep_web_count(out, r->branches);
		fputs("</td><td class=\"num share\">", out);
		bar(out, share);
		fprintf(out, "<span>%.1f%%</span></td><td class=\"num\">", 100.0 * share);
		ep_web_count(out, r->samples);
		fprintf(out, "</td><td class=\"mono\">0x%llx</td><td class=\"num\">%llu</td>",
			(unsigned long long)r->f->start, (unsigned long long)r->f->size);
		if (total_time)
			cpi_cells(out, &r->cpi, total_time);
		fputs("</tr>\n", out);
	}
	if (unknown.branches || unknown.samples)
		unknown_tr(out, bp->build_id, f, &unknown, by_samples, total, total_time != 0);
	else if (!shown)
		fprintf(out,
			"<tr><td colspan=\"%d\" class=\"dim\">No function has counts.</td></tr>",
			total_time ? 9 : 6);
	fputs("</tbody></table>\n", out);
	free(rows);
}

/* Branch sites: the edges (in ep_edge_cmp order: by source) grouped by
 * the branch instruction they leave. */
static void branches_table(FILE *out, const Edgeprof__V1__BinaryProfile *bp,
			   const struct ep_store_filter *f, size_t top)
{
	struct site_row *rows = calloc(bp->n_edges + 1, sizeof(*rows));
	if (!rows)
		return;
	size_t n = 0;
	uint64_t total = 0;
	for (size_t i = 0; i < bp->n_edges; i++) {
		const Edgeprof__V1__Edge *e = bp->edges[i];
		if (!ep_web_is_branch(e))
			continue;
		total += e->count;
		struct site_row *r = n && rows[n - 1].from == e->from ? &rows[n - 1] : NULL;
		if (!r) {
			r = &rows[n++];
			r->from = e->from;
			r->kind = e->kind;
		}
		if (e->taken) {
			r->taken += e->count;
			r->mispredicted += e->mispredicted;
			if (r->targets++ == 0)
				r->to = e->to;
			r->to_external |= e->to_external;
		} else {
			r->not_taken += e->count;
			r->mispredicted += e->mispredicted;
		}
	}
	qsort(rows, n, sizeof(*rows), by_executions);
	fputs("<h2>Hottest branches</h2>\n<table class=\"list\" id=\"branches\"><thead><tr>"
	      "<th>Branch</th><th>Kind</th><th>Target</th><th class=\"num\">Executed</th>"
	      "<th class=\"num\">Taken</th><th class=\"num\">Not taken</th>"
	      "<th class=\"num share\">Taken ratio</th><th class=\"num\">Mispredicted</th>"
	      "</tr></thead><tbody>\n",
	      out);
	for (size_t i = 0; i < n && i < top; i++) {
		const struct site_row *r = &rows[i];
		uint64_t ex = r->taken + r->not_taken;
		if (!ex)
			break;
		char where[512];
		double ratio = (double)r->taken / (double)ex;
		fprintf(out,
			"<tr class=\"branch\" data-from=\"0x%llx\" data-taken=\"%llu\" "
			"data-not-taken=\"%llu\"><td class=\"fn\">",
			(unsigned long long)r->from, (unsigned long long)r->taken,
			(unsigned long long)r->not_taken);
		/* an address in no function links to the code around it */
		const Edgeprof__V1__Function *fn = ep_web_function_at(bp, r->from);
		fputs("<a href=\"/function?build_id=", out);
		ep_web_urlenc(out, bp->build_id);
		fprintf(out, "&amp;addr=0x%llx", (unsigned long long)(fn ? fn->start : r->from));
		ep_web_filter_args(out, f);
		fprintf(out, "#i%llx\">", (unsigned long long)r->from);
		ep_web_text(out, ep_web_where(bp, r->from, where, sizeof(where)));
		fputs("</a>", out);
		fprintf(out, "</td><td>%s</td><td class=\"fn\">", kind_name(r->kind));
		if (r->targets > 1)
			fprintf(out, "%u targets", r->targets);
		else if (r->to_external)
			fputs("<span class=\"dim\">another binary</span>", out);
		else if (r->targets == 1) {
			function_link(out, bp->build_id, r->to, f);
			ep_web_text(out, ep_web_where(bp, r->to, where, sizeof(where)));
			fputs("</a>", out);
		} else
			fputs("<span class=\"dim\">-</span>", out);
		fputs("</td><td class=\"num\">", out);
		ep_web_count(out, ex);
		fputs("</td><td class=\"num\">", out);
		ep_web_count(out, r->taken);
		fputs("</td><td class=\"num\">", out);
		ep_web_count(out, r->not_taken);
		fputs("</td><td class=\"num share\">", out);
		bar(out, ratio);
		fprintf(out, "<span>%.1f%%</span></td><td class=\"num\">", 100.0 * ratio);
		if (r->taken)
			fprintf(out, "%.1f%%", 100.0 * (double)r->mispredicted / (double)r->taken);
		else
			fputs("<span class=\"dim\">-</span>", out);
		fputs("</td></tr>\n", out);
	}
	if (!n)
		fputs("<tr><td colspan=\"8\" class=\"dim\">No branch has counts.</td></tr>", out);
	fputs("</tbody></table>\n", out);
	(void)total;
	free(rows);
}

/* A format /v1/profile would refuse for the binary (IP samples only, and
 * a format made of branches: ep_export_check_branches) is said, not
 * offered. */
static void export_links(FILE *out, const Edgeprof__V1__Profile *p, const char *build_id,
			 const struct ep_store_filter *f)
{
	char why[256];
	bool ip_only = false;
	static const struct {
		const char *format, *label, *ext;
	} formats[] = {{"fdata", "BOLT fdata", "fdata"},
		       {"preagg", "BOLT pre-aggregated", "preagg"},
		       {"afdo", "AutoFDO text", "afdo.txt"},
		       {"json", "JSON", "json"}};
	fputs("<div class=\"exports\" id=\"exports\">Export: ", out);
	for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
		int fmt = ep_export_parse_format(formats[i].format);
		if (fmt >= 0 && ep_export_check_branches(p, (enum ep_export_format)fmt, build_id,
							 why, sizeof(why)) != 0) {
			ip_only = true;
			continue;
		}
		fputs("<a class=\"button\" href=\"/v1/profile?build_id=", out);
		ep_web_urlenc(out, build_id);
		fprintf(out, "&amp;format=%s", formats[i].format);
		ep_web_filter_args(out, f);
		fputs("\" download=\"", out);
		ep_web_text(out, build_id);
		fprintf(out, ".%s\">%s</a> ", formats[i].ext, formats[i].label);
	}
	if (ip_only)
		fputs("<span class=\"dim\" id=\"exports-ip-only\">IP samples only: BOLT's and "
		      "AutoFDO's formats need branch records (LBR/BRBE)</span>",
		      out);
	fputs("</div>\n", out);
}

static const char *base_name(const char *path)
{
	const char *b = strrchr(path, '/');
	return b ? b + 1 : path;
}

/* Links to diffs: the last hour against the hour before, and against each
 * other build-id of a binary of the same name (another build of it). */
static void compare_links(FILE *out, const struct ep_web_ctx *w,
			  const Edgeprof__V1__BinaryProfile *bp, const struct ep_store_filter *f)
{
	/* the selection's labels kept; the time is the link's own */
	struct ep_store_filter labels = *f;
	labels.from_s = labels.to_s = 0;
	int64_t now = (int64_t)time(NULL) / EP_STORE_BUCKET_S * EP_STORE_BUCKET_S;
	fputs("<div class=\"exports\" id=\"compare\">Compare: <a class=\"button\" "
	      "href=\"/diff?build_id=",
	      out);
	ep_web_urlenc(out, bp->build_id);
	fprintf(out, "&amp;from=%lld&amp;base_from=%lld&amp;base_to=%lld", (long long)(now - 3600),
		(long long)(now - 7200), (long long)(now - 3600));
	ep_web_filter_args(out, &labels);
	fputs("\">last hour vs the hour before</a> ", out);
	struct ep_store_filter all = {0};
	/* the first page of the most there may be, without their labels: a
	 * bounded answer (issue 32), and builds of one program are few */
	const struct ep_store_page page = {.limit = EP_STORE_PAGE_MAX};
	char err[256];
	Edgeprof__V1__BinaryList *list =
	    ep_store_list_binaries(w->store, &all, &page, err, sizeof(err));
	const char *name = bp->n_paths ? base_name(bp->paths[0]) : NULL;
	for (size_t i = 0; name && list && i < list->n_binaries; i++) {
		const Edgeprof__V1__BinaryInfo *o = list->binaries[i];
		if (!*o->build_id || strcmp(o->build_id, bp->build_id) == 0 || !o->n_paths ||
		    strcmp(base_name(o->paths[0]), name) != 0)
			continue;
		fputs("<a class=\"button\" href=\"/diff?build_id=", out);
		ep_web_urlenc(out, bp->build_id);
		fputs("&amp;base=", out);
		ep_web_urlenc(out, o->build_id);
		ep_web_filter_args(out, f);
		fputs("\">vs build ", out);
		fprintf(out, "%.12s", o->build_id);
		fputs("</a> ", out);
	}
	ep_store_free_list(list);
	fputs("</div>\n", out);
}

int ep_web_binary_page(FILE *out, const struct ep_web_ctx *w, ep_web_arg_fn arg, void *argctx)
{
	struct ep_store_filter f;
	ep_web_filter(arg, argctx, &f);
	if (!f.build_id)
		return ep_web_fail(out, w, 400, "which binary? /binary?build_id=BUILD-ID");
	const char *topv = arg(argctx, "top");
	size_t top = topv && *topv ? strtoul(topv, NULL, 10) : DEFAULT_TOP;
	if (!top)
		top = DEFAULT_TOP;
	char err[512];
	Edgeprof__V1__Profile *p = ep_store_profile(w->store, &f, err, sizeof(err));
	if (!p)
		return ep_web_fail(out, w, 503, "store: %s", err);
	if (p->n_binaries == 0) {
		ep_profile_free(p);
		return ep_web_fail(out, w, 404,
				   "build-id %s has no counts under this filter (time window, "
				   "labels)",
				   f.build_id);
	}
	Edgeprof__V1__BinaryProfile *bp = p->binaries[0];
	const char *path = bp->n_paths ? bp->paths[0] : bp->build_id;
	const char *base = strrchr(path, '/');
	ep_web_begin(out, w, base ? base + 1 : path);
	fputs("<p class=\"crumbs\">", out);
	ep_web_home_link(out, &f);
	fputs(" ›</p><h1>", out);
	ep_web_text(out, base ? base + 1 : path);
	fputs("</h1>\n<dl class=\"facts\"><dt>Build-id</dt><dd class=\"mono\" id=\"build-id\">",
	      out);
	ep_web_text(out, bp->build_id);
	fputs("</dd><dt>Paths</dt><dd>", out);
	for (size_t i = 0; i < bp->n_paths; i++) {
		fputs(i ? "<br>" : "", out);
		ep_web_text(out, bp->paths[i]);
	}
	fputs("</dd><dt>Arch</dt><dd>", out);
	ep_web_text(out, bp->arch);
	fputs("</dd><dt>Samples</dt><dd id=\"samples\">", out);
	ep_web_count(out, bp->samples);
	int has = w->binaries ? ep_binaries_has(w->binaries, bp->build_id, err, sizeof(err)) : 0;
	fputs("</dd><dt>Code</dt><dd>", out);
	fputs(has == EP_IMAGE_TRUSTED ? "kept: control-flow graphs and disassembly available"
	      : has > 0 ? "<span id=\"code-provisional\">provisional: sent by an agent, not "
			  "verified (<code>edgeprof upload BINARY --collector URL</code> or "
			  "debuginfod replaces it); control-flow graphs and disassembly drawn "
			  "from it</span>"
			: "not uploaded: functions show counts only (<code>edgeprof upload "
			  "BINARY --collector URL</code>)",
	      out);
	fputs("</dd></dl>\n", out);
	ep_web_chips(out, &f, "/binary", arg, argctx);
	export_links(out, p, bp->build_id, &f);
	compare_links(out, w, bp, &f);
	ep_binary_profile_sort(bp);
	functions_table(out, bp, p->config ? p->config->cycles_unit : NULL, &f, top);
	branches_table(out, bp, &f, top);
	ep_web_end(out);
	ep_profile_free(p);
	return 200;
}
