/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stream stage, the bytes: a Batch (proto/ingest.proto) as it crosses the
 * wire and sits in the spool: protobuf, zstd-compressed, the frame with a
 * checksum of its content (a bit flipped in the spool is refused, not
 * stored; frames of older agents, without one, are still read). The collector
 * decodes with the same functions, so both ends agree on limits.
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

/* Serialises and compresses. *out is malloc'd. 0, or -1 when memory runs out. */
int ep_wire_encode(const Edgeprof__V1__Batch *batch, uint8_t **out, size_t *out_len);

/* Decodes bytes that are zstd-compressed (compressed true) or plain
 * protobuf. Refuses more than max_size bytes once decompressed. NULL with
 * err saying what is wrong (not zstd, checksum mismatch, truncated, too large,
 * not a Batch).
 * Free with ep_wire_free(). Does not check wire_version or identity: the
 * caller answers those. */
Edgeprof__V1__Batch *ep_wire_decode(const uint8_t *data, size_t len, bool compressed,
				    size_t max_size, char *err, size_t errlen);
void ep_wire_free(Edgeprof__V1__Batch *batch);

#endif
