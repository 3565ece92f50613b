/* SPDX-License-Identifier: Apache-2.0 */
/* edgeprof export: a profile, read from a file or from the collector, in a
 * format for BOLT, AutoFDO or tools. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli_util.h"
#include "cli/collector_query.h"
#include "cli/commands.h"
#include "common/export/export.h"
#include "common/profile/profile_file.h"
#include "common/util/log.h"

static void export_usage(FILE *out)
{
	fprintf(out, "usage: edgeprof export PROFILE --format json|fdata|preagg|afdo|profgen "
		     "[--build-id ID] [-o OUT]\n"
		     "       edgeprof export --collector URL --format F [--build-id ID] "
		     "[--from S] [--to S] [--label K=V]... [--token-file F] [--cacert F] "
		     "[--cert F --key F] [-o OUT]\n");
}

int ep_cmd_export(int argc, char **argv)
{
	int format = -1;
	const char *output = NULL;
	struct ep_collector_query q = {0};
	const struct ep_option export_opts[] = {
	    EP_OPTION("format", 'f', EP_OPT_CHOICE, &format, .choices = ep_export_format_names),
	    EP_OPTION("build-id", 0, EP_OPT_STRING, &q.build_id),
	    EP_OPTION("output", 'o', EP_OPT_STRING, &output),
	    EP_OPTION_END,
	};
	struct ep_option query_opts[EP_COLLECTOR_QUERY_OPTION_COUNT + 1];
	ep_collector_query_options(query_opts, &q);
	const struct ep_option *const tables[] = {export_opts, query_opts, NULL};
	int first = ep_options_parse("export", argc, argv, tables, export_usage);
	if (first < 0)
		return ep_options_exit_code(first);
	if ((q.url ? first != argc : first != argc - 1) || format < 0) {
		ep_error("export needs one profile file (or --collector URL) and --format "
			 "json|fdata|preagg|afdo|profgen");
		return 2;
	}
	Edgeprof__V1__Profile *profile = ep_cli_read_profile(&q, argv[first]);
	if (!profile)
		return 1;
	int rc = ep_cli_write_export(profile, format, q.build_id, output);
	ep_profile_free(profile);
	return rc;
}

int ep_cli_write_export(const Edgeprof__V1__Profile *profile, int format, const char *build_id,
			const char *output)
{
	char err[512];
	FILE *out = stdout;
	if (output) {
		out = fopen(output, "w");
		if (!out) {
			ep_error("%s: cannot create: %s", output, strerror(errno));
			return 1;
		}
	}
	int rc = 0;
	if (ep_export(profile, (enum ep_export_format)format, build_id, out, err, sizeof(err)) !=
	    0) {
		ep_error("%s", err);
		rc = 1;
	}
	if (fflush(out) != 0 || ferror(out)) {
		ep_error("%s: write failed: %s", output ? output : "stdout", strerror(errno));
		rc = 1;
	}
	if (output && fclose(out) != 0 && rc == 0) {
		ep_error("%s: write failed: %s", output, strerror(errno));
		rc = 1;
	}
	return rc;
}
