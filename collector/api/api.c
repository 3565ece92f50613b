/* SPDX-License-Identifier: Apache-2.0 */
#include "collector/api/api.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/sessions/sessions.h"
#include "common/export/export.h"
#include "common/profile/profile_file.h"
#include "common/util/json.h"
#include "common/util/sat.h"

static void set_error(struct ep_api_response *r, int status, const char *fmt, ...)
{
	r->status = status;
	r->content_type = "text/plain";
	va_list ap;
	va_start(ap, fmt);
	if (vasprintf(&r->body, fmt, ap) < 0)
		r->body = NULL;
	va_end(ap);
	r->len = r->body ? strlen(r->body) : 0;
}

int ep_api_page(const struct ep_api_limits *lim, ep_api_arg_fn arg, void *argctx,
		struct ep_store_page *page, struct ep_api_response *r)
{
	size_t max = lim && lim->max_page ? lim->max_page : EP_STORE_PAGE_MAX;
	*page = (struct ep_store_page){
	    .limit = EP_STORE_PAGE_DEFAULT < max ? EP_STORE_PAGE_DEFAULT : max,
	    .labels = lim && lim->labels ? lim->labels : EP_STORE_LABELS_DEFAULT,
	};
	const char *v = arg(argctx, "limit");
	if (v && *v) {
		char *end;
		unsigned long long n = strtoull(v, &end, 10);
		if (*end || *v < '0' || *v > '9' || n == 0 || n > max) {
			set_error(r, 400,
				  "limit '%.40s': expected 1 to %zu binaries per page (this "
				  "collector's --max-page); follow \"next\" for the rest\n",
				  v, max);
			return -1;
		}
		page->limit = (size_t)n;
	}
	/* present, even empty: "" is the build-id of binaries without one */
	page->after = arg(argctx, "cursor");
	return 0;
}

static void json_labels(FILE *out, const Edgeprof__V1__BinaryInfo *b)
{
	fprintf(out, ", \"label_sets\": %llu, \"labels_truncated\": %s, \"labels\": [",
		(unsigned long long)b->label_sets, b->labels_truncated ? "true" : "false");
	for (size_t j = 0; j < b->n_labels; j++) {
		const Edgeprof__V1__Labels *l = b->labels[j];
		fputs(j ? ", {" : "{", out);
		fputs("\"container_id\": ", out);
		ep_json_string(out, l->container_id);
		fputs(", \"pod\": ", out);
		ep_json_string(out, l->pod);
		fputs(", \"namespace\": ", out);
		ep_json_string(out, l->namespace_);
		fputs(", \"cgroup\": ", out);
		ep_json_string(out, l->cgroup);
		fputs(", \"process\": ", out);
		ep_json_string(out, l->process);
		/* only a session's label sets have one (filter.session_id selects them) */
		if (l->session_id && *l->session_id) {
			fputs(", \"session_id\": ", out);
			ep_json_string(out, l->session_id);
		}
		if (j < b->n_label_samples)
			fprintf(out, ", \"samples\": %llu",
				(unsigned long long)b->label_samples[j]);
		fputc('}', out);
	}
	fputs("], \"label_values\": {", out);
	for (size_t k = 0; k < b->n_dimensions; k++) {
		const Edgeprof__V1__LabelDimension *d = b->dimensions[k];
		fputs(k ? ", " : "", out);
		ep_json_string(out, d->name);
		fprintf(out,
			": {\"distinct\": %llu, \"summarized\": %s, \"exact\": %s, \"values\": [",
			(unsigned long long)d->distinct, d->summarized ? "true" : "false",
			d->exact ? "true" : "false");
		for (size_t i = 0; i < d->n_values; i++) {
			fputs(i ? ", {\"value\": " : "{\"value\": ", out);
			ep_json_string(out, d->values[i]->value);
			fprintf(out, ", \"samples\": %llu}",
				(unsigned long long)d->values[i]->samples);
		}
		fputs("]}", out);
	}
	fputc('}', out);
}

