/* SPDX-License-Identifier: Apache-2.0 */
/* The API server's PodList as the agent reads it: which containers belong
 * to which pod, what is skipped (containers not started yet, other
 * runtimes), and what is refused (not a pod list) with the reason. */
#include <string.h>

#include "test_util.h"

#include "agent/attribute/k8s_pods.h"

#define H1 "1111111111111111111111111111111111111111111111111111111111111111"
#define H2 "2222222222222222222222222222222222222222222222222222222222222222"
#define H3 "3333333333333333333333333333333333333333333333333333333333333333"
#define H4 "4444444444444444444444444444444444444444444444444444444444444444"
#define H5 "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789"

/* trimmed from a real kubectl get --raw answer: the fields the agent reads
 * among the ones it must ignore */
static const char pod_list[] =
    "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"81234\"},"
    "\"items\":["
    /* containerd, an init container that ran, a sidecar */
    "{\"metadata\":{\"name\":\"web-7d9f\",\"generateName\":\"web-\",\"namespace\":\"shop\","
    "\"uid\":\"5f4b0c58-3a8b-4b3e-9b8e-3c2f6f8d9a11\",\"labels\":{\"app\":\"web\"}},"
    "\"spec\":{\"nodeName\":\"node-1\",\"containers\":[{\"name\":\"web\"},{\"name\":\"proxy\"}]},"
    "\"status\":{\"phase\":\"Running\",\"podIP\":\"10.0.0.7\","
    "\"initContainerStatuses\":[{\"name\":\"migrate\",\"state\":{\"terminated\":{\"exitCode\":0}},"
    "\"containerID\":\"containerd://" H1 "\",\"image\":\"migrate:1\"}],"
    "\"containerStatuses\":[{\"name\":\"web\",\"ready\":true,\"restartCount\":0,"
    "\"containerID\":\"containerd://" H2 "\"},"
    "{\"name\":\"proxy\",\"ready\":true,\"containerID\":\"containerd://" H3 "\"}]}},"
    /* CRI-O; a container still waiting (no containerID), one with an
     * empty one */
    "{\"metadata\":{\"name\":\"db-0\",\"namespace\":\"data\","
    "\"uid\":\"0a1b2c3d-0000-4000-8000-000000000001\"},"
    "\"status\":{\"phase\":\"Pending\",\"containerStatuses\":["
    "{\"name\":\"db\",\"containerID\":\"cri-o://" H4 "\"},"
    "{\"name\":\"backup\",\"state\":{\"waiting\":{\"reason\":\"ContainerCreating\"}}},"
    "{\"name\":\"metrics\",\"containerID\":\"\"}]}},"
    /* docker (dockershim), an ephemeral debug container; another runtime
     * and a malformed id are skipped */
    "{\"metadata\":{\"name\":\"legacy\",\"namespace\":\"default\","
    "\"uid\":\"0a1b2c3d-0000-4000-8000-000000000002\"},"
    "\"status\":{\"containerStatuses\":[{\"name\":\"app\",\"containerID\":\"docker://" H5 "\"},"
    "{\"name\":\"vm\",\"containerID\":\"kata://" H1 "\"},"
    "{\"name\":\"short\",\"containerID\":\"containerd://abc\"}],"
    "\"ephemeralContainerStatuses\":[{\"name\":\"debug\",\"containerID\":\"containerd://" H1
    "\"}]}},"
    /* scheduled, nothing started: no status at all */
    "{\"metadata\":{\"name\":\"new-1\",\"namespace\":\"shop\","
    "\"uid\":\"0a1b2c3d-0000-4000-8000-000000000003\"},\"spec\":{\"nodeName\":\"node-1\"}}"
    "]}";

static const struct ep_k8s_container *find(const struct ep_k8s_pod_list *l, const char *id,
					   const char *name)
{
	for (size_t i = 0; i < l->ncontainers; i++)
		if (strcmp(l->containers[i].id, id) == 0 &&
		    strcmp(l->containers[i].name, name) == 0)
			return &l->containers[i];
	return NULL;
}

