/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Cycles per instruction from the branch records' cycles (Range.cycles over
 * Range.cycled_instructions: the instructions of the straight lines those
 * cycles measured), per block and per function: `report --cpi` and the JSON
 * export's "cpi". A block whose cycles are a sliver of its binary's is
 * left out of the CPI ranking: a handful of measurements is noise there.
 */
#include <inttypes.h>
#include <stdlib.h>

#include "common/export/export_internal.h"
#include "common/profile/model.h"
#include "common/util/json.h"
#include "common/util/sat.h"

/* CPI ranks blocks holding at least this share of their binary's cycles */
#define CPI_MIN_SHARE 0.001

struct cpi_sum {
	uint64_t cycles, insns;
};

static double cpi_of(const struct cpi_sum *s)
{
	return s->insns ? (double)s->cycles / (double)s->insns : 0.0;
}

/* Per function (sums[fx->n]: in no known function) and in all: 0, or -1
 * when memory runs out. */
static int cpi_sums(const Edgeprof__V1__BinaryProfile *bp, const struct ep_func_index *fx,
		    struct cpi_sum **out, struct cpi_sum *total)
{
	*total = (struct cpi_sum){0};
	*out = calloc(fx->n + 1, sizeof(**out));
	if (!*out)
		return -1;
	for (size_t i = 0; i < bp->n_ranges; i++) {
		const Edgeprof__V1__Range *r = bp->ranges[i];
		if (!r->cycles)
			continue;
		long k = ep_func_index_find(fx, r->end);
		struct cpi_sum *f = &(*out)[k < 0 ? fx->n : (size_t)k];
		ep_add_sat(&f->cycles, r->cycles);
		ep_add_sat(&f->insns, r->cycled_instructions);
		ep_add_sat(&total->cycles, r->cycles);
		ep_add_sat(&total->insns, r->cycled_instructions);
	}
	return 0;
}

