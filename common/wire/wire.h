/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stream stage, the bytes: a Batch (proto/ingest.proto) as it crosses the
 * wire and sits in the spool: protobuf, zstd-compressed, the frame with a
 * checksum of its content (a bit flipped in the spool is refused, not
 * stored; a frame without one is refused too: nothing would tell its
 * damage). The collector decodes with the same functions, so both ends
 * agree on limits.
 */
#ifndef EP_WIRE_H
#define EP_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ingest.pb-c.h"

#define EP_WIRE_VERSION 1
/* Decompressed size a collector accepts by default; a batch of a busy
 * node's 10 s is a few MiB at most. */
#define EP_WIRE_MAX_BATCH (64u << 20)
/* What one batch holds at most by default, in a collector (--max-batch) and
 * from an agent, which cuts a bigger interval into parts (Batch.
 * interval_samples): far above a busy node's 10 s (~300,000 rows over 20
 * label sets, docs/capacity.md). Rows: edges, ranges, IPs and functions
 * together, what an agent's part holds at most, which unpacks within the
 * collector's default --ingest-memory-mib. */
#define EP_WIRE_BATCH_BINARIES	 65536
#define EP_WIRE_BATCH_EDGES	 (1u << 20)
#define EP_WIRE_BATCH_RANGES	 (1u << 20)
#define EP_WIRE_BATCH_IPS	 (1u << 20)
#define EP_WIRE_BATCH_FUNCTIONS	 (1u << 20)
#define EP_WIRE_BATCH_LABEL_SETS 16384
#define EP_WIRE_BATCH_ROWS	 (1u << 20)

/* The strings of a batch, each within a bound: the collector stores them
 * and answers with them (a label value of 60 MB would be in every listing
 * of its binary, and the listing's page bounds count values, not bytes).
 * Far above what an agent writes: Kubernetes names are at most 253 bytes,
 * paths PATH_MAX. */
#define EP_WIRE_MAX_NAME	 256   /* identity, labels but cgroup, arch, config words */
#define EP_WIRE_MAX_PATH	 4096  /* cgroup, a binary's paths, config.source */
#define EP_WIRE_MAX_MESSAGE	 8192  /* a session report's message (names a cgroup) */
#define EP_WIRE_MAX_SYMBOL	 65536 /* a function's name: C++ templates run to kilobytes */
#define EP_WIRE_MAX_CAPABILITIES 64

/* Serialises and compresses. *out is malloc'd. 0, or -1 when memory runs out. */
int ep_wire_encode(const Edgeprof__V1__Batch *batch, uint8_t **out, size_t *out_len);

/* Decodes bytes that are one zstd frame with a content checksum
 * (compressed true: what agents send, and all the collector accepts) or
 * plain protobuf (tests and the fuzz target, which check nothing of the
 * bytes). Refuses more than max_size bytes once decompressed. NULL with
 * err saying what is wrong (not zstd, no checksum, checksum mismatch,
 * truncated, bytes after the frame, too large, not a Batch).
 * Free with ep_wire_free(). Does not check wire_version or identity: the
 * caller answers those. */
Edgeprof__V1__Batch *ep_wire_decode(const uint8_t *data, size_t len, bool compressed,
				    size_t max_size, char *err, size_t errlen);
void ep_wire_free(Edgeprof__V1__Batch *batch);

/* ep_wire_decode in its steps, for a caller that checks the bytes before
 * unpacking them (the collector's ingest): the protobuf bytes of a batch
 * (one zstd frame with a checksum when compressed, else data itself: *plain
 * then points into data and *owned is NULL), at most max_size of them; the
 * frame's declared size, when it declares one, is the bound if smaller. 0,
 * or -1 with err (too_large set when the bound is what refused it). */
int ep_wire_inflate(const uint8_t *data, size_t len, bool compressed, size_t max_size,
		    const uint8_t **plain, size_t *plain_len, uint8_t **owned, bool *too_large,
		    char *err, size_t errlen);
/* What a zstd frame says it decompresses to; 0 when it does not say. */
uint64_t ep_wire_declared_size(const uint8_t *data, size_t len);

