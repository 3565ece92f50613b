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
 * strings there takes a second per dimension, so its backend reads one row
 * per label set (its rollup, label_totals) and streams them through
 * ep_label_summary: exact while a dimension has at most EXACT_VALUES(N)
 * values, then estimated in a fixed amount of memory (HyperLogLog for the
 * distinct count, a count-min sketch for the most sampled, whose counts are
 * then over by at most a small share of the total), and said so
 * (LabelDimension.exact). The rows carry the label values as the integers
 * SQLite interns them to: hashing and comparing integers, and reading only
 * the texts of what is listed, is what makes a million label sets a fraction
 * of a second.
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

/* A value of a dimension and its samples. */
struct counted {
	uint64_t id, count;
};

/* One dimension: its values counted exactly (exact: id -> samples) while
 * they are at most cap; past that, every value's samples go to a count-min
 * sketch and the most sampled n by it are kept (top, a min-heap by count,
 * pos: id -> its place + 1); a HyperLogLog counts the distinct values all
 * along. */
struct dim {
	struct ep_u64map exact;
	size_t cap;
	bool overflowed;
	uint64_t *cms;
	struct counted *top;
	size_t ntop, topcap;
	struct ep_u64map pos;
	uint8_t hll[HLL_M];
};

/* A label set: its values' ids and, once read, their texts. */
struct set {
	uint64_t label_set, samples;
	uint64_t ids[EP_LABEL_FIELDS];
	char *text[EP_LABEL_FIELDS];
};

struct ep_label_summary {
	size_t n;
	ep_label_text_fn text;
	void *ctx;
	uint64_t sets;
	/* the n most sampled label sets by samples alone (a min-heap; equal
	 * samples by label_set): which of those tied at the least of them go
	 * in is decided by their values, after (ep_label_summary_ties) */
	struct set *top;
	size_t ntop;
	/* label sets seen per samples value, for the values at least the
	 * least in top: how many tie with it */
	struct ep_u64map per_samples;
	/* the ties' decision: the need least by value of those with samples
	 * tie_samples (a max-heap by value) */
	bool ties_open;
	uint64_t tie_samples;
	size_t need;
	struct set *ties;
	size_t nties;
	bool failed; /* a text could not be read */
	struct dim dims[EP_STORE_NDIMS];
};

struct ep_label_summary *ep_label_summary_new(size_t n, ep_label_text_fn text, void *ctx)
{
	struct ep_label_summary *sum = calloc(1, sizeof(*sum));
	if (!sum)
		return NULL;
	sum->n = n;
	sum->text = text;
	sum->ctx = ctx;
	ep_u64map_init(&sum->per_samples);
	sum->top = calloc(n + 1, sizeof(*sum->top));
	sum->ties = calloc(n + 1, sizeof(*sum->ties));
	for (int k = 0; k < EP_STORE_NDIMS; k++) {
		ep_u64map_init(&sum->dims[k].exact);
		ep_u64map_init(&sum->dims[k].pos);
		sum->dims[k].cap = EXACT_VALUES(n);
	}
	if (!sum->top || !sum->ties) {
		ep_label_summary_free(sum);
		return NULL;
	}
	return sum;
}

static void set_texts_free(struct set *e)
{
	for (int i = 0; i < EP_LABEL_FIELDS; i++) {
		free(e->text[i]);
		e->text[i] = NULL;
	}
}

void ep_label_summary_free(struct ep_label_summary *sum)
{
	if (!sum)
		return;
	for (size_t i = 0; i < sum->ntop; i++)
		set_texts_free(&sum->top[i]);
	for (size_t i = 0; i < sum->nties; i++)
		set_texts_free(&sum->ties[i]);
	free(sum->top);
	free(sum->ties);
	ep_u64map_free(&sum->per_samples);
	for (int k = 0; k < EP_STORE_NDIMS; k++) {
		struct dim *d = &sum->dims[k];
		ep_u64map_free(&d->exact);
		ep_u64map_free(&d->pos);
		free(d->cms);
		free(d->top);
	}
	free(sum);
}

/* The text of value id (0 is ""); NULL when it cannot be read. */
static char *value_text(struct ep_label_summary *sum, uint64_t id)
{
	char *t = id ? sum->text(sum->ctx, id) : strdup("");
	if (!t)
		sum->failed = true;
	return t;
}

