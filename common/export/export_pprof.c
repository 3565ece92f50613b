/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pprof's profile format (proto/pprof.proto, google/pprof's profile.proto),
 * gzip-compressed as pprof reads it from a file or over HTTP. What pprof's
 * views read from it (docs/exports.md#pprof):
 *
 *   samples/count     the sample IPs, one frame each (IpCount.count)
 *   cpu/nanoseconds   or cycles/count: the profile's time (cpi.md) where it
 *                     has any, one frame each, at a range's closing branch
 *                     (Range.cycles) and at an IP (IpCount.cycles): a
 *                     function's sum is report --cpi's time of it
 *   branches/count    branch executions (every edge but the fall-throughs,
 *                     which are no branches) at the branch, one frame each:
 *                     a function's sum is the report's branches column
 *   calls/count       each call edge (kinds call and call_indirect) as two
 *                     frames, callee then caller, with its count: the
 *                     weighted call graph of pprof's graph views
 *
 * With agent --stacks a binary's samples/count come as its call stacks
 * (StackCount), all their frames, leaf first, each frame in its own
 * binary's mapping: pprof's -traces, -top -cum and graphs show callers.
 * A stack stops at a frame whose binary has no BinaryProfile here (no
 * mapping to place it in), and at PP_MAX_FRAMES; an IP's samples no stack
 * holds stay one frame.
 *
 * A sample type is there only when some sample has it, samples/count
 * always, first (pprof's convention for the count) and the default.
 * Addresses are the binary's ELF virtual addresses: each binary (one
 * Mapping per build-id) is placed at its link address, its lowest PT_LOAD
 * segment's vaddr at that segment's file offset, so the mapping turns them
 * into file offsets as pprof's own symbolizer does. Locations carry the
 * profile's functions (plain names; the binary's path as Function.filename,
 * BOLT's NAME/N of a local as system_name), so pprof does not symbolize.
 * A BinaryProfile's labels become its samples' string labels.
 *
 * Everything is sized by the profile (already bounded when read). The
 * tables (mappings, functions, strings) are packed first, then each
 * location and sample on its own as the Profile's next field (protobuf
 * appends a repeated field's occurrences wherever they are), straight into
 * zlib's deflate: neither those messages nor the encoding are held whole.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "common/export/export_internal.h"
#include "common/util/u64map.h"
#include "pprof.pb-c.h"

/* the most frames a stack gives a pprof sample (the agent's are <= 127) */
#define PP_MAX_FRAMES 256
#define PP_NO_MAP     UINT32_MAX

enum { V_SAMPLES, V_TIME, V_BRANCHES, V_CALLS, V_TYPES };

/* the strings of the sample types, the labels' keys and "" */
enum {
	S_EMPTY,
	S_SAMPLES,
	S_COUNT,
	S_CPU,
	S_NANOSECONDS,
	S_CYCLES,
	S_BRANCHES,
	S_CALLS,
	S_CONTAINER_ID,
	S_POD,
	S_NAMESPACE,
	S_CGROUP,
	S_PROCESS,
	S_SESSION_ID,
	S_FIXED
};
static const char *const fixed_strings[S_FIXED] = {
    "",	     "samples",	     "count", "cpu",	   "nanoseconds", "cycles",  "branches",
    "calls", "container_id", "pod",   "namespace", "cgroup",	  "process", "session_id",
};
#define N_LABELS 6

/* One sample as the walk over the profile finds it: its frames' addresses
 * (leaf first) in binary bin, and its value of each type. */
struct pp_sample {
	size_t bin;
	uint64_t addr[2];
	size_t naddr;
	/* agent --stacks: a call stack, its frames instead of addr */
	const Edgeprof__V1__StackCount *stack;
	uint64_t v[V_TYPES];
};

/* A location: an address of one mapping, and the function holding it. */
struct pp_loc {
	uint32_t map;
	uint64_t addr;
	long fn; /* index into pp.fns, -1 when in none */
};

struct pp_fn {
	uint32_t map;
	const Edgeprof__V1__Function *f;
	uint64_t id; /* pprof's id, 0 while no location holds it */
};

struct pp {
	const Edgeprof__V1__Profile *p;
	const Edgeprof__V1__BinaryProfile **bins; /* sorted by build-id, path */
	size_t nbins;
	uint32_t *bin_map; /* each bin's mapping (index into maps) */
	size_t *map_bin;   /* each mapping's first bin */
	size_t nmaps;
	int col[V_TYPES]; /* each type's value column, -1 when absent */
	size_t ncols;
	bool has[V_TYPES];
	size_t naddrs;
	struct pp_loc *locs;
	size_t nlocs;
	struct pp_fn *fns;
	size_t nfns;
	size_t *map_fns; /* the functions of mapping m: fns[map_fns[m] .. map_fns[m+1]) */
	/* each bin's stack_binaries as mappings (PP_NO_MAP: not in the export) */
	uint32_t **stack_maps;
};

static const char *path_of(const Edgeprof__V1__BinaryProfile *bp)
{
	return bp->n_paths && bp->paths[0] ? bp->paths[0] : "";
}

static int cmp_bins(const void *pa, const void *pb)
{
	const Edgeprof__V1__BinaryProfile *a = *(const Edgeprof__V1__BinaryProfile *const *)pa;
	const Edgeprof__V1__BinaryProfile *b = *(const Edgeprof__V1__BinaryProfile *const *)pb;
	int c = strcmp(a->build_id, b->build_id);
	return c ? c : strcmp(path_of(a), path_of(b));
}

/* One mapping per build-id (per path for binaries without one): a binary's
 * label sets are BinaryProfiles of their own, on the same code. */
static bool same_binary(const Edgeprof__V1__BinaryProfile *a, const Edgeprof__V1__BinaryProfile *b)
{
	if (strcmp(a->build_id, b->build_id) != 0)
		return false;
	return a->build_id[0] || strcmp(path_of(a), path_of(b)) == 0;
}

static bool is_branch(const Edgeprof__V1__Edge *e)
{
	return e->count && !e->from_external &&
	       e->kind != EDGEPROF__V1__BRANCH_KIND__BRANCH_FALLTHROUGH;
}

/* A call with both ends in the binary: an end elsewhere has no address. */
static bool is_call(const Edgeprof__V1__Edge *e)
{
	return e->count && e->taken && !e->from_external && !e->to_external &&
	       (e->kind == EDGEPROF__V1__BRANCH_KIND__BRANCH_CALL ||
		e->kind == EDGEPROF__V1__BRANCH_KIND__BRANCH_CALL_INDIRECT);
}

typedef int (*pp_visit)(struct pp *x, const struct pp_sample *s, void *ctx);

/* The frames of s (up to PP_MAX_FRAMES) as (mapping, address): how many.
 * A stack ends before a frame of a binary with no mapping here. */
static size_t sample_frames(const struct pp *x, const struct pp_sample *s, uint32_t *map,
			    uint64_t *addr)
{
	if (!s->stack) {
		for (size_t k = 0; k < s->naddr; k++) {
			map[k] = x->bin_map[s->bin];
			addr[k] = s->addr[k];
		}
		return s->naddr;
	}
	const Edgeprof__V1__BinaryProfile *bp = x->bins[s->bin];
	const Edgeprof__V1__StackCount *st = s->stack;
	size_t n = 0;
	for (size_t k = 0; k < st->n_frames && n < PP_MAX_FRAMES; k++) {
		uint32_t other = k < st->n_frame_binaries ? st->frame_binaries[k] : 0;
		uint32_t m = other == 0			     ? x->bin_map[s->bin]
			     : other <= bp->n_stack_binaries ? x->stack_maps[s->bin][other - 1]
							     : PP_NO_MAP;
		if (m == PP_NO_MAP)
			break;
		map[n] = m;
		addr[n++] = st->frames[k];
	}
	return n;
}

/* A binary's call stacks as samples; covered: each leaf IP's samples
 * they hold, which its IpCount gives no more. */
static int walk_stacks(struct pp *x, size_t b, struct ep_u64map *covered, pp_visit visit, void *ctx)
{
	const Edgeprof__V1__BinaryProfile *bp = x->bins[b];
	for (size_t i = 0; i < bp->n_stacks; i++) {
		const Edgeprof__V1__StackCount *st = bp->stacks[i];
		if (!st->n_frames || !st->count)
			continue;
		bool added;
		uint64_t *c = ep_u64map_upsert(covered, st->frames[0], &added);
		if (!c)
			return -1;
		*c += st->count;
		struct pp_sample s = {.bin = b, .stack = st};
		s.v[V_SAMPLES] = st->count;
		if (visit(x, &s, ctx) != 0)
			return -1;
	}
	return 0;
}

/* Every sample of the export, in the same order each time. */
static int walk(struct pp *x, pp_visit visit, void *ctx)
{
	for (size_t b = 0; b < x->nbins; b++) {
		const Edgeprof__V1__BinaryProfile *bp = x->bins[b];
		struct pp_sample s;
		struct ep_u64map covered;
		ep_u64map_init(&covered);
		if (walk_stacks(x, b, &covered, visit, ctx) != 0) {
			ep_u64map_free(&covered);
			return -1;
		}
		for (size_t i = 0; i < bp->n_ips; i++) {
			const Edgeprof__V1__IpCount *ip = bp->ips[i];
			const uint64_t *c = ep_u64map_get(&covered, ip->ip);
			s = (struct pp_sample){.bin = b, .addr = {ip->ip}, .naddr = 1};
			s.v[V_SAMPLES] = c && *c < ip->count ? ip->count - *c : c ? 0 : ip->count;
			s.v[V_TIME] = ip->cycles;
			if ((s.v[V_SAMPLES] || ip->cycles) && visit(x, &s, ctx) != 0) {
				ep_u64map_free(&covered);
				return -1;
			}
		}
		ep_u64map_free(&covered);
		for (size_t i = 0; i < bp->n_ranges; i++) {
			const Edgeprof__V1__Range *r = bp->ranges[i];
			s = (struct pp_sample){.bin = b, .addr = {r->end}, .naddr = 1};
			s.v[V_TIME] = r->cycles;
			if (r->cycles && visit(x, &s, ctx) != 0)
				return -1;
		}
		for (size_t i = 0; i < bp->n_edges; i++) {
			const Edgeprof__V1__Edge *e = bp->edges[i];
			s = (struct pp_sample){.bin = b, .addr = {e->from}, .naddr = 1};
			s.v[V_BRANCHES] = e->count;
			if (is_branch(e) && visit(x, &s, ctx) != 0)
				return -1;
			s = (struct pp_sample){.bin = b, .addr = {e->to, e->from}, .naddr = 2};
			s.v[V_CALLS] = e->count;
			if (is_call(e) && visit(x, &s, ctx) != 0)
				return -1;
		}
	}
	return 0;
}

static int count_sample(struct pp *x, const struct pp_sample *s, void *ctx)
{
	(void)ctx;
	x->naddrs += s->stack ? s->stack->n_frames : s->naddr;
	for (int t = 0; t < V_TYPES; t++)
		x->has[t] |= s->v[t] != 0;
	return 0;
}

static int add_locs(struct pp *x, const struct pp_sample *s, void *ctx)
{
	(void)ctx;
	uint32_t map[PP_MAX_FRAMES];
	uint64_t addr[PP_MAX_FRAMES];
	size_t n = sample_frames(x, s, map, addr);
	for (size_t i = 0; i < n; i++)
		x->locs[x->nlocs++] = (struct pp_loc){map[i], addr[i], -1};
	return 0;
}

static int cmp_locs(const void *pa, const void *pb)
{
	const struct pp_loc *a = pa, *b = pb;
	if (a->map != b->map)
		return a->map < b->map ? -1 : 1;
	return a->addr < b->addr ? -1 : a->addr > b->addr;
}

/* The same order as ep_func_index (start, size, name), per mapping, so a
 * function is found for an address as every other format finds it. */
static int cmp_fns(const void *pa, const void *pb)
{
	const struct pp_fn *a = pa, *b = pb;
	if (a->map != b->map)
		return a->map < b->map ? -1 : 1;
	if (a->f->start != b->f->start)
		return a->f->start < b->f->start ? -1 : 1;
	if (a->f->size != b->f->size)
		return a->f->size < b->f->size ? -1 : 1;
	int c = strcmp(a->f->name, b->f->name);
	if (c)
		return c;
	return a->f->local_index < b->f->local_index ? -1 : a->f->local_index > b->f->local_index;
}

/* Index into x->locs of (map, addr); every sample's address is there. */
static size_t find_loc(const struct pp *x, uint32_t map, uint64_t addr)
{
	size_t lo = 0, hi = x->nlocs;
	struct pp_loc key = {map, addr, -1};
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (cmp_locs(&x->locs[mid], &key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* ep_func_index_find within one mapping's functions. */
static long find_fn(const struct pp *x, uint32_t map, uint64_t addr)
{
	size_t first = x->map_fns[map], lo = first, hi = x->map_fns[map + 1];
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (x->fns[mid].f->start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == first)
		return -1;
	const Edgeprof__V1__Function *f = x->fns[lo - 1].f;
	return addr - f->start < (f->size ? f->size : 1) ? (long)(lo - 1) : -1;
}

/* Each bin's stack_binaries found among the mappings: by build-id, or by
 * path for one without. */
static int plan_stack_maps(struct pp *x)
{
	x->stack_maps = calloc(x->nbins + 1, sizeof(*x->stack_maps));
	if (!x->stack_maps)
		return -1;
	for (size_t b = 0; b < x->nbins; b++) {
		const Edgeprof__V1__BinaryProfile *bp = x->bins[b];
		if (!bp->n_stack_binaries)
			continue;
		x->stack_maps[b] = malloc(bp->n_stack_binaries * sizeof(**x->stack_maps));
		if (!x->stack_maps[b])
			return -1;
		for (size_t k = 0; k < bp->n_stack_binaries; k++) {
			const char *name = bp->stack_binaries[k];
			x->stack_maps[b][k] = PP_NO_MAP;
			for (size_t o = 0; o < x->nbins && name[0]; o++) {
				const Edgeprof__V1__BinaryProfile *ob = x->bins[o];
				if (strcmp(ob->build_id[0] ? ob->build_id : path_of(ob), name) ==
				    0) {
					x->stack_maps[b][k] = x->bin_map[o];
					break;
				}
			}
		}
	}
	return 0;
}

/* The bins grouped into mappings, the sample types, the locations (unique,
 * sorted) and the functions (sorted per mapping). */
static int plan(struct pp *x)
{
	qsort(x->bins, x->nbins, sizeof(*x->bins), cmp_bins);
	x->bin_map = calloc(x->nbins + 1, sizeof(*x->bin_map));
	x->map_bin = calloc(x->nbins + 1, sizeof(*x->map_bin));
	if (!x->bin_map || !x->map_bin)
		return -1;
	size_t nfns = 0;
	for (size_t b = 0; b < x->nbins; b++) {
		if (b == 0 || !same_binary(x->bins[b - 1], x->bins[b]))
			x->map_bin[x->nmaps++] = b;
		x->bin_map[b] = (uint32_t)(x->nmaps - 1);
		nfns += x->bins[b]->n_functions;
	}
	if (plan_stack_maps(x) != 0 || walk(x, count_sample, NULL) != 0)
		return -1;
	x->has[V_SAMPLES] = true;
	for (int t = 0; t < V_TYPES; t++)
		x->col[t] = x->has[t] ? (int)x->ncols++ : -1;

	x->locs = calloc(x->naddrs + 1, sizeof(*x->locs));
	x->fns = calloc(nfns + 1, sizeof(*x->fns));
	x->map_fns = calloc(x->nmaps + 1, sizeof(*x->map_fns));
	if (!x->locs || !x->fns || !x->map_fns)
		return -1;
	if (walk(x, add_locs, NULL) != 0)
		return -1;
	qsort(x->locs, x->nlocs, sizeof(*x->locs), cmp_locs);
	size_t n = 0;
	for (size_t i = 0; i < x->nlocs; i++)
		if (n == 0 || cmp_locs(&x->locs[n - 1], &x->locs[i]) != 0)
			x->locs[n++] = x->locs[i];
	x->nlocs = n;

	for (size_t b = 0; b < x->nbins; b++)
		for (size_t i = 0; i < x->bins[b]->n_functions; i++)
			x->fns[x->nfns++] =
			    (struct pp_fn){x->bin_map[b], x->bins[b]->functions[i], 0};
	qsort(x->fns, x->nfns, sizeof(*x->fns), cmp_fns);
	n = 0; /* the label sets of one binary list the same functions */
	for (size_t i = 0; i < x->nfns; i++)
		if (n == 0 || cmp_fns(&x->fns[n - 1], &x->fns[i]) != 0)
			x->fns[n++] = x->fns[i];
	x->nfns = n;
	for (size_t i = 0, m = 0; m <= x->nmaps; m++) {
		while (i < x->nfns && x->fns[i].map < m)
			i++;
		x->map_fns[m] = i;
	}
	uint64_t id = 0;
	for (size_t i = 0; i < x->nlocs; i++) {
		struct pp_loc *l = &x->locs[i];
		l->fn = find_fn(x, l->map, l->addr);
		if (l->fn >= 0 && !x->fns[l->fn].id)
			x->fns[l->fn].id = ++id;
	}
	return 0;
}

static void plan_free(struct pp *x)
{
	for (size_t b = 0; x->stack_maps && b < x->nbins; b++)
		free(x->stack_maps[b]);
	free(x->stack_maps);
	free(x->bin_map);
	free(x->map_bin);
	free(x->locs);
	free(x->fns);
	free(x->map_fns);
}

/* The messages, all in arrays sized by the plan. */
/* The profile's tables: mappings, functions, strings, the labels. The
 * locations and samples are not held: each is packed on its own as the
 * message's next field (protobuf appends a repeated field's occurrences,
 * wherever they are), so memory holds the tables and the plan only. */
struct pp_msgs {
	Perftools__Profiles__Profile prof;
	Perftools__Profiles__ValueType types[V_TYPES], *type_ptrs[V_TYPES];
	Perftools__Profiles__Function *fns, **fn_ptrs;
	Perftools__Profiles__Mapping *maps, **map_ptrs;
	Perftools__Profiles__Label *labels, **label_ptrs; /* N_LABELS per bin */
	size_t *nlabels;				  /* per bin */
	char **strings;
	size_t nstrings;
	char **owned; /* the strings made here (NAME/N) */
	size_t nowned;
};

static int64_t add_string(struct pp_msgs *m, const char *s)
{
	m->strings[m->nstrings] = (char *)s;
	return (int64_t)m->nstrings++;
}

static int64_t clamp(uint64_t v)
{
	return v > INT64_MAX ? INT64_MAX : (int64_t)v;
}

static void add_label(struct pp_msgs *m, size_t bin, int64_t key, const char *value)
{
	if (!value || !*value)
		return;
	Perftools__Profiles__Label *l = &m->labels[bin * N_LABELS + m->nlabels[bin]];
	perftools__profiles__label__init(l);
	l->key = key;
	l->str = add_string(m, value);
	m->label_ptrs[bin * N_LABELS + m->nlabels[bin]++] = l;
}

/* The mapping's bounds: the binary at its link address (the lowest
 * segment's vaddr at its file offset); without segments (an old profile),
 * from 0 to past its highest address. */
static void map_bounds(const struct pp *x, uint32_t m, Perftools__Profiles__Mapping *out)
{
	const Edgeprof__V1__BinaryProfile *bp = x->bins[x->map_bin[m]];
	uint64_t lo = UINT64_MAX, hi = 0, off = 0;
	for (size_t i = 0; i < bp->n_segments; i++) {
		const Edgeprof__V1__LoadSegment *s = bp->segments[i];
		if (s->vaddr < lo) {
			lo = s->vaddr;
			off = s->offset;
		}
		uint64_t end = s->vaddr + s->size < s->vaddr ? UINT64_MAX : s->vaddr + s->size;
		hi = end > hi ? end : hi;
	}
	if (!bp->n_segments) {
		size_t last = find_loc(x, m + 1, 0);
		lo = 0;
		hi = last > 0 && x->locs[last - 1].map == m ? x->locs[last - 1].addr + 1 : 0;
	}
	out->memory_start = lo;
	out->memory_limit = hi;
	out->file_offset = off;
}

static int build_tables(struct pp *x, struct pp_msgs *m)
{
	for (uint32_t i = 0; i < x->nmaps; i++) {
		const Edgeprof__V1__BinaryProfile *bp = x->bins[x->map_bin[i]];
		Perftools__Profiles__Mapping *o = &m->maps[i];
		perftools__profiles__mapping__init(o);
		o->id = i + 1;
		map_bounds(x, i, o);
		o->filename = add_string(m, path_of(bp));
		o->build_id = add_string(m, bp->build_id);
		o->has_functions = x->map_fns[i + 1] > x->map_fns[i];
		m->map_ptrs[i] = o;
	}
	size_t nfn = 0;
	for (size_t i = 0; i < x->nfns; i++) {
		const struct pp_fn *f = &x->fns[i];
		if (!f->id)
			continue;
		Perftools__Profiles__Function *o = &m->fns[f->id - 1];
		perftools__profiles__function__init(o);
		o->id = f->id;
		o->name = o->system_name = add_string(m, f->f->name);
		o->filename = m->maps[f->map].filename;
		/* BOLT's name for a local, as the fdata export writes it */
		if (f->f->local_index) {
			char *s = NULL;
			if (asprintf(&s, "%s/%u", f->f->name, f->f->local_index) < 0)
				return -1;
			m->owned[m->nowned++] = s;
			o->system_name = add_string(m, s);
		}
		m->fn_ptrs[f->id - 1] = o;
		nfn++;
	}
	m->prof.n_function = nfn;
	for (size_t b = 0; b < x->nbins; b++) {
		const Edgeprof__V1__Labels *l = x->bins[b]->labels;
		if (!l)
			continue;
		add_label(m, b, S_CONTAINER_ID, l->container_id);
		add_label(m, b, S_POD, l->pod);
		add_label(m, b, S_NAMESPACE, l->namespace_);
		add_label(m, b, S_CGROUP, l->cgroup);
		add_label(m, b, S_PROCESS, l->process);
		add_label(m, b, S_SESSION_ID, l->session_id);
	}
	return 0;
}

static void msgs_free(struct pp_msgs *m)
{
	free(m->fns);
	free(m->fn_ptrs);
	free(m->maps);
	free(m->map_ptrs);
	free(m->labels);
	free(m->label_ptrs);
	free(m->nlabels);
	for (size_t i = 0; m->owned && i < m->nowned; i++)
		free(m->owned[i]);
	free(m->owned);
	free(m->strings);
}

static int build(struct pp *x, struct pp_msgs *m)
{
	size_t nf = x->nfns + 1, nm = x->nmaps + 1, nb = x->nbins + 1;
	m->fns = calloc(nf, sizeof(*m->fns));
	m->fn_ptrs = calloc(nf, sizeof(*m->fn_ptrs));
	m->maps = calloc(nm, sizeof(*m->maps));
	m->map_ptrs = calloc(nm, sizeof(*m->map_ptrs));
	m->labels = calloc(nb, N_LABELS * sizeof(*m->labels));
	m->label_ptrs = calloc(nb, N_LABELS * sizeof(*m->label_ptrs));
	m->nlabels = calloc(nb, sizeof(*m->nlabels));
	m->owned = calloc(nf, sizeof(*m->owned));
	/* the fixed ones, a path and a build-id per mapping, a name and a
	 * system name per function, the labels' values */
	m->strings = calloc(S_FIXED + 2 * nm + 2 * nf + N_LABELS * nb, sizeof(*m->strings));
	if (!m->fns || !m->fn_ptrs || !m->maps || !m->map_ptrs || !m->labels || !m->label_ptrs ||
	    !m->nlabels || !m->owned || !m->strings)
		return -1;
	for (int i = 0; i < S_FIXED; i++)
		add_string(m, fixed_strings[i]);
	if (build_tables(x, m) != 0)
		return -1;

	Perftools__Profiles__Profile *p = &m->prof;
	static const int64_t type_names[V_TYPES] = {S_SAMPLES, S_CPU, S_BRANCHES, S_CALLS};
	const Edgeprof__V1__SamplingConfig *c = x->p->config;
	bool ns_time = c && c->cycles_unit && strcmp(c->cycles_unit, "ns") == 0;
	for (int t = 0; t < V_TYPES; t++) {
		if (x->col[t] < 0)
			continue;
		Perftools__Profiles__ValueType *v = &m->types[x->col[t]];
		perftools__profiles__value_type__init(v);
		v->type = type_names[t];
		v->unit = S_COUNT;
		if (t == V_TIME) {
			v->type = ns_time ? S_CPU : S_CYCLES;
			v->unit = ns_time ? S_NANOSECONDS : S_COUNT;
		}
		m->type_ptrs[x->col[t]] = v;
	}
	p->sample_type = m->type_ptrs;
	p->n_sample_type = x->ncols;
	/* pprof shows the last type unless told: the samples are the count */
	p->default_sample_type = S_SAMPLES;
	p->mapping = m->map_ptrs;
	p->n_mapping = x->nmaps;
	p->function = m->fn_ptrs;
	p->string_table = m->strings;
	p->n_string_table = m->nstrings;
	return 0;
}

/* A ProtobufCBuffer that deflates what protobuf-c packs into out, gzip's
 * framing (what pprof expects on disk), a chunk at a time. */
struct gz_sink {
	ProtobufCBuffer base;
	z_stream z;
	FILE *out;
	bool failed;
	uint8_t chunk[1 << 16];
};

/* Deflates z's input with flush, writing every chunk made: all the input
 * (Z_NO_FLUSH), or to the stream's end (Z_FINISH). */
static int gz_run(struct gz_sink *g, int flush)
{
	int rc;
	do {
		g->z.next_out = g->chunk;
		g->z.avail_out = sizeof(g->chunk);
		rc = deflate(&g->z, flush);
		if (rc == Z_STREAM_ERROR)
			return -1;
		size_t n = sizeof(g->chunk) - g->z.avail_out;
		if (n && fwrite(g->chunk, 1, n, g->out) != n)
			return -1;
	} while (rc != Z_STREAM_END && (g->z.avail_out == 0 || flush == Z_FINISH));
	return 0;
}

static void gz_append(ProtobufCBuffer *buffer, size_t len, const uint8_t *data)
{
	struct gz_sink *g = (struct gz_sink *)buffer;
	while (len && !g->failed) {
		uInt n = len > UINT_MAX ? UINT_MAX : (uInt)len;
		g->z.next_in = (Bytef *)data;
		g->z.avail_in = n;
		g->failed = gz_run(g, Z_NO_FLUSH) != 0;
		data += n;
		len -= n;
	}
}

static size_t put_varint(uint8_t *b, uint64_t v)
{
	size_t n = 0;
	for (; v > 0x7f; v >>= 7)
		b[n++] = (uint8_t)((v & 0x7f) | 0x80);
	b[n++] = (uint8_t)v;
	return n;
}

/* A length-delimited field's key and length: what precedes a message
 * packed as field `field` of the Profile. */
static void put_field(struct gz_sink *g, uint32_t field, size_t len)
{
	uint8_t b[2 * 10];
	size_t n = put_varint(b, (uint64_t)field << 3 | 2);
	n += put_varint(b + n, len);
	gz_append(&g->base, n, b);
}

/* Profile.location (4), one at a time. */
static void put_locations(const struct pp *x, struct gz_sink *g)
{
	for (size_t i = 0; i < x->nlocs && !g->failed; i++) {
		Perftools__Profiles__Location o;
		Perftools__Profiles__Line line, *line_ptr = &line;
		perftools__profiles__location__init(&o);
		o.id = i + 1;
		o.mapping_id = x->locs[i].map + 1;
		o.address = x->locs[i].addr;
		if (x->locs[i].fn >= 0) {
			perftools__profiles__line__init(&line);
			line.function_id = x->fns[x->locs[i].fn].id;
			o.line = &line_ptr;
			o.n_line = 1;
		}
		put_field(g, 4, perftools__profiles__location__get_packed_size(&o));
		perftools__profiles__location__pack_to_buffer(&o, &g->base);
	}
}

struct put_ctx {
	struct gz_sink *g;
	const struct pp_msgs *m;
};

/* Profile.sample (2), as the walk finds it. */
static int put_sample(struct pp *x, const struct pp_sample *s, void *ctx)
{
	struct put_ctx *c = ctx;
	int64_t values[V_TYPES];
	uint64_t ids[PP_MAX_FRAMES];
	uint32_t map[PP_MAX_FRAMES];
	uint64_t addr[PP_MAX_FRAMES];
	size_t n = sample_frames(x, s, map, addr);
	Perftools__Profiles__Sample o;
	perftools__profiles__sample__init(&o);
	o.value = values;
	o.n_value = x->ncols;
	for (int t = 0; t < V_TYPES; t++)
		if (x->col[t] >= 0)
			values[x->col[t]] = clamp(s->v[t]);
	o.location_id = ids;
	for (size_t k = 0; k < n; k++)
		ids[o.n_location_id++] = find_loc(x, map[k], addr[k]) + 1;
	o.label = &c->m->label_ptrs[s->bin * N_LABELS];
	o.n_label = c->m->nlabels[s->bin];
	put_field(c->g, 2, perftools__profiles__sample__get_packed_size(&o));
	perftools__profiles__sample__pack_to_buffer(&o, &c->g->base);
	return c->g->failed ? -1 : 0;
}

/* The tables, then the locations and samples, deflated into out. */
static int write_gz(struct pp *x, const struct pp_msgs *m, FILE *out, char *err, size_t errlen)
{
	struct gz_sink *g = calloc(1, sizeof(*g));
	if (!g)
		return ep_export_oom(err, errlen);
	g->base.append = gz_append;
	g->out = out;
	/* 15 + 16: a gzip header and trailer around the deflate stream */
	if (deflateInit2(&g->z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
			 Z_DEFAULT_STRATEGY) != Z_OK) {
		free(g);
		return ep_export_oom(err, errlen);
	}
	perftools__profiles__profile__pack_to_buffer(&m->prof, &g->base);
	put_locations(x, g);
	struct put_ctx c = {g, m};
	walk(x, put_sample, &c);
	if (!g->failed)
		g->failed = gz_run(g, Z_FINISH) != 0;
	deflateEnd(&g->z);
	bool failed = g->failed;
	free(g);
	/* a write that failed is said by ferror(out); else it was zlib */
	if (failed && !ferror(out)) {
		snprintf(err, errlen, "export: zlib: compression failed");
		return -1;
	}
	return ep_export_finish(out, err, errlen);
}

int ep_export_pprof(const Edgeprof__V1__Profile *p, const Edgeprof__V1__BinaryProfile *only,
		    FILE *out, char *err, size_t errlen)
{
	struct pp x = {.p = p, .nbins = only ? 1 : p->n_binaries};
	x.bins = malloc((x.nbins + 1) * sizeof(*x.bins));
	if (!x.bins)
		return ep_export_oom(err, errlen);
	for (size_t i = 0; i < x.nbins; i++)
		x.bins[i] = only ? only : p->binaries[i];
	struct pp_msgs m = {0};
	perftools__profiles__profile__init(&m.prof);
	int rc = plan(&x) == 0 && build(&x, &m) == 0 ? 0 : ep_export_oom(err, errlen);
	if (rc == 0)
		rc = write_gz(&x, &m, out, err, errlen);
	msgs_free(&m);
	plan_free(&x);
	free(x.bins);
	return rc;
}
