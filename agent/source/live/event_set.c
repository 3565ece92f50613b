/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/source/live/event_set.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/util/log.h"

void ep_period_plan_make(struct ep_period_plan *p, uint64_t period, uint64_t jitter)
{
	p->period = period ? period : 1;
	p->jitter = jitter < p->period ? jitter : p->period - 1;
}

/* xorshift64*: the periods need no secrecy, only independence from the
 * program sampled */
static uint64_t next_random(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dULL;
}

uint64_t ep_period_draw(const struct ep_period_plan *p, uint64_t *rng)
{
	if (!p->jitter)
		return p->period;
	return p->period - p->jitter + next_random(rng) % (2 * p->jitter + 1);
}

void ep_event_set_init(struct ep_event_set *s, const char *what)
{
	memset(s, 0, sizeof(*s));
	s->what = what;
	s->periods_fd = -1;
	for (int cpu = 0; cpu < EP_LIVE_MAX_CPUS; cpu++)
		s->fds[cpu] = -1;
}

/* What the program reports as each sample's period. */
static void note_period(struct ep_event_set *s, int cpu, uint64_t period)
{
	uint32_t key = (uint32_t)cpu;
	if (s->periods_fd >= 0)
		bpf_map_update_elem(s->periods_fd, &key, &period, BPF_ANY);
}

int ep_event_set_attach(struct ep_event_set *s, int cpu, uint64_t *rng, char *err, size_t errlen)
{
	s->attr.sample_period = ep_period_draw(&s->plan, rng);
	note_period(s, cpu, s->attr.sample_period);
	long fd = syscall(SYS_perf_event_open, &s->attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "cannot open the %s on CPU %d: %s", s->what, cpu,
			 strerror(errno));
		return -1;
	}
	s->fds[cpu] = (int)fd;
	s->links[cpu] = bpf_program__attach_perf_event(s->prog, (int)fd);
	if (!s->links[cpu]) {
		snprintf(err, errlen, "cannot attach to the %s on CPU %d: %s", s->what, cpu,
			 strerror(errno));
		close(s->fds[cpu]);
		s->fds[cpu] = -1;
		return -1;
	}
	return 0;
}

void ep_event_set_detach(struct ep_event_set *s, int cpu)
{
	if (s->links[cpu])
		bpf_link__destroy(s->links[cpu]);
	s->links[cpu] = NULL;
	if (s->fds[cpu] >= 0)
		close(s->fds[cpu]);
	s->fds[cpu] = -1;
}

void ep_event_set_detach_all(struct ep_event_set *s)
{
	for (int cpu = 0; cpu < EP_LIVE_MAX_CPUS; cpu++)
		ep_event_set_detach(s, cpu);
}

void ep_event_set_rearm(struct ep_event_set *s, uint64_t *rng)
{
	if (!s->plan.jitter)
		return;
	for (int cpu = 0; cpu < EP_LIVE_MAX_CPUS; cpu++) {
		if (s->fds[cpu] < 0)
			continue;
		uint64_t period = ep_period_draw(&s->plan, rng);
		if (ioctl(s->fds[cpu], PERF_EVENT_IOC_PERIOD, &period) == 0) {
			note_period(s, cpu, period);
			s->rearms++;
		} else if (s->rearm_failures++ == 0) {
			ep_warn("cannot re-arm the %s on CPU %d (%s): its period stays %llu until "
				"it can",
				s->what, cpu, strerror(errno),
				(unsigned long long)s->attr.sample_period);
		}
	}
}