void ep_api_binaries(struct ep_store *store, const struct ep_store_filter *f,
		     const struct ep_store_page *page, struct ep_api_response *r)
{
	char err[512];
	Edgeprof__V1__BinaryList *list = ep_store_list_binaries(store, f, page, err, sizeof(err));
	if (!list) {
		set_error(r, 503, "store: %s\n", err);
		return;
	}
	FILE *out = open_memstream(&r->body, &r->len);
	if (!out) {
		ep_store_free_list(list);
		set_error(r, 500, "out of memory\n");
		return;
	}
	fputs("{\"binaries\": [", out);
	for (size_t i = 0; i < list->n_binaries; i++) {
		const Edgeprof__V1__BinaryInfo *b = list->binaries[i];
		fputs(i ? ",\n  {" : "\n  {", out);
		fputs("\"build_id\": ", out);
		ep_json_string(out, b->build_id);
		fputs(", \"arch\": ", out);
		ep_json_string(out, b->arch);
		fprintf(out, ", \"samples\": %llu, \"first_seen\": %lld, \"last_seen\": %lld",
			(unsigned long long)b->samples, (long long)b->first_seen_s,
			(long long)b->last_seen_s);
		fputs(", \"paths\": [", out);
		for (size_t j = 0; j < b->n_paths; j++) {
			if (j)
				fputs(", ", out);
			ep_json_string(out, b->paths[j]);
		}
		fputc(']', out);
		json_labels(out, b);
		fputc('}', out);
	}
	fputs(list->n_binaries ? "\n], \"next\": " : "], \"next\": ", out);
	/* the cursor of the next page: the last build-id of this one */
	if (list->more && list->n_binaries)
		ep_json_string(out, list->binaries[list->n_binaries - 1]->build_id);
	else
		fputs("null", out);
	fputs("}\n", out);
	fclose(out);
	ep_store_free_list(list);
	r->status = 200;
	r->content_type = "application/json";
}

/* One page of the binaries under the filter in one profile: the report's
 * view; *next the cursor of the next page (NULL when none). */
static Edgeprof__V1__Profile *profile_all(struct ep_store *store, const struct ep_store_filter *f,
					  const struct ep_store_page *page, char **next, char *err,
					  size_t errlen)
{
	*next = NULL;
	struct ep_store_page ids = *page;
	ids.labels = 0;
	Edgeprof__V1__BinaryList *list = ep_store_list_binaries(store, f, &ids, err, errlen);
	if (!list)
		return NULL;
	Edgeprof__V1__Profile *all = NULL;
	for (size_t i = 0; i < list->n_binaries; i++) {
		struct ep_store_filter one = *f;
		one.build_id = list->binaries[i]->build_id;
		Edgeprof__V1__Profile *p = ep_store_profile(store, &one, err, errlen);
		if (!p) {
			ep_profile_free(all);
			all = NULL;
			break;
		}
		if (!all) {
			all = p;
			continue;
		}
		/* move p's binaries over to all */
		void *grown = realloc(all->binaries,
				      (all->n_binaries + p->n_binaries) * sizeof(*all->binaries));
		if (!grown) {
			ep_profile_free(p);
			ep_profile_free(all);
			all = NULL;
			snprintf(err, errlen, "out of memory");
			break;
		}
		all->binaries = grown;
		for (size_t j = 0; j < p->n_binaries; j++)
			all->binaries[all->n_binaries++] = p->binaries[j];
		if (all->stats && p->stats)
			ep_add_sat(&all->stats->samples, p->stats->samples);
		p->n_binaries = 0;
		ep_profile_free(p);
	}
	if (!all && list->n_binaries == 0) {
		struct ep_store_filter none = *f;
		none.build_id = "";
		all = ep_store_profile(store, &none, err, errlen);
	}
	if (all && list->more && list->n_binaries &&
	    !(*next = strdup(list->binaries[list->n_binaries - 1]->build_id))) {
		ep_profile_free(all);
		all = NULL;
		snprintf(err, errlen, "out of memory");
	}
	ep_store_free_list(list);
	return all;
}