/* --- a dimension's values ------------------------------------------------ */

/* The top's min-heap by count; pos follows each move. */
static void vtop_swap(struct dim *d, size_t a, size_t b)
{
	struct counted t = d->top[a];
	d->top[a] = d->top[b];
	d->top[b] = t;
	*ep_u64map_get(&d->pos, d->top[a].id) = a + 1;
	*ep_u64map_get(&d->pos, d->top[b].id) = b + 1;
}

static void vtop_down(struct dim *d, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < d->ntop && d->top[l].count < d->top[m].count)
			m = l;
		if (r < d->ntop && d->top[r].count < d->top[m].count)
			m = r;
		if (m == i)
			return;
		vtop_swap(d, i, m);
		i = m;
	}
}

static void vtop_up(struct dim *d, size_t i)
{
	while (i > 0 && d->top[(i - 1) / 2].count > d->top[i].count) {
		vtop_swap(d, i, (i - 1) / 2);
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

/* Value id's estimate is count: it joins the most sampled when it is among
 * them. 0, or -1. */
static int vtop_offer(struct dim *d, uint64_t id, uint64_t count)
{
	/* most rows of a churning dimension end here: not above the least of
	 * the top, so neither among them nor one of them that grew */
	if (!d->topcap || (d->ntop == d->topcap && count <= d->top[0].count))
		return 0;
	uint64_t *at = ep_u64map_get(&d->pos, id);
	if (at) {
		size_t i = *at - 1;
		d->top[i].count = count;
		vtop_down(d, i);
		return 0;
	}
	size_t i;
	if (d->ntop < d->topcap) {
		i = d->ntop++;
	} else {
		ep_u64map_remove(&d->pos, d->top[0].id);
		i = 0;
	}
	d->top[i] = (struct counted){id, count};
	bool inserted;
	uint64_t *slot = ep_u64map_upsert(&d->pos, id, &inserted);
	if (!slot)
		return -1;
	*slot = i + 1;
	if (i)
		vtop_up(d, i);
	else
		vtop_down(d, 0);
	return 0;
}

/* The exact table is full: from now on the sketch counts, seeded with it. */
static int overflow(struct dim *d, size_t n)
{
	d->overflowed = true;
	d->topcap = n;
	d->cms = calloc((size_t)CMS_D * CMS_W, sizeof(*d->cms));
	d->top = calloc(n ? n : 1, sizeof(*d->top));
	if (!d->cms || !d->top)
		return -1;
	for (size_t i = 0; i < d->exact.capacity; i++)
		if (d->exact.used[i] &&
		    vtop_offer(d, d->exact.keys[i],
			       cms_add(d, ep_hash_u64(d->exact.keys[i]), d->exact.values[i])) != 0)
			return -1;
	ep_u64map_free(&d->exact);
	return 0;
}

static int dim_add(struct dim *d, size_t n, uint64_t id, uint64_t samples)
{
	uint64_t h = ep_hash_u64(id);
	hll_add(d, h);
	if (d->overflowed)
		return vtop_offer(d, id, cms_add(d, h, samples));
	uint64_t *c = ep_u64map_get(&d->exact, id);
	if (c) {
		ep_add_sat(c, samples);
		return 0;
	}
	if (d->exact.count == d->cap) {
		if (overflow(d, n) != 0)
			return -1;
		return vtop_offer(d, id, cms_add(d, h, samples));
	}
	bool inserted;
	if (!(c = ep_u64map_upsert(&d->exact, id, &inserted)))
		return -1;
	*c = samples;
	return 0;
}

/* --- the most sampled label sets ----------------------------------------- */

/* top's order: fewer samples first, then the later label set */
static bool set_below(const struct set *a, const struct set *b)
{
	if (a->samples != b->samples)
		return a->samples < b->samples;
	return a->label_set > b->label_set;
}

static void top_down(struct ep_label_summary *sum, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < sum->ntop && set_below(&sum->top[l], &sum->top[m]))
			m = l;
		if (r < sum->ntop && set_below(&sum->top[r], &sum->top[m]))
			m = r;
		if (m == i)
			return;
		struct set t = sum->top[i];
		sum->top[i] = sum->top[m];
		sum->top[m] = t;
		i = m;
	}
}

