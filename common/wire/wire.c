/* SPDX-License-Identifier: Apache-2.0 */
#include "common/wire/wire.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "common/util/build_id.h"

/* Level 3 is zstd's default: edge tables compress ~5x at a few hundred
 * MB/s, far below the agent's sampling cost. */
#define ZSTD_LEVEL 3

int ep_wire_encode(const Edgeprof__V1__Batch *batch, uint8_t **out, size_t *out_len)
{
	size_t plain_len = edgeprof__v1__batch__get_packed_size(batch);
	uint8_t *plain = malloc(plain_len ? plain_len : 1);
	if (!plain)
		return -1;
	edgeprof__v1__batch__pack(batch, plain);
	size_t bound = ZSTD_compressBound(plain_len);
	uint8_t *z = malloc(bound);
	if (!z) {
		free(plain);
		return -1;
	}
	/* the frame carries a checksum of its content (XXH64, 4 bytes): the
	 * bytes wait in the spool, and one flipped bit there must be refused
	 * by the collector, not stored as another edge or count */
	size_t zlen = (size_t)-1;
	ZSTD_CCtx *cctx = ZSTD_createCCtx();
	if (cctx &&
	    !ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, ZSTD_LEVEL)) &&
	    !ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1)))
		zlen = ZSTD_compress2(cctx, z, bound, plain, plain_len);
	ZSTD_freeCCtx(cctx);
	free(plain);
	if (ZSTD_isError(zlen)) {
		free(z);
		return -1;
	}
	*out = z;
	*out_len = zlen;
	return 0;
}

/* A batch is one zstd frame that carries a checksum of its content, as
 * ep_wire_encode writes it: without one a damaged batch (a bit flipped in
 * the spool) decodes to another batch and is stored. The agent has set the
 * flag on every batch since issue 18 (ep_wire_encode); an agent older than
 * that is told why its batches are refused. The frame header's descriptor byte
 * follows the 4-byte magic; its bit 2 is Content_Checksum_flag (RFC 8878,
 * 3.1.1.1.1). */
static int check_frame(const uint8_t *data, size_t len, char *err, size_t errlen)
{
	static const uint8_t magic[4] = {0x28, 0xb5, 0x2f, 0xfd};
	if (len < 5 || memcmp(data, magic, sizeof(magic)) != 0) {
		snprintf(err, errlen,
			 "not a zstd stream: no zstd frame magic at byte 0 (%zu bytes)", len);
		return -1;
	}
	if (!(data[4] & 0x04)) {
		snprintf(err, errlen,
			 "zstd frame without a content checksum: a batch must carry one (zstd's "
			 "checksum flag, --check), so that a damaged batch is refused, not "
			 "stored");
		return -1;
	}
	return 0;
}

/* Streaming decompression with a hard cap: the frame's declared size is
 * not trusted (an attacker writes any number there). */
static uint8_t *decompress(const uint8_t *data, size_t len, size_t max_size, size_t *out_len,
			   char *err, size_t errlen)
{
	if (check_frame(data, len, err, errlen) != 0)
		return NULL;
	ZSTD_DStream *ds = ZSTD_createDStream();
	if (!ds) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	ZSTD_initDStream(ds);
	size_t cap = len * 4 < 65536 ? 65536 : len * 4;
	if (cap > max_size + 1)
		cap = max_size + 1;
	uint8_t *buf = malloc(cap);
	ZSTD_inBuffer in = {data, len, 0};
	ZSTD_outBuffer out = {buf, cap, 0};
	size_t last = 1;
	if (!buf) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	for (;;) {
		last = ZSTD_decompressStream(ds, &out, &in);
		if (ZSTD_getErrorCode(last) == ZSTD_error_checksum_wrong) {
			snprintf(err, errlen,
				 "zstd checksum mismatch: the batch was corrupted after it was "
				 "written (spool or network)");
			goto fail;
		}
		if (ZSTD_isError(last)) {
			snprintf(err, errlen, "not a zstd stream: %s", ZSTD_getErrorName(last));
			goto fail;
		}
		if (out.pos > max_size) {
			snprintf(err, errlen, "more than %zu bytes once decompressed", max_size);
			goto fail;
		}
		if (last == 0 && in.pos < in.size) {
			/* a second frame would be decoded unchecked */
			snprintf(err, errlen, "%zu bytes after the zstd frame", in.size - in.pos);
			goto fail;
		}
		if (last == 0)
			break;
		if (out.pos == out.size) {
			size_t ncap = cap * 2 > max_size + 1 ? max_size + 1 : cap * 2;
			uint8_t *n = realloc(buf, ncap);
			if (!n) {
				snprintf(err, errlen, "out of memory");
				goto fail;
			}
			buf = n;
			cap = ncap;
			out.dst = buf;
			out.size = cap;
		} else if (in.pos == in.size) {
			snprintf(err, errlen, "zstd stream truncated after %zu bytes", len);
			goto fail;
		}
	}
	ZSTD_freeDStream(ds);
	*out_len = out.pos;
	return buf;
fail:
	ZSTD_freeDStream(ds);
	free(buf);
	return NULL;
}

