/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/attribute/container.h"

#include <ctype.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

static bool is_hex_id(const char *s, size_t n)
{
	if (n != 64)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
			return false;
	return true;
}

/* "pod<uid>" or "kubepods-<qos>-pod<uid>.slice" (systemd writes the uid's
 * dashes as underscores) */
static void pod_uid_from(const char *comp, size_t n, char *out)
{
	const char *p = NULL;
	for (size_t i = 0; i + 3 <= n; i++)
		if (memcmp(comp + i, "pod", 3) == 0 && (i == 0 || comp[i - 1] == '-'))
			p = comp + i + 3;
	if (!p)
		return;
	size_t len = (size_t)(comp + n - p);
	if (len > 6 && memcmp(comp + n - 6, ".slice", 6) == 0)
		len -= 6;
	if (len != 36)
		return;
	/* checked whole before out is written: a component that looked like a
	 * uid up to a bad character once left out a mix of its parent's uid
	 * and its own first characters */
	char uid[37];
	for (size_t i = 0; i < 36; i++) {
		char c = p[i] == '_' ? '-' : p[i];
		bool dash = i == 8 || i == 13 || i == 18 || i == 23;
		if (dash ? c != '-' : !isxdigit((unsigned char)c))
			return;
		uid[i] = c;
	}
	uid[36] = '\0';
	memcpy(out, uid, sizeof(uid));
}

struct prefix_rule {
	const char *prefix;
	const char *runtime;
	bool monitor;
};

static const struct prefix_rule rules[] = {
    {"cri-containerd-", "containerd", false},
    {"crio-conmon-", "cri-o", true},
    {"crio-", "cri-o", false},
    {"docker-", "docker", false},
    {"libpod-conmon-", "podman", true},
    {"libpod-", "podman", false},
};

/* One path component: a container id in one of the runtimes' spellings. */
static bool component_id(const char *comp, size_t n, const char *parent, size_t pn,
			 struct ep_container_ref *out)
{
	size_t core = n;
	if (core > 6 && memcmp(comp + core - 6, ".scope", 6) == 0)
		core -= 6;
	for (size_t r = 0; r < sizeof(rules) / sizeof(rules[0]); r++) {
		size_t pl = strlen(rules[r].prefix);
		if (core > pl && memcmp(comp, rules[r].prefix, pl) == 0 &&
		    is_hex_id(comp + pl, core - pl)) {
			snprintf(out->runtime, sizeof(out->runtime), "%s", rules[r].runtime);
			memcpy(out->id, comp + pl, 64);
			out->id[64] = '\0';
			out->monitor = rules[r].monitor;
			return true;
		}
	}
	if (is_hex_id(comp, n)) {
		/* a bare id: docker's /docker/<id>, or a pod's container with the
		 * cgroupfs driver (/kubepods/.../pod<uid>/<id>) */
		bool in_pod = pn > 3 && memcmp(parent, "pod", 3) == 0;
		bool docker = pn == 6 && memcmp(parent, "docker", 6) == 0;
		snprintf(out->runtime, sizeof(out->runtime), "%s",
			 docker	  ? "docker"
			 : in_pod ? "kubernetes"
				  : "unknown");
		memcpy(out->id, comp, 64);
		out->id[64] = '\0';
		out->monitor = false;
		return true;
	}
	return false;
}

bool ep_container_from_cgroup(const char *path, struct ep_container_ref *out)
{
	memset(out, 0, sizeof(*out));
	bool found = false;
	const char *parent = "";
	size_t pn = 0;
	for (const char *p = path; *p;) {
		while (*p == '/')
			p++;
		const char *end = strchr(p, '/');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		if (n == 0)
			break;
		pod_uid_from(p, n, out->pod_uid);
		struct ep_container_ref c = *out;
		/* the deepest container component wins: nested runtimes (a
		 * container in a pod in a VM) are attributed to the innermost */
		if (component_id(p, n, parent, pn, &c)) {
			*out = c;
			found = true;
		}
		parent = p;
		pn = n;
		p += n;
	}
	if (!found)
		memset(out, 0, sizeof(*out));
	return found;
}

