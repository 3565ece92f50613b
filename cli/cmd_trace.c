/* SPDX-License-Identifier: Apache-2.0 */
/* edgeprof trace: every gap of every sample as the pipeline reconstructed
 * it, with the instructions walked, in runtime addresses. For debugging and
 * for the oracle test against `perf script -F brstackinsn`. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "agent/source/perf_data/perf_data_feed.h"
#include "cli/cli_util.h"
#include "cli/commands.h"
#include "common/decode/decoder_debug.h"
#include "common/util/log.h"

#define MAX_LINE_INSNS 65536

struct trace_ctx {
	struct ep_decoder_cache *decoders;
	uint64_t *insns;
	FILE *out;
};

static void print_gap(void *ctx, const struct ep_gap_report *g)
{
	struct trace_ctx *c = ctx;
	fprintf(c->out, "G %" PRIu64 " %" PRIx64 " %" PRIx64, g->sample, g->start, g->end);
	if (!g->consistent) {
		fprintf(c->out, " cut %s\n", g->why);
		return;
	}
	struct ep_decoder *dec = ep_decoder_cache_get(c->decoders, g->bin);
	size_t n = 0;
	enum ep_walk_status ws =
	    ep_decoder_line_insns(dec, g->start_vaddr, g->end_vaddr, c->insns, MAX_LINE_INSNS, &n);
	if (ws != EP_WALK_OK) {
		fprintf(c->out, " error %s\n", ep_walk_status_name(ws));
		return;
	}
	fputs(" ok", c->out);
	for (size_t i = 0; i < n; i++)
		fprintf(c->out, " %" PRIx64, c->insns[i] - g->start_vaddr + g->start);
	fputc('\n', c->out);
}

static void trace_usage(FILE *out)
{
	fprintf(out, "usage: edgeprof trace PERF.DATA [--binary FILE]... [--symfs DIR]\n"
		     "         [--binary-code-max-mib N] [--binary-symbols-max-mib N]\n"
		     "         [--perf-data-tables-max-mib N]\n");
}

int ep_cmd_trace(int argc, char **argv)
{
	char err[512];
	int rc = 2;
	struct ep_binary_registry *reg = ep_binreg_new();
	struct ep_pipeline *pipeline = NULL;
	struct trace_ctx ctx = {.out = stdout};
	if (!reg)
		return 1;
	struct ep_option binary_opts[7];
	ep_cli_binary_options(binary_opts, reg);
	const struct ep_option *const tables[] = {binary_opts, NULL};
	int first = ep_options_parse("trace", argc, argv, tables, trace_usage);
	if (first < 0) {
		rc = ep_options_exit_code(first);
		goto out;
	}
	if (first != argc - 1) {
		ep_error("trace needs exactly one perf.data file");
		goto out;
	}
	struct ep_pipeline_config cfg;
	ep_pipeline_config_default(&cfg);
	pipeline = ep_pipeline_new(&cfg, reg);
	ctx.insns = malloc(MAX_LINE_INSNS * sizeof(*ctx.insns));
	if (!pipeline || !ctx.insns) {
		rc = 1;
		goto out;
	}
	ctx.decoders = ep_pipeline_decoders(pipeline);
	ep_reconstructor_set_gap_observer(ep_pipeline_reconstructor(pipeline), print_gap, &ctx);
	struct ep_perf_data_feed_info info;
	rc = 0;
	if (ep_feed_perf_data(argv[first], pipeline, &info, err, sizeof(err)) != 0) {
		ep_error("%s", err);
		rc = 1;
	}
out:
	free(ctx.insns);
	ep_pipeline_free(pipeline);
	ep_binreg_free(reg);
	return rc;
}
