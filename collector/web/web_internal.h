/* SPDX-License-Identifier: Apache-2.0 */
/* What the UI's pages share: writing HTML, the page frame, a profile's
 * functions. Only collector/web includes this. */
#ifndef EP_WEB_INTERNAL_H
#define EP_WEB_INTERNAL_H

#include <stdint.h>
#include <stdio.h>

#include "collector/web/web.h"

/* s (NULL: "") as HTML text or attribute value; bytes that are not UTF-8
 * become U+FFFD */
void ep_web_text(FILE *out, const char *s);
/* s percent-encoded for a URL query value */
void ep_web_urlenc(FILE *out, const char *s);
/* 1234567 -> "1,234,567" */
void ep_web_count(FILE *out, uint64_t n);
/* unix seconds as "2026-11-23 16:20 UTC" */
void ep_web_time(FILE *out, int64_t s);

/* The page's head and navigation; title is text. */
void ep_web_begin(FILE *out, const struct ep_web_ctx *w, const char *title);
void ep_web_end(FILE *out);

/* The filter of a request: time window and labels (build_id from the
 * argument too). The strings point into the request. */
void ep_web_filter(ep_web_arg_fn arg, void *argctx, struct ep_store_filter *f);
/* The filter's arguments as "&from=..&pod=.." for links (build_id left out). */
void ep_web_filter_args(FILE *out, const struct ep_store_filter *f);
/* Whether the filter names labels (a selection of containers, pods...) */
bool ep_web_selected(const struct ep_store_filter *f);
/* The crumbs' links home with the filter kept: the binaries, and the top
 * functions where a selection is active */
void ep_web_home_link(FILE *out, const struct ep_store_filter *f);
/* The active filters as chips, each a link to path without it (the page's
 * build_id, addr, base... kept); nothing when none is active */
void ep_web_chips(FILE *out, const struct ep_store_filter *f, const char *path, ep_web_arg_fn arg,
		  void *argctx);

/* The index in bp's (address-ordered) functions of the one holding addr,
 * -1 when none does; ep_web_function_at: the function itself, or NULL. */
long ep_web_function_index(const Edgeprof__V1__BinaryProfile *bp, uint64_t addr);
const Edgeprof__V1__Function *ep_web_function_at(const Edgeprof__V1__BinaryProfile *bp,
						 uint64_t addr);
/* A function's name as the agent's profiles, the fdata export and BOLT
 * write it (ep_symbol_name: NAME/N for a local), as HTML text. */
void ep_web_function_name(FILE *out, const char *name, uint32_t local_index);
/* The same for people: a C++ or Rust name demangled (the raw one its
 * title), as HTML. */
void ep_web_function_label(FILE *out, const char *name, uint32_t local_index);
/* "name+0x12" (or "0x401234" outside every function) into buf, the name
 * demangled */
const char *ep_web_where(const Edgeprof__V1__BinaryProfile *bp, uint64_t addr, char *buf,
			 size_t len);
/* An edge that is a branch's execution (not a fall-through the export
 * derived from the ranges, not an arrival from another binary) */
int ep_web_is_branch(const Edgeprof__V1__Edge *e);

/* An error page saying why (printf format); returns status. */
int ep_web_fail(FILE *out, const struct ep_web_ctx *w, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Pages: each writes a whole page to out and returns its HTTP status. */
int ep_web_binaries_page(FILE *out, const struct ep_web_ctx *w, ep_web_arg_fn arg, void *argctx);
/* The selection's n hottest functions across its binaries (a table, with
 * "show more"); 0, or -1 with err */
int ep_web_top_table(FILE *out, const struct ep_web_ctx *w, const struct ep_store_filter *f,
		     size_t n, char *err, size_t errlen);
int ep_web_top_page(FILE *out, const struct ep_web_ctx *w, ep_web_arg_fn arg, void *argctx);
int ep_web_binary_page(FILE *out, const struct ep_web_ctx *w, ep_web_arg_fn arg, void *argctx);
int ep_web_function_page(FILE *out, const struct ep_web_ctx *w, ep_web_arg_fn arg, void *argctx);
int ep_web_diff_page(FILE *out, const struct ep_web_ctx *w, ep_web_arg_fn arg, void *argctx);
int ep_web_fleet_page(FILE *out, const struct ep_web_ctx *w, ep_web_arg_fn arg, void *argctx);
/* POST /fleet/start: 303 with location set, or an error page's status */
int ep_web_start_session(FILE *out, const struct ep_web_ctx *w, const char *body, size_t len,
			 char *location, size_t loclen);
/* the body of a 303 to location */
void ep_web_redirect_body(FILE *out, const char *location);

extern const char ep_web_style_css[];

#endif