bool ep_cgroup_from_proc(const char *text, char *out, size_t outlen)
{
	static const char *const v1_order[] = {"pids", "memory", "cpu", "name=systemd"};
	char best_v1[PATH_MAX] = "";
	int best_rank = 99;
	const char *line = text;
	while (line && *line) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		/* ID:CONTROLLERS:PATH */
		const char *c1 = memchr(line, ':', len);
		const char *c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - line)) : NULL;
		if (c2) {
			const char *path = c2 + 1;
			size_t plen = len - (size_t)(path - line);
			if (strncmp(line, "0::", 3) == 0 && plen > 1) {
				snprintf(out, outlen, "%.*s", (int)plen, path);
				return true;
			}
			for (int r = 0; r < 4 && r < best_rank; r++) {
				/* a controller list like "cpu,cpuacct" counts as cpu */
				size_t ol = strlen(v1_order[r]);
				const char *ctl = c1 + 1;
				bool match = false;
				for (const char *s = ctl; s < c2;) {
					const char *comma = memchr(s, ',', (size_t)(c2 - s));
					size_t sl = comma ? (size_t)(comma - s) : (size_t)(c2 - s);
					if (sl == ol && memcmp(s, v1_order[r], ol) == 0)
						match = true;
					s += sl + 1;
				}
				if (match && plen > 1) {
					snprintf(best_v1, sizeof(best_v1), "%.*s", (int)plen, path);
					best_rank = r;
				}
			}
		}
		line = nl ? nl + 1 : NULL;
	}
	if (best_rank == 99)
		return false;
	snprintf(out, outlen, "%s", best_v1);
	return true;
}

static int walk(const char *dir, int depth, const char *id, size_t idlen, char *found,
		size_t foundlen, int *matches)
{
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		char path[PATH_MAX];
		if (snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >= (int)sizeof(path))
			continue;
		struct ep_container_ref ref;
		if (ep_container_from_cgroup(de->d_name, &ref) && !ref.monitor &&
		    strncmp(ref.id, id, idlen) == 0) {
			(*matches)++;
			snprintf(found, foundlen, "%s", path);
			continue;
		}
		if (depth < 8)
			walk(path, depth + 1, id, idlen, found, foundlen, matches);
	}
	closedir(d);
	return 0;
}

int ep_container_find_cgroup(const char *root, const char *id, char *out, size_t outlen, char *err,
			     size_t errlen)
{
	size_t n = strlen(id);
	bool hex = n >= 12 && n <= 64;
	for (size_t i = 0; hex && i < n; i++)
		hex = isxdigit((unsigned char)id[i]) && !isupper((unsigned char)id[i]);
	if (!hex) {
		snprintf(err, errlen, "container '%s': expected 12 to 64 lowercase hex digits", id);
		return -1;
	}
	int matches = 0;
	walk(root, 0, id, n, out, outlen, &matches);
	if (matches == 1)
		return 0;
	if (matches)
		snprintf(err, errlen, "container %s: ambiguous, %d cgroups match under %s", id,
			 matches, root);
	else
		snprintf(err, errlen, "container %s: unknown (no cgroup of it under %s)", id, root);
	return -1;
}

static bool pod_walk(const char *dir, int depth, const char *uid, char *out, size_t outlen)
{
	DIR *d = opendir(dir);
	if (!d)
		return false;
	bool found = false;
	struct dirent *de;
	while (!found && (de = readdir(d))) {
		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		char path[PATH_MAX];
		if (snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >= (int)sizeof(path))
			continue;
		char got[37] = "";
		pod_uid_from(de->d_name, strlen(de->d_name), got);
		if (strcmp(got, uid) == 0) {
			snprintf(out, outlen, "%s", path);
			found = true;
		} else if (depth < 8) {
			/* a container's own cgroup holds no pods: not worth a look */
			struct ep_container_ref ref;
			if (!ep_container_from_cgroup(de->d_name, &ref))
				found = pod_walk(path, depth + 1, uid, out, outlen);
		}
	}
	closedir(d);
	return found;
}

int ep_pod_find_cgroup(const char *root, const char *pod_uid, char *out, size_t outlen)
{
	if (strlen(pod_uid) != 36)
		return -1;
	return pod_walk(root, 0, pod_uid, out, outlen) ? 0 : -1;
}

int ep_cgroup2_root(char *out, size_t outlen)
{
	FILE *f = fopen("/proc/self/mounts", "r");
	if (!f)
		return -1;
	char dev[256], dir[PATH_MAX], type[64];
	int rc = -1;
	while (fscanf(f, "%255s %4095s %63s %*[^\n]", dev, dir, type) == 3) {
		if (strcmp(type, "cgroup2") == 0) {
			snprintf(out, outlen, "%s", dir);
			rc = 0;
			break;
		}
	}
	fclose(f);
	return rc;
}
