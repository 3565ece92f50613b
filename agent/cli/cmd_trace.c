/* SPDX-License-Identifier: Apache-2.0 */
/* edgeprof trace: every gap of every sample as the pipeline reconstructed
 * it, with the instructions walked, in runtime addresses. For debugging and
 * for the oracle test against `perf script -F brstackinsn`. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "../decode/decoder_debug.h"
#include "../pipeline/perf_data_feed.h"
#include "../util/log.h"
#include "cli_util.h"
#include "commands.h"

#define MAX_LINE_INSNS 65536

struct trace_ctx {
	struct ep_reconstructor *reconstructor;
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
	struct ep_decoder *dec = ep_reconstructor_decoder(c->reconstructor, g->bin);
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

int ep_cmd_trace(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"binary", required_argument, NULL, 'b'},
	    {"symfs", required_argument, NULL, 's'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	char err[512];
	int rc = 2;
	struct ep_binary_registry *reg = ep_binreg_new();
	struct ep_pipeline *pipeline = NULL;
	struct trace_ctx ctx = {.out = stdout};
	if (!reg)
		return 1;
	optind = 1;
	int ch;
	while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		int handled = ep_cli_binary_option(reg, ch, optarg);
		if (handled < 0)
			goto out;
		if (handled > 0)
			continue;
		switch (ch) {
		case 'h':
			printf(
			    "usage: edgeprof trace PERF.DATA [--binary FILE]... [--symfs DIR]\n");
			rc = 0;
			goto out;
		default:
			goto out;
		}
	}
	if (optind != argc - 1) {
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
	ctx.reconstructor = ep_pipeline_reconstructor(pipeline);
	ep_reconstructor_set_gap_observer(ctx.reconstructor, print_gap, &ctx);
	struct ep_perf_data_feed_info info;
	rc = 0;
	if (ep_feed_perf_data(argv[optind], pipeline, &info, err, sizeof(err)) != 0) {
		ep_error("%s", err);
		rc = 1;
	}
out:
	free(ctx.insns);
	ep_pipeline_free(pipeline);
	ep_binreg_free(reg);
	return rc;
}
