/* SPDX-License-Identifier: Apache-2.0 */
/* edgeprof import: perf.data -> edge profile, through the same pipeline the
 * live agent uses. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/pipeline/pipeline.h"
#include "agent/source/perf_data/perf_data_feed.h"
#include "cli/cli_util.h"
#include "cli/commands.h"
#include "common/export/export.h"
#include "common/profile/profile_file.h"
#include "common/util/log.h"

static void import_usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: edgeprof import PERF.DATA [options]\n"
	    "  --binary FILE     a profiled binary (repeatable); matched by build-id, else path\n"
	    "  --symfs DIR       look up recorded paths under DIR\n"
	    "  --binary-code-max-mib N, --binary-symbols-max-mib N  what one binary's code,\n"
	    "                    and its tables and symbols, may take (128, 64)\n"
	    "  --perf-data-tables-max-mib N  the recording's event ids and build-ids (64)\n"
	    "  --chop C          count the last C branches of each trace (default: the\n"
	    "                    hardware's stack size); 0 counts whole stacks like\n"
	    "                    perf2bolt/AutoFDO (biased, for comparison)\n"
	    "  --chop-unit U     branches (default) or taken: the recording's event counts\n"
	    "                    taken branches only; C then counts taken branches, each\n"
	    "                    with the not-taken ones before it (default N-1)\n"
	    "  --ranges MODE     split (default: ranges end at every branch) or gap\n"
	    "                    (AutoFDO's whole gaps between taken branches; needs --chop 0)\n"
	    "  --no-trigger      do not extend traces to the sample IP\n"
	    "  -j, --jobs N      threads, each counting a share of the samples (default:\n"
	    "                    the CPUs online, at most 8, and 1 below 4 CPUs); the\n"
	    "                    profile is the same for any N\n"
	    "  -o PROFILE        write the profile (protobuf); without it print a report\n"
	    "  --top N           report length (default 10)\n");
}

/* --chop C: a number of branches, or auto (the recording's stack size). */
static int parse_chop(void *chop, const char *arg, char *err, size_t errlen)
{
	unsigned v;
	if (strcmp(arg, "auto") == 0) {
		*(int *)chop = EP_CHOP_AUTO;
		return 0;
	}
	if (ep_parse_uint(arg, 0, 4096, &v) != 0) {
		snprintf(err, errlen, "'%s' is not a number of branches (0-4096 or auto)", arg);
		return -1;
	}
	*(int *)chop = (int)v;
	return 0;
}

static const char *const range_modes[] = {"split", "gap", NULL};
static const char *const chop_units[] = {"branches", "taken", NULL};

/* --jobs: each thread holds its own binaries, decoders and counters */
#define MAX_JOBS 256
/* Every thread orders the whole recording (a fifth of a sample's work on
 * propeller_sample_1), so past ~8 threads an import gains little and its
 * memory (a copy of the binaries and up to 64 MiB of ordering keys each)
 * keeps growing: the default stops there. */
#define DEFAULT_MAX_JOBS 8
/* On 2 CPUs two threads cost 1.6-1.9x the CPU of one (each maps, pages in
 * and orders the whole file) for at best 1.2x less wall time on an idle
 * machine, and took 1.7x longer once anything else ran beside them
 * (propeller_sample_1 x300): below this, one thread by default. */
#define DEFAULT_MIN_CPUS_FOR_JOBS 4

/* config.source and config.event of what was read; 0, or -1 out of memory. */
static int name_source(Edgeprof__V1__Profile *profile, const char *input, const char *event)
{
	char source[4200];
	snprintf(source, sizeof(source), "perf.data:%s", input);
	free(profile->config->source);
	profile->config->source = strdup(source);
	free(profile->config->event);
	profile->config->event = strdup(event);
	return profile->config->source && profile->config->event ? 0 : -1;
}

/* One line of what the import saw; -1 when branch stacks were recorded but
 * none could be counted (the binaries were not found), said how to fix. */
static int summarize(const Edgeprof__V1__Profile *profile, const char *input,
		     const struct ep_perf_data_feed_info *info, unsigned chop_used)
{
	const Edgeprof__V1__Stats *st = profile->stats;
	ep_info("%s: %llu samples (%llu with branch stacks), %llu entries (%llu user), %llu gaps "
		"(%llu inconsistent, %llu unknown code), %llu branches counted (chop %u)",
		input, (unsigned long long)st->samples,
		(unsigned long long)st->samples_with_branches,
		(unsigned long long)st->branch_entries, (unsigned long long)st->branch_entries_user,
		(unsigned long long)st->gaps, (unsigned long long)st->gaps_inconsistent,
		(unsigned long long)st->gaps_unknown_code, (unsigned long long)st->branches_counted,
		chop_used);
	if (info->branch_stacks && st->branch_entries_user > 0 && st->branches_counted == 0) {
		ep_error("%s: no branch could be matched to a binary's code: pass the profiled "
			 "binaries with --binary or --symfs (see the warnings above)",
			 input);
		return -1;
	}
	return 0;
}

/* Intel's retired-taken-branches event (what record --emulate --event taken
 * writes too): the chop in branches is biased there */