uint64_t ep_wire_declared_size(const uint8_t *data, size_t len)
{
	unsigned long long n = ZSTD_getFrameContentSize(data, len);
	return n == ZSTD_CONTENTSIZE_UNKNOWN || n == ZSTD_CONTENTSIZE_ERROR ? 0 : (uint64_t)n;
}

int ep_wire_inflate(const uint8_t *data, size_t len, bool compressed, size_t max_size,
		    const uint8_t **plain, size_t *plain_len, uint8_t **owned, bool *too_large,
		    char *err, size_t errlen)
{
	*owned = NULL;
	*too_large = false;
	if (!compressed) {
		*too_large = len > max_size;
		if (*too_large)
			snprintf(err, errlen, "%zu bytes, more than the limit of %zu", len,
				 max_size);
		*plain = data;
		*plain_len = len;
		return *too_large ? -1 : 0;
	}
	/* a frame that says its size is held to it: what the caller reserved
	 * for it is that size */
	uint64_t declared = ep_wire_declared_size(data, len);
	size_t bound = declared && declared < max_size ? (size_t)declared : max_size;
	*owned = decompress(data, len, bound, plain_len, err, errlen);
	if (!*owned) {
		*too_large = strstr(err, "once decompressed") != NULL;
		return -1;
	}
	*plain = *owned;
	return 0;
}

Edgeprof__V1__Batch *ep_wire_decode(const uint8_t *data, size_t len, bool compressed,
				    size_t max_size, char *err, size_t errlen)
{
	const uint8_t *plain = data;
	size_t plain_len = len;
	uint8_t *owned = NULL;
	if (compressed) {
		owned = decompress(data, len, max_size, &plain_len, err, errlen);
		if (!owned)
			return NULL;
		plain = owned;
	} else if (len > max_size) {
		snprintf(err, errlen, "%zu bytes, more than the limit of %zu", len, max_size);
		return NULL;
	}
	Edgeprof__V1__Batch *b = edgeprof__v1__batch__unpack(NULL, plain_len, plain);
	free(owned);
	if (!b)
		snprintf(err, errlen, "not an edgeprof.v1.Batch protobuf (%zu bytes)", plain_len);
	return b;
}

void ep_wire_free(Edgeprof__V1__Batch *batch)
{
	if (batch)
		edgeprof__v1__batch__free_unpacked(batch, NULL);
}

static const char *build_id_of(const Edgeprof__V1__BinaryProfile *bp)
{
	return bp->build_id && bp->build_id[0] ? bp->build_id : "none";
}

/* A range's cycles came from at most count branch entries, each counting
 * at most EP_WIRE_MAX_ENTRY_CYCLES, over straight lines of at most
 * EP_WIRE_MAX_LINE_INSNS instructions each. Cycles from a cycles event's IP
 * samples (agent --cycles) have no such bound: a slow instruction in a
 * rarely counted range may take many samples. */
static bool cycles_possible(const Edgeprof__V1__Range *r, bool ip_cycles)
{
	uint64_t most_cycles, most_insns;
	bool c_ok = ip_cycles ||
		    __builtin_mul_overflow(r->count, EP_WIRE_MAX_ENTRY_CYCLES, &most_cycles) ||
		    r->cycles <= most_cycles;
	bool i_ok = __builtin_mul_overflow(r->count, EP_WIRE_MAX_LINE_INSNS, &most_insns) ||
		    r->cycled_instructions <= most_insns;
	return c_ok && i_ok;
}

