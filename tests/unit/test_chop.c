/* SPDX-License-Identifier: Apache-2.0 */
#include "test_util.h"

#include "agent/chop/chop.h"

static struct ep_trace make_trace(struct ep_trace_branch *b, size_t n, size_t last_cut)
{
	return (struct ep_trace){.branches = b, .n = n, .cap = n, .last_cut = last_cut};
}

static void test_keeps_last_c(void **state)
{
	(void)state;
	struct ep_trace_branch b[40] = {0};
	struct ep_trace t = make_trace(b, 40, 0);
	struct ep_chop_stats st = {0};
	assert_int_equal(ep_chop(&t, 32, &st), 8);
	assert_int_equal(st.branches_kept, 32);
	assert_int_equal(st.branches_short, 0);
}

static void test_never_reaches_over_a_cut(void **state)
{
	(void)state;
	struct ep_trace_branch b[40] = {0};
	struct ep_trace t = make_trace(b, 40, 30);
	struct ep_chop_stats st = {0};
	assert_int_equal(ep_chop(&t, 16, &st), 30);
	assert_int_equal(st.branches_kept, 10);
	assert_int_equal(st.branches_short, 6);
}

static void test_zero_keeps_everything_even_across_cuts(void **state)
{
	(void)state;
	struct ep_trace_branch b[40] = {0};
	struct ep_trace t = make_trace(b, 40, 30);
	struct ep_chop_stats st = {0};
	assert_int_equal(ep_chop(&t, 0, &st), 0);
	assert_int_equal(st.branches_kept, 40);
	assert_int_equal(st.branches_short, 0);
}

static void test_short_trace_counts_missing_slots(void **state)
{
	(void)state;
	struct ep_trace_branch b[5] = {0};
	struct ep_trace t = make_trace(b, 5, 0);
	struct ep_chop_stats st = {0};
	assert_int_equal(ep_chop(&t, 16, &st), 0);
	assert_int_equal(st.branches_short, 11);
	struct ep_trace empty = make_trace(b, 0, 0);
	assert_int_equal(ep_chop(&empty, 16, &st), 0);
	assert_int_equal(st.branches_short, 11);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_keeps_last_c),
	    cmocka_unit_test(test_never_reaches_over_a_cut),
	    cmocka_unit_test(test_zero_keeps_everything_even_across_cuts),
	    cmocka_unit_test(test_short_trace_counts_missing_slots),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
