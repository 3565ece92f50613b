/* SPDX-License-Identifier: Apache-2.0 */
/* edgeprof's own JSON schema (README.md): addresses as "0x..." ELF virtual
 * addresses, counts as numbers. Field names follow the proto. */
#include <inttypes.h>
#include <stdio.h>

#include "export_internal.h"

static void json_string(FILE *out, const char *s)
{
	fputc('"', out);
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(out, "\\%c", *p);
		else if (*p < 0x20)
			fprintf(out, "\\u%04x", *p);
		else
			fputc(*p, out);
	}
	fputc('"', out);
}

static void hex(FILE *out, uint64_t v)
{
	fprintf(out, "\"0x%" PRIx64 "\"", v);
}

/* Every scalar field of a message, by its proto name: new Stats or config
 * fields appear in the export without touching this file. */
static void message_fields(FILE *out, const ProtobufCMessage *m)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;
	fputc('{', out);
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		const void *v = (const char *)m + f->offset;
		if (i)
			fputs(", ", out);
		json_string(out, f->name);
		fputs(": ", out);
		switch (f->type) {
		case PROTOBUF_C_TYPE_UINT64:
			fprintf(out, "%" PRIu64, *(const uint64_t *)v);
			break;
		case PROTOBUF_C_TYPE_UINT32:
			fprintf(out, "%" PRIu32, *(const uint32_t *)v);
			break;
		case PROTOBUF_C_TYPE_BOOL:
			fputs(*(const protobuf_c_boolean *)v ? "true" : "false", out);
			break;
		case PROTOBUF_C_TYPE_STRING:
			json_string(out, *(char *const *)v);
			break;
		default:
			fputs("null", out);
		}
	}
	fputc('}', out);
}

static void binary(FILE *out, const Edgeprof__V1__BinaryProfile *bp)
{
	fputs("{\"build_id\": ", out);
	json_string(out, bp->build_id);
	fputs(", \"path\": ", out);
	json_string(out, bp->n_paths ? bp->paths[0] : "");
	fputs(", \"paths\": [", out);
	for (size_t i = 0; i < bp->n_paths; i++) {
		if (i)
			fputs(", ", out);
		json_string(out, bp->paths[i]);
	}
	fputs("], \"arch\": ", out);
	json_string(out, bp->arch);
	fprintf(out, ", \"samples\": %" PRIu64 ",\n  \"branches\": [", bp->samples);
	for (size_t i = 0; i < bp->n_edges; i++) {
		const Edgeprof__V1__Edge *e = bp->edges[i];
		fputs(i ? ",\n    {\"from\": " : "\n    {\"from\": ", out);
		hex(out, e->from);
		fputs(", \"to\": ", out);
		hex(out, e->to);
		fprintf(out,
			", \"taken\": %s, \"count\": %" PRIu64 ", \"mispredicted\": %" PRIu64
			", \"kind\": \"%s\", \"to_external\": %s, \"from_external\": %s}",
			e->taken ? "true" : "false", e->count, e->mispredicted,
			ep_export_kind_name(e->kind), e->to_external ? "true" : "false",
			e->from_external ? "true" : "false");
	}
	fputs("],\n  \"ranges\": [", out);
	for (size_t i = 0; i < bp->n_ranges; i++) {
		const Edgeprof__V1__Range *r = bp->ranges[i];
		fputs(i ? ",\n    {\"start\": " : "\n    {\"start\": ", out);
		hex(out, r->start);
		fputs(", \"end\": ", out);
		hex(out, r->end);
		fprintf(out, ", \"count\": %" PRIu64 "}", r->count);
	}
	fputs("],\n  \"ips\": [", out);
	for (size_t i = 0; i < bp->n_ips; i++) {
		fputs(i ? ", {\"ip\": " : "{\"ip\": ", out);
		hex(out, bp->ips[i]->ip);
		fprintf(out, ", \"count\": %" PRIu64 "}", bp->ips[i]->count);
	}
	fputs("],\n  \"functions\": [", out);
	for (size_t i = 0; i < bp->n_functions; i++) {
		const Edgeprof__V1__Function *f = bp->functions[i];
		fputs(i ? ",\n    {\"name\": " : "\n    {\"name\": ", out);
		json_string(out, f->name);
		fputs(", \"start\": ", out);
		hex(out, f->start);
		fprintf(out, ", \"size\": %" PRIu64 "}", f->size);
	}
	fputs("]}", out);
}

int ep_export_json(const Edgeprof__V1__Profile *p, const Edgeprof__V1__BinaryProfile *only,
		   FILE *out)
{
	fputs("{\"stats\": ", out);
	if (p->stats)
		message_fields(out, &p->stats->base);
	else
		fputs("{}", out);
	fputs(",\n \"config\": ", out);
	if (p->config)
		message_fields(out, &p->config->base);
	else
		fputs("{}", out);
	fputs(",\n \"profiles\": [", out);
	bool first = true;
	for (size_t i = 0; i < p->n_binaries; i++) {
		if (only && p->binaries[i] != only)
			continue;
		fputs(first ? "\n " : ",\n ", out);
		first = false;
		binary(out, p->binaries[i]);
	}
	fputs("]}\n", out);
	return ferror(out) ? -1 : 0;
}
