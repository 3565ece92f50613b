/* SPDX-License-Identifier: Apache-2.0 */
#include "common/profile/merge.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/profile/model.h"
#include "common/util/sat.h"
#include "common/util/u64map.h"

enum { EDGE_TAKEN = 1, EDGE_FROM_EXTERNAL = 2, EDGE_TO_EXTERNAL = 4 };
/* LABEL_SESSION: a session's counts are sampled at their own rate, so a
 * slice of them must never absorb continuous counts (profile.proto). */
enum {
	LABEL_CONTAINER,
	LABEL_POD,
	LABEL_NAMESPACE,
	LABEL_CGROUP,
	LABEL_PROCESS,
	LABEL_SESSION,
	NLABELS
};

struct edge_sum {
	uint64_t from, to, count, mispredicted;
	uint8_t flags;
	uint8_t kind;
};

struct range_sum {
	uint64_t start, end, count, cycles, cycled_instructions;
};

struct function_info {
	char *name;
	uint64_t start, size;
	uint32_t local_index;
};

struct segment_info {
	uint64_t vaddr, offset, size;
};

/* A growable array of fixed-size items with a hash index over their keys
 * (hash -> index; collisions probe hash + 1, the full key is compared). */
struct keyed_vec {
	void *items;
	size_t n, cap, item_size;
	struct ep_u64map index;
};

struct slice {
	int64_t bucket;
	char *build_id, *arch;
	char *labels[NLABELS];
	char **paths;
	size_t npaths;
	uint64_t samples;
	struct keyed_vec edges, ranges, functions, segments;
	struct ep_u64map ips;
	/* IP -> IpCount.cycles (agent --cycles), for the IPs that have any */
	struct ep_u64map ip_cycles;
	/* the cycles are cpu-clock nanoseconds (ep_merge_add_unit) */
	bool ns;
};

struct ep_merge {
	struct slice **slices;
	size_t n, cap;
	struct ep_u64map index; /* slice key hash -> index */
	size_t rows;
};

static const char *str_or_empty(const char *s)
{
	return s ? s : "";
}

static const char *label_value(const Edgeprof__V1__Labels *l, int i)
{
	if (!l)
		return "";
	switch (i) {
	case LABEL_CONTAINER:
		return str_or_empty(l->container_id);
	case LABEL_POD:
		return str_or_empty(l->pod);
	case LABEL_NAMESPACE:
		return str_or_empty(l->namespace_);
	case LABEL_CGROUP:
		return str_or_empty(l->cgroup);
	case LABEL_PROCESS:
		return str_or_empty(l->process);
	default:
		return str_or_empty(l->session_id);
	}
}

static uint64_t mix(uint64_t h, uint64_t v)
{
	return ep_hash_u64(h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)));
}

static uint64_t mix_str(uint64_t h, const char *s)
{
	return mix(h, ep_hash_bytes(s, strlen(s)));
}

static void keyed_vec_init(struct keyed_vec *v, size_t item_size)
{
	memset(v, 0, sizeof(*v));
	v->item_size = item_size;
}

static void keyed_vec_free(struct keyed_vec *v)
{
	free(v->items);
	ep_u64map_free(&v->index);
}

/* Finds the item whose key matches (same(item, key)), or appends a zeroed
 * one. NULL when memory runs out. */
static void *keyed_vec_find_or_add(struct keyed_vec *v, uint64_t hash,
				   bool (*same)(const void *item, const void *key), const void *key,
				   bool *added)
{
	*added = false;
	for (uint64_t h = hash;; h++) {
		uint64_t *slot = ep_u64map_get(&v->index, h);
		if (!slot)
			break;
		void *item = (char *)v->items + *slot * v->item_size;
		if (same(item, key))
			return item;
	}
	if (v->n == v->cap) {
		size_t cap = v->cap ? v->cap * 2 : 16;
		void *items = realloc(v->items, cap * v->item_size);
		if (!items)
			return NULL;
		v->items = items;
		v->cap = cap;
	}
	uint64_t h = hash;
	while (ep_u64map_get(&v->index, h))
		h++;
	uint64_t *slot = ep_u64map_upsert(&v->index, h, NULL);
	if (!slot)
		return NULL;
	*slot = v->n;
	void *item = (char *)v->items + v->n * v->item_size;
	memset(item, 0, v->item_size);
	v->n++;
	*added = true;
	return item;
}

