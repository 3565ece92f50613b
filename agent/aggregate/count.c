/* SPDX-License-Identifier: Apache-2.0 */
/* Counting (SPEC step 5), the hot path: a chopped branch is an increment
 * of arrays indexed by its dense site and range ids, no hashing; only an
 * indirect branch's targets, edges into other binaries and whole gaps use
 * small tables. */
#include <stdlib.h>
#include <string.h>

#include "agent/aggregate/aggregate_internal.h"

struct ep_aggregator *ep_aggregator_new(struct ep_decoder_cache *decoders,
					struct ep_binary_registry *binaries,
					enum ep_range_mode range_mode)
{
	struct ep_aggregator *a = calloc(1, sizeof(*a));
	if (!a)
		return NULL;
	a->decoders = decoders;
	a->binaries = binaries;
	a->range_mode = range_mode;
	return a;
}

static void bin_counts_free(struct bin_counts *c)
{
	free(c->taken);
	free(c->taken_mispredicted);
	free(c->not_taken);
	free(c->ranges);
	free(c->range_cycles);
	free(c->range_cycled_insns);
	free(c->site_list);
	for (size_t i = 0; i < c->nlists; i++)
		free(c->lists[i].items);
	free(c->lists);
	ep_u64map_free(&c->gap_ranges);
	ep_u64map_free(&c->from_external);
	ep_u64map_free(&c->ips);
	ep_u64map_free(&c->ip_cycles);
}

void ep_aggregator_free(struct ep_aggregator *a)
{
	if (!a)
		return;
	for (size_t i = 0; i < a->nbins; i++)
		bin_counts_free(&a->bins[i]);
	free(a->bins);
	ep_agg_stacks_free(a);
	free(a);
}

void ep_aggregator_reset(struct ep_aggregator *a)
{
	ep_agg_stacks_reset(a);
	/* the arrays stay allocated: the next interval counts the same code */
	for (size_t i = 0; i < a->nbins; i++) {
		struct bin_counts *c = &a->bins[i];
		if (!c->active)
			continue;
		size_t sites = (size_t)c->site_cap * sizeof(uint64_t);
		if (sites) {
			memset(c->taken, 0, sites);
			memset(c->taken_mispredicted, 0, sites);
			memset(c->not_taken, 0, sites);
			memset(c->site_list, 0, (size_t)c->site_cap * sizeof(*c->site_list));
		}
		if (c->range_cap) {
			memset(c->ranges, 0, (size_t)c->range_cap * sizeof(uint64_t));
			memset(c->range_cycles, 0, (size_t)c->range_cap * sizeof(uint64_t));
			memset(c->range_cycled_insns, 0, (size_t)c->range_cap * sizeof(uint64_t));
		}
		for (size_t j = 0; j < c->nlists; j++)
			free(c->lists[j].items);
		free(c->lists);
		c->lists = NULL;
		c->nlists = c->lists_cap = 0;
		ep_u64map_free(&c->gap_ranges);
		ep_u64map_free(&c->from_external);
		ep_u64map_free(&c->ips);
		ep_u64map_free(&c->ip_cycles);
		c->samples = 0;
		c->active = false;
	}
}

void ep_aggregator_mark_binaries(const struct ep_aggregator *a, uint8_t *in_use, size_t n)
{
	for (size_t i = 0; i < a->nbins && i < n; i++)
		if (a->bins[i].active)
			in_use[i] = 1;
	/* a stack's callers may lie in binaries with no counts of their own */
	ep_agg_stacks_mark(a, in_use, n);
}

void ep_aggregator_forget_binaries(struct ep_aggregator *a, const uint8_t *evicted, size_t n)
{
	for (size_t i = 0; i < a->nbins && i < n; i++) {
		if (!evicted[i])
			continue;
		bin_counts_free(&a->bins[i]);
		memset(&a->bins[i], 0, sizeof(a->bins[i]));
	}
}

uint64_t ep_aggregator_branches(const struct ep_aggregator *a)
{
	return a->branches;
}
uint64_t ep_aggregator_ranges(const struct ep_aggregator *a)
{
	return a->ranges;
}

static inline struct bin_counts *bin_counts(struct ep_aggregator *a, uint32_t bin)
{
	if (bin < a->nbins && a->bins[bin].active)
		return &a->bins[bin];
	if (bin >= a->nbins) {
		size_t n = bin + 1 > a->nbins * 2 ? bin + 1 : a->nbins * 2;
		struct bin_counts *bins = realloc(a->bins, n * sizeof(*bins));
		if (!bins)
			return NULL;
		memset(bins + a->nbins, 0, (n - a->nbins) * sizeof(*bins));
		a->bins = bins;
		a->nbins = n;
	}
	struct bin_counts *c = &a->bins[bin];
	c->active = true;
	return c;
}

