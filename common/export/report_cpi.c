/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Cycles per instruction (Range.cycles over Range.cycled_instructions: the
 * instructions those cycles ran), per block and per function: `report
 * --cpi` and the JSON export's "cpi". The cycles come from the branch
 * records, or from a cycles event's IP samples (agent --cycles), whose
 * cycles at addresses no counted range holds (IpCount.cycles) count in a
 * function's time but not in its CPI: no instructions are known for them.
 * Where cpu-clock stood in for cycles (config.cycles_unit "ns") every
 * figure is nanoseconds, and says so. A block whose cycles are a sliver of
 * its binary's is left out of the CPI ranking: a handful of measurements
 * is noise there.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/export/export_internal.h"
#include "common/profile/cpi.h"
#include "common/profile/model.h"
#include "common/util/json.h"

/* CPI ranks blocks holding at least this share of their binary's cycles */
#define CPI_MIN_SHARE 0.001

/* How the figures are named: cycles, or nanoseconds where cpu-clock stood
 * in for a cycles event. */
struct cpi_units {
	const char *cycles, *cpi, *ipc;
};

static long function_of(const void *fx, uint64_t addr)
{
	return ep_func_index_find(fx, addr);
}

static struct cpi_units units_of(const Edgeprof__V1__Profile *profile)
{
	const Edgeprof__V1__SamplingConfig *c = profile ? profile->config : NULL;
	if (c && c->cycles_unit && strcmp(c->cycles_unit, "ns") == 0)
		return (struct cpi_units){"ns", "ns/insn", "insn/ns"};
	return (struct cpi_units){"cycles", "CPI", "IPC"};
}

/* "cycles" and "cycled_instructions" of the ranges, "cpi" and "ipc" of
 * those, and "ip_cycles": the IP samples' cycles no counted range holds. */
static void json_cpi_fields(FILE *out, const struct ep_cpi_sum *s)
{
	fprintf(out, "\"cycles\": %" PRIu64 ", \"cycled_instructions\": %" PRIu64, s->cycles,
		s->insns);
	if (s->cycles && s->insns)
		fprintf(out, ", \"cpi\": %.4f, \"ipc\": %.4f", ep_cpi_of(s), 1.0 / ep_cpi_of(s));
	if (s->outside)
		fprintf(out, ", \"ip_cycles\": %" PRIu64, s->outside);
}

void ep_cpi_json_range(FILE *out, const Edgeprof__V1__Range *r)
{
	if (r->cycles && r->cycled_instructions)
		fprintf(out, ", \"cpi\": %.4f, \"ipc\": %.4f",
			(double)r->cycles / (double)r->cycled_instructions,
			(double)r->cycled_instructions / (double)r->cycles);
}

int ep_cpi_json_binary(FILE *out, const Edgeprof__V1__BinaryProfile *bp,
		       const struct ep_func_index *fx)
{
	struct ep_cpi_sum *per_func, total;
	if (ep_cpi_sums(bp, fx->n, function_of, fx, &per_func, &total) != 0)
		return -1;
	if (ep_cpi_time(&total)) {
		fputs(",\n  \"cpi\": {", out);
		json_cpi_fields(out, &total);
		fputs(", \"functions\": [", out);
		bool first = true;
		for (size_t k = 0; k <= fx->n; k++) {
			if (!ep_cpi_time(&per_func[k]))
				continue;
			fputs(first ? "\n    {\"name\": " : ",\n    {\"name\": ", out);
			first = false;
			ep_json_string(out, k < fx->n ? fx->f[k]->name : "");
			fprintf(out, ", \"start\": \"0x%" PRIx64 "\", ",
				k < fx->n ? fx->f[k]->start : 0);
			/* a local is BOLT's NAME/N in fdata and the UI, as in "functions" */
			if (k < fx->n && fx->f[k]->local_index)
				fprintf(out, "\"local_index\": %" PRIu32 ", ",
					fx->f[k]->local_index);
			json_cpi_fields(out, &per_func[k]);
			fputc('}', out);
		}
		fputs("]}", out);
	}
	free(per_func);
	return 0;
}

static int by_cycles(const void *pa, const void *pb)
{
	const Edgeprof__V1__Range *a = *(const Edgeprof__V1__Range *const *)pa;
	const Edgeprof__V1__Range *b = *(const Edgeprof__V1__Range *const *)pb;
	if (a->cycles != b->cycles)
		return a->cycles > b->cycles ? -1 : 1;
	return ep_range_cmp(pa, pb);
}

/* By CPI, highest first; compared as cross products, no rounding. */
static int by_cpi(const void *pa, const void *pb)
{
	const Edgeprof__V1__Range *a = *(const Edgeprof__V1__Range *const *)pa;
	const Edgeprof__V1__Range *b = *(const Edgeprof__V1__Range *const *)pb;
	unsigned __int128 x = (unsigned __int128)a->cycles * b->cycled_instructions;
	unsigned __int128 y = (unsigned __int128)b->cycles * a->cycled_instructions;
	if (x != y)
		return x > y ? -1 : 1;
	return by_cycles(pa, pb);
}

