/* SPDX-License-Identifier: Apache-2.0 */
/*
 * edgeprof record --emulate: runs a program under the LBR emulator
 * (agent/source/emulator/emu_feed.h) and writes its profile, streams it to a
 * collector, or both; --exact-out also writes every edge's exact count,
 * --perf-data the samples as perf.data.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "agent/pipeline/pipeline.h"
#include "agent/source/emulator/emu_feed.h"
#include "agent/stream/sink.h"
#include "cli/commands.h"
#include "common/export/export.h"
#include "common/profile/profile_file.h"
#include "common/util/log.h"
#include "common/util/options.h"
#include "common/util/output_file.h"

struct record_opts {
	bool emulate;
	struct ep_emu_config emu;
	unsigned chop;
	bool chop_given, jitter_given;
	const char *output, *exact_out, *exact_profile;
	struct ep_sink_options sink;
};

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: edgeprof record --emulate [options] -o PROFILE -- CMD [ARGS]\n"
	    "  --emulate          run CMD under QEMU with the LBR emulator (no PMU needed);\n"
	    "                     an x86_64 or aarch64 program, picked from its ELF header\n"
	    "  --event E          branches (default) | taken | instructions\n"
	    "  --period P         mean sampling period in events (default 10007)\n"
	    "  --jitter D         period drawn from [P-D, P+D] (default P/16; 0 = fixed)\n"
	    "  --lbr N            branch-stack entries, 1-64 (default 32; Arm BRBE: up to 64)\n"
	    "  --chop C           branches counted per sample (default N; 0 = whole stack);\n"
	    "                     with --event taken, taken branches, each with the\n"
	    "                     not-taken ones before it (default N-1)\n"
	    "  --seed S           random seed: the same seed gives the same profile\n"
	    "  --exact-out F      also write every edge's exact count (JSON export schema)\n"
	    "  --exact-profile F  the same as a profile file (report --insn-mix reads it)\n"
	    "  --perf-data F      also write the samples as a `perf record -b` perf.data file\n"
	    "                     (for perf script, perf2bolt, create_llvm_prof)\n"
	    "  --mode M           edges (default): every taken branch; calls: the record keeps\n"
	    "                     calls and returns only (call-graph mode)\n"
	    "  -o PROFILE         the profile to write\n"
	    "  --collector URL    also stream it to a collector (and the agent's --spool,\n"
	    "                     --token-file, --cacert, --cert, --key, --node options);\n"
	    "                     URL1,URL2,... or repeated: replicas, a failed batch goes\n"
	    "                     to the next\n");
}

/* --mode edges|calls, worded as the tests expect */
static int parse_mode(void *calls_only, const char *arg, char *err, size_t errlen)
{
	if (strcmp(arg, "edges") != 0 && strcmp(arg, "calls") != 0) {
		snprintf(err, errlen, "'%s' is not edges or calls", arg);
		return -1;
	}
	*(bool *)calls_only = strcmp(arg, "calls") == 0;
	return 0;
}

static const char *const events[] = {"branches", "taken", "instructions", NULL};

/* The options into o; the index of the program to run, or a negative
 * ep_options_parse result. */
