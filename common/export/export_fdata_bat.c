/* SPDX-License-Identifier: Apache-2.0 */
/*
 * BOLT's fdata for the input of a BOLTed binary: the profile was taken on a
 * binary written by `llvm-bolt --enable-bat`, and the lines name the input
 * binary's functions and offsets, so the next llvm-bolt run on the input
 * binary uses them. This is what perf2bolt (BOLT 16's and 19's
 * DataAggregator) writes from a recording of a BAT binary, computed the
 * same way from the profile's branches and ranges:
 *
 *  - "boltedcollection" first: llvm-bolt then takes a fall-through from a
 *    block's start (the only offset the table knows of a block) as the
 *    block's fall-through;
 *  - each branch (not returns from BOLT 19 on: its perf2bolt drops them) with
 *    its ends translated (ep_bat_translate: a branch source to its own
 *    entry or its block's start), a cold part's ends named by its hot
 *    function;
 *  - each range (a trace) walked over the table's blocks
 *    (ep_bat_fallthroughs), each fall-through translated alike; a branch
 *    not taken too (perf2bolt sees it inside a trace of the LBR), so a
 *    fall-through is named from its block's start.
 *
 * Functions the table does not cover (left as they were, PLT entries) keep
 * their offsets, with the fall-through edges the agent derived (perf2bolt
 * derives them from its own disassembly).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/elf/elf_bat.h"
#include "common/export/export_internal.h"
#include "common/util/sat.h"

struct bat_line {
	long from_fn, to_fn; /* into the function index; -1: no function */
	uint64_t from, to;   /* offsets, or the address where no function */
	uint64_t mispredicted, count;
};

struct bat_out {
	const struct ep_func_index *fx;
	const struct ep_bat *bat;
	struct bat_line *l;
	size_t n, cap;
	bool oom;
	/* the trace being walked */
	long fn;
	const struct ep_bat_frag *frag;
	uint64_t count;
};

static void add(struct bat_out *o, struct bat_line line)
{
	if (o->n == o->cap) {
		size_t cap = o->cap ? o->cap * 2 : 256;
		struct bat_line *l = realloc(o->l, cap * sizeof(*l));
		if (!l) {
			o->oom = true;
			return;
		}
		o->l = l;
		o->cap = cap;
	}
	o->l[o->n++] = line;
}

/* The function a fragment belongs to: its hot part's, when that is known. */
static long parent(const struct bat_out *o, long k, const struct ep_bat_frag *f)
{
	if (!f || f->hot == f->addr)
		return k;
	long h = ep_func_index_find(o->fx, f->hot);
	return h >= 0 && o->fx->f[h]->start == f->hot ? h : k;
}

/* An end at addr: its function (-1: none) and offset in the input binary. */
static void end_at(const struct bat_out *o, uint64_t addr, bool external, bool src, long *fn,
		   uint64_t *off)
{
	long k = external ? -1 : ep_func_index_find(o->fx, addr);
	*fn = k;
	*off = external ? 0 : addr;
	if (k < 0)
		return;
	const struct ep_bat_frag *f = ep_bat_frag_at(o->bat, o->fx->f[k]->start);
	*off = addr - o->fx->f[k]->start;
	if (f)
		*off = ep_bat_translate(o->bat, f, *off, src);
	*fn = parent(o, k, f);
}

static bool in_bat(const struct bat_out *o, uint64_t addr)
{
	long k = ep_func_index_find(o->fx, addr);
	return k >= 0 && ep_bat_frag_at(o->bat, o->fx->f[k]->start);
}

static void branch(struct bat_out *o, const Edgeprof__V1__Edge *e, uint64_t count, uint64_t mis)
{
	struct bat_line l = {.mispredicted = mis, .count = count};
	end_at(o, e->from, e->from_external, true, &l.from_fn, &l.from);
	end_at(o, e->to, e->to_external, false, &l.to_fn, &l.to);
	if (l.from_fn >= 0 || l.to_fn >= 0)
		add(o, l);
}

static void fallthrough(void *ctx, uint32_t from, uint32_t to)
{
	struct bat_out *o = ctx;
	add(o, (struct bat_line){.from_fn = o->fn,
				 .to_fn = o->fn,
				 .from = ep_bat_translate(o->bat, o->frag, from, true),
				 .to = ep_bat_translate(o->bat, o->frag, to, false),
				 .count = o->count});
}

/* Straight-line code from start to end run count times, as perf2bolt counts
 * a trace: the fall-throughs between the table's blocks it runs through.
 * False when start and end are not in one function the table covers. */
static bool trace(struct bat_out *o, uint64_t start, uint64_t end, uint64_t count)
{
	long k = ep_func_index_find(o->fx, start);
	if (k < 0 || ep_func_index_find(o->fx, end) != k)
		return false;
	uint64_t fstart = o->fx->f[k]->start;
	o->frag = ep_bat_frag_at(o->bat, fstart);
	if (!o->frag)
		return false;
	o->fn = parent(o, k, o->frag);
	o->count = count;
	ep_bat_fallthroughs(o->bat, o->frag, start - fstart, end - fstart, fallthrough, o);
	return true;
}

