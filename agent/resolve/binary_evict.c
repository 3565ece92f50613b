/* SPDX-License-Identifier: Apache-2.0 */
/* Forgetting binaries (ep_binreg_evict): the idle ones no user needs, then
 * the least recently looked up while they hold more than the bound. */
#include <stdlib.h>

#include "agent/resolve/binary_internal.h"
#include "common/util/log.h"

int ep_binreg_add_user(struct ep_binary_registry *reg, const struct ep_binreg_user *user)
{
	struct ep_binreg_user *u = realloc(reg->users, (reg->nusers + 1) * sizeof(*u));
	if (!u)
		return -1;
	reg->users = u;
	reg->users[reg->nusers++] = *user;
	return 0;
}

void ep_binreg_remove_user(struct ep_binary_registry *reg, void *ctx)
{
	for (size_t i = 0; i < reg->nusers; i++) {
		if (reg->users[i].ctx == ctx) {
			reg->users[i] = reg->users[--reg->nusers];
			return;
		}
	}
}

struct lru_candidate {
	uint64_t last_used;
	uint32_t index;
};

static int cmp_lru(const void *pa, const void *pb)
{
	const struct lru_candidate *a = pa, *b = pb;
	if (a->last_used != b->last_used)
		return a->last_used < b->last_used ? -1 : 1;
	return a->index < b->index ? -1 : a->index > b->index;
}

/* Past the idle ones: the least recently looked up of the binaries no user
 * needs (state[i] 0) go too, while *bytes is above max_bytes. */
static size_t evict_to_cap(struct ep_binary_registry *reg, uint8_t *state, uint64_t *bytes,
			   uint64_t max_bytes)
{
	size_t n = 0, evicted = 0;
	struct lru_candidate *c = malloc(reg->n * sizeof(*c));
	if (!c)
		return 0;
	for (size_t i = 0; i < reg->n; i++)
		if (reg->bins[i] && state[i] == 0)
			c[n++] = (struct lru_candidate){reg->bins[i]->last_used, (uint32_t)i};
	qsort(c, n, sizeof(*c), cmp_lru);
	for (size_t i = 0; i<n && * bytes> max_bytes; i++) {
		state[c[i].index] = 2;
		*bytes -= ep_binary_bytes(reg->bins[c[i].index]);
		evicted++;
	}
	free(c);
	return evicted;
}

/* Frees the binaries whose evicted[i] is set; every user forgot them. */
static void free_evicted(struct ep_binary_registry *reg, const uint8_t *evicted)
{
	for (size_t i = 0; i < reg->nlookups; i++) {
		struct lookup_entry *e = &reg->lookups[i];
		if (e->bin && evicted[e->bin->index]) {
			e->bin = NULL;
			e->stale = true;
		}
	}
	for (size_t i = 0; i < reg->n; i++)
		if (evicted[i])
			ep_binreg_unindex(reg, reg->bins[i]);
	for (size_t i = 0; i < reg->n; i++) {
		if (!evicted[i])
			continue;
		struct ep_binary *b = reg->bins[i];
		if (b->build_id_len) {
			uint64_t h = ep_hash_bytes(b->build_id, b->build_id_len) | 1;
			reg->evicted_ids[h % EVICTED_IDS] = h;
		}
		ep_debug("binary %s (build-id %s) evicted: no process maps it and its counts "
			 "were taken",
			 ep_binary_recorded_path(b), b->build_id_hex);
		reg->held_bytes -= ep_binary_bytes(b);
		ep_binary_free(b);
		reg->bins[i] = NULL;
		if (reg->nfree == reg->free_cap) {
			size_t cap = reg->free_cap ? reg->free_cap * 2 : 64;
			uint32_t *f = realloc(reg->free_slots, cap * sizeof(*f));
			if (!f)
				continue; /* the index stays unused: a hole, not a fault */
			reg->free_slots = f;
			reg->free_cap = cap;
		}
		reg->free_slots[reg->nfree++] = (uint32_t)i;
	}
}

size_t ep_binreg_evict(struct ep_binary_registry *reg, uint64_t max_bytes)
{
	size_t n = reg->n, evicted = 0;
	/* 0: no user needs it; 1: kept; 2: evicted */
	uint8_t *state = n ? calloc(n, 1) : NULL;
	if (!state) {
		reg->epoch++;
		return 0;
	}
	for (size_t u = 0; u < reg->nusers; u++)
		reg->users[u].mark(reg->users[u].ctx, state, n);
	uint64_t bytes = 0;
	for (size_t i = 0; i < n; i++) {
		struct ep_binary *b = reg->bins[i];
		if (!b)
			continue;
		if (b->pinned)
			state[i] = 1;
		if (state[i] == 0 && b->last_used < reg->epoch) {
			state[i] = 2;
			evicted++;
		} else {
			bytes += ep_binary_bytes(b);
		}
	}
	if (max_bytes && bytes > max_bytes)
		evicted += evict_to_cap(reg, state, &bytes, max_bytes);
	if (evicted) {
		for (size_t i = 0; i < n; i++)
			state[i] = state[i] == 2;
		for (size_t u = 0; u < reg->nusers; u++)
			reg->users[u].forget(reg->users[u].ctx, state, n);
		free_evicted(reg, state);
		reg->stats.evicted += evicted;
	}
	free(state);
	reg->epoch++;
	return evicted;
}
