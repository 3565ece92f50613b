/* SPDX-License-Identifier: Apache-2.0 */
#include "cli/collector_query.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/profile/profile_file.h"
#include "common/util/http_body.h"
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
	const struct ep_option table[EP_COLLECTOR_QUERY_OPTION_COUNT + 1] = {
	    EP_OPTION("collector", 0, EP_OPT_STRING, &q->url),
	    EP_OPTION("token-file", 0, EP_OPT_STRING, &q->token_file),
	    EP_OPTION("cacert", 0, EP_OPT_STRING, &q->ca_file),
	    EP_OPTION("cert", 0, EP_OPT_STRING, &q->cert_file),
	    EP_OPTION("key", 0, EP_OPT_STRING, &q->key_file),
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

int ep_collector_request(const struct ep_collector_query *q, const char *method, const char *path,
			 struct ep_http_body *body, long *status)
{
	char token[512], err[512];
	*status = 0;
	memset(body, 0, sizeof(*body));
	if (q->token_file &&
	    ep_read_token_file(q->token_file, token, sizeof(token), err, sizeof(err)) != 0) {
		ep_error("%s", err);
		return -1;
	}
	CURL *curl = curl_easy_init();
	char *url = NULL;
	size_t base = strlen(q->url);
	while (base && q->url[base - 1] == '/')
		base--;
	if (!curl || asprintf(&url, "%.*s%s", (int)base, q->url, path) < 0) {
		ep_error("out of memory");
		curl_easy_cleanup(curl);
		return -1;
	}
	struct curl_slist *headers = NULL;
	char auth[600];
	if (q->token_file) {
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
		headers = curl_slist_append(headers, auth);
	}
	curl_easy_setopt(curl, CURLOPT_URL, url);
	curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
	if (strcmp(method, "POST") == 0) {
		curl_easy_setopt(curl, CURLOPT_POSTFIELDS, "");
		curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, 0L);
	}
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, ep_http_body_write);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, body);
	curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
	curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 300000L);
	if (q->ca_file)
		curl_easy_setopt(curl, CURLOPT_CAINFO, q->ca_file);
	if (q->cert_file)
		curl_easy_setopt(curl, CURLOPT_SSLCERT, q->cert_file);
	if (q->key_file)
		curl_easy_setopt(curl, CURLOPT_SSLKEY, q->key_file);
	CURLcode cc = curl_easy_perform(curl);
	curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, status);
	if (cc != CURLE_OK)
		ep_error("collector %s: %s", q->url, curl_easy_strerror(cc));
	free(url);
	curl_slist_free_all(headers);
	curl_easy_cleanup(curl);
	if (cc != CURLE_OK) {
		free(body->data);
		body->data = NULL;
		return -1;
	}
	return 0;
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
	const char *args[2 * (4 + sizeof(keys) / sizeof(keys[0])) + 1] = {
	    "build_id", q->build_id, "from", q->from, "to", q->to, "session", q->session};
	size_t n = 8;
	for (int i = 0; i < q->nlabels; i++) {
		const char *eq = strchr(q->labels[i], '=');
		snprintf(keys[i], sizeof(keys[i]), "%.*s", (int)(eq - q->labels[i]), q->labels[i]);
		args[n++] = keys[i];
		args[n++] = eq + 1;
	}
	args[n] = NULL;
	char *path = ep_collector_path("/v1/profile?format=proto", args);
	if (!path)
		return NULL;
	struct ep_http_body body;
	long status;
	Edgeprof__V1__Profile *p = NULL;
	if (ep_collector_request(q, "GET", path, &body, &status) != 0) {
		free(path);
		return NULL;
	}
	if (status != 200)
		ep_error("collector %s: HTTP %ld: %s", q->url, status,
			 body.data ? strtok(body.data, "\n") : "");
	else if (!(p = edgeprof__v1__profile__unpack(NULL, body.len, (uint8_t *)body.data)))
		ep_error("collector %s: the answer is not a profile (%zu bytes)", q->url, body.len);
	free(body.data);
	free(path);
	return p;
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