static bool same_edge(const void *item, const void *key)
{
	const struct edge_sum *a = item, *b = key;
	return a->from == b->from && a->to == b->to && a->flags == b->flags;
}

static bool same_range(const void *item, const void *key)
{
	const struct range_sum *a = item, *b = key;
	return a->start == b->start && a->end == b->end;
}

static bool same_function(const void *item, const void *key)
{
	const struct function_info *a = item, *b = key;
	return a->start == b->start && strcmp(a->name, b->name) == 0;
}

static bool same_segment(const void *item, const void *key)
{
	const struct segment_info *a = item, *b = key;
	return a->vaddr == b->vaddr && a->offset == b->offset && a->size == b->size;
}

struct ep_merge *ep_merge_new(void)
{
	return calloc(1, sizeof(struct ep_merge));
}

static void slice_free(struct slice *s)
{
	if (!s)
		return;
	free(s->build_id);
	free(s->arch);
	for (int i = 0; i < NLABELS; i++)
		free(s->labels[i]);
	for (size_t i = 0; i < s->npaths; i++)
		free(s->paths[i]);
	free(s->paths);
	keyed_vec_free(&s->edges);
	keyed_vec_free(&s->ranges);
	for (size_t i = 0; i < s->functions.n; i++)
		free(((struct function_info *)s->functions.items)[i].name);
	keyed_vec_free(&s->functions);
	keyed_vec_free(&s->segments);
	ep_u64map_free(&s->ips);
	ep_u64map_free(&s->ip_cycles);
	free(s);
}

void ep_merge_clear(struct ep_merge *m)
{
	for (size_t i = 0; i < m->n; i++)
		slice_free(m->slices[i]);
	m->n = 0;
	m->rows = 0;
	ep_u64map_free(&m->index);
}

void ep_merge_free(struct ep_merge *m)
{
	if (!m)
		return;
	ep_merge_clear(m);
	free(m->slices);
	free(m);
}

size_t ep_merge_rows(const struct ep_merge *m)
{
	return m->rows;
}

size_t ep_merge_slices(const struct ep_merge *m)
{
	return m->n;
}

static bool slice_matches(const struct slice *s, int64_t bucket, const char *build_id,
			  const Edgeprof__V1__Labels *labels, bool ns)
{
	if (s->bucket != bucket || s->ns != ns || strcmp(s->build_id, build_id) != 0)
		return false;
	for (int i = 0; i < NLABELS; i++)
		if (strcmp(s->labels[i], label_value(labels, i)) != 0)
			return false;
	return true;
}

static struct slice *find_slice(struct ep_merge *m, int64_t bucket,
				const Edgeprof__V1__BinaryProfile *bp,
				const Edgeprof__V1__Labels *labels, bool ns)
{
	const char *build_id = str_or_empty(bp->build_id);
	uint64_t hash = mix_str(mix(ns, (uint64_t)bucket), build_id);
	for (int i = 0; i < NLABELS; i++)
		hash = mix_str(hash, label_value(labels, i));
	for (uint64_t h = hash;; h++) {
		uint64_t *slot = ep_u64map_get(&m->index, h);
		if (!slot)
			break;
		if (slice_matches(m->slices[*slot], bucket, build_id, labels, ns))
			return m->slices[*slot];
	}
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 8;
		struct slice **slices = realloc(m->slices, cap * sizeof(*slices));
		if (!slices)
			return NULL;
		m->slices = slices;
		m->cap = cap;
	}
	struct slice *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->bucket = bucket;
	s->ns = ns;
	s->build_id = strdup(build_id);
	s->arch = strdup(str_or_empty(bp->arch));
	bool ok = s->build_id && s->arch;
	for (int i = 0; i < NLABELS; i++) {
		s->labels[i] = strdup(label_value(labels, i));
		ok = ok && s->labels[i];
	}
	keyed_vec_init(&s->edges, sizeof(struct edge_sum));
	keyed_vec_init(&s->ranges, sizeof(struct range_sum));
	keyed_vec_init(&s->functions, sizeof(struct function_info));
	keyed_vec_init(&s->segments, sizeof(struct segment_info));
	uint64_t h = hash;
	while (ok && ep_u64map_get(&m->index, h))
		h++;
	uint64_t *slot = ok ? ep_u64map_upsert(&m->index, h, NULL) : NULL;
	if (!slot) {
		slice_free(s);
		return NULL;
	}
	*slot = m->n;
	m->slices[m->n++] = s;
	return s;
}

