/* SPDX-License-Identifier: Apache-2.0 */
/*
 * edgeprof agent: live collection (agent/daemon/daemon.h), or a recording
 * replayed through the same path (--replay, agent/daemon/replay.h). The
 * profile is written every interval and on exit (SIGTERM, SIGINT or the end
 * of --duration). This file parses the options and wires the modules.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agent/attribute/container.h"
#include "agent/attribute/k8s_pods.h"
#include "agent/attribute/process_labels.h"
#include "agent/daemon/daemon.h"
#include "agent/daemon/replay.h"
#include "agent/resolve/binary.h"
#include "agent/source/live/pmu_event.h"
#include "agent/stream/sink.h"
#include "cli/cli_util.h"
#include "cli/commands.h"
#include "common/util/log.h"
#include "common/util/regular_file.h"
#include "common/util/sampling_limits.h"

#define MAX_PIDS    256
#define MAX_CGROUPS 64 /* --cgroup and --container together */

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

struct agent_options {
	struct ep_daemon_config daemon;
	uint32_t pids[MAX_PIDS];
	const char *cgroups[MAX_CGROUPS];
	char container_dirs[MAX_CGROUPS][PATH_MAX];
	const char *output, *replay;
	const char *mode; /* said by the profile even when IP-only sampling cannot honour it */
	unsigned batch_samples;
	struct ep_k8s_config k8s;
	struct ep_sink_options sink;
};

static int add_pid(void *opts, const char *arg, char *err, size_t errlen)
{
	struct agent_options *o = opts;
	unsigned pid;
	if (o->daemon.live.npids == MAX_PIDS || ep_parse_uint(arg, 1, INT_MAX, &pid) != 0) {
		snprintf(err, errlen, "'%s' is not a process id (at most %d)", arg, MAX_PIDS);
		return -1;
	}
	o->pids[o->daemon.live.npids++] = pid;
	return 0;
}

static int add_cgroup(void *opts, const char *arg, char *err, size_t errlen)
{
	struct agent_options *o = opts;
	if (o->daemon.live.ncgroups == MAX_CGROUPS) {
		snprintf(err, errlen, "at most %d", MAX_CGROUPS);
		return -1;
	}
	struct stat st;
	if (stat(arg, &st) != 0) {
		snprintf(err, errlen, "%s: %s", arg, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "%s: is %s, not a directory (a cgroup)", arg,
			 ep_file_kind(st.st_mode));
		return -1;
	}
	o->cgroups[o->daemon.live.ncgroups++] = arg;
	return 0;
}

/* A container by id (or a 12+ digit prefix): its cgroup v2 directory. */
static int add_container(void *opts, const char *arg, char *err, size_t errlen)
{
	struct agent_options *o = opts;
	size_t n = o->daemon.live.ncgroups;
	char root[PATH_MAX];
	if (n == MAX_CGROUPS || ep_cgroup2_root(root, sizeof(root)) != 0) {
		snprintf(err, errlen, "%s: %s", arg,
			 n == MAX_CGROUPS ? "at most 64 cgroups and containers"
					  : "no cgroup v2 mount on this host");
		return -1;
	}
	if (ep_container_find_cgroup(root, arg, o->container_dirs[n], sizeof(o->container_dirs[0]),
				     err, errlen) != 0)
		return -1;
	o->cgroups[n] = o->container_dirs[n];
	o->daemon.live.ncgroups++;
	return 0;
}

static int set_event(void *opts, const char *arg, char *err, size_t errlen)
{
	struct agent_options *o = opts;
	struct ep_branch_event ev;
	if (ep_pmu_branch_event(ep_pmu_vendor_detect(), arg, &ev, err, errlen) != 0)
		return -1;
	o->daemon.live.event = arg;
	return 0;
}

static int set_mode(void *opts, const char *arg, char *err, size_t errlen)
{
	struct agent_options *o = opts;
	if (strcmp(arg, "edges") != 0 && strcmp(arg, "calls") != 0) {
		snprintf(err, errlen, "'%s' is not edges or calls", arg);
		return -1;
	}
	o->daemon.live.calls_only = strcmp(arg, "calls") == 0;
	o->mode = o->daemon.live.calls_only ? "calls" : "edges";
	return 0;
}

