/* SPDX-License-Identifier: Apache-2.0 */
/* The UI's routing, page frame, sign-in page and the helpers every page
 * uses. */
#include "collector/web/web.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collector/api/top.h"
#include "collector/web/web_internal.h"
#include "common/elf/demangle.h"
#include "common/elf/elf_symbols.h"

/* Length of the valid UTF-8 sequence at s, 0 when none starts there. */
static size_t utf8_len(const unsigned char *s)
{
	if (s[0] < 0x80)
		return 1;
	size_t n = s[0] >= 0xc2 && s[0] <= 0xdf	  ? 2
		   : s[0] >= 0xe0 && s[0] <= 0xef ? 3
		   : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4
						  : 0;
	for (size_t i = 1; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	if ((n == 3 && s[0] == 0xe0 && s[1] < 0xa0) || (n == 3 && s[0] == 0xed && s[1] >= 0xa0) ||
	    (n == 4 && s[0] == 0xf0 && s[1] < 0x90) || (n == 4 && s[0] == 0xf4 && s[1] >= 0x90))
		return 0;
	return n;
}

void ep_web_text(FILE *out, const char *s)
{
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p;) {
		switch (*p) {
		case '<':
			fputs("&lt;", out);
			break;
		case '>':
			fputs("&gt;", out);
			break;
		case '&':
			fputs("&amp;", out);
			break;
		case '"':
			fputs("&quot;", out);
			break;
		case '\'':
			fputs("&#39;", out);
			break;
		default: {
			size_t n = utf8_len(p);
			if (n == 0 || (*p < 0x20 && *p != '\t' && *p != '\n'))
				fputs("\xef\xbf\xbd", out);
			else
				fwrite(p, 1, n, out);
			p += n ? n : 1;
			continue;
		}
		}
		p++;
	}
}

void ep_web_urlenc(FILE *out, const char *s)
{
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || strchr("-_.~/", *p))
			fputc(*p, out);
		else
			fprintf(out, "%%%02X", *p);
	}
}

void ep_web_count(FILE *out, uint64_t n)
{
	char digits[32];
	int len = snprintf(digits, sizeof(digits), "%llu", (unsigned long long)n);
	for (int i = 0; i < len; i++) {
		if (i && (len - i) % 3 == 0)
			fputc(',', out);
		fputc(digits[i], out);
	}
}

void ep_web_time(FILE *out, int64_t s)
{
	time_t t = (time_t)s;
	struct tm tm;
	char buf[64];
	if (s <= 0 || !gmtime_r(&t, &tm) || !strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M UTC", &tm))
		fputs("-", out);
	else
		fputs(buf, out);
}

void ep_web_begin(FILE *out, const struct ep_web_ctx *w, const char *title)
{
	fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
	      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
	      "<title>",
	      out);
	ep_web_text(out, title);
	fputs(" · edgeprof</title><link rel=\"stylesheet\" href=\"/ui/style.css\"></head>\n"
	      "<body><header><a class=\"brand\" href=\"/\">edgeprof</a>"
	      "<nav><a href=\"/\">Binaries</a><a href=\"/fleet\">Fleet</a></nav>",
	      out);
	if (w && w->signed_in)
		fputs("<a class=\"signout\" href=\"/signout\">Sign out</a>", out);
	fputs("</header>\n<main>\n", out);
}

void ep_web_end(FILE *out)
{
	fputs("</main></body></html>\n", out);
}

int ep_web_fail(FILE *out, const struct ep_web_ctx *w, int status, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	ep_web_begin(out, w, status == 404 ? "Not found" : "Error");
	fputs("<h1>", out);
	fputs(status == 404 ? "Not found" : status == 400 ? "Bad request" : "Cannot answer", out);
	fputs("</h1><p class=\"error\">", out);
	ep_web_text(out, msg);
	fputs("</p><p><a href=\"/\">All binaries</a></p>", out);
	ep_web_end(out);
	return status;
}

static const char *arg_or_null(ep_web_arg_fn arg, void *argctx, const char *name)
{
	const char *v = arg(argctx, name);
	return v && *v ? v : NULL;
}