static int add_path(struct slice *s, const char *path)
{
	for (size_t i = 0; i < s->npaths; i++)
		if (strcmp(s->paths[i], path) == 0)
			return 0;
	char **paths = realloc(s->paths, (s->npaths + 1) * sizeof(*paths));
	if (!paths)
		return -1;
	s->paths = paths;
	s->paths[s->npaths] = strdup(path);
	if (!s->paths[s->npaths])
		return -1;
	s->npaths++;
	return 0;
}

int ep_merge_add(struct ep_merge *m, int64_t bucket, const Edgeprof__V1__BinaryProfile *bp,
		 const Edgeprof__V1__Labels *labels)
{
	return ep_merge_add_unit(m, bucket, bp, labels, false);
}

int ep_merge_add_unit(struct ep_merge *m, int64_t bucket, const Edgeprof__V1__BinaryProfile *bp,
		      const Edgeprof__V1__Labels *labels, bool ns)
{
	struct slice *s = find_slice(m, bucket, bp, labels, ns);
	if (!s)
		return -1;
	ep_add_sat(&s->samples, bp->samples);
	if (!s->arch[0] && bp->arch && bp->arch[0]) {
		char *arch = strdup(bp->arch);
		if (!arch)
			return -1;
		free(s->arch);
		s->arch = arch;
	}
	for (size_t i = 0; i < bp->n_paths; i++)
		if (add_path(s, bp->paths[i]) != 0)
			return -1;
	bool added;
	for (size_t i = 0; i < bp->n_edges; i++) {
		const Edgeprof__V1__Edge *e = bp->edges[i];
		struct edge_sum key = {
		    .from = e->from,
		    .to = e->to,
		    .flags = (uint8_t)((e->taken ? EDGE_TAKEN : 0) |
				       (e->from_external ? EDGE_FROM_EXTERNAL : 0) |
				       (e->to_external ? EDGE_TO_EXTERNAL : 0)),
		};
		uint64_t h = mix(mix(mix(0, key.from), key.to), key.flags);
		struct edge_sum *sum = keyed_vec_find_or_add(&s->edges, h, same_edge, &key, &added);
		if (!sum)
			return -1;
		if (added) {
			*sum = key;
			sum->kind = (uint8_t)e->kind;
			m->rows++;
		}
		ep_add_sat(&sum->count, e->count);
		ep_add_sat(&sum->mispredicted, e->mispredicted);
	}
	for (size_t i = 0; i < bp->n_ranges; i++) {
		const Edgeprof__V1__Range *r = bp->ranges[i];
		struct range_sum key = {.start = r->start, .end = r->end};
		struct range_sum *sum = keyed_vec_find_or_add(
		    &s->ranges, mix(mix(1, r->start), r->end), same_range, &key, &added);
		if (!sum)
			return -1;
		if (added) {
			*sum = key;
			m->rows++;
		}
		ep_add_sat(&sum->count, r->count);
		ep_add_sat(&sum->cycles, r->cycles);
		ep_add_sat(&sum->cycled_instructions, r->cycled_instructions);
	}
	for (size_t i = 0; i < bp->n_ips; i++) {
		bool inserted;
		uint64_t *count = ep_u64map_upsert(&s->ips, bp->ips[i]->ip, &inserted);
		if (!count)
			return -1;
		if (inserted)
			m->rows++;
		ep_add_sat(count, bp->ips[i]->count);
		if (!bp->ips[i]->cycles)
			continue;
		uint64_t *cycles = ep_u64map_upsert(&s->ip_cycles, bp->ips[i]->ip, NULL);
		if (!cycles)
			return -1;
		ep_add_sat(cycles, bp->ips[i]->cycles);
	}
	for (size_t i = 0; i < bp->n_functions; i++) {
		const Edgeprof__V1__Function *f = bp->functions[i];
		struct function_info key = {.name = (char *)str_or_empty(f->name),
					    .start = f->start};
		struct function_info *fi =
		    keyed_vec_find_or_add(&s->functions, mix_str(mix(2, f->start), key.name),
					  same_function, &key, &added);
		if (!fi)
			return -1;
		if (added) {
			fi->name = strdup(key.name);
			fi->start = f->start;
			fi->size = f->size;
			fi->local_index = f->local_index;
			if (!fi->name) {
				s->functions.n--; /* the index slot stays, pointing past the end */
				return -1;
			}
		}
	}
	for (size_t i = 0; i < bp->n_segments; i++) {
		const Edgeprof__V1__LoadSegment *g = bp->segments[i];
		struct segment_info key = {.vaddr = g->vaddr, .offset = g->offset, .size = g->size};
		struct segment_info *si = keyed_vec_find_or_add(
		    &s->segments, mix(mix(mix(3, g->vaddr), g->offset), g->size), same_segment,
		    &key, &added);
		if (!si)
			return -1;
		*si = key;
	}
	return 0;
}

