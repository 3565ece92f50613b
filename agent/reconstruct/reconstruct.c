/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/reconstruct/reconstruct.h"

#include <stdlib.h>
#include <string.h>

#include "common/util/log.h"

/* A gap holding more not-taken branches than this is treated as
 * inconsistent: real straight-line code between two taken branches is far
 * shorter, and the bound keeps the per-sample work bounded. */
#define EP_MAX_WALK_STEPS 4096
/* AutoFDO's sanity bound for a gap; anything longer is not straight-line code. */
#define EP_MAX_GAP_BYTES (1u << 20)
/* Bytes of a one-branch loop body above which a duplicated newest entry is
 * taken for the hardware's duplicate rather than a loop (unsigned: a forward
 * branch always exceeds it). AutoFDO's value for the fixtures' era. */
#define EP_DUPLICATE_LOOP_LIMIT 0x50

struct ep_reconstructor {
	struct ep_procmap *procmap;
	struct ep_decoder_cache *decoders;
	bool append_trigger;
	bool calls_only; /* entries are calls and returns: no straight lines between them */
	bool cut_pending;
	struct ep_reconstruct_stats stats;
	ep_gap_observer gap_observer;
	void *gap_observer_ctx;
	/* Consecutive entries nearly always hit the same mapping: remember the
	 * last one so most resolutions are two compares and an add. */
	bool cache_valid;
	uint32_t cache_pid;
	uint64_t cache_generation;  /* the procmap's, when the cache was filled */
	const uint64_t *generation; /* the procmap's, now */
	uint32_t cache_bin;
	struct ep_decoder *cache_dec;
	struct ep_resolved cache;
	struct ep_walk_step steps[EP_MAX_WALK_STEPS];
};

/* A resolved end of a branch entry. */
struct endpoint {
	uint32_t bin; /* EP_NO_BIN when unknown */
	uint64_t vaddr;
	struct ep_decoder *dec;
	enum ep_resolve_status status;
};

struct ep_reconstructor *ep_reconstructor_new(struct ep_procmap *procmap,
					      struct ep_decoder_cache *decoders)
{
	struct ep_reconstructor *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->procmap = procmap;
	r->generation = ep_procmap_generation(procmap);
	r->decoders = decoders;
	r->append_trigger = true;
	return r;
}

void ep_reconstructor_free(struct ep_reconstructor *r)
{
	if (!r)
		return;
	free(r);
}

void ep_reconstructor_set_calls_only(struct ep_reconstructor *r, bool calls_only)
{
	r->calls_only = calls_only;
}

void ep_reconstructor_set_append_trigger(struct ep_reconstructor *r, bool append)
{
	r->append_trigger = append;
}

void ep_reconstructor_set_gap_observer(struct ep_reconstructor *r, ep_gap_observer fn, void *ctx)
{
	r->gap_observer = fn;
	r->gap_observer_ctx = ctx;
}

const struct ep_reconstruct_stats *ep_reconstructor_stats(const struct ep_reconstructor *r)
{
	return &r->stats;
}

static void __attribute__((noinline))
resolve_slow(struct ep_reconstructor *r, uint32_t pid, uint64_t addr, struct endpoint *ep)
{
	struct ep_resolved res;
	ep->status = ep_procmap_resolve(r->procmap, pid, addr, &res);
	if (ep->status != EP_RESOLVE_OK) {
		ep->bin = EP_NO_BIN;
		ep->dec = NULL;
		ep->vaddr = 0;
		return;
	}
	ep->bin = ep_binary_index(res.bin);
	ep->vaddr = res.vaddr;
	ep->dec = ep_decoder_cache_get(r->decoders, ep->bin);
	if (res.map_end > res.map_start) {
		r->cache_valid = true;
		r->cache_pid = pid;
		r->cache_generation = *r->generation;
		r->cache_bin = ep->bin;
		r->cache_dec = ep->dec;
		r->cache = res;
	}
}

static inline void resolve(struct ep_reconstructor *r, uint32_t pid, uint64_t addr,
			   struct endpoint *ep)
{
	if (r->cache_valid && r->cache_pid == pid && addr >= r->cache.map_start &&
	    addr < r->cache.map_end && r->cache_generation == *r->generation) {
		ep->bin = r->cache_bin;
		ep->vaddr = (uint64_t)((int64_t)addr + r->cache.vaddr_bias);
		ep->dec = r->cache_dec;
		ep->status = EP_RESOLVE_OK;
		return;
	}
	resolve_slow(r, pid, addr, ep);
}

static int __attribute__((noinline)) trace_grow(struct ep_trace *t, size_t need)
{
	size_t cap = t->cap ? t->cap : 256;
	while (cap < need)
		cap *= 2;
	struct ep_trace_branch *b = realloc(t->branches, cap * sizeof(*b));
	if (!b)
		return -1;
	t->branches = b;
	t->cap = cap;
	return 0;
}