/* What a batch's protobuf bytes hold, counted without unpacking them
 * (common/wire/wire_count.c): binaries (BinaryDelta), edges, ranges, IPs,
 * functions, segments, paths, session reports, distinct label sets (of the
 * binaries' labels; counted up to one past the bound only), and about what
 * unpacking takes on the heap (every message, string and unknown field:
 * within a few percent, and never less for a batch of many small
 * messages). */
struct ep_wire_counts {
	uint64_t binaries, edges, ranges, ips, functions, segments, paths, sessions, label_sets;
	uint64_t decoded_bytes;
};
/* 0, or -1 with err when the bytes are no Batch. limits: only its
 * label_sets is read here (0: no bound). */
int ep_wire_count(const uint8_t *data, size_t len, const struct ep_wire_counts *limits,
		  struct ep_wire_counts *c, char *err, size_t errlen);
/* 0 when c is within limits (a 0 there: no bound), else -1 with err naming
 * the count, what it counts and the bound, and *which its name ("edges",
 * "label_sets", ...) for the metric. */
int ep_wire_check_limits(const struct ep_wire_counts *c, const struct ep_wire_counts *limits,
			 const char **which, char *err, size_t errlen);

/* What one batch may count, so that no single batch can push a stored sum
 * to 2^64 (issue 18: one batch with samples = 2^63 - 1 made every listing
 * fail). S, the batch's samples (stats.samples; without stats, the largest
 * binary's samples), is at most EP_WIRE_MAX_SAMPLES: a 10 s batch of a
 * 1,024-CPU node sampling every CPU at the kernel's default ceiling of
 * 100,000 samples/s is 1.0e9 < 2^32. Each sample counts at most L branches:
 * L = config.chop (at most EP_WIRE_MAX_STACK, the deepest branch stack, Arm
 * BRBE's 64), or, when the whole stack is counted (chop 0, or no config),
 * EP_WIRE_MAX_WHOLE_STACK: 65 gaps of at most 1 MiB (longer ones are cut as
 * inconsistent) holding at most one 2-byte conditional branch per 2 bytes.
 * So: every binary's samples <= S, every edge and range count <= S x L
 * (mispredicted <= its edge's count), every IP count <= S. The largest
 * accepted count is 2^32 x 65 x 2^19 = 65 x 2^51, just over 2^57 (under
 * 2^58, so S x L never overflows): 127 such counts on one key (entries of
 * one batch, or batches of one minute) are needed to reach 2^64, and the
 * merge and the stores saturate there (tests/fuzz/fuzz_ingest.c). */
#define EP_WIRE_MAX_SAMPLES	(1ULL << 32)
#define EP_WIRE_MAX_STACK	64
#define EP_WIRE_MAX_WHOLE_STACK ((uint64_t)(EP_WIRE_MAX_STACK + 1) << 19)
/* A range's cycles: at most count entries' 16-bit cycle counts, over
 * straight lines of at most 1 MiB of code (an instruction a byte at most). */
#define EP_WIRE_MAX_ENTRY_CYCLES 0xffffULL
#define EP_WIRE_MAX_LINE_INSNS	 (1ULL << 20)

/* 0 when every count of b is within those bounds; -1 with err naming the
 * first count that is not, where it is and the bound. */
int ep_wire_check_counts(const Edgeprof__V1__Batch *b, char *err, size_t errlen);

/* Everything the collector checks of a decoded batch before storing it:
 * wire_version (1..EP_WIRE_VERSION), an agent id and a non-zero sequence,
 * a profile in every binary, its build-id "" or lowercase hex
 * (common/util/build_id.h), every string within its EP_WIRE_MAX_* bound,
 * then ep_wire_check_counts. 0 when accepted; EP_WIRE_BAD_BATCH,
 * EP_WIRE_BAD_STRING or EP_WIRE_BAD_COUNTS with err saying why. The fuzz
 * target (tests/fuzz/fuzz_ingest.c) runs the same function. */
#define EP_WIRE_BAD_BATCH  (-1)
#define EP_WIRE_BAD_COUNTS (-2)
#define EP_WIRE_BAD_STRING (-3)
int ep_wire_check_batch(const Edgeprof__V1__Batch *b, char *err, size_t errlen);

#endif