static void ranges(struct bat_out *o, const Edgeprof__V1__BinaryProfile *bp)
{
	for (size_t i = 0; i < bp->n_ranges && !o->oom; i++)
		if (bp->ranges[i]->count)
			(void)trace(o, bp->ranges[i]->start, bp->ranges[i]->end,
				    bp->ranges[i]->count);
}

static void edges(struct bat_out *o, const Edgeprof__V1__Profile *p,
		  const Edgeprof__V1__BinaryProfile *bp, const Edgeprof__V1__Edge **sorted)
{
	bool gap_ranges = p->config && strcmp(p->config->range_mode, "gap") == 0;
	for (size_t i = 0; i < bp->n_edges;) {
		const Edgeprof__V1__Edge *e = sorted[i];
		uint64_t count = 0, mis = 0;
		for (; i < bp->n_edges && ep_export_same_ends(e, sorted[i]); i++) {
			if (gap_ranges && !sorted[i]->taken)
				continue;
			/* derived fall-throughs stand for the table's only where it
			 * has none */
			bool derived =
			    sorted[i]->kind == EDGEPROF__V1__BRANCH_KIND__BRANCH_FALLTHROUGH;
			if (derived && (e->from_external || in_bat(o, e->from)))
				continue;
			/* a branch not taken is part of the trace it lies in, as
			 * perf2bolt sees it in an LBR: a fall-through from its
			 * block's start */
			if (!sorted[i]->taken && !e->from_external && !e->to_external &&
			    trace(o, e->from, e->to, sorted[i]->count))
				continue;
			ep_add_sat(&count, sorted[i]->count);
			ep_add_sat(&mis, sorted[i]->mispredicted);
		}
		/* BOLT 19's perf2bolt drops returns from a known function
		 * (DataAggregator::doBranch); BOLT 16's keeps them */
		bool ret = o->bat->bolt_version >= 19 &&
			   e->kind == EDGEPROF__V1__BRANCH_KIND__BRANCH_RETURN &&
			   !e->from_external && ep_func_index_find(o->fx, e->from) >= 0;
		if (count && !ret)
			branch(o, e, count, mis);
	}
}

static int cmp_line(const void *pa, const void *pb)
{
	const struct bat_line *a = pa, *b = pb;
	if (a->from_fn != b->from_fn)
		return a->from_fn < b->from_fn ? -1 : 1;
	if (a->from != b->from)
		return a->from < b->from ? -1 : 1;
	if (a->to_fn != b->to_fn)
		return a->to_fn < b->to_fn ? -1 : 1;
	return a->to < b->to ? -1 : a->to > b->to;
}

/* A local as "NAME/FILE/N" where the file says (perf2bolt's name, the same
 * in the input binary however BOLT reordered the locals of one name),
 * "NAME/N" otherwise. */
static void put_end(FILE *out, const struct bat_out *o, long fn, uint64_t off)
{
	if (fn < 0) {
		fprintf(out, "0 [unknown] %" PRIx64, off);
		return;
	}
	const Edgeprof__V1__Function *f = o->fx->f[fn];
	const char *local = f->local_index ? ep_bat_local_name(o->bat, f->start) : NULL;
	if (local)
		fprintf(out, "1 %s %" PRIx64, local, off);
	else if (f->local_index)
		fprintf(out, "1 %s/%" PRIu32 " %" PRIx64, f->name, f->local_index, off);
	else
		fprintf(out, "1 %s %" PRIx64, f->name, off);
}

int ep_export_fdata_bat(const Edgeprof__V1__Profile *p, const Edgeprof__V1__BinaryProfile *bp,
			const struct ep_bat *bat, FILE *out, char *err, size_t errlen)
{
	struct ep_func_index fx;
	if (ep_func_index_init(&fx, bp) != 0)
		return ep_export_oom(err, errlen);
	const Edgeprof__V1__Edge **sorted = ep_export_sorted_edges(bp);
	struct bat_out o = {.fx = &fx, .bat = bat};
	if (sorted) {
		edges(&o, p, bp, sorted);
		ranges(&o, bp);
	}
	int rc = 0;
	if (!sorted || o.oom) {
		rc = ep_export_oom(err, errlen);
		goto out;
	}
	qsort(o.l, o.n, sizeof(*o.l), cmp_line);
	fputs("boltedcollection\n", out);
	for (size_t i = 0; i < o.n;) {
		struct bat_line l = o.l[i++];
		for (; i < o.n && cmp_line(&l, &o.l[i]) == 0; i++) {
			ep_add_sat(&l.count, o.l[i].count);
			ep_add_sat(&l.mispredicted, o.l[i].mispredicted);
		}
		put_end(out, &o, l.from_fn, l.from);
		fputc(' ', out);
		put_end(out, &o, l.to_fn, l.to);
		fprintf(out, " %" PRIu64 " %" PRIu64 "\n", l.mispredicted, l.count);
	}
	rc = ep_export_finish(out, err, errlen);
out:
	free(o.l);
	free(sorted);
	ep_func_index_free(&fx);
	return rc;
}
