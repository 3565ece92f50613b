/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The decoder keeps, per binary:
 *  - sites: every branch instruction met, with a dense id;
 *  - ranges: every straight-line range met, with a dense id;
 *  - runs: the straight line from an address A up to the first instruction
 *    that leaves it unconditionally, stored as the ordered list of
 *    (branch site, range ending there) pairs and a bitmap of instruction
 *    starts. A walk between two taken branches is then a cached run lookup
 *    (by the landing branch's site when known, else by address) and a scan
 *    of that list; capstone runs only while a run is built, and a run that
 *    reaches an older run's start takes that run's tail instead of decoding
 *    it again.
 */
#include "common/decode/decoder.h"

#include <capstone.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/decode/decoder_debug.h"
#include "common/util/u64map.h"

#define NO_RUN	     UINT32_MAX
#define NO_RANGE     UINT32_MAX
#define NOT_A_BRANCH (UINT64_MAX - 1)
/* No real straight line is this long; past it the bytes are surely data. */
#define MAX_RUN_BYTES (1u << 20)

enum run_end {
	RUN_END_BRANCH,	  /* the last item is an unconditional transfer */
	RUN_END_NO_CODE,  /* ran off the code */
	RUN_END_BAD_INSN, /* bytes that do not decode */
};

struct run {
	uint64_t start;
	uint64_t end;	     /* address after the last decoded instruction */
	uint32_t first_item; /* into items[] and item_addrs[] */
	uint32_t nitems;
	uint32_t bitmap; /* first word in bitmaps[]: instruction starts in [start, end) */
	uint8_t end_kind;
};

struct ep_decoder {
	enum ep_arch arch;
	const struct ep_code_segment *segments;
	size_t nsegments;
	csh cs;
	cs_insn *insn;
	/* parts of the segments that are data (sorted), none when unknown */
	const struct ep_addr_range *data;
	size_t ndata;

	struct ep_site *sites;
	uint32_t nsites, sites_cap;
	/* runs at a direct site's target and at its fall-through, NO_RUN until
	 * known: a walk after a direct branch needs no hashing */
	uint32_t *site_target_run, *site_ft_run;
	uint32_t site_runs_cap;
	struct ep_u64map site_by_addr; /* addr -> site id + 1, or NOT_A_BRANCH */

	struct ep_range_def *ranges;
	uint32_t nranges, ranges_cap;
	struct ep_u64map range_index; /* hash of (start, end) -> range id (probing on hash) */

	struct run *runs;
	uint32_t nruns, runs_cap;
	struct ep_u64map run_by_start;
	/* items of all runs back to back; item_addrs mirrors the site
	 * addresses so the walk loop reads one dense array */
	struct ep_walk_step *items;
	uint64_t *item_addrs;
	uint32_t nitems, items_cap, item_addrs_cap;
	uint64_t *bitmaps;
	uint32_t nbitmap_words, bitmaps_cap;
	/* instruction offsets of the run being built */
	uint32_t *scratch;
	uint32_t scratch_cap;
	/* Walks already done, by (start, end): stacks repeat heavily, so most
	 * gaps were walked before. Direct-mapped, sized by the code (memo_size),
	 * made on the first walk; an entry names the run's items, which never
	 * move in items[]. */
	struct walk_memo *memo;
	uint32_t memo_mask;
};

struct walk_memo {
	uint64_t start, end;
	uint32_t first; /* steps: items[first .. first + n), closing: items[first + n] */
	uint32_t n;	/* MEMO_EMPTY when unused */
};
#define MEMO_MAX   16384 /* 512 KiB per decoder walked */
#define MEMO_MIN   256
#define MEMO_EMPTY UINT32_MAX

const char *ep_branch_kind_name(enum ep_branch_kind kind)
{
	static const char *const names[] = {"none", "conditional",   "jump",   "jump_indirect",
					    "call", "call_indirect", "return", "other"};
	return (unsigned)kind < sizeof(names) / sizeof(names[0]) ? names[kind] : "unknown";
}

const char *ep_walk_status_name(enum ep_walk_status status)
{
	switch (status) {
	case EP_WALK_OK:
		return "ok";
	case EP_WALK_NO_CODE:
		return "no code";
	case EP_WALK_BLOCKED:
		return "blocked by an unconditional branch";
	case EP_WALK_OVERRUN:
		return "end not on the straight line";
	case EP_WALK_BAD_INSN:
		return "undecodable bytes";
	case EP_WALK_TOO_LONG:
		return "too many branches";
	}
	return "unknown";
}

struct ep_decoder *ep_decoder_new(enum ep_arch arch, const struct ep_code_segment *segments,
				  size_t nsegments)
{
	cs_arch cs_arch;
	cs_mode cs_mode;
	switch (arch) {
	case EP_ARCH_X86_64:
		cs_arch = CS_ARCH_X86;
		cs_mode = CS_MODE_64;
		break;
	case EP_ARCH_AARCH64:
		cs_arch = CS_ARCH_ARM64;
		cs_mode = CS_MODE_ARM;
		break;
	default:
		return NULL;
	}
	struct ep_decoder *d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	d->arch = arch;
	d->segments = segments;
	d->nsegments = nsegments;
	if (cs_open(cs_arch, cs_mode, &d->cs) != CS_ERR_OK) {
		free(d);
		return NULL;
	}
	cs_option(d->cs, CS_OPT_DETAIL, CS_OPT_ON);
	d->insn = cs_malloc(d->cs);
	if (!d->insn) {
		cs_close(&d->cs);
		free(d);
		return NULL;
	}
	return d;
}

void ep_decoder_free(struct ep_decoder *d)
{
	if (!d)
		return;
	cs_free(d->insn, 1);
	cs_close(&d->cs);
	free(d->runs);
	free(d->items);
	free(d->item_addrs);
	free(d->bitmaps);
	free(d->scratch);
	free(d->memo);
	free(d->sites);
	free(d->site_target_run);
	free(d->site_ft_run);
	free(d->ranges);
	ep_u64map_free(&d->site_by_addr);
	ep_u64map_free(&d->range_index);
	ep_u64map_free(&d->run_by_start);
	free(d);
}

void ep_decoder_set_data(struct ep_decoder *d, const struct ep_addr_range *ranges, size_t n)
{
	d->data = ranges;
	d->ndata = n;
}

uint32_t ep_decoder_site_count(const struct ep_decoder *d)
{
	return d->nsites;
}

const struct ep_site *ep_decoder_site(const struct ep_decoder *d, uint32_t site)
{
	return &d->sites[site];
}

const struct ep_site *ep_decoder_sites(const struct ep_decoder *d)
{
	return d->sites;
}

uint32_t ep_decoder_range_count(const struct ep_decoder *d)
{
	return d->nranges;
}

const struct ep_range_def *ep_decoder_range(const struct ep_decoder *d, uint32_t range)
{
	return &d->ranges[range];
}

static int grow(void **array, uint32_t *cap, size_t elem, uint64_t need)
{
	if (need <= *cap)
		return 0;
	if (need > UINT32_MAX / 2)
		return -1;
	uint32_t n = *cap ? *cap : 64;
	while (n < need)
		n *= 2;
	void *p = realloc(*array, (size_t)n * elem);
	if (!p)
		return -1;
	*array = p;
	*cap = n;
	return 0;
}

/* The code bytes at vaddr and how many follow in its segment. */
static const uint8_t *code_at(const struct ep_decoder *d, uint64_t vaddr, size_t *avail)
{
	for (size_t i = 0; i < d->nsegments; i++) {
		const struct ep_code_segment *s = &d->segments[i];
		if (vaddr >= s->vaddr && vaddr - s->vaddr < s->size) {
			*avail = s->size - (size_t)(vaddr - s->vaddr);
			return s->bytes + (vaddr - s->vaddr);
		}
	}
	return NULL;
}

enum decode_result { DECODED, DECODE_NO_CODE, DECODE_BAD };

static bool in_data(const struct ep_decoder *d, uint64_t vaddr)
{
	size_t lo = 0, hi = d->ndata;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (d->data[mid].end <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < d->ndata && d->data[lo].start <= vaddr;
}

/* AArch64: fixed 4-byte words, classified from their encoding. A word cut
 * by the segment's end is no code; a misaligned address holds no
 * instruction at all (the CPU faults on such a PC). */
static enum decode_result decode_arm64(const struct ep_decoder *d, uint64_t vaddr,
				       struct ep_insn_info *info)
{
	size_t avail;
	const uint8_t *code = code_at(d, vaddr, &avail);
	if (!code || avail < 4 || (d->ndata && in_data(d, vaddr)))
		return DECODE_NO_CODE;
	if (vaddr & 3)
		return DECODE_BAD;
	uint32_t w = (uint32_t)code[0] | (uint32_t)code[1] << 8 | (uint32_t)code[2] << 16 |
		     (uint32_t)code[3] << 24;
	ep_arm64_classify_word(w, vaddr, info);
	return DECODED;
}

static enum decode_result decode_one(struct ep_decoder *d, uint64_t vaddr,
				     struct ep_insn_info *info)
{
	if (d->arch == EP_ARCH_AARCH64)
		return decode_arm64(d, vaddr, info);
	size_t avail;
	const uint8_t *code = code_at(d, vaddr, &avail);
	if (!code || (d->ndata && in_data(d, vaddr)))
		return DECODE_NO_CODE;
	uint64_t addr = vaddr;
	if (!cs_disasm_iter(d->cs, &code, &avail, &addr, d->insn))
		return DECODE_BAD;
	ep_x86_classify(d->insn, info);
	return DECODED;
}

bool ep_decoder_insn(struct ep_decoder *d, uint64_t vaddr, struct ep_insn_info *info)
{
	return decode_one(d, vaddr, info) == DECODED;
}

bool ep_decoder_insn_text(struct ep_decoder *d, uint64_t vaddr, struct ep_insn_info *info,
			  char *text, size_t textlen)
{
	if (decode_one(d, vaddr, info) != DECODED)
		return false;
	if (!textlen)
		return true;
	if (d->arch == EP_ARCH_AARCH64) {
		/* capstone only writes the text here, and may not know the word */
		size_t avail;
		const uint8_t *code = code_at(d, vaddr, &avail);
		uint32_t w = (uint32_t)code[0] | (uint32_t)code[1] << 8 | (uint32_t)code[2] << 16 |
			     (uint32_t)code[3] << 24;
		uint64_t addr = vaddr;
		avail = 4;
		if (!cs_disasm_iter(d->cs, &code, &avail, &addr, d->insn)) {
			if (!ep_arm64_branch_text(w, vaddr, text, textlen))
				snprintf(text, textlen, ".inst 0x%08x", (unsigned)w);
			return true;
		}
	}
	snprintf(text, textlen, "%s%s%s", d->insn->mnemonic, d->insn->op_str[0] ? " " : "",
		 d->insn->op_str);
	return true;
}

static uint32_t add_site(struct ep_decoder *d, uint64_t vaddr, const struct ep_insn_info *info)
{
	uint64_t *slot = ep_u64map_upsert(&d->site_by_addr, vaddr, NULL);
	if (!slot)
		return EP_NO_SITE;
	if (*slot != 0 && *slot != NOT_A_BRANCH)
		return (uint32_t)(*slot - 1);
	uint32_t cap = d->site_runs_cap;
	if (grow((void **)&d->sites, &d->sites_cap, sizeof(*d->sites), d->nsites + 1ull) ||
	    grow((void **)&d->site_target_run, &cap, sizeof(*d->site_target_run), d->nsites + 1ull))
		return EP_NO_SITE;
	cap = d->site_runs_cap;
	if (grow((void **)&d->site_ft_run, &cap, sizeof(*d->site_ft_run), d->nsites + 1ull))
		return EP_NO_SITE;
	d->site_runs_cap = cap;
	uint32_t id = d->nsites++;
	d->sites[id] = (struct ep_site){.addr = vaddr,
					.target = info->target,
					.fallthrough = vaddr + info->len,
					.kind = info->kind,
					.len = info->len};
	d->site_target_run[id] = NO_RUN;
	d->site_ft_run[id] = NO_RUN;
	*slot = (uint64_t)id + 1; /* 0 is what upsert gives a new key */
	return id;
}

uint32_t ep_decoder_site_at(struct ep_decoder *d, uint64_t vaddr)
{
	uint64_t *slot = ep_u64map_get(&d->site_by_addr, vaddr);
	if (slot)
		return *slot == NOT_A_BRANCH ? EP_NO_SITE : (uint32_t)(*slot - 1);
	struct ep_insn_info info;
	enum decode_result res = decode_one(d, vaddr, &info);
	if (res == DECODE_NO_CODE)
		return EP_NO_SITE; /* not remembered: any address may be asked */
	if (res == DECODE_BAD || info.kind == EP_BRANCH_NONE) {
		slot = ep_u64map_upsert(&d->site_by_addr, vaddr, NULL);
		if (slot)
			*slot = NOT_A_BRANCH;
		return EP_NO_SITE;
	}
	return add_site(d, vaddr, &info);
}

static uint64_t range_hash(uint64_t start, uint64_t end)
{
	return ep_hash_u64(start) ^ (end * 0x9e3779b97f4a7c15ULL);
}

static uint32_t range_id(struct ep_decoder *d, uint64_t start, uint64_t end, uint32_t insns)
{
	/* two ranges may hash alike: probe on to the next hash value */
	uint64_t h = range_hash(start, end);
	for (;; h++) {
		uint64_t *slot = ep_u64map_get(&d->range_index, h);
		if (!slot)
			break;
		const struct ep_range_def *r = &d->ranges[*slot];
		if (r->start == start && r->end == end)
			return (uint32_t)*slot;
	}
	if (grow((void **)&d->ranges, &d->ranges_cap, sizeof(*d->ranges), d->nranges + 1ull))
		return NO_RANGE;
	uint64_t *slot = ep_u64map_upsert(&d->range_index, h, NULL);
	if (!slot)
		return NO_RANGE;
	*slot = d->nranges;
	d->ranges[d->nranges] = (struct ep_range_def){.start = start, .end = end, .insns = insns};
	return d->nranges++;
}

static int push_item(struct ep_decoder *d, uint32_t site, uint32_t range)
{
	uint32_t cap = d->items_cap;
	if (grow((void **)&d->items, &cap, sizeof(*d->items), d->nitems + 1ull))
		return -1;
	cap = d->items_cap;
	if (grow((void **)&d->item_addrs, &cap, sizeof(*d->item_addrs), d->nitems + 1ull))
		return -1;
	d->items_cap = cap;
	d->items[d->nitems] = (struct ep_walk_step){.site = site, .range = range};
	d->item_addrs[d->nitems] = d->sites[site].addr;
	d->nitems++;
	return 0;
}

static int push_offset(struct ep_decoder *d, uint32_t *n, uint64_t offset)
{
	if (grow((void **)&d->scratch, &d->scratch_cap, sizeof(*d->scratch), *n + 1ull))
		return -1;
	d->scratch[(*n)++] = (uint32_t)offset;
	return 0;
}

static bool bit_set(const uint64_t *bm, uint64_t bit)
{
	return bm[bit / 64] & (1ULL << (bit % 64));
}

/*
 * Decodes the straight line from start and stores it as a run. Reaching the
 * start of a run already built, the rest is that run's tail: its items are
 * copied (only the first range differs) instead of being decoded again, so
 * capstone sees most instructions once however many targets lead into them.
 * Returns NO_RUN when start is no code (not cached: any address may come) or
 * memory runs out.
 */
static uint32_t build_run(struct ep_decoder *d, uint64_t start)
{
	size_t avail;
	if (!code_at(d, start, &avail) || (d->ndata && in_data(d, start)))
		return NO_RUN;
	if (grow((void **)&d->runs, &d->runs_cap, sizeof(*d->runs), d->nruns + 1ull))
		return NO_RUN;
	struct run run = {.start = start, .first_item = d->nitems, .end_kind = RUN_END_NO_CODE};
	uint32_t noffsets = 0, tail = NO_RUN;
	uint32_t segment_insns = 0;
	uint64_t pc = start, segment_start = start;
	while (pc - start < MAX_RUN_BYTES) {
		if (pc != start) {
			uint64_t *slot = ep_u64map_get(&d->run_by_start, pc);
			if (slot) {
				tail = (uint32_t)*slot;
				break;
			}
		}
		struct ep_insn_info info;
		enum decode_result res = decode_one(d, pc, &info);
		if (res != DECODED) {
			run.end_kind = res == DECODE_BAD ? RUN_END_BAD_INSN : RUN_END_NO_CODE;
			break;
		}
		if (push_offset(d, &noffsets, pc - start))
			goto fail;
		segment_insns++;
		uint64_t next = pc + info.len;
		if (info.kind != EP_BRANCH_NONE) {
			uint32_t site = add_site(d, pc, &info);
			if (site == EP_NO_SITE)
				goto fail;
			uint32_t range = range_id(d, segment_start, pc, segment_insns);
			if (range == NO_RANGE || push_item(d, site, range))
				goto fail;
			if (info.kind != EP_BRANCH_COND) {
				run.end_kind = RUN_END_BRANCH;
				pc = next;
				break;
			}
			segment_start = next;
			segment_insns = 0;
		}
		pc = next;
	}
	run.end = pc;
	uint64_t bits = pc - start;
	if (tail != NO_RUN) {
		const struct run t = d->runs[tail];
		for (uint32_t i = 0; i < t.nitems; i++) {
			struct ep_walk_step it = d->items[t.first_item + i];
			if (i == 0) {
				/* this run's part, then the older run's first range */
				uint32_t insns = segment_insns + d->ranges[it.range].insns;
				it.range =
				    range_id(d, segment_start, d->item_addrs[t.first_item], insns);
				if (it.range == NO_RANGE)
					goto fail;
			}
			if (push_item(d, it.site, it.range))
				goto fail;
		}
		const uint64_t *tbm = d->bitmaps + t.bitmap;
		for (uint64_t b = 0; b < t.end - t.start; b++)
			if (bit_set(tbm, b) && push_offset(d, &noffsets, b + (pc - start)))
				goto fail;
		run.end = t.end;
		run.end_kind = t.end_kind;
		bits = t.end - start;
	}
	run.nitems = d->nitems - run.first_item;

	uint64_t words = (bits + 63) / 64;
	if (grow((void **)&d->bitmaps, &d->bitmaps_cap, sizeof(*d->bitmaps),
		 d->nbitmap_words + words + 1))
		goto fail;
	run.bitmap = d->nbitmap_words;
	uint64_t *bm = d->bitmaps + run.bitmap;
	memset(bm, 0, (words + 1) * sizeof(*bm));
	for (uint32_t i = 0; i < noffsets; i++)
		bm[d->scratch[i] / 64] |= 1ULL << (d->scratch[i] % 64);
	d->nbitmap_words += (uint32_t)words;

	uint64_t *slot = ep_u64map_upsert(&d->run_by_start, start, NULL);
	if (!slot)
		goto fail;
	*slot = d->nruns;
	d->runs[d->nruns] = run;
	return d->nruns++;
fail:
	/* sites and ranges made so far stay valid; only this run's items go */
	d->nitems = run.first_item;
	return NO_RUN;
}

static uint32_t run_for(struct ep_decoder *d, uint64_t start, uint32_t from_site)
{
	enum { NO_CACHE, TARGET, FALLTHROUGH } which = NO_CACHE;
	if (from_site < d->nsites) {
		const struct ep_site *s = &d->sites[from_site];
		if (s->target == start && s->kind != EP_BRANCH_JUMP_INDIRECT &&
		    s->kind != EP_BRANCH_CALL_INDIRECT) {
			which = TARGET;
			if (d->site_target_run[from_site] != NO_RUN)
				return d->site_target_run[from_site];
		} else if (s->fallthrough == start) {
			which = FALLTHROUGH;
			if (d->site_ft_run[from_site] != NO_RUN)
				return d->site_ft_run[from_site];
		}
	}
	uint64_t *slot = ep_u64map_get(&d->run_by_start, start);
	/* build_run may add sites and so move the per-site arrays: index
	 * them only afterwards */
	uint32_t run = slot ? (uint32_t)*slot : build_run(d, start);
	if (which == TARGET)
		d->site_target_run[from_site] = run;
	else if (which == FALLTHROUGH)
		d->site_ft_run[from_site] = run;
	return run;
}

static enum ep_walk_status end_status(const struct run *r)
{
	switch (r->end_kind) {
	case RUN_END_BRANCH:
		return EP_WALK_BLOCKED;
	case RUN_END_BAD_INSN:
		return EP_WALK_BAD_INSN;
	default:
		return EP_WALK_NO_CODE;
	}
}

static inline struct walk_memo *memo_slot(struct ep_decoder *d, uint64_t start, uint64_t end)
{
	uint64_t h = (start * 0x9e3779b97f4a7c15ULL) ^ (end * 0xc2b2ae3d27d4eb4fULL);
	return &d->memo[(h >> 40) & d->memo_mask];
}

/* One entry per 8 bytes of code, a power of two within [MEMO_MIN,
 * MEMO_MAX]: the gaps a profile walks grow with the code, and a small
 * binary (most of a node's) need not pay, in memory and in clearing it,
 * what a large one does. Sparser than 8 bytes slows the walks of every
 * branch target of a 31 KB binary (decoder_walk_bench) by 20-30%. */
static uint32_t memo_size(const struct ep_decoder *d)
{
	uint64_t code = 0;
	for (size_t i = 0; i < d->nsegments; i++)
		code += d->segments[i].size;
	uint32_t n = MEMO_MIN;
	while (n < MEMO_MAX && (uint64_t)n * 8 < code)
		n *= 2;
	return n;
}

static enum ep_walk_status __attribute__((noinline))
walk_uncached(struct ep_decoder *d, uint64_t start, uint64_t end, uint32_t from_site,
	      uint32_t *first, uint32_t *nsteps)
{
	uint32_t r = run_for(d, start, from_site);
	if (r == NO_RUN)
		return EP_WALK_NO_CODE;
	const struct run *run = &d->runs[r];
	if (end < start)
		return EP_WALK_OVERRUN;
	uint32_t n = run->nitems, i = 0;
	/* a run of no branch has no items, and a decoder with none no array:
	 * NULL + 0 is undefined */
	const uint64_t *addrs = n ? d->item_addrs + run->first_item : NULL;
	/* addresses rise along a run: the first one not below end decides */
	while (i < n && addrs[i] < end)
		i++;
	if (i == n) {
		if (end < run->end)
			return EP_WALK_OVERRUN; /* an instruction that is no branch */
		return end_status(run);
	}
	if (addrs[i] != end)
		return EP_WALK_OVERRUN;
	*first = run->first_item;
	*nsteps = i;
	if (!d->memo) {
		uint32_t entries = memo_size(d);
		d->memo = malloc(entries * sizeof(*d->memo));
		if (d->memo) {
			memset(d->memo, 0xff, entries * sizeof(*d->memo));
			d->memo_mask = entries - 1;
		}
	}
	if (d->memo)
		*memo_slot(d, start, end) =
		    (struct walk_memo){.start = start, .end = end, .first = *first, .n = i};
	return EP_WALK_OK;
}

enum ep_walk_status ep_decoder_walk_lookup(struct ep_decoder *d, uint64_t start, uint64_t end,
					   uint32_t from_site, size_t max_steps,
					   const struct ep_walk_step **steps, size_t *nsteps,
					   struct ep_walk_step *closing)
{
	uint32_t first, n;
	const struct walk_memo *m = d->memo ? memo_slot(d, start, end) : NULL;
	if (m && m->n != MEMO_EMPTY && m->start == start && m->end == end) {
		first = m->first;
		n = m->n;
	} else {
		enum ep_walk_status ws = walk_uncached(d, start, end, from_site, &first, &n);
		if (ws != EP_WALK_OK) {
			*nsteps = 0;
			return ws;
		}
	}
	if (n > max_steps) {
		*nsteps = 0;
		return EP_WALK_TOO_LONG;
	}
	*steps = d->items + first;
	*nsteps = n;
	*closing = d->items[first + n];
	return EP_WALK_OK;
}

const struct ep_walk_step *ep_decoder_steps(const struct ep_decoder *d)
{
	return d->items;
}

enum ep_walk_status ep_decoder_walk_to_branch(struct ep_decoder *d, uint64_t start, uint64_t end,
					      uint32_t from_site, struct ep_walk_step *steps,
					      size_t max_steps, size_t *nsteps,
					      struct ep_walk_step *closing)
{
	const struct ep_walk_step *found = NULL;
	enum ep_walk_status ws =
	    ep_decoder_walk_lookup(d, start, end, from_site, max_steps, &found, nsteps, closing);
	if (ws == EP_WALK_OK)
		memcpy(steps, found, *nsteps * sizeof(*steps));
	return ws;
}

enum ep_walk_status ep_decoder_walk_to_ip(struct ep_decoder *d, uint64_t start, uint64_t ip,
					  uint32_t from_site, struct ep_walk_step *steps,
					  size_t max_steps, size_t *nsteps)
{
	*nsteps = 0;
	uint32_t r = run_for(d, start, from_site);
	if (r == NO_RUN)
		return EP_WALK_NO_CODE;
	if (ip == start)
		return EP_WALK_OK;
	if (ip < start)
		return EP_WALK_OVERRUN;
	const struct run *run = &d->runs[r];
	if (ip >= run->end)
		return end_status(run);
	if (!bit_set(d->bitmaps + run->bitmap, ip - start))
		return EP_WALK_OVERRUN;
	const uint64_t *addrs = d->item_addrs + run->first_item;
	const struct ep_walk_step *items = d->items + run->first_item;
	uint32_t n = run->nitems, i = 0;
	/* only the run's last item can be unconditional, and ip lies before
	 * run->end, so every item below ip is conditional */
	while (i < n && addrs[i] < ip)
		i++;
	if (i > max_steps)
		return EP_WALK_TOO_LONG;
	memcpy(steps, items, i * sizeof(*steps));
	*nsteps = i;
	return EP_WALK_OK;
}

enum ep_walk_status ep_decoder_line_insns(struct ep_decoder *d, uint64_t start, uint64_t end,
					  uint64_t *addrs, size_t max, size_t *n)
{
	*n = 0;
	for (uint64_t pc = start;;) {
		if (pc > end)
			return EP_WALK_OVERRUN;
		struct ep_insn_info info;
		enum decode_result res = decode_one(d, pc, &info);
		if (res != DECODED)
			return res == DECODE_BAD ? EP_WALK_BAD_INSN : EP_WALK_NO_CODE;
		if (*n == max)
			return EP_WALK_TOO_LONG;
		addrs[(*n)++] = pc;
		if (pc == end)
			return EP_WALK_OK;
		if (info.kind != EP_BRANCH_NONE && info.kind != EP_BRANCH_COND)
			return EP_WALK_BLOCKED;
		pc += info.len;
	}
}
