/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/daemon/daemon.h"

#include <errno.h>
#include <string.h>

#include "agent/attribute/process_labels.h"
#include "agent/daemon/session_runner.h"
#include "agent/pipeline/pipeline.h"
#include "agent/resolve/binary.h"
#include "agent/source/live/live_feed.h"
#include "agent/stream/sink.h"
#include "common/util/clock.h"
#include "common/util/log.h"

struct daemon {
	struct ep_daemon_config *cfg;
	struct ep_sink *sink;
	struct ep_live *live;
	struct ep_live_feed feed;
	struct ep_process_labeller labeller;
	struct ep_session_runner *sessions; /* NULL unless the sink streams */
	uint64_t lost_added;		    /* ring buffer losses already counted in the pipeline */
	uint64_t cycles_lost_added;	    /* the same for the cycles event's ring (--cycles) */
	uint64_t start_ns;
	struct ep_binary_registry *reg;
	struct ep_binreg_proc_failures failures_said; /* as of the last summary line */
};

/* Binaries of live processes that could not be opened since the last
 * interval: one line for all of them, never one per process (an exec storm
 * of 1,000/s logged 47 lines in 10 s). Processes that had exited are
 * routine (info); anything else is a warning. */
static void say_proc_failures(struct daemon *d)
{
	struct ep_binreg_proc_failures now, *was = &d->failures_said;
	ep_binreg_proc_failures(d->reg, &now);
	uint64_t failed = now.failed - was->failed, gone = now.gone - was->gone;
	if (failed > gone)
		ep_warn("binaries of watched processes: %llu could not be opened in the last "
			"interval, %llu in all (%llu of them because their process had exited); "
			"the last: %s",
			(unsigned long long)failed, (unsigned long long)now.failed,
			(unsigned long long)now.gone, now.last);
	else if (gone > 0)
		ep_info("%llu processes exited before their binaries could be opened in the last "
			"interval (%llu in all)",
			(unsigned long long)gone, (unsigned long long)now.gone);
	*was = now;
}

/* Opens the sampling and says how it samples. 0, 1 or 2 (the exit code). */
static int open_live(struct daemon *d)
{
	struct ep_live_config *cfg = &d->cfg->live;
	if (!d->cfg->jitter_given)
		cfg->jitter = cfg->period / 16; /* SPEC's example: D = P/16 */
	if (cfg->jitter >= cfg->period) {
		ep_error("--jitter must be smaller than --period");
		return 2;
	}
	char err[512];
	d->live = ep_live_open(cfg, err, sizeof(err));
	if (!d->live) {
		ep_error("%s", err);
		return 1;
	}
	if (ep_live_has_branch_stacks(d->live))
		ep_info("%s", ep_live_mode(d->live));
	else
		ep_warn("%s", ep_live_mode(d->live));
	struct ep_live_cycles cycles;
	ep_live_cycles_info(d->live, &cycles);
	if (cycles.source == EP_CYCLES_CPU_CLOCK)
		ep_warn("%s", ep_live_cycles_mode(d->live));
	else if (cycles.source != EP_CYCLES_NONE)
		ep_info("%s", ep_live_cycles_mode(d->live));
	d->sink->event = ep_live_event(d->live);
	return 0;
}

/* The ring buffer's losses since the last look go into the next counts. */
static void count_lost(struct daemon *d, struct ep_live_counters *lc)
{
	ep_live_counters(d->live, lc);
	ep_pipeline_add_lost(d->feed.pipeline, lc->reserve_failed - d->lost_added);
	d->lost_added = lc->reserve_failed;
	ep_pipeline_add_cycles_lost(d->feed.pipeline,
				    lc->cycles_reserve_failed - d->cycles_lost_added);
	d->cycles_lost_added = lc->cycles_reserve_failed;
}

/* After the counts went out (every pipeline's: sessions' too), binaries no
 * process maps any more are forgotten: a build node runs thousands of
 * programs a day, each read once. */
static void evict_binaries(struct daemon *d)
{
	size_t n = ep_binreg_evict(d->reg, (uint64_t)d->cfg->binaries_max_mib << 20);
	if (!n)
		return;
	struct ep_binreg_stats st;
	ep_binreg_stats(d->reg, &st);
	ep_debug("%zu binaries evicted; %llu held (%.1f MiB)", n, (unsigned long long)st.held,
		 (double)st.bytes_held / (1 << 20));
}

