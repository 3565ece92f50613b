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

struct ep_k8s;

/* The kubelet reports a container's id to the API server only once the
 * container runs, after its first exec: processes of containers not listed
 * yet are labelled again at each interval until they are, for a while. */
#define EP_POD_PENDING_MAX 256
/* cgroups remembered (by id) with what /proc said of them; the table
 * starts over when full */
#define EP_CGROUP_CACHE_MAX 4096

struct ep_process_labeller {
	struct ep_k8s *k8s; /* this node's pods; NULL outside a cluster */
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
	/* the labels last handed out, and what they point to */
	Edgeprof__V1__Labels labels;
	struct ep_container_ref ref;
	char cgroup[PATH_MAX];
};

void ep_process_labeller_init(struct ep_process_labeller *l, struct ep_k8s *k8s);
void ep_process_labeller_free(struct ep_process_labeller *l);

enum ep_labelled {
	EP_LABELS_FOR_GOOD,
	EP_LABELS_PENDING, /* its container's pod is not listed yet */
	EP_LABELS_GONE,	   /* the process is: no labels */
};
/* The labels of process pid, as they are now: *labels its container's
 * (valid until the next call), NULL for a process of no container. One
 * whose pod is not listed yet is kept and looked at again by
 * ep_process_label_pending. cgroup_id: the cgroup the process was seen in
 * (0: unknown), so a process of a cgroup seen before costs no read of
 * /proc. The labeller only finds labels: where counts go is the caller's
 * (the pipeline's label sets). */
enum ep_labelled ep_process_label(struct ep_process_labeller *l, uint32_t pid, uint64_t cgroup_id,
				  const Edgeprof__V1__Labels **labels);
/* At each interval: the processes whose pods were not known yet, each
 * handed to fn with its labels as they are now (a gone one not). */
void ep_process_label_pending(struct ep_process_labeller *l,
			      void (*fn)(void *ctx, uint32_t pid,
					 const Edgeprof__V1__Labels *labels),
			      void *ctx);

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
