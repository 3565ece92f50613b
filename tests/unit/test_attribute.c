/* SPDX-License-Identifier: Apache-2.0 */
/* Container attribution on the cgroup paths runtimes really write
 * (containerd, CRI-O, docker, podman; systemd and cgroupfs drivers; cgroup
 * v1, v2 and hybrid /proc/PID/cgroup files). */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_util.h"

#include "agent/attribute/container.h"
#include "agent/attribute/process_labels.h"

#define ID    "3f2a9c0e8d7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a19"
#define UID_  "5f4b0c58-3a8b-4b3e-9b8e-3c2f6f8d9a11"
#define UID_U "5f4b0c58_3a8b_4b3e_9b8e_3c2f6f8d9a11"

static void expect(const char *path, const char *runtime, const char *pod_uid, bool monitor)
{
	struct ep_container_ref r;
	if (!ep_container_from_cgroup(path, &r))
		fail_msg("no container found in %s", path);
	assert_string_equal(r.runtime, runtime);
	assert_string_equal(r.id, ID);
	assert_string_equal(r.pod_uid, pod_uid);
	assert_int_equal(r.monitor, monitor);
}

static void test_runtime_path_formats(void **state)
{
	(void)state;
	/* Kubernetes + containerd, systemd cgroup driver, burstable and guaranteed */
	expect("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_U
	       ".slice/cri-containerd-" ID ".scope",
	       "containerd", UID_, false);
	expect("/kubepods.slice/kubepods-pod" UID_U ".slice/cri-containerd-" ID ".scope",
	       "containerd", UID_, false);
	/* Kubernetes, cgroupfs driver (containerd or dockershim) */
	expect("/kubepods/besteffort/pod" UID_ "/" ID, "kubernetes", UID_, false);
	/* CRI-O, and its conmon monitor */
	expect("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UID_U
	       ".slice/crio-" ID ".scope",
	       "cri-o", UID_, false);
	expect("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UID_U
	       ".slice/crio-conmon-" ID ".scope",
	       "cri-o", UID_, true);
	/* docker: cgroupfs and systemd drivers */
	expect("/docker/" ID, "docker", "", false);
	expect("/system.slice/docker-" ID ".scope", "docker", "", false);
	/* podman: rootful systemd, cgroupfs (our VMs), rootless, conmon */
	expect("/machine.slice/libpod-" ID ".scope", "podman", "", false);
	expect("/libpod_parent/libpod-" ID, "podman", "", false);
	expect("/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" ID ".scope",
	       "podman", "", false);
	expect("/machine.slice/libpod-conmon-" ID ".scope", "podman", "", true);
	/* a process in a sub-cgroup of the container still belongs to it */
	expect("/system.slice/docker-" ID ".scope/init.scope", "docker", "", false);
}

static void test_paths_without_containers(void **state)
{
	(void)state;
	struct ep_container_ref r;
	assert_false(ep_container_from_cgroup("/", &r));
	assert_false(ep_container_from_cgroup("/system.slice/nginx.service", &r));
	assert_false(ep_container_from_cgroup("/user.slice/user-1000.slice/session-2.scope", &r));
	/* 63 hex digits, uppercase, or a non-hex character: not an id */
	assert_false(ep_container_from_cgroup("/docker/" ID "x", &r));
	assert_false(ep_container_from_cgroup(
	    "/docker/3F2A9C0E8D7B6A5F4E3D2C1B0A9F8E7D6C5B4A3F2E1D0C9B8A7F6E5D4C3B2A19", &r));
	assert_false(ep_container_from_cgroup("/kubepods.slice/kubepods-pod" UID_U ".slice", &r));
	assert_string_equal(r.id, "");
}

/* fuzz_proc_cgroup's first finding: a component shaped like a pod uid
 * with a bad character in it wrote the characters before it over the uid
 * found so far (regression input tests/fuzz/corpus/proc_cgroup/regress_pod_uid_mix) */
static void test_pod_uid_never_mixed(void **state)
{
	(void)state;
	/* "pod" and 36 characters, the 2nd not a hex digit: no uid at all */
	expect("/kubepods/besteffort/podbzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz/" ID, "kubernetes", "",
	       false);
	/* the same below a real pod: the real pod's uid, untouched */
	expect("/kubepods/besteffort/pod" UID_ "/pod7x4b0c58-3a8b-4b3e-9b8e-3c2f6f8d9a11/" ID,
	       "kubernetes", UID_, false);
}

