/* SPDX-License-Identifier: Apache-2.0 */
/* The shared record's flag bits sit where the kernel's perf_branch_entry
 * bitfields are, so entries copied from the kernel read right. */
#include "test_util.h"

#include <linux/perf_event.h>
#include <string.h>

#include "bpf/edgeprof_record.h"

static void test_branch_entry_bits_match_the_kernel(void **state)
{
	(void)state;
	assert_int_equal(sizeof(struct ep_branch_entry), sizeof(struct perf_branch_entry));
	struct perf_branch_entry k = {0};
	k.from = 0x1234;
	k.to = 0x5678;
	k.mispred = 1;
	k.in_tx = 1;
	k.cycles = 0xbeef;
	k.type = 0x9;
	struct ep_branch_entry e;
	memcpy(&e, &k, sizeof(e));
	assert_int_equal(e.from, 0x1234);
	assert_int_equal(e.to, 0x5678);
	assert_true(e.flags & EP_BR_MISPRED);
	assert_false(e.flags & EP_BR_PREDICTED);
	assert_true(e.flags & EP_BR_IN_TX);
	assert_false(e.flags & EP_BR_ABORT);
	assert_int_equal((e.flags & EP_BR_CYCLES_MASK) >> EP_BR_CYCLES_SHIFT, 0xbeef);
	assert_int_equal((e.flags & EP_BR_TYPE_MASK) >> EP_BR_TYPE_SHIFT, 0x9);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_branch_entry_bits_match_the_kernel),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