/* Forgets the counts of samples values below the least in top: there are
 * at most n others (those in top). */
static void per_samples_trim(struct ep_label_summary *sum)
{
	struct ep_u64map *m = &sum->per_samples;
	if (m->count <= 2 * sum->n + 16)
		return;
	uint64_t least = sum->top[0].samples;
	for (size_t i = 0; i < m->capacity; i++)
		if (m->used[i] && m->keys[i] < least && ep_u64map_remove(m, m->keys[i]))
			i--; /* the removal may have moved another key here */
}

int ep_label_summary_add(struct ep_label_summary *sum, uint64_t label_set,
			 const uint64_t ids[EP_LABEL_FIELDS], uint64_t samples)
{
	sum->sets++;
	for (int k = 0; k < EP_STORE_NDIMS; k++)
		if (dim_add(&sum->dims[k], sum->n, ids[k], samples) != 0)
			return -1;
	if (!sum->n)
		return 0;
	bool full = sum->ntop == sum->n;
	if (full && samples < sum->top[0].samples)
		return 0; /* most rows end here */
	bool inserted;
	uint64_t *seen = ep_u64map_upsert(&sum->per_samples, samples, &inserted);
	if (!seen)
		return -1;
	(*seen)++;
	struct set e = {.label_set = label_set, .samples = samples};
	memcpy(e.ids, ids, sizeof(e.ids));
	if (!full) {
		size_t i = sum->ntop++;
		sum->top[i] = e;
		while (i > 0 && set_below(&sum->top[i], &sum->top[(i - 1) / 2])) {
			struct set t = sum->top[i];
			sum->top[i] = sum->top[(i - 1) / 2];
			sum->top[(i - 1) / 2] = t;
			i = (i - 1) / 2;
		}
		return 0;
	}
	if (!set_below(&sum->top[0], &e))
		return 0;
	sum->top[0] = e;
	top_down(sum, 0);
	per_samples_trim(sum);
	return 0;
}

bool ep_label_summary_ties(struct ep_label_summary *sum, uint64_t *samples, size_t *need,
			   uint64_t *tied)
{
	if (sum->ntop < sum->n || !sum->n)
		return false; /* every label set is in top */
	uint64_t least = sum->top[0].samples;
	size_t above = 0;
	for (size_t i = 0; i < sum->ntop; i++)
		above += sum->top[i].samples > least;
	uint64_t *seen = ep_u64map_get(&sum->per_samples, least);
	if (!seen || *seen <= sum->n - above)
		return false; /* all of those tied are in top */
	*tied = *seen;
	/* which of them go in is for their values to say: out of top, and
	 * into ties as the backend gives them */
	size_t kept = 0;
	for (size_t i = 0; i < sum->ntop; i++)
		if (sum->top[i].samples > least)
			sum->top[kept++] = sum->top[i];
	sum->ntop = kept;
	sum->ties_open = true;
	sum->tie_samples = *samples = least;
	sum->need = *need = sum->n - above;
	return true;
}

/* a's values before b's: compared by their ids until two differ (equal ids
 * are equal texts), then by those texts, read as needed. */
static int by_values(struct ep_label_summary *sum, struct set *a, struct set *b)
{
	for (int i = 0; i < EP_LABEL_FIELDS; i++) {
		if (a->ids[i] == b->ids[i])
			continue;
		if ((!a->text[i] && !(a->text[i] = value_text(sum, a->ids[i]))) ||
		    (!b->text[i] && !(b->text[i] = value_text(sum, b->ids[i]))))
			return 0;
		return strcmp(a->text[i], b->text[i]) < 0 ? -1 : 1;
	}
	return 0;
}

/* the ties' max-heap by value: the root is the one to go */
static void ties_down(struct ep_label_summary *sum, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < sum->nties && by_values(sum, &sum->ties[l], &sum->ties[m]) > 0)
			m = l;
		if (r < sum->nties && by_values(sum, &sum->ties[r], &sum->ties[m]) > 0)
			m = r;
		if (m == i)
			return;
		struct set t = sum->ties[i];
		sum->ties[i] = sum->ties[m];
		sum->ties[m] = t;
		i = m;
	}
}

