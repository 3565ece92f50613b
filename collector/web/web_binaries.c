/* SPDX-License-Identifier: Apache-2.0 */
/* The first page (/): the binaries with counts, filtered by time window and
 * labels, each a link to its own page. */
#include <stdlib.h>
#include <string.h>

#include "collector/web/web_internal.h"

static const struct {
	const char *label;
	long long s;
} windows[] = {{"all time", 0},
	       {"last hour", 3600},
	       {"last 6 hours", 21600},
	       {"last day", 86400},
	       {"last week", 604800}};

static void text_input(FILE *out, const char *label, const char *name, const char *value)
{
	fprintf(out, "<label>%s <input type=\"text\" name=\"%s\" value=\"", label, name);
	ep_web_text(out, value);
	fputs("\" size=\"14\"></label> ", out);
}

static void filter_form(FILE *out, ep_web_arg_fn arg, void *argctx, const struct ep_store_filter *f)
{
	const char *window = arg(argctx, "window");
	fputs("<form class=\"filters\" method=\"get\" action=\"/\">"
	      "<label>Time <select name=\"window\">",
	      out);
	for (size_t i = 0; i < sizeof(windows) / sizeof(windows[0]); i++) {
		bool sel = window ? strtoll(window, NULL, 10) == windows[i].s : windows[i].s == 0;
		fprintf(out, "<option value=\"%lld\"%s>%s</option>", windows[i].s,
			sel ? " selected" : "", windows[i].label);
	}
	fputs("</select></label> ", out);
	text_input(out, "Container", "container_id", f->container_id);
	text_input(out, "Pod", "pod", f->pod);
	text_input(out, "Namespace", "namespace", f->namespace_);
	text_input(out, "Process", "process", f->process);
	text_input(out, "Cgroup", "cgroup", f->cgroup);
	fputs("<button type=\"submit\">Filter</button> <a href=\"/\">clear</a></form>\n", out);
}

/* Values shown per label column; a column with more says how many there are
 * and shows the most sampled. */
#define SHOWN_VALUES 6
#define PAGE_SIZE    50 /* binaries per page, hottest first */
#define TOP_SHOWN    10 /* top functions on / when a selection is active */

/* One dimension of b's labels (container_id, pod, process): its values, a
 * container id shortened to its first 12 digits (as docker and crictl show
 * them), or how many there are and the most sampled. */
static void label_values(FILE *out, const Edgeprof__V1__BinaryInfo *b, const char *dim)
{
	const Edgeprof__V1__LabelDimension *d = NULL;
	for (size_t k = 0; k < b->n_dimensions && !d; k++)
		if (strcmp(b->dimensions[k]->name, dim) == 0)
			d = b->dimensions[k];
	bool container = strcmp(dim, "container_id") == 0;
	size_t shown = 0;
	if (d && d->summarized) {
		fprintf(out, "<span class=\"count\" title=\"%s\">%s",
			d->exact ? "distinct values" : "distinct values, estimated",
			d->exact ? "" : "~");
		ep_web_count(out, d->distinct);
		fputs("</span> ", out);
	}
	for (size_t i = 0; d && i < d->n_values && shown < (d->summarized ? 3 : SHOWN_VALUES);
	     i++) {
		const char *v = d->values[i]->value;
		if (!*v)
			continue;
		fputs(shown++ ? ", " : "", out);
		if (container)
			fprintf(out, "%.12s", v);
		else
			ep_web_text(out, v);
	}
	if (d && (d->summarized || d->n_values > shown) && shown)
		fputs(", …", out);
	if (!shown && !(d && d->summarized))
		fputs("<span class=\"dim\">-</span>", out);
}

/* The link to another page of the list, with the filter's arguments. */
static void page_link(FILE *out, ep_web_arg_fn arg, void *argctx, const struct ep_store_filter *f,
		      size_t page, const char *text)
{
	fprintf(out, "<a class=\"button\" href=\"/?page=%zu", page);
	const char *window = arg(argctx, "window");
	if (window && *window && !arg(argctx, "from")) {
		fputs("&amp;window=", out);
		ep_web_urlenc(out, window);
	}
	struct ep_store_filter g = *f;
	if (window && *window && !arg(argctx, "from"))
		g.from_s = 0; /* the window, again, not the time it gave */
	ep_web_filter_args(out, &g);
	fprintf(out, "\">%s</a> ", text);
}

