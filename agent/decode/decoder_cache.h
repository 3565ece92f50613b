/* SPDX-License-Identifier: Apache-2.0 */
/* One decoder per binary of a registry, made the first time a stage asks:
 * decoding costs memory and time, so a binary nobody walks is never
 * decoded. The pipeline owns it and hands it to reconstruct (which walks
 * code) and aggregate (which turns site ids back into addresses), so both
 * see the same site and range ids. */
#ifndef EP_DECODER_CACHE_H
#define EP_DECODER_CACHE_H

#include <stdint.h>

#include "agent/resolve/binary.h"
#include "common/decode/decoder.h"

struct ep_decoder_cache;

/* binaries is borrowed and must outlive the cache. */
struct ep_decoder_cache *ep_decoder_cache_new(struct ep_binary_registry *binaries);
void ep_decoder_cache_free(struct ep_decoder_cache *c);

/* The decoder of binary bin_index (created on first use), NULL when the
 * binary has no code we can decode (warned once). */
struct ep_decoder *ep_decoder_cache_get(struct ep_decoder_cache *c, uint32_t bin_index);

/* Frees the decoders of the binaries with evicted[i] set: their indexes
 * may name other binaries from now on. */
void ep_decoder_cache_forget(struct ep_decoder_cache *c, const uint8_t *evicted, size_t n);

#endif
