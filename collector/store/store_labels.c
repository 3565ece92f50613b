/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A binary's labels in a listing, bounded (issue 32, label cardinality): a
 * binary that a cluster's pod churn ran in a million containers has a
 * million label sets. A listing gives their number, at most N of them (all
 * when there are no more, else the most sampled) and, per dimension, the
 * number of distinct values and at most N values (the most sampled).
 *
 * ClickHouse computes all of it in its queries (GROUP BY, LIMIT BY,
 * uniqExact). SQLite has no such aggregates and counting a million distinct
 * strings there takes a second per dimension, so its backend groups the
 * label sets in its query and streams them through ep_label_summary: exact
 * while a dimension has at most EXACT_VALUES(N) values, then estimated in a
 * fixed amount of memory (HyperLogLog for the distinct count, Space-Saving
 * for the most sampled, whose counts are then over by at most the sampled
 * total over its capacity), and said so (LabelDimension.exact).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "collector/store/store_backend.h"
#include "common/profile/model.h"
#include "common/util/sat.h"
#include "common/util/u64map.h"

const char *const ep_store_dims[EP_STORE_NDIMS] = {"container_id", "pod", "namespace", "cgroup",
						   "process"};

static const char *label_field(const Edgeprof__V1__Labels *l, int i)
{
	const char *v[6] = {l->container_id, l->pod,	 l->namespace_,
			    l->cgroup,	     l->process, l->session_id};
	return v[i] ? v[i] : "";
}

static int labels_by_value(const Edgeprof__V1__Labels *a, const Edgeprof__V1__Labels *b)
{
	for (int i = 0; i < 6; i++) {
		int c = strcmp(label_field(a, i), label_field(b, i));
		if (c)
			return c;
	}
	return 0;
}

/* The most sampled first, then by value: a total order both stores give. */
static int more_sampled(uint64_t sa, const Edgeprof__V1__Labels *a, uint64_t sb,
			const Edgeprof__V1__Labels *b)
{
	if (sa != sb)
		return sa > sb ? -1 : 1;
	return labels_by_value(a, b);
}

Edgeprof__V1__LabelDimension *ep_store_dimension(Edgeprof__V1__BinaryInfo *b, int dim)
{
	if (!b->n_dimensions) {
		b->dimensions = calloc(EP_STORE_NDIMS, sizeof(*b->dimensions));
		if (!b->dimensions)
			return NULL;
		for (int i = 0; i < EP_STORE_NDIMS; i++) {
			Edgeprof__V1__LabelDimension *d = malloc(sizeof(*d));
			if (!d)
				return NULL;
			edgeprof__v1__label_dimension__init(d);
			d->exact = true;
			b->dimensions[b->n_dimensions++] = d;
			if (!(d->name = strdup(ep_store_dims[i])))
				return NULL;
		}
	}
	return b->dimensions[dim];
}

int ep_store_add_dim_value(Edgeprof__V1__LabelDimension *d, const char *value, uint64_t samples)
{
	Edgeprof__V1__LabelValue *v = malloc(sizeof(*v));
	if (!v)
		return -1;
	edgeprof__v1__label_value__init(v);
	v->samples = samples;
	if (!(v->value = strdup(value ? value : "")) || EP_PB_APPEND(d->values, d->n_values, v)) {
		free(v->value);
		free(v);
		return -1;
	}
	return 0;
}

int ep_store_add_label_samples(Edgeprof__V1__BinaryInfo *b, uint64_t samples)
{
	uint64_t *grown = realloc(b->label_samples, (b->n_label_samples + 1) * sizeof(*grown));
	if (!grown)
		return -1;
	grown[b->n_label_samples++] = samples;
	b->label_samples = grown;
	return 0;
}

struct labelled {
	Edgeprof__V1__Labels *l;
	uint64_t samples;
};

static int cmp_by_value(const void *a, const void *b)
{
	return labels_by_value(((const struct labelled *)a)->l, ((const struct labelled *)b)->l);
}

static int cmp_by_samples(const void *a, const void *b)
{
	const struct labelled *x = a, *y = b;
	return more_sampled(x->samples, x->l, y->samples, y->l);
}

static int cmp_values(const void *a, const void *b)
{
	const Edgeprof__V1__LabelValue *x = *(Edgeprof__V1__LabelValue *const *)a;
	const Edgeprof__V1__LabelValue *y = *(Edgeprof__V1__LabelValue *const *)b;
	if (x->samples != y->samples)
		return x->samples > y->samples ? -1 : 1;
	return strcmp(x->value, y->value);
}

