/* SPDX-License-Identifier: Apache-2.0 */
/* The agent's binary uploader (agent/stream/binary_upload.c): what it
 * remembers of the build-ids offered is bounded, whatever the node runs. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "test_util.h"

#include "agent/stream/binary_upload.h"
#include "common/util/collector_list.h"

/* Until the uploader has tried n build-ids: each fails at once, as nothing
 * listens at the collector's address. Polled, at most ~60 s. */
static void wait_tried(struct ep_uploader *u, uint64_t n)
{
	struct ep_upload_counters c = {0};
	for (int i = 0; i < 6000; i++) {
		ep_uploader_counters(u, &c);
		if (c.failed >= n)
			return;
		usleep(10000);
	}
	fail_msg("the uploader tried %llu of %llu build-ids", (unsigned long long)c.failed,
		 (unsigned long long)n);
}

static void offer(struct ep_uploader *u, uint64_t i)
{
	char id[32];
	snprintf(id, sizeof(id), "%016llx", (unsigned long long)i);
	ep_uploader_offer(u, id, "x86_64", "/nonexistent/binary");
}

/* Issue 32: the list of build-ids offered grew by one entry for every
 * binary any container ran, for the agent's lifetime (and was searched
 * whole at every offer). It keeps the latest EP_UPLOADER_REMEMBERED: 100
 * more are counted as forgotten, the newest is still known (not sent
 * again within its minute), the oldest is asked about again. */
static void test_offered_build_ids_are_bounded(void **state)
{
	(void)state;
	char err[256];
	struct ep_collector_list *l =
	    ep_collector_list_parse("http://127.0.0.1:1", err, sizeof(err));
	assert_non_null(l);
	struct ep_streamer_config cfg = {0};
	struct ep_uploader *u = ep_uploader_start(&cfg, l, 1 << 20, err, sizeof(err));
	if (!u)
		fail_msg("%s", err);
	const uint64_t n = EP_UPLOADER_REMEMBERED + 100;
	for (uint64_t i = 0; i < n; i++) {
		offer(u, i);
		/* the queue holds 256: let it drain */
		if ((i + 1) % 128 == 0)
			wait_tried(u, i + 1);
	}
	wait_tried(u, n);
	struct ep_upload_counters c;
	ep_uploader_counters(u, &c);
	assert_int_equal(c.forgotten, 100);
	offer(u, n - 1);
	offer(u, 0);
	wait_tried(u, n + 1);
	ep_uploader_finish(u, 60000);
	ep_uploader_counters(u, &c);
	assert_int_equal(c.failed, n + 1);
	assert_int_equal(c.forgotten, 101);
	ep_uploader_free(u);
	ep_collector_list_free(l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_offered_build_ids_are_bounded),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
