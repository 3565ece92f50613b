/* SPDX-License-Identifier: Apache-2.0 */
/* The counts as a profile message: one BinaryProfile per binary, each
 * field in the model's order (common/profile/model.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "agent/aggregate/aggregate_internal.h"
#include "agent/aggregate/cycles_attr.h"
#include "common/profile/model.h"

static char *dup_string(const char *s)
{
	return strdup(s ? s : "");
}

Edgeprof__V1__Edge *ep_agg_edge_push(struct ep_agg_edges *v)
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

/* An edge from site s to to, taken or not, count times (mispredicted of
 * them). */
static int push_site_edge(struct ep_agg_edges *v, const struct ep_site *s, uint64_t to, bool taken,
			  bool to_external, uint64_t count, uint64_t mispredicted)
{
	Edgeprof__V1__Edge *e = ep_agg_edge_push(v);
	if (!e)
		return -1;
	e->from = s->addr;
	e->to = to;
	e->to_external = to_external;
	e->taken = taken;
	e->count = count;
	e->mispredicted = mispredicted;
	e->kind = ep_proto_branch_kind(s->kind);
	return 0;
}

static int collect_edges(struct bin_counts *c, const struct ep_decoder *dec, struct ep_agg_edges *v)
{
	uint32_t nsites = ep_decoder_site_count(dec);
	for (uint32_t site = 0; site < c->site_cap && site < nsites; site++) {
		const struct ep_site *s = ep_decoder_site(dec, site);
		if (c->taken[site] && push_site_edge(v, s, s->target, true, false, c->taken[site],
						     c->taken_mispredicted[site]))
			return -1;
		if (c->not_taken[site] &&
		    push_site_edge(v, s, s->fallthrough, false, false, c->not_taken[site], 0))
			return -1;
	}
	for (uint32_t site = 0; site < c->site_cap; site++) {
		if (!c->site_list[site])
			continue;
		const struct ep_site *s = ep_decoder_site(dec, site);
		const struct target_list *l = &c->lists[c->site_list[site] - 1];
		for (uint32_t j = 0; j < l->n; j++)
			if (push_site_edge(v, s, l->items[j].to, true, l->items[j].external,
					   l->items[j].count, l->items[j].mispredicted))
				return -1;
	}
	for (size_t i = 0; i < c->from_external.capacity; i++) {
		if (!c->from_external.used[i])
			continue;
		Edgeprof__V1__Edge *e = ep_agg_edge_push(v);
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

/* A new range appended to bp (which has room for it), its instructions
 * to insns; NULL when memory runs out. */
static Edgeprof__V1__Range *push_range(Edgeprof__V1__BinaryProfile *bp, uint32_t *insns,
				       uint32_t range_insns)
{
	Edgeprof__V1__Range *rg = malloc(sizeof(*rg));
	if (!rg)
		return NULL;
	edgeprof__v1__range__init(rg);
	insns[bp->n_ranges] = range_insns;
	bp->ranges[bp->n_ranges++] = rg;
	return rg;
}

static int collect_ranges(const struct ep_aggregator *a, struct bin_counts *c,
			  const struct ep_decoder *dec, Edgeprof__V1__BinaryProfile *bp,
			  struct ep_ip_cycles *ipc, size_t nipc)
{
	bool split = a->range_mode == EP_RANGES_SPLIT;
	size_t n = 0;
	if (split) {
		for (uint32_t r = 0; r < c->range_cap; r++)
			n += c->ranges[r] != 0;
	} else {
		for (size_t i = 0; i < c->gap_ranges.capacity; i++)
			if (c->gap_ranges.used[i])
				n += c->lists[c->gap_ranges.values[i]].n;
	}
	bp->ranges = calloc(n ? n : 1, sizeof(*bp->ranges));
	uint32_t *insns = malloc((n ? n : 1) * sizeof(*insns));
	int rc = bp->ranges && insns ? 0 : -1;
	for (uint32_t r = 0; split && rc == 0 && r < c->range_cap; r++) {
		if (!c->ranges[r])
			continue;
		const struct ep_range_def *def = ep_decoder_range(dec, r);
		Edgeprof__V1__Range *rg = push_range(bp, insns, def->insns);
		if (!rg) {
			rc = -1;
			break;
		}
		rg->start = def->start;
		rg->end = def->end;
		rg->count = c->ranges[r];
		rg->cycles = c->range_cycles[r];
		rg->cycled_instructions = c->range_cycled_insns[r];
	}
	for (size_t i = 0; !split && rc == 0 && i < c->gap_ranges.capacity; i++) {
		if (!c->gap_ranges.used[i])
			continue;
		const struct target_list *l = &c->lists[c->gap_ranges.values[i]];
		for (uint32_t j = 0; j < l->n && rc == 0; j++) {
			Edgeprof__V1__Range *rg = push_range(bp, insns, l->items[j].insns);
			if (!rg) {
				rc = -1;
				break;
			}
			rg->start = c->gap_ranges.keys[i];
			rg->end = l->items[j].to;
			rg->count = l->items[j].count;
			rg->cycles = l->items[j].cycles;
			rg->cycled_instructions = l->items[j].cycled_insns;
		}
	}
	if (rc == 0 && a->ip_cycles && nipc)
		rc = attribute_ip_cycles(a, bp, insns, ipc, nipc);
	else if (rc == 0 && a->ip_cycles)
		for (size_t i = 0; i < bp->n_ranges; i++)
			bp->ranges[i]->cycled_instructions = bp->ranges[i]->count * insns[i];
	free(insns);
	if (bp->n_ranges > 1)
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
	/* and the callers in this binary of its stacks */
	size_t nframes = 0;
	for (size_t i = 0; i < bp->n_stacks; i++)
		nframes += bp->stacks[i]->n_frames;
	for (size_t i = 0, si = 0, fi = 0; i < naddrs + nframes && rc == 0; i++) {
		uint64_t addr;
		if (i >= naddrs) {
			if (si >= bp->n_stacks)
				break;
			const Edgeprof__V1__StackCount *sc = bp->stacks[si];
			bool here = fi < sc->n_frames &&
				    (!sc->n_frame_binaries || sc->frame_binaries[fi] == 0);
			addr = fi < sc->n_frames ? sc->frames[fi] : 0;
			if (++fi >= sc->n_frames)
				si++, fi = 0;
			if (!here)
				continue;
		} else if (i < bp->n_edges * 2) {
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

/* Whether c counted anything that needs the binary decoded to name it (an
 * IP-only profile has none). */
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
	struct ep_agg_edges edges = {0};
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
		rc = ep_agg_fallthroughs(dec, bin, bp);
	if (rc == 0)
		rc = collect_functions(bin, bp);
	if (rc == 0)
		rc = collect_segments(bin, bp);
	return rc;
}

Edgeprof__V1__BinaryProfile *ep_agg_counts(struct ep_aggregator *a, uint32_t index)
{
	Edgeprof__V1__BinaryProfile *bp = malloc(sizeof(*bp));
	if (bp)
		edgeprof__v1__binary_profile__init(bp);
	if (bp && collect_counts(a, index, bp) != 0) {
		protobuf_c_message_free_unpacked(&bp->base, NULL);
		bp = NULL;
	}
	return bp;
}

/* Binary index's profile from the aggregators that counted it: one's
 * counts as they are, several's summed. NULL when memory runs out. */
static Edgeprof__V1__BinaryProfile *build_binary(struct ep_aggregator *const *aggs, size_t n,
						 uint32_t index)
{
	size_t with = 0, last = 0;
	bool counted = false;
	for (size_t i = 0; i < n; i++) {
		if (!ep_agg_counts_binary(aggs[i], index))
			continue;
		with++;
		last = i;
		counted = counted || counted_any(&aggs[i]->bins[index]);
	}
	Edgeprof__V1__BinaryProfile *bp =
	    with == 1 ? ep_agg_counts(aggs[last], index) : ep_agg_sum_counts(aggs, n, index);
	if (bp && n == 1 && ep_agg_stacks_attach(aggs[0], index, bp) != 0) {
		protobuf_c_message_free_unpacked(&bp->base, NULL);
		bp = NULL;
	}
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

static Edgeprof__V1__Profile *build_profile(struct ep_aggregator *const *aggs, size_t n)
{
	size_t nbins = 0;
	for (size_t i = 0; i < n; i++)
		nbins = aggs[i]->nbins > nbins ? aggs[i]->nbins : nbins;
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
		bool counted = false;
		for (size_t i = 0; i < n; i++)
			counted = counted || ep_agg_counts_binary(aggs[i], b);
		if (!counted)
			continue;
		Edgeprof__V1__BinaryProfile *bp = build_binary(aggs, n, b);
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
	return build_profile(&a, 1);
}

Edgeprof__V1__Profile *ep_aggregator_build_merged(struct ep_aggregator *const *aggs, size_t n)
{
	struct ep_binary_registry *r0 = aggs[0]->binaries;
	for (size_t i = 1; i < n; i++) {
		struct ep_binary_registry *ri = aggs[i]->binaries;
		if (ep_binreg_count(ri) != ep_binreg_count(r0))
			return NULL;
		for (size_t b = 0; b < ep_binreg_count(r0); b++)
			if (strcmp(ep_binary_path(ep_binreg_at(ri, b)),
				   ep_binary_path(ep_binreg_at(r0, b))) != 0)
				return NULL;
	}
	return build_profile(aggs, n);
}