static void test_pod_list(void **state)
{
	(void)state;
	struct ep_k8s_pod_list l;
	char err[256] = "";
	assert_int_equal(ep_k8s_parse_pod_list(pod_list, strlen(pod_list), &l, err, sizeof(err)),
			 0);
	assert_int_equal(l.npods, 4);
	assert_string_equal(l.pods[0].ns, "shop");
	assert_string_equal(l.pods[0].name, "web-7d9f");
	assert_string_equal(l.pods[0].uid, "5f4b0c58-3a8b-4b3e-9b8e-3c2f6f8d9a11");
	assert_string_equal(l.pods[3].name, "new-1");
	/* migrate, web, proxy, db, app, debug: not backup (waiting), metrics
	 * (empty), vm (kata), short */
	assert_int_equal(l.ncontainers, 6);
	const struct ep_k8s_container *c = find(&l, H1, "migrate");
	assert_non_null(c);
	assert_int_equal(c->pod, 0);
	assert_string_equal(c->runtime, "containerd");
	assert_non_null(c = find(&l, H2, "web"));
	assert_int_equal(c->pod, 0);
	assert_non_null(c = find(&l, H3, "proxy"));
	assert_int_equal(c->pod, 0);
	assert_non_null(c = find(&l, H4, "db"));
	assert_int_equal(c->pod, 1);
	assert_string_equal(c->runtime, "cri-o");
	assert_non_null(c = find(&l, H5, "app"));
	assert_int_equal(c->pod, 2);
	assert_string_equal(c->runtime, "docker");
	assert_non_null(c = find(&l, H1, "debug"));
	assert_int_equal(c->pod, 2);
	for (size_t i = 0; i < l.ncontainers; i++)
		assert_string_not_equal(l.containers[i].name, "backup");
	ep_k8s_pod_list_free(&l);

	const char *empty = "{\"kind\":\"PodList\",\"items\":[]}";
	assert_int_equal(ep_k8s_parse_pod_list(empty, strlen(empty), &l, err, sizeof(err)), 0);
	assert_int_equal(l.npods, 0);
	assert_int_equal(l.ncontainers, 0);
	ep_k8s_pod_list_free(&l);
}

static void refused(const char *json, size_t len, const char *why)
{
	struct ep_k8s_pod_list l;
	char err[256] = "";
	assert_int_equal(ep_k8s_parse_pod_list(json, len, &l, err, sizeof(err)), -1);
	if (!strstr(err, why))
		fail_msg("expected '%s' in '%s'", why, err);
	assert_null(l.pods);
	assert_null(l.containers);
}

static void test_bad_pod_lists(void **state)
{
	(void)state;
	refused("", 0, "pod list: not JSON: truncated");
	refused("{\"items\": [", 11, "pod list: not JSON: truncated");
	refused("{\"items\": [}", 12, "pod list: not JSON:");
	refused("<html>502 Bad Gateway</html>", 28, "pod list: not JSON:");
	/* what the API server answers a request it refuses */
	const char *status =
	    "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"Forbidden\"}";
	refused(status, strlen(status), "pod list: no \"items\" array (kind Status)");
	refused("[1,2]", 5, "pod list: no \"items\" array");
	const char *no_ns = "{\"items\":[{\"metadata\":{\"name\":\"a\",\"uid\":\"u\"}}]}";
	refused(no_ns, strlen(no_ns), "pod list: item 0: metadata.namespace missing");
	const char *no_uid =
	    "{\"items\":[{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\","
	    "\"uid\":\"u\"}},{\"metadata\":{\"name\":\"b\",\"namespace\":\"n\"}}]}";
	refused(no_uid, strlen(no_uid), "pod list: item 1: metadata.uid missing");
	/* a prefix of the good list: cut anywhere, never accepted */
	refused(pod_list, strlen(pod_list) / 2, "pod list: not JSON: truncated");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_pod_list),
	    cmocka_unit_test(test_bad_pod_lists),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
