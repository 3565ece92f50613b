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

static struct ep_trace_branch br(bool taken)
{
	return (struct ep_trace_branch){.taken = taken};
}

static void test_taken_keeps_last_c_taken_with_their_gaps(void **state)
{
	(void)state;
	/* oldest first: T N N T N T T N T */
	struct ep_trace_branch b[] = {br(1), br(0), br(0), br(1), br(0),
				      br(1), br(1), br(0), br(1)};
	struct ep_trace t = make_trace(b, 9, 0);
	struct ep_chop_stats st = {0};
	/* two pairs: (T at 6), (N at 7, T at 8); the T at 5 bounds them */
	assert_int_equal(ep_chop_taken(&t, 2, &st), 6);
	assert_int_equal(st.branches_kept, 3);
	assert_int_equal(st.branches_short, 0);
	/* C = entries - 1: all but the oldest taken branch */
	st = (struct ep_chop_stats){0};
	assert_int_equal(ep_chop_taken(&t, 4, &st), 1);
	assert_int_equal(st.branches_kept, 8);
	assert_int_equal(st.branches_short, 0);
}

static void test_taken_never_reaches_over_a_cut(void **state)
{
	(void)state;
	/* T N T N | T(cut) N T T */
	struct ep_trace_branch b[] = {br(1), br(0), br(1), br(0), br(1), br(0), br(1), br(1)};
	b[4].cut_before = true;
	struct ep_trace t = make_trace(b, 8, 4);
	struct ep_chop_stats st = {0};
	/* the taken branch after the cut has no known gap: it only bounds */
	assert_int_equal(ep_chop_taken(&t, 8, &st), 5);
	assert_int_equal(st.branches_kept, 3);
	assert_int_equal(st.branches_short, 6);
	struct ep_trace_branch nt[] = {br(0), br(0)};
	struct ep_trace none = make_trace(nt, 2, 0);
	assert_int_equal(ep_chop_taken(&none, 8, &st), 2);
	assert_int_equal(st.branches_kept, 3);
}

/* The property the taken chop is for: sampled at every taken branch of a
 * long run, with an N-entry stack, each branch of the run (taken or not)
 * is counted by exactly C = N-1 samples. The chop in branches, on the same
 * samples, counts branches in not-taken-dense stretches less often. */
static void test_taken_chop_counts_every_branch_equally(void **state)
{
	(void)state;
	enum { RUN = 4000, N = 8 };
	static struct ep_trace_branch run[RUN];
	static unsigned counted_taken[RUN], counted_branches[RUN];
	uint64_t x = 88172645463325252ULL;
	for (size_t i = 0; i < RUN; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		/* stretches where not-taken branches are dense, and others */
		run[i] = br((i / 300) % 2 ? x % 5 == 0 : x % 3 != 0);
		run[i].site = (uint32_t)i;
	}
	size_t takens[RUN], nt = 0;
	for (size_t i = 0; i < RUN; i++)
		if (run[i].taken)
			takens[nt++] = i;
	for (size_t s = N - 1; s < nt; s++) {
		/* the stack's full trace: from its oldest entry to its newest */
		size_t from = takens[s - (N - 1)], to = takens[s] + 1;
		struct ep_trace t = make_trace(run + from, to - from, 0);
		struct ep_chop_stats st = {0};
		for (size_t k = from + ep_chop_taken(&t, N - 1, &st); k < to; k++)
			counted_taken[k]++;
		for (size_t k = from + ep_chop(&t, N, &st); k < to; k++)
			counted_branches[k]++;
	}
	unsigned lo = ~0u, hi = 0;
	for (size_t i = takens[2 * N]; i < takens[nt - 2 * N]; i++) {
		assert_int_equal(counted_taken[i], N - 1);
		lo = counted_branches[i] < lo ? counted_branches[i] : lo;
		hi = counted_branches[i] > hi ? counted_branches[i] : hi;
	}
	assert_true(hi > lo); /* the branch-unit chop is not uniform here */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_keeps_last_c),
	    cmocka_unit_test(test_taken_keeps_last_c_taken_with_their_gaps),
	    cmocka_unit_test(test_taken_never_reaches_over_a_cut),
	    cmocka_unit_test(test_taken_chop_counts_every_branch_equally),
	    cmocka_unit_test(test_never_reaches_over_a_cut),
	    cmocka_unit_test(test_zero_keeps_everything_even_across_cuts),
	    cmocka_unit_test(test_short_trace_counts_missing_slots),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