void ep_web_filter(ep_web_arg_fn arg, void *argctx, struct ep_store_filter *f)
{
	*f = (struct ep_store_filter){0};
	f->build_id = arg_or_null(arg, argctx, "build_id");
	const char *v;
	if ((v = arg_or_null(arg, argctx, "from")))
		f->from_s = strtoll(v, NULL, 10);
	if ((v = arg_or_null(arg, argctx, "to")))
		f->to_s = strtoll(v, NULL, 10);
	/* window=SECONDS: the last so many seconds, when from is not given */
	if (!f->from_s && (v = arg_or_null(arg, argctx, "window"))) {
		long long w = strtoll(v, NULL, 10);
		if (w > 0)
			f->from_s = (int64_t)time(NULL) - w;
	}
	f->container_id = arg_or_null(arg, argctx, "container_id");
	f->pod = arg_or_null(arg, argctx, "pod");
	f->namespace_ = arg_or_null(arg, argctx, "namespace");
	f->cgroup = arg_or_null(arg, argctx, "cgroup");
	f->process = arg_or_null(arg, argctx, "process");
	f->session_id = arg_or_null(arg, argctx, "session");
	/* the pages show a container id's first 12 digits: a value typed or
	 * pasted from them finds what they show (issue 36) */
	f->prefix = true;
}

bool ep_web_selected(const struct ep_store_filter *f)
{
	return f->container_id || f->pod || f->namespace_ || f->cgroup || f->process;
}

static void filter_arg(FILE *out, const char *name, const char *v)
{
	if (!v)
		return;
	fprintf(out, "&amp;%s=", name);
	ep_web_urlenc(out, v);
}

void ep_web_filter_args(FILE *out, const struct ep_store_filter *f)
{
	if (f->from_s)
		fprintf(out, "&amp;from=%lld", (long long)f->from_s);
	if (f->to_s)
		fprintf(out, "&amp;to=%lld", (long long)f->to_s);
	filter_arg(out, "container_id", f->container_id);
	filter_arg(out, "pod", f->pod);
	filter_arg(out, "namespace", f->namespace_);
	filter_arg(out, "cgroup", f->cgroup);
	filter_arg(out, "process", f->process);
	filter_arg(out, "session", f->session_id);
	/* /v1/profile (the export buttons) matches whole values unless told */
	if (f->prefix && ep_web_selected(f))
		fputs("&amp;prefix=1", out);
}

/* "?from=..&pod=.." for a link with no other argument: the filter's
 * arguments less the leading "&amp;" */
static void filter_query(FILE *out, const struct ep_store_filter *f)
{
	char *args = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&args, &len);
	if (!m)
		return;
	ep_web_filter_args(m, f);
	fclose(m);
	if (args && len > 5)
		fprintf(out, "?%s", args + 5);
	free(args);
}

void ep_web_home_link(FILE *out, const struct ep_store_filter *f)
{
	fputs("<a href=\"/", out);
	filter_query(out, f);
	fputs("\">Binaries</a>", out);
	if (!ep_web_selected(f))
		return;
	fputs(" · <a href=\"/top", out);
	filter_query(out, f);
	fputs("\">Top functions</a>", out);
}

/* One chip: the label and its value, and a link to path without it. */
static void chip(FILE *out, const char *label, const char *shown, const char *path,
		 const char *keep, const struct ep_store_filter *without)
{
	fprintf(out, "<span class=\"chip\" data-label=\"%s\">%s: <b>", label, label);
	ep_web_text(out, shown);
	fprintf(out, "</b> <a class=\"unchip\" title=\"drop this filter\" href=\"%s", path);
	if (keep && *keep)
		ep_web_text(out, keep);
	else
		filter_query(out, without);
	if (keep && *keep)
		ep_web_filter_args(out, without);
	fputs("\">×</a></span> ", out);
}