/* The next slot of the trace, marked as following a cut when one is
 * pending; the caller fills every other field. */
static inline struct ep_trace_branch *trace_push(struct ep_reconstructor *r, struct ep_trace *t)
{
	if (t->n == t->cap && trace_grow(t, t->n + 1) != 0)
		return NULL;
	struct ep_trace_branch *b = &t->branches[t->n];
	b->cut_before = r->cut_pending;
	if (r->cut_pending) {
		t->last_cut = t->n;
		r->cut_pending = false;
	}
	t->n++;
	return b;
}

/* Inlined with its early return: most gaps pass no conditional branch, and
 * a call per gap was a tenth of the import's instructions. */
static inline __attribute__((always_inline)) void
push_not_taken(struct ep_reconstructor *r, struct ep_trace *t, uint32_t bin,
	       const struct ep_decoder *dec, const struct ep_walk_step *steps, size_t nsteps)
{
	if (nsteps == 0)
		return;
	if (t->n + nsteps > t->cap && trace_grow(t, t->n + nsteps) != 0)
		return;
	const struct ep_site *sites = ep_decoder_sites(dec);
	for (size_t i = 0; i < nsteps; i++) {
		struct ep_trace_branch *b = trace_push(r, t);
		const struct ep_site *s = &sites[steps[i].site];
		b->bin = bin;
		b->site = steps[i].site;
		b->range = steps[i].range;
		b->kind = s->kind;
		b->to_bin = bin;
		b->to_vaddr = s->fallthrough;
		b->gap_start = 0;
		b->taken = false;
		b->mispredicted = false;
	}
}

static bool kind_is_direct(uint8_t kind)
{
	return kind == EP_BRANCH_COND || kind == EP_BRANCH_JUMP || kind == EP_BRANCH_CALL;
}

/* Walks the gap between the previous entry's target and this entry's
 * source. Returns NULL (with the closing site) when the straight line is
 * possible; otherwise counts why it is not and says why. */
static const char *walk_gap(struct ep_reconstructor *r, struct ep_trace *t,
			    const struct endpoint *prev_to, uint32_t prev_site,
			    const struct endpoint *from, struct ep_walk_step *closing)
{
	struct ep_reconstruct_stats *st = &r->stats;
	st->gaps++;
	if (prev_to->bin == EP_NO_BIN || from->bin == EP_NO_BIN || !prev_to->dec || !from->dec) {
		st->gaps_unknown_code++;
		return "unknown code";
	}
	if (prev_to->bin != from->bin) {
		st->gaps_inconsistent++;
		return "crosses binaries";
	}
	if (from->vaddr < prev_to->vaddr || from->vaddr - prev_to->vaddr > EP_MAX_GAP_BYTES) {
		st->gaps_inconsistent++;
		st->gaps_backwards++;
		return "backwards or too long";
	}
	size_t nsteps = 0;
	const struct ep_walk_step *steps = NULL;
	enum ep_walk_status ws =
	    ep_decoder_walk_lookup(from->dec, prev_to->vaddr, from->vaddr, prev_site,
				   EP_MAX_WALK_STEPS, &steps, &nsteps, closing);
	if (ws != EP_WALK_OK) {
		if (ws == EP_WALK_NO_CODE)
			st->gaps_unknown_code++;
		else
			st->gaps_inconsistent++;
		return ep_walk_status_name(ws);
	}
	push_not_taken(r, t, from->bin, from->dec, steps, nsteps);
	return NULL;
}

static void append_trigger(struct ep_reconstructor *r, const struct ep_sample_record *rec,
			   struct ep_trace *t, const struct endpoint *last_to, uint32_t last_site)
{
	struct endpoint ip;
	resolve(r, rec->pid, rec->ip, &ip);
	if (last_to->bin == EP_NO_BIN || ip.bin != last_to->bin || !ip.dec) {
		r->stats.trigger_inconsistent++;
		return;
	}
	size_t nsteps = 0;
	enum ep_walk_status ws = ep_decoder_walk_to_ip(ip.dec, last_to->vaddr, ip.vaddr, last_site,
						       r->steps, EP_MAX_WALK_STEPS, &nsteps);
	if (ws != EP_WALK_OK) {
		r->stats.trigger_inconsistent++;
		return;
	}
	if (nsteps > 0) {
		push_not_taken(r, t, ip.bin, ip.dec, r->steps, nsteps);
		r->stats.trigger_appended++;
	}
}

size_t ep_reconstruct(struct ep_reconstructor *r, const struct ep_sample_record *rec,
		      struct ep_trace *t)
{
	struct ep_reconstruct_stats *st = &r->stats;
	t->n = 0;
	t->last_cut = 0;
	st->samples++;
	if (!(rec->flags & EP_SAMPLE_HAS_BRANCHES))
		return 0;
	bool calls_only = r->calls_only || (rec->flags & EP_SAMPLE_CALLS_ONLY);
	st->samples_with_branches++;
	uint32_t nr = rec->nr_entries;
	if (nr > EP_MAX_BRANCH_ENTRIES)
		nr = EP_MAX_BRANCH_ENTRIES;
	st->branch_entries += nr;
	if (nr == 0)
		return 0;

