/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The decoder keeps, per binary:
 *  - sites: every branch instruction met, with a dense id;
 *  - ranges: every straight-line range met, with a dense id;
 *  - runs: the straight line from an address A up to the first instruction
 *    that leaves it unconditionally, stored as the ordered list of
 *    (branch site, range ending there) pairs. A walk between two taken
 *    branches is then a cached run lookup and a scan of that list: capstone
 *    only ever sees an instruction once.
 */
#include "decoder.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../util/u64map.h"
#include "decoder_arch.h"
#include "decoder_debug.h"

#define NO_RUN	     UINT32_MAX
#define NOT_A_BRANCH (UINT64_MAX - 1)
/* AutoFDO's bound for one gap; no real straight line is longer. */
#define MAX_RUN_BYTES (1u << 20)

enum run_end {
	RUN_END_BRANCH,	  /* the last item is an unconditional transfer */
	RUN_END_NO_CODE,  /* ran off the code */
	RUN_END_BAD_INSN, /* bytes that do not decode */
};

struct run {
	uint64_t start;
	uint64_t end; /* address after the last decoded instruction */
	uint32_t first_item;
	uint32_t nitems;
	uint8_t end_kind;
	uint64_t *insn_bitmap; /* instruction starts, built on first walk_to_ip */
};

struct ep_decoder {
	enum ep_arch arch;
	const struct ep_code_segment *segments;
	size_t nsegments;
	csh cs;
	cs_insn *insn;

	struct ep_site *sites;
	uint32_t nsites, sites_cap;
	uint32_t *site_target_run; /* run at a direct site's target, NO_RUN until known */
	uint32_t site_target_run_cap;
	struct ep_u64map site_by_addr;

	struct ep_range_def *ranges;
	uint32_t nranges, ranges_cap;
	struct ep_u64map range_index; /* hash of (start, end) -> range id (probing on hash) */

	struct run *runs;
	uint32_t nruns, runs_cap;
	struct ep_u64map run_by_start;
	struct ep_walk_step *items;
	uint32_t nitems, items_cap;
};

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
	for (uint32_t i = 0; i < d->nruns; i++)
		free(d->runs[i].insn_bitmap);
	free(d->runs);
	free(d->items);
	free(d->sites);
	free(d->site_target_run);
	free(d->ranges);
	ep_u64map_free(&d->site_by_addr);
	ep_u64map_free(&d->range_index);
	ep_u64map_free(&d->run_by_start);
	free(d);
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