/* Drains, and sends the counts every interval, until stop or the end of
 * the duration. 0, or 1 when the ring buffer cannot be read. */
static int loop(struct daemon *d)
{
	const struct ep_daemon_config *cfg = d->cfg;
	uint64_t start = d->start_ns = ep_mono_ns(), last_write = start;
	struct ep_live_counters lc;
	while (!*cfg->stop) {
		if (ep_live_feed_poll(&d->feed, d->live, (int)cfg->live.drain_ms) < 0) {
			ep_error("reading the ring buffer failed: %s", strerror(errno));
			return 1;
		}
		ep_live_feed_forget_exited(&d->feed);
		uint64_t now = ep_mono_ns();
		if (cfg->duration_s && now - start >= (uint64_t)cfg->duration_s * 1000000000ULL)
			break;
		bool emit = now - last_write >= (uint64_t)cfg->interval_s * 1000000000ULL;
		if (emit) {
			ep_live_feed_label_pending(&d->feed);
			count_lost(d, &lc);
			say_proc_failures(d);
			ep_sink_emit(d->sink, d->feed.pipeline);
			last_write = now;
		}
		if (d->sessions)
			ep_session_runner_turn(d->sessions, emit);
		if (emit)
			evict_binaries(d);
	}
	return 0;
}

/* What the sampling cost and achieved, against what was asked: the rate
 * reached per CPU (an overflow, one interrupt, per sample), the agent's
 * wake-ups. */
static void log_cost(const struct daemon *d, const struct ep_live_counters *lc)
{
	double s = (double)(ep_mono_ns() - d->start_ns) / 1e9;
	unsigned ncpus = ep_live_cpus(d->live);
	uint64_t samples = lc->seen;
	if (s <= 0 || !ncpus || !samples)
		return;
	const struct ep_live_config *cfg = &d->cfg->live;
	char asked[64];
	if (ep_live_has_branch_stacks(d->live))
		snprintf(asked, sizeof(asked), "one per %llu events",
			 (unsigned long long)cfg->period);
	else
		snprintf(asked, sizeof(asked), "asked %u", cfg->ip_hz);
	ep_info("sampling cost: %.0f samples/s per CPU (%s), %llu drains in %.1f s (%llu woken "
		"early by the kernel, %llu new programs' first samples), %llu periods drawn",
		(double)samples / s / ncpus, asked, (unsigned long long)lc->drains, s,
		(unsigned long long)lc->early_wakeups, (unsigned long long)lc->first_sample_wakeups,
		(unsigned long long)lc->rearms);
}

