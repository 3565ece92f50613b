/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Attribute stage: which container a cgroup belongs to. Container runtimes
 * name their cgroups after the container id, each in its own way:
 *   containerd (Kubernetes, systemd driver)
 * .../kubepods-burstable-pod<uid>.slice/cri-containerd-<id>.scope containerd / docker (cgroupfs
 * driver)    /kubepods/burstable/pod<uid>/<id> CRI-O .../crio-<id>.scope (crio-conmon-<id>.scope:
 * its monitor) docker                                   /docker/<id>,
 * /system.slice/docker-<id>.scope podman                                   .../libpod-<id>.scope,
 * /libpod_parent/libpod-<id> with cgroup v2 ("0::PATH"), v1 (one line per hierarchy) or both
 * (hybrid) in /proc/PID/cgroup. Ids are 64 hex digits. Pod metadata (namespace, name) needs the CRI
 * or the API server, a later step; the pod UID is in the path.
 */
#ifndef EP_CONTAINER_H
#define EP_CONTAINER_H

#include <stdbool.h>
#include <stddef.h>

struct ep_container_ref {
	char runtime[16]; /* "containerd", "cri-o", "docker", "podman", "kubernetes" (cgroupfs) */
	char id[65];	  /* 64 hex digits */
	char pod_uid[37]; /* Kubernetes pod UID with dashes, "" outside pods */
	bool monitor;	  /* a runtime's monitor process (conmon), not the container */
};

/* The container a cgroup path belongs to (its deepest container component).
 * false when the path names no container (a systemd service, the root). */
bool ep_container_from_cgroup(const char *cgroup_path, struct ep_container_ref *out);

/* The process's cgroup path from /proc/PID/cgroup text: the v2 line
 * ("0::PATH") when it names more than the root, else the v1 hierarchy that
 * best reflects containers (pids, memory, cpu, then name=systemd). false
 * when none. */
bool ep_cgroup_from_proc(const char *proc_cgroup, char *out, size_t outlen);

/* Finds the cgroup v2 directory of a container (full id or a unique prefix
 * of at least 12 hex digits) under root (e.g. /sys/fs/cgroup). 0, or -1 with
 * err saying "unknown container" or "ambiguous". */
int ep_container_find_cgroup(const char *root, const char *id, char *out, size_t outlen, char *err,
			     size_t errlen);

/* Finds the cgroup v2 directory of a Kubernetes pod (the kubelet's
 * pod<uid> or kubepods-<qos>-pod<uid>.slice, which holds its containers)
 * under root. 0, or -1 when there is none. */
int ep_pod_find_cgroup(const char *root, const char *pod_uid, char *out, size_t outlen);

/* Where cgroup v2 is mounted (/sys/fs/cgroup, or /sys/fs/cgroup/unified on
 * hybrid hosts). 0 or -1. */
int ep_cgroup2_root(char *out, size_t outlen);

#endif
