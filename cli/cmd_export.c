/* SPDX-License-Identifier: Apache-2.0 */
/* edgeprof report / export: read a profile file, print or convert it. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli_util.h"
#include "cli/collector_query.h"
#include "cli/commands.h"
#include "common/export/export.h"
#include "common/profile/profile_file.h"
#include "common/util/log.h"

/* The profile named on the command line, or NULL (error logged). */
static Edgeprof__V1__Profile *read_profile(const char *path)
{
	char err[512];
	Edgeprof__V1__Profile *profile = NULL;
	if (ep_profile_read(path, &profile, err, sizeof(err)) != 0)
		ep_error("%s", err);
	return profile;
}

int ep_cmd_report(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"top", required_argument, NULL, 't'},
	    {"build-id", required_argument, NULL, 'b'},
	    {"help", no_argument, NULL, 'h'},
	    EP_COLLECTOR_QUERY_OPTIONS,
	    {0},
	};
	unsigned top = 10;
	struct ep_collector_query q = {0};
	optind = 1;
	int ch;
	while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		int qo = ep_collector_query_option(&q, ch, optarg);
		if (qo < 0)
			return 2;
		if (qo > 0)
			continue;
		switch (ch) {
		case 'b':
			q.build_id = optarg;
			break;
		case 't':
			if (ep_parse_uint(optarg, 1, 100000, &top) != 0) {
				ep_error("--top: '%s' is not a positive number", optarg);
				return 2;
			}
			break;
		case 'h':
			printf("usage: edgeprof report PROFILE [--top N]\n"
			       "       edgeprof report --collector URL [--build-id ID] [--from S] "
			       "[--to S] [--label K=V]... [--token-file F] [--cacert F] [--cert F "
			       "--key F] [--top N]\n");
			return 0;
		default:
			return 2;
		}
	}
	if (q.url ? optind != argc : optind != argc - 1) {
		ep_error("report needs exactly one profile file, or --collector URL");
		return 2;
	}
	Edgeprof__V1__Profile *profile =
	    q.url ? ep_collector_fetch_profile(&q) : read_profile(argv[optind]);
	if (!profile)
		return 1;
	int rc = ep_report(profile, top, stdout) == 0 ? 0 : 1;
	ep_profile_free(profile);
	return rc;
}

int ep_cmd_export(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"format", required_argument, NULL, 'f'},
	    {"build-id", required_argument, NULL, 'b'},
	    {"output", required_argument, NULL, 'o'},
	    {"help", no_argument, NULL, 'h'},
	    EP_COLLECTOR_QUERY_OPTIONS,
	    {0},
	};
	int format = -1;
	const char *build_id = NULL;
	const char *output = NULL;
	struct ep_collector_query q = {0};
	optind = 1;
	int ch;
	while ((ch = getopt_long(argc, argv, "f:o:h", opts, NULL)) != -1) {
		int qo = ep_collector_query_option(&q, ch, optarg);
		if (qo < 0)
			return 2;
		if (qo > 0)
			continue;
		switch (ch) {
		case 'f':
			format = ep_export_parse_format(optarg);
			if (format < 0) {
				ep_error("--format: '%s' is not json, fdata, preagg or afdo",
					 optarg);
				return 2;
			}
			break;
		case 'b':
			build_id = optarg;
			break;
		case 'o':
			output = optarg;
			break;
		case 'h':
			printf("usage: edgeprof export PROFILE --format json|fdata|preagg|afdo "
			       "[--build-id ID] [-o OUT]\n"
			       "       edgeprof export --collector URL --format F [--build-id ID] "
			       "[--from S] [--to S] [--label K=V]... [--token-file F] [--cacert F] "
			       "[--cert F --key F] [-o OUT]\n");
			return 0;
		default:
			return 2;
		}
	}
	if ((q.url ? optind != argc : optind != argc - 1) || format < 0) {
		ep_error("export needs one profile file (or --collector URL) and --format "
			 "json|fdata|preagg|afdo");
		return 2;
	}
	q.build_id = build_id;
	Edgeprof__V1__Profile *profile =
	    q.url ? ep_collector_fetch_profile(&q) : read_profile(argv[optind]);
	if (!profile)
		return 1;
	int rc = ep_cli_write_export(profile, format, build_id, output);
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
