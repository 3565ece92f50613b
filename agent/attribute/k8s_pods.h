/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Attribute stage: which pod a container belongs to, from the Kubernetes
 * API server. Only this node's pods are ever asked for
 * (GET /api/v1/pods?fieldSelector=spec.nodeName=NODE): a node's agent has no
 * business reading the whole cluster, and the answer stays small. The list
 * is read again at most every 30 s, and sooner (at most every 5 s) when a
 * container is not in it yet. Memory is bounded by the pods on the node:
 * each read replaces the previous list.
 */
#ifndef EP_K8S_PODS_H
#define EP_K8S_PODS_H

#include <stdbool.h>
#include <stddef.h>

struct ep_k8s_pod {
	char ns[64];	/* namespaces are DNS labels: at most 63 */
	char name[254]; /* pod names are DNS subdomains: at most 253 */
	char uid[37];
};

struct ep_k8s_container {
	char id[65];	  /* 64 hex digits */
	char runtime[16]; /* "containerd", "cri-o", "docker", as the API spells the prefix */
	char name[64];
	size_t pod; /* index in the list's pods */
};

struct ep_k8s_pod_list {
	struct ep_k8s_pod *pods;
	size_t npods;
	struct ep_k8s_container *containers;
	size_t ncontainers;
};

/* Parses a PodList (the API server's JSON): each pod's namespace, name and
 * uid, and every container that has a containerID (init, regular and
 * ephemeral; one not started yet has none and is skipped). 0, or -1 with
 * err saying what is wrong with the document. */
int ep_k8s_parse_pod_list(const char *json, size_t len, struct ep_k8s_pod_list *out, char *err,
			  size_t errlen);
void ep_k8s_pod_list_free(struct ep_k8s_pod_list *l);

struct ep_k8s_config {
	const char *api; /* NULL: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT */
	const char *token_file; /* NULL: the service account's */
	const char *ca_file;	/* NULL: the service account's (when the API is https) */
	const char *node;	/* NULL: $NODE_NAME */
};

struct ep_k8s;

/* *out is NULL when the agent is not in a cluster (no KUBERNETES_SERVICE_HOST
 * and no cfg->api): pod names are off, and nothing is said. Otherwise the
 * first list is read at once (a failure is a warning: the agent labels with
 * container ids until the API answers). -1 with err on a configuration that
 * cannot work (no node name). */
int ep_k8s_open(const struct ep_k8s_config *cfg, struct ep_k8s **out, char *err, size_t errlen);
void ep_k8s_close(struct ep_k8s *k);

/* The pod of a container (full 64-digit id), or NULL. A miss reads the list
 * again when the last read is old enough (rate-limited). The pointers stay
 * valid until the next call into this module. */
const struct ep_k8s_pod *ep_k8s_pod_of(struct ep_k8s *k, const char *container_id,
				       const struct ep_k8s_container **c);

/* Looks a pod up by namespace and name (reading the list again if it is not
 * there and the last read is old enough). 1 found (*pod set, and its
 * containers' ids in ids[0..*nids), at most maxids), 0 not on this node, -1
 * the API cannot be read (err says why). */
int ep_k8s_find_pod(struct ep_k8s *k, const char *ns, const char *name,
		    const struct ep_k8s_pod **pod, const char **ids, size_t maxids, size_t *nids,
		    char *err, size_t errlen);

#endif