static void test_proc_cgroup_files(void **state)
{
	(void)state;
	char path[4096];
	/* cgroup v2 */
	assert_true(
	    ep_cgroup_from_proc("0::/system.slice/docker-" ID ".scope\n", path, sizeof(path)));
	assert_string_equal(path, "/system.slice/docker-" ID ".scope");
	/* cgroup v1: pids first, "cpu,cpuacct" counts as cpu */
	const char *v1 = "12:cpu,cpuacct:/kubepods/burstable/pod" UID_ "/" ID "\n"
			 "11:memory:/kubepods/burstable/pod" UID_ "/" ID "\n"
			 "10:pids:/kubepods/burstable/pod" UID_ "/" ID "\n"
			 "1:name=systemd:/kubepods/burstable/pod" UID_ "/" ID "\n";
	assert_true(ep_cgroup_from_proc(v1, path, sizeof(path)));
	assert_string_equal(path, "/kubepods/burstable/pod" UID_ "/" ID);
	/* hybrid, the container only in v1 (v2 at the root): the v1 path */
	const char *hybrid =
	    "9:name=systemd:/\n8:pids:/\n4:memory:/libpod_parent/libpod-" ID "\n1:cpu:/\n0::/\n";
	assert_true(ep_cgroup_from_proc(hybrid, path, sizeof(path)));
	assert_string_equal(path, "/libpod_parent/libpod-" ID);
	/* hybrid with the container in v2 too: v2 wins */
	const char *both = "8:pids:/libpod_parent/libpod-" ID "\n0::/libpod_parent/libpod-" ID "\n";
	assert_true(ep_cgroup_from_proc(both, path, sizeof(path)));
	assert_string_equal(path, "/libpod_parent/libpod-" ID);
	/* a host process: nothing to say */
	assert_false(ep_cgroup_from_proc("8:pids:/\n0::/\n", path, sizeof(path)));
}

static void test_find_a_container_cgroup(void **state)
{
	(void)state;
	char root[] = "/tmp/edgeprof-cg-XXXXXX";
	assert_non_null(mkdtemp(root));
	char dir[512], out[512], err[256];
	snprintf(dir, sizeof(dir), "%s/machine.slice", root);
	mkdir(dir, 0700);
	snprintf(dir, sizeof(dir), "%s/machine.slice/libpod-%s.scope", root, ID);
	mkdir(dir, 0700);
	snprintf(dir, sizeof(dir), "%s/machine.slice/libpod-conmon-%s.scope", root, ID);
	mkdir(dir, 0700);
	assert_int_equal(ep_container_find_cgroup(root, ID, out, sizeof(out), err, sizeof(err)), 0);
	snprintf(dir, sizeof(dir), "%s/machine.slice/libpod-%s.scope", root, ID);
	assert_string_equal(out, dir);
	/* a 12-digit prefix, like `podman ps` shows */
	assert_int_equal(
	    ep_container_find_cgroup(root, "3f2a9c0e8d7b", out, sizeof(out), err, sizeof(err)), 0);
	assert_int_equal(
	    ep_container_find_cgroup(root, "0123456789ab", out, sizeof(out), err, sizeof(err)), -1);
	assert_non_null(strstr(err, "unknown"));
	assert_int_equal(ep_container_find_cgroup(root, "xyz", out, sizeof(out), err, sizeof(err)),
			 -1);
	assert_non_null(strstr(err, "hex"));
	snprintf(dir, sizeof(dir), "rm -rf %s", root);
	assert_int_equal(system(dir), 0);
}

/* A pod's cgroup from its uid: the kubelet's directory, systemd driver
 * (underscores) or cgroupfs (dashes), not a container's inside it. */
static void test_find_a_pod_cgroup(void **state)
{
	(void)state;
	char root[] = "/tmp/edgeprof-cg-XXXXXX";
	assert_non_null(mkdtemp(root));
	char dir[512], out[512];
	static const char *const made[] = {
	    "kubepods.slice",
	    "kubepods.slice/kubepods-burstable.slice",
	    "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_U ".slice",
	    "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_U
	    ".slice/cri-containerd-" ID ".scope",
	    "kubepods",
	    "kubepods/besteffort",
	    "kubepods/besteffort/pod0a1b2c3d-0000-4000-8000-000000000001"};
	for (size_t i = 0; i < sizeof(made) / sizeof(made[0]); i++) {
		snprintf(dir, sizeof(dir), "%s/%s", root, made[i]);
		assert_int_equal(mkdir(dir, 0700), 0);
	}
	assert_int_equal(ep_pod_find_cgroup(root, UID_, out, sizeof(out)), 0);
	snprintf(dir, sizeof(dir), "%s/%s", root, made[2]);
	assert_string_equal(out, dir);
	assert_int_equal(
	    ep_pod_find_cgroup(root, "0a1b2c3d-0000-4000-8000-000000000001", out, sizeof(out)), 0);
	snprintf(dir, sizeof(dir), "%s/%s", root, made[6]);
	assert_string_equal(out, dir);
	assert_int_equal(
	    ep_pod_find_cgroup(root, "0a1b2c3d-0000-4000-8000-000000000009", out, sizeof(out)), -1);
	assert_int_equal(ep_pod_find_cgroup(root, "", out, sizeof(out)), -1);
	snprintf(dir, sizeof(dir), "rm -rf %s", root);
	assert_int_equal(system(dir), 0);
}

