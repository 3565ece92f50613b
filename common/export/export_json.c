/* SPDX-License-Identifier: Apache-2.0 */
/*
 * edgeprof's own JSON schema (docs/exports.md):
 *   {"stats": {...}, "config": {...}, "profiles": [{"build_id", "path", "paths",
 *    "arch", "samples", "branches": [...], "ranges": [...], "ips": [...],
 *    "functions": [...]}]}
 * Addresses are "0x..." strings (ELF virtual addresses; JSON numbers lose
 * precision past 2^53), counts are numbers. Stats and config carry every
 * field of their proto message under its proto name, read from the
 * descriptor so a field added to the proto shows up here untouched.
 * Branches are sorted by from, to, taken; ranges by start, end; ips and
 * functions by address: the same profile always gives the same bytes. A
 * local function carries "local_index" N (BOLT's and the UI's NAME/N).
 * Paths are bytes on Linux: invalid UTF-8 becomes U+FFFD so the document
 * stays valid JSON. With an instruction mix (export --insn-mix) each range
 * and each profile also carries "insn_mix" (export_mix.c). Ranges with cycles
 * carry their CPI and IPC, and a profile with cycles a "cpi" object
 * (report_cpi.c); an ip with an IP-sampling event's cycles no range took
 * (agent --cycles) a "cycles" key.
 */
#include <inttypes.h>
#include <stdlib.h>

#include "common/export/export_internal.h"
#include "common/profile/model.h"
#include "common/util/json.h"

static void json_hex(FILE *out, uint64_t v)
{
	fprintf(out, "\"0x%" PRIx64 "\"", v);
}

static void json_bool(FILE *out, bool v)
{
	fputs(v ? "true" : "false", out);
}

/* Every singular scalar field of a message by its proto name. */
static void json_message(FILE *out, const ProtobufCMessage *m)
{
	fputc('{', out);
	if (!m) {
		fputc('}', out);
		return;
	}
	const ProtobufCMessageDescriptor *d = m->descriptor;
	bool first = true;
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		const void *v = (const char *)m + f->offset;
		if (f->label == PROTOBUF_C_LABEL_REPEATED)
			continue;
		fputs(first ? "" : ", ", out);
		first = false;
		ep_json_string(out, f->name);
		fputs(": ", out);
		switch (f->type) {
		case PROTOBUF_C_TYPE_UINT64:
		case PROTOBUF_C_TYPE_FIXED64:
			fprintf(out, "%" PRIu64, *(const uint64_t *)v);
			break;
		case PROTOBUF_C_TYPE_INT64:
		case PROTOBUF_C_TYPE_SINT64:
		case PROTOBUF_C_TYPE_SFIXED64:
			fprintf(out, "%" PRId64, *(const int64_t *)v);
			break;
		case PROTOBUF_C_TYPE_UINT32:
		case PROTOBUF_C_TYPE_FIXED32:
			fprintf(out, "%" PRIu32, *(const uint32_t *)v);
			break;
		case PROTOBUF_C_TYPE_INT32:
		case PROTOBUF_C_TYPE_SINT32:
		case PROTOBUF_C_TYPE_SFIXED32:
		case PROTOBUF_C_TYPE_ENUM:
			fprintf(out, "%" PRId32, *(const int32_t *)v);
			break;
		case PROTOBUF_C_TYPE_BOOL:
			json_bool(out, *(const protobuf_c_boolean *)v);
			break;
		case PROTOBUF_C_TYPE_STRING:
			ep_json_string(out, *(char *const *)v);
			break;
		case PROTOBUF_C_TYPE_FLOAT:
			fprintf(out, "%.9g", (double)*(const float *)v);
			break;
		case PROTOBUF_C_TYPE_DOUBLE:
			fprintf(out, "%.17g", *(const double *)v);
			break;
		default:
			fputs("null", out);
		}
	}
	fputc('}', out);
}

/* agent --stacks: "stacks" [{"count", "frames": [{"addr", "function"
 * (this binary's, when known), "binary" ("" this one, else a
 * stack_binaries name)}]}] innermost first, as the profile keeps them, and
 * "stack_samples_no_frame_pointer". Only when there are stacks: other
 * profiles' JSON stays as it was. */
static void json_stacks(FILE *out, const Edgeprof__V1__BinaryProfile *bp,
			const struct ep_func_index *fx)
{
	if (!bp->n_stacks)
		return;
	fputs(",\n  \"stacks\": [", out);
	for (size_t i = 0; i < bp->n_stacks; i++) {
		const Edgeprof__V1__StackCount *sc = bp->stacks[i];
		fprintf(out, "%s{\"count\": %" PRIu64 ", \"frames\": [", i ? ",\n    " : "\n    ",
			sc->count);
		for (size_t j = 0; j < sc->n_frames; j++) {
			uint32_t k = j < sc->n_frame_binaries ? sc->frame_binaries[j] : 0;
			const char *bin =
			    k && k <= bp->n_stack_binaries ? bp->stack_binaries[k - 1] : "";
			long f = k ? -1 : ep_func_index_find(fx, sc->frames[j]);
			fputs(j ? ", {\"addr\": " : "{\"addr\": ", out);
			json_hex(out, sc->frames[j]);
			fputs(", \"function\": ", out);
			ep_json_string(out, f >= 0 ? fx->f[f]->name : "");
			fputs(", \"binary\": ", out);
			ep_json_string(out, bin);
			fputc('}', out);
		}
		fputs("]}", out);
	}
	fprintf(out, "],\n  \"stack_samples_no_frame_pointer\": %" PRIu64,
		bp->stack_samples_no_frame_pointer);
}

