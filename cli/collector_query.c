/* SPDX-License-Identifier: Apache-2.0 */
#include "cli/collector_query.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/profile/model.h"
#include "common/profile/profile_file.h"
#include "common/util/collector_list.h"
#include "common/util/http_client.h"
#include "common/util/log.h"
#include "common/util/secret.h"

static const char *const label_keys[] = {"container_id", "pod", "namespace", "cgroup", "process"};

static int add_label(void *value, const char *arg, char *err, size_t errlen)
{
	struct ep_collector_query *q = value;
	const char *eq = strchr(arg, '=');
	bool known = false;
	for (size_t i = 0; eq && i < sizeof(label_keys) / sizeof(label_keys[0]); i++)
		known |= strlen(label_keys[i]) == (size_t)(eq - arg) &&
			 strncmp(arg, label_keys[i], (size_t)(eq - arg)) == 0;
	if (!known || q->nlabels == 8) {
		snprintf(err, errlen,
			 "'%s': expected KEY=VALUE with KEY one of container_id, pod, namespace, "
			 "cgroup, process",
			 arg);
		return -1;
	}
	q->labels[q->nlabels++] = arg;
	return 0;
}

void ep_collector_query_options(struct ep_option out[EP_COLLECTOR_QUERY_OPTION_COUNT + 1],
				struct ep_collector_query *q)
{
	q->collector_arg.out = &q->url;
	const struct ep_option table[EP_COLLECTOR_QUERY_OPTION_COUNT + 1] = {
	    EP_OPTION("collector", 0, EP_OPT_CALL, &q->collector_arg, .call = ep_collector_arg_add),
	    EP_OPTION("token-file", 0, EP_OPT_FILE, &q->token_file),
	    EP_OPTION("cacert", 0, EP_OPT_FILE, &q->ca_file),
	    EP_OPTION("cert", 0, EP_OPT_FILE, &q->cert_file),
	    EP_OPTION("key", 0, EP_OPT_FILE, &q->key_file),
	    EP_OPTION("from", 0, EP_OPT_STRING, &q->from),
	    EP_OPTION("to", 0, EP_OPT_STRING, &q->to),
	    EP_OPTION("session", 0, EP_OPT_STRING, &q->session),
	    EP_OPTION("label", 0, EP_OPT_CALL, q, .call = add_label),
	    EP_OPTION_END,
	};
	memcpy(out, table, sizeof(table));
}

int ep_url_append_arg(char **url, const char *key, const char *value)
{
	char *esc = curl_easy_escape(NULL, value, 0);
	char *next = NULL;
	int rc = esc && asprintf(&next, "%s&%s=%s", *url, key, esc) >= 0 ? 0 : -1;
	curl_free(esc);
	if (rc == 0) {
		free(*url);
		*url = next;
	}
	return rc;
}

#define CURSOR_LEN 512

/* ctx: where the answer's next page starts (its Edgeprof-Next-Cursor header) */
static size_t on_header(char *line, size_t size, size_t n, void *ctx)
{
	static const char name[] = "edgeprof-next-cursor:";
	const char *v = line + sizeof(name) - 1, *end = line + size * n;
	if (end <= v || strncasecmp(line, name, sizeof(name) - 1) != 0)
		return size * n;
	while (v < end && (*v == ' ' || *v == '\t'))
		v++;
	while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
		end--;
	snprintf(ctx, CURSOR_LEN, "%.*s", (int)(end - v), v);
	return size * n;
}

/* One request to the collector at base: 0 with *status (and the answer in
 * body), or -1 with why (no answer at all; *unsent: not even connected).
 * next (may be NULL) gets the next page's cursor, "" when none. */
static int request_one(const struct ep_collector_query *q, const char *token, const char *base,
		       const char *method, const char *path, struct ep_http_body *body,
		       long *status, char *next, bool *unsent, char *why, size_t whylen)
{
	/* a page of profiles is bounded by the collector (--max-page), and the
	 * collector by its own 1 GiB: a longer answer is not the collector's */
	const struct ep_http_config c = {.token = token,
					 .ca_file = q->ca_file,
					 .cert_file = q->cert_file,
					 .key_file = q->key_file,
					 .connect_timeout_ms = 5000,
					 .timeout_ms = 300000,
					 .max_answer = (size_t)1 << 30};
	*unsent = false;
	*status = 0;
	memset(body, 0, sizeof(*body));
	CURL *curl = ep_http_open(&c);
	char *url = NULL;
	if (!curl || asprintf(&url, "%s%s", base, path) < 0) {
		snprintf(why, whylen, "out of memory");
		curl_easy_cleanup(curl);
		return -1;
	}
	if (strcmp(method, "POST") == 0) {
		curl_easy_setopt(curl, CURLOPT_POSTFIELDS, "");
		curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, 0L);
	}
	if (next) {
		next[0] = '\0';
		curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
		curl_easy_setopt(curl, CURLOPT_HEADERDATA, next);
	}
	CURLcode cc = ep_http_perform(curl, &c, url, NULL, body, status, why, whylen);
	*unsent = cc == CURLE_COULDNT_CONNECT || cc == CURLE_COULDNT_RESOLVE_HOST;
	free(url);
	curl_easy_cleanup(curl);
	if (cc != CURLE_OK) {
		free(body->data);
		body->data = NULL;
		return -1;
	}
	return 0;
}

