/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/attribute/process_labels.h"

#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/attribute/container.h"
#include "agent/attribute/k8s_pods.h"
#include "common/util/clock.h"

/* how long a process waits for its pod to be listed before it keeps the
 * container's labels only */
#define POD_PENDING_NS (120ULL * 1000000000ULL)

void ep_process_labeller_init(struct ep_process_labeller *l, struct ep_k8s *k8s)
{
	*l = (struct ep_process_labeller){.k8s = k8s};
}

static void forget_cgroups(struct ep_process_labeller *l)
{
	for (size_t i = 0; i < l->ncgroups; i++)
		free(l->cgroups[i].path);
	l->ncgroups = 0;
	ep_u64map_free(&l->cgroup_index);
}

void ep_process_labeller_free(struct ep_process_labeller *l)
{
	forget_cgroups(l);
	free(l->cgroups);
	l->cgroups = NULL;
}

/* A container's labels, in l->labels (they point to cgroup and ref, the
 * labeller's own): EP_LABELS_PENDING when its pod is not listed yet. */
static enum ep_labelled label_container(struct ep_process_labeller *l, const char *cgroup,
					const struct ep_container_ref *ref)
{
	edgeprof__v1__labels__init(&l->labels);
	l->labels.container_id = (char *)ref->id;
	l->labels.cgroup = (char *)cgroup;
	const struct ep_k8s_pod *pod = l->k8s ? ep_k8s_pod_of(l->k8s, ref->id, NULL) : NULL;
	if (pod) {
		l->labels.pod = (char *)pod->name;
		l->labels.namespace_ = (char *)pod->ns;
	}
	return pod || !l->k8s ? EP_LABELS_FOR_GOOD : EP_LABELS_PENDING;
}

/* Whether id is the cgroup at path (a cgroup v2 directory's inode number
 * is its id): a process moved between its event and the read of its
 * /proc/PID/cgroup must not teach the table a wrong path. */
static bool cgroup_is(struct ep_process_labeller *l, const char *path, uint64_t id)
{
	if (!l->cgroup_root[0] && ep_cgroup2_root(l->cgroup_root, sizeof(l->cgroup_root)) != 0)
		snprintf(l->cgroup_root, sizeof(l->cgroup_root), "-");
	if (l->cgroup_root[0] == '-')
		return false;
	char full[PATH_MAX + 256];
	struct stat st;
	snprintf(full, sizeof(full), "%s%s", l->cgroup_root, path);
	return stat(full, &st) == 0 && (uint64_t)st.st_ino == id;
}

/* Whether the path /proc gave is the cgroup v2 one ("0::PATH"), the only
 * one a cgroup id names: on hybrid hosts a v1 hierarchy's path tells
 * containers apart, and checking it against the id would be a stat() per
 * process that always fails. */
static bool is_v2_path(const char *text, const char *cgroup)
{
	size_t len = strlen(cgroup);
	for (const char *line = text; line; line = strchr(line, '\n')) {
		if (*line == '\n')
			line++;
		if (strncmp(line, "0::", 3) == 0)
			return strncmp(line + 3, cgroup, len) == 0 &&
			       (line[3 + len] == '\n' || line[3 + len] == '\0');
	}
	return false;
}

static void remember(struct ep_process_labeller *l, uint64_t id, const char *container_cgroup,
		     const struct ep_container_ref *ref)
{
	if (l->ncgroups == EP_CGROUP_CACHE_MAX)
		forget_cgroups(l);
	if (!l->cgroups) {
		l->cgroups = calloc(EP_CGROUP_CACHE_MAX, sizeof(*l->cgroups));
		if (!l->cgroups)
			return;
	}
	char *path = container_cgroup ? strdup(container_cgroup) : NULL;
	uint64_t *slot = ep_u64map_upsert(&l->cgroup_index, id, NULL);
	if (!slot || (container_cgroup && !path)) {
		free(path);
		ep_u64map_remove(&l->cgroup_index, id);
		return;
	}
	*slot = l->ncgroups;
	l->cgroups[l->ncgroups++] = (struct ep_cgroup_seen){.path = path, .ref = *ref};
}

