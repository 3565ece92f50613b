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
	fputs("<button type=\"submit\">Filter</button> <a href=\"/\">clear</a></form>\n", out);
}

enum label_col { COL_CONTAINER, COL_POD, COL_PROCESS };

/* One label set's value for a column: a container id's first 12 digits
 * (as docker and crictl show them), a pod as NAMESPACE/NAME. */
static void label_value(const Edgeprof__V1__Labels *l, enum label_col col, char *buf, size_t len)
{
	if (col == COL_CONTAINER)
		snprintf(buf, len, "%.12s", l->container_id);
	else if (col == COL_POD && *l->pod)
		snprintf(buf, len, "%s%s%s", l->namespace_, *l->namespace_ ? "/" : "", l->pod);
	else if (col == COL_POD)
		buf[0] = '\0';
	else
		snprintf(buf, len, "%s", l->process);
}

/* The distinct values of one label over b's label sets, comma-separated. */
static void label_values(FILE *out, const Edgeprof__V1__BinaryInfo *b, enum label_col col)
{
	size_t shown = 0;
	for (size_t i = 0; i < b->n_labels; i++) {
		char v[512], u[512];
		label_value(b->labels[i], col, v, sizeof(v));
		bool seen = !v[0];
		for (size_t j = 0; j < i && !seen; j++) {
			label_value(b->labels[j], col, u, sizeof(u));
			seen = strcmp(u, v) == 0;
		}
		if (seen)
			continue;
		if (shown++ == 6) {
			fputs(", …", out);
			return;
		}
		if (shown > 1)
			fputs(", ", out);
		ep_web_text(out, v);
	}
	if (!shown)
		fputs("<span class=\"dim\">-</span>", out);
}

int ep_web_binaries_page(FILE *out, const struct ep_web_ctx *w, ep_web_arg_fn arg, void *argctx)
{
	struct ep_store_filter f;
	ep_web_filter(arg, argctx, &f);
	f.build_id = NULL;
	char err[512];
	Edgeprof__V1__BinaryList *list = ep_store_list_binaries(w->store, &f, err, sizeof(err));
	if (!list)
		return ep_web_fail(out, w, 503, "store: %s", err);
	uint64_t total = 0;
	for (size_t i = 0; i < list->n_binaries; i++)
		total += list->binaries[i]->samples;
	ep_web_begin(out, w, "Binaries");
	fputs("<h1>Binaries</h1>\n<p class=\"lead\">Every binary the agents sampled, by build-id. "
	      "Open one to see its hottest functions and branches.</p>\n",
	      out);
	filter_form(out, arg, argctx, &f);
	fprintf(out, "<p class=\"summary\" id=\"summary\"><b>%zu</b> binaries, <b>",
		list->n_binaries);
	ep_web_count(out, total);
	fputs("</b> samples</p>\n", out);
	fputs("<table class=\"list\" id=\"binaries\"><thead><tr><th>Binary</th><th>Build-id</th>"
	      "<th class=\"num\">Samples</th><th class=\"num\">Share</th><th>First seen</th>"
	      "<th>Last seen</th><th>Containers</th><th>Pods</th><th>Processes</th>"
	      "<th>Code</th></tr></thead><tbody>\n",
	      out);
	/* hottest first */
	Edgeprof__V1__BinaryInfo **order = malloc((list->n_binaries + 1) * sizeof(*order));
	size_t n = 0;
	for (size_t i = 0; order && i < list->n_binaries; i++) {
		size_t k = n++;
		while (k > 0 && order[k - 1]->samples < list->binaries[i]->samples) {
			order[k] = order[k - 1];
			k--;
		}
		order[k] = list->binaries[i];
	}
	for (size_t i = 0; i < n; i++) {
		const Edgeprof__V1__BinaryInfo *b = order[i];
		const char *path = b->n_paths ? b->paths[0] : "";
		const char *base = strrchr(path, '/');
		fputs("<tr class=\"binary\" data-build-id=\"", out);
		ep_web_text(out, b->build_id);
		fprintf(out, "\" data-samples=\"%llu\"><td>", (unsigned long long)b->samples);
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
		label_values(out, b, COL_CONTAINER);
		fputs("</td><td>", out);
		label_values(out, b, COL_POD);
		fputs("</td><td>", out);
		label_values(out, b, COL_PROCESS);
		fputs("</td><td>", out);
		int has =
		    w->binaries ? ep_binaries_has(w->binaries, b->build_id, err, sizeof(err)) : 0;
		fputs(has > 0 ? "<span class=\"ok\">kept</span>"
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
	free(order);
	ep_store_free_list(list);
	ep_web_end(out);
	return 200;
}