static void block_line(FILE *out, const Edgeprof__V1__Range *r, const struct ep_func_index *fx,
		       uint64_t total)
{
	struct ep_cpi_sum s = {.cycles = r->cycles, .insns = r->cycled_instructions};
	long k = ep_func_index_find(fx, r->end);
	char block[48];
	snprintf(block, sizeof(block), "0x%" PRIx64 "-0x%" PRIx64, r->start, r->end);
	fprintf(out, "  %-21s %12" PRIu64 " %6.2f%% %14" PRIu64 " %7.3f %7.3f  %s\n", block,
		r->cycles, total ? 100.0 * (double)r->cycles / (double)total : 0.0,
		r->cycled_instructions, ep_cpi_of(&s), s.cycles ? 1.0 / ep_cpi_of(&s) : 0.0,
		k >= 0 ? fx->f[k]->name : "[no symbol]");
}

static int by_outside(const void *pa, const void *pb)
{
	const Edgeprof__V1__IpCount *a = *(const Edgeprof__V1__IpCount *const *)pa;
	const Edgeprof__V1__IpCount *b = *(const Edgeprof__V1__IpCount *const *)pb;
	if (a->cycles != b->cycles)
		return a->cycles > b->cycles ? -1 : 1;
	return a->ip < b->ip ? -1 : a->ip > b->ip;
}

/* The IP samples' cycles at addresses no counted range holds: all of them
 * in a profile without branch stacks (a machine without a PMU). */
static int report_outside(FILE *out, const Edgeprof__V1__BinaryProfile *bp,
			  const struct ep_func_index *fx, const struct ep_cpi_sum *total,
			  const struct cpi_units *u, unsigned top)
{
	const Edgeprof__V1__IpCount **ips = malloc((bp->n_ips + 1) * sizeof(*ips));
	if (!ips)
		return -1;
	size_t n = 0;
	for (size_t i = 0; i < bp->n_ips; i++)
		if (bp->ips[i]->cycles)
			ips[n++] = bp->ips[i];
	qsort(ips, n, sizeof(*ips), by_outside);
	fprintf(out, "addresses in no counted block by %s:\n  %-21s %12s %7s  %s\n", u->cycles,
		"address", u->cycles, "share", "function");
	for (size_t i = 0; i < n && i < top; i++) {
		long k = ep_func_index_find(fx, ips[i]->ip);
		fprintf(out, "  0x%-19" PRIx64 " %12" PRIu64 " %6.2f%%  %s\n", ips[i]->ip,
			ips[i]->cycles, 100.0 * (double)ips[i]->cycles / (double)ep_cpi_time(total),
			k >= 0 ? fx->f[k]->name : "[no symbol]");
	}
	free(ips);
	return 0;
}

static void report_blocks(FILE *out, const Edgeprof__V1__BinaryProfile *bp,
			  const struct ep_func_index *fx, const struct ep_cpi_sum *total,
			  const struct cpi_units *u, unsigned top, const Edgeprof__V1__Range **r)
{
	size_t n = 0;
	for (size_t i = 0; i < bp->n_ranges; i++)
		if (bp->ranges[i]->cycles && bp->ranges[i]->cycled_instructions)
			r[n++] = bp->ranges[i];
	const char *head = "  %-21s %12s %7s %14s %7s %7s  %s\n";
	fprintf(out, "blocks by %s:\n", u->cycles);
	fprintf(out, head, "block", u->cycles, "share", "instructions", u->cpi, u->ipc, "function");
	qsort(r, n, sizeof(*r), by_cycles);
	for (size_t i = 0; i < n && i < top; i++)
		block_line(out, r[i], fx, total->cycles);
	/* CPI ranks only blocks measured often enough to say */
	size_t m = 0;
	for (size_t i = 0; i < n; i++)
		if ((double)r[i]->cycles >= CPI_MIN_SHARE * (double)total->cycles)
			r[m++] = r[i];
	fprintf(out, "blocks by %s (those with at least %.1f%% of the %s):\n", u->cpi,
		100.0 * CPI_MIN_SHARE, u->cycles);
	fprintf(out, head, "block", u->cycles, "share", "instructions", u->cpi, u->ipc, "function");
	qsort(r, m, sizeof(*r), by_cpi);
	for (size_t i = 0; i < m && i < top; i++)
		block_line(out, r[i], fx, total->cycles);
}