int ep_store_labels_done(Edgeprof__V1__BinaryInfo *b, size_t n)
{
	if (b->n_label_samples != b->n_labels)
		return -1;
	struct labelled *all = malloc((b->n_labels + 1) * sizeof(*all));
	if (!all)
		return -1;
	for (size_t i = 0; i < b->n_labels; i++)
		all[i] = (struct labelled){b->labels[i], b->label_samples[i]};
	b->labels_truncated = b->label_sets > n;
	/* all of them by their values, as listings always gave them; the most
	 * sampled when they are a part */
	qsort(all, b->n_labels, sizeof(*all), b->labels_truncated ? cmp_by_samples : cmp_by_value);
	for (size_t i = n; i < b->n_labels; i++)
		edgeprof__v1__labels__free_unpacked(all[i].l, NULL);
	if (b->n_labels > n)
		b->n_labels = b->n_label_samples = n;
	for (size_t i = 0; i < b->n_labels; i++) {
		b->labels[i] = all[i].l;
		b->label_samples[i] = all[i].samples;
	}
	free(all);
	for (size_t k = 0; k < b->n_dimensions; k++) {
		Edgeprof__V1__LabelDimension *d = b->dimensions[k];
		d->summarized = d->distinct > n;
		qsort(d->values, d->n_values, sizeof(*d->values), cmp_values);
		for (size_t i = n; i < d->n_values; i++)
			edgeprof__v1__label_value__free_unpacked(d->values[i], NULL);
		if (d->n_values > n)
			d->n_values = n;
	}
	return 0;
}

/* --- SQLite's streamed summary ------------------------------------------ */

#define HLL_P 14 /* 16,384 registers: +-0.8% */
#define HLL_M (1u << HLL_P)
/* values counted exactly per dimension, before the estimates take over */
#define EXACT_VALUES(n) ((n)*4 > 4096 ? (n)*4 : 4096)
/* the count-min sketch (conservative update): each value's samples over
 * by at most e / CMS_W of the dimension's total (0.017%), with probability
 * 1 - e^-CMS_D (95%) */
#define CMS_D 3
#define CMS_W (1u << 14)

struct entry {
	char *value;
	size_t cap; /* value's buffer */
	uint64_t hash, count;
};

/* An open-addressing index by hash over entries: slot = entry + 1, 0 empty. */
struct index {
	size_t *slots;
	size_t n; /* slots: twice the entries at most */
};

/* One dimension: its values counted exactly (table) while they are at most
 * cap; past that, every value's samples go to a count-min sketch and the
 * most sampled n by it are kept (top, a min-heap by count); a HyperLogLog
 * counts the distinct values all along. */
struct dim {
	struct entry *table;
	size_t ntable, cap;
	struct index tindex;
	bool overflowed;
	uint64_t *cms;
	struct entry *top;
	size_t ntop, topcap;
	struct index topindex;
	uint8_t hll[HLL_M];
};

struct ep_label_summary {
	size_t n;
	uint64_t sets;
	struct labelled *top; /* min-heap of the n most sampled label sets */
	size_t ntop;
	struct dim dims[EP_STORE_NDIMS];
};

/* 8 bytes at a time, then splitmix's finaliser: the values are hashed for
 * every label set, a million of them in a listing. */
static uint64_t hash_of(const char *s, size_t len)
{
	uint64_t h = 0x9e3779b97f4a7c15ULL ^ len;
	for (; len >= 8; s += 8, len -= 8) {
		uint64_t k;
		memcpy(&k, s, 8);
		h = (h ^ k) * 0xff51afd7ed558ccdULL;
		h ^= h >> 32;
	}
	uint64_t k = 0;
	memcpy(&k, s, len);
	h = (h ^ k) * 0xc4ceb9fe1a85ec53ULL;
	return ep_hash_u64(h);
}

static int index_init(struct index *x, size_t entries)
{
	x->n = 2 * (entries ? entries : 1);
	x->slots = calloc(x->n, sizeof(*x->slots));
	return x->slots ? 0 : -1;
}

/* The slot holding value, or the empty one where it would go. */
static size_t index_find(const struct index *x, const struct entry *e, const char *value,
			 uint64_t h)
{
	size_t i = h % x->n;
	while (x->slots[i] &&
	       (e[x->slots[i] - 1].hash != h || strcmp(e[x->slots[i] - 1].value, value) != 0))
		i = (i + 1) % x->n;
	return i;
}

