/* SPDX-License-Identifier: Apache-2.0 */
#include "common/profile/insn_mix.h"

#include <stdlib.h>

#include "common/util/sat.h"

const char *const ep_insn_type_names[EP_INSN_TYPES] = {
    [EP_INSN_LOAD] = "load",
    [EP_INSN_STORE] = "store",
    [EP_INSN_COND_BRANCH] = "cond_branch",
    [EP_INSN_JUMP] = "jump",
    [EP_INSN_INDIRECT_JUMP] = "indirect_jump",
    [EP_INSN_CALL] = "call",
    [EP_INSN_INDIRECT_CALL] = "indirect_call",
    [EP_INSN_RETURN] = "return",
    [EP_INSN_VECTOR] = "vector",
    [EP_INSN_ATOMIC] = "atomic",
    [EP_INSN_DIVIDE] = "divide",
    [EP_INSN_OTHER] = "other",
};

static int range_cmp(const void *pa, const void *pb)
{
	const struct ep_range_mix *a = pa, *b = pb;
	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	return (a->end > b->end) - (a->end < b->end);
}

void ep_binary_mix_sort(struct ep_binary_mix *m)
{
	if (m->n)
		qsort(m->ranges, m->n, sizeof(*m->ranges), range_cmp);
}

const struct ep_range_mix *ep_binary_mix_find(const struct ep_binary_mix *m, uint64_t start,
					      uint64_t end)
{
	if (!m || !m->n)
		return NULL;
	struct ep_range_mix key = {.start = start, .end = end};
	return bsearch(&key, m->ranges, m->n, sizeof(*m->ranges), range_cmp);
}

static uint64_t mul_sat(uint64_t a, uint64_t b)
{
	uint64_t r;
	return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

void ep_insn_totals_add(struct ep_insn_totals *t, const struct ep_range_mix *r, uint64_t count)
{
	ep_add_sat(&t->insns, mul_sat(r->insns, count));
	for (int k = 0; k < EP_INSN_TYPES; k++)
		ep_add_sat(&t->types[k], mul_sat(r->types[k], count));
}

void ep_profile_mix_free(struct ep_profile_mix *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++) {
		free(m->bins[i].ranges);
		free(m->bins[i].missing);
	}
	free(m->bins);
	free(m->scope);
	free(m);
}
