/* SPDX-License-Identifier: Apache-2.0 */
/* `report --collector` and `export --collector`: a profile from the
 * collector's API (GET /v1/profile?format=proto) instead of a file. */
#ifndef EP_COLLECTOR_QUERY_H
#define EP_COLLECTOR_QUERY_H

#include <stdbool.h>

#include "common/util/http_body.h"
#include "profile.pb-c.h"

struct ep_collector_query {
	const char *url; /* base: http(s)://HOST:PORT */
	const char *build_id;
	const char *token_file, *ca_file, *cert_file, *key_file;
	const char *from, *to; /* unix seconds */
	const char *labels[8]; /* KEY=VALUE: container_id, pod, namespace, cgroup, process */
	int nlabels;
	const char *session; /* an on-demand session's counts instead of the continuous ones */
};

/* The options shared by report and export. Returns 1 when ch was one of
 * them, -1 on a bad value (logged), 0 otherwise. */
int ep_collector_query_option(struct ep_collector_query *q, int ch, const char *arg);

enum {
	EP_QUERY_OPT_COLLECTOR = 1200,
	EP_QUERY_OPT_TOKEN,
	EP_QUERY_OPT_CACERT,
	EP_QUERY_OPT_CERT,
	EP_QUERY_OPT_KEY,
	EP_QUERY_OPT_FROM,
	EP_QUERY_OPT_TO,
	EP_QUERY_OPT_LABEL,
	EP_QUERY_OPT_SESSION,
};
#define EP_COLLECTOR_QUERY_OPTIONS                                                                 \
	{"collector", required_argument, NULL, EP_QUERY_OPT_COLLECTOR},                            \
	    {"token-file", required_argument, NULL, EP_QUERY_OPT_TOKEN},                           \
	    {"cacert", required_argument, NULL, EP_QUERY_OPT_CACERT},                              \
	    {"cert", required_argument, NULL, EP_QUERY_OPT_CERT},                                  \
	    {"key", required_argument, NULL, EP_QUERY_OPT_KEY},                                    \
	    {"from", required_argument, NULL, EP_QUERY_OPT_FROM},                                  \
	    {"to", required_argument, NULL, EP_QUERY_OPT_TO},                                      \
	    {"session", required_argument, NULL, EP_QUERY_OPT_SESSION},                            \
	{                                                                                          \
		"label", required_argument, NULL, EP_QUERY_OPT_LABEL                               \
	}

/* NULL with the reason logged (HTTP status and the collector's message). */
Edgeprof__V1__Profile *ep_collector_fetch_profile(const struct ep_collector_query *q);

/* One request to the collector named by q (its token and TLS files):
 * method "GET" or "POST", path with its query ("/v1/sessions?pid=1").
 * *body gets the answer (free body->data), *status the HTTP status. 0, or
 * -1 with the reason logged (no answer at all). */
int ep_collector_request(const struct ep_collector_query *q, const char *method, const char *path,
			 struct ep_http_body *body, long *status);

/* value escaped for a URL's query (curl's rules), appended as &key=value to
 * *url (realloc'd). 0 or -1 (out of memory). */
int ep_url_append_arg(char **url, const char *key, const char *value);

#endif
