/* SPDX-License-Identifier: Apache-2.0 */
/* edgeprof export: a profile, read from a file or from the collector, in a
 * format for BOLT, AutoFDO or tools. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli_bat.h"
#include "cli/cli_infer.h"
#include "cli/cli_mix.h"
#include "cli/cli_util.h"
#include "cli/collector_query.h"
#include "cli/commands.h"
#include "common/export/export.h"
#include "common/profile/profile_file.h"
#include "common/util/build_id.h"
#include "common/util/log.h"
#include "common/util/output_file.h"

static void export_usage(FILE *out)
{
	fprintf(out,
		"usage: edgeprof export PROFILE --format json|fdata|preagg|afdo|profgen|pprof "
		"[--build-id ID] [--infer on|off] [--infer-max-blocks N] [-o OUT]\n"
		"       edgeprof export PROFILE --format json --insn-mix [--range START-END "
		"| --function NAME] [--binary F]... [--symfs DIR] [-o OUT]\n"
		"       edgeprof export --collector URL --format FMT [--build-id ID] "
		"[--from S] [--to S] [--label K=V]... [--token-file F] [--cacert F] "
		"[--cert F --key F] [-o OUT]\n"
		"  --profile-max-mib N  a profile's payload, and what it unpacks to, at most\n"
		"                    N MiB (1024)\n"
		"  --infer on|off    fdata: block and edge counts that conserve flow, inferred\n"
		"                    on the binary's code (on; the file from the profile's path,\n"
		"                    --binary or --symfs)\n"
		"  --infer-max-blocks N  a function with more blocks keeps its sampled counts\n"
		"                    (65536)\n");
}

/* A format that needs branches of an IP-only profile: a user's error,
 * said in one line, rather than an empty file. */
static bool ip_only(const Edgeprof__V1__Profile *profile, int format, const char *build_id,
		    const char *name)
{
	char why[256];
	if (ep_export_check_branches(profile, (enum ep_export_format)format, build_id, why,
				     sizeof(why)) == 0)
		return false;
	ep_error("%s: %s", name, why);
	return true;
}

int ep_cmd_export(int argc, char **argv)
{
	int format = -1;
	const char *output = NULL;
	struct ep_collector_query q = {0};
	const struct ep_option export_opts[] = {
	    EP_OPTION("format", 'f', EP_OPT_CHOICE, &format, .choices = ep_export_format_names),
	    EP_OPTION("build-id", 0, EP_OPT_CALL, &q.build_id, .call = ep_build_id_option),
	    EP_OPTION("output", 'o', EP_OPT_OUTPUT, &output),
	    EP_OPTION_END,
	};
	struct ep_option query_opts[EP_COLLECTOR_QUERY_OPTION_COUNT + 1];
	ep_collector_query_options(query_opts, &q);
	struct ep_cli_mix mo = {0};
	struct ep_option mix_opts[EP_CLI_MIX_OPTION_COUNT + 1];
	if (ep_cli_mix_options(mix_opts, &mo) != 0)
		return 1;
	struct ep_cli_infer io = {0};
	struct ep_option infer_opts[EP_CLI_INFER_OPTION_COUNT + 1];
	ep_cli_infer_options(infer_opts, &io);
	const struct ep_option *const tables[] = {export_opts, query_opts, mix_opts, infer_opts,
						  NULL};
	int rc = 2;
	int first = ep_options_parse("export", argc, argv, tables, export_usage);
	if (first < 0) {
		rc = ep_options_exit_code(first);
		goto out;
	}
	if ((q.url ? first != argc : first != argc - 1) || format < 0) {
		ep_error("export needs one profile file (or --collector URL) and --format "
			 "json|fdata|preagg|afdo|profgen|pprof");
		goto out;
	}
	if ((mo.range || mo.function) && !mo.insn_mix) {
		ep_error("--range and --function go with --insn-mix");
		goto out;
	}
	if (mo.insn_mix && format != EP_EXPORT_JSON) {
		ep_error("--insn-mix: only the json format has a place for it");
		goto out;
	}
	char why[256];
	if (q.url && q.build_id && ep_build_id_check(q.build_id, why, sizeof(why)) != 0) {
		ep_error("--build-id: %s (the collector is asked for a whole one)", why);
		goto out;
	}
	rc = 1;
	Edgeprof__V1__Profile *profile = ep_cli_read_profile(&q, argv[first]);
	if (!profile)
		goto out;
	if (ip_only(profile, format, q.build_id, q.url ? q.url : argv[first])) {
		rc = 2;
		ep_profile_free(profile);
		goto out;
	}
	struct ep_profile_mix *mix =
	    mo.insn_mix ? ep_cli_profile_mix(profile, &mo, q.url ? q.url : argv[first]) : NULL;
	/* a BOLTed binary's fdata is for its input binary, whose code the
	 * inference does not see: its sampled counts are translated */
	rc =
	    format == EP_EXPORT_FDATA ? ep_cli_export_bat(profile, q.build_id, mo.reg, output) : -1;
	const Edgeprof__V1__Profile *view =
	    rc < 0 ? ep_cli_infer(&io, profile, format, q.build_id, mo.reg) : NULL;
	if (rc < 0 && !view)
		ep_error("infer: out of memory");
	else if (rc < 0 && (!mo.insn_mix || mix))
		rc = ep_cli_write_export_mix(view, format, q.build_id, mix, output);
	if (rc < 0)
		rc = 1;
	ep_cli_infer_free(&io);
	ep_profile_mix_free(mix);
	ep_profile_free(profile);
out:
	ep_cli_mix_free(&mo);
	return rc;
}

int ep_cli_write_export(const Edgeprof__V1__Profile *profile, int format, const char *build_id,
			const char *output)
{
	return ep_cli_write_export_mix(profile, format, build_id, NULL, output);
}

int ep_cli_write_export_mix(const Edgeprof__V1__Profile *profile, int format, const char *build_id,
			    const struct ep_profile_mix *mix, const char *output)
{
	char err[512];
	struct ep_output o = {.f = stdout};
	if (output && ep_output_open(&o, output, "w", err, sizeof(err)) != 0) {
		ep_error("%s", err);
		return 1;
	}
	if (ep_export_mix(profile, (enum ep_export_format)format, build_id, mix, o.f, err,
			  sizeof(err)) != 0) {
		ep_error("%s", err);
		if (output)
			ep_output_discard(&o); /* the old file stays whole */
		return 1;
	}
	if (output) {
		if (ep_output_commit(&o, err, sizeof(err)) != 0) {
			ep_error("%s", err);
			return 1;
		}
	} else if (fflush(stdout) != 0 || ferror(stdout)) {
		ep_error("stdout: write failed: %s", strerror(errno));
		return 1;
	}
	return 0;
}
