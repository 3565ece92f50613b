/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/source/live/pmu_event.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum ep_pmu_vendor ep_pmu_vendor_from_cpuinfo(const char *cpuinfo)
{
	if (strstr(cpuinfo, "GenuineIntel"))
		return EP_PMU_INTEL;
	if (strstr(cpuinfo, "AuthenticAMD") || strstr(cpuinfo, "HygonGenuine"))
		return EP_PMU_AMD;
	/* arm64 lists "CPU implementer : 0x41" (Arm) and others (0x61 Apple,
	 * 0xc0 Ampere...); BRBE is an architecture feature, not a vendor one */
	if (strstr(cpuinfo, "CPU implementer"))
		return EP_PMU_ARM;
	return EP_PMU_GENERIC;
}

enum ep_pmu_vendor ep_pmu_vendor_detect(void)
{
	FILE *f = fopen("/proc/cpuinfo", "r");
	if (!f)
		return EP_PMU_GENERIC;
	char buf[8192];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return ep_pmu_vendor_from_cpuinfo(buf);
}

const char *ep_pmu_vendor_name(enum ep_pmu_vendor v)
{
	switch (v) {
	case EP_PMU_INTEL:
		return "Intel";
	case EP_PMU_AMD:
		return "AMD";
	case EP_PMU_ARM:
		return "Arm";
	default:
		return "generic";
	}
}

static void set(struct ep_branch_event *e, uint32_t type, uint64_t config, uint8_t precise,
		bool all, const char *name)
{
	e->type = type;
	e->config = config;
	e->precise_ip = precise;
	e->counts_all = all;
	snprintf(e->name, sizeof(e->name), "%s", name);
}

static unsigned max_entries(enum ep_pmu_vendor v)
{
	switch (v) {
	case EP_PMU_AMD:
		return 16;
	case EP_PMU_ARM:
		return 64;
	default:
		return 32;
	}
}

int ep_pmu_branch_event(enum ep_pmu_vendor v, const char *event, struct ep_branch_event *out,
			char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	out->max_entries = max_entries(v);
	if (event[0] == 'r' && event[1]) {
		char *end;
		unsigned long long config = strtoull(event + 1, &end, 16);
		if (*end) {
			snprintf(err, errlen, "--event %s: not a raw event (rHEX)", event);
			return -1;
		}
		/* a raw event's meaning is the user's: no trigger appended */
		set(out, PERF_TYPE_RAW, config, 0, false, event);
		return 0;
	}
	bool all = strcmp(event, "branches") == 0;
	if (!all && strcmp(event, "taken") != 0) {
		snprintf(err, errlen, "--event %s: expected branches, taken or rHEX", event);
		return -1;
	}
	switch (v) {
	case EP_PMU_INTEL:
		if (all)
			set(out, PERF_TYPE_RAW, 0x00c4, 2, true, "br_inst_retired.all_branches");
		else
			set(out, PERF_TYPE_RAW, 0x20c4, 2, false, "br_inst_retired.near_taken");
		out->taken_only = !all;
		return 0;
	case EP_PMU_AMD:
		if (all)
			set(out, PERF_TYPE_RAW, 0xc2, 0, true, "ex_ret_brn");
		else
			set(out, PERF_TYPE_RAW, 0xc4, 0, false, "ex_ret_brn_tkn");
		out->taken_only = !all;
		return 0;
	case EP_PMU_ARM:
		if (!all) {
			snprintf(err, errlen,
				 "--event taken: Arm has no retired-taken-branches event; use "
				 "branches (BR_RETIRED)");
			return -1;
		}
		set(out, PERF_TYPE_RAW, 0x21, 0, true, "br_retired");
		return 0;
	default:
		if (!all) {
			snprintf(err, errlen,
				 "--event taken: unknown PMU vendor; give the raw event (rHEX)");
			return -1;
		}
		set(out, PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_INSTRUCTIONS, 0, true,
		    "branch-instructions");
		return 0;
	}
}

void ep_pmu_branch_attr(struct perf_event_attr *a, const struct ep_branch_event *ev,
			uint64_t period, bool calls_only, bool kernel)
{
	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->type = ev->type;
	a->config = ev->config;
	a->precise_ip = ev->precise_ip;
	a->sample_period = period;
	a->sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_BRANCH_STACK;
	/* call-graph mode: the hardware filters the stack to calls and
	 * returns, so the same N entries reach N calls back instead of N
	 * branches (Intel LBR_SELECT, AMD and Arm branch filters) */
	a->branch_sample_type =
	    (calls_only ? PERF_SAMPLE_BRANCH_ANY_CALL | PERF_SAMPLE_BRANCH_ANY_RETURN
			: PERF_SAMPLE_BRANCH_ANY) |
	    (kernel ? PERF_SAMPLE_BRANCH_KERNEL : 0) | PERF_SAMPLE_BRANCH_USER;
	a->exclude_kernel = !kernel;
	/* exclude_hv only: Arm's BRBE driver refuses a branch stack that
	 * excludes the host (it records no guest), and one excluding both
	 * user and kernel */
	a->exclude_hv = 1;
}

const char *ep_pmu_no_branch_stack_hint(enum ep_pmu_vendor v, int err)
{
	if (err != ENOENT && err != EOPNOTSUPP && err != EINVAL)
		return "";
	switch (v) {
	case EP_PMU_INTEL:
		return "Intel LBR not exposed here: a VM without the host's PMU and LBR passed "
		       "through?";
	case EP_PMU_AMD:
		return "AMD branch stacks need Zen 4's LbrExtV2 and Linux 6.1 or later, rarely "
		       "passed through to VMs";
	case EP_PMU_ARM:
		return "Arm branch records need FEAT_BRBE, Armv9.2, and a kernel built with its "
		       "driver, CONFIG_ARM64_BRBE";
	default:
		return "";
	}
}
