/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/source/live/pmu_event.h"

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

int ep_pmu_branch_event(enum ep_pmu_vendor v, const char *event, struct ep_branch_event *out,
			char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
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
