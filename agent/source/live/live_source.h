/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Source stage, live: the BPF program (bpf/edgeprof.bpf.c) on one perf event
 * per online CPU, its samples drained from a BPF ring buffer. With a
 * branch-stack PMU the event counts branches and every sample carries the
 * stack; without one (VMs) it falls back to cpu-clock, and samples are
 * IP-only: this is said once, never hidden. With --cycles a second event
 * per CPU counts cycles (cpu-clock, said in one line, where the machine has
 * no cycles event) and its IP samples come on a ring buffer of their own.
 */
#ifndef EP_LIVE_SOURCE_H
#define EP_LIVE_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bpf/edgeprof_record.h"

struct ep_live_config {
	const uint32_t *pids; /* none: every process */
	size_t npids;
	const char *const *cgroups; /* cgroup v2 directories; their subtrees count */
	size_t ncgroups;
	const char *event; /* "branches" (NULL), "taken" or "rHEX": see pmu_event.h */
	uint64_t period;   /* events between samples (branch-stack mode) */
	uint64_t jitter;   /* each period drawn from [period - jitter, period + jitter] */
	unsigned ip_hz;	   /* samples per second per CPU (IP-only fallback) */
	bool want_kernel;
	bool calls_only; /* call-graph mode: branch stacks keep calls and returns only */
	/* agent --stacks: IP samples (no branch stack) carry the user call
	 * stack, by frame pointers */
	bool stacks;
	/* executable mmaps reported at once (dlopen) by a probe on every system
	 * call; off: found by the once-a-second maps re-read (see live_source.c) */
	bool watch_mmaps;
	unsigned drain_ms; /* how often the agent drains the ring buffers (0: 200) */
	unsigned ring_kib; /* ring buffer size; 0: sized from the sampling rate */
	/* agent --cycles: a second event per CPU counting cycles (cpu-clock
	 * where the machine has none), IP samples every cycles_period +- the
	 * branch event's share of jitter, on a ring buffer of their own */
	bool cycles;
	uint64_t cycles_period;
};

/* Where the profile's cycles come from (agent --cycles). */
enum ep_cycles_source {
	EP_CYCLES_NONE,		  /* not asked for: only what the branch records carry */
	EP_CYCLES_BRANCH_RECORDS, /* the branch records carry them (Intel LBR, Skylake on) */
	EP_CYCLES_EVENT,	  /* the hardware cycles event's IP samples */
	EP_CYCLES_CPU_CLOCK,	  /* no hardware cycles event: cpu-clock, nanoseconds */
};

struct ep_live_cycles {
	enum ep_cycles_source source;
	/* with branch stacks, until their first records say whether they
	 * carry cycles: source is the event, and its samples are held back */
	bool pending;
	uint64_t period, jitter; /* the event's, in cycles or ns */
};

struct ep_live_counters {
	uint64_t seen;		 /* overflows the program ran for */
	uint64_t sent;		 /* records put in the ring buffer */
	uint64_t filtered;	 /* other processes */
	uint64_t kernel;	 /* kernel samples, not asked for */
	uint64_t reserve_failed; /* ring buffer full: samples dropped */
	uint64_t branch_read_failed;
	uint64_t proc_events;	      /* exec/fork/exit records drained */
	uint64_t proc_reserve_failed; /* process events lost: their buffer was full */
	uint64_t received;	      /* records the agent drained */
	uint64_t mmap_exec;	      /* executable file mmaps of watched processes (kernel side) */
	uint64_t mmap_events;	      /* of those, drained (part of proc_events) */
	uint64_t drains;	      /* ep_live_poll calls */
	/* of those, woken by the kernel: a new program's first sample (its
	 * maps are read while it lives), a ring half full */
	uint64_t early_wakeups;
	uint64_t first_sample_wakeups; /* new programs' first samples that woke the agent */
	uint64_t rearms;	       /* periods drawn again (one per CPU per drain) */
	uint64_t stack_failed;	       /* agent --stacks: samples whose stack read failed */
	/* agent --cycles: the cycles event's overflows and IP samples */
	uint64_t cycles_seen, cycles_sent, cycles_filtered, cycles_kernel;
	uint64_t cycles_reserve_failed; /* its ring buffer full: samples lost */
	uint64_t cycles_received;	/* drained by the agent */
	uint64_t cycles_held_back;	/* drained before the source was known: not used */
	uint64_t cycles_rearms;
};