int ep_wire_check_counts(const Edgeprof__V1__Batch *b, char *err, size_t errlen)
{
	uint64_t samples = 0;
	if (b->stats)
		samples = b->stats->samples;
	else if (b->interval_samples)
		samples = b->interval_samples; /* a part of an interval: its samples */
	else
		for (size_t i = 0; i < b->n_binaries; i++)
			if (b->binaries[i]->profile && b->binaries[i]->profile->samples > samples)
				samples = b->binaries[i]->profile->samples;
	if (samples > EP_WIRE_MAX_SAMPLES) {
		snprintf(err, errlen,
			 "%" PRIu64 " samples in one batch: more than the %llu allowed", samples,
			 EP_WIRE_MAX_SAMPLES);
		return -1;
	}
	uint32_t chop = b->config ? b->config->chop : 0;
	if (chop > EP_WIRE_MAX_STACK) {
		snprintf(err, errlen, "config.chop %u: deeper than any branch stack (%d)", chop,
			 EP_WIRE_MAX_STACK);
		return -1;
	}
	uint64_t per_sample = chop ? chop : EP_WIRE_MAX_WHOLE_STACK;
	const char *cycles_source = b->config ? b->config->cycles_source : NULL;
	bool ip_cycles = cycles_source && (strcmp(cycles_source, "cycles_event") == 0 ||
					   strcmp(cycles_source, "cpu_clock") == 0);
	uint64_t most = samples * per_sample; /* < 2^58: no overflow */
	char why[160];
	for (size_t i = 0; i < b->n_binaries; i++) {
		const Edgeprof__V1__BinaryProfile *bp = b->binaries[i]->profile;
		if (!bp)
			continue;
		why[0] = '\0';
		if (bp->samples > samples)
			snprintf(why, sizeof(why), "samples %" PRIu64 " is more than the batch's",
				 bp->samples);
		for (size_t j = 0; !why[0] && j < bp->n_edges; j++) {
			const Edgeprof__V1__Edge *e = bp->edges[j];
			if (e->count > most || e->mispredicted > e->count)
				snprintf(why, sizeof(why),
					 "edge 0x%" PRIx64 "->0x%" PRIx64 " count %" PRIu64
					 " (mispredicted %" PRIu64 ")",
					 e->from, e->to, e->count, e->mispredicted);
		}
		for (size_t j = 0; !why[0] && j < bp->n_ranges; j++) {
			const Edgeprof__V1__Range *r = bp->ranges[j];
			if (r->count > most || !cycles_possible(r, ip_cycles))
				snprintf(why, sizeof(why),
					 "range 0x%" PRIx64 "-0x%" PRIx64 " count %" PRIu64
					 " (cycles %" PRIu64 " over %" PRIu64 " instructions)",
					 r->start, r->end, r->count, r->cycles,
					 r->cycled_instructions);
		}
		for (size_t j = 0; !why[0] && j < bp->n_ips; j++)
			if (bp->ips[j]->count > samples)
				snprintf(why, sizeof(why), "ip 0x%" PRIx64 " count %" PRIu64,
					 bp->ips[j]->ip, bp->ips[j]->count);
		if (why[0]) {
			snprintf(err, errlen,
				 "binaries[%zu] (build-id %.64s): %s: out of range for a batch of "
				 "%" PRIu64 " samples counting at most %" PRIu64
				 " branches each (config.chop %u)",
				 i, build_id_of(bp), why, samples, per_sample, chop);
			return -1;
		}
	}
	return 0;
}

/* 0 when s (NULL: "") is at most max bytes; else -1 with err naming where
 * it is, its length (counted up to one past the bound) and the bound */
static int str_within(const char *s, size_t max, const char *what, size_t i, char *err,
		      size_t errlen)
{
	size_t n = s ? strnlen(s, max + 1) : 0;
	if (n <= max)
		return 0;
	if (i == SIZE_MAX)
		snprintf(err, errlen, "%s: more than %zu bytes, the most a batch's %s may hold",
			 what, max, what);
	else
		snprintf(err, errlen,
			 "%s of binaries[%zu]: more than %zu bytes, the most a batch's %s may hold",
			 what, i, max, what);
	return -1;
}

static int labels_within(const Edgeprof__V1__Labels *l, size_t i, char *err, size_t errlen)
{
	if (!l)
		return 0;
	return str_within(l->container_id, EP_WIRE_MAX_NAME, "labels.container_id", i, err,
			  errlen) ||
	       str_within(l->pod, EP_WIRE_MAX_NAME, "labels.pod", i, err, errlen) ||
	       str_within(l->namespace_, EP_WIRE_MAX_NAME, "labels.namespace", i, err, errlen) ||
	       str_within(l->cgroup, EP_WIRE_MAX_PATH, "labels.cgroup", i, err, errlen) ||
	       str_within(l->process, EP_WIRE_MAX_NAME, "labels.process", i, err, errlen) ||
	       str_within(l->session_id, EP_WIRE_MAX_NAME, "labels.session_id", i, err, errlen);
}

static int profile_within(const Edgeprof__V1__BinaryProfile *p, size_t i, char *err, size_t errlen)
{
	if (str_within(p->arch, EP_WIRE_MAX_NAME, "arch", i, err, errlen) ||
	    labels_within(p->labels, i, err, errlen))
		return -1;
	for (size_t k = 0; k < p->n_paths; k++)
		if (str_within(p->paths[k], EP_WIRE_MAX_PATH, "a path", i, err, errlen))
			return -1;
	for (size_t k = 0; k < p->n_functions; k++)
		if (p->functions[k] && str_within(p->functions[k]->name, EP_WIRE_MAX_SYMBOL,
						  "a function's name", i, err, errlen))
			return -1;
	return 0;
}

