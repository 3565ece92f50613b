/* SPDX-License-Identifier: Apache-2.0 */
/* A live process's mappings as the agent reads them at exec: asked of the
 * kernel (PROCMAP_QUERY, Linux 6.11) or read from the maps text, the same
 * addresses resolve the same way, code of no file included. */
#include "test_util.h"

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "agent/pipeline/pipeline.h"
#include "agent/source/live/live_feed.h"

static int in_this_binary(int x)
{
	return x * 3 + 1;
}

static void test_query_and_text_agree(void **state)
{
	(void)state;
	struct ep_binary_registry *reg = ep_binreg_new();
	struct ep_pipeline_config cfg;
	ep_pipeline_config_default(&cfg);
	struct ep_live_feed query, text;
	ep_live_feed_init(&query, ep_pipeline_new(&cfg, reg), NULL);
	ep_live_feed_init(&text, ep_pipeline_new(&cfg, reg), NULL);
	text.maps_text = true;
	void *jit = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(jit != MAP_FAILED);
	uint32_t pid = (uint32_t)getpid();
	ep_live_feed_read_maps(&query, pid);
	ep_live_feed_read_maps(&text, pid);
	if (query.maps_text)
		print_message("this kernel has no PROCMAP_QUERY: both read the text\n");
	const uint64_t addrs[] = {(uint64_t)(uintptr_t)in_this_binary, (uint64_t)(uintptr_t)strlen,
				  (uint64_t)(uintptr_t)mmap, (uint64_t)(uintptr_t)jit + 16};
	const enum ep_resolve_status want[] = {EP_RESOLVE_OK, EP_RESOLVE_OK, EP_RESOLVE_OK,
					       EP_RESOLVE_ANON_CODE};
	for (size_t i = 0; i < sizeof(addrs) / sizeof(addrs[0]); i++) {
		struct ep_resolved a, b;
		enum ep_resolve_status sa = ep_pipeline_resolve(query.pipeline, pid, addrs[i], &a);
		enum ep_resolve_status sb = ep_pipeline_resolve(text.pipeline, pid, addrs[i], &b);
		assert_int_equal(sa, want[i]);
		assert_int_equal(sb, want[i]);
		if (sa == EP_RESOLVE_OK) {
			assert_ptr_equal(a.bin, b.bin);
			assert_int_equal(a.vaddr, b.vaddr);
		}
	}
	assert_int_equal(query.maps_reads[EP_MAPS_AT_EXEC], 1);
	assert_int_equal(text.maps_reads[EP_MAPS_AT_EXEC], 1);
	/* a binary mapped by both is opened once: the second feed found it by
	 * its identity */
	struct ep_resolved a;
	assert_int_equal(ep_pipeline_resolve(query.pipeline, pid, addrs[0], &a), EP_RESOLVE_OK);
	size_t opened = ep_binreg_count(reg);
	ep_live_feed_read_maps(&text, pid);
	assert_int_equal(ep_binreg_count(reg), opened);
	munmap(jit, 4096);
	ep_live_feed_free(&query);
	ep_live_feed_free(&text);
	ep_binreg_free(reg);
}

/* A process that is gone is counted, not read. */
static void test_gone_process(void **state)
{
	(void)state;
	struct ep_binary_registry *reg = ep_binreg_new();
	struct ep_pipeline_config cfg;
	ep_pipeline_config_default(&cfg);
	struct ep_live_feed f;
	ep_live_feed_init(&f, ep_pipeline_new(&cfg, reg), NULL);
	ep_live_feed_read_maps(&f, 0x7ffffffe); /* above pid_max's limit */
	assert_int_equal(f.unresolved_pids, 1);
	assert_int_equal(f.maps_reads[EP_MAPS_AT_EXEC], 0);
	ep_live_feed_free(&f);
	ep_binreg_free(reg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_query_and_text_agree),
	    cmocka_unit_test(test_gone_process),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