/* Linear probing's deletion: the entries after the hole that belong before
 * it move up. */
static void index_remove(struct index *x, const struct entry *e, size_t hole)
{
	x->slots[hole] = 0;
	for (size_t i = (hole + 1) % x->n; x->slots[i]; i = (i + 1) % x->n) {
		size_t home = e[x->slots[i] - 1].hash % x->n;
		bool stays = hole <= i ? home > hole && home <= i : home > hole || home <= i;
		if (stays)
			continue;
		x->slots[hole] = x->slots[i];
		x->slots[i] = 0;
		hole = i;
	}
}

/* value into e's buffer, grown when it does not fit; 0, or -1. */
static int entry_set(struct entry *e, const char *value, size_t len, uint64_t h, uint64_t count)
{
	if (!e->value || e->cap < len + 1) {
		char *grown = realloc(e->value, len + 1);
		if (!grown)
			return -1;
		e->value = grown;
		e->cap = len + 1;
	}
	memcpy(e->value, value, len + 1);
	e->hash = h;
	e->count = count;
	return 0;
}

struct ep_label_summary *ep_label_summary_new(size_t n)
{
	struct ep_label_summary *sum = calloc(1, sizeof(*sum));
	if (!sum)
		return NULL;
	sum->n = n;
	sum->top = calloc(n + 1, sizeof(*sum->top));
	bool ok = sum->top != NULL;
	for (int k = 0; ok && k < EP_STORE_NDIMS; k++) {
		struct dim *d = &sum->dims[k];
		d->cap = EXACT_VALUES(n);
		d->table = calloc(d->cap, sizeof(*d->table));
		ok = d->table && index_init(&d->tindex, d->cap) == 0;
	}
	if (!ok) {
		ep_label_summary_free(sum);
		return NULL;
	}
	return sum;
}

static void entries_free(struct entry *e, size_t n)
{
	for (size_t i = 0; e && i < n; i++)
		free(e[i].value);
	free(e);
}

void ep_label_summary_free(struct ep_label_summary *sum)
{
	if (!sum)
		return;
	for (size_t i = 0; i < sum->ntop; i++)
		edgeprof__v1__labels__free_unpacked(sum->top[i].l, NULL);
	free(sum->top);
	for (int k = 0; k < EP_STORE_NDIMS; k++) {
		struct dim *d = &sum->dims[k];
		entries_free(d->table, d->ntable);
		free(d->tindex.slots);
		free(d->cms);
		entries_free(d->top, d->topcap);
		free(d->topindex.slots);
	}
	free(sum);
}

/* The top's min-heap by count; its index follows each move. */
static void top_swap(struct dim *d, size_t a, size_t b)
{
	size_t sa = index_find(&d->topindex, d->top, d->top[a].value, d->top[a].hash);
	size_t sb = index_find(&d->topindex, d->top, d->top[b].value, d->top[b].hash);
	struct entry t = d->top[a];
	d->top[a] = d->top[b];
	d->top[b] = t;
	d->topindex.slots[sa] = b + 1;
	d->topindex.slots[sb] = a + 1;
}

static void top_sift_down(struct dim *d, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < d->ntop && d->top[l].count < d->top[m].count)
			m = l;
		if (r < d->ntop && d->top[r].count < d->top[m].count)
			m = r;
		if (m == i)
			return;
		top_swap(d, i, m);
		i = m;
	}
}

