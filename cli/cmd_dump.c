/* SPDX-License-Identifier: Apache-2.0 */
#include "cli/commands.h"

#include <inttypes.h>
#include <stdio.h>

#include "agent/source/perf_data/perf_data.h"
#include "common/util/log.h"
#include "common/util/options.h"

/* perf's names of the branch types (PERF_BR_*, the entries' type field that
 * Arm BRBE fills): perf script prints them after the cycles, none for
 * PERF_BR_UNKNOWN, the type of every entry of an LBR without types. */
static const char *branch_type_name(unsigned type)
{
	static const char *const names[] = {
	    "",	      "COND",	   "UNCOND",   "IND",  "CALL", "IND_CALL", "RET",   "SYSCALL",
	    "SYSRET", "COND_CALL", "COND_RET", "ERET", "IRQ",  "SERROR",   "NO_TX", ""};
	return type < sizeof(names) / sizeof(names[0]) ? names[type] : "";
}

static int print_sample(void *ctx, const struct ep_sample_record *rec)
{
	FILE *out = ctx;
	fprintf(out, " %16llx ", (unsigned long long)rec->ip);
	for (uint32_t i = 0; i < rec->nr_entries; i++) {
		const struct ep_branch_entry *e = &rec->entries[i];
		char pred = (e->flags & EP_BR_MISPRED)	   ? 'M'
			    : (e->flags & EP_BR_PREDICTED) ? 'P'
							   : '-';
		fprintf(
		    out, "0x%llx/0x%llx/%c/%c/%c/%u/%s  ", (unsigned long long)e->from,
		    (unsigned long long)e->to, pred, (e->flags & EP_BR_IN_TX) ? 'X' : '-',
		    (e->flags & EP_BR_ABORT) ? 'A' : '-',
		    (unsigned)((e->flags & EP_BR_CYCLES_MASK) >> EP_BR_CYCLES_SHIFT),
		    branch_type_name((unsigned)((e->flags & EP_BR_TYPE_MASK) >> EP_BR_TYPE_SHIFT)));
	}
	fputc('\n', out);
	return 0;
}

static void dump_usage(FILE *out)
{
	fprintf(out, "usage: edgeprof dump PERF.DATA\n");
}

int ep_cmd_dump(int argc, char **argv)
{
	const struct ep_option no_options[] = {EP_OPTION_END};
	const struct ep_option *const tables[] = {no_options, NULL};
	int first = ep_options_parse("dump", argc, argv, tables, dump_usage);
	if (first < 0)
		return ep_options_exit_code(first);
	if (first != argc - 1) {
		ep_error("usage: edgeprof dump PERF.DATA");
		return 2;
	}
	struct ep_perf_data_callbacks cb = {.ctx = stdout, .on_sample = print_sample};
	struct ep_perf_data_stats stats;
	char err[512];
	if (ep_perf_data_read(argv[first], &cb, &stats, err, sizeof(err)) != 0) {
		ep_error("%s", err);
		return 1;
	}
	return 0;
}
