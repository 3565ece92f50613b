/* SPDX-License-Identifier: Apache-2.0 */
/* `report --collector`, `export --collector` and `profile`: a profile from
 * the collector's API (GET /v1/profile?format=proto) instead of a file, and
 * requests to the collector with its token and TLS files. */
#ifndef EP_COLLECTOR_QUERY_H
#define EP_COLLECTOR_QUERY_H

#include <stdbool.h>

#include "common/util/collector_list.h"
#include "common/util/http_body.h"
#include "common/util/options.h"
#include "profile.pb-c.h"

struct ep_collector_query {
	/* base: http(s)://HOST:PORT, or replicas' URLs comma-separated: a
	 * request no answer or a 5xx came back to goes to the next */
	const char *url;
	struct ep_collector_arg collector_arg; /* --collector, repeatable: url points into it */
	const char *build_id;
	const char *token_file, *ca_file, *cert_file, *key_file;
	const char *from, *to; /* unix seconds */
	const char *labels[8]; /* KEY=VALUE: container_id, pod, namespace, cgroup, process */
	int nlabels;
	const char *session; /* an on-demand session's counts instead of the continuous ones */
};

/* The options that say which collector and which of its profiles: --collector,
 * --token-file, --cacert, --cert, --key, --from, --to, --session and
 * --label K=V (repeatable), as an option table into q; the last entry ends
 * it. */
#define EP_COLLECTOR_QUERY_OPTION_COUNT 9
void ep_collector_query_options(struct ep_option out[EP_COLLECTOR_QUERY_OPTION_COUNT + 1],
				struct ep_collector_query *q);

/* NULL with the reason logged (HTTP status and the collector's message). */
Edgeprof__V1__Profile *ep_collector_fetch_profile(const struct ep_collector_query *q);

/* What report and export read: the profile from the collector when q->url
 * is set, else the profile file at path. NULL with the reason logged. */
Edgeprof__V1__Profile *ep_cli_read_profile(const struct ep_collector_query *q, const char *path);

/* One request to the collector named by q (its token and TLS files):
 * method "GET" or "POST", path with its query ("/v1/sessions?pid=1").
 * *body gets the answer (at most 1 GiB; free body->data), *status the
 * HTTP status. 0, or
 * -1 with the reason logged (no answer at all). */
int ep_collector_request(const struct ep_collector_query *q, const char *method, const char *path,
			 struct ep_http_body *body, long *status);

/* base ("/v1/sessions?format=proto") and &key=value, escaped, for each
 * pair of args (key, value, ..., NULL) whose value is not NULL. malloc'd;
 * NULL with "out of memory" logged. */
char *ep_collector_path(const char *base, const char *const *args);

/* value escaped for a URL's query (curl's rules), appended as &key=value to
 * *url (realloc'd). 0 or -1 (out of memory). */
int ep_url_append_arg(char **url, const char *key, const char *value);

#endif