void ep_web_chips(FILE *out, const struct ep_store_filter *f, const char *path, ep_web_arg_fn arg,
		  void *argctx)
{
	if (!ep_web_selected(f) && !f->from_s && !f->to_s && !f->session_id)
		return;
	/* what the page needs besides the filter: kept when a chip is dropped */
	char keep[1024] = "";
	size_t n = 0;
	static const char *const own[] = {"build_id", "addr", "base", "base_from", "base_to"};
	for (size_t i = 0; i < sizeof(own) / sizeof(own[0]) && n < sizeof(keep); i++) {
		const char *v = arg_or_null(arg, argctx, own[i]);
		if (v && strlen(v) < 200)
			n += (size_t)snprintf(keep + n, sizeof(keep) - n, "%s%s=%s", n ? "&" : "?",
					      own[i], v);
	}
	fputs("<p class=\"chips\" id=\"chips\">Selection: ", out);
	static const char *const names[] = {"container_id", "pod",     "namespace",
					    "cgroup",	    "process", "session"};
	struct ep_store_filter g = *f;
	const char **fields[] = {&g.container_id, &g.pod,     &g.namespace_,
				 &g.cgroup,	  &g.process, &g.session_id};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const char *v = *fields[i];
		if (!v)
			continue;
		*fields[i] = NULL;
		chip(out, names[i], v, path, keep, &g);
		*fields[i] = v;
	}
	char when[128], from[48] = "", to[48] = "";
	if (f->from_s || f->to_s) {
		g.from_s = g.to_s = 0;
		time_t a = (time_t)f->from_s, b = (time_t)f->to_s;
		struct tm tm;
		if (f->from_s && gmtime_r(&a, &tm))
			strftime(from, sizeof(from), "from %Y-%m-%d %H:%M ", &tm);
		if (f->to_s && gmtime_r(&b, &tm))
			strftime(to, sizeof(to), "to %Y-%m-%d %H:%M ", &tm);
		snprintf(when, sizeof(when), "%s%sUTC", from, to);
		chip(out, "time", when, path, keep, &g);
	}
	fputs("</p>\n", out);
}

long ep_web_function_index(const Edgeprof__V1__BinaryProfile *bp, uint64_t addr)
{
	return ep_top_function_index(bp, addr);
}

const Edgeprof__V1__Function *ep_web_function_at(const Edgeprof__V1__BinaryProfile *bp,
						 uint64_t addr)
{
	long i = ep_web_function_index(bp, addr);
	return i < 0 ? NULL : bp->functions[i];
}

void ep_web_function_name(FILE *out, const char *name, uint32_t local_index)
{
	char buf[4096];
	ep_web_text(out, ep_symbol_name(name, local_index, buf, sizeof(buf)));
}

void ep_web_function_label(FILE *out, const char *name, uint32_t local_index)
{
	char raw[4096], shown[4096];
	ep_symbol_name(name, local_index, raw, sizeof(raw));
	const char *d = ep_demangle(raw, shown, sizeof(shown));
	if (d == raw) {
		ep_web_text(out, raw);
		return;
	}
	fputs("<span class=\"demangled\" title=\"", out);
	ep_web_text(out, raw);
	fputs("\">", out);
	ep_web_text(out, d);
	fputs("</span>", out);
}

const char *ep_web_where(const Edgeprof__V1__BinaryProfile *bp, uint64_t addr, char *buf,
			 size_t len)
{
	const Edgeprof__V1__Function *f = ep_web_function_at(bp, addr);
	if (!f) {
		snprintf(buf, len, "0x%llx", (unsigned long long)addr);
		return buf;
	}
	char raw[4096];
	ep_symbol_name(f->name, f->local_index, raw, sizeof(raw));
	if (ep_demangle(raw, buf, len) == raw)
		snprintf(buf, len, "%s", raw);
	size_t n = strlen(buf);
	if (addr != f->start)
		snprintf(buf + n, len - n, "+0x%llx", (unsigned long long)(addr - f->start));
	return buf;
}

int ep_web_is_branch(const Edgeprof__V1__Edge *e)
{
	return e->kind != EDGEPROF__V1__BRANCH_KIND__BRANCH_FALLTHROUGH && !e->from_external;
}

void ep_web_signin_page(bool token_required, const char *error, struct ep_api_response *r)
{
	r->body = NULL;
	r->len = 0;
	FILE *out = open_memstream(&r->body, &r->len);
	if (!out) {
		r->status = 500;
		r->content_type = "text/plain";
		return;
	}
	ep_web_begin(out, NULL, "Sign in");
	fputs("<h1>Sign in</h1>", out);
	if (!token_required)
		fputs("<p>This collector needs no token: <a href=\"/\">go on</a>.</p>", out);
	else {
		if (error) {
			fputs("<p class=\"error\">", out);
			ep_web_text(out, error);
			fputs("</p>", out);
		}
		fputs("<form class=\"signin\" method=\"post\" action=\"/signin\">"
		      "<label>Token <input type=\"password\" name=\"token\" "
		      "autocomplete=\"current-password\" autofocus></label> "
		      "<button type=\"submit\">Sign in</button></form>"
		      "<p class=\"hint\">The collector's token (its <code>--token-file</code>). "
		      "It is kept in a cookie for this site only and is never put in a URL.</p>",
		      out);
	}
	ep_web_end(out);
	fclose(out);
	r->status = 200;
	r->content_type = "text/html; charset=utf-8";
}