static char *dup_or_null(const char *s, bool *ok)
{
	char *d = strdup(s);
	if (!d)
		*ok = false;
	return d;
}

static int copy_labels(Edgeprof__V1__Labels *l, const struct slice *s)
{
	bool ok = true;
	l->container_id = dup_or_null(s->labels[LABEL_CONTAINER], &ok);
	l->pod = dup_or_null(s->labels[LABEL_POD], &ok);
	l->namespace_ = dup_or_null(s->labels[LABEL_NAMESPACE], &ok);
	l->cgroup = dup_or_null(s->labels[LABEL_CGROUP], &ok);
	l->process = dup_or_null(s->labels[LABEL_PROCESS], &ok);
	l->session_id = dup_or_null(s->labels[LABEL_SESSION], &ok);
	return ok ? 0 : -1;
}

/* The copy_* steps fill one array of bp each; on failure what is in it is
 * counted, for protobuf_c_message_free_unpacked(). */
static int copy_paths(Edgeprof__V1__BinaryProfile *bp, const struct slice *s)
{
	if (!s->npaths)
		return 0;
	if (!(bp->paths = calloc(s->npaths, sizeof(*bp->paths))))
		return -1;
	for (; bp->n_paths < s->npaths; bp->n_paths++)
		if (!(bp->paths[bp->n_paths] = strdup(s->paths[bp->n_paths])))
			return -1;
	return 0;
}

static int copy_edges(Edgeprof__V1__BinaryProfile *bp, const struct slice *s)
{
	if (!s->edges.n)
		return 0;
	if (!(bp->edges = calloc(s->edges.n, sizeof(*bp->edges))))
		return -1;
	const struct edge_sum *es = s->edges.items;
	for (; bp->n_edges < s->edges.n; bp->n_edges++) {
		const struct edge_sum *x = &es[bp->n_edges];
		Edgeprof__V1__Edge *e = malloc(sizeof(*e));
		if (!e)
			return -1;
		edgeprof__v1__edge__init(e);
		e->from = x->from;
		e->to = x->to;
		e->taken = x->flags & EDGE_TAKEN;
		e->from_external = x->flags & EDGE_FROM_EXTERNAL;
		e->to_external = x->flags & EDGE_TO_EXTERNAL;
		e->count = x->count;
		e->mispredicted = x->mispredicted;
		e->kind = (Edgeprof__V1__BranchKind)x->kind;
		bp->edges[bp->n_edges] = e;
	}
	qsort(bp->edges, bp->n_edges, sizeof(*bp->edges), ep_edge_cmp);
	return 0;
}

