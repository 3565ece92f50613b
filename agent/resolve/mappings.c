/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/resolve/mappings.h"

#include <stdlib.h>
#include <string.h>

#include "common/util/arch.h"

static int reserve(struct ep_mappings *m, size_t n)
{
	if (n <= m->cap)
		return 0;
	size_t cap = m->cap ? m->cap : 16;
	while (cap < n)
		cap *= 2;
	struct ep_mapping *v = realloc(m->v, cap * sizeof(*v));
	if (!v)
		return -1;
	m->v = v;
	m->cap = cap;
	return 0;
}

int ep_mappings_add(struct ep_mappings *m, uint64_t start, uint64_t len, uint64_t pgoff,
		    struct ep_binary *bin, bool anon)
{
	if (len == 0 || start + len < start)
		return -1;
	uint64_t end = start + len;
	/* an overlapped mapping can split in two: room for one more, plus ours */
	if (reserve(m, m->n + 2) != 0)
		return -1;
	size_t out = 0, insert_at = 0;
	struct ep_mapping right = {0};
	bool have_right = false;
	for (size_t i = 0; i < m->n; i++) {
		struct ep_mapping x = m->v[i];
		if (x.end <= start || x.start >= end) {
			m->v[out++] = x;
			if (x.end <= start)
				insert_at = out;
			continue;
		}
		if (x.start < start) {
			struct ep_mapping left = x;
			left.end = start;
			m->v[out++] = left;
			insert_at = out;
		}
		if (x.end > end) {
			right = x;
			right.pgoff += end - x.start;
			right.start = end;
			have_right = true;
		}
	}
	m->n = out;
	memmove(&m->v[insert_at + 1], &m->v[insert_at], (m->n - insert_at) * sizeof(*m->v));
	m->v[insert_at] = (struct ep_mapping){
	    .start = start, .end = end, .pgoff = pgoff, .bin = bin, .anon = anon};
	m->n++;
	if (have_right) {
		size_t at = insert_at + 1;
		memmove(&m->v[at + 1], &m->v[at], (m->n - at) * sizeof(*m->v));
		m->v[at] = right;
		m->n++;
	}
	m->last_hit = insert_at;
	return 0;
}

int ep_mappings_copy(struct ep_mappings *dst, const struct ep_mappings *src)
{
	dst->n = 0;
	dst->last_hit = 0;
	if (src->n == 0)
		return 0;
	if (reserve(dst, src->n) != 0)
		return -1;
	memcpy(dst->v, src->v, src->n * sizeof(*dst->v));
	dst->n = src->n;
	return 0;
}

void ep_mappings_clear(struct ep_mappings *m)
{
	m->n = 0;
	m->last_hit = 0;
}

void ep_mappings_free(struct ep_mappings *m)
{
	free(m->v);
	*m = (struct ep_mappings){0};
}

void ep_mappings_mark_binaries(const struct ep_mappings *m, uint8_t *in_use, size_t n)
{
	for (size_t k = 0; k < m->n; k++) {
		uint32_t index = m->v[k].bin ? ep_binary_index(m->v[k].bin) : UINT32_MAX;
		if (index < n)
			in_use[index] = 1;
	}
}

enum ep_resolve_status ep_mappings_resolve(struct ep_mappings *m, uint64_t addr,
					   struct ep_resolved *out)
{
	if (ep_addr_is_kernel(addr))
		return EP_RESOLVE_KERNEL;
	const struct ep_mapping *x = NULL;
	if (m->last_hit < m->n && addr >= m->v[m->last_hit].start && addr < m->v[m->last_hit].end) {
		x = &m->v[m->last_hit];
	} else {
		size_t lo = 0, hi = m->n;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (m->v[mid].start <= addr)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo == 0 || addr >= m->v[lo - 1].end)
			return EP_RESOLVE_NO_MAPPING;
		m->last_hit = lo - 1;
		x = &m->v[lo - 1];
	}
	if (!x->bin)
		return x->anon ? EP_RESOLVE_ANON_CODE : EP_RESOLVE_UNKNOWN_BINARY;
	uint64_t offset = addr - x->start + x->pgoff;
	uint64_t seg_offset, seg_vaddr, seg_filesz;
	if (!ep_binary_load_segment(x->bin, offset, &seg_offset, &seg_vaddr, &seg_filesz))
		return EP_RESOLVE_NOT_LOADED;
	out->bin = x->bin;
	out->vaddr_bias = (int64_t)(seg_vaddr - seg_offset + x->pgoff - x->start);
	out->vaddr = (uint64_t)((int64_t)addr + out->vaddr_bias);
	/* the part of the mapping that this one segment covers: inside it the
	 * same bias holds */
	uint64_t seg_rt_start = x->start + (seg_offset - x->pgoff);
	if (seg_offset < x->pgoff)
		seg_rt_start = x->start - (x->pgoff - seg_offset);
	uint64_t seg_rt_end = seg_rt_start + seg_filesz;
	out->map_start = seg_rt_start > x->start ? seg_rt_start : x->start;
	out->map_end = seg_rt_end < x->end ? seg_rt_end : x->end;
	return EP_RESOLVE_OK;
}

void ep_mappings_resolve_ip(struct ep_mappings *m, struct ep_sample_ip *ip)
{
	if (ip->kernel)
		return;
	struct ep_resolved at;
	ip->status = ep_mappings_resolve(m, ip->addr, &at);
	if (ip->status == EP_RESOLVE_OK) {
		ip->bin = ep_binary_index(at.bin);
		ip->vaddr = at.vaddr;
	}
}
