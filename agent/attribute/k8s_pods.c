/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/attribute/k8s_pods.h"
#include "common/util/clock.h"

#include <ctype.h>
#include <errno.h>
#include <json-c/json.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/util/http_client.h"
#include "common/util/log.h"
#include "common/util/regular_file.h"

#define SA_DIR	   "/var/run/secrets/kubernetes.io/serviceaccount"
#define REFRESH_NS (30ULL * 1000000000ULL)
/* a miss reads the list again, but not more often than this: a host
 * process in a container the API does not list would otherwise ask at
 * every new pid */
#define MISS_REFRESH_NS (5ULL * 1000000000ULL)
/* far above any node's pods (110 by default, a few KiB each), far below
 * what would hurt the agent */
#define MAX_BODY (64u << 20)

struct ep_k8s {
	char url[2048];
	char token_file[1024];
	char ca_file[1024];
	struct ep_k8s_pod_list list;
	uint64_t last_try_ns;
	bool ever_read;
	bool failing; /* warned once; said again only when it answers again */
	char last_error[4096];
};

void ep_k8s_pod_list_free(struct ep_k8s_pod_list *l)
{
	free(l->pods);
	free(l->containers);
	memset(l, 0, sizeof(*l));
}

static const char *str_at(json_object *o, const char *key)
{
	json_object *v;
	if (!o || !json_object_object_get_ex(o, key, &v) ||
	    !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

/* "containerd://<64hex>", "cri-o://<64hex>", "docker://<64hex>"; false for
 * anything else (another runtime, or a container not started yet) */
static bool parse_container_id(const char *s, struct ep_k8s_container *c)
{
	static const char *const prefixes[][2] = {
	    {"containerd://", "containerd"}, {"cri-o://", "cri-o"}, {"docker://", "docker"}};
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
		size_t pl = strlen(prefixes[i][0]);
		if (strncmp(s, prefixes[i][0], pl) != 0 || strlen(s + pl) != 64)
			continue;
		for (size_t j = 0; j < 64; j++)
			if (!isxdigit((unsigned char)s[pl + j]) ||
			    isupper((unsigned char)s[pl + j]))
				return false;
		memcpy(c->id, s + pl, 64);
		c->id[64] = '\0';
		snprintf(c->runtime, sizeof(c->runtime), "%s", prefixes[i][1]);
		return true;
	}
	return false;
}

static int add_statuses(json_object *status, const char *key, size_t pod, struct ep_k8s_pod_list *l,
			size_t *cap)
{
	json_object *arr;
	if (!status || !json_object_object_get_ex(status, key, &arr) ||
	    !json_object_is_type(arr, json_type_array))
		return 0;
	for (size_t i = 0; i < json_object_array_length(arr); i++) {
		json_object *cs = json_object_array_get_idx(arr, i);
		const char *id = str_at(cs, "containerID");
		struct ep_k8s_container c = {.pod = pod};
		if (!id || !parse_container_id(id, &c))
			continue;
		const char *name = str_at(cs, "name");
		snprintf(c.name, sizeof(c.name), "%s", name ? name : "");
		if (l->ncontainers == *cap) {
			size_t nc = *cap ? *cap * 2 : 16;
			struct ep_k8s_container *p = realloc(l->containers, nc * sizeof(*p));
			if (!p)
				return -1;
			l->containers = p;
			*cap = nc;
		}
		l->containers[l->ncontainers++] = c;
	}
	return 0;
}

int ep_k8s_parse_pod_list(const char *json, size_t len, struct ep_k8s_pod_list *out, char *err,
			  size_t errlen)
{
	memset(out, 0, sizeof(*out));
	json_tokener *tok = json_tokener_new();
	if (!tok) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	json_object *root = json_tokener_parse_ex(tok, json, (int)len);
	enum json_tokener_error jerr = json_tokener_get_error(tok);
	size_t end = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	if (!root || jerr != json_tokener_success) {
		snprintf(err, errlen, "pod list: not JSON: %s at byte %zu",
			 jerr == json_tokener_continue ? "truncated"
						       : json_tokener_error_desc(jerr),
			 end);
		json_object_put(root);
		return -1;
	}
	int rc = -1;
	json_object *items;
	const char *kind = str_at(root, "kind");
	if (!json_object_is_type(root, json_type_object) ||
	    !json_object_object_get_ex(root, "items", &items) ||
	    !json_object_is_type(items, json_type_array)) {
		snprintf(err, errlen, "pod list: no \"items\" array (kind %s)",
			 kind ? kind : "none");
		goto out;
	}
	size_t n = json_object_array_length(items), ccap = 0;
	out->pods = calloc(n ? n : 1, sizeof(*out->pods));
	if (!out->pods) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		json_object *pod = json_object_array_get_idx(items, i), *meta = NULL,
			    *status = NULL;
		if (pod)
			json_object_object_get_ex(pod, "metadata", &meta);
		const char *ns = str_at(meta, "namespace"), *name = str_at(meta, "name"),
			   *uid = str_at(meta, "uid");
		if (!ns || !name || !uid) {
			snprintf(err, errlen, "pod list: item %zu: metadata.%s missing", i,
				 !ns	 ? "namespace"
				 : !name ? "name"
					 : "uid");
			goto out;
		}
		if (strlen(ns) >= sizeof(out->pods[0].ns) ||
		    strlen(name) >= sizeof(out->pods[0].name) ||
		    strlen(uid) >= sizeof(out->pods[0].uid)) {
			snprintf(err, errlen, "pod list: item %zu: namespace, name or uid too long",
				 i);
			goto out;
		}
		struct ep_k8s_pod *p = &out->pods[out->npods];
		snprintf(p->ns, sizeof(p->ns), "%s", ns);
		snprintf(p->name, sizeof(p->name), "%s", name);
		snprintf(p->uid, sizeof(p->uid), "%s", uid);
		json_object_object_get_ex(pod, "status", &status);
		if (add_statuses(status, "initContainerStatuses", out->npods, out, &ccap) != 0 ||
		    add_statuses(status, "containerStatuses", out->npods, out, &ccap) != 0 ||
		    add_statuses(status, "ephemeralContainerStatuses", out->npods, out, &ccap) !=
			0) {
			snprintf(err, errlen, "out of memory");
			goto out;
		}
		out->npods++;
	}
	rc = 0;
out:
	json_object_put(root);
	if (rc != 0)
		ep_k8s_pod_list_free(out);
	return rc;
}