static int grow(void **array, uint32_t *cap, size_t elem, uint32_t need)
{
	if (need <= *cap)
		return 0;
	uint32_t n = *cap ? *cap : 256;
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

/* Decodes one instruction; false when the bytes are missing or invalid. */
static bool decode_one(struct ep_decoder *d, uint64_t vaddr, struct ep_insn_info *info)
{
	size_t avail;
	const uint8_t *code = code_at(d, vaddr, &avail);
	if (!code)
		return false;
	uint64_t addr = vaddr;
	if (!cs_disasm_iter(d->cs, &code, &avail, &addr, d->insn))
		return false;
	if (d->arch == EP_ARCH_X86_64)
		ep_x86_classify(d->insn, info);
	else
		ep_arm64_classify(d->insn, info);
	return true;
}

static uint32_t add_site(struct ep_decoder *d, uint64_t vaddr, const struct ep_insn_info *info)
{
	uint64_t *slot = ep_u64map_upsert(&d->site_by_addr, vaddr, NULL);
	if (!slot)
		return EP_NO_SITE;
	if (*slot != 0 && *slot != NOT_A_BRANCH)
		return (uint32_t)(*slot - 1);
	if (grow((void **)&d->sites, &d->sites_cap, sizeof(*d->sites), d->nsites + 1) ||
	    grow((void **)&d->site_target_run, &d->site_target_run_cap, sizeof(*d->site_target_run),
		 d->nsites + 1))
		return EP_NO_SITE;
	uint32_t id = d->nsites++;
	d->sites[id] = (struct ep_site){.addr = vaddr,
					.target = info->target,
					.fallthrough = vaddr + info->len,
					.kind = info->kind,
					.len = info->len};
	d->site_target_run[id] = NO_RUN;
	*slot = (uint64_t)id + 1; /* 0 means "new slot" */
	return id;
}

uint32_t ep_decoder_site_at(struct ep_decoder *d, uint64_t vaddr)
{
	uint64_t *slot = ep_u64map_get(&d->site_by_addr, vaddr);
	if (slot)
		return *slot == NOT_A_BRANCH ? EP_NO_SITE : (uint32_t)(*slot - 1);
	struct ep_insn_info info;
	if (!decode_one(d, vaddr, &info) || info.kind == EP_BRANCH_NONE) {
		slot = ep_u64map_upsert(&d->site_by_addr, vaddr, NULL);
		if (slot)
			*slot = NOT_A_BRANCH;
		return EP_NO_SITE;
	}
	return add_site(d, vaddr, &info);
}

static uint32_t range_id(struct ep_decoder *d, uint64_t start, uint64_t end)
{
	uint64_t h = ep_hash_u64(start) ^ (end * 0x9e3779b97f4a7c15ULL);
	for (;; h++) {
		uint64_t *slot = ep_u64map_get(&d->range_index, h);
		if (!slot)
			break;
		const struct ep_range_def *r = &d->ranges[*slot];
		if (r->start == start && r->end == end)
			return (uint32_t)*slot;
	}
	if (grow((void **)&d->ranges, &d->ranges_cap, sizeof(*d->ranges), d->nranges + 1))
		return UINT32_MAX;
	uint64_t *slot = ep_u64map_upsert(&d->range_index, h, NULL);
	if (!slot)
		return UINT32_MAX;
	*slot = d->nranges;
	d->ranges[d->nranges] = (struct ep_range_def){.start = start, .end = end};
	return d->nranges++;
}

static int push_item(struct ep_decoder *d, uint32_t site, uint32_t range)
{
	if (grow((void **)&d->items, &d->items_cap, sizeof(*d->items), d->nitems + 1))
		return -1;
	d->items[d->nitems++] = (struct ep_walk_step){.site = site, .range = range};
	return 0;
}

/* Decodes the straight line from start and stores it as a run. A site
 * already known at an address is reused, so runs that overlap (a jump into
 * the middle of another run) share site and range ids. */
static uint32_t build_run(struct ep_decoder *d, uint64_t start)
{
	if (grow((void **)&d->runs, &d->runs_cap, sizeof(*d->runs), d->nruns + 1))
		return NO_RUN;
	struct run run = {.start = start, .first_item = d->nitems, .end_kind = RUN_END_NO_CODE};
	uint64_t pc = start, segment_start = start;
	while (pc - start < MAX_RUN_BYTES) {
		struct ep_insn_info info;
		size_t avail;
		if (!code_at(d, pc, &avail)) {
			run.end_kind = RUN_END_NO_CODE;
			break;
		}
		if (!decode_one(d, pc, &info)) {
			run.end_kind = RUN_END_BAD_INSN;
			break;
		}
		uint64_t next = pc + info.len;
		if (info.kind != EP_BRANCH_NONE) {
			uint32_t site = add_site(d, pc, &info);
			uint32_t range = range_id(d, segment_start, pc);
			if (site == EP_NO_SITE || range == UINT32_MAX || push_item(d, site, range))
				return NO_RUN;
			if (info.kind != EP_BRANCH_COND) {
				run.end_kind = RUN_END_BRANCH;
				pc = next;
				break;
			}
			segment_start = next;
		}
		pc = next;
	}
	run.end = pc;
	run.nitems = d->nitems - run.first_item;
	uint64_t *slot = ep_u64map_upsert(&d->run_by_start, start, NULL);
	if (!slot)
		return NO_RUN;
	*slot = d->nruns;
	d->runs[d->nruns] = run;
	return d->nruns++;
}

static uint32_t run_for(struct ep_decoder *d, uint64_t start, uint32_t from_site)
{
	bool direct = from_site < d->nsites && d->sites[from_site].target == start;
	if (direct && d->site_target_run[from_site] != NO_RUN)
		return d->site_target_run[from_site];
	uint32_t run;
	uint64_t *slot = ep_u64map_get(&d->run_by_start, start);
	run = slot ? (uint32_t)*slot : build_run(d, start);
	if (direct)
		d->site_target_run[from_site] = run;
	return run;
}

static enum ep_walk_status end_status(const struct run *r)
{
	return r->end_kind == RUN_END_BAD_INSN ? EP_WALK_BAD_INSN : EP_WALK_NO_CODE;
}

enum ep_walk_status ep_decoder_walk_to_branch(struct ep_decoder *d, uint64_t start, uint64_t end,
					      uint32_t from_site, struct ep_walk_step *steps,
					      size_t max_steps, size_t *nsteps,
					      struct ep_walk_step *closing)
{
	*nsteps = 0;
	/* a start outside the code makes an empty run that ends in NO_CODE */
	uint32_t r = run_for(d, start, from_site);
	if (r == NO_RUN)
		return EP_WALK_NO_CODE;
	const struct run *run = &d->runs[r];
	const struct ep_walk_step *items = d->items + run->first_item;
	for (uint32_t i = 0; i < run->nitems; i++) {
		uint64_t addr = d->sites[items[i].site].addr;
		if (addr == end) {
			if (i > max_steps)
				return EP_WALK_TOO_LONG;
			memcpy(steps, items, i * sizeof(*steps));
			*nsteps = i;
			*closing = items[i];
			return EP_WALK_OK;
		}
		if (addr > end)
			return EP_WALK_OVERRUN;
	}
	if (run->end_kind == RUN_END_BRANCH)
		return EP_WALK_BLOCKED;
	return end < run->end ? EP_WALK_OVERRUN : end_status(run);
}

/* Instruction starts of a run, decoded again only for runs whose sample IP
 * is checked (the trigger), once. */
static const uint64_t *run_bitmap(struct ep_decoder *d, struct run *run)
{
	if (run->insn_bitmap)
		return run->insn_bitmap;
	size_t bits = (size_t)(run->end - run->start) + 1;
	uint64_t *bm = calloc((bits + 63) / 64, sizeof(*bm));
	if (!bm)
		return NULL;
	for (uint64_t pc = run->start; pc < run->end;) {
		struct ep_insn_info info;
		bm[(pc - run->start) / 64] |= 1ULL << ((pc - run->start) % 64);
		if (!decode_one(d, pc, &info))
			break;
		pc += info.len;
	}
	run->insn_bitmap = bm;
	return bm;
}

enum ep_walk_status ep_decoder_walk_to_ip(struct ep_decoder *d, uint64_t start, uint64_t ip,
					  uint32_t from_site, struct ep_walk_step *steps,
					  size_t max_steps, size_t *nsteps)
{
	*nsteps = 0;
	size_t avail;
	if (!code_at(d, start, &avail))
		return EP_WALK_NO_CODE;
	if (ip == start)
		return EP_WALK_OK;
	if (ip < start)
		return EP_WALK_OVERRUN;
	uint32_t r = run_for(d, start, from_site);
	if (r == NO_RUN)
		return EP_WALK_NO_CODE;
	struct run *run = &d->runs[r];
	const struct ep_walk_step *items = d->items + run->first_item;
	size_t n = 0;
	for (uint32_t i = 0; i < run->nitems; i++) {
		const struct ep_site *s = &d->sites[items[i].site];
		if (s->addr >= ip)
			break;
		if (s->kind != EP_BRANCH_COND)
			return EP_WALK_BLOCKED; /* the IP lies past a jump, call or return */
		if (n == max_steps)
			return EP_WALK_TOO_LONG;
		steps[n++] = items[i];
	}
	if (ip >= run->end)
		return run->end_kind == RUN_END_BRANCH ? EP_WALK_BLOCKED : end_status(run);
	const uint64_t *bm = run_bitmap(d, run);
	if (!bm)
		return EP_WALK_NO_CODE;
	uint64_t bit = ip - run->start;
	if (!(bm[bit / 64] & (1ULL << (bit % 64))))
		return EP_WALK_OVERRUN;
	*nsteps = n;
	return EP_WALK_OK;
}

enum ep_walk_status ep_decoder_line_insns(struct ep_decoder *d, uint64_t start, uint64_t end,
					  uint64_t *addrs, size_t max, size_t *n)
{
	*n = 0;
	for (uint64_t pc = start;;) {
		struct ep_insn_info info;
		size_t avail;
		if (!code_at(d, pc, &avail))
			return EP_WALK_NO_CODE;
		if (!decode_one(d, pc, &info))
			return EP_WALK_BAD_INSN;
		if (*n == max)
			return EP_WALK_TOO_LONG;
		addrs[(*n)++] = pc;
		if (pc == end)
			return EP_WALK_OK;
		if (pc > end)
			return EP_WALK_OVERRUN;
		if (info.kind != EP_BRANCH_NONE && info.kind != EP_BRANCH_COND)
			return EP_WALK_BLOCKED;
		pc += info.len;
	}
}
