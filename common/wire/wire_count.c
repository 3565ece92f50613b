/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a batch holds, read from its protobuf bytes before they are unpacked
 * (issue 32, item 3): unpacking 52 MB of 4 M edges took the collector past
 * 1 GiB, since every message becomes a structure of its own on the heap.
 * Counting first lets the collector refuse a batch past its bounds, and
 * reserve what unpacking it will take, for the price of one pass over bytes
 * it holds anyway.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/util/u64map.h"
#include "common/wire/wire.h"

/* The messages of a Batch the count descends into; any other field is a
 * scalar, a string or a field unknown to this version (kept by the
 * unpacking as raw bytes, so counted as such). */
enum msg {
	M_NONE,
	M_BATCH,
	M_AGENT,
	M_CONFIG,
	M_STATS,
	M_DELTA,
	M_PROFILE,
	M_LABELS,
	M_EDGE,
	M_RANGE,
	M_IP,
	M_FUNCTION,
	M_SEGMENT,
	M_SESSION,
	M_STACK,
	NMSGS
};

static const size_t msg_size[NMSGS] = {
    [M_BATCH] = sizeof(Edgeprof__V1__Batch),
    [M_AGENT] = sizeof(Edgeprof__V1__AgentIdentity),
    [M_CONFIG] = sizeof(Edgeprof__V1__SamplingConfig),
    [M_STATS] = sizeof(Edgeprof__V1__Stats),
    [M_DELTA] = sizeof(Edgeprof__V1__BinaryDelta),
    [M_PROFILE] = sizeof(Edgeprof__V1__BinaryProfile),
    [M_LABELS] = sizeof(Edgeprof__V1__Labels),
    [M_EDGE] = sizeof(Edgeprof__V1__Edge),
    [M_RANGE] = sizeof(Edgeprof__V1__Range),
    [M_IP] = sizeof(Edgeprof__V1__IpCount),
    [M_FUNCTION] = sizeof(Edgeprof__V1__Function),
    [M_SEGMENT] = sizeof(Edgeprof__V1__LoadSegment),
    [M_SESSION] = sizeof(Edgeprof__V1__SessionReport),
    [M_STACK] = sizeof(Edgeprof__V1__StackCount),
};

/* Each message's highest field number: every number up to it is a field
 * of this version (proto/ingest.proto, profile.proto); a higher one is
 * unknown, and unpacking keeps it as a record of its own. */
static const uint32_t msg_fields[NMSGS] = {
    [M_BATCH] = 11,   [M_AGENT] = 3,   [M_CONFIG] = 15, [M_STATS] = 25, [M_DELTA] = 2,
    [M_PROFILE] = 13, [M_LABELS] = 6,  [M_EDGE] = 8,	[M_RANGE] = 5,	[M_IP] = 3,
    [M_FUNCTION] = 4, [M_SEGMENT] = 3, [M_SESSION] = 7, [M_STACK] = 3,
};

/* What a heap block costs beyond its bytes (glibc's header and rounding),
 * and an unknown field's record. */
#define BLOCK	      32
#define UNKNOWN_FIELD 64

/* The embedded message of field num in a message of type m; M_NONE when it
 * is none (a string, a scalar or unknown). */
static enum msg child(enum msg m, uint32_t num)
{
	switch (m) {
	case M_BATCH:
		return num == 2	   ? M_AGENT
		       : num == 6  ? M_CONFIG
		       : num == 7  ? M_STATS
		       : num == 8  ? M_DELTA
		       : num == 10 ? M_SESSION
				   : M_NONE;
	case M_DELTA:
		return num == 1 ? M_PROFILE : num == 2 ? M_LABELS : M_NONE;
	case M_PROFILE:
		return num == 5	   ? M_EDGE
		       : num == 6  ? M_RANGE
		       : num == 7  ? M_IP
		       : num == 8  ? M_FUNCTION
		       : num == 9  ? M_SEGMENT
		       : num == 10 ? M_LABELS
		       : num == 11 ? M_STACK
				   : M_NONE;
	default:
		return M_NONE;
	}
}

/* The fields of each message that are strings (the unpacking copies them);
 * others of wire type 2 are unknown to it (kept raw). */
static bool is_string(enum msg m, uint32_t num)
{
	switch (m) {
	case M_BATCH:
		return num == 9; /* capabilities */
	case M_AGENT:
		return num >= 1 && num <= 3;
	case M_LABELS:
		return num >= 1 && num <= 6;
	case M_CONFIG:
		return num == 1 || num == 2 || num == 8 || num == 9 || num == 10 || num == 11 ||
		       num == 12;
	case M_PROFILE:
		return (num >= 1 && num <= 3) || num == 12; /* stack_binaries */
	case M_FUNCTION:
		return num == 1;
	case M_SESSION:
		return num == 1 || num == 3;
	default:
		return false;
	}
}

struct scan {
	const struct ep_wire_counts *limits;
	struct ep_wire_counts *c;
	struct ep_u64map labels; /* distinct label sets, by their bytes */
	char *err;
	size_t errlen;
};