static void log_summary(const struct daemon *d, const struct ep_live_counters *lc)
{
	ep_info("%s: %llu samples received (%llu filtered out, %llu kernel, %llu dropped: ring "
		"buffer full), %llu process events (%llu lost), %llu processes gone before their "
		"maps were read, %zu processes tracked, %llu forgotten after their exit",
		d->sink->output ? d->sink->output : "agent", (unsigned long long)lc->received,
		(unsigned long long)lc->filtered, (unsigned long long)lc->kernel,
		(unsigned long long)lc->reserve_failed, (unsigned long long)lc->proc_events,
		(unsigned long long)lc->proc_reserve_failed, (unsigned long long)d->feed.gone,
		ep_pipeline_processes(d->feed.pipeline), (unsigned long long)d->feed.forgotten);
	const uint64_t *r = d->feed.maps_reads;
	ep_info("process maps read: %llu at a new program's first sample, %llu at a first "
		"sample of a process running before, %llu again for an address in none of them "
		"(%llu of them at once after an exec), %llu after executable mmaps",
		(unsigned long long)r[EP_MAPS_AT_EXEC],
		(unsigned long long)r[EP_MAPS_AT_FIRST_SAMPLE],
		(unsigned long long)(r[EP_MAPS_UNRESOLVED] + r[EP_MAPS_AFTER_EXEC]),
		(unsigned long long)r[EP_MAPS_AFTER_EXEC], (unsigned long long)r[EP_MAPS_AT_MMAP]);
	struct ep_binreg_stats bs;
	ep_binreg_stats(d->reg, &bs);
	ep_log(bs.limited ? EP_LOG_WARN : EP_LOG_INFO,
	       "binaries: %llu read (%llu of them again after their eviction), %llu evicted once "
	       "no process mapped them, %llu held (%.1f MiB), %llu past their read limits "
	       "(%llu of them refused)%s%s",
	       (unsigned long long)bs.opened, (unsigned long long)bs.reread,
	       (unsigned long long)bs.evicted, (unsigned long long)bs.held,
	       (double)bs.bytes_held / (1 << 20), (unsigned long long)bs.limited,
	       (unsigned long long)bs.limited_refused, bs.limited ? "; the last: " : "",
	       bs.limited_last);
	ep_info("process cgroups: %llu read from /proc, %llu known by their cgroup id",
		(unsigned long long)d->labeller.cgroup_reads,
		(unsigned long long)d->labeller.cgroup_hits);
	ep_info("executable mmaps: %llu events, %llu maps re-reads (one per process's next "
		"sample), %zu still pending",
		(unsigned long long)lc->mmap_events, (unsigned long long)r[EP_MAPS_AT_MMAP],
		ep_live_feed_mmaps_pending(&d->feed));
	ep_live_feed_log_periods(&d->feed);
	log_cost(d, lc);
	if (lc->reserve_failed)
		ep_warn("%llu samples dropped because the ring buffer was full",
			(unsigned long long)lc->reserve_failed);
	if (d->cfg->live.cycles)
		ep_log(lc->cycles_reserve_failed ? EP_LOG_WARN : EP_LOG_INFO,
		       "cycles event: %llu IP samples sent by the kernel, %llu received (%llu "
		       "filtered out, %llu kernel, %llu lost: its ring buffer full, %llu left "
		       "unused), %llu periods drawn",
		       (unsigned long long)lc->cycles_sent, (unsigned long long)lc->cycles_received,
		       (unsigned long long)lc->cycles_filtered,
		       (unsigned long long)lc->cycles_kernel,
		       (unsigned long long)lc->cycles_reserve_failed,
		       (unsigned long long)lc->cycles_held_back,
		       (unsigned long long)lc->cycles_rearms);
}

/* Stops sampling, drains what the kernel still holds, then the final
 * counts and the counters, which now agree. 0, or 1 when the last counts
 * cannot be written. */
static int finish(struct daemon *d)
{
	ep_session_runner_leave(d->sessions);
	ep_live_stop(d->live);
	ep_live_feed_poll(&d->feed, d->live, 0);
	struct ep_live_counters lc;
	count_lost(d, &lc);
	int rc = ep_sink_emit(d->sink, d->feed.pipeline) != 0 ? 1 : 0;
	say_proc_failures(d);
	log_summary(d, &lc);
	return rc;
}

int ep_daemon_run(struct ep_daemon_config *cfg, struct ep_binary_registry *reg,
		  struct ep_sink *sink)
{
	struct daemon d = {.cfg = cfg, .sink = sink, .reg = reg};
	/* a container can map any number of files made to cost each binary's
	 * bounds: together they stay within this */
	if (!ep_binreg_held_max(reg))
		ep_binreg_set_held_max(reg, (uint64_t)EP_BINREG_DEFAULT_HELD_MIB << 20);
	int rc = open_live(&d);
	if (rc != 0)
		return rc;
	struct ep_pipeline_config pcfg;
	ep_pipeline_config_default(&pcfg);
	/* only an event that counts every branch ends its trace at the sample IP */
	pcfg.append_trigger = ep_live_counts_all_branches(d.live);
	pcfg.chop_taken = ep_live_counts_taken_only(d.live);
	pcfg.calls_only = cfg->live.calls_only && ep_live_has_branch_stacks(d.live);
	ep_live_feed_init(&d.feed, ep_pipeline_new(&pcfg, reg), &d.labeller);
	ep_process_labeller_init(&d.labeller, cfg->k8s);
	if (sink->streamer)
		d.sessions = ep_session_runner_new(sink, &cfg->live, reg, cfg->k8s);
	if (!d.feed.pipeline || (sink->streamer && !d.sessions)) {
		ep_error("out of memory");
		rc = 1;
	} else {
		ep_live_feed_attach(&d.feed, d.live);
		int loop_rc = loop(&d);
		rc = finish(&d) != 0 ? 1 : loop_rc;
	}
	ep_session_runner_free(d.sessions);
	ep_live_feed_free(&d.feed);
	ep_process_labeller_free(&d.labeller);
	ep_live_close(d.live);
	return rc;
}
