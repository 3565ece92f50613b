/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/aggregate/aggregate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "agent/aggregate/cycles_attr.h"
#include "common/profile/merge.h"
#include "common/profile/model.h"
#include "common/util/u64map.h"

/* Targets of one site that has no fixed target (indirect jumps and calls,
 * returns, branches into other binaries). Kept as a short unsorted list:
 * most such sites have a handful of targets. */
struct target_count {
	uint64_t to;
	uint64_t count;
	uint64_t mispredicted;
	uint64_t cycles, cycled_insns; /* whole-gap ranges: see Range in profile.proto */
	uint32_t insns;		       /* whole-gap ranges: the gap's instructions */
	bool external;
};

struct target_list {
	uint32_t n, cap;
	struct target_count *items;
};

struct bin_counts {
	bool active;
	uint64_t samples;
	uint32_t site_cap;
	uint64_t *taken;
	uint64_t *taken_mispredicted;
	uint64_t *not_taken;
	uint32_t range_cap;
	uint64_t *ranges;
	/* the cycles of the branch records, by the range ending at their source,
	 * and the instructions of the straight lines they measured */
	uint64_t *range_cycles, *range_cycled_insns;
	uint32_t *site_list;	     /* site -> 1 + its index in lists, 0: none */
	struct ep_u64map gap_ranges; /* gap start -> index in lists (to = end) */
	struct target_list *lists;
	size_t nlists, lists_cap;
	struct ep_u64map from_external; /* target vaddr -> count */
	struct ep_u64map ips;		/* sample IP -> count */
	/* agent --cycles: IP -> the cycles event's periods summed there,
	 * attributed to ranges when the profile is built (cycles_attr.h) */
	struct ep_u64map ip_cycles;
};

struct ep_aggregator {
	struct ep_decoder_cache *decoders;
	struct ep_binary_registry *binaries;
	enum ep_range_mode range_mode;
	struct bin_counts *bins;
	size_t nbins;
	uint64_t branches;
	uint64_t ranges;
	/* cycles from IP samples (ep_aggregator_set_ip_cycles): every counted
	 * range gets count x instructions as the instructions its cycles ran */
	bool ip_cycles;
	double cycles_scale;
};

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
	free(a);
}