/* Functions by all their cycles (in ranges and not); CPI over the ranges'. */
static void report_functions(FILE *out, const struct ep_func_index *fx,
			     const struct ep_cpi_sum *per_func, const struct ep_cpi_sum *total,
			     const struct cpi_units *u, unsigned top, size_t *order)
{
	fprintf(out, "functions by %s:\n", u->cycles);
	fprintf(out, "  %12s %7s %14s %7s %7s  %s\n", u->cycles, "share", "instructions", u->cpi,
		u->ipc, "function");
	size_t nf = 0;
	for (size_t k = 0; k <= fx->n; k++)
		if (ep_cpi_time(&per_func[k]))
			order[nf++] = k;
	for (size_t i = 0; i < nf; i++) /* few functions: a selection sort */
		for (size_t j = i + 1; j < nf; j++)
			if (ep_cpi_time(&per_func[order[j]]) > ep_cpi_time(&per_func[order[i]])) {
				size_t t = order[i];
				order[i] = order[j];
				order[j] = t;
			}
	for (size_t i = 0; i < nf && i < top; i++) {
		const struct ep_cpi_sum *f = &per_func[order[i]];
		/* no instructions known (IP samples outside every counted
		 * block): no CPI to give, not a CPI of 0 */
		char cpi[16] = "-", ipc[16] = "-";
		if (f->insns && f->cycles) {
			snprintf(cpi, sizeof(cpi), "%.3f", ep_cpi_of(f));
			snprintf(ipc, sizeof(ipc), "%.3f", 1.0 / ep_cpi_of(f));
		}
		fprintf(out, "  %12" PRIu64 " %6.2f%% %14" PRIu64 " %7s %7s  %s\n", ep_cpi_time(f),
			100.0 * (double)ep_cpi_time(f) / (double)ep_cpi_time(total), f->insns, cpi,
			ipc, order[i] < fx->n ? fx->f[order[i]]->name : "[no symbol]");
	}
}

static int report_binary(FILE *out, const Edgeprof__V1__BinaryProfile *bp,
			 const struct cpi_units *u, unsigned top)
{
	struct ep_func_index fx;
	if (ep_func_index_init(&fx, bp) != 0)
		return -1;
	struct ep_cpi_sum *per_func = NULL, total;
	const Edgeprof__V1__Range **r = malloc((bp->n_ranges + 1) * sizeof(*r));
	size_t *order = malloc((fx.n + 1) * sizeof(*order));
	int rc = !r || !order || ep_cpi_sums(bp, fx.n, function_of, &fx, &per_func, &total) != 0
		     ? -1
		     : 0;
	if (rc == 0) {
		fprintf(out, "\n%s (build-id %s): ", bp->n_paths ? bp->paths[0] : "?",
			bp->build_id[0] ? bp->build_id : "none");
		if (!ep_cpi_time(&total))
			fprintf(out, "no %s in the profile (the source recorded none)\n",
				u->cycles);
	}
	if (rc == 0 && ep_cpi_time(&total)) {
		if (total.insns && total.cycles)
			fprintf(out,
				"%" PRIu64 " %s over %" PRIu64 " instructions: %s %.3f, %s %.3f",
				total.cycles, u->cycles, total.insns, u->cpi, ep_cpi_of(&total),
				u->ipc, 1.0 / ep_cpi_of(&total));
		else
			fprintf(out,
				"no counted block with %s (no branch stacks: no instructions "
				"to divide by)",
				u->cycles);
		if (total.outside)
			fprintf(out, "; %" PRIu64 " %s at sampled addresses in no counted block",
				total.outside, u->cycles);
		fputc('\n', out);
		if (bp->n_ranges)
			report_blocks(out, bp, &fx, &total, u, top, r);
		if (total.outside)
			rc = report_outside(out, bp, &fx, &total, u, top);
		report_functions(out, &fx, per_func, &total, u, top, order);
	}
	free(per_func);
	free(r);
	free(order);
	ep_func_index_free(&fx);
	return rc;
}

/* The header: where the cycles came from (config.cycles_source). */
static void say_source(FILE *out, const Edgeprof__V1__Profile *profile)
{
	const Edgeprof__V1__SamplingConfig *c = profile->config;
	const char *src = c && c->cycles_source ? c->cycles_source : "";
	if (strcmp(src, "cpu_clock") == 0)
		fputs("nanoseconds per instruction from cpu-clock IP samples (this machine had no "
		      "hardware cycles event: time, not cycles; per block: the ranges holding "
		      "the samples' addresses)\n",
		      out);
	else if (strcmp(src, "cycles_event") == 0)
		fputs("cycles per instruction from the cycles event's IP samples (per block: the "
		      "ranges holding the samples' addresses)\n",
		      out);
	else
		fputs("cycles per instruction from the branch records' cycles (per block: the "
		      "straight lines ending at its branch)\n",
		      out);
}

int ep_report_cpi(const Edgeprof__V1__Profile *profile, unsigned top, FILE *out)
{
	say_source(out, profile);
	struct cpi_units u = units_of(profile);
	for (size_t i = 0; i < profile->n_binaries; i++)
		if (report_binary(out, profile->binaries[i], &u, top) != 0)
			return -1;
	return ferror(out) ? -1 : 0;
}