struct ep_live;

/* Checks privileges, loads and attaches on every online CPU. NULL with err
 * naming the problem (missing capability, unsupported kernel...). */
struct ep_live *ep_live_open(const struct ep_live_config *cfg, char *err, size_t errlen);
void ep_live_close(struct ep_live *live);

/* One line for operators: what is being sampled and how. */
const char *ep_live_mode(const struct ep_live *live);
bool ep_live_has_branch_stacks(const struct ep_live *live);
/* Processes moved between cgroups are reported (EP_PROC_CGROUP). */
bool ep_live_sees_cgroup_moves(const struct ep_live *live);
/* The event sampled: the PMU's name for it, or "cpu-clock" without one. */
const char *ep_live_event(const struct ep_live *live);
/* True when the event counts not-taken branches too, so traces may be
 * extended to the sample IP (SPEC step 3). */
bool ep_live_counts_all_branches(const struct ep_live *live);
/* The event counts retired taken branches only (--event taken): the chop
 * counts taken branches (ep_chop_taken). */
bool ep_live_counts_taken_only(const struct ep_live *live);
/* The smallest branch period this kernel's perf_event_max_sample_rate
 * allows (see common/util/sampling_limits.h); ep_live_open() refuses less. */
uint64_t ep_live_period_min(void);
/* The period actually used, mean and half-width, in events (branches) or,
 * IP-only, nanoseconds of cpu-clock. */
void ep_live_period(const struct ep_live *live, uint64_t *mean, uint64_t *jitter);
unsigned ep_live_cpus(const struct ep_live *live);

/* What --cycles gives: the source, and the event's period. */
void ep_live_cycles_info(const struct ep_live *live, struct ep_live_cycles *out);
/* One line for operators on the cycles source (NULL without --cycles):
 * the event sampled, or that the machine has no hardware cycles event and
 * cpu-clock stands in, in nanoseconds. */
const char *ep_live_cycles_mode(const struct ep_live *live);

typedef void (*ep_live_sample_cb)(void *ctx, const struct ep_sample_record *rec);
typedef void (*ep_live_cycles_cb)(void *ctx, const struct ep_cycles_record *rec);
/* The cycles event's IP samples go to cb during ep_live_poll, after the
 * branch samples drained with them. */
void ep_live_on_cycles(struct ep_live *live, ep_live_cycles_cb cb, void *ctx);
typedef void (*ep_live_proc_cb)(void *ctx, const struct ep_proc_record *rec);
/* Process events (exec, fork, exit) go to cb during ep_live_poll.
 * Executable mmaps (EP_PROC_MMAP) are coalesced per process and handed on
 * just before that process's next sample taken after them, so the maps
 * re-read they cause finds the new mapping and happens once per burst. */
void ep_live_on_process_events(struct ep_live *live, ep_live_proc_cb cb, void *ctx);
/* Waits up to timeout_ms unless the kernel wakes the agent earlier (an
 * exec, or the samples ring past half full), then drains what is there and
 * draws every CPU's next period.
 * Returns the number of records handed to cb, or -1 on error. At most once a
 * second it also follows CPU hotplug: a CPU that came online gets its perf
 * event, one that went offline loses it (one log line each). */
int ep_live_poll(struct ep_live *live, int timeout_ms, ep_live_sample_cb cb, void *ctx);

void ep_live_counters(const struct ep_live *live, struct ep_live_counters *out);

/* Parses a kernel CPU list ("0-3,5,7-8", as in /sys/devices/system/cpu/online):
 * online[c] = 1 for each CPU c listed below max, 0 for the others. Returns
 * how many were set, or -1 when the text is not a CPU list. */
int ep_cpu_list_parse(const char *text, uint8_t *online, unsigned max);

/* Detaches from every CPU: no sample arrives after this, so a final drain
 * and the counters read then agree with each other. */
void ep_live_stop(struct ep_live *live);

#endif