/* ep_collector_request, and next (NULL: not asked) the next page's cursor */
static int request(const struct ep_collector_query *q, const char *method, const char *path,
		   struct ep_http_body *body, long *status, char *next)
{
	char token[512], err[512];
	*status = 0;
	memset(body, 0, sizeof(*body));
	if (q->token_file &&
	    ep_read_token_file(q->token_file, token, sizeof(token), err, sizeof(err)) != 0) {
		ep_error("%s", err);
		return -1;
	}
	struct ep_collector_list *l = ep_collector_list_parse(q->url, err, sizeof(err));
	if (!l) {
		ep_error("%s", err);
		return -1;
	}
	/* replicas answer alike (one store): a GET that gets no answer, or a
	 * 5xx, goes to the next; a POST (a session asked for) only when it
	 * surely created nothing (no connection, or 503: not stored), so one
	 * request never starts two sessions */
	bool post = strcmp(method, "POST") == 0;
	int rc = -1;
	size_t n = ep_collector_list_count(l);
	for (size_t i = 0; i < n; i++) {
		const char *base = ep_collector_list_url(l, i);
		free(body->data);
		body->data = NULL;
		bool unsent;
		rc = request_one(q, q->token_file ? token : NULL, base, method, path, body, status,
				 next, &unsent, err, sizeof(err));
		bool worth_next;
		if (rc != 0)
			worth_next = !post || unsent;
		else
			worth_next = post ? *status == 503 : *status >= 500;
		bool next = i + 1 < n && worth_next;
		if (rc != 0 && next)
			ep_warn("collector %s: %s; asking %s", base, err,
				ep_collector_list_url(l, i + 1));
		else if (rc != 0)
			ep_error("collector %s: %s", base, err);
		else if (next)
			ep_warn("collector %s: HTTP %ld; asking %s", base, *status,
				ep_collector_list_url(l, i + 1));
		if (!next)
			break;
	}
	explicit_bzero(token, sizeof(token));
	ep_collector_list_free(l);
	return rc;
}

int ep_collector_request(const struct ep_collector_query *q, const char *method, const char *path,
			 struct ep_http_body *body, long *status)
{
	return request(q, method, path, body, status, NULL);
}

char *ep_collector_path(const char *base, const char *const *args)
{
	char *path = strdup(base);
	int rc = path ? 0 : -1;
	for (size_t i = 0; rc == 0 && args[i]; i += 2)
		if (args[i + 1])
			rc = ep_url_append_arg(&path, args[i], args[i + 1]);
	if (rc != 0) {
		ep_error("out of memory");
		free(path);
		return NULL;
	}
	return path;
}

Edgeprof__V1__Profile *ep_collector_fetch_profile(const struct ep_collector_query *q)
{
	/* the labels' keys, cut from their KEY=VALUE */
	char keys[sizeof(q->labels) / sizeof(q->labels[0])][32];
	const char *args[2 * (5 + sizeof(keys) / sizeof(keys[0])) + 1] = {
	    "build_id", q->build_id, "from", q->from, "to", q->to, "session", q->session};
	size_t n = 8;
	for (int i = 0; i < q->nlabels; i++) {
		const char *eq = strchr(q->labels[i], '=');
		snprintf(keys[i], sizeof(keys[i]), "%.*s", (int)(eq - q->labels[i]), q->labels[i]);
		args[n++] = keys[i];
		args[n++] = eq + 1;
	}
	/* every binary comes a page at a time (the collector bounds each
	 * answer); the pages are put together here */
	char cursor[CURSOR_LEN] = "";
	args[n] = "cursor";
	args[n + 2] = NULL;
	Edgeprof__V1__Profile *all = NULL;
	for (int page = 0;; page++) {
		args[n + 1] = page ? cursor : NULL;
		char *path = ep_collector_path("/v1/profile?format=proto", args);
		if (!path)
			break;
		struct ep_http_body body;
		long status;
		Edgeprof__V1__Profile *p = NULL;
		int rc = request(q, "GET", path, &body, &status, q->build_id ? NULL : cursor);
		free(path);
		if (rc != 0)
			break;
		if (status != 200)
			ep_error("collector %s: HTTP %ld: %s", q->url, status,
				 body.data ? strtok(body.data, "\n") : "");
		else if (!(p = edgeprof__v1__profile__unpack(NULL, body.len, (uint8_t *)body.data)))
			ep_error("collector %s: the answer is not a profile (%zu bytes)", q->url,
				 body.len);
		free(body.data);
		if (!p)
			break;
		/* the page's binaries move over to the first page's profile */
		for (size_t i = 0; all && rc == 0 && i < p->n_binaries; i++)
			if ((rc = EP_PB_APPEND(all->binaries, all->n_binaries, p->binaries[i])) ==
			    0)
				p->binaries[i] = NULL;
		if (all && all->stats && p->stats)
			all->stats->samples += p->stats->samples;
		if (all)
			ep_profile_free(p);
		else
			all = p;
		if (rc != 0) {
			ep_error("out of memory");
			break;
		}
		if (q->build_id || !cursor[0])
			return all;
	}
	ep_profile_free(all);
	return NULL;
}

Edgeprof__V1__Profile *ep_cli_read_profile(const struct ep_collector_query *q, const char *path)
{
	if (q->url)
		return ep_collector_fetch_profile(q);
	char err[512];
	Edgeprof__V1__Profile *profile = NULL;
	if (ep_profile_read(path, &profile, err, sizeof(err)) != 0)
		ep_error("%s", err);
	return profile;
}