/* This process's cgroup v2 path and id; one made for the test (and this
 * process moved into it, *made set) when it sits in v2's root, whose
 * processes /proc names by a v1 hierarchy on hybrid hosts. false when
 * there is no cgroup v2 we can use. */
static bool own_v2_cgroup(const char *root, char *cgroup, size_t len, uint64_t *id, char *made,
			  size_t madelen)
{
	char text[4096], full[PATH_MAX + 256];
	struct stat st;
	made[0] = '\0';
	for (int attempt = 0; attempt < 2; attempt++) {
		FILE *f = fopen("/proc/self/cgroup", "r");
		size_t n = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
		if (f)
			fclose(f);
		text[n] = '\0';
		char *v2 = strstr(text, "0::");
		if (v2 && v2[3] == '/' && v2[4] != '\n' && v2[4] != '\0' &&
		    ep_cgroup_from_proc(text, cgroup, len)) {
			snprintf(full, sizeof(full), "%s%s", root, cgroup);
			if (stat(full, &st) != 0)
				return false; /* a cgroup namespace hiding the path */
			*id = (uint64_t)st.st_ino;
			return true;
		}
		if (attempt || geteuid() != 0)
			return false;
		snprintf(made, madelen, "%s/edgeprof-test-%d", root, (int)getpid());
		snprintf(full, sizeof(full), "%s/cgroup.procs", made);
		FILE *procs = mkdir(made, 0755) == 0 ? fopen(full, "w") : NULL;
		bool moved = procs && fprintf(procs, "%d\n", (int)getpid()) > 0;
		if (procs && fclose(procs) != 0)
			moved = false;
		if (!moved)
			return false;
	}
	return false;
}

/* Back to v2's root, and the test's cgroup gone. */
static void leave_made_cgroup(const char *root, const char *made)
{
	if (!made[0])
		return;
	char path[PATH_MAX + 64];
	snprintf(path, sizeof(path), "%s/cgroup.procs", root);
	FILE *procs = fopen(path, "w");
	if (procs) {
		fprintf(procs, "%d\n", (int)getpid());
		fclose(procs);
	}
	rmdir(made);
}

/* A process labelled by its cgroup id: /proc/PID/cgroup is read for the
 * first process of a cgroup, not for the next ones; an id that is not the
 * cgroup /proc names (a process moved between its event and the read) is
 * never remembered, and neither is an unknown one (0). */
static void test_labels_read_once_per_cgroup(void **state)
{
	(void)state;
	char root[256], cgroup[PATH_MAX], made[PATH_MAX];
	uint64_t id = 0;
	if (ep_cgroup2_root(root, sizeof(root)) != 0)
		skip();
	if (!own_v2_cgroup(root, cgroup, sizeof(cgroup), &id, made, sizeof(made))) {
		leave_made_cgroup(root, made);
		skip();
	}
	struct ep_process_labeller l;
	ep_process_labeller_init(&l, NULL);
	uint32_t pid = (uint32_t)getpid();
	const Edgeprof__V1__Labels *labels;
	ep_process_label(&l, pid, id + 1, &labels);
	ep_process_label(&l, pid, id + 1, &labels);
	uint64_t wrong_id_reads = l.cgroup_reads;
	ep_process_label(&l, pid, id, &labels);
	ep_process_label(&l, pid, id, &labels);
	ep_process_label(&l, pid, id, &labels);
	uint64_t reads = l.cgroup_reads, hits = l.cgroup_hits;
	ep_process_label(&l, pid, 0, &labels);
	uint64_t unknown_reads = l.cgroup_reads - reads;
	ep_process_labeller_free(&l);
	leave_made_cgroup(root, made);
	assert_int_equal(wrong_id_reads, 2);
	assert_int_equal(reads, 3);
	assert_int_equal(hits, 2);
	assert_int_equal(unknown_reads, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_runtime_path_formats),
	    cmocka_unit_test(test_paths_without_containers),
	    cmocka_unit_test(test_pod_uid_never_mixed),
	    cmocka_unit_test(test_proc_cgroup_files),
	    cmocka_unit_test(test_find_a_container_cgroup),
	    cmocka_unit_test(test_find_a_pod_cgroup),
	    cmocka_unit_test(test_labels_read_once_per_cgroup),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
