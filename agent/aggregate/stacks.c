/* SPDX-License-Identifier: Apache-2.0 */
/*
 * agent --stacks: the call stacks of IP samples, counted per distinct stack
 * (frames as binary index and address) and bounded (EP_STACKS_MAX, or what
 * ep_aggregator_set_max_stacks says): a new stack past the bound is counted
 * as dropped, its sample's IP still counted. At build time each binary's
 * BinaryProfile gets the stacks whose leaf it holds, and the samples whose
 * leaf function has no frame-pointer prologue are counted there: the frame
 * pointer chain skips or invents their callers.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/aggregate/aggregate_internal.h"
#include "agent/resolve/binary.h"

struct stack_ent {
	uint64_t hash, count;
	uint32_t first, n; /* frames[first .. first + n) */
};

struct ep_agg_stacks {
	struct stack_ent *ents;
	size_t n, cap;
	uint32_t *fbin;
	uint64_t *faddr;
	size_t nf, fcap;
	struct ep_u64map index; /* hash (+ probe) -> entry */
	size_t max;
	uint64_t dropped; /* since the aggregator was made */
};

static struct ep_agg_stacks *stacks_of(struct ep_aggregator *a)
{
	if (!a->stacks && (a->stacks = calloc(1, sizeof(*a->stacks))))
		a->stacks->max = EP_STACKS_MAX;
	return a->stacks;
}

void ep_aggregator_set_max_stacks(struct ep_aggregator *a, size_t max)
{
	struct ep_agg_stacks *s = stacks_of(a);
	if (s)
		s->max = max;
}

uint64_t ep_aggregator_stacks_dropped(const struct ep_aggregator *a)
{
	return a->stacks ? a->stacks->dropped : 0;
}

void ep_agg_stacks_free(struct ep_aggregator *a)
{
	struct ep_agg_stacks *s = a->stacks;
	if (!s)
		return;
	free(s->ents);
	free(s->fbin);
	free(s->faddr);
	ep_u64map_free(&s->index);
	free(s);
	a->stacks = NULL;
}

void ep_agg_stacks_reset(struct ep_aggregator *a)
{
	struct ep_agg_stacks *s = a->stacks;
	if (!s)
		return;
	s->n = 0;
	s->nf = 0;
	ep_u64map_clear(&s->index);
}

void ep_agg_stacks_mark(const struct ep_aggregator *a, uint8_t *in_use, size_t n)
{
	const struct ep_agg_stacks *s = a->stacks;
	for (size_t i = 0; s && i < s->nf; i++)
		if (s->fbin[i] < n)
			in_use[s->fbin[i]] = 1;
}

static bool same_stack(const struct ep_agg_stacks *s, const struct stack_ent *e,
		       const struct ep_stack_frame *f, size_t n)
{
	if (e->n != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s->fbin[e->first + i] != f[i].bin || s->faddr[e->first + i] != f[i].vaddr)
			return false;
	return true;
}

static int grow(void **p, size_t *cap, size_t need, size_t each)
{
	if (need <= *cap)
		return 0;
	size_t ncap = *cap ? *cap * 2 : 64;
	while (ncap < need)
		ncap *= 2;
	void *g = realloc(*p, ncap * each);
	if (!g)
		return -1;
	*p = g;
	*cap = ncap;
	return 0;
}

/* A new entry for the stack; -1 past the bound or out of memory. */
static int add_stack(struct ep_agg_stacks *s, uint64_t hash, const struct ep_stack_frame *f,
		     size_t n)
{
	size_t fcap = s->fcap;
	if (s->n >= s->max || grow((void **)&s->ents, &s->cap, s->n + 1, sizeof(*s->ents)) != 0 ||
	    grow((void **)&s->fbin, &fcap, s->nf + n, sizeof(*s->fbin)) != 0 ||
	    grow((void **)&s->faddr, &s->fcap, s->nf + n, sizeof(*s->faddr)) != 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		s->fbin[s->nf + i] = f[i].bin;
		s->faddr[s->nf + i] = f[i].vaddr;
	}
	s->ents[s->n++] = (struct stack_ent){hash, 1, (uint32_t)s->nf, (uint32_t)n};
	s->nf += n;
	return 0;
}

void ep_aggregate_stack(struct ep_aggregator *a, const struct ep_stack_frame *f, size_t n)
{
	struct ep_agg_stacks *s = stacks_of(a);
	if (!s || n == 0)
		return;
	uint64_t h = 0x9e3779b97f4a7c15ULL;
	for (size_t i = 0; i < n; i++)
		h = ep_hash_u64(h ^ f[i].vaddr ^ ((uint64_t)f[i].bin << 48));
	/* another stack of the same hash takes the next key */
	for (uint64_t key = h;; key++) {
		bool inserted;
		uint64_t *slot = ep_u64map_upsert(&s->index, key, &inserted);
		if (!slot) {
			s->dropped++;
			return;
		}
		if (!inserted) {
			struct stack_ent *e = &s->ents[*slot];
			if (!same_stack(s, e, f, n))
				continue;
			e->count++;
			return;
		}
		*slot = s->n;
		if (add_stack(s, h, f, n) != 0) {
			ep_u64map_remove(&s->index, key);
			s->dropped++;
		}
		return;
	}
}

/* Whether the function at sym_start (a code address of bin) begins with
 * the frame-pointer prologue, after an endbr64 if any: 1 yes, 0 no, -1
 * unknown (not x86-64, its bytes unreadable). */
