/* SPDX-License-Identifier: Apache-2.0 */
/* edgeprof import: perf.data -> edge profile, through the same pipeline the
 * live agent uses. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../export/export.h"
#include "../pipeline/perf_data_feed.h"
#include "../pipeline/pipeline.h"
#include "../profile/profile_file.h"
#include "../util/log.h"
#include "cli_util.h"
#include "commands.h"

static void import_usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: edgeprof import PERF.DATA [options]\n"
	    "  --binary FILE     a profiled binary (repeatable); matched by build-id, else path\n"
	    "  --symfs DIR       look up recorded paths under DIR\n"
	    "  --chop C          count the last C branches of each trace (default: the\n"
	    "                    hardware's stack size); 0 counts whole stacks like\n"
	    "                    perf2bolt/AutoFDO (biased, for comparison)\n"
	    "  --ranges MODE     split (default: ranges end at every branch) or gap\n"
	    "                    (AutoFDO's whole gaps between taken branches; needs --chop 0)\n"
	    "  --no-trigger      do not extend traces to the sample IP\n"
	    "  -o PROFILE        write the profile (protobuf); without it print a report\n"
	    "  --top N           report length (default 10)\n"
	    "  --log-level L     error|warn|info|debug\n");
}

int ep_cmd_import(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"binary", required_argument, NULL, 'b'}, {"symfs", required_argument, NULL, 's'},
	    {"chop", required_argument, NULL, 'c'},   {"ranges", required_argument, NULL, 'r'},
	    {"no-trigger", no_argument, NULL, 'T'},   {"output", required_argument, NULL, 'o'},
	    {"top", required_argument, NULL, 't'},    {"log-level", required_argument, NULL, 'l'},
	    {"help", no_argument, NULL, 'h'},	      {0},
	};
	struct ep_pipeline_config cfg;
	ep_pipeline_config_default(&cfg);
	const char *output = NULL;
	unsigned top = 10;
	char err[512];
	int rc = 2;
	struct ep_binary_registry *reg = ep_binreg_new();
	struct ep_pipeline *pipeline = NULL;
	Edgeprof__V1__Profile *profile = NULL;
	if (!reg) {
		ep_error("out of memory");
		return 1;
	}

	optind = 1;
	int ch;
	while ((ch = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		int handled = ep_cli_binary_option(reg, ch, optarg);
		if (handled < 0)
			goto out;
		if (handled > 0)
			continue;
		switch (ch) {
		case 'c':
			if (strcmp(optarg, "auto") == 0) {
				cfg.chop = EP_CHOP_AUTO;
			} else if (ep_parse_uint(optarg, 0, 4096, (unsigned *)&cfg.chop) != 0) {
				ep_error(
				    "--chop: '%s' is not a number of branches (0-4096 or auto)",
				    optarg);
				goto out;
			}
			break;
		case 'r':
			if (strcmp(optarg, "split") == 0) {
				cfg.range_mode = EP_RANGES_SPLIT;
			} else if (strcmp(optarg, "gap") == 0) {
				cfg.range_mode = EP_RANGES_GAP;
			} else {
				ep_error("--ranges: '%s' is neither split nor gap", optarg);
				goto out;
			}
			break;
		case 'T':
			cfg.append_trigger = false;
			break;
		case 'o':
			output = optarg;
			break;
		case 't':
			if (ep_parse_uint(optarg, 1, 100000, &top) != 0) {
				ep_error("--top: '%s' is not a positive number", optarg);
				goto out;
			}
			break;
		case 'l': {
			int level = ep_log_parse_level(optarg);
			if (level < 0) {
				ep_error("--log-level: '%s' is not error|warn|info|debug", optarg);
				goto out;
			}
			ep_log_set_level((enum ep_log_level)level);
			break;
		}
		case 'h':
			import_usage(stdout);
			rc = 0;
			goto out;
		default:
			import_usage(stderr);
			goto out;
		}
	}
	if (optind != argc - 1) {
		ep_error("import needs exactly one perf.data file");
		import_usage(stderr);
		goto out;
	}
	if (cfg.range_mode == EP_RANGES_GAP && cfg.chop != 0) {
		ep_error("--ranges gap counts whole gaps between taken branches, AutoFDO's rule: "
			 "it needs --chop 0");
		goto out;
	}
	const char *input = argv[optind];

	pipeline = ep_pipeline_new(&cfg, reg);
	if (!pipeline) {
		ep_error("out of memory");
		rc = 1;
		goto out;
	}
	struct ep_perf_data_feed_info info;
	int read_rc = ep_feed_perf_data(input, pipeline, &info, err, sizeof(err));
	rc = 0;
	if (read_rc != 0) {
		/* what was read before the damage is still worth keeping */
		ep_error("%s", err);
		ep_error("%s: keeping the %llu samples read before the error", input,
			 (unsigned long long)info.stats.samples);
		rc = 1;
	}

	profile = ep_pipeline_profile(pipeline);
	if (!profile) {
		ep_error("out of memory building the profile");
		rc = 1;
		goto out;
	}
	char source[4200];
	snprintf(source, sizeof(source), "perf.data:%s", input);
	free(profile->config->source);
	profile->config->source = strdup(source);
	free(profile->config->event);
	profile->config->event = strdup(info.event);
	if (!profile->config->source || !profile->config->event) {
		ep_error("out of memory");
		rc = 1;
		goto out;
	}

	const Edgeprof__V1__Stats *st = profile->stats;
	ep_info("%s: %llu samples (%llu with branch stacks), %llu entries (%llu user), %llu gaps "
		"(%llu inconsistent, %llu unknown code), %llu branches counted (chop %u)",
		input, (unsigned long long)st->samples,
		(unsigned long long)st->samples_with_branches,
		(unsigned long long)st->branch_entries, (unsigned long long)st->branch_entries_user,
		(unsigned long long)st->gaps, (unsigned long long)st->gaps_inconsistent,
		(unsigned long long)st->gaps_unknown_code, (unsigned long long)st->branches_counted,
		ep_pipeline_chop_used(pipeline));
	if (info.branch_stacks && st->branch_entries_user > 0 && st->branches_counted == 0) {
		ep_error("%s: no branch could be matched to a binary's code: pass the profiled "
			 "binaries with --binary or --symfs (see the warnings above)",
			 input);
		rc = 1;
	}

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
	ep_pipeline_free(pipeline);
	ep_binreg_free(reg);
	return rc;
}