void ep_aggregator_reset(struct ep_aggregator *a)
{
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

/* ---- building the profile message ---- */

static char *dup_string(const char *s)
{
	return strdup(s ? s : "");
}

struct edge_vec {
	Edgeprof__V1__Edge **items;
	size_t n, cap;
};

static Edgeprof__V1__Edge *edge_push(struct edge_vec *v)
{
	if (v->n == v->cap) {
		size_t cap = v->cap ? v->cap * 2 : 64;
		Edgeprof__V1__Edge **items = realloc(v->items, cap * sizeof(*items));
		if (!items)
			return NULL;
		v->items = items;
		v->cap = cap;
	}
	Edgeprof__V1__Edge *e = malloc(sizeof(*e));
	if (!e)
		return NULL;
	edgeprof__v1__edge__init(e);
	v->items[v->n++] = e;
	return e;
}

Edgeprof__V1__BranchKind ep_proto_branch_kind(uint8_t kind)
{
	switch (kind) {
	case EP_BRANCH_COND:
		return EDGEPROF__V1__BRANCH_KIND__BRANCH_CONDITIONAL;
	case EP_BRANCH_JUMP:
		return EDGEPROF__V1__BRANCH_KIND__BRANCH_JUMP;
	case EP_BRANCH_JUMP_INDIRECT:
		return EDGEPROF__V1__BRANCH_KIND__BRANCH_JUMP_INDIRECT;
	case EP_BRANCH_CALL:
		return EDGEPROF__V1__BRANCH_KIND__BRANCH_CALL;
	case EP_BRANCH_CALL_INDIRECT:
		return EDGEPROF__V1__BRANCH_KIND__BRANCH_CALL_INDIRECT;
	case EP_BRANCH_RETURN:
		return EDGEPROF__V1__BRANCH_KIND__BRANCH_RETURN;
	case EP_BRANCH_OTHER:
		return EDGEPROF__V1__BRANCH_KIND__BRANCH_OTHER;
	default:
		return EDGEPROF__V1__BRANCH_KIND__BRANCH_UNKNOWN;
	}
}

static int collect_edges(struct bin_counts *c, const struct ep_decoder *dec, struct edge_vec *v)
{
	uint32_t nsites = ep_decoder_site_count(dec);
	for (uint32_t site = 0; site < c->site_cap && site < nsites; site++) {
		const struct ep_site *s = ep_decoder_site(dec, site);
		if (c->taken[site]) {
			Edgeprof__V1__Edge *e = edge_push(v);
			if (!e)
				return -1;
			e->from = s->addr;
			e->to = s->target;
			e->taken = true;
			e->count = c->taken[site];
			e->mispredicted = c->taken_mispredicted[site];
			e->kind = ep_proto_branch_kind(s->kind);
		}
		if (c->not_taken[site]) {
			Edgeprof__V1__Edge *e = edge_push(v);
			if (!e)
				return -1;
			e->from = s->addr;
			e->to = s->fallthrough;
			e->taken = false;
			e->count = c->not_taken[site];
			e->kind = ep_proto_branch_kind(s->kind);
		}
	}
	for (uint32_t site = 0; site < c->site_cap; site++) {
		if (!c->site_list[site])
			continue;
		const struct ep_site *s = ep_decoder_site(dec, site);
		const struct target_list *l = &c->lists[c->site_list[site] - 1];
		for (uint32_t j = 0; j < l->n; j++) {
			Edgeprof__V1__Edge *e = edge_push(v);
			if (!e)
				return -1;
			e->from = s->addr;
			e->to = l->items[j].to;
			e->to_external = l->items[j].external;
			e->taken = true;
			e->count = l->items[j].count;
			e->mispredicted = l->items[j].mispredicted;
			e->kind = ep_proto_branch_kind(s->kind);
		}
	}
	for (size_t i = 0; i < c->from_external.capacity; i++) {
		if (!c->from_external.used[i])
			continue;
		Edgeprof__V1__Edge *e = edge_push(v);
		if (!e)
			return -1;
		e->from = 0;
		e->from_external = true;
		e->to = c->from_external.keys[i];
		e->taken = true;
		e->count = c->from_external.values[i];
	}
	if (v->n > 1)
		qsort(v->items, v->n, sizeof(*v->items), ep_edge_cmp);
	return 0;
}

/* The IP samples' cycles (agent --cycles) onto bp's ranges, unsorted yet,
 * whose instructions are insns[]: see cycles_attr.h. Each counted range's
 * instructions are count x its own, sampled or not: a range no IP sample
 * hit still ran them, in an estimated 0 cycles. What no range holds stays
 * in ipc for the IP counts. */
static int attribute_ip_cycles(const struct ep_aggregator *a, Edgeprof__V1__BinaryProfile *bp,
			       const uint32_t *insns, struct ep_ip_cycles *ipc, size_t nipc)
{
	struct ep_cycles_range *cr = malloc((bp->n_ranges + 1) * sizeof(*cr));
	if (!cr)
		return -1;
	for (size_t i = 0; i < bp->n_ranges; i++)
		cr[i] = (struct ep_cycles_range){bp->ranges[i]->start, bp->ranges[i]->end,
						 bp->ranges[i]->count, 0.0};
	if (ep_cycles_attribute(cr, bp->n_ranges, ipc, nipc, a->cycles_scale) != 0) {
		free(cr);
		return -1;
	}
	for (size_t i = 0; i < bp->n_ranges; i++) {
		bp->ranges[i]->cycles = (uint64_t)llround(cr[i].cycles);
		bp->ranges[i]->cycled_instructions = bp->ranges[i]->count * insns[i];
	}
	free(cr);
	return 0;
}

static int collect_ranges(const struct ep_aggregator *a, struct bin_counts *c,
			  const struct ep_decoder *dec, Edgeprof__V1__BinaryProfile *bp,
			  struct ep_ip_cycles *ipc, size_t nipc)
{
	size_t n = 0;
	if (a->range_mode == EP_RANGES_SPLIT) {
		for (uint32_t r = 0; r < c->range_cap; r++)
			n += c->ranges[r] != 0;
	} else {
		for (size_t i = 0; i < c->gap_ranges.capacity; i++)
			if (c->gap_ranges.used[i])
				n += c->lists[c->gap_ranges.values[i]].n;
	}
	bp->ranges = calloc(n ? n : 1, sizeof(*bp->ranges));
	uint32_t *insns = malloc((n ? n : 1) * sizeof(*insns));
	if (!bp->ranges || !insns) {
		free(insns);
		return -1;
	}
	size_t k = 0;
	if (a->range_mode == EP_RANGES_SPLIT) {
		for (uint32_t r = 0; r < c->range_cap; r++) {
			if (!c->ranges[r])
				continue;
			Edgeprof__V1__Range *rg = malloc(sizeof(*rg));
			if (!rg) {
				free(insns);
				return -1;
			}
			edgeprof__v1__range__init(rg);
			const struct ep_range_def *def = ep_decoder_range(dec, r);
			insns[k] = def->insns;
			rg->start = def->start;
			rg->end = def->end;
			rg->count = c->ranges[r];
			rg->cycles = c->range_cycles[r];
			rg->cycled_instructions = c->range_cycled_insns[r];
			bp->ranges[k++] = rg;
			bp->n_ranges = k;
		}
	} else {
		for (size_t i = 0; i < c->gap_ranges.capacity; i++) {
			if (!c->gap_ranges.used[i])
				continue;
			const struct target_list *l = &c->lists[c->gap_ranges.values[i]];
			for (uint32_t j = 0; j < l->n; j++) {
				Edgeprof__V1__Range *rg = malloc(sizeof(*rg));
				if (!rg) {
					free(insns);
					return -1;
				}
				edgeprof__v1__range__init(rg);
				insns[k] = l->items[j].insns;
				rg->start = c->gap_ranges.keys[i];
				rg->end = l->items[j].to;
				rg->count = l->items[j].count;
				rg->cycles = l->items[j].cycles;
				rg->cycled_instructions = l->items[j].cycled_insns;
				bp->ranges[k++] = rg;
				bp->n_ranges = k;
			}
		}
	}
	int rc = a->ip_cycles && nipc ? attribute_ip_cycles(a, bp, insns, ipc, nipc) : 0;
	if (rc == 0 && a->ip_cycles && !nipc)
		for (size_t i = 0; i < bp->n_ranges; i++)
			bp->ranges[i]->cycled_instructions = bp->ranges[i]->count * insns[i];
	free(insns);
	qsort(bp->ranges, bp->n_ranges, sizeof(*bp->ranges), ep_range_cmp);
	return rc;
}

/* The IP samples' cycles per address (agent --cycles), in *out (NULL and
 * 0 when there are none). 0, or -1 when memory runs out. */
static int gather_ip_cycles(const struct bin_counts *c, struct ep_ip_cycles **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	if (!c->ip_cycles.count)
		return 0;
	*out = malloc(c->ip_cycles.count * sizeof(**out));
	if (!*out)
		return -1;
	for (size_t i = 0; i < c->ip_cycles.capacity; i++)
		if (c->ip_cycles.used[i])
			(*out)[(*n)++] =
			    (struct ep_ip_cycles){c->ip_cycles.keys[i], c->ip_cycles.values[i]};
	return 0;
}

static Edgeprof__V1__IpCount *new_ip_count(uint64_t ip, uint64_t count, uint64_t cycles)
{
	Edgeprof__V1__IpCount *c = malloc(sizeof(*c));
	if (c) {
		edgeprof__v1__ip_count__init(c);
		c->ip = ip;
		c->count = count;
		c->cycles = cycles;
	}
	return c;
}

/* The sample IPs, and the cycles of the addresses no range took (ipc, in
 * address order when ranges took some; each scaled like the ranges'). */
static int collect_ips(const struct ep_aggregator *a, struct bin_counts *c,
		       Edgeprof__V1__BinaryProfile *bp, const struct ep_ip_cycles *ipc, size_t nipc)
{
	bp->ips = calloc(c->ips.count + nipc + 1, sizeof(*bp->ips));
	if (!bp->ips)
		return -1;
	for (size_t i = 0; i < c->ips.capacity; i++) {
		if (!c->ips.used[i])
			continue;
		Edgeprof__V1__IpCount *ip = new_ip_count(c->ips.keys[i], c->ips.values[i], 0);
		if (!ip)
			return -1;
		bp->ips[bp->n_ips++] = ip;
	}
	qsort(bp->ips, bp->n_ips, sizeof(*bp->ips), ep_ip_cmp);
	double scale = a->cycles_scale > 0 ? a->cycles_scale : 1.0;
	size_t counted = bp->n_ips;
	for (size_t j = 0; j < nipc; j++) {
		if (!ipc[j].cycles)
			continue;
		uint64_t cycles = (uint64_t)llround((double)ipc[j].cycles * scale);
		Edgeprof__V1__IpCount key = {.ip = ipc[j].ip}, *kp = &key;
		Edgeprof__V1__IpCount **at =
		    bsearch(&kp, bp->ips, counted, sizeof(*bp->ips), ep_ip_cmp);
		if (at) {
			(*at)->cycles = cycles;
			continue;
		}
		if (!(bp->ips[bp->n_ips] = new_ip_count(ipc[j].ip, 0, cycles)))
			return -1;
		bp->n_ips++;
	}
	if (bp->n_ips > counted)
		qsort(bp->ips, bp->n_ips, sizeof(*bp->ips), ep_ip_cmp);
	return 0;
}

/* The functions that the profile's addresses fall in, so exports and reports
 * can name code without the binary at hand. */
static int collect_functions(const struct ep_binary *bin, Edgeprof__V1__BinaryProfile *bp)
{
	struct ep_u64map seen;
	ep_u64map_init(&seen);
	size_t cap = 16;
	bp->functions = calloc(cap, sizeof(*bp->functions));
	if (!bp->functions)
		return -1;
	int rc = 0;
	size_t naddrs = bp->n_edges * 2 + bp->n_ranges + bp->n_ips;
	for (size_t i = 0; i < naddrs && rc == 0; i++) {
		uint64_t addr;
		if (i < bp->n_edges * 2) {
			const Edgeprof__V1__Edge *e = bp->edges[i / 2];
			if (i % 2 == 0 ? e->from_external : e->to_external)
				continue;
			addr = i % 2 == 0 ? e->from : e->to;
		} else if (i < bp->n_edges * 2 + bp->n_ranges) {
			addr = bp->ranges[i - bp->n_edges * 2]->start;
		} else {
			addr = bp->ips[i - bp->n_edges * 2 - bp->n_ranges]->ip;
		}
		const struct ep_symbol *sym = ep_binary_symbol_at(bin, addr);
		if (!sym)
			continue;
		bool inserted;
		if (!ep_u64map_upsert(&seen, sym->start, &inserted)) {
			rc = -1;
			break;
		}
		if (!inserted)
			continue;
		if (bp->n_functions == cap) {
			cap *= 2;
			Edgeprof__V1__Function **f = realloc(bp->functions, cap * sizeof(*f));
			if (!f) {
				rc = -1;
				break;
			}
			bp->functions = f;
		}
		Edgeprof__V1__Function *f = malloc(sizeof(*f));
		if (!f) {
			rc = -1;
			break;
		}
		edgeprof__v1__function__init(f);
		f->name = dup_string(sym->name);
		f->start = sym->start;
		f->size = sym->size;
		f->local_index = sym->local_index;
		bp->functions[bp->n_functions++] = f;
		if (!f->name)
			rc = -1;
	}
	ep_u64map_free(&seen);
	qsort(bp->functions, bp->n_functions, sizeof(*bp->functions), ep_function_cmp);
	return rc;
}

static int collect_segments(const struct ep_binary *bin, Edgeprof__V1__BinaryProfile *bp)
{
	size_t n;
	const struct ep_load_segment *segs = ep_binary_load_segments(bin, &n);
	bp->segments = calloc(n ? n : 1, sizeof(*bp->segments));
	if (!bp->segments)
		return -1;
	for (size_t i = 0; i < n; i++) {
		Edgeprof__V1__LoadSegment *s = malloc(sizeof(*s));
		if (!s)
			return -1;
		edgeprof__v1__load_segment__init(s);
		s->vaddr = segs[i].vaddr;
		s->offset = segs[i].offset;
		s->size = segs[i].filesz;
		bp->segments[bp->n_segments++] = s;
	}
	return 0;
}

static int collect_fallthroughs(struct ep_decoder *dec, const struct ep_binary *bin,
				Edgeprof__V1__BinaryProfile *bp);

static bool counted_any(const struct bin_counts *c)
{
	return c->site_cap || c->range_cap || c->nlists || c->from_external.count;
}

/* bins[index]'s counts into bp: edges, ranges and IPs (each sorted) and
 * samples. */
static int collect_counts(struct ep_aggregator *a, uint32_t index, Edgeprof__V1__BinaryProfile *bp)
{
	struct bin_counts *c = &a->bins[index];
	/* decoding a binary costs memory and time: only for one that has
	 * counted branches or ranges (an IP-only profile has none) */
	struct ep_decoder *dec = counted_any(c) ? ep_decoder_cache_get(a->decoders, index) : NULL;
	bp->samples = c->samples;
	struct edge_vec edges = {0};
	struct ep_ip_cycles *ipc;
	size_t nipc;
	int rc = gather_ip_cycles(c, &ipc, &nipc);
	if (rc == 0 && dec)
		rc = collect_edges(c, dec, &edges);
	bp->edges = edges.items;
	bp->n_edges = edges.n;
	if (rc == 0 && dec)
		rc = collect_ranges(a, c, dec, bp, ipc, nipc);
	if (rc == 0)
		rc = collect_ips(a, c, bp, ipc, nipc);
	free(ipc);
	return rc;
}

/* What comes from the binary and the counts together: names, paths,
 * fall-throughs (with dec, when counted), functions and load segments. */
static int finish_binary(const struct ep_binary *bin, struct ep_decoder *dec,
			 Edgeprof__V1__BinaryProfile *bp)
{
	bp->build_id = dup_string(ep_binary_build_id_hex(bin));
	bp->arch = dup_string(ep_arch_name(ep_binary_arch(bin)));
	const char *recorded = ep_binary_recorded_path(bin);
	const char *path = ep_binary_path(bin);
	/* the agent opens files through /proc/PID/root: a name that dies with
	 * the process, not one to keep */
	bool transient = strncmp(path, "/proc/", 6) == 0 && recorded;
	bool two = recorded && strcmp(recorded, path) != 0 && !transient;
	bp->paths = calloc(2, sizeof(*bp->paths));
	if (bp->paths) {
		bp->paths[bp->n_paths++] = dup_string(two || transient ? recorded : path);
		if (two)
			bp->paths[bp->n_paths++] = dup_string(path);
	}
	int rc = (!bp->build_id || !bp->arch || !bp->paths) ? -1 : 0;
	if (rc == 0 && dec)
		rc = collect_fallthroughs(dec, bin, bp);
	if (rc == 0)
		rc = collect_functions(bin, bp);
	if (rc == 0)
		rc = collect_segments(bin, bp);
	return rc;
}

static Edgeprof__V1__BinaryProfile *new_binary_profile(void)
{
	Edgeprof__V1__BinaryProfile *bp = malloc(sizeof(*bp));
	if (bp)
		edgeprof__v1__binary_profile__init(bp);
	return bp;
}

static Edgeprof__V1__BinaryProfile *build_binary(struct ep_aggregator *a, uint32_t index)
{
	Edgeprof__V1__BinaryProfile *bp = new_binary_profile();
	if (!bp)
		return NULL;
	bool counted = counted_any(&a->bins[index]);
	int rc = collect_counts(a, index, bp);
	if (rc == 0)
		rc = finish_binary(ep_binreg_at(a->binaries, index),
				   counted ? ep_decoder_cache_get(a->decoders, index) : NULL, bp);
	if (rc != 0) {
		protobuf_c_message_free_unpacked(&bp->base, NULL);
		return NULL;
	}
	return bp;
}

/* ---- one profile from several aggregators ---- */

/* Binary index's counts summed over the aggregators that have any, by
 * common/profile/merge (the one place profiles are summed), with no names
 * yet; *counted: whether any counted branches or ranges. NULL when memory
 * runs out. */
static Edgeprof__V1__BinaryProfile *sum_counts(struct ep_aggregator *const *aggs, size_t n,
					       uint32_t index, bool *counted)
{
	struct ep_merge *m = ep_merge_new();
	int rc = m ? 0 : -1;
	*counted = false;
	for (size_t i = 0; i < n && rc == 0; i++) {
		struct ep_aggregator *a = aggs[i];
		if (index >= a->nbins || !a->bins[index].active)
			continue;
		*counted = *counted || counted_any(&a->bins[index]);
		Edgeprof__V1__BinaryProfile *part = new_binary_profile();
		rc = part ? collect_counts(a, index, part) : -1;
		if (rc == 0)
			rc = ep_merge_add(m, 0, part, NULL);
		if (part)
			protobuf_c_message_free_unpacked(&part->base, NULL);
	}
	struct ep_merged out = {0};
	if (rc == 0)
		rc = ep_merge_build(m, &out);
	ep_merge_free(m);
	Edgeprof__V1__BinaryProfile *bp =
	    rc == 0 && out.n == 1 ? ep_merged_take_profile(&out, 0) : NULL;
	ep_merged_free(&out);
	if (bp) {
		/* the parts carry no names: finish_binary() gives them */
		free(bp->build_id);
		free(bp->arch);
		bp->build_id = bp->arch = NULL;
	}
	return bp;
}

static Edgeprof__V1__BinaryProfile *build_merged_binary(struct ep_aggregator *const *aggs, size_t n,
							uint32_t index)
{
	bool counted;
	Edgeprof__V1__BinaryProfile *bp = sum_counts(aggs, n, index, &counted);
	if (!bp)
		return NULL;
	/* the fall-throughs come from all the counts at once: a jump table's
	 * targets seen by one aggregator split another's ranges too */
	if (finish_binary(ep_binreg_at(aggs[0]->binaries, index),
			  counted ? ep_decoder_cache_get(aggs[0]->decoders, index) : NULL,
			  bp) != 0) {
		protobuf_c_message_free_unpacked(&bp->base, NULL);
		return NULL;
	}
	return bp;
}

Edgeprof__V1__Profile *ep_aggregator_build_merged(struct ep_aggregator *const *aggs, size_t n)
{
	size_t nbins = 0;
	for (size_t i = 0; i < n; i++) {
		struct ep_binary_registry *r0 = aggs[0]->binaries, *ri = aggs[i]->binaries;
		if (ep_binreg_count(ri) != ep_binreg_count(r0))
			return NULL;
		for (size_t b = 0; b < ep_binreg_count(r0); b++)
			if (strcmp(ep_binary_path(ep_binreg_at(ri, b)),
				   ep_binary_path(ep_binreg_at(r0, b))) != 0)
				return NULL;
		nbins = aggs[i]->nbins > nbins ? aggs[i]->nbins : nbins;
	}
	Edgeprof__V1__Profile *p = malloc(sizeof(*p));
	if (!p)
		return NULL;
	edgeprof__v1__profile__init(p);
	p->format_version = 1;
	p->binaries = calloc(nbins ? nbins : 1, sizeof(*p->binaries));
	if (!p->binaries) {
		free(p);
		return NULL;
	}
	for (uint32_t b = 0; b < nbins; b++) {
		bool active = false;
		for (size_t i = 0; i < n; i++)
			active = active || (b < aggs[i]->nbins && aggs[i]->bins[b].active);
		if (!active)
			continue;
		Edgeprof__V1__BinaryProfile *bp = build_merged_binary(aggs, n, b);
		if (!bp) {
			protobuf_c_message_free_unpacked(&p->base, NULL);
			return NULL;
		}
		p->binaries[p->n_binaries++] = bp;
	}
	return p;
}

Edgeprof__V1__Profile *ep_aggregator_build(struct ep_aggregator *a)
{
	Edgeprof__V1__Profile *p = malloc(sizeof(*p));
	if (!p)
		return NULL;
	edgeprof__v1__profile__init(p);
	p->format_version = 1;
	p->binaries = calloc(a->nbins ? a->nbins : 1, sizeof(*p->binaries));
	if (!p->binaries) {
		free(p);
		return NULL;
	}
	for (size_t i = 0; i < a->nbins; i++) {
		if (!a->bins[i].active)
			continue;
		Edgeprof__V1__BinaryProfile *bp = build_binary(a, (uint32_t)i);
		if (!bp) {
			protobuf_c_message_free_unpacked(&p->base, NULL);
			return NULL;
		}
		p->binaries[p->n_binaries++] = bp;
	}
	return p;
}

/* ---- fall-throughs between blocks that no branch joins ----
 *
 * BOLT's fdata carries a block's fall-through into the next block only as
 * a line "last instruction of block A -> start of block B"; where B starts
 * at a branch target with no branch before it, nothing the LBR records
 * says so. perf2bolt derives these from the traces and its CFG; the fdata
 * export has neither, so they are made here, where the code is at hand
 * (FINDINGS rule 3): for each range [s, e] and each block start T of its
 * function with s < T <= e, an edge from the start of the instruction
 * before T (BOLT's reader wants an instruction of block A there: T-1 or an
 * earlier block start makes the function stale) to T, counted as often as
 * the range ran. Block starts are the function's direct jump and
 * conditional targets (BOLT starts a block at each, taken in the samples
 * or not) and the sampled targets of its indirect jumps (jump tables);
 * never a return landing site, where BOLT starts no block. */

struct sweep_insn {
	uint64_t addr;
	uint8_t kind;
};

struct sweep {
	struct sweep_insn *insns;
	size_t ninsns, insns_cap;
	uint64_t *targets;
	size_t ntargets, targets_cap;
};

static int push_insn(struct sweep *w, uint64_t addr, uint8_t kind)
{
	if (w->ninsns == w->insns_cap) {
		size_t cap = w->insns_cap ? w->insns_cap * 2 : 256;
		struct sweep_insn *p = realloc(w->insns, cap * sizeof(*p));
		if (!p)
			return -1;
		w->insns = p;
		w->insns_cap = cap;
	}
	w->insns[w->ninsns++] = (struct sweep_insn){addr, kind};
	return 0;
}

static int push_target(struct sweep *w, uint64_t t)
{
	if (w->ntargets == w->targets_cap) {
		size_t cap = w->targets_cap ? w->targets_cap * 2 : 64;
		uint64_t *p = realloc(w->targets, cap * sizeof(*p));
		if (!p)
			return -1;
		w->targets = p;
		w->targets_cap = cap;
	}
	w->targets[w->ntargets++] = t;
	return 0;
}

static int cmp_addr(const void *pa, const void *pb)
{
	uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
	return a < b ? -1 : a > b;
}

/* Index of the first element of a sorted array that is >= key. */
static size_t lower_bound(const uint64_t *v, size_t n, uint64_t key)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid] < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The function's instructions (a linear sweep from its symbol, stopped at
 * bytes that do not decode) and its block starts, sorted and unique. */