static int copy_ranges(Edgeprof__V1__BinaryProfile *bp, const struct slice *s)
{
	if (!s->ranges.n)
		return 0;
	if (!(bp->ranges = calloc(s->ranges.n, sizeof(*bp->ranges))))
		return -1;
	const struct range_sum *rs = s->ranges.items;
	for (; bp->n_ranges < s->ranges.n; bp->n_ranges++) {
		Edgeprof__V1__Range *r = malloc(sizeof(*r));
		if (!r)
			return -1;
		edgeprof__v1__range__init(r);
		r->start = rs[bp->n_ranges].start;
		r->end = rs[bp->n_ranges].end;
		r->count = rs[bp->n_ranges].count;
		r->cycles = rs[bp->n_ranges].cycles;
		r->cycled_instructions = rs[bp->n_ranges].cycled_instructions;
		bp->ranges[bp->n_ranges] = r;
	}
	qsort(bp->ranges, bp->n_ranges, sizeof(*bp->ranges), ep_range_cmp);
	return 0;
}

static int copy_ips(Edgeprof__V1__BinaryProfile *bp, const struct slice *s)
{
	if (!s->ips.count)
		return 0;
	if (!(bp->ips = calloc(s->ips.count, sizeof(*bp->ips))))
		return -1;
	for (size_t i = 0; i < s->ips.capacity; i++) {
		if (!s->ips.used[i])
			continue;
		Edgeprof__V1__IpCount *c = malloc(sizeof(*c));
		if (!c)
			return -1;
		edgeprof__v1__ip_count__init(c);
		c->ip = s->ips.keys[i];
		c->count = s->ips.values[i];
		const uint64_t *cycles = ep_u64map_get(&s->ip_cycles, c->ip);
		c->cycles = cycles ? *cycles : 0;
		bp->ips[bp->n_ips++] = c;
	}
	qsort(bp->ips, bp->n_ips, sizeof(*bp->ips), ep_ip_cmp);
	return 0;
}

static int copy_functions(Edgeprof__V1__BinaryProfile *bp, const struct slice *s)
{
	if (!s->functions.n)
		return 0;
	if (!(bp->functions = calloc(s->functions.n, sizeof(*bp->functions))))
		return -1;
	const struct function_info *fs = s->functions.items;
	for (; bp->n_functions < s->functions.n; bp->n_functions++) {
		Edgeprof__V1__Function *f = malloc(sizeof(*f));
		if (!f)
			return -1;
		edgeprof__v1__function__init(f);
		bp->functions[bp->n_functions] = f;
		f->start = fs[bp->n_functions].start;
		f->size = fs[bp->n_functions].size;
		f->local_index = fs[bp->n_functions].local_index;
		if (!(f->name = strdup(fs[bp->n_functions].name))) {
			bp->n_functions++;
			return -1;
		}
	}
	qsort(bp->functions, bp->n_functions, sizeof(*bp->functions), ep_function_cmp);
	return 0;
}

static int copy_segments(Edgeprof__V1__BinaryProfile *bp, const struct slice *s)
{
	if (!s->segments.n)
		return 0;
	if (!(bp->segments = calloc(s->segments.n, sizeof(*bp->segments))))
		return -1;
	const struct segment_info *gs = s->segments.items;
	for (; bp->n_segments < s->segments.n; bp->n_segments++) {
		Edgeprof__V1__LoadSegment *g = malloc(sizeof(*g));
		if (!g)
			return -1;
		edgeprof__v1__load_segment__init(g);
		g->vaddr = gs[bp->n_segments].vaddr;
		g->offset = gs[bp->n_segments].offset;
		g->size = gs[bp->n_segments].size;
		bp->segments[bp->n_segments] = g;
	}
	return 0;
}