/* The process's labels in *labels (NULL: of no container), or
 * EP_LABELS_GONE when the process is. */
static enum ep_labelled label_once(struct ep_process_labeller *l, uint32_t pid, uint64_t cgroup_id,
				   const Edgeprof__V1__Labels **labels)
{
	*labels = NULL;
	const uint64_t *seen = cgroup_id ? ep_u64map_get(&l->cgroup_index, cgroup_id) : NULL;
	if (seen) {
		const struct ep_cgroup_seen *c = &l->cgroups[*seen];
		l->cgroup_hits++;
		if (!c->path)
			return EP_LABELS_FOR_GOOD;
		*labels = &l->labels;
		return label_container(l, c->path, &c->ref);
	}
	char path[64], text[4096];
	snprintf(path, sizeof(path), "/proc/%u/cgroup", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return EP_LABELS_GONE;
	ssize_t n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n < 0)
		return EP_LABELS_GONE;
	text[n] = '\0';
	l->cgroup_reads++;
	char *cgroup = l->cgroup;
	l->ref = (struct ep_container_ref){0};
	bool have_path = ep_cgroup_from_proc(text, cgroup, sizeof(l->cgroup));
	bool container = have_path && ep_container_from_cgroup(cgroup, &l->ref) && !l->ref.monitor;
	if (have_path && cgroup_id && is_v2_path(text, cgroup) && cgroup_is(l, cgroup, cgroup_id))
		remember(l, cgroup_id, container ? cgroup : NULL, &l->ref);
	if (!container)
		return EP_LABELS_FOR_GOOD;
	*labels = &l->labels;
	return label_container(l, cgroup, &l->ref);
}

enum ep_labelled ep_process_label(struct ep_process_labeller *l, uint32_t pid, uint64_t cgroup_id,
				  const Edgeprof__V1__Labels **labels)
{
	enum ep_labelled got = label_once(l, pid, cgroup_id, labels);
	if (got != EP_LABELS_PENDING)
		return got;
	for (size_t i = 0; i < l->npending; i++)
		if (l->pending[i].pid == pid)
			return got;
	if (l->npending < EP_POD_PENDING_MAX)
		l->pending[l->npending++] = (struct ep_pod_pending){pid, ep_mono_ns()};
	return got;
}

void ep_process_label_pending(struct ep_process_labeller *l,
			      void (*fn)(void *ctx, uint32_t pid,
					 const Edgeprof__V1__Labels *labels),
			      void *ctx)
{
	uint64_t now = ep_mono_ns();
	for (size_t i = 0; i < l->npending;) {
		const Edgeprof__V1__Labels *labels = NULL;
		enum ep_labelled got = EP_LABELS_GONE;
		if (now - l->pending[i].since <= POD_PENDING_NS) {
			got = label_once(l, l->pending[i].pid, 0, &labels);
			if (got != EP_LABELS_GONE)
				fn(ctx, l->pending[i].pid, labels);
		}
		if (got != EP_LABELS_PENDING)
			l->pending[i] = l->pending[--l->npending];
		else
			i++;
	}
}

void ep_cgroup_labels_init(struct ep_cgroup_labels *cl, const char *path)
{
	char root[PATH_MAX];
	size_t rl = ep_cgroup2_root(root, sizeof(root)) == 0 ? strlen(root) : 0;
	if (rl && strncmp(path, root, rl) == 0 && (path[rl] == '/' || !path[rl]))
		path += rl;
	snprintf(cl->cgroup, sizeof(cl->cgroup), "%s", path[0] ? path : "/");
	edgeprof__v1__labels__init(&cl->labels);
	cl->labels.cgroup = cl->cgroup;
	if (ep_container_from_cgroup(cl->cgroup, &cl->container) && !cl->container.monitor)
		cl->labels.container_id = cl->container.id;
}
