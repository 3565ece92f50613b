/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/daemon/session_target.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/attribute/container.h"
#include "agent/attribute/k8s_pods.h"

/* A pod's cgroup: the kubelet's pod directory, which holds its containers,
 * else (another layout) the cgroup of its first container found here. 0,
 * -1 not here (why says so), -2 cannot tell (no API access). */
static int resolve_pod(const char *q, struct ep_k8s *k8s, const char *root,
		       struct ep_session_target *t, char *why, size_t whylen)
{
	const char *slash = strchr(q, '/');
	if (!slash || slash == q || !slash[1] || strchr(slash + 1, '/') ||
	    (size_t)(slash - q) >= sizeof(t->pod_ns) || strlen(slash + 1) >= sizeof(t->pod_name)) {
		snprintf(why, whylen, "pod '%s': expected NAMESPACE/NAME", q);
		return -2;
	}
	snprintf(t->pod_ns, sizeof(t->pod_ns), "%.*s", (int)(slash - q), q);
	snprintf(t->pod_name, sizeof(t->pod_name), "%s", slash + 1);
	if (!k8s) {
		snprintf(why, whylen,
			 "pod %s: pod names need API access: this agent has no Kubernetes API "
			 "(no KUBERNETES_SERVICE_HOST, no --k8s-api)",
			 q);
		return -2;
	}
	const struct ep_k8s_pod *pod;
	const char *ids[16];
	size_t nids = 0;
	char err[600];
	int found =
	    ep_k8s_find_pod(k8s, t->pod_ns, t->pod_name, &pod, ids, 16, &nids, err, sizeof(err));
	if (found < 0) {
		snprintf(why, whylen, "pod %s: pod names need API access: %s", q, err);
		return -2;
	}
	if (!found) {
		snprintf(why, whylen, "pod %s: not on this node", q);
		return -1;
	}
	if (ep_pod_find_cgroup(root, pod->uid, t->cgroup, sizeof(t->cgroup)) == 0)
		return 0;
	for (size_t i = 0; i < nids; i++)
		if (ep_container_find_cgroup(root, ids[i], t->cgroup, sizeof(t->cgroup), err,
					     sizeof(err)) == 0)
			return 0;
	snprintf(why, whylen,
		 "pod %s (uid %s): no cgroup of it or of its %zu containers on this node", q,
		 pod->uid, nids);
	return -1;
}

/* A path under the cgroup v2 root, given with or without it. */
static int resolve_cgroup_path(const char *q, const char *root, struct ep_session_target *t,
			       char *why, size_t whylen)
{
	size_t rl = strlen(root);
	bool rooted = strncmp(q, root, rl) == 0 && (q[rl] == '/' || !q[rl]);
	int len = snprintf(t->cgroup, sizeof(t->cgroup), "%s%s%s", rooted ? "" : root,
			   rooted || q[0] == '/' ? "" : "/", q);
	struct stat st;
	if (len >= (int)sizeof(t->cgroup) || stat(t->cgroup, &st) != 0 || !S_ISDIR(st.st_mode)) {
		snprintf(why, whylen, "cgroup %s: no such cgroup on this node", q);
		return -1;
	}
	return 0;
}

/* How log lines and reports name a cgroup target. */
static void describe(const Edgeprof__V1__ProfileSession *q, struct ep_session_target *t)
{
	struct ep_container_ref ref;
	if (q->pod[0])
		snprintf(t->what, sizeof(t->what), "pod %s, cgroup %s", q->pod, t->cgroup_label);
	else if (ep_container_from_cgroup(t->cgroup_label, &ref) && !ref.monitor)
		snprintf(t->what, sizeof(t->what), "container %.64s, cgroup %s", ref.id,
			 t->cgroup_label);
	else
		snprintf(t->what, sizeof(t->what), "cgroup %s", t->cgroup_label);
}

int ep_session_target_resolve(const Edgeprof__V1__ProfileSession *q, struct ep_k8s *k8s,
			      struct ep_session_target *t, char *why, size_t whylen)
{
	char root[PATH_MAX];
	if (q->pid) {
		char proc[64];
		snprintf(proc, sizeof(proc), "/proc/%u", q->pid);
		if (access(proc, F_OK) != 0) {
			snprintf(why, whylen, "pid %u: no such process on this node", q->pid);
			return -1;
		}
		t->pid = q->pid;
		snprintf(t->what, sizeof(t->what), "pid %u", q->pid);
		return 0;
	}
	if (ep_cgroup2_root(root, sizeof(root)) != 0) {
		snprintf(why, whylen, "no cgroup v2 mount on this node");
		return -1;
	}
	int rc = 0;
	if (q->pod[0]) {
		rc = resolve_pod(q->pod, k8s, root, t, why, whylen);
	} else if (q->container_id[0]) {
		char err[512];
		if (ep_container_find_cgroup(root, q->container_id, t->cgroup, sizeof(t->cgroup),
					     err, sizeof(err)) != 0) {
			snprintf(why, whylen, "%s", err);
			rc = -1;
		}
	} else {
		rc = resolve_cgroup_path(q->cgroup, root, t, why, whylen);
	}
	if (rc != 0)
		return rc;
	const char *rel = t->cgroup + strlen(root);
	snprintf(t->cgroup_label, sizeof(t->cgroup_label), "%s", rel[0] ? rel : "/");
	describe(q, t);
	return 0;
}