static void agent_usage(FILE *out)
{
	fprintf(out,
		"usage: edgeprof agent [--pid P]... [--cgroup DIR]... [--container ID]...\n"
		"         [--duration S]\n"
		"         [--interval S] [--event branches|taken|rHEX] [--period P]\n"
		"         [--mode edges|calls] (calls: call-graph mode, the branch\n"
		"          stack keeps calls and returns only)\n"
		"         [--jitter D] [--drain-ms MS] [--ring-kib N]\n"
		"         [--ip-hz HZ] [--kernel] [--watch-mmaps] (libraries mapped later\n"
		"          found at once, by a probe on every system call)\n"
		"         [--stacks] (without a branch stack: IP samples with their user\n"
		"          call stacks, by frame pointers)\n"
		"         [--cycles [--cycles-period N]] (cycles per range: IP samples every\n"
		"          N (2000003) cycles +- --jitter's share; without a PMU cpu-clock, ns)\n"
		"         [--binaries-max-mib N] (binaries no process maps are forgotten\n"
		"          once idle for an interval, or past N MiB held; 64)\n"
		"         [--binary-code-max-mib N] [--binary-symbols-max-mib N] (128, 64 MiB)\n"
		"         [--binaries-held-max-mib N] (all the binaries held: 160 MiB)\n"
		"         [-o PROFILE] [--collector URL[,URL...] (replicas on one store,\n"
		"          repeatable: a batch that fails at one goes to the next)\n"
		"          [--collector-order spread|listed] (home replica: picked by the\n"
		"          node's name, default; or the first listed)\n"
		"          [--spool DIR] [--spool-max-mib N]\n"
		"          [--token-file F] [--cacert F] [--cert F --key F] [--node NAME]\n"
		"          [--flush-timeout S] [--retry-max-ms MS]\n"
		"          [--upload-max-mib N] (binaries up to N MiB sent once per build-id\n"
		"          for the collector's UI; default 64, 0: none)]\n"
		"         [--k8s-api URL] [--k8s-token-file F] [--k8s-ca F] (pod names\n"
		"          of this node's containers; in a cluster by default)\n"
		"       edgeprof agent --replay PERF.DATA [--binary F]... [--symfs DIR]\n"
		"         [--batch-samples N] (-o PROFILE | --collector URL ...)\n");
}

/* RUN, or the exit code (0 after --help). */
enum { RUN = -1 };
static int parse_options(int argc, char **argv, struct agent_options *o,
			 struct ep_binary_registry *reg)
{
	struct ep_live_config *live = &o->daemon.live;
	const unsigned most = UINT_MAX - 1;
	const struct ep_option agent_opts[] = {
	    EP_OPTION("pid", 0, EP_OPT_CALL, o, .call = add_pid),
	    EP_OPTION("cgroup", 0, EP_OPT_CALL, o, .call = add_cgroup),
	    EP_OPTION("container", 0, EP_OPT_CALL, o, .call = add_container),
	    EP_OPTION("duration", 0, EP_OPT_UINT, &o->daemon.duration_s, .min = 1, .max = most),
	    EP_OPTION("interval", 0, EP_OPT_UINT, &o->daemon.interval_s, .min = 1, .max = most),
	    EP_OPTION("period", 0, EP_OPT_U64, &live->period, .min = 1, .max = most),
	    EP_OPTION("ip-hz", 0, EP_OPT_UINT, &live->ip_hz, .min = 1, .max = most),
	    EP_OPTION("jitter", 0, EP_OPT_U64, &live->jitter, .max = most,
		      .given = &o->daemon.jitter_given),
	    EP_OPTION("drain-ms", 0, EP_OPT_UINT, &live->drain_ms, .min = 1, .max = 10000),
	    EP_OPTION("ring-kib", 0, EP_OPT_UINT, &live->ring_kib, .min = 1,
		      .max = EP_RING_MAX_KIB),
	    EP_OPTION("kernel", 0, EP_OPT_TRUE, &live->want_kernel),
	    EP_OPTION("output", 'o', EP_OPT_OUTPUT, &o->output),
	    EP_OPTION("event", 0, EP_OPT_CALL, o, .call = set_event),
	    EP_OPTION("mode", 0, EP_OPT_CALL, o, .call = set_mode),
	    EP_OPTION("watch-mmaps", 0, EP_OPT_TRUE, &live->watch_mmaps),
	    EP_OPTION("cycles", 0, EP_OPT_TRUE, &live->cycles),
	    EP_OPTION("stacks", 0, EP_OPT_TRUE, &live->stacks),
	    EP_OPTION("cycles-period", 0, EP_OPT_U64, &live->cycles_period, .min = 1, .max = most),
	    EP_OPTION("binaries-max-mib", 0, EP_OPT_UINT, &o->daemon.binaries_max_mib, .min = 1,
		      .max = 1u << 20),
	    EP_OPTION("replay", 0, EP_OPT_FILE, &o->replay),
	    EP_OPTION("batch-samples", 0, EP_OPT_UINT, &o->batch_samples, .min = 1,
		      .max = 1u << 30),
	    EP_OPTION("k8s-api", 0, EP_OPT_STRING, &o->k8s.api),
	    EP_OPTION("k8s-token-file", 0, EP_OPT_FILE, &o->k8s.token_file),
	    EP_OPTION("k8s-ca", 0, EP_OPT_FILE, &o->k8s.ca_file),
	    EP_OPTION_END,
	};
	struct ep_option binary_opts[7], sink_opts[EP_SINK_OPTION_COUNT + 1];
	ep_cli_binary_options(binary_opts, reg);
	ep_sink_option_table(sink_opts, &o->sink);
	const struct ep_option *const tables[] = {agent_opts, binary_opts, sink_opts, NULL};
	int first = ep_options_parse("agent", argc, argv, tables, agent_usage);
	if (first < 0)
		return ep_options_exit_code(first);
	if ((!o->output && !o->sink.streamer.collector) || first != argc) {
		ep_error("agent needs -o PROFILE and/or --collector URL (and no other arguments)");
		return 2;
	}
	return RUN;
}

