/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target over the Kubernetes pod-list reader
 * (ep_k8s_parse_pod_list, agent/attribute/k8s_pods.h): the API server's
 * JSON answer, as received (no terminating NUL). Invariants for a list it
 * accepts: every string terminated inside its array, every container's pod
 * index within the pods, its id 64 lowercase hex digits.
 */
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/attribute/k8s_pods.h"
#include "tests/fuzz/fuzz_util.h"

#define FAIL(...) EP_FUZZ_FAIL("fuzz_k8s_pods", __VA_ARGS__)

#define TERMINATED(a) (memchr((a), '\0', sizeof(a)) != NULL)

static void check_list(const struct ep_k8s_pod_list *l)
{
	for (size_t i = 0; i < l->npods; i++) {
		const struct ep_k8s_pod *p = &l->pods[i];
		if (!TERMINATED(p->ns) || !TERMINATED(p->name) || !TERMINATED(p->uid))
			FAIL("pod %zu: a field is not terminated", i);
	}
	for (size_t i = 0; i < l->ncontainers; i++) {
		const struct ep_k8s_container *c = &l->containers[i];
		if (c->pod >= l->npods)
			FAIL("container %zu: pod %zu of %zu", i, c->pod, l->npods);
		if (!TERMINATED(c->id) || !TERMINATED(c->runtime) || !TERMINATED(c->name))
			FAIL("container %zu: a field is not terminated", i);
		if (strlen(c->id) != 64)
			FAIL("container %zu: id '%s' is not 64 digits", i, c->id);
		for (const char *d = c->id; *d; d++)
			if (!isxdigit((unsigned char)*d) || isupper((unsigned char)*d))
				FAIL("container %zu: id '%s' is not lowercase hex", i, c->id);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* the agent's body limit is 64 MiB; libFuzzer's inputs stay far below */
	char *json = malloc(size ? size : 1);
	if (!json)
		return 0;
	memcpy(json, data, size);
	struct ep_k8s_pod_list l;
	char err[512];
	if (ep_k8s_parse_pod_list(json, size, &l, err, sizeof(err)) == 0) {
		check_list(&l);
		ep_k8s_pod_list_free(&l);
	} else if (!memchr(err, '\0', sizeof(err)) || !err[0]) {
		FAIL("refused without a reason");
	}
	free(json);
	return 0;
}