static void top_sift_up(struct dim *d, size_t i)
{
	while (i > 0 && d->top[(i - 1) / 2].count > d->top[i].count) {
		top_swap(d, i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
}

static void hll_add(struct dim *d, uint64_t h)
{
	uint32_t reg = (uint32_t)(h >> (64 - HLL_P));
	uint64_t rest = (h << HLL_P) | (1ULL << (HLL_P - 1)); /* never 0 */
	uint8_t rank = (uint8_t)(__builtin_clzll(rest) + 1);
	if (rank > d->hll[reg])
		d->hll[reg] = rank;
}

static uint64_t hll_count(const struct dim *d)
{
	double sum = 0;
	unsigned zeros = 0;
	for (unsigned i = 0; i < HLL_M; i++) {
		sum += ldexp(1.0, -d->hll[i]);
		zeros += d->hll[i] == 0;
	}
	double m = HLL_M, e = 0.7213 / (1 + 1.079 / m) * m * m / sum;
	if (e <= 2.5 * m && zeros)
		e = m * log(m / zeros); /* linear counting, for the small range */
	return (uint64_t)llround(e);
}

/* Adds samples to value's cells, conservatively (a cell grows only as far
 * as the value's new estimate): its estimate (the least of them) after. */
static uint64_t cms_add(struct dim *d, uint64_t h, uint64_t samples)
{
	uint32_t h1 = (uint32_t)h, h2 = (uint32_t)(h >> 32) | 1;
	uint64_t *c[CMS_D], est = UINT64_MAX;
	for (uint32_t i = 0; i < CMS_D; i++) {
		c[i] = &d->cms[i * CMS_W + ((h1 + i * h2) & (CMS_W - 1))];
		if (*c[i] < est)
			est = *c[i];
	}
	ep_add_sat(&est, samples);
	for (uint32_t i = 0; i < CMS_D; i++)
		if (*c[i] < est)
			*c[i] = est;
	return est;
}

/* value's estimate is count: it joins the most sampled when it is among
 * them. 0, or -1. */
static int top_offer(struct dim *d, const char *value, size_t len, uint64_t h, uint64_t count)
{
	/* most rows of a churning dimension end here: not above the least of
	 * the top, so neither among them nor one of them that grew */
	if (!d->topcap || (d->ntop == d->topcap && count <= d->top[0].count))
		return 0;
	size_t slot = index_find(&d->topindex, d->top, value, h);
	if (d->topindex.slots[slot]) {
		size_t i = d->topindex.slots[slot] - 1;
		d->top[i].count = count;
		top_sift_down(d, i);
		return 0;
	}
	if (d->ntop < d->topcap) {
		size_t i = d->ntop++;
		if (entry_set(&d->top[i], value, len, h, count) != 0)
			return -1;
		d->topindex.slots[slot] = i + 1;
		top_sift_up(d, i);
		return 0;
	}
	if (count <= d->top[0].count)
		return 0;
	index_remove(&d->topindex, d->top,
		     index_find(&d->topindex, d->top, d->top[0].value, d->top[0].hash));
	if (entry_set(&d->top[0], value, len, h, count) != 0)
		return -1;
	d->topindex.slots[index_find(&d->topindex, d->top, value, h)] = 1;
	top_sift_down(d, 0);
	return 0;
}

/* The exact table is full: from now on the sketch counts, seeded with it. */
static int overflow(struct dim *d, size_t n)
{
	d->overflowed = true;
	d->topcap = n;
	d->cms = calloc((size_t)CMS_D * CMS_W, sizeof(*d->cms));
	d->top = calloc(n ? n : 1, sizeof(*d->top));
	if (!d->cms || !d->top || index_init(&d->topindex, n) != 0)
		return -1;
	for (size_t i = 0; i < d->ntable; i++) {
		struct entry *e = &d->table[i];
		if (top_offer(d, e->value, strlen(e->value), e->hash,
			      cms_add(d, e->hash, e->count)) != 0)
			return -1;
	}
	entries_free(d->table, d->ntable);
	d->table = NULL;
	d->ntable = 0;
	free(d->tindex.slots);
	d->tindex.slots = NULL;
	return 0;
}

static int dim_add(struct dim *d, size_t n, const char *value, uint64_t samples)
{
	size_t len = strlen(value);
	uint64_t h = hash_of(value, len);
	hll_add(d, h);
	if (d->overflowed)
		return top_offer(d, value, len, h, cms_add(d, h, samples));
	size_t slot = index_find(&d->tindex, d->table, value, h);
	if (d->tindex.slots[slot]) {
		ep_add_sat(&d->table[d->tindex.slots[slot] - 1].count, samples);
		return 0;
	}
	if (d->ntable == d->cap) {
		if (overflow(d, n) != 0)
			return -1;
		return top_offer(d, value, len, h, cms_add(d, h, samples));
	}
	size_t i = d->ntable++;
	if (entry_set(&d->table[i], value, len, h, samples) != 0)
		return -1;
	d->tindex.slots[slot] = i + 1;
	return 0;
}

static Edgeprof__V1__Labels *labels_copy(const struct ep_store_row *row)
{
	Edgeprof__V1__Labels *l = malloc(sizeof(*l));
	if (!l)
		return NULL;
	edgeprof__v1__labels__init(l);
	char **f[6] = {&l->container_id, &l->pod,     &l->namespace_,
		       &l->cgroup,	 &l->process, &l->session_id};
	bool ok = true;
	for (int i = 0; i < 6; i++) {
		const char *t = row->text(row->ctx, i);
		*f[i] = t ? strdup(t) : NULL;
		ok = ok && *f[i];
	}
	if (!ok) {
		for (int i = 0; i < 6; i++)
			free(*f[i]);
		free(l);
		return NULL;
	}
	return l;
}

/* The top's min-heap, by more_sampled reversed: the root is the one to go. */
static bool top_less(const struct labelled *a, const struct labelled *b)
{
	return more_sampled(a->samples, a->l, b->samples, b->l) > 0;
}

static void top_down(struct ep_label_summary *sum, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < sum->ntop && top_less(&sum->top[l], &sum->top[m]))
			m = l;
		if (r < sum->ntop && top_less(&sum->top[r], &sum->top[m]))
			m = r;
		if (m == i)
			return;
		struct labelled t = sum->top[i];
		sum->top[i] = sum->top[m];
		sum->top[m] = t;
		i = m;
	}
}

