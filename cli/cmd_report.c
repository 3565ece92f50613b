/* SPDX-License-Identifier: Apache-2.0 */
/* edgeprof report: the hottest edges and functions of a profile, read from
 * a file or from the collector. */
#include <stdio.h>

#include "cli/cli_mix.h"
#include "cli/collector_query.h"
#include "cli/commands.h"
#include "common/export/export.h"
#include "common/profile/profile_file.h"
#include "common/util/build_id.h"
#include "common/util/log.h"
#include "common/util/options.h"

static void report_usage(FILE *out)
{
	fprintf(out,
		"usage: edgeprof report PROFILE [--top N]\n"
		"       edgeprof report PROFILE --insn-mix [--range START-END | --function "
		"NAME] [--binary F]... [--symfs DIR] [--top N]\n"
		"       edgeprof report --collector URL [--build-id ID] [--from S] "
		"[--to S] [--label K=V]... [--token-file F] [--cacert F] [--cert F "
		"--key F] [--top N]\n"
		"       edgeprof report PROFILE --cpi [--top N]\n"
		"  --cpi             the worst blocks by cycles and by cycles per instruction\n"
		"  --insn-mix        executed instructions by type (decoded from the "
		"binaries)\n"
		"  --range A-B       only instructions at addresses in [A, B)\n"
		"  --function NAME   only instructions of that function\n"
		"  --profile-max-mib N  a profile's payload, and what it unpacks to, at most\n"
		"                    N MiB (1024)\n");
}

int ep_cmd_report(int argc, char **argv)
{
	unsigned top = 10;
	bool cpi = false;
	struct ep_collector_query q = {0};
	const struct ep_option report_opts[] = {
	    EP_OPTION("top", 0, EP_OPT_UINT, &top, .min = 1, .max = 100000),
	    EP_OPTION("cpi", 0, EP_OPT_TRUE, &cpi),
	    EP_OPTION("build-id", 0, EP_OPT_CALL, &q.build_id, .call = ep_build_id_option),
	    EP_OPTION_END,
	};
	struct ep_option query_opts[EP_COLLECTOR_QUERY_OPTION_COUNT + 1];
	ep_collector_query_options(query_opts, &q);
	struct ep_cli_mix mo = {0};
	struct ep_option mix_opts[EP_CLI_MIX_OPTION_COUNT + 1];
	if (ep_cli_mix_options(mix_opts, &mo) != 0)
		return 1;
	const struct ep_option *const tables[] = {report_opts, query_opts, mix_opts, NULL};
	int rc = 2;
	int first = ep_options_parse("report", argc, argv, tables, report_usage);
	if (first < 0) {
		rc = ep_options_exit_code(first);
		goto out;
	}
	if (q.url ? first != argc : first != argc - 1) {
		ep_error("report needs exactly one profile file, or --collector URL");
		goto out;
	}
	if ((mo.range || mo.function) && !mo.insn_mix) {
		ep_error("--range and --function go with --insn-mix");
		goto out;
	}
	char why[256];
	if (q.url && q.build_id && ep_build_id_check(q.build_id, why, sizeof(why)) != 0) {
		ep_error("--build-id: %s (the collector is asked for a whole one)", why);
		goto out;
	}
	rc = 1;
	const char *name = q.url ? q.url : argv[first];
	Edgeprof__V1__Profile *profile = ep_cli_read_profile(&q, argv[first]);
	if (!profile)
		goto out;
	if (cpi && mo.insn_mix) {
		ep_error("--cpi and --insn-mix: one report at a time");
		rc = 2;
	} else if (cpi) {
		rc = ep_report_cpi(profile, top, stdout) == 0 ? 0 : 1;
	} else if (mo.insn_mix) {
		struct ep_profile_mix *mix = ep_cli_profile_mix(profile, &mo, name);
		rc = mix && ep_report_insn_mix(profile, mix, top, stdout) == 0 ? 0 : 1;
		ep_profile_mix_free(mix);
	} else {
		rc = ep_report(profile, top, stdout) == 0 ? 0 : 1;
	}
	ep_profile_free(profile);
out:
	ep_cli_mix_free(&mo);
	return rc;
}
