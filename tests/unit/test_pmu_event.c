/* SPDX-License-Identifier: Apache-2.0 */
/* The branch event per PMU vendor: the encodings of the vendors' manuals
 * (Intel SDM BR_INST_RETIRED, AMD PPR for family 19h PMCx0C2/PMCx0C4, Arm
 * BR_RETIRED 0x21), and the vendor read from real /proc/cpuinfo lines. */
#include <linux/perf_event.h>
#include <string.h>

#include "test_util.h"

#include "agent/source/live/pmu_event.h"

static void test_vendor_from_cpuinfo(void **state)
{
	(void)state;
	assert_int_equal(ep_pmu_vendor_from_cpuinfo("processor\t: 0\nvendor_id\t: GenuineIntel\n"
						    "cpu family\t: 6\nmodel\t\t: 85\n"),
			 EP_PMU_INTEL);
	assert_int_equal(
	    ep_pmu_vendor_from_cpuinfo("vendor_id\t: AuthenticAMD\ncpu family\t: 25\n"),
	    EP_PMU_AMD);
	assert_int_equal(
	    ep_pmu_vendor_from_cpuinfo("processor\t: 0\nBogoMIPS\t: 50.00\n"
				       "CPU implementer\t: 0x41\nCPU architecture: 8\n"),
	    EP_PMU_ARM);
	assert_int_equal(ep_pmu_vendor_from_cpuinfo("processor\t: 0\nisa\t: rv64imafdc\n"),
			 EP_PMU_GENERIC);
}

static void test_events_per_vendor(void **state)
{
	(void)state;
	struct ep_branch_event e;
	char err[256];
	assert_int_equal(ep_pmu_branch_event(EP_PMU_INTEL, "branches", &e, err, sizeof(err)), 0);
	assert_int_equal(e.type, PERF_TYPE_RAW);
	assert_int_equal(e.config, 0x00c4);
	assert_int_equal(e.precise_ip, 2);
	assert_true(e.counts_all);
	assert_false(e.taken_only);
	assert_int_equal(ep_pmu_branch_event(EP_PMU_INTEL, "taken", &e, err, sizeof(err)), 0);
	assert_int_equal(e.config, 0x20c4);
	assert_false(e.counts_all);
	assert_true(e.taken_only); /* chopped in taken branches */
	assert_int_equal(ep_pmu_branch_event(EP_PMU_AMD, "branches", &e, err, sizeof(err)), 0);
	assert_int_equal(e.config, 0xc2);
	assert_int_equal(e.precise_ip, 0);
	assert_int_equal(ep_pmu_branch_event(EP_PMU_AMD, "taken", &e, err, sizeof(err)), 0);
	assert_int_equal(e.config, 0xc4);
	assert_true(e.taken_only);
	assert_int_equal(ep_pmu_branch_event(EP_PMU_ARM, "branches", &e, err, sizeof(err)), 0);
	assert_int_equal(e.config, 0x21);
	assert_int_equal(ep_pmu_branch_event(EP_PMU_ARM, "taken", &e, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "Arm has no retired-taken-branches event"));
	assert_int_equal(ep_pmu_branch_event(EP_PMU_GENERIC, "branches", &e, err, sizeof(err)), 0);
	assert_int_equal(e.type, PERF_TYPE_HARDWARE);
	assert_int_equal(e.config, PERF_COUNT_HW_BRANCH_INSTRUCTIONS);
}

static void test_raw_and_bad_events(void **state)
{
	(void)state;
	struct ep_branch_event e;
	char err[256];
	assert_int_equal(ep_pmu_branch_event(EP_PMU_AMD, "r1c4", &e, err, sizeof(err)), 0);
	assert_int_equal(e.type, PERF_TYPE_RAW);
	assert_int_equal(e.config, 0x1c4);
	assert_false(e.counts_all);
	assert_false(e.taken_only); /* a raw event's meaning is the user's */
	assert_int_equal(ep_pmu_branch_event(EP_PMU_AMD, "rxyz", &e, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "--event rxyz"));
	assert_int_equal(ep_pmu_branch_event(EP_PMU_INTEL, "cycles", &e, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "expected branches, taken or rHEX"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_vendor_from_cpuinfo),
	    cmocka_unit_test(test_events_per_vendor),
	    cmocka_unit_test(test_raw_and_bad_events),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
