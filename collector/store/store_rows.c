/* SPDX-License-Identifier: Apache-2.0 */
/* What a backend's rows become: SQLite answers in columns of int64 and
 * ClickHouse in TabSeparated text, but a row of a part is the same message
 * either way, built here once. */
#include <stdlib.h>
#include <string.h>

#include "collector/store/store_backend.h"
#include "common/profile/model.h"

static char *text_copy(const struct ep_store_row *row, int column)
{
	const char *t = row->text(row->ctx, column);
	return t ? strdup(t) : NULL;
}

/* A new message of size bytes at the end of a repeated field, for its
 * caller to initialise; NULL when out of memory. */
static void *append_new(void ***array, size_t *n, size_t size)
{
	void *m = malloc(size);
	if (m && ep_pb_append(array, n, m) != 0) {
		free(m);
		m = NULL;
	}
	return m;
}

static int add_edge(struct ep_store_read *rd, const struct ep_store_row *row)
{
	Edgeprof__V1__BinaryProfile *bp = rd->bp;
	Edgeprof__V1__Edge *e = append_new((void ***)&bp->edges, &bp->n_edges, sizeof(*e));
	if (!e)
		return -1;
	edgeprof__v1__edge__init(e);
	e->from = row->number(row->ctx, 0);
	e->to = row->number(row->ctx, 1);
	uint64_t flags = row->number(row->ctx, 2);
	e->taken = flags & 1;
	e->from_external = (flags & 2) != 0;
	e->to_external = (flags & 4) != 0;
	e->kind = (Edgeprof__V1__BranchKind)(int)row->number(row->ctx, 3);
	e->count = row->number(row->ctx, 4);
	e->mispredicted = row->number(row->ctx, 5);
	return 0;
}

/* Makes room for item i of an array of per items per entry. */
static int reserve(uint64_t **array, size_t *cap, size_t i, size_t per)
{
	if (i < *cap)
		return 0;
	size_t cap2 = *cap ? *cap * 2 : 64;
	uint64_t *a = realloc(*array, cap2 * per * sizeof(*a));
	if (!a)
		return -1;
	*array = a;
	*cap = cap2;
	return 0;
}

static int add_range(struct ep_store_read *rd, const struct ep_store_row *row)
{
	Edgeprof__V1__BinaryProfile *bp = rd->bp;
	if (reserve(&rd->range_ns, &rd->range_cap, bp->n_ranges, 2) != 0)
		return -1;
	rd->range_ns[2 * bp->n_ranges] = row->number(row->ctx, 5);
	rd->range_ns[2 * bp->n_ranges + 1] = row->number(row->ctx, 6);
	Edgeprof__V1__Range *r = append_new((void ***)&bp->ranges, &bp->n_ranges, sizeof(*r));
	if (!r)
		return -1;
	edgeprof__v1__range__init(r);
	r->start = row->number(row->ctx, 0);
	r->end = row->number(row->ctx, 1);
	r->count = row->number(row->ctx, 2);
	r->cycles = row->number(row->ctx, 3);
	r->cycled_instructions = row->number(row->ctx, 4);
	return 0;
}

static int add_ip(struct ep_store_read *rd, const struct ep_store_row *row)
{
	Edgeprof__V1__BinaryProfile *bp = rd->bp;
	if (reserve(&rd->ip_ns, &rd->ip_cap, bp->n_ips, 1) != 0)
		return -1;
	rd->ip_ns[bp->n_ips] = row->number(row->ctx, 3);
	Edgeprof__V1__IpCount *c = append_new((void ***)&bp->ips, &bp->n_ips, sizeof(*c));
	if (!c)
		return -1;
	edgeprof__v1__ip_count__init(c);
	c->ip = row->number(row->ctx, 0);
	c->count = row->number(row->ctx, 1);
	c->cycles = row->number(row->ctx, 2);
	return 0;
}

static int add_function(struct ep_store_read *rd, const struct ep_store_row *row)
{
	Edgeprof__V1__BinaryProfile *bp = rd->bp;
	Edgeprof__V1__Function *fn =
	    append_new((void ***)&bp->functions, &bp->n_functions, sizeof(*fn));
	if (!fn)
		return -1;
	edgeprof__v1__function__init(fn);
	fn->start = row->number(row->ctx, 0);
	fn->size = row->number(row->ctx, 2);
	fn->local_index = (uint32_t)row->number(row->ctx, 3);
	return (fn->name = text_copy(row, 1)) ? 0 : -1;
}

static int add_segment(struct ep_store_read *rd, const struct ep_store_row *row)
{
	Edgeprof__V1__BinaryProfile *bp = rd->bp;
	Edgeprof__V1__LoadSegment *g =
	    append_new((void ***)&bp->segments, &bp->n_segments, sizeof(*g));
	if (!g)
		return -1;
	edgeprof__v1__load_segment__init(g);
	g->vaddr = row->number(row->ctx, 0);
	g->offset = row->number(row->ctx, 1);
	g->size = row->number(row->ctx, 2);
	return 0;
}

int ep_store_add_row(struct ep_store_read *rd, enum ep_store_part part,
		     const struct ep_store_row *row)
{
	static int (*const add[EP_STORE_NPARTS])(struct ep_store_read *,
						 const struct ep_store_row *) = {
	    [EP_PART_EDGES] = add_edge,	      [EP_PART_RANGES] = add_range,
	    [EP_PART_IPS] = add_ip,	      [EP_PART_FUNCTIONS] = add_function,
	    [EP_PART_SEGMENTS] = add_segment,
	};
	return add[part](rd, row);
}

int ep_store_add_binary(Edgeprof__V1__BinaryList *list, const struct ep_store_row *row,
			Edgeprof__V1__BinaryInfo **added)
{
	Edgeprof__V1__BinaryInfo *b =
	    append_new((void ***)&list->binaries, &list->n_binaries, sizeof(*b));
	if (!b)
		return -1;
	edgeprof__v1__binary_info__init(b);
	b->build_id = text_copy(row, 0);
	b->arch = text_copy(row, 1);
	b->samples = row->number(row->ctx, 2);
	b->first_seen_s = (int64_t)row->number(row->ctx, 3);
	b->last_seen_s = (int64_t)row->number(row->ctx, 4);
	*added = b;
	return b->build_id && b->arch ? 0 : -1;
}

int ep_store_add_labels(Edgeprof__V1__BinaryInfo *b, const struct ep_store_row *row)
{
	Edgeprof__V1__Labels *l = append_new((void ***)&b->labels, &b->n_labels, sizeof(*l));
	if (!l)
		return -1;
	edgeprof__v1__labels__init(l);
	l->container_id = text_copy(row, 0);
	l->pod = text_copy(row, 1);
	l->namespace_ = text_copy(row, 2);
	l->cgroup = text_copy(row, 3);
	l->process = text_copy(row, 4);
	l->session_id = text_copy(row, 5);
	return l->container_id && l->pod && l->namespace_ && l->cgroup && l->process &&
		       l->session_id
		   ? 0
		   : -1;
}