static int json_binary(FILE *out, const Edgeprof__V1__BinaryProfile *bp,
		       const struct ep_binary_mix *mix, const char *scope)
{
	const Edgeprof__V1__Edge **edges = ep_export_sorted_edges(bp);
	const Edgeprof__V1__Range **ranges = ep_export_sorted_ranges(bp);
	const Edgeprof__V1__IpCount **ips = malloc((bp->n_ips ? bp->n_ips : 1) * sizeof(*ips));
	struct ep_func_index fx = {0};
	int rc = -1;
	if (!edges || !ranges || !ips || ep_func_index_init(&fx, bp) != 0)
		goto out;
	for (size_t i = 0; i < bp->n_ips; i++)
		ips[i] = bp->ips[i];
	qsort(ips, bp->n_ips, sizeof(*ips), ep_ip_cmp);

	fputs("{\"build_id\": ", out);
	ep_json_string(out, bp->build_id);
	fputs(", \"path\": ", out);
	ep_json_string(out, bp->n_paths ? bp->paths[0] : "");
	fputs(", \"paths\": [", out);
	for (size_t i = 0; i < bp->n_paths; i++) {
		fputs(i ? ", " : "", out);
		ep_json_string(out, bp->paths[i]);
	}
	fputs("], \"arch\": ", out);
	ep_json_string(out, bp->arch);
	fprintf(out, ", \"samples\": %" PRIu64 ",\n  \"branches\": [", bp->samples);
	for (size_t i = 0; i < bp->n_edges; i++) {
		const Edgeprof__V1__Edge *e = edges[i];
		fputs(i ? ",\n    {\"from\": " : "\n    {\"from\": ", out);
		json_hex(out, e->from);
		fputs(", \"to\": ", out);
		json_hex(out, e->to);
		fputs(", \"taken\": ", out);
		json_bool(out, e->taken);
		fprintf(out, ", \"count\": %" PRIu64 ", \"mispredicted\": %" PRIu64 ", \"kind\": ",
			e->count, e->mispredicted);
		ep_json_string(out, ep_export_kind_name(e->kind));
		/* without these "to": "0x0" would be ambiguous */
		fputs(", \"to_external\": ", out);
		json_bool(out, e->to_external);
		fputs(", \"from_external\": ", out);
		json_bool(out, e->from_external);
		fputc('}', out);
	}
	fputs("],\n  \"ranges\": [", out);
	for (size_t i = 0; i < bp->n_ranges; i++) {
		fputs(i ? ",\n    {\"start\": " : "\n    {\"start\": ", out);
		json_hex(out, ranges[i]->start);
		fputs(", \"end\": ", out);
		json_hex(out, ranges[i]->end);
		fprintf(out,
			", \"count\": %" PRIu64 ", \"cycles\": %" PRIu64
			", \"cycled_instructions\": %" PRIu64,
			ranges[i]->count, ranges[i]->cycles, ranges[i]->cycled_instructions);
		ep_cpi_json_range(out, ranges[i]);
		if (mix)
			ep_mix_json_range(out, mix, ranges[i]);
		fputc('}', out);
	}
	fputs("],\n  \"ips\": [", out);
	for (size_t i = 0; i < bp->n_ips; i++) {
		fputs(i ? ", {\"ip\": " : "{\"ip\": ", out);
		json_hex(out, ips[i]->ip);
		fprintf(out, ", \"count\": %" PRIu64, ips[i]->count);
		if (ips[i]->cycles) /* agent --cycles: config.cycles_unit */
			fprintf(out, ", \"cycles\": %" PRIu64, ips[i]->cycles);
		fputc('}', out);
	}
	fputs("],\n  \"functions\": [", out);
	for (size_t i = 0; i < fx.n; i++) {
		fputs(i ? ",\n    {\"name\": " : "\n    {\"name\": ", out);
		ep_json_string(out, fx.f[i]->name);
		fputs(", \"start\": ", out);
		json_hex(out, fx.f[i]->start);
		fprintf(out, ", \"size\": %" PRIu64, fx.f[i]->size);
		/* BOLT's NAME/N, as fdata and the UI name a local */
		if (fx.f[i]->local_index)
			fprintf(out, ", \"local_index\": %" PRIu32, fx.f[i]->local_index);
		fputc('}', out);
	}
	fputc(']', out);
	json_stacks(out, bp, &fx);
	if (ep_cpi_json_binary(out, bp, &fx) != 0)
		goto out;
	if (mix && ep_mix_json_binary(out, bp, mix, &fx, scope) != 0)
		goto out;
	fputc('}', out);
	rc = 0;
out:
	ep_func_index_free(&fx);
	free(edges);
	free(ranges);
	free(ips);
	return rc;
}

int ep_export_json(const Edgeprof__V1__Profile *p, const Edgeprof__V1__BinaryProfile *only,
		   const struct ep_profile_mix *mix, FILE *out, char *err, size_t errlen)
{
	fputs("{\"stats\": ", out);
	json_message(out, p->stats ? &p->stats->base : NULL);
	fputs(",\n \"config\": ", out);
	json_message(out, p->config ? &p->config->base : NULL);
	fputs(",\n \"profiles\": [", out);
	bool first = true;
	for (size_t i = 0; i < p->n_binaries; i++) {
		if (only && p->binaries[i] != only)
			continue;
		fputs(first ? "\n " : ",\n ", out);
		first = false;
		const struct ep_binary_mix *m = mix && i < mix->n ? &mix->bins[i] : NULL;
		if (json_binary(out, p->binaries[i], m, mix ? mix->scope : "") != 0)
			return ep_export_oom(err, errlen);
	}
	fputs("]}\n", out);
	return ep_export_finish(out, err, errlen);
}
