/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The instruction mix (common/profile/insn_mix.h) in the report and the
 * JSON export: each range's mix times its count, summed per function (the
 * function holding the range's first counted instruction: a straight line
 * rarely leaves its function) and per binary.
 */
#include <inttypes.h>
#include <stdlib.h>

#include "common/export/export_internal.h"
#include "common/profile/insn_mix.h"
#include "common/util/json.h"

int ep_mix_totals(const Edgeprof__V1__BinaryProfile *bp, const struct ep_binary_mix *m,
		  const struct ep_func_index *fx, struct ep_mix_sums *out)
{
	*out = (struct ep_mix_sums){0};
	out->per_func = calloc(fx->n + 1, sizeof(*out->per_func));
	if (!out->per_func)
		return -1;
	for (size_t i = 0; i < bp->n_ranges; i++) {
		const Edgeprof__V1__Range *r = bp->ranges[i];
		const struct ep_range_mix *rm = ep_binary_mix_find(m, r->start, r->end);
		if (!rm)
			continue;
		if (!rm->decoded) {
			out->undecoded++;
			continue;
		}
		out->ranges++;
		uint64_t first = r->start > m->lo ? r->start : m->lo;
		long k = ep_func_index_find(fx, first);
		ep_insn_totals_add(&out->total, rm, r->count);
		ep_insn_totals_add(&out->per_func[k < 0 ? fx->n : (size_t)k], rm, r->count);
	}
	return 0;
}

void ep_mix_sums_free(struct ep_mix_sums *s)
{
	free(s->per_func);
	s->per_func = NULL;
}

void ep_mix_json_counts(FILE *out, const struct ep_insn_totals *t)
{
	fprintf(out, "{\"instructions\": %" PRIu64, t->insns);
	for (int k = 0; k < EP_INSN_TYPES; k++)
		fprintf(out, ", \"%s\": %" PRIu64, ep_insn_type_names[k], t->types[k]);
	fputc('}', out);
}

void ep_mix_json_range(FILE *out, const struct ep_binary_mix *m, const Edgeprof__V1__Range *r)
{
	const struct ep_range_mix *rm = ep_binary_mix_find(m, r->start, r->end);
	if (!rm)
		return;
	fputs(", \"insn_mix\": ", out);
	if (!rm->decoded) {
		fputs("null", out);
		return;
	}
	struct ep_insn_totals t = {0};
	ep_insn_totals_add(&t, rm, r->count);
	ep_mix_json_counts(out, &t);
}

int ep_mix_json_binary(FILE *out, const Edgeprof__V1__BinaryProfile *bp,
		       const struct ep_binary_mix *m, const struct ep_func_index *fx,
		       const char *scope)
{
	fputs(",\n  \"insn_mix\": {\"scope\": ", out);
	ep_json_string(out, scope);
	if (m->missing || m->out_of_scope) {
		fputs(", \"missing\": ", out);
		ep_json_string(out, m->missing ? m->missing : "out of scope");
		fputc('}', out);
		return 0;
	}
	struct ep_mix_sums s;
	if (ep_mix_totals(bp, m, fx, &s) != 0)
		return -1;
	fprintf(out, ", \"ranges\": %" PRIu64 ", \"ranges_undecoded\": %" PRIu64 ", \"total\": ",
		s.ranges, s.undecoded);
	ep_mix_json_counts(out, &s.total);
	fputs(", \"functions\": [", out);
	bool first = true;
	for (size_t k = 0; k <= fx->n; k++) {
		if (!s.per_func[k].insns)
			continue;
		fputs(first ? "\n    {\"name\": " : ",\n    {\"name\": ", out);
		first = false;
		/* ranges in no known function share one line */
		ep_json_string(out, k < fx->n ? fx->f[k]->name : "");
		fprintf(out, ", \"start\": \"0x%" PRIx64 "\", \"mix\": ",
			k < fx->n ? fx->f[k]->start : 0);
		ep_mix_json_counts(out, &s.per_func[k]);
		fputc('}', out);
	}
	fputs("]}", out);
	ep_mix_sums_free(&s);
	return 0;
}

static void report_row(FILE *out, const struct ep_insn_totals *t)
{
	fprintf(out, "  %14" PRIu64, t->insns);
	for (int k = 0; k < EP_INSN_TYPES; k++)
		fprintf(out, " %13" PRIu64, t->types[k]);
}

static int by_insns(const void *pa, const void *pb, void *base)
{
	const struct ep_insn_totals *t = base;
	size_t a = *(const size_t *)pa, b = *(const size_t *)pb;
	uint64_t x = t[a].insns, y = t[b].insns;
	if (x != y)
		return x > y ? -1 : 1;
	return (a > b) - (a < b);
}

static int report_binary(FILE *out, const Edgeprof__V1__BinaryProfile *bp,
			 const struct ep_binary_mix *m, const char *scope, unsigned top)
{
	fprintf(out, "\ninstruction mix of %s (build-id %s)%s%s:", bp->n_paths ? bp->paths[0] : "?",
		bp->build_id[0] ? bp->build_id : "none", scope[0] ? ", " : "", scope);
	if (m->missing || m->out_of_scope) {
		fprintf(out, " none: %s\n", m->missing ? m->missing : "out of scope");
		return 0;
	}
	struct ep_func_index fx;
	struct ep_mix_sums s;
	if (ep_func_index_init(&fx, bp) != 0)
		return -1;
	size_t *order = malloc((fx.n + 1) * sizeof(*order));
	if (!order || ep_mix_totals(bp, m, &fx, &s) != 0) {
		free(order);
		ep_func_index_free(&fx);
		return -1;
	}
	fprintf(out,
		" %" PRIu64 " instructions executed in %" PRIu64 " ranges (%" PRIu64
		" ranges not decoded)\n  %-14s %14s %7s\n",
		s.total.insns, s.ranges, s.undecoded, "type", "executed", "share");
	for (int k = 0; k < EP_INSN_TYPES; k++)
		fprintf(
		    out, "  %-14s %14" PRIu64 " %6.2f%%\n", ep_insn_type_names[k], s.total.types[k],
		    s.total.insns ? 100.0 * (double)s.total.types[k] / (double)s.total.insns : 0.0);
	size_t n = 0;
	for (size_t k = 0; k <= fx.n; k++)
		if (s.per_func[k].insns)
			order[n++] = k;
	qsort_r(order, n, sizeof(*order), by_insns, s.per_func);
	fprintf(out, "  functions by instructions executed:\n  %14s", "instructions");
	for (int k = 0; k < EP_INSN_TYPES; k++)
		fprintf(out, " %13s", ep_insn_type_names[k]);
	fputs("  function\n", out);
	for (size_t i = 0; i < n && i < top; i++) {
		report_row(out, &s.per_func[order[i]]);
		fprintf(out, "  %s\n", order[i] < fx.n ? fx.f[order[i]]->name : "[no symbol]");
	}
	free(order);
	ep_mix_sums_free(&s);
	ep_func_index_free(&fx);
	return 0;
}

int ep_report_insn_mix(const Edgeprof__V1__Profile *profile, const struct ep_profile_mix *mix,
		       unsigned top, FILE *out)
{
	for (size_t i = 0; i < profile->n_binaries && i < mix->n; i++) {
		if (mix->bins[i].out_of_scope)
			continue;
		if (report_binary(out, profile->binaries[i], &mix->bins[i], mix->scope, top) != 0)
			return -1;
	}
	return ferror(out) ? -1 : 0;
}