/* Each array gets one allocation of pointers and every message its own
 * malloc, so protobuf_c_message_free_unpacked() releases it all. */
static Edgeprof__V1__BinaryDelta *build_slice(const struct slice *s)
{
	Edgeprof__V1__BinaryDelta *d = malloc(sizeof(*d));
	Edgeprof__V1__BinaryProfile *bp = malloc(sizeof(*bp));
	Edgeprof__V1__Labels *l = malloc(sizeof(*l));
	if (!d || !bp || !l) {
		free(d);
		free(bp);
		free(l);
		return NULL;
	}
	edgeprof__v1__binary_delta__init(d);
	edgeprof__v1__binary_profile__init(bp);
	edgeprof__v1__labels__init(l);
	d->profile = bp;
	d->labels = l;
	bool ok = copy_labels(l, s) == 0;
	bp->build_id = dup_or_null(s->build_id, &ok);
	bp->arch = dup_or_null(s->arch, &ok);
	bp->samples = s->samples;
	if (!ok || copy_paths(bp, s) != 0 || copy_edges(bp, s) != 0 || copy_ranges(bp, s) != 0 ||
	    copy_ips(bp, s) != 0 || copy_functions(bp, s) != 0 || copy_segments(bp, s) != 0) {
		protobuf_c_message_free_unpacked(&d->base, NULL);
		return NULL;
	}
	return d;
}

static int cmp_slice(const void *pa, const void *pb)
{
	const struct ep_merged_slice *a = pa, *b = pb;
	if (a->bucket != b->bucket)
		return a->bucket < b->bucket ? -1 : 1;
	int c = strcmp(a->delta->profile->build_id, b->delta->profile->build_id);
	if (c)
		return c;
	const Edgeprof__V1__Labels *la = a->delta->labels, *lb = b->delta->labels;
	for (int i = 0; i < NLABELS; i++) {
		c = strcmp(label_value(la, i), label_value(lb, i));
		if (c)
			return c;
	}
	return (int)a->ns - (int)b->ns;
}

int ep_merge_build(const struct ep_merge *m, struct ep_merged *out)
{
	out->n = 0;
	out->slices = calloc(m->n ? m->n : 1, sizeof(*out->slices));
	if (!out->slices)
		return -1;
	for (size_t i = 0; i < m->n; i++) {
		Edgeprof__V1__BinaryDelta *d = build_slice(m->slices[i]);
		if (!d) {
			ep_merged_free(out);
			return -1;
		}
		out->slices[out->n].bucket = m->slices[i]->bucket;
		out->slices[out->n].ns = m->slices[i]->ns;
		out->slices[out->n++].delta = d;
	}
	qsort(out->slices, out->n, sizeof(*out->slices), cmp_slice);
	return 0;
}

void ep_merged_free(struct ep_merged *out)
{
	for (size_t i = 0; i < out->n; i++)
		protobuf_c_message_free_unpacked(&out->slices[i].delta->base, NULL);
	free(out->slices);
	out->slices = NULL;
	out->n = 0;
}

Edgeprof__V1__BinaryProfile *ep_merged_take_profile(struct ep_merged *out, size_t i)
{
	Edgeprof__V1__BinaryProfile *bp = out->slices[i].delta->profile;
	out->slices[i].delta->profile = NULL;
	return bp;
}

/* Stats is all uint64 counters: added through the descriptor, so a counter
 * added to the proto is summed without touching this. */
void ep_stats_add(Edgeprof__V1__Stats *into, const Edgeprof__V1__Stats *delta)
{
	const ProtobufCMessageDescriptor *d = &edgeprof__v1__stats__descriptor;
	for (unsigned i = 0; i < d->n_fields; i++) {
		if (d->fields[i].type != PROTOBUF_C_TYPE_UINT64)
			continue;
		ep_add_sat((uint64_t *)((char *)into + d->fields[i].offset),
			   *(const uint64_t *)((const char *)delta + d->fields[i].offset));
	}
}
