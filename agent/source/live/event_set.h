/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One sampling event opened on every online CPU, a BPF program attached to
 * each, and its randomized period (SPEC step 1): the live source's branch
 * event, and with agent --cycles its cycles event. Both draw and re-arm
 * their periods by this one code, so both samples have the same law.
 */
#ifndef EP_EVENT_SET_H
#define EP_EVENT_SET_H

#include <linux/perf_event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EP_LIVE_MAX_CPUS 1024

struct bpf_link;
struct bpf_program;

/* How a period of P +- D events is drawn: every overflow is a sample, each
 * CPU's period drawn from [P - D, P + D] when its event opens and again at
 * every drain (PERF_EVENT_IOC_PERIOD). */
struct ep_period_plan {
	uint64_t period, jitter;
};

/* period at least 1, jitter below it */
void ep_period_plan_make(struct ep_period_plan *p, uint64_t period, uint64_t jitter);
/* One CPU's period until its next re-arm (rng: xorshift64* state, not 0). */
uint64_t ep_period_draw(const struct ep_period_plan *p, uint64_t *rng);

struct ep_event_set {
	const char *what; /* "perf event", "cycles event": for messages */
	struct perf_event_attr attr;
	struct ep_period_plan plan;
	struct bpf_program *prog;
	/* BPF array by CPU: the period its event is armed with now (a software
	 * event's context keeps reporting its first one, see bpf/edgeprof.bpf.c) */
	int periods_fd;
	int fds[EP_LIVE_MAX_CPUS];
	struct bpf_link *links[EP_LIVE_MAX_CPUS];
	uint64_t rearms, rearm_failures;
};

/* No CPU open; attr, plan, prog and periods_fd are the caller's to set. */
void ep_event_set_init(struct ep_event_set *s, const char *what);
/* Opens the event on cpu with a fresh period and attaches the program. 0,
 * or -1 with err naming the CPU and the reason. */
int ep_event_set_attach(struct ep_event_set *s, int cpu, uint64_t *rng, char *err, size_t errlen);
void ep_event_set_detach(struct ep_event_set *s, int cpu);
void ep_event_set_detach_all(struct ep_event_set *s);
/* Every open CPU's event gets a new random period, counted from now (the
 * ioctl restarts the count). A refused re-arm is warned about once. */
void ep_event_set_rearm(struct ep_event_set *s, uint64_t *rng);

#endif
