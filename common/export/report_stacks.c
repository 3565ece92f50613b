/* SPDX-License-Identifier: Apache-2.0 */
/*
 * agent --stacks in the report: a binary's hottest call stacks, leaf first,
 * by function (stacks that differ only in addresses within the same
 * functions are one line). A frame in another binary is named by that
 * binary's function when the profile holds its BinaryProfile, else by the
 * binary (its path's last part, or build-id) and address. When most stack
 * samples have a leaf without frame pointers the stacks are not drawn:
 * their callers would be wrong; the report says why.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/export/export_internal.h"

/* frames of a stack shown; deeper ones are "..." */
#define SHOWN_FRAMES 12

struct named_stack {
	char *text;
	uint64_t count;
};

static int by_text(const void *pa, const void *pb)
{
	return strcmp(((const struct named_stack *)pa)->text,
		      ((const struct named_stack *)pb)->text);
}

static int by_count_desc(const void *pa, const void *pb)
{
	const struct named_stack *a = pa, *b = pb;
	if (a->count != b->count)
		return a->count > b->count ? -1 : 1;
	return strcmp(a->text, b->text);
}

/* The other binaries of bp's stacks: each's BinaryProfile in p, if any. */
struct others {
	const Edgeprof__V1__BinaryProfile **bp;
	struct ep_func_index *fx;
	bool *made;
};

static const Edgeprof__V1__BinaryProfile *find_binary(const Edgeprof__V1__Profile *p,
						      const char *name)
{
	for (size_t i = 0; name[0] && i < p->n_binaries; i++) {
		const Edgeprof__V1__BinaryProfile *b = p->binaries[i];
		const char *its = b->build_id[0] ? b->build_id : b->n_paths ? b->paths[0] : "";
		if (strcmp(its, name) == 0)
			return b;
	}
	return NULL;
}

/* Appends frame k's name to buf. */
static void frame_name(char *buf, size_t len, const Edgeprof__V1__BinaryProfile *bp,
		       const struct ep_func_index *fx, struct others *o,
		       const Edgeprof__V1__StackCount *st, size_t k)
{
	uint32_t other = k < st->n_frame_binaries ? st->frame_binaries[k] : 0;
	uint64_t addr = st->frames[k];
	const struct ep_func_index *ix = fx;
	const char *bin = "";
	if (other && other <= bp->n_stack_binaries) {
		size_t j = other - 1;
		bin = bp->stack_binaries[j];
		if (!o->made[j] && o->bp[j] && ep_func_index_init(&o->fx[j], o->bp[j]) == 0)
			o->made[j] = true;
		ix = o->made[j] ? &o->fx[j] : NULL;
	}
	long f = ix ? ep_func_index_find(ix, addr) : -1;
	size_t at = strlen(buf);
	if (at + 1 >= len)
		return;
	if (f >= 0) {
		snprintf(buf + at, len - at, "%s", ix->f[f]->name);
	} else {
		const char *slash = strrchr(bin, '/');
		snprintf(buf + at, len - at, "%.12s+0x%" PRIx64, slash ? slash + 1 : bin, addr);
	}
}

static char *stack_text(const Edgeprof__V1__BinaryProfile *bp, const struct ep_func_index *fx,
			struct others *o, const Edgeprof__V1__StackCount *st)
{
	/* names past the buffer are cut: a line, not a record of the stack */
	char buf[SHOWN_FRAMES * 96 + 16] = "";
	const size_t room = sizeof(buf) - 8; /* " <- ..." always fits after it */
	for (size_t k = 0; k < st->n_frames && k < SHOWN_FRAMES; k++) {
		if (k && strlen(buf) + 4 < room)
			strcat(buf, " <- ");
		frame_name(buf, room, bp, fx, o, st, k);
	}
	if (st->n_frames > SHOWN_FRAMES)
		strcat(buf, " <- ...");
	return strdup(buf);
}

static void print_stacks(struct named_stack *ns, size_t n, uint64_t with, uint64_t samples,
			 unsigned top, FILE *out)
{
	/* one line per stack of functions */
	qsort(ns, n, sizeof(*ns), by_text);
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		if (m && strcmp(ns[m - 1].text, ns[i].text) == 0) {
			ns[m - 1].count += ns[i].count;
			free(ns[i].text);
		} else {
			ns[m++] = ns[i];
		}
	}
	qsort(ns, m, sizeof(*ns), by_count_desc);
	fprintf(out,
		"  hottest call stacks (%" PRIu64 " samples with stacks, of %" PRIu64
		"):\n  %12s %7s  %s\n",
		with, samples, "samples", "share", "stack (leaf first, <- its callers)");
	for (size_t i = 0; i < m; i++) {
		if (i < top)
			fprintf(out, "  %12" PRIu64 " %6.1f%%  %s\n", ns[i].count,
				with ? 100.0 * (double)ns[i].count / (double)with : 0.0,
				ns[i].text);
		free(ns[i].text);
	}
}

int ep_report_stacks(const Edgeprof__V1__Profile *p, const Edgeprof__V1__BinaryProfile *bp,
		     const struct ep_func_index *fx, unsigned top, FILE *out)
{
	if (!bp->n_stacks)
		return 0;
	uint64_t with = 0;
	for (size_t i = 0; i < bp->n_stacks; i++)
		with += bp->stacks[i]->count;
	uint64_t flagged = bp->stack_samples_no_frame_pointer;
	if (flagged * 2 >= with) {
		fprintf(out,
			"  call stacks not shown: %" PRIu64 " of their %" PRIu64
			" samples are in functions without frame pointers, whose callers the "
			"stacks get wrong (build with -fno-omit-frame-pointer)\n",
			flagged, with);
		return 0;
	}
	size_t nb = bp->n_stack_binaries;
	struct others o = {calloc(nb + 1, sizeof(*o.bp)), calloc(nb + 1, sizeof(*o.fx)),
			   calloc(nb + 1, sizeof(*o.made))};
	struct named_stack *ns = calloc(bp->n_stacks, sizeof(*ns));
	int rc = o.bp && o.fx && o.made && ns ? 0 : -1;
	for (size_t j = 0; rc == 0 && j < nb; j++)
		o.bp[j] = find_binary(p, bp->stack_binaries[j]);
	size_t n = 0;
	for (size_t i = 0; rc == 0 && i < bp->n_stacks; i++) {
		if (!bp->stacks[i]->n_frames)
			continue;
		ns[n].count = bp->stacks[i]->count;
		if (!(ns[n++].text = stack_text(bp, fx, &o, bp->stacks[i])))
			rc = -1;
	}
	if (rc == 0) {
		print_stacks(ns, n, with, bp->samples, top, out);
		if (flagged)
			fprintf(out,
				"  warning: %" PRIu64 " of these samples are in functions without "
				"frame pointers: their callers are wrong or missing\n",
				flagged);
	} else {
		for (size_t i = 0; ns && i < n; i++)
			free(ns[i].text);
	}
	for (size_t j = 0; o.made && j < nb; j++)
		if (o.made[j])
			ep_func_index_free(&o.fx[j]);
	free(o.bp);
	free(o.fx);
	free(o.made);
	free(ns);
	return rc;
}
