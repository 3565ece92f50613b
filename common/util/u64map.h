/* SPDX-License-Identifier: Apache-2.0 */
/* Open-addressing hash map from a uint64_t key to a
 * uint64_t value. Used off the hot path (address -> dense index) and for
 * the small per-site tables of indirect targets. */
#ifndef EP_U64MAP_H
#define EP_U64MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ep_u64map {
	uint64_t *keys;
	uint64_t *values;
	uint8_t *used;
	size_t capacity; /* power of two, or 0 */
	size_t count;
};

void ep_u64map_init(struct ep_u64map *m);
void ep_u64map_free(struct ep_u64map *m);
/* Returns a pointer to the value for key, or NULL. Valid until the next put. */
uint64_t *ep_u64map_get(const struct ep_u64map *m, uint64_t key);
/* Returns the slot for key, inserting it with value 0 when absent (then
 * *inserted is true). NULL only when memory runs out. */
uint64_t *ep_u64map_upsert(struct ep_u64map *m, uint64_t key, bool *inserted);

/* Removes key; false when it was not there. */
bool ep_u64map_remove(struct ep_u64map *m, uint64_t key);

/* Removes every key, keeping the memory for the next ones. */
void ep_u64map_clear(struct ep_u64map *m);

/* Iteration: for (size_t i = 0; i < m->capacity; i++) if (m->used[i]) ... */

static inline uint64_t ep_hash_u64(uint64_t x)
{
	/* splitmix64 finaliser: cheap and mixes low address bits well */
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

/* FNV-1a over bytes: for keys that are strings (paths). Callers keep the
 * full key beside the value and probe on (hash + 1) when two collide. */
static inline uint64_t ep_hash_bytes(const void *data, size_t len)
{
	const unsigned char *p = data;
	uint64_t h = 0xcbf29ce484222325ULL;
	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 0x100000001b3ULL;
	return h;
}

#endif
