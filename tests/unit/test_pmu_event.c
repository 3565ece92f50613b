/* SPDX-License-Identifier: Apache-2.0 */
/* The branch event per PMU vendor: the encodings of the vendors' manuals
 * (Intel SDM BR_INST_RETIRED, AMD PPR for family 19h PMCx0C2/PMCx0C4, Arm
 * BR_RETIRED 0x21), the vendor read from real /proc/cpuinfo lines, and the
 * event's attributes within what Arm's BRBE driver accepts. */
#include <errno.h>
#include <linux/perf_event.h>
#include <string.h>

#include "test_util.h"

#include "agent/source/live/pmu_event.h"
#include "bpf/edgeprof_record.h"

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
	assert_int_equal(e.max_entries, 32);
	assert_int_equal(ep_pmu_branch_event(EP_PMU_INTEL, "taken", &e, err, sizeof(err)), 0);
	assert_int_equal(e.config, 0x20c4);
	assert_false(e.counts_all);
	assert_true(e.taken_only); /* chopped in taken branches */
	assert_int_equal(ep_pmu_branch_event(EP_PMU_AMD, "branches", &e, err, sizeof(err)), 0);
	assert_int_equal(e.config, 0xc2);
	assert_int_equal(e.precise_ip, 0);
	assert_int_equal(e.max_entries, 16);
	assert_int_equal(ep_pmu_branch_event(EP_PMU_AMD, "taken", &e, err, sizeof(err)), 0);
	assert_int_equal(e.config, 0xc4);
	assert_true(e.taken_only);
	assert_int_equal(ep_pmu_branch_event(EP_PMU_ARM, "branches", &e, err, sizeof(err)), 0);
	assert_int_equal(e.config, 0x21);
	/* BRBE's records hold up to 64 entries, as the BPF record does */
	assert_int_equal(e.max_entries, 64);
	assert_int_equal(e.max_entries, EP_MAX_BRANCH_ENTRIES);
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

/* What Linux's BRBE driver accepts (drivers/perf/arm_brbe.c,
 * brbe_branch_attr_valid, merged in 2025): these filters and no others
 * (call stacks, transactions and counters are refused), at least one
 * branch type, the host not excluded, not both user and kernel. */
#define BRBE_ALLOWED                                                                               \
	(PERF_SAMPLE_BRANCH_USER | PERF_SAMPLE_BRANCH_KERNEL | PERF_SAMPLE_BRANCH_HV |             \
	 PERF_SAMPLE_BRANCH_ANY | PERF_SAMPLE_BRANCH_ANY_CALL | PERF_SAMPLE_BRANCH_ANY_RETURN |    \
	 PERF_SAMPLE_BRANCH_IND_CALL | PERF_SAMPLE_BRANCH_COND | PERF_SAMPLE_BRANCH_IND_JUMP |     \
	 PERF_SAMPLE_BRANCH_CALL | PERF_SAMPLE_BRANCH_NO_FLAGS | PERF_SAMPLE_BRANCH_NO_CYCLES |    \
	 PERF_SAMPLE_BRANCH_TYPE_SAVE | PERF_SAMPLE_BRANCH_HW_INDEX |                              \
	 PERF_SAMPLE_BRANCH_PRIV_SAVE)
#define BRBE_TYPES                                                                                 \
	(PERF_SAMPLE_BRANCH_ANY | PERF_SAMPLE_BRANCH_ANY_CALL | PERF_SAMPLE_BRANCH_ANY_RETURN |    \
	 PERF_SAMPLE_BRANCH_IND_CALL | PERF_SAMPLE_BRANCH_COND | PERF_SAMPLE_BRANCH_IND_JUMP |     \
	 PERF_SAMPLE_BRANCH_CALL)

/* Every mode's event for an Arm CPU, as the driver would see it: accepted,
 * sampling BR_RETIRED with a branch stack whose privilege filter matches
 * the event's (the kernel's branches only with --kernel), and call-graph
 * mode filtered to calls and returns only. */
static void test_arm_brbe_attributes(void **state)
{
	(void)state;
	struct ep_branch_event e;
	char err[256];
	assert_int_equal(ep_pmu_branch_event(EP_PMU_ARM, "branches", &e, err, sizeof(err)), 0);
	for (int calls = 0; calls < 2; calls++)
		for (int kernel = 0; kernel < 2; kernel++) {
			struct perf_event_attr a;
			memset(&a, 0xa5, sizeof(a)); /* nothing left from before */
			ep_pmu_branch_attr(&a, &e, 1000003, calls, kernel);
			uint64_t b = a.branch_sample_type;
			assert_int_equal(a.size, sizeof(a));
			assert_int_equal(a.type, PERF_TYPE_RAW);
			assert_int_equal(a.config, 0x21);
			assert_int_equal(a.sample_period, 1000003);
			assert_int_equal(a.sample_type, PERF_SAMPLE_IP | PERF_SAMPLE_BRANCH_STACK);
			assert_int_equal(b & ~(uint64_t)BRBE_ALLOWED, 0);
			assert_int_not_equal(b & BRBE_TYPES, 0);
			assert_int_equal(a.exclude_host, 0);
			assert_false(a.exclude_user && a.exclude_kernel);
			assert_int_equal(a.exclude_user, 0);
			assert_int_equal(a.exclude_kernel, !kernel);
			assert_int_equal(!!(b & PERF_SAMPLE_BRANCH_KERNEL), kernel);
			assert_int_not_equal(b & PERF_SAMPLE_BRANCH_USER, 0);
			if (calls)
				assert_int_equal(b & BRBE_TYPES, PERF_SAMPLE_BRANCH_ANY_CALL |
								     PERF_SAMPLE_BRANCH_ANY_RETURN);
			else
				assert_int_equal(b & BRBE_TYPES, PERF_SAMPLE_BRANCH_ANY);
			/* no other bit set: the attr was cleared first */
			assert_int_equal(a.disabled, 0);
			assert_int_equal(a.inherit, 0);
			assert_int_equal(a.freq, 0);
		}
}

/* The operator's line says what the machine lacks, for a missing PMU
 * feature only: a refusal for lack of privilege is not a missing PMU. */
static void test_no_branch_stack_hints(void **state)
{
	(void)state;
	assert_non_null(strstr(ep_pmu_no_branch_stack_hint(EP_PMU_ARM, EOPNOTSUPP), "FEAT_BRBE"));
	assert_non_null(strstr(ep_pmu_no_branch_stack_hint(EP_PMU_INTEL, ENOENT), "LBR"));
	assert_non_null(strstr(ep_pmu_no_branch_stack_hint(EP_PMU_AMD, ENOENT), "LbrExtV2"));
	assert_string_equal(ep_pmu_no_branch_stack_hint(EP_PMU_ARM, EACCES), "");
	assert_string_equal(ep_pmu_no_branch_stack_hint(EP_PMU_GENERIC, ENOENT), "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_vendor_from_cpuinfo),
	    cmocka_unit_test(test_events_per_vendor),
	    cmocka_unit_test(test_raw_and_bad_events),
	    cmocka_unit_test(test_arm_brbe_attributes),
	    cmocka_unit_test(test_no_branch_stack_hints),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
