/* SPDX-License-Identifier: Apache-2.0 */
/* edgeprof report: the hottest edges and functions of a profile, read from
 * a file or from the collector. */
#include <stdio.h>

#include "cli/collector_query.h"
#include "cli/commands.h"
#include "common/export/export.h"
#include "common/profile/profile_file.h"
#include "common/util/log.h"
#include "common/util/options.h"

static void report_usage(FILE *out)
{
	fprintf(out, "usage: edgeprof report PROFILE [--top N]\n"
		     "       edgeprof report --collector URL [--build-id ID] [--from S] "
		     "[--to S] [--label K=V]... [--token-file F] [--cacert F] [--cert F "
		     "--key F] [--top N]\n");
}

int ep_cmd_report(int argc, char **argv)
{
	unsigned top = 10;
	struct ep_collector_query q = {0};
	const struct ep_option report_opts[] = {
	    EP_OPTION("top", 0, EP_OPT_UINT, &top, .min = 1, .max = 100000),
	    EP_OPTION("build-id", 0, EP_OPT_STRING, &q.build_id),
	    EP_OPTION_END,
	};
	struct ep_option query_opts[EP_COLLECTOR_QUERY_OPTION_COUNT + 1];
	ep_collector_query_options(query_opts, &q);
	const struct ep_option *const tables[] = {report_opts, query_opts, NULL};
	int first = ep_options_parse("report", argc, argv, tables, report_usage);
	if (first < 0)
		return ep_options_exit_code(first);
	if (q.url ? first != argc : first != argc - 1) {
		ep_error("report needs exactly one profile file, or --collector URL");
		return 2;
	}
	Edgeprof__V1__Profile *profile = ep_cli_read_profile(&q, argv[first]);
	if (!profile)
		return 1;
	int rc = ep_report(profile, top, stdout) == 0 ? 0 : 1;
	ep_profile_free(profile);
	return rc;
}