static int grow_u64(uint64_t **array, uint32_t old_cap, uint32_t new_cap)
{
	uint64_t *p = realloc(*array, (size_t)new_cap * sizeof(*p));
	if (!p)
		return -1;
	memset(p + old_cap, 0, (size_t)(new_cap - old_cap) * sizeof(*p));
	*array = p;
	return 0;
}

/* Sites and ranges get ids as the decoder meets them, so the arrays grow
 * behind it; doubling keeps this off the hot path. */
static int __attribute__((noinline)) grow_sites(struct bin_counts *c, uint32_t site)
{
	uint32_t cap = c->site_cap ? c->site_cap : 1024;
	while (cap <= site)
		cap *= 2;
	if (grow_u64(&c->taken, c->site_cap, cap) || grow_u64(&c->not_taken, c->site_cap, cap) ||
	    grow_u64(&c->taken_mispredicted, c->site_cap, cap))
		return -1;
	uint32_t *l = realloc(c->site_list, (size_t)cap * sizeof(*l));
	if (!l)
		return -1;
	memset(l + c->site_cap, 0, (size_t)(cap - c->site_cap) * sizeof(*l));
	c->site_list = l;
	c->site_cap = cap;
	return 0;
}

static inline int ensure_site(struct bin_counts *c, uint32_t site)
{
	return site < c->site_cap ? 0 : grow_sites(c, site);
}

static int __attribute__((noinline)) grow_ranges(struct bin_counts *c, uint32_t range)
{
	uint32_t cap = c->range_cap ? c->range_cap : 1024;
	while (cap <= range)
		cap *= 2;
	if (grow_u64(&c->ranges, c->range_cap, cap) ||
	    grow_u64(&c->range_cycles, c->range_cap, cap) ||
	    grow_u64(&c->range_cycled_insns, c->range_cap, cap))
		return -1;
	c->range_cap = cap;
	return 0;
}

static inline int ensure_range(struct bin_counts *c, uint32_t range)
{
	return range < c->range_cap ? 0 : grow_ranges(c, range);
}

/* A new empty list's index, or UINT64_MAX when memory runs out. */
static uint64_t new_list(struct bin_counts *c)
{
	if (c->nlists == c->lists_cap) {
		size_t cap = c->lists_cap ? c->lists_cap * 2 : 64;
		struct target_list *l = realloc(c->lists, cap * sizeof(*l));
		if (!l)
			return UINT64_MAX;
		c->lists = l;
		c->lists_cap = cap;
	}
	c->lists[c->nlists] = (struct target_list){0};
	return c->nlists++;
}

static struct target_list *list_for(struct bin_counts *c, struct ep_u64map *map, uint64_t key)
{
	bool inserted;
	uint64_t *slot = ep_u64map_upsert(map, key, &inserted);
	if (!slot)
		return NULL;
	if (inserted)
		*slot = new_list(c);
	if (*slot == UINT64_MAX)
		return NULL;
	return &c->lists[*slot];
}

/* A site's targets: indexed by its dense id, no hashing (ensure_site made
 * room for it). */
static inline struct target_list *site_list_for(struct bin_counts *c, uint32_t site)
{
	if (!c->site_list[site]) {
		uint64_t i = new_list(c);
		if (i == UINT64_MAX)
			return NULL;
		c->site_list[site] = (uint32_t)i + 1;
	}
	return &c->lists[c->site_list[site] - 1];
}

static void list_add(struct target_list *l, uint64_t to, bool external, uint64_t times,
		     uint64_t mispredicted)
{
	for (uint32_t i = 0; i < l->n; i++) {
		if (l->items[i].to == to && l->items[i].external == external) {
			l->items[i].count += times;
			l->items[i].mispredicted += mispredicted;
			return;
		}
	}
	if (l->n == l->cap) {
		uint32_t cap = l->cap ? l->cap * 2 : 4;
		struct target_count *items = realloc(l->items, cap * sizeof(*items));
		if (!items)
			return;
		l->items = items;
		l->cap = cap;
	}
	l->items[l->n++] = (struct target_count){
	    .to = to, .count = times, .mispredicted = mispredicted, .external = external};
}

/* A whole gap of insns instructions ending at end, times times; cycled of
 * them brought cycles. */