static int has_fp_prologue(const struct ep_binary *bin, int fd, uint64_t start)
{
	if (ep_binary_arch(bin) != EP_ARCH_X86_64 || fd < 0)
		return -1;
	size_t nseg;
	const struct ep_load_segment *seg = ep_binary_load_segments(bin, &nseg);
	for (size_t i = 0; i < nseg; i++) {
		if (start < seg[i].vaddr || start + 8 > seg[i].vaddr + seg[i].filesz)
			continue;
		uint8_t b[8];
		if (pread(fd, b, sizeof(b), (off_t)(seg[i].offset + start - seg[i].vaddr)) !=
		    (ssize_t)sizeof(b))
			return -1;
		const uint8_t *p = b;
		static const uint8_t endbr64[4] = {0xf3, 0x0f, 0x1e, 0xfa};
		if (memcmp(p, endbr64, 4) == 0)
			p += 4;
		/* push %rbp; mov %rsp,%rbp (either encoding of the mov) */
		return p[0] == 0x55 && p[1] == 0x48 && (p[2] == 0x89 || p[2] == 0x8b) &&
		       (p[3] == 0xe5 || p[3] == 0xec);
	}
	return -1;
}

/* k of other binary b in bp->stack_binaries (1-based), added if new. */
static uint32_t other_binary(struct ep_aggregator *a, uint32_t *others, size_t *nothers,
			     Edgeprof__V1__BinaryProfile *bp, uint32_t b)
{
	for (size_t k = 0; k < *nothers; k++)
		if (others[k] == b)
			return (uint32_t)k + 1;
	const struct ep_binary *ob =
	    b < ep_binreg_count(a->binaries) ? ep_binreg_at(a->binaries, b) : NULL;
	const char *name = !ob				   ? ""
			   : ep_binary_build_id_hex(ob)[0] ? ep_binary_build_id_hex(ob)
							   : ep_binary_path(ob);
	char *dup = strdup(name);
	if (!dup)
		return 0;
	others[*nothers] = b;
	bp->stack_binaries[(*nothers)++] = dup;
	bp->n_stack_binaries = *nothers;
	return (uint32_t)*nothers;
}

static Edgeprof__V1__StackCount *stack_message(struct ep_aggregator *a, const struct stack_ent *e,
					       uint32_t index, uint32_t *others, size_t *nothers,
					       Edgeprof__V1__BinaryProfile *bp)
{
	const struct ep_agg_stacks *s = a->stacks;
	Edgeprof__V1__StackCount *m = malloc(sizeof(*m));
	if (!m)
		return NULL;
	edgeprof__v1__stack_count__init(m);
	m->count = e->count;
	m->frames = malloc(e->n * sizeof(*m->frames));
	bool mixed = false;
	for (uint32_t i = 0; i < e->n; i++)
		mixed = mixed || s->fbin[e->first + i] != index;
	m->frame_binaries = mixed ? calloc(e->n, sizeof(*m->frame_binaries)) : NULL;
	if (!m->frames || (mixed && !m->frame_binaries)) {
		protobuf_c_message_free_unpacked(&m->base, NULL);
		return NULL;
	}
	m->n_frames = e->n;
	m->n_frame_binaries = mixed ? e->n : 0;
	for (uint32_t i = 0; i < e->n; i++) {
		m->frames[i] = s->faddr[e->first + i];
		uint32_t b = s->fbin[e->first + i];
		if (mixed && b != index)
			m->frame_binaries[i] = other_binary(a, others, nothers, bp, b);
	}
	return m;
}

int ep_agg_stacks_attach(struct ep_aggregator *a, uint32_t index, Edgeprof__V1__BinaryProfile *bp)
{
	const struct ep_agg_stacks *s = a->stacks;
	size_t mine = 0;
	for (size_t i = 0; s && i < s->n; i++)
		mine += s->fbin[s->ents[i].first] == index;
	if (!mine)
		return 0;
	/* every other binary a frame is in, at most one per frame */
	size_t most = 0;
	for (size_t i = 0; i < s->n; i++)
		if (s->fbin[s->ents[i].first] == index)
			most += s->ents[i].n;
	bp->stacks = calloc(mine, sizeof(*bp->stacks));
	bp->stack_binaries = calloc(most, sizeof(*bp->stack_binaries));
	uint32_t *others = calloc(most, sizeof(*others));
	int rc = bp->stacks && bp->stack_binaries && others ? 0 : -1;
	size_t nothers = 0;
	const struct ep_binary *bin = ep_binreg_at(a->binaries, index);
	int fd = open(ep_binary_path(bin), O_RDONLY | O_CLOEXEC);
	struct ep_u64map prologue; /* function start -> 1 + has_fp_prologue */
	ep_u64map_init(&prologue);
	for (size_t i = 0; rc == 0 && i < s->n; i++) {
		const struct stack_ent *e = &s->ents[i];
		if (s->fbin[e->first] != index)
			continue;
		Edgeprof__V1__StackCount *m = stack_message(a, e, index, others, &nothers, bp);
		if (!m) {
			rc = -1;
			break;
		}
		bp->stacks[bp->n_stacks++] = m;
		const struct ep_symbol *sym = ep_binary_symbol_at(bin, m->frames[0]);
		bool inserted;
		uint64_t *fp = sym ? ep_u64map_upsert(&prologue, sym->start, &inserted) : NULL;
		if (fp && inserted)
			*fp = (uint64_t)(1 + has_fp_prologue(bin, fd, sym->start));
		if (fp && *fp == 1)
			bp->stack_samples_no_frame_pointer += e->count;
	}
	ep_u64map_free(&prologue);
	if (fd >= 0)
		close(fd);
	free(others);
	return rc;
}
