/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The live agent's labels per process: which container a process runs in,
 * from /proc/PID/cgroup, so that its counts are kept apart and labelled with
 * the container's id and cgroup, and its pod's name and namespace when the
 * API server lists it. Host processes stay unlabelled (a set per systemd
 * service would cost memory for little).
 */
#ifndef EP_PROCESS_LABELS_H
#define EP_PROCESS_LABELS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/attribute/container.h"
#include "common/util/u64map.h"
#include "ingest.pb-c.h"

struct ep_pipeline;
struct ep_k8s;

/* The kubelet reports a container's id to the API server only once the
 * container runs, after its first exec: processes of containers not listed
 * yet are labelled again at each interval until they are, for a while. */
#define EP_POD_PENDING_MAX 256
/* cgroups remembered (by id) with what /proc said of them; the table
 * starts over when full */
#define EP_CGROUP_CACHE_MAX 4096

struct ep_process_labeller {
	struct ep_pipeline *pipeline; /* where the labels go */
	struct ep_k8s *k8s;	      /* this node's pods; NULL outside a cluster */
	struct ep_pod_pending {
		uint32_t pid;
		uint64_t since; /* monotonic ns */
	} pending[EP_POD_PENDING_MAX];
	size_t npending;
	/* cgroup id -> index in cgroups: each cgroup's /proc/PID/cgroup text
	 * is read and parsed once, not once per process started in it */
	struct ep_u64map cgroup_index;
	struct ep_cgroup_seen {
		char *path; /* NULL: a cgroup of no container */
		struct ep_container_ref ref;
	} * cgroups;
	size_t ncgroups;
	char cgroup_root[256]; /* cgroup v2's mount, "" until found; "-" for none */
	uint64_t cgroup_reads, cgroup_hits;
};

void ep_process_labeller_init(struct ep_process_labeller *l, struct ep_pipeline *pipeline,
			      struct ep_k8s *k8s);
void ep_process_labeller_free(struct ep_process_labeller *l);
/* Labels the process now; one whose container's pod is not listed yet is
 * kept and looked at again by ep_process_label_pending. cgroup_id: the
 * cgroup the process was seen in (0: unknown), so a process of a cgroup
 * seen before costs no read of /proc. true when labelled for good; false
 * when its pod is still awaited, or it is gone (nothing labelled). */
bool ep_process_label(struct ep_process_labeller *l, uint32_t pid, uint64_t cgroup_id);
/* At each interval: the processes whose pods were not known yet. */
void ep_process_label_pending(struct ep_process_labeller *l);

/* An agent that watches one cgroup (--cgroup, --container) labels every
 * batch with it: its path below the cgroup v2 mount, and its container's id
 * when it is one (not a runtime's monitor). */
struct ep_cgroup_labels {
	Edgeprof__V1__Labels labels;
	struct ep_container_ref container;
	char cgroup[PATH_MAX];
};
void ep_cgroup_labels_init(struct ep_cgroup_labels *cl, const char *path);

#endif
