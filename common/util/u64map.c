/* SPDX-License-Identifier: Apache-2.0 */
#include "common/util/u64map.h"

#include <stdlib.h>
#include <string.h>

void ep_u64map_init(struct ep_u64map *m)
{
	*m = (struct ep_u64map){0};
}

void ep_u64map_free(struct ep_u64map *m)
{
	free(m->keys);
	free(m->values);
	free(m->used);
	*m = (struct ep_u64map){0};
}

uint64_t *ep_u64map_get(const struct ep_u64map *m, uint64_t key)
{
	if (m->capacity == 0)
		return NULL;
	size_t mask = m->capacity - 1;
	for (size_t i = ep_hash_u64(key) & mask;; i = (i + 1) & mask) {
		if (!m->used[i])
			return NULL;
		if (m->keys[i] == key)
			return &m->values[i];
	}
}

static int grow(struct ep_u64map *m)
{
	size_t new_cap = m->capacity ? m->capacity * 2 : 16;
	uint64_t *keys = malloc(new_cap * sizeof(*keys));
	uint64_t *values = malloc(new_cap * sizeof(*values));
	uint8_t *used = calloc(new_cap, 1);
	if (!keys || !values || !used) {
		free(keys);
		free(values);
		free(used);
		return -1;
	}
	size_t mask = new_cap - 1;
	for (size_t j = 0; j < m->capacity; j++) {
		if (!m->used[j])
			continue;
		size_t i = ep_hash_u64(m->keys[j]) & mask;
		while (used[i])
			i = (i + 1) & mask;
		used[i] = 1;
		keys[i] = m->keys[j];
		values[i] = m->values[j];
	}
	free(m->keys);
	free(m->values);
	free(m->used);
	m->keys = keys;
	m->values = values;
	m->used = used;
	m->capacity = new_cap;
	return 0;
}

uint64_t *ep_u64map_upsert(struct ep_u64map *m, uint64_t key, bool *inserted)
{
	if (inserted)
		*inserted = false;
	/* keep the load factor under 1/2 so probes stay short */
	if ((m->count + 1) * 2 > m->capacity && grow(m) != 0)
		return NULL;
	size_t mask = m->capacity - 1;
	size_t i = ep_hash_u64(key) & mask;
	while (m->used[i]) {
		if (m->keys[i] == key)
			return &m->values[i];
		i = (i + 1) & mask;
	}
	m->used[i] = 1;
	m->keys[i] = key;
	m->values[i] = 0;
	m->count++;
	if (inserted)
		*inserted = true;
	return &m->values[i];
}

bool ep_u64map_remove(struct ep_u64map *m, uint64_t key)
{
	if (m->capacity == 0)
		return false;
	size_t mask = m->capacity - 1;
	size_t i = ep_hash_u64(key) & mask;
	for (;; i = (i + 1) & mask) {
		if (!m->used[i])
			return false;
		if (m->keys[i] == key)
			break;
	}
	/* backward-shift deletion: no tombstones, so a map that sees
	 * inserts and removals forever (pids) stays as fast as a fresh one */
	for (size_t j = i;;) {
		j = (j + 1) & mask;
		if (!m->used[j])
			break;
		size_t home = ep_hash_u64(m->keys[j]) & mask;
		bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
		if (stays)
			continue;
		m->keys[i] = m->keys[j];
		m->values[i] = m->values[j];
		i = j;
	}
	m->used[i] = 0;
	m->count--;
	return true;
}

void ep_u64map_clear(struct ep_u64map *m)
{
	if (m->count)
		memset(m->used, 0, m->capacity);
	m->count = 0;
}
