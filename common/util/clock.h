/* SPDX-License-Identifier: Apache-2.0 */
/* Time in nanoseconds: monotonic for intervals and deadlines, real (unix)
 * time for what is stored or sent, and an absolute CLOCK_REALTIME timespec
 * for pthread_cond_timedwait. */
#ifndef EP_CLOCK_H
#define EP_CLOCK_H

#include <stdint.h>
#include <time.h>

#define EP_NS_PER_S 1000000000ULL

static inline uint64_t ep_clock_ns(clockid_t clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * EP_NS_PER_S + (uint64_t)ts.tv_nsec;
}

static inline uint64_t ep_mono_ns(void)
{
	return ep_clock_ns(CLOCK_MONOTONIC);
}

static inline uint64_t ep_unix_ns(void)
{
	return ep_clock_ns(CLOCK_REALTIME);
}

/* CLOCK_REALTIME now + ns, as pthread_cond_timedwait wants its deadline. */
static inline struct timespec ep_realtime_after(uint64_t ns)
{
	uint64_t at = ep_unix_ns() + ns;
	return (struct timespec){.tv_sec = (time_t)(at / EP_NS_PER_S),
				 .tv_nsec = (long)(at % EP_NS_PER_S)};
}

#endif