static int parse_options(int argc, char **argv, struct record_opts *o)
{
	int event = 0;
	const unsigned any = UINT_MAX - 1;
	struct ep_option sink_opts[EP_SINK_OPTION_COUNT + 1];
	ep_sink_option_table(sink_opts, &o->sink);
	const struct ep_option record_opts[] = {
	    EP_OPTION("emulate", 0, EP_OPT_TRUE, &o->emulate),
	    EP_OPTION("event", 0, EP_OPT_CHOICE, &event, .choices = events),
	    EP_OPTION("period", 0, EP_OPT_UINT, &o->emu.period, .max = any),
	    EP_OPTION("jitter", 0, EP_OPT_UINT, &o->emu.jitter, .max = any,
		      .given = &o->jitter_given),
	    EP_OPTION("lbr", 0, EP_OPT_UINT, &o->emu.lbr, .max = any),
	    EP_OPTION("chop", 0, EP_OPT_UINT, &o->chop, .max = any, .given = &o->chop_given),
	    EP_OPTION("seed", 0, EP_OPT_UINT, &o->emu.seed, .max = any),
	    EP_OPTION("exact-out", 0, EP_OPT_OUTPUT, &o->exact_out),
	    EP_OPTION("exact-profile", 0, EP_OPT_OUTPUT, &o->exact_profile),
	    EP_OPTION("perf-data", 0, EP_OPT_OUTPUT, &o->emu.perf_data),
	    EP_OPTION("mode", 0, EP_OPT_CALL, &o->emu.calls_only, .call = parse_mode),
	    EP_OPTION("output", 'o', EP_OPT_OUTPUT, &o->output),
	    EP_OPTION_END,
	};
	const struct ep_option *const tables[] = {record_opts, sink_opts, NULL};
	/* options end at the program to run: its own are left to it */
	int first = ep_options_parse_command("record", argc, argv, tables, usage);
	o->emu.event = events[event];
	return first;
}

/* What the options say together; 0, or 2 (logged). */
static int check_options(struct record_opts *o, int first, int argc)
{
	if (!o->emulate) {
		ep_error("record samples a program through the LBR emulator: pass --emulate (live "
			 "sampling of a machine is the agent's job)");
		return 2;
	}
	if (!o->jitter_given)
		o->emu.jitter = o->emu.period / 16;
	if (o->emu.period == 0 || o->emu.jitter >= o->emu.period || o->emu.lbr < 1 ||
	    o->emu.lbr > EP_MAX_BRANCH_ENTRIES) {
		ep_error("need --period > --jitter >= 0 and --lbr between 1 and %d",
			 EP_MAX_BRANCH_ENTRIES);
		return 2;
	}
	if ((!o->output && !o->sink.streamer.collector) || first >= argc) {
		ep_error("record needs -o PROFILE and/or --collector URL, and a program to run "
			 "after --");
		usage(stderr);
		return 2;
	}
	char err[512];
	if (o->output && ep_profile_check_target(o->output, err, sizeof(err)) != 0) {
		ep_error("%s", err); /* before the run, not after it */
		return 2;
	}
	return 0;
}

/* How the program ended, said; 0, or 1 when it failed. */
static int program_status(const char *name, const struct ep_emu_result *run)
{
	int rc = 0;
	if (WIFSIGNALED(run->status)) {
		ep_error("%s was killed by signal %d (%s): profile of what ran written", name,
			 WTERMSIG(run->status), strsignal(WTERMSIG(run->status)));
		rc = 1;
	} else if (WIFEXITED(run->status) && WEXITSTATUS(run->status) != 0) {
		ep_warn("%s exited with status %d: profile of what ran written", name,
			WEXITSTATUS(run->status));
		rc = 1;
	}
	if (!run->stats.ended)
		ep_warn("%s: the run did not end normally: exact counts are not available", name);
	return rc;
}

/* The profile to -o and/or the collector; 0, or 1. */
static int write_profile(const struct record_opts *o, struct ep_pipeline *pipeline,
			 Edgeprof__V1__Profile *profile)
{
	const struct ep_emu_config *emu = &o->emu;
	int rc = 0;
	char err[512];
	free(profile->config->source);
	free(profile->config->event);
	profile->config->source = strdup("emulator");
	profile->config->event = strdup(emu->event);
	profile->config->period = emu->period;
	profile->config->jitter = emu->jitter;
	profile->config->entries = emu->lbr;
	if (o->output && ep_profile_write(o->output, profile, err, sizeof(err)) != 0) {
		ep_error("%s", err);
		rc = 1;
	}
	if (o->sink.streamer.collector) {
		/* the whole run as one batch, through the agent's streaming path */
		struct ep_sink sink = {
		    .event = emu->event, .period = emu->period, .jitter = emu->jitter};
		snprintf(sink.source, sizeof(sink.source), "emulator");
		struct ep_sink_options so = o->sink;
		if (ep_sink_open(&sink, NULL, &so) != 0 || ep_sink_emit(&sink, pipeline) != 0 ||
		    ep_sink_finish(&sink, so.flush_s) != 0)
			rc = 1;
		ep_sink_free(&sink);
	}
	return rc;
}

