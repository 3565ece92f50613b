/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Which hardware event to sample branch stacks on, per PMU (issue: the right
 * event per vendor). The counted event decides what a period means:
 *   branches  every retired branch: the trace's not-taken branches up to the
 *             sample IP can be appended (SPEC step 3), the default
 *   taken     retired taken branches only
 * Intel (LBR): BR_INST_RETIRED.ALL_BRANCHES (0x00c4) / NEAR_TAKEN (0x20c4),
 *   with PEBS (precise_ip 2, then 1, then 0 where refused);
 * AMD Zen 4 (LbrExtV2): Retired Branch Instructions (0xc2) / Retired Taken
 *   Branch Instructions (0xc4);
 * Arm (BRBE): BR_RETIRED (0x21); Arm has no taken-only counterpart;
 * unknown PMUs: the generic branch-instructions event.
 * rNNNN (perf's raw syntax) picks any raw event.
 */
#ifndef EP_PMU_EVENT_H
#define EP_PMU_EVENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum ep_pmu_vendor { EP_PMU_GENERIC, EP_PMU_INTEL, EP_PMU_AMD, EP_PMU_ARM };

struct ep_branch_event {
	uint32_t type; /* PERF_TYPE_* */
	uint64_t config;
	uint8_t precise_ip; /* the most to try; fall back to less when refused */
	bool counts_all;    /* counts not-taken branches too (the trigger can be appended) */
	bool taken_only;    /* a retired-taken-branches event: chopped in taken branches */
	/* the most entries a record of this PMU holds (Intel LBR 32, AMD
	 * LbrExtV2 16, Arm BRBE up to 64): what the samples ring is sized for */
	unsigned max_entries;
	char name[64]; /* for the mode line and the profile */
};

/* The vendor from /proc/cpuinfo's text (x86 vendor_id, arm64 "CPU implementer"). */
enum ep_pmu_vendor ep_pmu_vendor_from_cpuinfo(const char *cpuinfo);
/* This machine's, read from /proc/cpuinfo. */
enum ep_pmu_vendor ep_pmu_vendor_detect(void);
const char *ep_pmu_vendor_name(enum ep_pmu_vendor v);

struct perf_event_attr;

/* The branch-stack sampling event's attributes: ev sampled every period
 * events with its branch stack, every branch of user mode (calls_only: calls
 * and returns only, the hardware filtering) and of the kernel too with
 * kernel. Within what every PMU's driver accepts, Arm BRBE's included (no
 * call-stack or transaction filters, the host not excluded). */
void ep_pmu_branch_attr(struct perf_event_attr *a, const struct ep_branch_event *ev,
			uint64_t period, bool calls_only, bool kernel);

/* What the machine lacks when a branch-stack event failed with errno err on
 * this vendor's CPU, for the operator's one line; "" where nothing more is
 * known. No parentheses: the line's own hold it. */
const char *ep_pmu_no_branch_stack_hint(enum ep_pmu_vendor v, int err);

/* event: "branches", "taken" or "rHEX". 0, or -1 with err naming the event
 * and why (unknown name, no such event on this vendor). */
int ep_pmu_branch_event(enum ep_pmu_vendor v, const char *event, struct ep_branch_event *out,
			char *err, size_t errlen);

#endif