static int varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	*v = 0;
	for (int shift = 0; shift < 64; shift += 7) {
		if (*p == end)
			return -1;
		uint8_t b = *(*p)++;
		*v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return 0;
	}
	return -1;
}

static int bad(struct scan *s, const char *what)
{
	snprintf(s->err, s->errlen, "not an edgeprof.v1.Batch protobuf: %s", what);
	return -1;
}

static int scan_msg(struct scan *s, enum msg m, const uint8_t *p, const uint8_t *end, int depth)
{
	struct ep_wire_counts *c = s->c;
	c->decoded_bytes += msg_size[m] + BLOCK;
	while (p < end) {
		uint64_t key, len;
		if (varint(&p, end, &key) != 0)
			return bad(s, "a field's key runs past its message");
		/* number 0 is no field, but unpacking keeps it as an unknown one
		 * (fuzz_ingest: 80 80 00 ...): counted as such, below */
		uint32_t num = (uint32_t)(key >> 3), wire = (uint32_t)(key & 7);
		switch (wire) {
		case 0:
			if (varint(&p, end, &len) != 0)
				return bad(s, "a varint runs past its message");
			len = 0;
			break;
		case 1:
			len = 8;
			break;
		case 5:
			len = 4;
			break;
		case 2:
			if (varint(&p, end, &len) != 0)
				return bad(s, "a length runs past its message");
			break;
		default:
			return bad(s, "a group or an unknown wire type");
		}
		if (len > (uint64_t)(end - p))
			return bad(s, "a field runs past its message");
		const uint8_t *at = p;
		p += wire == 0 ? 0 : len;
		enum msg sub = wire == 2 && num ? child(m, num) : M_NONE;
		if (sub != M_NONE) {
			c->decoded_bytes += sizeof(void *); /* its place in a repeated field */
			c->binaries += sub == M_DELTA;
			c->edges += sub == M_EDGE;
			c->ranges += sub == M_RANGE;
			c->ips += sub == M_IP;
			c->functions += sub == M_FUNCTION;
			c->segments += sub == M_SEGMENT;
			c->sessions += sub == M_SESSION;
			if (m == M_DELTA && sub == M_LABELS &&
			    (!s->limits->label_sets || s->labels.count <= s->limits->label_sets)) {
				bool added;
				if (!ep_u64map_upsert(&s->labels, ep_hash_bytes(at, (size_t)len),
						      &added)) {
					snprintf(s->err, s->errlen, "out of memory");
					return -1;
				}
				c->label_sets = s->labels.count;
			}
			if (depth >= 4 || scan_msg(s, sub, at, at + len, depth + 1) != 0)
				return depth >= 4 ? bad(s, "nested too deep") : -1;
		} else if (wire == 2 && is_string(m, num)) {
			c->decoded_bytes += len + 1 + BLOCK + sizeof(void *);
			c->paths += m == M_PROFILE && num == 2;
		} else if (m == M_STACK && (num == 2 || num == 3) && wire == 2) {
			/* packed frames: a 1-byte varint becomes 8 bytes */
			c->decoded_bytes += len * 8 + BLOCK;
		} else if (num == 0 || num > msg_fields[m] || wire == 2) {
			/* not a field of this version: kept as bytes */
			c->decoded_bytes += len + UNKNOWN_FIELD;
		}
	}
	return p == end ? 0 : bad(s, "a field runs past its message");
}

int ep_wire_count(const uint8_t *data, size_t len, const struct ep_wire_counts *limits,
		  struct ep_wire_counts *c, char *err, size_t errlen)
{
	memset(c, 0, sizeof(*c));
	struct scan s = {.limits = limits, .c = c, .err = err, .errlen = errlen};
	ep_u64map_init(&s.labels);
	int rc = scan_msg(&s, M_BATCH, data, data + len, 0);
	ep_u64map_free(&s.labels);
	return rc;
}

int ep_wire_check_limits(const struct ep_wire_counts *c, const struct ep_wire_counts *limits,
			 const char **which, char *err, size_t errlen)
{
	const struct {
		const char *name, *what, *option;
		uint64_t n, max;
	} k[] = {
	    {"binaries", "binaries (BinaryDelta)", "binaries", c->binaries, limits->binaries},
	    {"edges", "edges", "edges", c->edges, limits->edges},
	    {"ranges", "ranges", "ranges", c->ranges, limits->ranges},
	    {"ips", "IPs", "ips", c->ips, limits->ips},
	    {"functions", "functions", "functions", c->functions, limits->functions},
	    /* counted up to one past the bound only: a set of them is kept */
	    {"label_sets", "distinct label sets", "label-sets", c->label_sets, limits->label_sets},
	};
	for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
		if (!k[i].max || k[i].n <= k[i].max)
			continue;
		*which = k[i].name;
		bool more = strcmp(k[i].name, "label_sets") == 0;
		snprintf(err, errlen,
			 "%s%" PRIu64 " %s in one batch: more than the %" PRIu64
			 " a batch may hold (collector --max-batch %s=N); agents split larger "
			 "intervals",
			 more ? "more than " : "", more ? k[i].max : k[i].n, k[i].what, k[i].max,
			 k[i].option);
		return -1;
	}
	return 0;
}