void ep_api_profile(struct ep_store *store, const struct ep_store_filter *f,
		    const struct ep_store_page *page, const char *format, struct ep_api_response *r)
{
	int fmt = -1;
	bool proto = format && strcmp(format, "proto") == 0;
	if (!proto) {
		fmt = ep_export_parse_format(format ? format : "json");
		if (fmt < 0) {
			set_error(r, 400,
				  "format '%s': expected json, fdata, preagg, afdo, profgen, pprof "
				  "or proto\n",
				  format);
			return;
		}
	}
	char err[512];
	Edgeprof__V1__Profile *p = f->build_id
				       ? ep_store_profile(store, f, err, sizeof(err))
				       : profile_all(store, f, page, &r->next, err, sizeof(err));
	if (!p) {
		set_error(r, 503, "store: %s\n", err);
		return;
	}
	if (f->build_id && p->n_binaries == 0) {
		ep_profile_free(p);
		set_error(r, 404, "build-id %s: no counts under this filter\n", f->build_id);
		return;
	}
	if (proto) {
		r->len = edgeprof__v1__profile__get_packed_size(p);
		r->body = malloc(r->len ? r->len : 1);
		if (!r->body) {
			ep_profile_free(p);
			set_error(r, 500, "out of memory\n");
			return;
		}
		edgeprof__v1__profile__pack(p, (uint8_t *)r->body);
		ep_profile_free(p);
		r->status = 200;
		r->content_type = "application/x-protobuf";
		return;
	}
	if (ep_export_check_branches(p, (enum ep_export_format)fmt, f->build_id, err,
				     sizeof(err)) != 0) {
		ep_profile_free(p);
		set_error(r, 422, "%s\n", err);
		return;
	}
	FILE *out = open_memstream(&r->body, &r->len);
	if (!out) {
		ep_profile_free(p);
		set_error(r, 500, "out of memory\n");
		return;
	}
	int rc = ep_export(p, (enum ep_export_format)fmt, f->build_id, out, err, sizeof(err));
	fclose(out);
	ep_profile_free(p);
	if (rc != 0) {
		free(r->body);
		set_error(r, 422, "%s\n", err);
		return;
	}
	r->status = 200;
	r->content_type = "text/plain";
	if (fmt == EP_EXPORT_JSON)
		r->content_type = "application/json";
	else if (fmt == EP_EXPORT_PPROF) /* gzip'd protobuf, as pprof reads it */
		r->content_type = "application/octet-stream";
}

void ep_api_session(const Edgeprof__V1__Session *s, const char *format, int status,
		    struct ep_api_response *r)
{
	r->status = status;
	if (format && strcmp(format, "proto") == 0) {
		r->content_type = "application/x-protobuf";
		r->len = edgeprof__v1__session__get_packed_size(s);
		r->body = malloc(r->len ? r->len : 1);
		if (r->body) {
			edgeprof__v1__session__pack(s, (uint8_t *)r->body);
			return;
		}
	} else {
		r->content_type = "application/json";
		FILE *out = open_memstream(&r->body, &r->len);
		if (out) {
			fputs("{\"id\": ", out);
			ep_json_string(out, s->id);
			fputs(", \"state\": ", out);
			ep_json_string(out, ep_session_state_name(s->state));
			fputs(", \"message\": ", out);
			ep_json_string(out, s->message);
			fputs(", \"node\": ", out);
			ep_json_string(out, s->node);
			fputs(", \"container_id\": ", out);
			ep_json_string(out, s->container_id);
			fputs(", \"cgroup\": ", out);
			ep_json_string(out, s->cgroup);
			fputs(", \"pod\": ", out);
			ep_json_string(out, s->pod);
			fprintf(out,
				", \"pid\": %u, \"cycles\": %s, \"duration_ms\": %llu, \"period\": "
				"%llu",
				s->pid, s->cycles ? "true" : "false",
				(unsigned long long)s->duration_ms, (unsigned long long)s->period);
			fputs(", \"mode\": ", out);
			ep_json_string(out, s->mode);
			fputs(", \"agent_id\": ", out);
			ep_json_string(out, s->agent_id);
			fprintf(out,
				", \"created\": %lld, \"started\": %lld, \"ended\": %lld, "
				"\"ends\": %lld, \"samples\": %llu, \"refused_by\": [",
				(long long)s->created_s, (long long)s->started_s,
				(long long)s->ended_s, (long long)(s->deadline_ns / 1000000000ULL),
				(unsigned long long)s->samples);
			for (size_t i = 0; i < s->n_refused_by; i++) {
				if (i)
					fputs(", ", out);
				ep_json_string(out, s->refused_by[i]);
			}
			fputs("]}\n", out);
			if (fclose(out) == 0)
				return;
		}
	}
	free(r->body);
	r->body = NULL;
	r->len = 0;
	r->status = 500;
	r->content_type = "text/plain";
}