/* The token is read at every request: projected service-account tokens are
 * rotated by the kubelet (hourly). */
static int read_token(const char *path, char *out, size_t outlen, char *err, size_t errlen)
{
	/* a FIFO there would block the open for ever, every minute */
	char why[256];
	int fd = ep_open_regular(path, why, sizeof(why));
	if (fd < 0) {
		snprintf(err, errlen, "token %s: %s", path, why);
		return -1;
	}
	size_t n = 0;
	while (n < outlen - 1) {
		ssize_t got = read(fd, out + n, outlen - 1 - n);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		n += (size_t)got;
	}
	close(fd);
	out[n] = '\0';
	while (n && isspace((unsigned char)out[n - 1]))
		out[--n] = '\0';
	if (!n) {
		snprintf(err, errlen, "token %s: empty", path);
		return -1;
	}
	return 0;
}

static int fetch(struct ep_k8s *k, char *err, size_t errlen)
{
	static const char *const headers[] = {"Accept: application/json", NULL};
	char token[8192];
	if (read_token(k->token_file, token, sizeof(token), err, errlen) != 0)
		return -1;
	/* asked from the sampling loop: a slow API server must not stall it */
	const struct ep_http_config c = {.token = token,
					 .ca_file = k->ca_file[0] ? k->ca_file : NULL,
					 .connect_timeout_ms = 1000,
					 .timeout_ms = 3000,
					 .max_answer = MAX_BODY};
	CURL *h = ep_http_open(&c);
	if (!h) {
		explicit_bzero(token, sizeof(token));
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	struct ep_http_body b;
	long status;
	char why[256];
	CURLcode cr = ep_http_perform(h, &c, k->url, headers, &b, &status, why, sizeof(why));
	explicit_bzero(token, sizeof(token));
	curl_easy_cleanup(h);
	int rc = -1;
	if (cr != CURLE_OK)
		snprintf(err, errlen, "GET %s: %s", k->url, why);
	else if (status != 200)
		snprintf(err, errlen, "GET %s: HTTP %ld", k->url, status);
	else {
		struct ep_k8s_pod_list l;
		char perr[256];
		if (ep_k8s_parse_pod_list(b.data ? b.data : "", b.len, &l, perr, sizeof(perr)) != 0)
			snprintf(err, errlen, "GET %s: %s", k->url, perr);
		else {
			ep_k8s_pod_list_free(&k->list);
			k->list = l;
			rc = 0;
		}
	}
	free(b.data);
	return rc;
}

/* Reads the list when it is older than min_age_ns (or never read). On a
 * failure the previous list stays: container ids are never reused, so what
 * it says is still true of the containers it names. */
static void refresh(struct ep_k8s *k, uint64_t min_age_ns)
{
	uint64_t now = ep_mono_ns();
	if (k->last_try_ns && now - k->last_try_ns < min_age_ns)
		return;
	k->last_try_ns = now;
	char err[sizeof(k->last_error)];
	if (fetch(k, err, sizeof(err)) != 0) {
		if (!k->failing)
			ep_warn("kubernetes: %s; labelling with container ids only, asking "
				"again at most every 30 s",
				err);
		k->failing = true;
		snprintf(k->last_error, sizeof(k->last_error), "%s", err);
		return;
	}
	if (k->failing || !k->ever_read)
		ep_info("kubernetes: %zu pods, %zu containers on this node (%s)", k->list.npods,
			k->list.ncontainers, k->url);
	k->failing = false;
	k->ever_read = true;
	k->last_error[0] = '\0';
}

static void url_encode(const char *s, char *out, size_t outlen)
{
	size_t o = 0;
	for (; *s && o + 4 < outlen; s++) {
		unsigned char c = (unsigned char)*s;
		if (isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~')
			out[o++] = (char)c;
		else
			o += (size_t)snprintf(out + o, outlen - o, "%%%02X", c);
	}
	out[o] = '\0';
}

int ep_k8s_open(const struct ep_k8s_config *cfg, struct ep_k8s **out, char *err, size_t errlen)
{
	*out = NULL;
	const char *host = getenv("KUBERNETES_SERVICE_HOST");
	if (!cfg->api && (!host || !host[0]))
		return 0;
	const char *node = cfg->node && cfg->node[0] ? cfg->node : getenv("NODE_NAME");
	if (!node || !node[0]) {
		snprintf(err, errlen,
			 "kubernetes: pod names need this node's name (--node, or NODE_NAME from "
			 "the downward API)");
		return -1;
	}
	struct ep_k8s *k = calloc(1, sizeof(*k));
	if (!k) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	char base[1024];
	if (cfg->api)
		snprintf(base, sizeof(base), "%s", cfg->api);
	else {
		const char *port = getenv("KUBERNETES_SERVICE_PORT");
		bool v6 = strchr(host, ':') != NULL;
		snprintf(base, sizeof(base), "https://%s%s%s:%s", v6 ? "[" : "", host,
			 v6 ? "]" : "", port && port[0] ? port : "443");
	}
	size_t bl = strlen(base);
	while (bl && base[bl - 1] == '/')
		base[--bl] = '\0';
	if (strncmp(base, "http://", 7) != 0 && strncmp(base, "https://", 8) != 0) {
		snprintf(err, errlen, "--k8s-api %s: expected an http:// or https:// URL", base);
		free(k);
		return -1;
	}
	char enc[1024];
	url_encode(node, enc, sizeof(enc));
	snprintf(k->url, sizeof(k->url), "%s/api/v1/pods?fieldSelector=spec.nodeName%%3D%s", base,
		 enc);
	snprintf(k->token_file, sizeof(k->token_file), "%s",
		 cfg->token_file ? cfg->token_file : SA_DIR "/token");
	if (cfg->ca_file)
		snprintf(k->ca_file, sizeof(k->ca_file), "%s", cfg->ca_file);
	else if (strncmp(base, "https://", 8) == 0)
		snprintf(k->ca_file, sizeof(k->ca_file), "%s", SA_DIR "/ca.crt");
	refresh(k, 0);
	*out = k;
	return 0;
}

void ep_k8s_close(struct ep_k8s *k)
{
	if (!k)
		return;
	ep_k8s_pod_list_free(&k->list);
	free(k);
}

static const struct ep_k8s_container *lookup(const struct ep_k8s *k, const char *id)
{
	for (size_t i = 0; i < k->list.ncontainers; i++)
		if (strcmp(k->list.containers[i].id, id) == 0)
			return &k->list.containers[i];
	return NULL;
}

const struct ep_k8s_pod *ep_k8s_pod_of(struct ep_k8s *k, const char *container_id,
				       const struct ep_k8s_container **c)
{
	refresh(k, REFRESH_NS);
	const struct ep_k8s_container *got = lookup(k, container_id);
	if (!got) {
		/* a container started since the last read, or listed by the
		 * API a moment after it started */
		refresh(k, k->failing ? REFRESH_NS : MISS_REFRESH_NS);
		got = lookup(k, container_id);
	}
	if (c)
		*c = got;
	return got ? &k->list.pods[got->pod] : NULL;
}

static const struct ep_k8s_pod *pod_named(const struct ep_k8s *k, const char *ns, const char *name,
					  size_t *index)
{
	for (size_t i = 0; i < k->list.npods; i++)
		if (strcmp(k->list.pods[i].ns, ns) == 0 &&
		    strcmp(k->list.pods[i].name, name) == 0) {
			*index = i;
			return &k->list.pods[i];
		}
	return NULL;
}

int ep_k8s_find_pod(struct ep_k8s *k, const char *ns, const char *name,
		    const struct ep_k8s_pod **pod, const char **ids, size_t maxids, size_t *nids,
		    char *err, size_t errlen)
{
	size_t idx = 0;
	refresh(k, REFRESH_NS);
	*pod = pod_named(k, ns, name, &idx);
	if (!*pod) {
		refresh(k, k->failing ? REFRESH_NS : MISS_REFRESH_NS);
		*pod = pod_named(k, ns, name, &idx);
	}
	if (!*pod && k->failing) {
		snprintf(err, errlen, "%s", k->last_error);
		return -1;
	}
	if (!*pod)
		return 0;
	*nids = 0;
	for (size_t i = 0; i < k->list.ncontainers && *nids < maxids; i++)
		if (k->list.containers[i].pod == idx)
			ids[(*nids)++] = k->list.containers[i].id;
	return 1;
}
