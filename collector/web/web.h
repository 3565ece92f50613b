/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The collector's web UI (issue 13): HTML pages written here, on the
 * server, from the store's profiles and the binaries' code; no script, no
 * file from anywhere but the collector (the style sheet is compiled in).
 * Every view is a plain URL, so a page can be linked and reloaded:
 *   /                   binaries with counts (filters: from, to, window,
 *                       container_id, pod, namespace, process, cgroup:
 *                       label values as prefixes)
 *   /top                a selection's hottest functions across its binaries
 *                       (/ shows the first when a label filter is set)
 *   /binary?build_id=   hottest functions and branches, export links
 *   /function?build_id=&addr=0xSTART
 *                       the function's control-flow graph (Graphviz, laid
 *                       out here, as SVG) and its annotated disassembly
 *   /diff?build_id=NEW&base=OLD (and/or from, to, base_from, base_to)
 *                       functions and branches hotter or colder, by share
 *   /fleet              nodes and their agents, on-demand sessions, a form
 *                       starting one (POST /fleet/start)
 *   /ui/style.css       the style sheet
 * The server (collector/server) routes these here after checking the
 * token or the sign-in cookie; the sign-in page itself is written here.
 */
#ifndef EP_WEB_H
#define EP_WEB_H

#include <stdbool.h>

#include "collector/api/api.h"
#include "collector/binaries/binaries.h"
#include "collector/sessions/sessions.h"
#include "collector/store/store.h"

/* the sign-in cookie's name: it holds the token (HttpOnly, SameSite=Strict) */
#define EP_WEB_COOKIE "edgeprof_token"

struct ep_web_ctx {
	struct ep_store *store;
	struct ep_binaries *binaries; /* NULL: no code views */
	struct ep_sessions *sessions; /* NULL: no fleet view */
	bool signed_in;		      /* a token guards the collector: offer sign-out */
};

/* A query argument of the request (NULL when absent). */
typedef const char *(*ep_web_arg_fn)(void *ctx, const char *name);

/* The page at url (a GET), always answered: 200, or 400/404/503 with a
 * page saying why. */
void ep_web_page(const struct ep_web_ctx *w, const char *url, ep_web_arg_fn arg, void *argctx,
		 struct ep_api_response *r);
/* A form POSTed to url: a 303 to location[loclen] when it went through,
 * else a page saying why (400, 404, 409, 503). */
void ep_web_form(const struct ep_web_ctx *w, const char *url, const char *body, size_t len,
		 struct ep_api_response *r, char *location, size_t loclen);

/* The sign-in form (token_required false: says no sign-in is needed), with
 * an error line when error is not NULL. */
void ep_web_signin_page(bool token_required, const char *error, struct ep_api_response *r);
/* 303 See Other to location, with a line of HTML for clients that stay. */
void ep_web_redirect(const char *location, struct ep_api_response *r);
/* The value of name in an application/x-www-form-urlencoded body,
 * percent-decoded into out; false when absent or longer than outlen - 1. */
bool ep_web_form_value(const char *body, size_t len, const char *name, char *out, size_t outlen);

#endif
