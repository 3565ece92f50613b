/* SPDX-License-Identifier: Apache-2.0 */
#include "common/util/http_client.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void init_curl(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

CURL *ep_http_open(const struct ep_http_config *c)
{
	/* curl_global_init is not thread-safe, and the agent opens handles
	 * from several threads */
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, init_curl);
	CURL *h = curl_easy_init();
	if (!h)
		return NULL;
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	/* no file://, dict:// or the like, whatever a URL option was given */
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, c->connect_timeout_ms);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->timeout_ms);
	if (c->stall_s) {
		curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, c->stall_s);
	}
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, ep_http_body_write);
	if (c->ca_file)
		curl_easy_setopt(h, CURLOPT_CAINFO, c->ca_file);
	if (c->cert_file)
		curl_easy_setopt(h, CURLOPT_SSLCERT, c->cert_file);
	if (c->key_file)
		curl_easy_setopt(h, CURLOPT_SSLKEY, c->key_file);
	return h;
}

/* "64 MiB", "64 KiB" or "1000 bytes" */
static void say_size(size_t n, char *out, size_t outlen)
{
	if (n >= (1u << 20) && n % (1u << 20) == 0)
		snprintf(out, outlen, "%zu MiB", n >> 20);
	else if (n >= 1024 && n % 1024 == 0)
		snprintf(out, outlen, "%zu KiB", n >> 10);
	else
		snprintf(out, outlen, "%zu bytes", n);
}

static struct curl_slist *request_headers(const struct ep_http_config *c,
					  const char *const *headers, bool *failed)
{
	struct curl_slist *list = NULL, *grown;
	*failed = false;
	if (c->token) {
		char *auth = NULL;
		int n = asprintf(&auth, "Authorization: Bearer %s", c->token);
		grown = n < 0 ? NULL : curl_slist_append(list, auth);
		if (n >= 0) {
			explicit_bzero(auth, (size_t)n);
			free(auth);
		}
		if (!grown)
			*failed = true;
		else
			list = grown;
	}
	for (size_t i = 0; headers && headers[i] && !*failed; i++) {
		grown = curl_slist_append(list, headers[i]);
		if (!grown)
			*failed = true;
		else
			list = grown;
	}
	return list;
}

CURLcode ep_http_perform(CURL *h, const struct ep_http_config *c, const char *url,
			 const char *const *headers, struct ep_http_body *answer, long *status,
			 char *why, size_t whylen)
{
	*status = 0;
	memset(answer, 0, sizeof(*answer));
	answer->max = c->max_answer;
	bool failed;
	struct curl_slist *list = request_headers(c, headers, &failed);
	if (failed) {
		curl_slist_free_all(list);
		snprintf(why, whylen, "out of memory");
		return CURLE_OUT_OF_MEMORY;
	}
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, list);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, answer);
	CURLcode cc = curl_easy_perform(h);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
	/* the handle outlives this request's headers and answer */
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, NULL);
	curl_slist_free_all(list);
	if (cc != CURLE_OK && answer->over) {
		char bound[32];
		say_size(c->max_answer, bound, sizeof(bound));
		snprintf(why, whylen, "answer over %s", bound);
	} else if (cc != CURLE_OK) {
		snprintf(why, whylen, "%s", curl_easy_strerror(cc));
	}
	return cc;
}