/* Every string of b within its bound (EP_WIRE_MAX_*). */
static int strings_within(const Edgeprof__V1__Batch *b, char *err, size_t errlen)
{
	const Edgeprof__V1__AgentIdentity *a = b->agent;
	if (str_within(a->node, EP_WIRE_MAX_NAME, "agent.node", SIZE_MAX, err, errlen) ||
	    str_within(a->agent_id, EP_WIRE_MAX_NAME, "agent.agent_id", SIZE_MAX, err, errlen) ||
	    str_within(a->version, EP_WIRE_MAX_NAME, "agent.version", SIZE_MAX, err, errlen))
		return -1;
	if (b->n_capabilities > EP_WIRE_MAX_CAPABILITIES) {
		snprintf(err, errlen, "%zu capabilities: more than %d, the most a batch may list",
			 b->n_capabilities, EP_WIRE_MAX_CAPABILITIES);
		return -1;
	}
	for (size_t k = 0; k < b->n_capabilities; k++)
		if (str_within(b->capabilities[k], EP_WIRE_MAX_NAME, "a capability", SIZE_MAX, err,
			       errlen))
			return -1;
	const Edgeprof__V1__SamplingConfig *c = b->config;
	if (c && (str_within(c->source, EP_WIRE_MAX_PATH, "config.source", SIZE_MAX, err, errlen) ||
		  str_within(c->event, EP_WIRE_MAX_NAME, "config.event", SIZE_MAX, err, errlen) ||
		  str_within(c->range_mode, EP_WIRE_MAX_NAME, "config.range_mode", SIZE_MAX, err,
			     errlen) ||
		  str_within(c->mode, EP_WIRE_MAX_NAME, "config.mode", SIZE_MAX, err, errlen) ||
		  str_within(c->chop_unit, EP_WIRE_MAX_NAME, "config.chop_unit", SIZE_MAX, err,
			     errlen) ||
		  str_within(c->cycles_source, EP_WIRE_MAX_NAME, "config.cycles_source", SIZE_MAX,
			     err, errlen) ||
		  str_within(c->cycles_unit, EP_WIRE_MAX_NAME, "config.cycles_unit", SIZE_MAX, err,
			     errlen)))
		return -1;
	for (size_t k = 0; k < b->n_sessions; k++)
		if (b->sessions[k] && (str_within(b->sessions[k]->session_id, EP_WIRE_MAX_NAME,
						  "a session's id", SIZE_MAX, err, errlen) ||
				       str_within(b->sessions[k]->message, EP_WIRE_MAX_MESSAGE,
						  "a session's message", SIZE_MAX, err, errlen)))
			return -1;
	for (size_t i = 0; i < b->n_binaries; i++)
		if (labels_within(b->binaries[i]->labels, i, err, errlen) ||
		    profile_within(b->binaries[i]->profile, i, err, errlen))
			return -1;
	return 0;
}

int ep_wire_check_batch(const Edgeprof__V1__Batch *b, char *err, size_t errlen)
{
	if (b->wire_version == 0 || b->wire_version > EP_WIRE_VERSION) {
		snprintf(err, errlen, "wire_version %u not supported: this collector speaks 1..%u",
			 b->wire_version, EP_WIRE_VERSION);
		return EP_WIRE_BAD_BATCH;
	}
	if (!b->agent || !b->agent->agent_id || !b->agent->agent_id[0] || b->sequence == 0) {
		snprintf(err, errlen, "batch without agent id or sequence number");
		return EP_WIRE_BAD_BATCH;
	}
	for (size_t i = 0; i < b->n_binaries; i++) {
		if (!b->binaries[i]->profile) {
			snprintf(err, errlen, "binaries[%zu] has no profile", i);
			return EP_WIRE_BAD_BATCH;
		}
		/* "" is a binary without a build-id note; anything else is
		 * the key every count is stored under */
		const char *id = b->binaries[i]->profile->build_id;
		char why[200];
		if (id && id[0] && ep_build_id_check(id, why, sizeof(why)) != 0) {
			snprintf(err, errlen, "binaries[%zu]: %s", i, why);
			return EP_WIRE_BAD_BATCH;
		}
	}
	if (strings_within(b, err, errlen) != 0)
		return EP_WIRE_BAD_STRING;
	if (ep_wire_check_counts(b, err, errlen) != 0)
		return EP_WIRE_BAD_COUNTS;
	return 0;
}