static void gap_add(struct target_list *l, uint64_t end, uint32_t insns, uint64_t times,
		    uint64_t cycles, uint64_t cycled)
{
	list_add(l, end, false, times, 0);
	for (uint32_t i = l->n; i-- > 0;)
		if (l->items[i].to == end && !l->items[i].external) {
			l->items[i].cycles += cycles;
			l->items[i].cycled_insns += cycled * insns;
			l->items[i].insns = insns;
			return;
		}
}

static void count_map(struct ep_u64map *map, uint64_t key, uint64_t times)
{
	uint64_t *v = ep_u64map_upsert(map, key, NULL);
	if (v)
		*v += times;
}

static inline bool kind_is_direct(uint8_t kind)
{
	return kind < 32 &&
	       ((1u << EP_BRANCH_COND | 1u << EP_BRANCH_JUMP | 1u << EP_BRANCH_CALL) >> kind) & 1;
}

/* Counts branch b of binary c times times (mispredicted of them), and the
 * range ending at it unless !with_range, with the cycles its entries
 * brought (cycled of the times had any; SPEC: an entry's cycles belong to
 * the range ending at its source); ensure_site() made room for its site.
 * Returns c, which counting an edge into another binary may have moved. */
static inline __attribute__((always_inline)) struct bin_counts *
count_branch(struct ep_aggregator *a, struct bin_counts *c, const struct ep_trace_branch *b,
	     uint64_t times, uint64_t mispredicted, bool with_range, uint64_t cycles,
	     uint64_t cycled)
{
	a->branches += times;
	if (!b->taken) {
		c->not_taken[b->site] += times;
	} else if (kind_is_direct(b->kind) && b->to_bin == b->bin) {
		c->taken[b->site] += times;
		c->taken_mispredicted[b->site] += mispredicted;
	} else {
		bool external = b->to_bin != b->bin;
		struct target_list *l = site_list_for(c, b->site);
		if (l)
			list_add(l, external ? 0 : b->to_vaddr, external, times, mispredicted);
		if (external && b->to_bin != EP_NO_BIN) {
			struct bin_counts *tc = bin_counts(a, b->to_bin);
			c = &a->bins[b->bin]; /* bin_counts() may have moved it */
			if (tc)
				count_map(&tc->from_external, b->to_vaddr, times);
		}
	}
	if (!with_range)
		return c;
	if (a->range_mode == EP_RANGES_SPLIT) {
		if (b->range == EP_NO_RANGE || ensure_range(c, b->range))
			return c;
		c->ranges[b->range] += times;
		a->ranges += times;
		if (cycled) {
			c->range_cycles[b->range] += cycles;
			c->range_cycled_insns[b->range] += cycled * b->gap_insns;
		}
	} else if (b->taken && b->range != EP_NO_RANGE) {
		/* whole gap: from where the previous taken branch landed up
		 * to this taken branch */
		const struct ep_site *s =
		    ep_decoder_site(ep_decoder_cache_get(a->decoders, b->bin), b->site);
		struct target_list *l = list_for(c, &c->gap_ranges, b->gap_start);
		if (l)
			gap_add(l, s->addr, b->gap_insns, times, cycles, cycled);
		a->ranges += times;
	}
	return c;
}

void ep_aggregate_trace(struct ep_aggregator *a, const struct ep_trace *trace, size_t first,
			bool count_first_range)
{
	/* a trace's branches are nearly all in one binary: look it up once */
	uint32_t last_bin = EP_NO_BIN;
	struct bin_counts *c = NULL;
	for (size_t k = first; k < trace->n; k++) {
		const struct ep_trace_branch *b = &trace->branches[k];
		if (b->bin == EP_NO_BIN)
			continue;
		if (b->bin != last_bin || !c) {
			c = bin_counts(a, b->bin);
			last_bin = b->bin;
		}
		if (!c || ensure_site(c, b->site))
			continue;
		c = count_branch(a, c, b, 1, b->mispredicted, k != first || count_first_range,
				 b->cycles, b->cycles != 0);
	}
}

/* Not-taken steps of one binary; the first one's range unless !first_range.
 * The arrays are read into locals: the tree builds with
 * -fno-strict-aliasing, so every increment would otherwise reload them. */