int ep_web_binaries_page(FILE *out, const struct ep_web_ctx *w, ep_web_arg_fn arg, void *argctx)
{
	struct ep_store_filter f;
	ep_web_filter(arg, argctx, &f);
	f.build_id = NULL;
	const char *pv = arg(argctx, "page");
	size_t page = pv && *pv ? strtoul(pv, NULL, 10) : 1;
	if (page < 1 || page > 1000000)
		page = 1;
	/* a page of the hottest binaries, each with a few of its labels'
	 * values: bounded whatever the store holds (issue 32) */
	struct ep_store_page p = {.by_samples = true,
				  .offset = (page - 1) * PAGE_SIZE,
				  .limit = PAGE_SIZE,
				  .labels = SHOWN_VALUES,
				  .totals = true};
	char err[512];
	Edgeprof__V1__BinaryList *list = ep_store_list_binaries(w->store, &f, &p, err, sizeof(err));
	if (!list)
		return ep_web_fail(out, w, 503, "store: %s", err);
	ep_web_begin(out, w, "Binaries");
	fputs("<h1>Binaries</h1>\n<p class=\"lead\">Every binary the agents sampled, by build-id. "
	      "Open one to see its hottest functions and branches.</p>\n",
	      out);
	filter_form(out, arg, argctx, &f);
	ep_web_chips(out, &f, "/", arg, argctx);
	/* a selection's question is which function is hot in it, across its
	 * binaries: answered here, one click from each function (issue 36) */
	if (ep_web_selected(&f) && page == 1) {
		fputs("<h2 id=\"top-functions\">Top functions of the selection</h2>\n", out);
		if (ep_web_top_table(out, w, &f, TOP_SHOWN, err, sizeof(err)) != 0) {
			fputs("<p class=\"error\">", out);
			ep_web_text(out, err);
			fputs("</p>", out);
		}
		fputs("<h2>Binaries of the selection</h2>\n", out);
	}
	fputs("<p class=\"summary\" id=\"summary\"><b>", out);
	ep_web_count(out, list->total_binaries);
	fputs("</b> binaries, <b>", out);
	ep_web_count(out, list->total_samples);
	fputs("</b> samples", out);
	if (page > 1 || list->more)
		fprintf(out, "; the hottest %zu to %zu", p.offset + 1, p.offset + list->n_binaries);
	fputs("</p>\n", out);
	fputs("<table class=\"list\" id=\"binaries\"><thead><tr><th>Binary</th><th>Build-id</th>"
	      "<th class=\"num\">Samples</th><th class=\"num\">Share</th><th>First seen</th>"
	      "<th>Last seen</th><th>Containers</th><th>Pods</th><th>Processes</th>"
	      "<th>Code</th></tr></thead><tbody>\n",
	      out);
	uint64_t total = list->total_samples;
	for (size_t i = 0; i < list->n_binaries; i++) {
		const Edgeprof__V1__BinaryInfo *b = list->binaries[i];
		const char *path = b->n_paths ? b->paths[0] : "";
		const char *base = strrchr(path, '/');
		fputs("<tr class=\"binary\" data-build-id=\"", out);
		ep_web_text(out, b->build_id);
		fprintf(out, "\" data-samples=\"%llu\" data-label-sets=\"%llu\"><td>",
			(unsigned long long)b->samples, (unsigned long long)b->label_sets);
		/* a binary without a build-id has no page: nothing names it */
		if (*b->build_id) {
			fputs("<a class=\"binlink\" href=\"/binary?build_id=", out);
			ep_web_urlenc(out, b->build_id);
			ep_web_filter_args(out, &f);
			fputs("\">", out);
		}
		fputs("<b>", out);
		ep_web_text(out, base ? base + 1 : *path ? path : b->build_id);
		fputs(*b->build_id ? "</b></a>"
				   : "</b> <span class=\"dim\">(no build-id: exports only)</span>",
		      out);
		for (size_t j = 0; j < b->n_paths && j < 3; j++) {
			fputs("<div class=\"path\">", out);
			ep_web_text(out, b->paths[j]);
			fputs("</div>", out);
		}
		fputs("</td><td class=\"mono\">", out);
		ep_web_text(out, b->build_id);
		fputs("</td><td class=\"num\">", out);
		ep_web_count(out, b->samples);
		fprintf(out, "</td><td class=\"num\">%.1f%%</td><td class=\"when\">",
			total ? 100.0 * (double)b->samples / (double)total : 0.0);
		ep_web_time(out, b->first_seen_s);
		fputs("</td><td class=\"when\">", out);
		ep_web_time(out, b->last_seen_s);
		fputs("</td><td class=\"mono\">", out);
		label_values(out, b, "container_id");
		fputs("</td><td>", out);
		label_values(out, b, "pod");
		fputs("</td><td>", out);
		label_values(out, b, "process");
		fputs("</td><td>", out);
		int has =
		    w->binaries ? ep_binaries_has(w->binaries, b->build_id, err, sizeof(err)) : 0;
		fputs(has == EP_IMAGE_TRUSTED ? "<span class=\"ok\">kept</span>"
		      : has > 0 ? "<span class=\"error\" title=\"sent by an agent, not verified:"
				  " edgeprof upload BINARY replaces it\">provisional</span>"
				: "<span class=\"dim\" title=\"edgeprof upload BINARY --collector "
				  "URL\">missing</span>",
		      out);
		fputs("</td></tr>\n", out);
	}
	if (list->n_binaries == 0)
		fputs("<tr><td colspan=\"10\" class=\"dim\">No binary has counts under this "
		      "filter.</td></tr>\n",
		      out);
	fputs("</tbody></table>\n", out);
	if (page > 1 || list->more) {
		fputs("<p class=\"pages\" id=\"pages\">", out);
		if (page > 1)
			page_link(out, arg, argctx, &f, page - 1, "‹ hotter");
		if (list->more)
			page_link(out, arg, argctx, &f, page + 1, "colder ›");
		fputs("</p>\n", out);
	}
	ep_store_free_list(list);
	ep_web_end(out);
	return 200;
}
