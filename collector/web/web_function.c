/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One function's page (/function?build_id=&addr=): its control-flow graph
 * and its annotated disassembly.
 *
 * Blocks come from the shared decoder (common/decode) over the function's
 * bytes as uploaded (collector/binaries): a block starts at the function's
 * entry, at every direct branch target inside it, after every branch, and
 * at every target the profile's edges land on (indirect jumps). Counts:
 * each instruction's executions are the sum of the ranges holding it; each
 * branch's taken / not-taken / mispredicted counts are its edges'.
 *
 * Layout: Graphviz's dot, run here (libgvc), written as SVG into the page.
 * Chosen over a layout library in the browser because the page then needs
 * no script at all (nothing to fetch, pin or audit, the page works in any
 * browser and in `chromium --dump-dom`), dot's layered layout is the one
 * CFG readers know (objdump --visualize-jumps, BOLT's and LLVM's
 * -view-cfg), and the SVG's nodes and edges are plain elements tests can
 * count. libgvc is not thread-safe: layouts are serialised.
 */
#include <gvc.h>
#include <gvplugin.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "collector/web/web_internal.h"
#include "common/elf/demangle.h"
#include "common/elf/elf_symbols.h"
#include "common/profile/model.h"
#include "common/profile/profile_file.h"
#include "common/util/sat.h"

#define MAX_INSNS	  20000
#define MAX_LAYOUT_BLOCKS 400
#define MAX_UNSIZED_BYTES 4096
#define INSN_TEXT	  96

struct insn {
	uint64_t addr;
	uint64_t target;  /* direct target, 0 when none */
	uint64_t count;	  /* executions, from the ranges */
	uint64_t samples; /* IP samples at it */
	uint64_t taken, not_taken, mispredicted;
	uint32_t block;
	uint8_t len, kind;
	bool leader;
	char text[INSN_TEXT];
};

enum edge_type { E_TAKEN, E_NOT_TAKEN, E_FALLTHROUGH };
static const char *const edge_type_names[] = {"taken", "not-taken", "fallthrough"};

struct cfg_edge {
	uint32_t src, dst; /* block indexes */
	uint8_t type;	   /* enum edge_type */
	uint64_t count;
	bool profiled; /* from the profile (else from the code alone, count 0) */
};

struct block {
	uint32_t first, last; /* insn indexes */
	uint64_t count;
	uint64_t samples; /* its instructions' IP samples */
	/* what colours it: count, or samples where the function has IP
	 * samples and no branch counts (cfg.ip_heat) */
	uint64_t heat;
	/* the cycles of the ranges ending in the block (at its closing
	 * branch) and the instructions they ran: its CPI (report --cpi's) */
	uint64_t cycles, cycled_insns;
};

struct cfg {
	struct insn *insns;
	size_t ninsns;
	struct block *blocks;
	size_t nblocks;
	struct cfg_edge *edges;
	size_t nedges, edges_cap;
	uint64_t max_count, max_edge;
	uint64_t max_samples, max_heat; /* of an instruction; of a block's heat */
	uint64_t samples;		/* IP samples in the function (as /binary counts) */
	bool ip_heat;			/* blocks coloured by IP samples */
	uint64_t start, end;
	bool truncated;			      /* stopped at bytes that do not decode or MAX_INSNS */
	const struct ep_store_filter *filter; /* the page's, kept on its links */
};

static void cfg_free(struct cfg *c)
{
	free(c->insns);
	free(c->blocks);
	free(c->edges);
}

