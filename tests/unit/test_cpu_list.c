/* SPDX-License-Identifier: Apache-2.0 */
/* The kernel's CPU list format (Documentation/admin-guide/cputopology.rst:
 * /sys/devices/system/cpu/online), which the agent reads to follow CPU
 * hotplug: ranges, single CPUs, the trailing newline, and text that is not
 * a list refused rather than read as CPU 0. */
#include <stdint.h>
#include <string.h>

#include "test_util.h"

#include "agent/source/live/live_source.h"

#define MAX 16

/* the CPUs set, as a string of 0/1 for CPUs 0..MAX-1 */
static const char *bits(const uint8_t *online)
{
	static char s[MAX + 1];
	for (int i = 0; i < MAX; i++)
		s[i] = online[i] ? '1' : '0';
	s[MAX] = '\0';
	return s;
}

static void test_lists(void **state)
{
	(void)state;
	uint8_t on[MAX];
	assert_int_equal(ep_cpu_list_parse("0-3,5,7-8\n", on, MAX), 7);
	assert_string_equal(bits(on), "1111010110000000");
	assert_int_equal(ep_cpu_list_parse("0\n", on, MAX), 1);
	assert_string_equal(bits(on), "1000000000000000");
	assert_int_equal(ep_cpu_list_parse("1", on, MAX), 1);
	assert_string_equal(bits(on), "0100000000000000");
	assert_int_equal(ep_cpu_list_parse("0,2,4-5", on, MAX), 4);
	assert_string_equal(bits(on), "1010110000000000");
	/* an offline CPU 0 (arm64, some x86 configurations) */
	assert_int_equal(ep_cpu_list_parse("1-15\n", on, MAX), 15);
	assert_string_equal(bits(on), "0111111111111111");
	/* every CPU offline but none: an empty list */
	assert_int_equal(ep_cpu_list_parse("\n", on, MAX), 0);
	assert_string_equal(bits(on), "0000000000000000");
}

static void test_beyond_max(void **state)
{
	(void)state;
	uint8_t on[MAX];
	/* CPUs past what the caller tracks are left out, not written */
	assert_int_equal(ep_cpu_list_parse("14-20,100\n", on, MAX), 2);
	assert_string_equal(bits(on), "0000000000000011");
	/* overlapping ranges count each CPU once */
	assert_int_equal(ep_cpu_list_parse("0-2,1-3", on, MAX), 4);
}

static void test_not_a_list(void **state)
{
	(void)state;
	uint8_t on[MAX];
	const char *bad[] = {"a", "1-", "-1", "3-1", "0,,1", "0 1", "1;2", "0-x", "+1", "0--2"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (ep_cpu_list_parse(bad[i], on, MAX) != -1)
			fail_msg("'%s' was taken for a CPU list", bad[i]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_lists),
	    cmocka_unit_test(test_beyond_max),
	    cmocka_unit_test(test_not_a_list),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