/* --exact-out: the run's exact counts as JSON; 0, or 1. */
static int write_exact(const char *path, const Edgeprof__V1__Profile *exact)
{
	char err[512];
	struct ep_output o;
	if (ep_output_open(&o, path, "w", err, sizeof(err)) != 0) {
		ep_error("%s", err);
		return 1;
	}
	if (ep_export(exact, EP_EXPORT_JSON, NULL, o.f, err, sizeof(err)) != 0) {
		ep_error("%s: cannot write the exact counts: %s", path, err);
		ep_output_discard(&o);
		return 1;
	}
	if (ep_output_commit(&o, err, sizeof(err)) != 0) {
		ep_error("%s", err);
		return 1;
	}
	return 0;
}

/* Runs the program and writes what the options ask for; the exit code. */
static int record(const struct record_opts *o, char **cmd)
{
	struct ep_pipeline_config cfg;
	ep_pipeline_config_default(&cfg);
	/* counting taken branches, the stack's pairs (a taken branch and the
	 * gap before it) are what each sample point covers equally: all but
	 * the oldest entry's, whose gap is unknown */
	cfg.chop_taken = strcmp(o->emu.event, "taken") == 0;
	cfg.chop = o->chop_given ? (int)o->chop : (int)o->emu.lbr - cfg.chop_taken;
	cfg.calls_only = o->emu.calls_only;
	struct ep_binary_registry *reg = ep_binreg_new();
	struct ep_pipeline *pipeline = reg ? ep_pipeline_new(&cfg, reg) : NULL;
	Edgeprof__V1__Profile *profile = NULL;
	struct ep_emu_result run = {0};
	int rc = 1;
	if (!pipeline || ep_feed_emulated(&o->emu, cmd, pipeline, &run) != 0)
		goto out;
	rc = program_status(cmd[0], &run);
	profile = ep_pipeline_profile(pipeline);
	if (!profile) {
		rc = 1;
		goto out;
	}
	rc |= write_profile(o, pipeline, profile);
	ep_info("%s: %llu samples, %llu branches counted", o->output ? o->output : "collector",
		(unsigned long long)profile->stats->samples,
		(unsigned long long)profile->stats->branches_counted);
	if (run.stats.ended)
		ep_info("%s ran %llu branches, %llu instructions", cmd[0],
			(unsigned long long)run.stats.branches,
			(unsigned long long)run.stats.instructions);
	if (o->exact_out && run.stats.ended)
		rc |= write_exact(o->exact_out, run.exact);
	char err[512];
	if (o->exact_profile && run.stats.ended &&
	    ep_profile_write(o->exact_profile, run.exact, err, sizeof(err)) != 0) {
		ep_error("%s", err);
		rc = 1;
	}
out:
	ep_emu_result_free(&run);
	if (profile)
		ep_profile_free(profile);
	ep_pipeline_free(pipeline);
	ep_binreg_free(reg);
	return rc;
}

int ep_cmd_record(int argc, char **argv)
{
	struct record_opts o = {.emu = {.period = 10007, .lbr = 32, .seed = 1}};
	ep_sink_options_init(&o.sink);
	int first = parse_options(argc, argv, &o);
	if (first < 0)
		return ep_options_exit_code(first);
	int rc = check_options(&o, first, argc);
	if (rc != 0)
		return rc;
	char **cmd = argv + first;
	char *program = ep_emu_find_program(cmd[0]);
	if (!program) {
		ep_error("%s: command not found", cmd[0]);
		return 2;
	}
	free(program);
	return record(&o, cmd);
}