/* index of the first instruction at or after addr */
static size_t insn_from(const struct cfg *c, uint64_t addr)
{
	size_t lo = 0, hi = c->ninsns;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (c->insns[mid].addr < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* index of the instruction at addr, or -1 */
static long insn_at(const struct cfg *c, uint64_t addr)
{
	size_t i = insn_from(c, addr);
	return i < c->ninsns && c->insns[i].addr == addr ? (long)i : -1;
}

static bool ends_block(uint8_t kind)
{
	return kind != EP_BRANCH_NONE && kind != EP_BRANCH_CALL && kind != EP_BRANCH_CALL_INDIRECT;
}

static bool intra_kind(int kind)
{
	return kind != EDGEPROF__V1__BRANCH_KIND__BRANCH_CALL &&
	       kind != EDGEPROF__V1__BRANCH_KIND__BRANCH_CALL_INDIRECT &&
	       kind != EDGEPROF__V1__BRANCH_KIND__BRANCH_RETURN;
}

static int decode_function(struct cfg *c, struct ep_decoder *d)
{
	size_t cap = 256;
	c->insns = malloc(cap * sizeof(*c->insns));
	if (!c->insns)
		return -1;
	for (uint64_t pc = c->start; pc < c->end;) {
		if (c->ninsns == MAX_INSNS) {
			c->truncated = true;
			break;
		}
		if (c->ninsns == cap) {
			struct insn *n = realloc(c->insns, 2 * cap * sizeof(*n));
			if (!n)
				return -1;
			c->insns = n;
			cap *= 2;
		}
		struct insn *in = &c->insns[c->ninsns];
		memset(in, 0, sizeof(*in));
		struct ep_insn_info info;
		if (!ep_decoder_insn_text(d, pc, &info, in->text, sizeof(in->text)) || !info.len) {
			c->truncated = true;
			break;
		}
		in->addr = pc;
		in->len = info.len;
		in->kind = info.kind;
		in->target = info.target;
		c->ninsns++;
		pc += info.len;
	}
	return c->ninsns ? 0 : -1;
}

static int add_edge(struct cfg *c, uint32_t src, uint32_t dst, enum edge_type type, uint64_t count,
		    bool profiled)
{
	for (size_t i = 0; i < c->nedges; i++) {
		struct cfg_edge *e = &c->edges[i];
		if (e->src == src && e->dst == dst && (e->type == type || !profiled)) {
			if (profiled) {
				e->count += count;
				e->profiled = true;
			}
			return 0;
		}
	}
	if (c->nedges == c->edges_cap) {
		size_t cap = c->edges_cap ? 2 * c->edges_cap : 64;
		struct cfg_edge *n = realloc(c->edges, cap * sizeof(*n));
		if (!n)
			return -1;
		c->edges = n;
		c->edges_cap = cap;
	}
	c->edges[c->nedges++] = (struct cfg_edge){
	    .src = src, .dst = dst, .type = (uint8_t)type, .count = count, .profiled = profiled};
	return 0;
}

static bool edge_inside(const struct cfg *c, const Edgeprof__V1__Edge *e)
{
	return !e->from_external && !e->to_external && e->from >= c->start && e->from < c->end &&
	       e->to >= c->start && e->to < c->end && intra_kind(e->kind);
}

static void mark_leader(struct cfg *c, uint64_t addr)
{
	long i = insn_at(c, addr);
	if (i >= 0)
		c->insns[i].leader = true;
}

static int build_cfg(struct cfg *c, const Edgeprof__V1__BinaryProfile *bp)
{
	/* counts per instruction: ranges by a difference array */
	int64_t *diff = calloc(c->ninsns + 1, sizeof(*diff));
	if (!diff)
		return -1;
	for (size_t i = 0; i < bp->n_ranges; i++) {
		const Edgeprof__V1__Range *r = bp->ranges[i];
		if (r->end < c->start || r->start >= c->end || r->end < r->start)
			continue;
		size_t a = insn_from(c, r->start), b = insn_from(c, r->end);
		if (b == c->ninsns || c->insns[b].addr != r->end)
			b = b ? b - 1 : 0; /* end past the decoded code: up to the last */
		if (a > b || a >= c->ninsns)
			continue;
		diff[a] += (int64_t)r->count;
		diff[b + 1] -= (int64_t)r->count;
	}
	int64_t run = 0;
	for (size_t i = 0; i < c->ninsns; i++) {
		run += diff[i];
		c->insns[i].count = run > 0 ? (uint64_t)run : 0;
	}
	free(diff);
	/* leaders */
	c->insns[0].leader = true;
	for (size_t i = 0; i < c->ninsns; i++) {
		const struct insn *in = &c->insns[i];
		if (ends_block(in->kind) && i + 1 < c->ninsns)
			c->insns[i + 1].leader = true;
		if (in->target && (in->kind == EP_BRANCH_COND || in->kind == EP_BRANCH_JUMP))
			mark_leader(c, in->target);
	}
	for (size_t i = 0; i < bp->n_edges; i++) {
		const Edgeprof__V1__Edge *e = bp->edges[i];
		if (e->from_external || e->from < c->start || e->from >= c->end)
			continue;
		long k = insn_at(c, e->from);
		if (k >= 0 && ep_web_is_branch(e)) {
			struct insn *in = &c->insns[k];
			if (e->taken)
				in->taken += e->count;
			else
				in->not_taken += e->count;
			in->mispredicted += e->mispredicted;
		}
		if (edge_inside(c, e))
			mark_leader(c, e->to);
	}
	/* blocks */
	c->blocks = calloc(c->ninsns, sizeof(*c->blocks));
	if (!c->blocks)
		return -1;
	for (size_t i = 0; i < c->ninsns; i++) {
		if (c->insns[i].leader) {
			c->blocks[c->nblocks].first = (uint32_t)i;
			c->blocks[c->nblocks].count = c->insns[i].count;
			c->nblocks++;
		}
		c->insns[i].block = (uint32_t)(c->nblocks - 1);
		c->blocks[c->nblocks - 1].last = (uint32_t)i;
		if (c->insns[i].count > c->max_count)
			c->max_count = c->insns[i].count;
	}
	for (size_t i = 0; i < bp->n_ranges; i++) {
		const Edgeprof__V1__Range *r = bp->ranges[i];
		long k =
		    r->cycles && r->end >= c->start && r->end < c->end ? insn_at(c, r->end) : -1;
		if (k < 0)
			continue;
		struct block *b = &c->blocks[c->insns[k].block];
		ep_add_sat(&b->cycles, r->cycles);
		ep_add_sat(&b->cycled_insns, r->cycled_instructions);
	}
	/* edges: the profile's first, then the code's own (count 0) */
	for (size_t i = 0; i < bp->n_edges; i++) {
		const Edgeprof__V1__Edge *e = bp->edges[i];
		if (!edge_inside(c, e))
			continue;
		long a = insn_at(c, e->from), b = insn_at(c, e->to);
		if (a < 0 || b < 0)
			continue;
		enum edge_type t = e->kind == EDGEPROF__V1__BRANCH_KIND__BRANCH_FALLTHROUGH
				       ? E_FALLTHROUGH
				   : e->taken ? E_TAKEN
					      : E_NOT_TAKEN;
		if (add_edge(c, c->insns[a].block, c->insns[b].block, t, e->count, true) != 0)
			return -1;
	}
	for (size_t k = 0; k < c->nblocks; k++) {
		const struct insn *last = &c->insns[c->blocks[k].last];
		bool has_next = k + 1 < c->nblocks;
		long t = last->target ? insn_at(c, last->target) : -1;
		int rc = 0;
		if (last->kind == EP_BRANCH_COND) {
			if (t >= 0)
				rc |=
				    add_edge(c, (uint32_t)k, c->insns[t].block, E_TAKEN, 0, false);
			if (has_next)
				rc |= add_edge(c, (uint32_t)k, (uint32_t)k + 1, E_NOT_TAKEN, 0,
					       false);
		} else if (last->kind == EP_BRANCH_JUMP) {
			if (t >= 0)
				rc |=
				    add_edge(c, (uint32_t)k, c->insns[t].block, E_TAKEN, 0, false);
		} else if (!ends_block(last->kind) && has_next) {
			rc |= add_edge(c, (uint32_t)k, (uint32_t)k + 1, E_FALLTHROUGH, 0, false);
		}
		if (rc)
			return -1;
	}
	for (size_t i = 0; i < c->nedges; i++)
		if (c->edges[i].count > c->max_edge)
			c->max_edge = c->edges[i].count;
	return 0;
}

/* Each instruction's IP samples, its block's sum, and what colours the
 * blocks: IP samples where the function has them and no branch counts (a
 * node without a branch-stack PMU sends only IPs), so its hot code still
 * shows. The IPs counted are those /binary gives the function
 * (ep_web_function_index; fn -1: code in no function, the IPs in none), so
 * the two pages agree. */
static void add_samples(struct cfg *c, const Edgeprof__V1__BinaryProfile *bp, long fn)
{
	for (size_t i = 0; i < bp->n_ips; i++) {
		const Edgeprof__V1__IpCount *ip = bp->ips[i];
		if (ip->ip < c->start || ip->ip >= c->end ||
		    ep_web_function_index(bp, ip->ip) != fn)
			continue;
		ep_add_sat(&c->samples, ip->count);
		long k = insn_at(c, ip->ip);
		if (k < 0)
			continue;
		ep_add_sat(&c->insns[k].samples, ip->count);
		ep_add_sat(&c->blocks[c->insns[k].block].samples, ip->count);
		if (c->insns[k].samples > c->max_samples)
			c->max_samples = c->insns[k].samples;
	}
	c->ip_heat = !c->max_count && c->max_samples;
	for (size_t k = 0; k < c->nblocks; k++) {
		struct block *b = &c->blocks[k];
		b->heat = c->ip_heat ? b->samples : b->count;
		if (b->heat > c->max_heat)
			c->max_heat = b->heat;
	}
}

/* 0 (cold) .. 1 (hottest), on a log scale: counts span many decades */
static double heat(uint64_t count, uint64_t max)
{
	if (!count || !max)
		return 0.0;
	return log1p((double)count) / log1p((double)max);
}

/* A colour from pale to deep orange by heat. */
static void heat_colour(double h, bool dark, char *buf, size_t len)
{
	static const double lo[2][3] = {{255, 245, 235}, {253, 174, 107}};
	static const double hi[2][3] = {{241, 105, 19}, {166, 54, 3}};
	const double *a = lo[dark], *b = hi[dark];
	snprintf(buf, len, "#%02x%02x%02x", (unsigned)(a[0] + (b[0] - a[0]) * h),
		 (unsigned)(a[1] + (b[1] - a[1]) * h), (unsigned)(a[2] + (b[2] - a[2]) * h));
}

static void count_text(char *buf, size_t len, uint64_t n)
{
	char digits[32], *o = buf;
	int dl = snprintf(digits, sizeof(digits), "%" PRIu64, n);
	for (int i = 0; i < dl && (size_t)(o - buf) + 2 < len; i++) {
		if (i && (dl - i) % 3 == 0)
			*o++ = ',';
		*o++ = digits[i];
	}
	*o = '\0';
}

/* Which edges close a cycle: depth-first from the entry block (then from
 * every block not reached), an edge to a block still on the path is a back
 * edge. Self-loops are not (dot draws them apart). NULL when out of memory. */
static bool *back_edges(const struct cfg *c)
{
	bool *back = calloc(c->nedges + 1, sizeof(*back));
	uint8_t *state = calloc(c->nblocks + 1, 1);		/* 0 new, 1 on the path, 2 done */
	size_t *first = calloc(c->nblocks + 1, sizeof(*first)); /* edges by source */
	size_t *order = calloc(c->nedges + 1, sizeof(*order));
	struct frame {
		uint32_t block;
		size_t next; /* into order[] */
	} *stack = calloc(c->nblocks + 1, sizeof(*stack));
	if (!back || !state || !first || !order || !stack) {
		free(back);
		back = NULL;
		goto out;
	}
	for (size_t i = 0; i < c->nedges; i++)
		first[c->edges[i].src + 1]++;
	for (size_t k = 0; k < c->nblocks; k++)
		first[k + 1] += first[k];
	size_t *fill = calloc(c->nblocks + 1, sizeof(*fill));
	if (!fill) {
		free(back);
		back = NULL;
		goto out;
	}
	for (size_t i = 0; i < c->nedges; i++)
		order[first[c->edges[i].src] + fill[c->edges[i].src]++] = i;
	free(fill);
	for (size_t root = 0; root < c->nblocks; root++) {
		if (state[root])
			continue;
		size_t depth = 0;
		stack[depth++] = (struct frame){(uint32_t)root, first[root]};
		state[root] = 1;
		while (depth) {
			struct frame *f = &stack[depth - 1];
			if (f->next == first[f->block + 1]) {
				state[f->block] = 2;
				depth--;
				continue;
			}
			size_t ei = order[f->next++];
			uint32_t to = c->edges[ei].dst;
			if (to == f->block)
				continue;
			if (state[to] == 1)
				back[ei] = true;
			else if (state[to] == 0) {
				state[to] = 1;
				stack[depth++] = (struct frame){to, first[to]};
			}
		}
	}
out:
	free(state);
	free(first);
	free(order);
	free(stack);
	return back;
}

static pthread_mutex_t graphviz_lock = PTHREAD_MUTEX_INITIALIZER;
/* One Graphviz context for the process, made at the first layout and kept
 * (reachable, not leaked): freeing a context leaves the pango plugin's
 * cached font name pointing into it, and the next context's first label
 * reads freed memory (seen under ASan with Graphviz 2.42). Under the lock. */
static GVC_t *graphviz;

/* Only the dot layout and the core renderers (SVG), linked in: labels are
 * then measured by Graphviz's own font metrics (a Courier label: 0.6 em a
 * character, as DejaVu Sans Mono in the browser) instead of through pango
 * and fontconfig, which leak a little per measured label. */
extern gvplugin_library_t gvplugin_dot_layout_LTX_library;
extern gvplugin_library_t gvplugin_core_LTX_library;
static const lt_symlist_t graphviz_plugins[] = {
    {"gvplugin_dot_layout_LTX_library", &gvplugin_dot_layout_LTX_library},
    {"gvplugin_core_LTX_library", &gvplugin_core_LTX_library},
    {0, 0},
};

static void set(void *obj, const char *name, const char *value)
{
	agsafeset(obj, (char *)name, (char *)value, "");
}

/* One node per block: its offset, executions, size and closing instruction;
 * hot ones orange by heat, cold ones grey and dashed. */
static void add_blocks(Agraph_t *g, Agnode_t **nodes, const struct cfg *c, const char *fn_name)
{
	char buf[512], colour[16], num[32];
	for (size_t k = 0; k < c->nblocks; k++) {
		const struct block *b = &c->blocks[k];
		const struct insn *first = &c->insns[b->first], *last = &c->insns[b->last];
		snprintf(buf, sizeof(buf), "b%zu", k);
		Agnode_t *n = nodes[k] = agnode(g, buf, 1);
		count_text(num, sizeof(num), b->heat);
		snprintf(buf, sizeof(buf), "%s+0x%" PRIx64 "\\l%s %s (%u insns)\\l%.60s\\l",
			 fn_name, first->addr - c->start, num, c->ip_heat ? "samples" : "× ",
			 b->last - b->first + 1, last->text);
		set(n, "label", buf);
		set(n, "shape", "box");
		set(n, "fontname", "Courier");
		set(n, "fontsize", "10");
		snprintf(buf, sizeof(buf), "#i%" PRIx64, first->addr);
		set(n, "URL", buf);
		snprintf(buf, sizeof(buf), "bb_%" PRIx64, first->addr);
		set(n, "id", buf);
		snprintf(buf, sizeof(buf), "0x%" PRIx64 ": %s %s", first->addr, num,
			 c->ip_heat ? "IP samples" : "executions");
		set(n, "tooltip", buf);
		if (b->heat) {
			double h = heat(b->heat, c->max_heat);
			heat_colour(h, false, colour, sizeof(colour));
			set(n, "style", "filled,rounded");
			set(n, "fillcolor", colour);
			set(n, "color", h > 0.6 ? "#a63603" : "#e6550d");
			set(n, "class", c->ip_heat ? "block hot sampled" : "block hot");
		} else {
			set(n, "style", "filled,rounded,dashed");
			set(n, "fillcolor", "#f0f0f0");
			set(n, "color", "#bbbbbb");
			set(n, "fontcolor", "#999999");
			set(n, "class", "block cold");
		}
	}
}

static int by_count_desc(const void *a, const void *b, void *blocks)
{
	const struct block *bl = blocks;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	if (bl[x].heat != bl[y].heat)
		return bl[x].heat < bl[y].heat ? 1 : -1;
	return x < y ? -1 : x > y;
}

/* The subgraph of c's (at most max) hottest executed blocks and the edges
 * between them, into *sub (its blocks and edges malloc'd, its instructions
 * c's). Hot functions are the big ones (an interpreter's dispatch loop runs
 * to thousands of blocks), and they are the ones a user opens: dot lays out
 * a few hundred nodes in well under a second and thousands in minutes, and
 * what the user came for is where the counts are. Blocks keep their address
 * order, so the drawing reads like the code. */
static int hottest_blocks(const struct cfg *c, size_t max, struct cfg *sub)
{
	*sub = *c;
	sub->blocks = NULL;
	sub->edges = NULL;
	sub->nblocks = sub->nedges = sub->edges_cap = 0;
	uint32_t *order = malloc((c->nblocks + 1) * sizeof(*order));
	uint32_t *new_index = malloc((c->nblocks + 1) * sizeof(*new_index));
	bool *keep = calloc(c->nblocks + 1, sizeof(*keep));
	sub->blocks = malloc((max + 1) * sizeof(*sub->blocks));
	sub->edges = malloc((c->nedges + 1) * sizeof(*sub->edges));
	if (!order || !new_index || !keep || !sub->blocks || !sub->edges) {
		free(order);
		free(new_index);
		free(keep);
		free(sub->blocks);
		free(sub->edges);
		sub->blocks = NULL;
		sub->edges = NULL;
		return -1;
	}
	size_t executed = 0;
	for (size_t k = 0; k < c->nblocks; k++)
		if (c->blocks[k].heat)
			order[executed++] = (uint32_t)k;
	qsort_r(order, executed, sizeof(*order), by_count_desc, c->blocks);
	for (size_t i = 0; i < executed && i < max; i++)
		keep[order[i]] = true;
	for (size_t k = 0; k < c->nblocks; k++)
		if (keep[k]) {
			new_index[k] = (uint32_t)sub->nblocks;
			sub->blocks[sub->nblocks++] = c->blocks[k];
		}
	for (size_t i = 0; i < c->nedges; i++) {
		struct cfg_edge e = c->edges[i];
		if (!keep[e.src] || !keep[e.dst])
			continue;
		e.src = new_index[e.src];
		e.dst = new_index[e.dst];
		sub->edges[sub->nedges++] = e;
	}
	sub->edges_cap = sub->nedges;
	free(order);
	free(new_index);
	free(keep);
	return 0;
}

/* The CFG as SVG (malloc'd, *len bytes), NULL when Graphviz fails. */
static char *cfg_svg(const struct cfg *c, const char *fn_name, size_t *len)
{
	char buf[512], colour[16], num[32];
	pthread_mutex_lock(&graphviz_lock);
	if (!graphviz)
		graphviz = gvContextPlugins(graphviz_plugins, 0);
	GVC_t *gvc = graphviz;
	Agraph_t *g = gvc ? agopen("cfg", Agdirected, NULL) : NULL;
	char *svg = NULL;
	if (!g)
		goto out;
	set(g, "fontname", "Courier");
	set(g, "nodesep", "0.3");
	set(g, "ranksep", "0.35");
	set(g, "bgcolor", "transparent");
	Agnode_t **nodes = calloc(c->nblocks, sizeof(*nodes));
	if (!nodes)
		goto out;
	add_blocks(g, nodes, c, fn_name);
	bool *back = back_edges(c);
	if (!back) {
		free(nodes);
		goto out;
	}
	for (size_t i = 0; i < c->nedges; i++) {
		const struct cfg_edge *e = &c->edges[i];
		/* a loop's back edge goes in reversed, drawn pointing back
		 * (dir=back): dot's own reversal of cycles leaks in Graphviz
		 * 2.42 (acyclic -> virtual_edge, a few hundred bytes a loop a
		 * layout), and the layout is the same */
		Agedge_t *ge = back[i] ? agedge(g, nodes[e->dst], nodes[e->src], NULL, 1)
				       : agedge(g, nodes[e->src], nodes[e->dst], NULL, 1);
		if (back[i])
			set(ge, "dir", "back");
		snprintf(buf, sizeof(buf), "e_%" PRIx64 "_%" PRIx64 "_%s",
			 c->insns[c->blocks[e->src].first].addr,
			 c->insns[c->blocks[e->dst].first].addr, edge_type_names[e->type]);
		set(ge, "id", buf);
		set(ge, "fontname", "Courier");
		set(ge, "fontsize", "9");
		set(ge, "arrowsize", "0.6");
		if (e->count) {
			double h = heat(e->count, c->max_edge);
			heat_colour(h, true, colour, sizeof(colour));
			set(ge, "color", colour);
			set(ge, "fontcolor", "#7f2704");
			snprintf(buf, sizeof(buf), "%.2f", 0.8 + 4.0 * h);
			set(ge, "penwidth", buf);
			count_text(num, sizeof(num), e->count);
			set(ge, "label", num);
			snprintf(buf, sizeof(buf), "cfg-edge hot %s", edge_type_names[e->type]);
		} else {
			set(ge, "color", "#c8c8c8");
			snprintf(buf, sizeof(buf), "cfg-edge cold %s", edge_type_names[e->type]);
		}
		set(ge, "class", buf);
		/* taken: solid; not taken and fall-through: dashed, as the code
		 * runs on */
		set(ge, "style", e->type == E_TAKEN ? "solid" : "dashed");
		snprintf(buf, sizeof(buf), "%s: %s", edge_type_names[e->type], num);
		if (!e->count)
			snprintf(buf, sizeof(buf), "%s: never seen", edge_type_names[e->type]);
		set(ge, "tooltip", buf);
	}
	free(back);
	free(nodes);
	unsigned int n = 0;
	if (gvLayout(gvc, g, "dot") == 0) {
		char *data = NULL;
		if (gvRenderData(gvc, g, "svg", &data, &n) == 0 && data) {
			/* from <svg on: the XML prologue has no place inside HTML */
			const char *at = strstr(data, "<svg");
			if (at) {
				*len = n - (size_t)(at - data);
				svg = malloc(*len + 1);
				if (svg) {
					memcpy(svg, at, *len);
					svg[*len] = '\0';
				}
			}
			gvFreeRenderData(data);
		}
		gvFreeLayout(gvc, g);
	}
out:
	if (g)
		agclose(g);
	pthread_mutex_unlock(&graphviz_lock);
	return svg;
}

/* The name of the function at addr (NAME/N for a local, as profiles name
 * it) into buf: the profile's, else the image's; NULL when none. */
static const char *name_at(const Edgeprof__V1__BinaryProfile *bp, struct ep_binary_code *code,
			   uint64_t addr, uint64_t *start, char *buf, size_t len)
{
	const Edgeprof__V1__Function *f = ep_web_function_at(bp, addr);
	if (f) {
		*start = f->start;
		return ep_symbol_name(f->name, f->local_index, buf, len);
	}
	const struct ep_symbol *s = code ? ep_binary_code_symbol_at(code, addr) : NULL;
	if (s) {
		*start = s->start;
		return ep_symbol_name(s->name, s->local_index, buf, len);
	}
	return NULL;
}

/* A link to the page of the code at addr (a function's, or the code in
 * none around it: every address a page names leads somewhere). */
static void code_link(FILE *out, const char *build_id, uint64_t addr,
		      const struct ep_store_filter *f)
{
	fputs("<a href=\"/function?build_id=", out);
	ep_web_urlenc(out, build_id);
	fprintf(out, "&amp;addr=0x%" PRIx64, addr);
	ep_web_filter_args(out, f);
	fprintf(out, "#i%" PRIx64 "\">", addr);
}

/* The row opening a block: its executions, IP samples and CPI. */
static void block_row(FILE *out, const struct cfg *c, const struct insn *in, const char *unit)
{
	const struct block *b = &c->blocks[in->block];
	fprintf(out,
		"<tr class=\"blockhead%s\" id=\"b%" PRIx64 "\" data-count=\"%" PRIu64
		"\" data-cycles=\"%" PRIu64 "\" data-cycled-insns=\"%" PRIu64
		"\" data-samples=\"%" PRIu64 "\"><td colspan=\"5\">block %u · ",
		b->heat ? "" : " cold", in->addr, b->count, b->cycles, b->cycled_insns, b->samples,
		in->block);
	ep_web_count(out, b->count);
	fputs(" executions · ", out);
	ep_web_count(out, b->samples);
	fputs(" IP samples", out);
	if (b->cycles && b->cycled_insns) {
		fprintf(out, " · %.3f %s per instruction (",
			(double)b->cycles / (double)b->cycled_insns, unit);
		ep_web_count(out, b->cycles);
		fprintf(out, " %s)", unit);
	}
	fputs("</td></tr>\n", out);
}

/* A branch's taken / not-taken counts and misprediction rate. */
static void branch_cell(FILE *out, const struct insn *in)
{
	fputs("</td><td class=\"br\">", out);
	if (in->kind == EP_BRANCH_COND && (in->taken || in->not_taken)) {
		uint64_t ex = in->taken + in->not_taken;
		fputs("taken <b>", out);
		ep_web_count(out, in->taken);
		fputs("</b> · not taken <b>", out);
		ep_web_count(out, in->not_taken);
		fprintf(out, "</b> (%.0f%% taken)", 100.0 * (double)in->taken / (double)ex);
	} else if (in->kind != EP_BRANCH_NONE && in->taken) {
		fputs("taken <b>", out);
		ep_web_count(out, in->taken);
		fputs("</b>", out);
	}
	if (in->mispredicted && in->taken)
		fprintf(out, " · <span class=\"mis\">%.1f%% mispredicted</span>",
			100.0 * (double)in->mispredicted / (double)in->taken);
	fputs("</td></tr>\n", out);
}

/* A call's or jump's target outside the function, named and linked. */
static void callee(FILE *out, const struct cfg *c, const struct insn *in,
		   const Edgeprof__V1__BinaryProfile *bp, struct ep_binary_code *code)
{
	if ((in->kind != EP_BRANCH_CALL && in->kind != EP_BRANCH_JUMP) || !in->target ||
	    (in->target >= c->start && in->target < c->end))
		return;
	uint64_t fstart = 0;
	char cname[1024], shown[1024];
	const char *name = name_at(bp, code, in->target, &fstart, cname, sizeof(cname));
	fputs(" <span class=\"sym\">", out);
	code_link(out, bp->build_id, in->target, c->filter);
	fputs("&lt;", out);
	if (name) {
		ep_web_text(out, ep_demangle(name, shown, sizeof(shown)));
		if (in->target != fstart)
			fprintf(out, "+0x%" PRIx64, in->target - fstart);
	} else {
		fprintf(out, "func_0x%" PRIx64, in->target);
	}
	fputs("&gt;</a></span>", out);
}

/* unit: "cycles", or "ns" where cpu-clock stood in (config.cycles_unit) */
static void disassembly(FILE *out, const struct cfg *c, const Edgeprof__V1__BinaryProfile *bp,
			struct ep_binary_code *code, const char *unit)
{
	fputs("<h2>Disassembly</h2>\n<p class=\"hint\">Executions per instruction come from the "
	      "sampled straight-line ranges (branch records); IP samples are the samples whose "
	      "instruction pointer was there; a branch's taken and not-taken counts come from "
	      "its edges. Blocks are numbered as in the graph.</p>\n"
	      "<table class=\"disasm\" id=\"disasm\"><thead><tr><th>Address</th>"
	      "<th class=\"num\">Executions</th><th class=\"num\">IP samples</th>"
	      "<th>Instruction</th><th>Branch</th></tr></thead><tbody>\n",
	      out);
	for (size_t i = 0; i < c->ninsns; i++) {
		const struct insn *in = &c->insns[i];
		if (in->leader)
			block_row(out, c, in, unit);
		fprintf(out,
			"<tr class=\"insn%s\" id=\"i%" PRIx64 "\" data-count=\"%" PRIu64
			"\" data-samples=\"%" PRIu64 "\"><td class=\"mono addr\">%" PRIx64
			"</td><td class=\"num\"><span class=\"bar\" style=\"width:%.0f%%\"></span>"
			"<span>",
			in->count || in->samples ? "" : " cold", in->addr, in->count, in->samples,
			in->addr, 100.0 * heat(in->count, c->max_count));
		if (in->count)
			ep_web_count(out, in->count);
		fprintf(out,
			"</span></td><td class=\"num samples\"><span class=\"bar\" "
			"style=\"width:%.0f%%\"></span><span>",
			100.0 * heat(in->samples, c->max_samples));
		if (in->samples)
			ep_web_count(out, in->samples);
		fputs("</span></td><td class=\"mono\">", out);
		ep_web_text(out, in->text);
		callee(out, c, in, bp, code);
		branch_cell(out, in);
	}
	fputs("</tbody></table>\n", out);
}

/* The graph of c, or of its hottest blocks when it has too many to lay out. */
static void graph(FILE *out, const struct cfg *c, const char *name)
{
	struct cfg hottest = {0};
	const struct cfg *drawn = c;
	if (c->nblocks > MAX_LAYOUT_BLOCKS) {
		if (hottest_blocks(c, MAX_LAYOUT_BLOCKS, &hottest) != 0) {
			drawn = NULL;
			fputs("<p class=\"error\">Out of memory for the graph.</p>", out);
		} else {
			drawn = &hottest;
			fprintf(out,
				"<p class=\"hint\" id=\"cfg-partial\" data-shown-blocks="
				"\"%zu\" data-shown-edges=\"%zu\">%zu blocks: too many to "
				"lay out whole. Drawn: the %zu hottest executed blocks and "
				"the edges between them; the disassembly below has every "
				"block and count.</p>",
				hottest.nblocks, hottest.nedges, c->nblocks, hottest.nblocks);
		}
	}
	if (drawn && drawn->nblocks) {
		size_t len = 0;
		char *svg = cfg_svg(drawn, name, &len);
		if (svg) {
			fputs("<div class=\"graph\">", out);
			fwrite(svg, 1, len, out);
			fputs("</div>\n", out);
			free(svg);
		} else {
			fputs("<p class=\"error\">Graphviz could not lay the graph out.</p>", out);
		}
	}
	free(hottest.blocks);
	free(hottest.edges);
}

static void legend(FILE *out, bool ip_heat)
{
	fputs(ip_heat ? "<p class=\"legend\"><span class=\"swatch hot\"></span> block with IP "
			"samples (darker: more)"
		      : "<p class=\"legend\"><span class=\"swatch hot\"></span> executed block "
			"(darker: hotter)",
	      out);
	fputs(" <span class=\"swatch cold\"></span> never seen (cold) "
	      "<span class=\"line solid\"></span> taken branch "
	      "<span class=\"line dashed\"></span> not taken / fall-through; thicker: more often. "
	      "Click a block for its instructions.</p>\n",
	      out);
}

/* What the page is of: the profile's function at the address, else the
 * image's symbol, else the code in no symbol around it (code_region). */
struct located {
	uint64_t start, size;
	long fn; /* its index in the profile's functions, -1 for none */
	const char *name;
	char buf[4096];
};

#define REGION_BYTES 4096

/* Code in no symbol around addr (stripped, hand-written or generated
 * code): from the end of the symbol before it when that is near, else from
 * the lowest IP sampled in no function up to REGION_BYTES before it (a
 * sampled IP is an instruction's start; x86 decoded from an arbitrary byte
 * goes astray), up to the next symbol, within the segment holding addr.
 * The image keeps no .eh_frame (its FDEs would give the real bounds), so
 * these are the bounds known. False when the code kept does not hold
 * addr; with no code kept, the page of addr alone. */
static bool code_region(const Edgeprof__V1__BinaryProfile *bp, struct ep_binary_code *code,
			uint64_t addr, struct located *l)
{
	l->fn = -1;
	if (!code) { /* its counts still shown, and how to get its code */
		l->start = addr;
		l->size = 0;
		snprintf(l->buf, sizeof(l->buf), "func_0x%" PRIx64, addr);
		l->name = l->buf;
		return true;
	}
	const Edgeprof__V1__BinaryImage *img = ep_binary_code_image(code);
	uint64_t lo = 0, hi = 0;
	for (size_t i = 0; i < img->n_code; i++) {
		const Edgeprof__V1__CodeBytes *cb = img->code[i];
		if (addr >= cb->vaddr && addr - cb->vaddr < cb->bytes.len) {
			lo = cb->vaddr;
			hi = cb->vaddr + cb->bytes.len;
		}
	}
	if (hi <= lo)
		return false;
	uint64_t seg_lo = lo;
	for (size_t i = 0; i < img->n_symbols + bp->n_functions; i++) {
		uint64_t st = i < img->n_symbols ? img->symbols[i]->start
						 : bp->functions[i - img->n_symbols]->start;
		uint64_t sz = i < img->n_symbols ? img->symbols[i]->size
						 : bp->functions[i - img->n_symbols]->size;
		if (sz && st + sz <= addr && st + sz > lo)
			lo = st + sz;
		if (st > addr && st < hi)
			hi = st;
	}
	uint64_t from = addr;
	if (lo > seg_lo && addr - lo <= REGION_BYTES) {
		from = lo;
	} else {
		for (size_t i = 0; i < bp->n_ips; i++) {
			uint64_t ip = bp->ips[i]->ip;
			if (ip < from && ip >= lo && addr - ip <= REGION_BYTES &&
			    ep_web_function_index(bp, ip) < 0)
				from = ip;
		}
	}
	l->start = from;
	l->size = (hi - addr > REGION_BYTES ? addr + REGION_BYTES : hi) - from;
	l->fn = -1;
	snprintf(l->buf, sizeof(l->buf), "func_0x%" PRIx64, from);
	l->name = l->buf;
	return true;
}

/* False when addr is in no function and no code kept. */
static bool locate(const Edgeprof__V1__BinaryProfile *bp, struct ep_binary_code *code,
		   uint64_t addr, struct located *l)
{
	l->fn = ep_web_function_index(bp, addr);
	const struct ep_symbol *sym = code ? ep_binary_code_symbol_at(code, addr) : NULL;
	if (l->fn >= 0) {
		const Edgeprof__V1__Function *fn = bp->functions[l->fn];
		l->start = fn->start;
		l->size = fn->size;
		l->name = ep_symbol_name(fn->name, fn->local_index, l->buf, sizeof(l->buf));
	} else if (sym) {
		l->start = sym->start;
		l->size = sym->size;
		l->name = ep_symbol_name(sym->name, sym->local_index, l->buf, sizeof(l->buf));
	} else {
		return code_region(bp, code, addr, l);
	}
	return true;
}

/* Which kind of counts the page has, said first: a node without a
 * branch-stack PMU (most cloud VMs) sends IP samples only, and a graph of
 * grey blocks must not read as code that never ran. */
static void data_kind(FILE *out, const Edgeprof__V1__BinaryProfile *bp, const struct cfg *c,
		      long fn)
{
	uint64_t branches = 0;
	for (size_t i = 0; i < bp->n_edges; i++)
		if (ep_web_is_branch(bp->edges[i]) &&
		    ep_web_function_index(bp, bp->edges[i]->from) == fn &&
		    (fn >= 0 || (bp->edges[i]->from >= c->start && bp->edges[i]->from < c->end)))
			ep_add_sat(&branches, bp->edges[i]->count);
	if (!bp->n_edges && !bp->n_ranges) {
		fprintf(out,
			"<p class=\"datakind ip\" id=\"data-kind\" data-kind=\"ip-samples\" "
			"data-samples=\"%" PRIu64 "\">IP samples only: the node that sent these "
			"counts has no branch-stack PMU; block counts need one (LBR/BRBE). This "
			"function: <b>",
			c->samples);
		ep_web_count(out, c->samples);
		fputs("</b> IP samples; blocks are coloured by them.</p>\n", out);
		return;
	}
	fprintf(
	    out,
	    "<p class=\"datakind\" id=\"data-kind\" data-kind=\"branches\" data-branches=\"%" PRIu64
	    "\" data-samples=\"%" PRIu64 "\">Branch counts from LBR/BRBE. This function: <b>",
	    branches, c->samples);
	ep_web_count(out, branches);
	fputs("</b> branch executions, <b>", out);
	ep_web_count(out, c->samples);
	fputs("</b> IP samples.</p>\n", out);
}

/* The graph and the disassembly of c, decoded and counted. */
static void draw_code(FILE *out, struct cfg *c, const Edgeprof__V1__Profile *p,
		      const Edgeprof__V1__BinaryProfile *bp, struct ep_binary_code *code,
		      const char *name)
{
	size_t hot = 0, hot_blocks = 0, sampled = 0;
	for (size_t i = 0; i < c->nedges; i++)
		hot += c->edges[i].count > 0;
	for (size_t k = 0; k < c->nblocks; k++) {
		hot_blocks += c->blocks[k].count > 0;
		sampled += c->blocks[k].samples > 0;
	}
	fprintf(
	    out,
	    ", %zu instructions, %zu blocks (%zu executed, %zu with IP samples), %zu edges (%zu "
	    "seen)",
	    c->ninsns, c->nblocks, hot_blocks, sampled, c->nedges, hot);
	fputs(c->truncated ? " <span class=\"error\">(decoding stopped early)</span>" : "", out);
	fputs("</p>\n", out);
	if (!ep_binary_code_trusted(code))
		fputs("<p class=\"error\" id=\"code-provisional\">This code was sent by an "
		      "agent and is not verified (a process it profiled chose the file): "
		      "<code>edgeprof upload BINARY</code> or a debuginfod server replaces "
		      "it.</p>\n",
		      out);
	fprintf(out,
		"<section id=\"cfg\" data-blocks=\"%zu\" data-edges=\"%zu\" "
		"data-hot-edges=\"%zu\" data-hot-blocks=\"%zu\" data-sampled-blocks=\"%zu\">"
		"<h2>Control-flow graph</h2>\n",
		c->nblocks, c->nedges, hot, hot_blocks, sampled);
	legend(out, c->ip_heat);
	/* the blocks' labels name the function as people read it, cut short:
	 * a C++ name's arguments would widen every block */
	char shown[4096], label[64];
	snprintf(label, sizeof(label), "%s", ep_demangle(name, shown, sizeof(shown)));
	if (strlen(label) == sizeof(label) - 1)
		memcpy(label + sizeof(label) - 4, "...", 3);
	graph(out, c, label);
	fputs("</section>\n", out);
	disassembly(out, c, bp, code,
		    p->config && p->config->cycles_unit && *p->config->cycles_unit
			? p->config->cycles_unit
			: "cycles");
}

static void heading(FILE *out, const Edgeprof__V1__BinaryProfile *bp,
		    const struct ep_store_filter *f, const struct located *l, bool code)
{
	const char *path = bp->n_paths ? bp->paths[0] : bp->build_id;
	const char *base = strrchr(path, '/');
	char shown[4096];
	fputs("<p class=\"crumbs\">", out);
	ep_web_home_link(out, f);
	fputs(" › <a href=\"/binary?build_id=", out);
	ep_web_urlenc(out, bp->build_id);
	ep_web_filter_args(out, f);
	fputs("\">", out);
	ep_web_text(out, base ? base + 1 : path);
	fputs("</a> ›</p>\n<h1 class=\"fn\" data-symbol=\"", out);
	ep_web_text(out, l->name);
	fputs("\" id=\"function-name\">", out);
	ep_web_text(out, ep_demangle(l->name, shown, sizeof(shown)));
	fputs("</h1>\n", out);
	if (code && l->fn < 0 && strncmp(l->name, "func_0x", 7) == 0)
		fputs("<p class=\"hint\" id=\"no-symbol\">No symbol holds this code: shown from "
		      "the end of the symbol before it (or the first IP sampled near it) to the "
		      "next symbol, at most 4 KiB past the address.</p>\n",
		      out);
}

int ep_web_function_page(FILE *out, const struct ep_web_ctx *w, ep_web_arg_fn arg, void *argctx)
{
	struct ep_store_filter f;
	ep_web_filter(arg, argctx, &f);
	const char *addrv = arg(argctx, "addr");
	if (!f.build_id || !addrv || !*addrv)
		return ep_web_fail(out, w, 400,
				   "which function? /function?build_id=ID&addr=0xADDR");
	char *end;
	uint64_t addr = strtoull(addrv, &end, 0);
	if (*end)
		return ep_web_fail(out, w, 400, "addr '%s': expected an address (0x401230)", addrv);
	char err[512];
	Edgeprof__V1__Profile *p = ep_store_profile(w->store, &f, err, sizeof(err));
	if (!p)
		return ep_web_fail(out, w, 503, "store: %s", err);
	if (p->n_binaries == 0) {
		ep_profile_free(p);
		return ep_web_fail(out, w, 404, "build-id %s has no counts under this filter",
				   f.build_id);
	}
	Edgeprof__V1__BinaryProfile *bp = p->binaries[0];
	ep_binary_profile_sort(bp);
	struct ep_binary_code *code =
	    w->binaries ? ep_binaries_code(w->binaries, bp->build_id, err, sizeof(err)) : NULL;
	if (!code && w->binaries && err[0]) {
		ep_profile_free(p);
		return ep_web_fail(out, w, 503, "binary %s: %s", f.build_id, err);
	}
	struct located *l = malloc(sizeof(*l));
	if (!l || !locate(bp, code, addr, l)) {
		int rc = l ? ep_web_fail(out, w, 404,
					 "no function of %s at 0x%" PRIx64 ", and no code of it "
					 "kept there",
					 f.build_id, addr)
			   : ep_web_fail(out, w, 500, "out of memory");
		free(l);
		ep_binary_code_release(code);
		ep_profile_free(p);
		return rc;
	}
	ep_web_begin(out, w, l->name);
	heading(out, bp, &f, l, code != NULL);
	ep_web_chips(out, &f, "/function", arg, argctx);
	struct cfg c = {.start = l->start,
			.end = l->start + (l->size ? l->size : MAX_UNSIZED_BYTES),
			.filter = &f};
	bool decoded = code && decode_function(&c, ep_binary_code_decoder(code)) == 0 &&
		       build_cfg(&c, bp) == 0;
	add_samples(&c, bp, l->fn);
	data_kind(out, bp, &c, l->fn);
	fprintf(out, "<p class=\"facts1\">0x%" PRIx64 ", %" PRIu64 " bytes", l->start, l->size);
	if (!code)
		fputs("</p><p class=\"error\">This binary's code is not at the collector, so its "
		      "graph and disassembly cannot be drawn: upload it with <code>edgeprof upload "
		      "BINARY --collector URL</code>.</p>",
		      out);
	else if (!decoded)
		fputs("</p><p class=\"error\">The code at this address does not decode.</p>", out);
	else
		draw_code(out, &c, p, bp, code, l->name);
	ep_web_end(out);
	free(l);
	cfg_free(&c);
	ep_binary_code_release(code);
	ep_profile_free(p);
	return 200;
}
