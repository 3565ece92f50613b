/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/attribute/process_labels.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>

#include "agent/attribute/container.h"
#include "agent/attribute/k8s_pods.h"
#include "agent/pipeline/pipeline.h"
#include "common/util/clock.h"

/* how long a process waits for its pod to be listed before it keeps the
 * container's labels only */
#define POD_PENDING_NS (120ULL * 1000000000ULL)

void ep_process_labeller_init(struct ep_process_labeller *l, struct ep_pipeline *pipeline,
			      struct ep_k8s *k8s)
{
	*l = (struct ep_process_labeller){.pipeline = pipeline, .k8s = k8s};
}

/* true when the process is labelled for good (or gone), false when its
 * container's pod is not known yet */
static bool label_once(struct ep_process_labeller *l, uint32_t pid)
{
	char path[64], text[4096], cgroup[PATH_MAX];
	snprintf(path, sizeof(path), "/proc/%u/cgroup", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return true;
	size_t n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	struct ep_container_ref ref;
	if (!ep_cgroup_from_proc(text, cgroup, sizeof(cgroup)) ||
	    !ep_container_from_cgroup(cgroup, &ref) || ref.monitor) {
		ep_pipeline_label_pid(l->pipeline, pid, NULL);
		return true;
	}
	Edgeprof__V1__Labels labels = EDGEPROF__V1__LABELS__INIT;
	labels.container_id = ref.id;
	labels.cgroup = cgroup;
	const struct ep_k8s_pod *pod = l->k8s ? ep_k8s_pod_of(l->k8s, ref.id, NULL) : NULL;
	if (pod) {
		labels.pod = (char *)pod->name;
		labels.namespace_ = (char *)pod->ns;
	}
	ep_pipeline_label_pid(l->pipeline, pid, &labels);
	return pod || !l->k8s;
}

void ep_process_label(struct ep_process_labeller *l, uint32_t pid)
{
	if (label_once(l, pid))
		return;
	for (size_t i = 0; i < l->npending; i++)
		if (l->pending[i].pid == pid)
			return;
	if (l->npending < EP_POD_PENDING_MAX)
		l->pending[l->npending++] = (struct ep_pod_pending){pid, ep_mono_ns()};
}

void ep_process_label_pending(struct ep_process_labeller *l)
{
	uint64_t now = ep_mono_ns();
	for (size_t i = 0; i < l->npending;) {
		if (now - l->pending[i].since > POD_PENDING_NS || label_once(l, l->pending[i].pid))
			l->pending[i] = l->pending[--l->npending];
		else
			i++;
	}
}
