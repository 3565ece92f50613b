/* SPDX-License-Identifier: Apache-2.0 */
/*
 * How fast sampling may go, shared by the agent (which checks against its
 * own kernel) and the collector (which checks a session's period before
 * handing it to an agent). The kernel lets each CPU take at most
 * perf_event_max_sample_rate sample interrupts per second (100,000 by
 * default; it lowers the value itself when interrupts take too long) and
 * throttles an event past it. A CPU retires at most about 2e9 branches per
 * second (the figure the ring buffer is sized by), so a branch period below
 * 2e9 / perf_event_max_sample_rate (20,000 by default) can ask for more
 * interrupts than the kernel allows: asking is refused, with the reason,
 * instead of being silently throttled (and a period of 1 asks ~2e9 per
 * second).
 */
#ifndef EP_SAMPLING_LIMITS_H
#define EP_SAMPLING_LIMITS_H

#include <stdint.h>

#define EP_CPU_BRANCHES_PER_S_MAX     2000000000ULL
#define EP_KERNEL_SAMPLE_RATE_DEFAULT 100000u
/* the largest period the agent's --period takes: one sample per ~2 s of a
 * CPU retiring 2e9 branches per second */
#define EP_PERIOD_MAX 4294967294ULL
/* the samples ring buffer (one for all CPUs, mapped twice by the agent) */
#define EP_RING_MAX_KIB (256u << 10)

/* A CPU runs at most about 6e9 cycles per second: the cycles event's
 * period (agent --cycles) is bounded the same way */
#define EP_CPU_CYCLES_PER_S_MAX 6000000000ULL

/* The smallest branch period a kernel allowing max_rate interrupts per
 * second per CPU can be asked for. */
static inline uint64_t ep_period_min(uint64_t max_rate)
{
	return max_rate ? (EP_CPU_BRANCHES_PER_S_MAX + max_rate - 1) / max_rate
			: EP_CPU_BRANCHES_PER_S_MAX;
}

/* The same for the cycles event's period. */
static inline uint64_t ep_cycles_period_min(uint64_t max_rate)
{
	return max_rate ? (EP_CPU_CYCLES_PER_S_MAX + max_rate - 1) / max_rate
			: EP_CPU_CYCLES_PER_S_MAX;
}

#endif