static int sweep_function(struct ep_decoder *dec, const struct ep_symbol *sym,
			  const Edgeprof__V1__BinaryProfile *bp, struct sweep *w)
{
	uint64_t end = sym->start + sym->size;
	w->ninsns = w->ntargets = 0;
	for (uint64_t pc = sym->start; pc < end;) {
		struct ep_insn_info info;
		if (!ep_decoder_insn(dec, pc, &info) || info.len == 0)
			break;
		if (push_insn(w, pc, info.kind) != 0)
			return -1;
		if ((info.kind == EP_BRANCH_COND || info.kind == EP_BRANCH_JUMP) &&
		    info.target > sym->start && info.target < end &&
		    push_target(w, info.target) != 0)
			return -1;
		pc += info.len;
	}
	/* edges are sorted by from: the function's own start at lo */
	size_t lo = 0, hi = bp->n_edges;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (bp->edges[mid]->from < sym->start)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo; i < bp->n_edges && bp->edges[i]->from < end; i++) {
		const Edgeprof__V1__Edge *e = bp->edges[i];
		if (e->kind == EDGEPROF__V1__BRANCH_KIND__BRANCH_JUMP_INDIRECT && e->taken &&
		    !e->from_external && !e->to_external && e->to > sym->start && e->to < end &&
		    push_target(w, e->to) != 0)
			return -1;
	}
	if (w->ntargets > 1)
		qsort(w->targets, w->ntargets, sizeof(*w->targets), cmp_addr);
	size_t out = 0;
	for (size_t i = 0; i < w->ntargets; i++)
		if (out == 0 || w->targets[out - 1] != w->targets[i])
			w->targets[out++] = w->targets[i];
	w->ntargets = out;
	return 0;
}

