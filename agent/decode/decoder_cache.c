/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/decode/decoder_cache.h"

#include <stdbool.h>
#include <stdlib.h>

#include "common/util/log.h"

struct ep_decoder_cache {
	struct ep_binary_registry *binaries;
	struct ep_decoder **decoders;
	/* a binary that cannot be decoded is tried (and warned about) once */
	uint8_t *tried;
	size_t n;
};

struct ep_decoder_cache *ep_decoder_cache_new(struct ep_binary_registry *binaries)
{
	struct ep_decoder_cache *c = calloc(1, sizeof(*c));
	if (c)
		c->binaries = binaries;
	return c;
}

void ep_decoder_cache_free(struct ep_decoder_cache *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++)
		ep_decoder_free(c->decoders[i]);
	free(c->decoders);
	free(c->tried);
	free(c);
}

/* Room for every binary registered so far; false when memory runs out. */
static bool grow(struct ep_decoder_cache *c, size_t n)
{
	struct ep_decoder **decoders = realloc(c->decoders, n * sizeof(*decoders));
	if (!decoders)
		return false;
	c->decoders = decoders;
	uint8_t *tried = realloc(c->tried, n);
	if (!tried)
		return false;
	c->tried = tried;
	for (size_t i = c->n; i < n; i++) {
		c->decoders[i] = NULL;
		c->tried[i] = 0;
	}
	c->n = n;
	return true;
}

void ep_decoder_cache_forget(struct ep_decoder_cache *c, const uint8_t *evicted, size_t n)
{
	for (size_t i = 0; i < n && i < c->n; i++) {
		if (!evicted[i])
			continue;
		ep_decoder_free(c->decoders[i]);
		c->decoders[i] = NULL;
		c->tried[i] = 0;
	}
}

struct ep_decoder *ep_decoder_cache_get(struct ep_decoder_cache *c, uint32_t bin_index)
{
	if (bin_index >= c->n) {
		size_t n = ep_binreg_count(c->binaries);
		if (bin_index >= n || !grow(c, n))
			return NULL;
	}
	if (!c->tried[bin_index]) {
		struct ep_binary *bin = ep_binreg_at(c->binaries, bin_index);
		if (!bin)
			return NULL; /* evicted: no one holds its index any more */
		c->tried[bin_index] = 1;
		size_t nsegs = 0;
		const struct ep_code_segment *segs = ep_binary_code_segments(bin, &nsegs);
		c->decoders[bin_index] = ep_decoder_new(ep_binary_arch(bin), segs, nsegs);
		size_t ndata = 0;
		const struct ep_addr_range *data = ep_binary_data_in_code(bin, &ndata);
		if (c->decoders[bin_index])
			ep_decoder_set_data(c->decoders[bin_index], data, ndata);
		else
			ep_warn("%s: cannot decode its code (architecture %s): its branches are "
				"skipped",
				ep_binary_path(bin), ep_arch_name(ep_binary_arch(bin)));
	}
	return c->decoders[bin_index];
}
