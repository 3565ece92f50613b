/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/aggregate/aggregate.h"

#include <stdlib.h>
#include <string.h>

#include "common/profile/model.h"
#include "common/util/u64map.h"

/* Targets of one site that has no fixed target (indirect jumps and calls,
 * returns, branches into other binaries). Kept as a short unsorted list:
 * most such sites have a handful of targets. */
struct target_count {
	uint64_t to;
	uint64_t count;
	uint64_t mispredicted;
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
	uint32_t *site_list;	     /* site -> 1 + its index in lists, 0: none */
	struct ep_u64map gap_ranges; /* gap start -> index in lists (to = end) */
	struct target_list *lists;
	size_t nlists, lists_cap;
	struct ep_u64map from_external; /* target vaddr -> count */
	struct ep_u64map ips;		/* sample IP -> count */
};

struct ep_aggregator {
	struct ep_decoder_cache *decoders;
	struct ep_binary_registry *binaries;
	enum ep_range_mode range_mode;
	struct bin_counts *bins;
	size_t nbins;
	uint64_t branches;
	uint64_t ranges;
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
	free(c->site_list);
	for (size_t i = 0; i < c->nlists; i++)
		free(c->lists[i].items);
	free(c->lists);
	ep_u64map_free(&c->gap_ranges);
	ep_u64map_free(&c->from_external);
	ep_u64map_free(&c->ips);
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
		if (c->range_cap)
			memset(c->ranges, 0, (size_t)c->range_cap * sizeof(uint64_t));
		for (size_t j = 0; j < c->nlists; j++)
			free(c->lists[j].items);
		free(c->lists);
		c->lists = NULL;
		c->nlists = c->lists_cap = 0;
		ep_u64map_free(&c->gap_ranges);
		ep_u64map_free(&c->from_external);
		ep_u64map_free(&c->ips);
		c->samples = 0;
		c->active = false;
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
static int ensure_site(struct bin_counts *c, uint32_t site)
{
	if (site < c->site_cap)
		return 0;
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

static int ensure_range(struct bin_counts *c, uint32_t range)
{
	if (range < c->range_cap)
		return 0;
	uint32_t cap = c->range_cap ? c->range_cap : 1024;
	while (cap <= range)
		cap *= 2;
	if (grow_u64(&c->ranges, c->range_cap, cap))
		return -1;
	c->range_cap = cap;
	return 0;
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

static void list_add(struct target_list *l, uint64_t to, bool external, bool mispredicted)
{
	for (uint32_t i = 0; i < l->n; i++) {
		if (l->items[i].to == to && l->items[i].external == external) {
			l->items[i].count++;
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
	    .to = to, .count = 1, .mispredicted = mispredicted, .external = external};
}

static void count_map(struct ep_u64map *map, uint64_t key)
{
	uint64_t *v = ep_u64map_upsert(map, key, NULL);
	if (v)
		(*v)++;
}

static bool kind_is_direct(uint8_t kind)
{
	return kind == EP_BRANCH_COND || kind == EP_BRANCH_JUMP || kind == EP_BRANCH_CALL;
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
		a->branches++;
		if (!b->taken) {
			c->not_taken[b->site]++;
		} else if (kind_is_direct(b->kind) && b->to_bin == b->bin) {
			c->taken[b->site]++;
			c->taken_mispredicted[b->site] += b->mispredicted;
		} else {
			bool external = b->to_bin != b->bin;
			struct target_list *l = site_list_for(c, b->site);
			if (l)
				list_add(l, external ? 0 : b->to_vaddr, external, b->mispredicted);
			if (external && b->to_bin != EP_NO_BIN) {
				struct bin_counts *tc = bin_counts(a, b->to_bin);
				c = &a->bins[b->bin]; /* bin_counts() may have moved it */
				if (tc)
					count_map(&tc->from_external, b->to_vaddr);
			}
		}

		if (k == first && !count_first_range)
			continue;
		if (a->range_mode == EP_RANGES_SPLIT) {
			if (b->range == EP_NO_RANGE || ensure_range(c, b->range))
				continue;
			c->ranges[b->range]++;
			a->ranges++;
		} else if (b->taken && b->range != EP_NO_RANGE) {
			/* whole gap: from where the previous taken branch landed up
			 * to this taken branch */
			const struct ep_site *s =
			    ep_decoder_site(ep_decoder_cache_get(a->decoders, b->bin), b->site);
			struct target_list *l = list_for(c, &c->gap_ranges, b->gap_start);
			if (l)
				list_add(l, s->addr, false, false);
			a->ranges++;
		}
	}
}

void ep_aggregate_sample_ip(struct ep_aggregator *a, uint32_t bin, uint64_t vaddr)
{
	struct bin_counts *c = bin_counts(a, bin);
	if (!c)
		return;
	c->samples++;
	count_map(&c->ips, vaddr);
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

static int collect_ranges(const struct ep_aggregator *a, struct bin_counts *c,
			  const struct ep_decoder *dec, Edgeprof__V1__BinaryProfile *bp)
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
	if (!bp->ranges)
		return -1;
	size_t k = 0;
	if (a->range_mode == EP_RANGES_SPLIT) {
		for (uint32_t r = 0; r < c->range_cap; r++) {
			if (!c->ranges[r])
				continue;
			Edgeprof__V1__Range *rg = malloc(sizeof(*rg));
			if (!rg)
				return -1;
			edgeprof__v1__range__init(rg);
			const struct ep_range_def *def = ep_decoder_range(dec, r);
			rg->start = def->start;
			rg->end = def->end;
			rg->count = c->ranges[r];
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
				if (!rg)
					return -1;
				edgeprof__v1__range__init(rg);
				rg->start = c->gap_ranges.keys[i];
				rg->end = l->items[j].to;
				rg->count = l->items[j].count;
				bp->ranges[k++] = rg;
				bp->n_ranges = k;
			}
		}
	}
	qsort(bp->ranges, bp->n_ranges, sizeof(*bp->ranges), ep_range_cmp);
	return 0;
}

static int collect_ips(struct bin_counts *c, Edgeprof__V1__BinaryProfile *bp)
{
	bp->ips = calloc(c->ips.count ? c->ips.count : 1, sizeof(*bp->ips));
	if (!bp->ips)
		return -1;
	for (size_t i = 0; i < c->ips.capacity; i++) {
		if (!c->ips.used[i])
			continue;
		Edgeprof__V1__IpCount *ip = malloc(sizeof(*ip));
		if (!ip)
			return -1;
		edgeprof__v1__ip_count__init(ip);
		ip->ip = c->ips.keys[i];
		ip->count = c->ips.values[i];
		bp->ips[bp->n_ips++] = ip;
	}
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

static Edgeprof__V1__BinaryProfile *build_binary(struct ep_aggregator *a, uint32_t index)
{
	struct bin_counts *c = &a->bins[index];
	struct ep_binary *bin = ep_binreg_at(a->binaries, index);
	/* decoding a binary costs memory and time: only for one that has
	 * counted branches or ranges (an IP-only profile has none) */
	bool counted = c->site_cap || c->range_cap || c->nlists || c->from_external.count;
	struct ep_decoder *dec = counted ? ep_decoder_cache_get(a->decoders, index) : NULL;
	Edgeprof__V1__BinaryProfile *bp = malloc(sizeof(*bp));
	if (!bp)
		return NULL;
	edgeprof__v1__binary_profile__init(bp);
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
	bp->samples = c->samples;

	struct edge_vec edges = {0};
	int rc = (!bp->build_id || !bp->arch || !bp->paths) ? -1 : 0;
	if (rc == 0 && dec)
		rc = collect_edges(c, dec, &edges);
	bp->edges = edges.items;
	bp->n_edges = edges.n;
	if (rc == 0 && dec)
		rc = collect_ranges(a, c, dec, bp);
	if (rc == 0)
		rc = collect_ips(c, bp);
	if (rc == 0)
		rc = collect_functions(bin, bp);
	if (rc == 0)
		rc = collect_segments(bin, bp);
	if (rc != 0) {
		protobuf_c_message_free_unpacked(&bp->base, NULL);
		return NULL;
	}
	return bp;
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
