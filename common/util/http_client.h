/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one HTTP client set-up for the servers edgeprof is pointed at: the
 * collector (the agent's batches and binaries, the CLI's queries) and the
 * Kubernetes API server (the agent's pod names). Whoever asks, a request
 * gets the same treatment: http or https only, the CA and client
 * certificate given, a bearer token, timeouts, and an answer held in memory
 * up to a bound, so a server that answers without end costs the asker that
 * bound and no more.
 */
#ifndef EP_HTTP_CLIENT_H
#define EP_HTTP_CLIENT_H

#include <curl/curl.h>
#include <stddef.h>

#include "common/util/http_body.h"

struct ep_http_config {
	const char *token;		  /* bearer token; NULL: none */
	const char *ca_file;		  /* trust for https; NULL: the system's */
	const char *cert_file, *key_file; /* client certificate (mTLS); NULL: none */
	long connect_timeout_ms;
	long timeout_ms; /* the whole request, connecting included */
	/* a transfer under 1 byte/s for this long is given up on (a cut
	 * link); 0: only timeout_ms ends it */
	long stall_s;
	/* answer bytes held; a longer answer fails the request, "answer over
	 * N bytes"; 0: no bound (only for a server the asker runs itself) */
	size_t max_answer;
};

/* A handle for requests to c's server (curl copies the files' names), to
 * be kept for several requests so they share a connection;
 * curl_easy_cleanup() it. The method and the request's body are the
 * caller's to set on it (GET when none). NULL: out of memory. */
CURL *ep_http_open(const struct ep_http_config *c);

/* One request on h to url, with c's bearer token and then headers
 * ("Name: value", NULL-terminated; NULL: none). The answer goes to *answer
 * (reset first; free answer->data), the HTTP status to *status (0 when
 * none came). CURLE_OK, or curl's code with why saying what went wrong:
 * curl's reason, or "answer over N bytes" for an answer past
 * c->max_answer. */
CURLcode ep_http_perform(CURL *h, const struct ep_http_config *c, const char *url,
			 const char *const *headers, struct ep_http_body *answer, long *status,
			 char *why, size_t whylen);

#endif
