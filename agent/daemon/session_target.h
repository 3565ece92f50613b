/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An on-demand session's target on this node: the collector names a pid, a
 * cgroup, a container or a pod (NAMESPACE/NAME); the agent finds the cgroup
 * v2 directory (or the process) to sample.
 */
#ifndef EP_SESSION_TARGET_H
#define EP_SESSION_TARGET_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "ingest.pb-c.h"

struct ep_k8s;

struct ep_session_target {
	uint32_t pid;			/* a process's session; 0 for the others */
	char cgroup[PATH_MAX];		/* the cgroup v2 directory sampled */
	char cgroup_label[PATH_MAX];	/* the same below the cgroup v2 root, as labels say it */
	char pod_ns[64], pod_name[254]; /* a pod's session */
	char what[PATH_MAX + 128];	/* for log lines and reports: "pod NS/NAME, cgroup /..." */
};

/* 0 with t filled in; -1 the target is not on this node, -2 this agent
 * cannot tell (a pod without API access, a malformed pod name); why says
 * so. k8s: this node's pods, or NULL outside a cluster. */
int ep_session_target_resolve(const Edgeprof__V1__ProfileSession *q, struct ep_k8s *k8s,
			      struct ep_session_target *t, char *why, size_t whylen);

#endif