static void json_cpi_fields(FILE *out, uint64_t cycles, uint64_t insns)
{
	struct cpi_sum s = {cycles, insns};
	fprintf(out, "\"cycles\": %" PRIu64 ", \"cycled_instructions\": %" PRIu64, cycles, insns);
	if (cycles && insns)
		fprintf(out, ", \"cpi\": %.4f, \"ipc\": %.4f", cpi_of(&s), 1.0 / cpi_of(&s));
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
	struct cpi_sum *per_func, total;
	if (cpi_sums(bp, fx, &per_func, &total) != 0)
		return -1;
	if (total.cycles) {
		fputs(",\n  \"cpi\": {", out);
		json_cpi_fields(out, total.cycles, total.insns);
		fputs(", \"functions\": [", out);
		bool first = true;
		for (size_t k = 0; k <= fx->n; k++) {
			if (!per_func[k].cycles)
				continue;
			fputs(first ? "\n    {\"name\": " : ",\n    {\"name\": ", out);
			first = false;
			ep_json_string(out, k < fx->n ? fx->f[k]->name : "");
			fprintf(out, ", \"start\": \"0x%" PRIx64 "\", ",
				k < fx->n ? fx->f[k]->start : 0);
			json_cpi_fields(out, per_func[k].cycles, per_func[k].insns);
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
	struct cpi_sum s = {r->cycles, r->cycled_instructions};
	long k = ep_func_index_find(fx, r->end);
	char block[48];
	snprintf(block, sizeof(block), "0x%" PRIx64 "-0x%" PRIx64, r->start, r->end);
	fprintf(out, "  %-21s %12" PRIu64 " %6.2f%% %14" PRIu64 " %7.3f %7.3f  %s\n", block,
		r->cycles, total ? 100.0 * (double)r->cycles / (double)total : 0.0,
		r->cycled_instructions, cpi_of(&s), s.cycles ? 1.0 / cpi_of(&s) : 0.0,
		k >= 0 ? fx->f[k]->name : "[no symbol]");
}

static int report_binary(FILE *out, const Edgeprof__V1__BinaryProfile *bp, unsigned top)
{
	struct ep_func_index fx;
	if (ep_func_index_init(&fx, bp) != 0)
		return -1;
	struct cpi_sum *per_func = NULL, total;
	const Edgeprof__V1__Range **r = malloc((bp->n_ranges + 1) * sizeof(*r));
	size_t *order = malloc((fx.n + 1) * sizeof(*order));
	if (!r || !order || cpi_sums(bp, &fx, &per_func, &total) != 0) {
		free(r);
		free(order);
		ep_func_index_free(&fx);
		return -1;
	}
	fprintf(out, "\n%s (build-id %s): ", bp->n_paths ? bp->paths[0] : "?",
		bp->build_id[0] ? bp->build_id : "none");
	if (!total.cycles) {
		fputs("no cycles in the profile (the source recorded none)\n", out);
		goto done;
	}
	fprintf(out, "%" PRIu64 " cycles over %" PRIu64 " instructions: CPI %.3f, IPC %.3f\n",
		total.cycles, total.insns, cpi_of(&total), 1.0 / cpi_of(&total));
	size_t n = 0;
	for (size_t i = 0; i < bp->n_ranges; i++)
		if (bp->ranges[i]->cycles && bp->ranges[i]->cycled_instructions)
			r[n++] = bp->ranges[i];
	const char *head = "  %-21s %12s %7s %14s %7s %7s  %s\n";
	fputs("blocks by cycles:\n", out);
	fprintf(out, head, "block", "cycles", "share", "instructions", "CPI", "IPC", "function");
	qsort(r, n, sizeof(*r), by_cycles);
	for (size_t i = 0; i < n && i < top; i++)
		block_line(out, r[i], &fx, total.cycles);
	/* CPI ranks only blocks measured often enough to say */
	size_t m = 0;
	for (size_t i = 0; i < n; i++)
		if ((double)r[i]->cycles >= CPI_MIN_SHARE * (double)total.cycles)
			r[m++] = r[i];
	fprintf(out, "blocks by CPI (those with at least %.1f%% of the cycles):\n",
		100.0 * CPI_MIN_SHARE);
	fprintf(out, head, "block", "cycles", "share", "instructions", "CPI", "IPC", "function");
	qsort(r, m, sizeof(*r), by_cpi);
	for (size_t i = 0; i < m && i < top; i++)
		block_line(out, r[i], &fx, total.cycles);
	fputs("functions by cycles:\n", out);
	fprintf(out, "  %12s %7s %14s %7s %7s  %s\n", "cycles", "share", "instructions", "CPI",
		"IPC", "function");
	size_t nf = 0;
	for (size_t k = 0; k <= fx.n; k++)
		if (per_func[k].cycles)
			order[nf++] = k;
	for (size_t i = 0; i < nf; i++) /* few functions: a selection sort */
		for (size_t j = i + 1; j < nf; j++)
			if (per_func[order[j]].cycles > per_func[order[i]].cycles) {
				size_t t = order[i];
				order[i] = order[j];
				order[j] = t;
			}
	for (size_t i = 0; i < nf && i < top; i++) {
		const struct cpi_sum *f = &per_func[order[i]];
		fprintf(out, "  %12" PRIu64 " %6.2f%% %14" PRIu64 " %7.3f %7.3f  %s\n", f->cycles,
			100.0 * (double)f->cycles / (double)total.cycles, f->insns, cpi_of(f),
			f->insns ? 1.0 / cpi_of(f) : 0.0,
			order[i] < fx.n ? fx.f[order[i]]->name : "[no symbol]");
	}
done:
	free(per_func);
	free(r);
	free(order);
	ep_func_index_free(&fx);
	return 0;
}

int ep_report_cpi(const Edgeprof__V1__Profile *profile, unsigned top, FILE *out)
{
	fputs("cycles per instruction from the branch records' cycles (per block: the straight "
	      "lines ending at its branch)\n",
	      out);
	for (size_t i = 0; i < profile->n_binaries; i++)
		if (report_binary(out, profile->binaries[i], top) != 0)
			return -1;
	return ferror(out) ? -1 : 0;
}