	/* Some Intel parts record the newest branch twice. A forward branch
	 * repeated cannot be a one-branch loop (the gap between the copies
	 * would run backwards), and a loop body longer than
	 * EP_DUPLICATE_LOOP_LIMIT without a taken branch is not believed either
	 * (AutoFDO's rule for the same erratum): the copy is dropped instead of
	 * cutting the whole trace at its newest end. Not in call-graph mode:
	 * there the same return twice in a row is what unwinding a recursion
	 * records, and with no straight line between entries a copy cannot be
	 * told from it. */
	uint32_t newest = 0;
	if (!calls_only && nr >= 2 && rec->entries[0].from == rec->entries[1].from &&
	    rec->entries[0].to == rec->entries[1].to &&
	    rec->entries[0].from - rec->entries[0].to > EP_DUPLICATE_LOOP_LIMIT) {
		newest = 1;
		st->entries_duplicate++;
		/* still an entry read: counted like the ones the loop sees */
		st->branch_entries_user++;
	}

	r->cut_pending = true; /* nothing is known before the oldest entry */
	struct endpoint prev_to = {.bin = EP_NO_BIN};
	uint32_t prev_site = EP_NO_SITE;
	bool have_prev = false;

	for (uint32_t k = nr; k-- > newest;) {
		const struct ep_branch_entry *e = &rec->entries[k];
		bool kernel = ep_addr_is_kernel(e->from) || ep_addr_is_kernel(e->to);
		struct endpoint from, to;
		resolve(r, rec->pid, e->from, &from);
		resolve(r, rec->pid, e->to, &to);
		if (kernel) {
			st->branch_entries_kernel++;
		} else {
			st->branch_entries_user++;
			if (!from.dec || !to.dec)
				st->branch_entries_unresolved++;
		}

		struct ep_walk_step closing = {.site = EP_NO_SITE, .range = EP_NO_RANGE};
		bool gap_ok = false;
		if (have_prev && !calls_only) {
			const char *why = walk_gap(r, t, &prev_to, prev_site, &from, &closing);
			gap_ok = why == NULL;
			if (!gap_ok)
				r->cut_pending = true;
			if (r->gap_observer) {
				bool one_bin = prev_to.bin != EP_NO_BIN && prev_to.bin == from.bin;
				struct ep_gap_report g = {.sample = st->samples,
							  .pid = rec->pid,
							  .start = rec->entries[k + 1].to,
							  .end = e->from,
							  .bin = one_bin ? from.bin : EP_NO_BIN,
							  .start_vaddr = prev_to.vaddr,
							  .end_vaddr = from.vaddr,
							  .consistent = gap_ok,
							  .why = why};
				r->gap_observer(r->gap_observer_ctx, &g);
			}
		}

		/* The taken branch itself: only a branch we can see in the code is
		 * counted, and only to the target the code allows. */
		uint32_t site = EP_NO_SITE;
		if (!kernel && from.dec) {
			site = gap_ok ? closing.site : ep_decoder_site_at(from.dec, from.vaddr);
			if (site != EP_NO_SITE) {
				const struct ep_site *s = ep_decoder_site(from.dec, site);
				if (kind_is_direct(s->kind) &&
				    (to.bin != from.bin || s->target != to.vaddr))
					site = EP_NO_SITE;
			}
			if (site == EP_NO_SITE)
				st->entries_mismatched++;
		}
		if (site != EP_NO_SITE) {
			struct ep_trace_branch *b = trace_push(r, t);
			if (b) {
				b->bin = from.bin;
				b->site = site;
				b->range = gap_ok ? closing.range : EP_NO_RANGE;
				b->kind = ep_decoder_site(from.dec, site)->kind;
				b->to_bin = to.dec ? to.bin : EP_NO_BIN;
				b->to_vaddr = to.dec ? to.vaddr : 0;
				b->gap_start = gap_ok ? prev_to.vaddr : 0;
				b->taken = true;
				b->mispredicted = (e->flags & EP_BR_MISPRED) != 0;
			}
		} else {
			r->cut_pending = true;
		}
		prev_to = to;
		if (!to.dec)
			prev_to.bin = EP_NO_BIN;
		prev_site = (site != EP_NO_SITE && to.bin == from.bin) ? site : EP_NO_SITE;
		have_prev = true;
	}

	if (r->append_trigger && !calls_only && (rec->flags & EP_SAMPLE_TRIGGER_IS_BRANCH) &&
	    !(rec->flags & EP_SAMPLE_IP_KERNEL))
		append_trigger(r, rec, t, &prev_to, prev_site);
	return t->n;
}

void ep_trace_free(struct ep_trace *trace)
{
	free(trace->branches);
	*trace = (struct ep_trace){0};
}
