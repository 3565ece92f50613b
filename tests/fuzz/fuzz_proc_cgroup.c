/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target over the /proc/PID/cgroup parser and the container-id
 * reader behind it (agent/attribute/container.h): ep_cgroup_from_proc() on
 * the text as the labeller reads it (NUL-terminated), then
 * ep_container_from_cgroup() on the path it picks, as
 * agent/attribute/process_labels.c does; the path is also taken into a
 * buffer too small for most paths, which must be refused or cut, never
 * overrun. Invariants: the id is 64 lowercase hex digits, the pod UID 36
 * characters or empty, every string terminated inside its array.
 */
#include <ctype.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/attribute/container.h"
#include "tests/fuzz/fuzz_util.h"

#define FAIL(...) EP_FUZZ_FAIL("fuzz_proc_cgroup", __VA_ARGS__)

static void check_ref(const struct ep_container_ref *r)
{
	if (!memchr(r->runtime, '\0', sizeof(r->runtime)) || !memchr(r->id, '\0', sizeof(r->id)) ||
	    !memchr(r->pod_uid, '\0', sizeof(r->pod_uid)))
		FAIL("a container field is not terminated");
	if (strlen(r->id) != 64)
		FAIL("container id '%s' is not 64 digits", r->id);
	for (const char *c = r->id; *c; c++)
		if (!isxdigit((unsigned char)*c) || isupper((unsigned char)*c))
			FAIL("container id '%s' is not lowercase hex", r->id);
	size_t uid = strlen(r->pod_uid);
	if (uid != 0 && uid != 36)
		FAIL("pod uid '%s' of %zu characters", r->pod_uid, uid);
}

static void from_cgroup(const char *path)
{
	struct ep_container_ref ref;
	memset(&ref, 0xa5, sizeof(ref)); /* nothing may be read before it is written */
	if (ep_container_from_cgroup(path, &ref))
		check_ref(&ref);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* /proc/PID/cgroup is read into 4 KiB (process_labels.c) */
	if (size > 4095)
		return 0;
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	char *cgroup = malloc(PATH_MAX);
	char small[24];
	if (cgroup && ep_cgroup_from_proc(text, cgroup, PATH_MAX)) {
		if (!memchr(cgroup, '\0', PATH_MAX))
			FAIL("cgroup path not terminated");
		from_cgroup(cgroup);
	}
	if (ep_cgroup_from_proc(text, small, sizeof(small)) && !memchr(small, '\0', sizeof(small)))
		FAIL("cgroup path not terminated in a small buffer");
	/* the text itself as a cgroup path: the CLI and sessions pass paths
	 * given by users to ep_container_from_cgroup */
	from_cgroup(text);
	free(cgroup);
	free(text);
	return 0;
}