int ep_label_summary_add(struct ep_label_summary *sum, const struct ep_store_row *row)
{
	uint64_t samples = row->number(row->ctx, 6);
	sum->sets++;
	for (int k = 0; k < EP_STORE_NDIMS; k++) {
		const char *v = row->text(row->ctx, k);
		if (!v || dim_add(&sum->dims[k], sum->n, v, samples) != 0)
			return -1;
	}
	if (!sum->n)
		return 0;
	if (sum->ntop == sum->n) {
		/* most rows end here: compared without copying */
		Edgeprof__V1__Labels probe = EDGEPROF__V1__LABELS__INIT;
		char **f[6] = {&probe.container_id, &probe.pod,	    &probe.namespace_,
			       &probe.cgroup,	    &probe.process, &probe.session_id};
		for (int i = 0; i < 6; i++)
			*f[i] = (char *)row->text(row->ctx, i);
		struct labelled p = {&probe, samples};
		if (!top_less(&sum->top[0], &p))
			return 0;
	}
	Edgeprof__V1__Labels *l = labels_copy(row);
	if (!l)
		return -1;
	if (sum->ntop < sum->n) {
		size_t i = sum->ntop++;
		sum->top[i] = (struct labelled){l, samples};
		while (i > 0 && top_less(&sum->top[i], &sum->top[(i - 1) / 2])) {
			struct labelled t = sum->top[i];
			sum->top[i] = sum->top[(i - 1) / 2];
			sum->top[(i - 1) / 2] = t;
			i = (i - 1) / 2;
		}
		return 0;
	}
	edgeprof__v1__labels__free_unpacked(sum->top[0].l, NULL);
	sum->top[0] = (struct labelled){l, samples};
	top_down(sum, 0);
	return 0;
}

int ep_label_summary_finish(struct ep_label_summary *sum, Edgeprof__V1__BinaryInfo *b)
{
	b->label_sets = sum->sets;
	for (size_t i = 0; i < sum->ntop; i++) {
		if (EP_PB_APPEND(b->labels, b->n_labels, sum->top[i].l) != 0)
			return -1;
		sum->top[i].l = NULL;
		if (ep_store_add_label_samples(b, sum->top[i].samples) != 0)
			return -1;
	}
	sum->ntop = 0;
	for (int k = 0; k < EP_STORE_NDIMS; k++) {
		struct dim *d = &sum->dims[k];
		Edgeprof__V1__LabelDimension *out = ep_store_dimension(b, k);
		if (!out)
			return -1;
		out->exact = !d->overflowed;
		out->distinct = d->overflowed ? hll_count(d) : d->ntable;
		/* an estimate below what is known would say less than is known */
		if (out->distinct < d->ntop)
			out->distinct = d->ntop;
		if (d->overflowed && out->distinct <= d->cap)
			out->distinct = d->cap + 1;
		/* ep_store_labels_done sorts them and keeps the n most sampled */
		const struct entry *e = d->overflowed ? d->top : d->table;
		size_t ne = d->overflowed ? d->ntop : d->ntable;
		for (size_t i = 0; i < ne; i++)
			if (ep_store_add_dim_value(out, e[i].value, e[i].count) != 0)
				return -1;
	}
	return ep_store_labels_done(b, sum->n);
}