void ep_web_redirect_body(FILE *out, const char *location)
{
	fputs("<!DOCTYPE html><p>See <a href=\"", out);
	ep_web_text(out, location);
	fputs("\">here</a>.</p>\n", out);
}

void ep_web_redirect(const char *location, struct ep_api_response *r)
{
	r->status = 303;
	r->content_type = "text/html; charset=utf-8";
	r->body = NULL;
	r->len = 0;
	FILE *out = open_memstream(&r->body, &r->len);
	if (!out)
		return;
	ep_web_redirect_body(out, location);
	fclose(out);
}

void ep_web_form(const struct ep_web_ctx *w, const char *url, const char *body, size_t len,
		 struct ep_api_response *r, char *location, size_t loclen)
{
	r->body = NULL;
	r->len = 0;
	r->content_type = "text/html; charset=utf-8";
	location[0] = '\0';
	FILE *out = open_memstream(&r->body, &r->len);
	if (!out) {
		r->status = 500;
		r->content_type = "text/plain";
		return;
	}
	if (strcmp(url, "/fleet/start") == 0)
		r->status = ep_web_start_session(out, w, body ? body : "", len, location, loclen);
	else
		r->status = ep_web_fail(out, w, 404, "%s: no such form", url);
	fclose(out);
}

static int hexval(char c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10
				      : -1;
}

bool ep_web_form_value(const char *body, size_t len, const char *name, char *out, size_t outlen)
{
	size_t nl = strlen(name);
	for (size_t i = 0; i < len;) {
		size_t end = i;
		while (end < len && body[end] != '&')
			end++;
		if (end - i > nl && memcmp(body + i, name, nl) == 0 && body[i + nl] == '=') {
			size_t o = 0;
			for (size_t k = i + nl + 1; k < end; k++) {
				char c = body[k];
				if (c == '+')
					c = ' ';
				else if (c == '%' && k + 2 < end && hexval(body[k + 1]) >= 0 &&
					 hexval(body[k + 2]) >= 0) {
					c = (char)(hexval(body[k + 1]) * 16 + hexval(body[k + 2]));
					k += 2;
				}
				if (o + 1 >= outlen)
					return false;
				out[o++] = c;
			}
			out[o] = '\0';
			return true;
		}
		i = end + 1;
	}
	return false;
}

void ep_web_page(const struct ep_web_ctx *w, const char *url, ep_web_arg_fn arg, void *argctx,
		 struct ep_api_response *r)
{
	r->body = NULL;
	r->len = 0;
	if (strcmp(url, "/ui/style.css") == 0) {
		r->status = 200;
		r->content_type = "text/css; charset=utf-8";
		r->body = strdup(ep_web_style_css);
		r->len = r->body ? strlen(r->body) : 0;
		return;
	}
	FILE *out = open_memstream(&r->body, &r->len);
	if (!out) {
		r->status = 500;
		r->content_type = "text/plain";
		return;
	}
	if (strcmp(url, "/top") == 0)
		r->status = ep_web_top_page(out, w, arg, argctx);
	else if (strcmp(url, "/binary") == 0)
		r->status = ep_web_binary_page(out, w, arg, argctx);
	else if (strcmp(url, "/function") == 0)
		r->status = ep_web_function_page(out, w, arg, argctx);
	else if (strcmp(url, "/diff") == 0)
		r->status = ep_web_diff_page(out, w, arg, argctx);
	else if (strcmp(url, "/fleet") == 0)
		r->status = ep_web_fleet_page(out, w, arg, argctx);
	else
		r->status = ep_web_binaries_page(out, w, arg, argctx);
	fclose(out);
	r->content_type = "text/html; charset=utf-8";
}