static inline __attribute__((always_inline)) void
count_steps(struct ep_aggregator *a, struct bin_counts *c, const struct ep_walk_step *steps,
	    uint32_t n, bool first_range, uint64_t times)
{
	bool split = a->range_mode == EP_RANGES_SPLIT;
	uint64_t *not_taken = c->not_taken, *ranges = c->ranges;
	uint32_t site_cap = c->site_cap, range_cap = c->range_cap;
	uint64_t branches = 0, counted_ranges = 0;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t site = steps[i].site, range = steps[i].range;
		/* whole-gap ranges end at taken branches only */
		bool with_range = split && range != EP_NO_RANGE && (i > 0 || first_range);
		if (site >= site_cap || (with_range && range >= range_cap)) {
			if (ensure_site(c, site))
				continue;
			if (with_range && ensure_range(c, range))
				with_range = false;
			not_taken = c->not_taken;
			ranges = c->ranges;
			site_cap = c->site_cap;
			range_cap = c->range_cap;
		}
		not_taken[site] += times;
		branches++;
		if (with_range) {
			ranges[range] += times;
			counted_ranges++;
		}
	}
	a->branches += branches * times;
	a->ranges += counted_ranges * times;
}

/* A taken branch to a fixed target in its own binary, the common case. */
static inline __attribute__((always_inline)) bool
count_direct(struct ep_aggregator *a, struct bin_counts *c, const struct ep_trace_branch *b,
	     bool mispredicted, bool with_range, uint64_t cycles, uint64_t cycled)
{
	uint32_t site = b->site, range = b->range;
	if (!b->taken || !kind_is_direct(b->kind) || b->to_bin != b->bin || site >= c->site_cap ||
	    a->range_mode != EP_RANGES_SPLIT)
		return false;
	with_range = with_range && range != EP_NO_RANGE;
	if (with_range && ensure_range(c, range))
		with_range = false;
	uint64_t *taken = c->taken, *taken_mispredicted = c->taken_mispredicted;
	uint64_t *ranges = c->ranges;
	taken[site]++;
	taken_mispredicted[site] += mispredicted;
	a->branches++;
	if (with_range) {
		ranges[range]++;
		a->ranges++;
		if (cycled) {
			c->range_cycles[range] += cycles;
			c->range_cycled_insns[range] += cycled * b->gap_insns;
		}
	}
	return true;
}

void ep_aggregate_spans(struct ep_aggregator *a, const struct ep_spans *spans,
			bool count_first_range)
{
	uint32_t last_bin = EP_NO_BIN;
	struct bin_counts *c = NULL;
	size_t n = spans->n;
	const struct ep_span *items = spans->items;
	for (size_t k = 0; k < n; k++) {
		const struct ep_span *sp = &items[k];
		uint32_t bin = sp->bin;
		if (bin != last_bin || !c) {
			if (bin == EP_NO_BIN || !(c = bin_counts(a, bin)))
				continue;
			last_bin = bin;
		}
		/* the oldest branch counted is the last span's first */
		bool oldest = k + 1 == n && !count_first_range;
		const struct ep_trace_branch *b = sp->branch;
		uint32_t nsteps = sp->nsteps;
		bool mispredicted = sp->mispredicted;
		if (nsteps)
			count_steps(a, c, sp->steps, nsteps, !oldest, 1);
		if (!b)
			continue;
		bool with_range = !(oldest && nsteps == 0);
		if (!count_direct(a, c, b, mispredicted, with_range, sp->cycles, sp->cycled) &&
		    !ensure_site(c, b->site))
			c = count_branch(a, c, b, 1, mispredicted, with_range, sp->cycles,
					 sp->cycled);
	}
}

void ep_aggregate_span_times(struct ep_aggregator *a, const struct ep_span *span, uint64_t times,
			     uint64_t mispredicted)
{
	struct bin_counts *c = span->bin == EP_NO_BIN ? NULL : bin_counts(a, span->bin);
	if (!c)
		return;
	count_steps(a, c, span->steps, span->nsteps, true, times);
	if (span->branch && !ensure_site(c, span->branch->site))
		count_branch(a, c, span->branch, times, mispredicted, true, span->cycles,
			     span->cycled);
}

void ep_aggregate_sample_ip(struct ep_aggregator *a, uint32_t bin, uint64_t vaddr)
{
	struct bin_counts *c = bin_counts(a, bin);
	if (!c)
		return;
	c->samples++;
	count_map(&c->ips, vaddr, 1);
}

void ep_aggregate_cycles_ip(struct ep_aggregator *a, uint32_t bin, uint64_t vaddr, uint64_t period)
{
	struct bin_counts *c = bin_counts(a, bin);
	if (c)
		count_map(&c->ip_cycles, vaddr, period);
}

void ep_aggregator_set_ip_cycles(struct ep_aggregator *a, bool on, double scale)
{
	a->ip_cycles = on;
	a->cycles_scale = scale;
}