/* This node's pods, for a live agent in a cluster. 0, or 2 when asked for
 * on the command line and it cannot work. */
static int open_k8s(struct agent_options *o)
{
	char err[512];
	o->k8s.node = o->sink.streamer.node;
	if (ep_k8s_open(&o->k8s, &o->daemon.k8s, err, sizeof(err)) == 0)
		return 0;
	/* asked for on the command line: a mistake to stop at; only found in
	 * the environment: the agent still profiles */
	if (o->k8s.api) {
		ep_error("%s", err);
		return 2;
	}
	ep_warn("%s; labelling with container ids only", err);
	return 0;
}

static int run(struct agent_options *o, struct ep_binary_registry *reg, struct ep_sink *sink)
{
	/* a live agent runs the collector's on-demand sessions, a replay cannot */
	o->sink.streamer.sessions = !o->replay;
	int rc = o->replay ? 0 : open_k8s(o);
	if (rc != 0)
		return rc;
	sink->mode = o->mode;
	if (ep_sink_open(sink, o->output, &o->sink) != 0)
		return 1;
	struct ep_cgroup_labels cl;
	if (o->daemon.live.ncgroups == 1 && !o->replay) {
		ep_cgroup_labels_init(&cl, o->cgroups[0]);
		sink->labels = &cl.labels;
	}
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (o->replay)
		rc = ep_replay_run(o->replay, reg, sink, o->batch_samples);
	else
		rc = ep_daemon_run(&o->daemon, reg, sink);
	if (ep_sink_finish(sink, o->sink.flush_s) != 0 && o->replay)
		rc = 1;
	return rc;
}

int ep_cmd_agent(int argc, char **argv)
{
	struct agent_options *o = calloc(1, sizeof(*o));
	struct ep_binary_registry *reg = ep_binreg_new();
	if (!o || !reg) {
		ep_error("out of memory");
		free(o);
		ep_binreg_free(reg);
		return 1;
	}
	o->daemon.live = (struct ep_live_config){.pids = o->pids,
						 .cgroups = o->cgroups,
						 .period = 1000003,
						 .ip_hz = 997,
						 .cycles_period = 2000003,
						 .drain_ms = 200};
	o->daemon.interval_s = 10;
	o->daemon.binaries_max_mib = 64;
	o->daemon.stop = &stop_requested;
	o->batch_samples = 10000;
	ep_sink_options_init(&o->sink);
	/* binaries met before the first sample (exec events come first) keep
	 * their code on disk until it is decoded: without a branch-stack PMU it
	 * never is; the first branch stack makes later opens read it at once */
	ep_binreg_set_lazy_code(reg, true);
	struct ep_sink sink = {.event = "cpu-clock"};
	snprintf(sink.source, sizeof(sink.source), "bpf");
	int rc = parse_options(argc, argv, o, reg);
	if (rc == RUN)
		rc = run(o, reg, &sink);
	ep_k8s_close(o->daemon.k8s);
	ep_sink_free(&sink);
	ep_binreg_free(reg);
	free(o);
	return rc;
}