/* The instruction just before addr in the sweep, or NULL when addr is no
 * instruction start of it (the sweep and the branch disagree: no line is
 * better than one BOLT calls stale). */
static const struct sweep_insn *insn_before(const struct sweep *w, uint64_t addr)
{
	size_t lo = 0, hi = w->ninsns;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (w->insns[mid].addr < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || lo == w->ninsns || w->insns[lo].addr != addr)
		return NULL;
	return &w->insns[lo - 1];
}

static bool is_plt_entry(const struct ep_symbol *sym)
{
	size_t len = strlen(sym->name);
	return len > 4 && strcmp(sym->name + len - 4, "@PLT") == 0;
}

/* Ranges [first, last) start in sym: adds its fall-through edges to v. */
static int function_fallthroughs(struct ep_decoder *dec, const struct ep_symbol *sym,
				 const Edgeprof__V1__BinaryProfile *bp, size_t first, size_t last,
				 struct sweep *w, struct edge_vec *v)
{
	if (sweep_function(dec, sym, bp, w) != 0)
		return -1;
	if (w->ntargets == 0)
		return 0;
	uint64_t *counts = calloc(w->ntargets, sizeof(*counts));
	if (!counts)
		return -1;
	for (size_t i = first; i < last; i++) {
		const Edgeprof__V1__Range *r = bp->ranges[i];
		for (size_t k = lower_bound(w->targets, w->ntargets, r->start + 1);
		     k < w->ntargets && w->targets[k] <= r->end; k++)
			counts[k] += r->count;
	}
	int rc = 0;
	for (size_t k = 0; k < w->ntargets && rc == 0; k++) {
		const struct sweep_insn *prev = counts[k] ? insn_before(w, w->targets[k]) : NULL;
		/* a branch before T has its own not-taken edge to T */
		if (!prev || prev->kind != EP_BRANCH_NONE)
			continue;
		Edgeprof__V1__Edge *e = edge_push(v);
		if (!e) {
			rc = -1;
			break;
		}
		e->from = prev->addr;
		e->to = w->targets[k];
		e->taken = false;
		e->count = counts[k];
		e->kind = EDGEPROF__V1__BRANCH_KIND__BRANCH_FALLTHROUGH;
	}
	free(counts);
	return rc;
}

