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

static int add_edge(Edgeprof__V1__BinaryProfile *bp, const struct ep_store_row *row)
{
	Edgeprof__V1__Edge *e = malloc(sizeof(*e));
	if (!e)
		return -1;
	edgeprof__v1__edge__init(e);
	if (EP_PB_APPEND(bp->edges, bp->n_edges, e) != 0) {
		free(e);
		return -1;
	}
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

static int add_range(Edgeprof__V1__BinaryProfile *bp, const struct ep_store_row *row)
{
	Edgeprof__V1__Range *r = malloc(sizeof(*r));
	if (!r)
		return -1;
	edgeprof__v1__range__init(r);
	if (EP_PB_APPEND(bp->ranges, bp->n_ranges, r) != 0) {
		free(r);
		return -1;
	}
	r->start = row->number(row->ctx, 0);
	r->end = row->number(row->ctx, 1);
	r->count = row->number(row->ctx, 2);
	return 0;
}

static int add_ip(Edgeprof__V1__BinaryProfile *bp, const struct ep_store_row *row)
{
	Edgeprof__V1__IpCount *c = malloc(sizeof(*c));
	if (!c)
		return -1;
	edgeprof__v1__ip_count__init(c);
	if (EP_PB_APPEND(bp->ips, bp->n_ips, c) != 0) {
		free(c);
		return -1;
	}
	c->ip = row->number(row->ctx, 0);
	c->count = row->number(row->ctx, 1);
	return 0;
}

static int add_function(Edgeprof__V1__BinaryProfile *bp, const struct ep_store_row *row)
{
	Edgeprof__V1__Function *fn = malloc(sizeof(*fn));
	if (!fn)
		return -1;
	edgeprof__v1__function__init(fn);
	if (EP_PB_APPEND(bp->functions, bp->n_functions, fn) != 0) {
		free(fn);
		return -1;
	}
	fn->start = row->number(row->ctx, 0);
	fn->size = row->number(row->ctx, 2);
	return (fn->name = text_copy(row, 1)) ? 0 : -1;
}

static int add_segment(Edgeprof__V1__BinaryProfile *bp, const struct ep_store_row *row)
{
	Edgeprof__V1__LoadSegment *g = malloc(sizeof(*g));
	if (!g)
		return -1;
	edgeprof__v1__load_segment__init(g);
	if (EP_PB_APPEND(bp->segments, bp->n_segments, g) != 0) {
		free(g);
		return -1;
	}
	g->vaddr = row->number(row->ctx, 0);
	g->offset = row->number(row->ctx, 1);
	g->size = row->number(row->ctx, 2);
	return 0;
}

int ep_store_add_row(Edgeprof__V1__BinaryProfile *bp, enum ep_store_part part,
		     const struct ep_store_row *row)
{
	static int (*const add[EP_STORE_NPARTS])(Edgeprof__V1__BinaryProfile *,
						 const struct ep_store_row *) = {
	    [EP_PART_EDGES] = add_edge,	      [EP_PART_RANGES] = add_range,
	    [EP_PART_IPS] = add_ip,	      [EP_PART_FUNCTIONS] = add_function,
	    [EP_PART_SEGMENTS] = add_segment,
	};
	return add[part](bp, row);
}

int ep_store_add_binary(Edgeprof__V1__BinaryList *list, const struct ep_store_row *row,
			Edgeprof__V1__BinaryInfo **added)
{
	Edgeprof__V1__BinaryInfo *b = malloc(sizeof(*b));
	if (!b)
		return -1;
	edgeprof__v1__binary_info__init(b);
	if (EP_PB_APPEND(list->binaries, list->n_binaries, b) != 0) {
		free(b);
		return -1;
	}
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
	Edgeprof__V1__Labels *l = malloc(sizeof(*l));
	if (!l)
		return -1;
	edgeprof__v1__labels__init(l);
	if (EP_PB_APPEND(b->labels, b->n_labels, l) != 0) {
		free(l);
		return -1;
	}
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