int ep_label_summary_tie(struct ep_label_summary *sum, uint64_t label_set,
			 const uint64_t ids[EP_LABEL_FIELDS])
{
	if (!sum->ties_open)
		return -1;
	struct set e = {.label_set = label_set, .samples = sum->tie_samples};
	memcpy(e.ids, ids, sizeof(e.ids));
	if (sum->nties < sum->need) {
		size_t i = sum->nties++;
		sum->ties[i] = e;
		while (i > 0 && by_values(sum, &sum->ties[i], &sum->ties[(i - 1) / 2]) > 0) {
			struct set t = sum->ties[i];
			sum->ties[i] = sum->ties[(i - 1) / 2];
			sum->ties[(i - 1) / 2] = t;
			i = (i - 1) / 2;
		}
	} else if (by_values(sum, &e, &sum->ties[0]) < 0) {
		set_texts_free(&sum->ties[0]);
		sum->ties[0] = e;
		ties_down(sum, 0);
	} else {
		set_texts_free(&e);
	}
	return sum->failed ? -1 : 0;
}

/* A listed label set as a message, its texts read. */
static int add_set(struct ep_label_summary *sum, Edgeprof__V1__BinaryInfo *b, struct set *e)
{
	for (int i = 0; i < EP_LABEL_FIELDS; i++)
		if (!e->text[i] && !(e->text[i] = value_text(sum, e->ids[i])))
			return -1;
	Edgeprof__V1__Labels *l = malloc(sizeof(*l));
	if (!l)
		return -1;
	edgeprof__v1__labels__init(l);
	char **f[EP_LABEL_FIELDS] = {&l->container_id, &l->pod,	    &l->namespace_,
				     &l->cgroup,       &l->process, &l->session_id};
	for (int i = 0; i < EP_LABEL_FIELDS; i++) {
		*f[i] = e->text[i];
		e->text[i] = NULL;
	}
	if (EP_PB_APPEND(b->labels, b->n_labels, l) != 0) {
		edgeprof__v1__labels__free_unpacked(l, NULL);
		return -1;
	}
	return ep_store_add_label_samples(b, e->samples);
}

/* A dimension's values listed: those counted exactly, or the most sampled
 * by the sketch; ep_store_labels_done keeps the n most sampled. */
static int add_values(struct ep_label_summary *sum, Edgeprof__V1__LabelDimension *out,
		      const struct dim *d)
{
	out->exact = !d->overflowed;
	out->distinct = d->overflowed ? hll_count(d) : d->exact.count;
	/* an estimate below what is known would say less than is known */
	if (out->distinct < d->ntop)
		out->distinct = d->ntop;
	if (d->overflowed && out->distinct <= d->cap)
		out->distinct = d->cap + 1;
	size_t n = d->overflowed ? d->ntop : d->exact.capacity;
	for (size_t i = 0; i < n; i++) {
		if (!d->overflowed && !d->exact.used[i])
			continue;
		uint64_t id = d->overflowed ? d->top[i].id : d->exact.keys[i];
		uint64_t count = d->overflowed ? d->top[i].count : d->exact.values[i];
		char *t = value_text(sum, id);
		int rc = t ? ep_store_add_dim_value(out, t, count) : -1;
		free(t);
		if (rc != 0)
			return -1;
	}
	return 0;
}

int ep_label_summary_finish(struct ep_label_summary *sum, Edgeprof__V1__BinaryInfo *b)
{
	if (sum->failed)
		return -1;
	b->label_sets = sum->sets;
	for (size_t i = 0; i < sum->ntop; i++)
		if (add_set(sum, b, &sum->top[i]) != 0)
			return -1;
	for (size_t i = 0; i < sum->nties; i++)
		if (add_set(sum, b, &sum->ties[i]) != 0)
			return -1;
	for (int k = 0; k < EP_STORE_NDIMS; k++) {
		Edgeprof__V1__LabelDimension *out = ep_store_dimension(b, k);
		if (!out || add_values(sum, out, &sum->dims[k]) != 0)
			return -1;
	}
	return ep_store_labels_done(b, sum->n);
}