static int collect_fallthroughs(struct ep_decoder *dec, const struct ep_binary *bin,
				Edgeprof__V1__BinaryProfile *bp)
{
	struct sweep w = {0};
	struct edge_vec v = {0};
	int rc = 0;
	/* ranges are sorted by start: each function's are consecutive */
	for (size_t i = 0; i < bp->n_ranges && rc == 0;) {
		const struct ep_symbol *sym = ep_binary_symbol_at(bin, bp->ranges[i]->start);
		size_t j = i + 1;
		while (sym && j < bp->n_ranges && bp->ranges[j]->start - sym->start < sym->size)
			j++;
		if (sym && !is_plt_entry(sym))
			rc = function_fallthroughs(dec, sym, bp, i, j, &w, &v);
		i = j;
	}
	free(w.insns);
	free(w.targets);
	if (rc == 0 && v.n > 0) {
		Edgeprof__V1__Edge **all =
		    realloc(bp->edges, (bp->n_edges + v.n) * sizeof(*bp->edges));
		if (!all) {
			rc = -1;
		} else {
			memcpy(all + bp->n_edges, v.items, v.n * sizeof(*all));
			bp->edges = all;
			bp->n_edges += v.n;
			v.n = 0;
			qsort(bp->edges, bp->n_edges, sizeof(*bp->edges), ep_edge_cmp);
		}
	}
	for (size_t i = 0; i < v.n; i++)
		free(v.items[i]);
	free(v.items);
	return rc;
}