static void warn_if_taken_event(const char *input, const struct ep_perf_data_feed_info *info,
				const struct ep_pipeline_config *cfg)
{
	if (!cfg->chop_taken && cfg->chop != 0 && info->branch_stacks &&
	    (strstr(info->event, "0x20c4") || strncmp(info->event, "r20c4", 5) == 0 ||
	     strstr(info->event, "near_taken")))
		ep_warn("%s: event %s counts taken branches only, and the chop counted branches: "
			"the profile is not uniform; import with --chop-unit taken",
			input, info->event);
}

int ep_cmd_import(int argc, char **argv)
{
	struct ep_pipeline_config cfg;
	ep_pipeline_config_default(&cfg);
	const char *output = NULL;
	unsigned top = 10;
	int range_mode = 0;
	int chop_unit = 0;
	char err[512];
	int rc = 2;
	struct ep_binary_registry *reg = ep_binreg_new();
	struct ep_pipeline *pipeline = NULL;
	Edgeprof__V1__Profile *profile = NULL;
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned jobs = online < DEFAULT_MIN_CPUS_FOR_JOBS ? 1
			: online > DEFAULT_MAX_JOBS	   ? DEFAULT_MAX_JOBS
							   : (unsigned)online;
	struct ep_pipeline *workers[MAX_JOBS] = {NULL};
	struct ep_binary_registry *worker_regs[MAX_JOBS] = {NULL};
	if (!reg) {
		ep_error("out of memory");
		return 1;
	}

	struct ep_option binary_opts[7];
	ep_cli_binary_options(binary_opts, reg);
	const struct ep_option import_opts[] = {
	    EP_OPTION("chop", 0, EP_OPT_CALL, &cfg.chop, .call = parse_chop),
	    EP_OPTION("ranges", 0, EP_OPT_CHOICE, &range_mode, .choices = range_modes),
	    EP_OPTION("chop-unit", 0, EP_OPT_CHOICE, &chop_unit, .choices = chop_units),
	    EP_OPTION("no-trigger", 0, EP_OPT_FALSE, &cfg.append_trigger),
	    EP_OPTION("output", 'o', EP_OPT_OUTPUT, &output),
	    EP_OPTION("jobs", 'j', EP_OPT_UINT, &jobs, .min = 1, .max = MAX_JOBS),
	    EP_OPTION("top", 0, EP_OPT_UINT, &top, .min = 1, .max = 100000),
	    EP_OPTION_END,
	};
	const struct ep_option *const tables[] = {binary_opts, import_opts, NULL};
	int first = ep_options_parse("import", argc, argv, tables, import_usage);
	if (first < 0) {
		rc = ep_options_exit_code(first);
		goto out;
	}
	cfg.range_mode = range_mode ? EP_RANGES_GAP : EP_RANGES_SPLIT;
	cfg.chop_taken = chop_unit == 1;
	if (first != argc - 1) {
		ep_error("import needs exactly one perf.data file");
		import_usage(stderr);
		goto out;
	}
	if (cfg.range_mode == EP_RANGES_GAP && cfg.chop != 0) {
		ep_error("--ranges gap counts whole gaps between taken branches, AutoFDO's rule: "
			 "it needs --chop 0");
		goto out;
	}
	const char *input = argv[first];
	if (output && ep_profile_check_target(output, err, sizeof(err)) != 0) {
		ep_error("%s", err);
		goto out;
	}

	pipeline = workers[0] = ep_pipeline_new(&cfg, reg);
	if (!pipeline) {
		ep_error("out of memory");
		rc = 1;
		goto out;
	}
	for (unsigned i = 1; i < jobs; i++) {
		worker_regs[i] = ep_binreg_clone(reg, err, sizeof(err));
		workers[i] = worker_regs[i] ? ep_pipeline_new(&cfg, worker_regs[i]) : NULL;
		if (!workers[i]) {
			ep_error("%s", worker_regs[i] ? "out of memory" : err);
			rc = 1;
			goto out;
		}
	}
	struct ep_perf_data_feed_info info;
	int read_rc = ep_feed_perf_data_parallel(input, workers, jobs, &info, err, sizeof(err));
	rc = 0;
	if (read_rc != 0) {
		/* what was read before the damage is still worth keeping */
		ep_error("%s", err);
		ep_error("%s: keeping the %llu samples read before the error", input,
			 (unsigned long long)info.stats.samples);
		rc = 1;
	}

	warn_if_taken_event(input, &info, &cfg);
	profile = ep_pipeline_profile_merged(workers, jobs);
	if (!profile) {
		ep_error("out of memory building the profile");
		rc = 1;
		goto out;
	}
	if (name_source(profile, input, info.event) != 0) {
		ep_error("out of memory");
		rc = 1;
		goto out;
	}
	if (summarize(profile, input, &info, ep_pipeline_chop_used(pipeline)) != 0)
		rc = 1;

	if (output) {
		if (ep_profile_write(output, profile, err, sizeof(err)) != 0) {
			ep_error("%s", err);
			rc = 1;
		}
	} else {
		ep_report(profile, top, stdout);
	}
out:
	if (profile)
		ep_profile_free(profile);
	for (unsigned i = 0; i < MAX_JOBS; i++) {
		ep_pipeline_free(workers[i]);
		ep_binreg_free(worker_regs[i]);
	}
	ep_binreg_free(reg);
	return rc;
}
