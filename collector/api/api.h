/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Export stage on the collector: answers about what the store holds.
 *   binaries  the binaries with counts (JSON), under a time and label filter
 *   profile   one binary's (or every binary's) summed profile, as json,
 *             fdata, preagg, afdo, profgen (common/export) or proto (edgeprof.v1.Profile,
 *             which `edgeprof report/export --collector` read)
 */
#ifndef EP_API_H
#define EP_API_H

#include <stddef.h>

#include "collector/store/store.h"

struct ep_api_response {
	int status;
	const char *content_type;
	char *body; /* malloc'd */
	size_t len;
	/* malloc'd, NULL when none: the cursor of the next page (a list's
	 * answer that is not JSON carries it in the Edgeprof-Next-Cursor
	 * header) */
	char *next;
};

/* What a list's page may hold (collector --max-page, --max-label-values):
 * every list answer is bounded whatever the store holds (issue 32). */
struct ep_api_limits {
	size_t max_page; /* binaries per page at most; 0: EP_STORE_PAGE_MAX */
	size_t labels;	 /* N, label sets and values per dimension; 0: EP_STORE_LABELS_DEFAULT */
};

/* A request's query argument (NULL when absent). */
typedef const char *(*ep_api_arg_fn)(void *ctx, const char *name);

/* The page a list request asks for: limit=N (1 .. max_page; default
 * EP_STORE_PAGE_DEFAULT) and cursor=C (the previous answer's "next"). 0, or
 * -1 with r set to a 400 naming the argument and the bound. */
int ep_api_page(const struct ep_api_limits *lim, ep_api_arg_fn arg, void *argctx,
		struct ep_store_page *page, struct ep_api_response *r);

/* GET /v1/binaries: one page of the binaries under the filter, as JSON
 * {"binaries": [...], "next": CURSOR or null}; each binary's labels
 * summarised past N (label_sets, labels, label_values). */
void ep_api_binaries(struct ep_store *store, const struct ep_store_filter *f,
		     const struct ep_store_page *page, struct ep_api_response *r);
/* f->build_id NULL: one page (page) of the binaries under the filter, in
 * one profile; r->next says where the next page starts. */
void ep_api_profile(struct ep_store *store, const struct ep_store_filter *f,
		    const struct ep_store_page *page, const char *format,
		    struct ep_api_response *r);

/* An on-demand session (collector/sessions) as JSON, or as
 * edgeprof.v1.Session with format "proto" (what `edgeprof profile` reads). */
void ep_api_session(const Edgeprof__V1__Session *s, const char *format, int status,
		    struct ep_api_response *r);

#endif
