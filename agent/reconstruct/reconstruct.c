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

struct entry_memo;

enum gap_kind { GAP_NONE, GAP_OK, GAP_UNKNOWN, GAP_INCONSISTENT, GAP_BACKWARDS, GAP_KINDS };

/* An entry's stats: kernel, unresolved, mismatched (a bit each), gap kind */
#define ENTRY_COMBOS (8 * GAP_KINDS)

struct ep_reconstructor {
	struct entry_memo *memo; /* memo_mask + 1 entries, made on the first stack */
	uint32_t memo_mask;
	uint64_t memo_computed; /* entries computed into it since it was made */
	uint64_t memo_grow_at;	/* memo_computed that makes it grow (0: none yet) */
	struct ep_decoder_cache *decoders;
	bool append_trigger;
	bool calls_only; /* entries are calls and returns: no straight lines between them */
	bool cut_pending;
	struct ep_reconstruct_stats stats;
	/* ep_reconstruct_counted() counts each entry once, under its outcome's
	 * combination of stats (entry_combo()); folded into stats when asked */
	uint64_t combos[ENTRY_COMBOS];
	uint32_t sample_seq; /* the memo entries a sample uses carry it */
	ep_span_sink sink;   /* where entries counted whole go, NULL: out->items */
	void *sink_ctx;
	ep_gap_observer gap_observer;
	void *gap_observer_ctx;
	/* Consecutive entries nearly always hit the same mapping: remember the
	 * last one so most resolutions are two compares and an add. */
	bool cache_valid;
	uint32_t cache_pid;
	uint64_t cache_generation; /* cache_pid's mappings', when it was filled */
	/* The sampled process (NULL: not known): its mappings resolve the
	 * sample's entries, under its generation gen. */
	struct ep_process *proc;
	uint64_t gen;
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

struct ep_reconstructor *ep_reconstructor_new(struct ep_decoder_cache *decoders)
{
	struct ep_reconstructor *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->decoders = decoders;
	r->append_trigger = true;
	return r;
}

void ep_reconstructor_free(struct ep_reconstructor *r)
{
	if (!r)
		return;
	free(r->memo);
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

static inline uint8_t entry_combo(bool kernel, bool unresolved, bool mismatched, uint8_t gap)
{
	return (uint8_t)(kernel | unresolved << 1 | mismatched << 2 | gap << 3);
}

/* The stats of n entries with this combination, as ep_reconstruct() counts
 * one. */
static void add_combo(struct ep_reconstruct_stats *st, unsigned combo, uint64_t n)
{
	unsigned gap = combo >> 3;
	if (combo & 1) {
		st->branch_entries_kernel += n;
	} else {
		st->branch_entries_user += n;
		st->branch_entries_unresolved += combo & 2 ? n : 0;
	}
	if (gap != GAP_NONE) {
		st->gaps += n;
		st->gaps_unknown_code += gap == GAP_UNKNOWN ? n : 0;
		st->gaps_inconsistent += gap >= GAP_INCONSISTENT ? n : 0;
		st->gaps_backwards += gap == GAP_BACKWARDS ? n : 0;
	}
	st->entries_mismatched += combo & 4 ? n : 0;
}

const struct ep_reconstruct_stats *ep_reconstructor_stats(struct ep_reconstructor *r)
{
	for (unsigned c = 0; c < ENTRY_COMBOS; c++) {
		if (r->combos[c])
			add_combo(&r->stats, c, r->combos[c]);
		r->combos[c] = 0;
	}
	return &r->stats;
}

/* The generation of the sampled process's mappings, which the sample's
 * remembered entries and the resolution cache must have been made under:
 * in r->gen. */
static inline uint64_t sample_process(struct ep_reconstructor *r, struct ep_process *proc)
{
	r->proc = proc;
	r->gen = proc ? proc->generation : 0;
	return r->gen;
}

static void __attribute__((noinline))
resolve_slow(struct ep_reconstructor *r, uint32_t pid, uint64_t addr, struct endpoint *ep)
{
	struct ep_resolved res;
	if (r->proc)
		ep->status = ep_mappings_resolve(&r->proc->maps, addr, &res);
	else
		ep->status = ep_addr_is_kernel(addr) ? EP_RESOLVE_KERNEL : EP_RESOLVE_NO_PROCESS;
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
		r->cache_generation = r->gen;
		r->cache_bin = ep->bin;
		r->cache_dec = ep->dec;
		r->cache = res;
	}
}

static inline void resolve(struct ep_reconstructor *r, uint32_t pid, uint64_t addr,
			   struct endpoint *ep)
{
	if (r->cache_valid && r->cache_pid == pid && addr >= r->cache.map_start &&
	    addr < r->cache.map_end && r->cache_generation == r->gen) {
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
		b->gap_insns = 0;
		b->cycles = 0;
		b->taken = false;
		b->mispredicted = false;
	}
}

/* The cycles the hardware counted since the previous entry, 0 when it
 * records none. */
static inline uint32_t entry_cycles(const struct ep_branch_entry *e)
{
	return (uint32_t)((e->flags & EP_BR_CYCLES_MASK) >> EP_BR_CYCLES_SHIFT);
}

static bool kind_is_direct(uint8_t kind)
{
	return kind == EP_BRANCH_COND || kind == EP_BRANCH_JUMP || kind == EP_BRANCH_CALL;
}

/*
 * What one branch entry does, given the previous entry's target: the gap
 * before it, the taken branch, the stats it moves. It depends only on the
 * process's mappings (pid, mappings generation) and the three runtime
 * addresses (previous target, source, target), so it is remembered under
 * them: stacks repeat heavily, and a remembered entry costs one probe
 * instead of two resolutions, a walk lookup and the site checks.
 */
struct entry_memo {
	/* the key; ctx: memo_ctx(), 0 in an unused slot */
	uint64_t prev_to_addr, from_addr, to_addr, generation, ctx;
	/* the outcome */
	bool kernel, unresolved, mismatched;
	uint8_t gap;  /* enum gap_kind */
	uint8_t kind; /* of the taken branch's site */
	const char *why;
	struct endpoint from, to;     /* to: EP_NO_BIN when its code is unknown */
	uint32_t steps_first, nsteps; /* not-taken steps: the from decoder's items */
	uint32_t site, range;	      /* the taken branch; EP_NO_SITE: cut */
	uint32_t next_prev_site;      /* from_site for the next entry's walk */
	uint32_t stamp;		      /* sample_seq of the last sample that used it */
	/* counted whole this often (mispredicted of them) since the sink last
	 * had them: a span counted once per sample would cost more than the
	 * sample's whole lookup */
	uint64_t pending, pending_mispredicted;
	uint64_t pending_cycles, pending_cycled; /* the entries' cycles, those with any */
	uint8_t combo;				 /* entry_combo() of the outcome */
	bool plain;				 /* a taken branch after a straight line: no cut */
	uint32_t branches;	      /* in its part of the trace: the steps and the taken */
	struct ep_trace_branch taken; /* the taken branch as traced (mispredicted aside) */
};

/* Walks the gap between the previous entry's target and this entry's
 * source into m: GAP_OK with the closing site when the straight line is
 * possible, otherwise why not. */
static void classify_gap(const struct endpoint *prev_to, uint32_t prev_site,
			 const struct endpoint *from, struct ep_walk_step *closing,
			 struct entry_memo *m)
{
	if (prev_to->bin == EP_NO_BIN || from->bin == EP_NO_BIN || !prev_to->dec || !from->dec) {
		m->gap = GAP_UNKNOWN;
		m->why = "unknown code";
		return;
	}
	if (prev_to->bin != from->bin) {
		m->gap = GAP_INCONSISTENT;
		m->why = "crosses binaries";
		return;
	}
	if (from->vaddr < prev_to->vaddr || from->vaddr - prev_to->vaddr > EP_MAX_GAP_BYTES) {
		m->gap = GAP_BACKWARDS;
		m->why = "backwards or too long";
		return;
	}
	size_t nsteps = 0;
	const struct ep_walk_step *steps = NULL;
	enum ep_walk_status ws =
	    ep_decoder_walk_lookup(from->dec, prev_to->vaddr, from->vaddr, prev_site,
				   EP_MAX_WALK_STEPS, &steps, &nsteps, closing);
	if (ws != EP_WALK_OK) {
		m->gap = ws == EP_WALK_NO_CODE ? GAP_UNKNOWN : GAP_INCONSISTENT;
		m->why = ep_walk_status_name(ws);
		return;
	}
	m->gap = GAP_OK;
	m->steps_first = (uint32_t)(steps - ep_decoder_steps(from->dec));
	m->nsteps = (uint32_t)nsteps;
}

/* The instructions of m's consistent gap: its ranges', the closing one's
 * included. */
static uint32_t gap_insns(const struct entry_memo *m)
{
	const struct ep_decoder *d = m->from.dec;
	const struct ep_walk_step *steps = ep_decoder_steps(d) + m->steps_first;
	uint32_t n = m->range != EP_NO_RANGE ? ep_decoder_range(d, m->range)->insns : 0;
	for (uint32_t i = 0; i < m->nsteps; i++)
		if (steps[i].range != EP_NO_RANGE)
			n += ep_decoder_range(d, steps[i].range)->insns;
	return n;
}

/* Fills m's outcome for entry e after prev_to (has_prev false: the oldest). */
static void __attribute__((noinline))
compute_entry(struct ep_reconstructor *r, uint32_t pid, bool has_prev, bool calls_only,
	      const struct endpoint *prev_to, uint32_t prev_site, const struct ep_branch_entry *e,
	      struct entry_memo *m)
{
	r->stats.entries_computed++;
	m->kernel = ep_addr_is_kernel(e->from) || ep_addr_is_kernel(e->to);
	resolve(r, pid, e->from, &m->from);
	resolve(r, pid, e->to, &m->to);
	m->unresolved = !m->kernel && (!m->from.dec || !m->to.dec);
	m->gap = GAP_NONE;
	m->why = NULL;
	m->nsteps = 0;
	struct ep_walk_step closing = {.site = EP_NO_SITE, .range = EP_NO_RANGE};
	if (has_prev && !calls_only)
		classify_gap(prev_to, prev_site, &m->from, &closing, m);
	bool gap_ok = m->gap == GAP_OK;

	/* The taken branch itself: only a branch we can see in the code is
	 * counted, and only to the target the code allows. */
	uint32_t site = EP_NO_SITE;
	m->mismatched = false;
	if (!m->kernel && m->from.dec) {
		site = gap_ok ? closing.site : ep_decoder_site_at(m->from.dec, m->from.vaddr);
		if (site != EP_NO_SITE) {
			const struct ep_site *s = ep_decoder_site(m->from.dec, site);
			if (kind_is_direct(s->kind) &&
			    (m->to.bin != m->from.bin || s->target != m->to.vaddr))
				site = EP_NO_SITE;
		}
		m->mismatched = site == EP_NO_SITE;
	}
	m->site = site;
	m->range = gap_ok ? closing.range : EP_NO_RANGE;
	m->kind = site != EP_NO_SITE ? ep_decoder_site(m->from.dec, site)->kind : 0;
	m->next_prev_site = (site != EP_NO_SITE && m->to.bin == m->from.bin) ? site : EP_NO_SITE;
	if (!m->to.dec)
		m->to.bin = EP_NO_BIN;
	m->combo = entry_combo(m->kernel, m->unresolved, m->mismatched, m->gap);
	m->plain = gap_ok && site != EP_NO_SITE;
	m->branches = (site != EP_NO_SITE) + (gap_ok ? m->nsteps : 0);
	m->taken = (struct ep_trace_branch){.bin = m->from.bin,
					    .site = site,
					    .range = m->range,
					    .to_bin = m->to.bin,
					    .to_vaddr = m->to.dec ? m->to.vaddr : 0,
					    .gap_start = gap_ok ? prev_to->vaddr : 0,
					    .gap_insns = gap_ok ? gap_insns(m) : 0,
					    .kind = m->kind,
					    .taken = true};
}

/* The memo starts at ENTRY_MEMO_MIN entries and grows to ENTRY_MEMO_MAX
 * (about 1.3 MiB): see memo_ready(). */
#define ENTRY_MEMO_MIN 512
#define ENTRY_MEMO_MAX 8192

static inline uint64_t rotl64(uint64_t x, unsigned n)
{
	return x << n | x >> (64 - n);
}

/* Code addresses differ in their low bits: each of the three gets its own
 * stretch of the word, and one multiply mixes them into the top bits. */
static inline uint64_t entry_hash(uint64_t prev_to, uint64_t from, uint64_t to)
{
	return ((from ^ rotl64(to, 21) ^ rotl64(prev_to, 42)) * 0x9e3779b97f4a7c15ULL) >> 40;
}

/* Entry m's part of the trace, whole. */
static struct ep_span whole_span(const struct entry_memo *m)
{
	struct ep_span sp = {.bin = m->from.bin,
			     .branch = m->site != EP_NO_SITE ? &m->taken : NULL};
	if (m->gap == GAP_OK && m->nsteps) {
		sp.steps = ep_decoder_steps(m->from.dec) + m->steps_first;
		sp.nsteps = m->nsteps;
	}
	return sp;
}

static void __attribute__((noinline)) flush_entry(struct ep_reconstructor *r, struct entry_memo *m)
{
	struct ep_span sp = whole_span(m);
	sp.cycles = m->pending_cycles;
	sp.cycled = m->pending_cycled;
	r->sink(r->sink_ctx, (uint32_t)(m->ctx >> 2), &sp, m->pending, m->pending_mispredicted);
	m->pending = m->pending_mispredicted = m->pending_cycles = m->pending_cycled = 0;
}

void ep_reconstructor_set_span_sink(struct ep_reconstructor *r, ep_span_sink fn, void *ctx)
{
	ep_reconstructor_flush(r);
	r->sink = fn;
	r->sink_ctx = ctx;
}

void ep_reconstructor_flush(struct ep_reconstructor *r)
{
	r->stats.flushes++;
	for (size_t i = 0; r->memo && i <= r->memo_mask; i++)
		if (r->memo[i].pending)
			flush_entry(r, &r->memo[i]);
}

/*
 * The memo, ready for a sample: made small, since most recordings that a
 * short import or a fuzzer reads use a few hundred entries, and every flush
 * walks all of them (a flush of the whole 8,192 was 31% of fuzz_import's
 * time, and page faults on it as much again). It grows eight times over once
 * it has computed half its size of entries (most of them seen for the first
 * time, which any size computes), as a busy node's does within seconds; only
 * here, between samples, since a sample holds pointers into it. false when
 * there is none (no memory): every entry is then computed.
 */
static bool __attribute__((noinline)) memo_grow(struct ep_reconstructor *r)
{
	size_t size = r->memo ? (size_t)r->memo_mask + 1 : 0;
	size_t want = size ? 8 * size : ENTRY_MEMO_MIN;
	if (want > ENTRY_MEMO_MAX)
		want = ENTRY_MEMO_MAX;
	struct entry_memo *memo = calloc(want, sizeof(*memo));
	if (!memo) {
		if (!r->memo)
			return false;
		r->memo_grow_at = UINT64_MAX; /* no memory: it stays as it is */
		return true;
	}
	/* what it remembers moves along, pending counts and all: a short
	 * recording would otherwise compute its entries again at each step */
	for (size_t i = 0; i < size; i++) {
		struct entry_memo *m = &r->memo[i];
		if (!m->ctx)
			continue;
		struct entry_memo *to =
		    &memo[entry_hash(m->prev_to_addr, m->from_addr, m->to_addr) & (want - 1)];
		if (to->ctx && to->pending)
			flush_entry(r, to);
		*to = *m;
	}
	free(r->memo);
	r->memo = memo;
	r->memo_mask = (uint32_t)want - 1;
	r->memo_computed = 0;
	r->memo_grow_at = want < ENTRY_MEMO_MAX ? want / 2 : UINT64_MAX;
	r->stats.memo_entries = want;
	return true;
}

static inline bool memo_ready(struct ep_reconstructor *r)
{
	return r->memo_computed < r->memo_grow_at || memo_grow(r);
}

/* The rest of an entry's key: pid and whether it has a previous entry,
 * never 0. */
static inline uint64_t memo_ctx(uint32_t pid, bool has_prev)
{
	return (uint64_t)pid << 2 | (uint64_t)has_prev << 1 | 1;
}

/* Entry k's outcome: remembered, or computed (and remembered unless in
 * call-graph mode, which computes into local). With seq (not 0) the entries
 * used are marked with it, and NULL is returned rather than overwrite one
 * already marked. */
static inline struct entry_memo *
entry_outcome(struct ep_reconstructor *r, const struct ep_sample_record *rec, uint32_t k,
	      bool have_prev, bool calls_only, const struct endpoint *prev_to, uint32_t prev_site,
	      uint64_t generation, struct entry_memo *local, uint32_t seq)
{
	const struct ep_branch_entry *e = &rec->entries[k];
	uint64_t prev_addr = have_prev ? rec->entries[k + 1].to : 0;
	if (!r->memo || calls_only) {
		compute_entry(r, rec->pid, have_prev, calls_only, prev_to, prev_site, e, local);
		return local;
	}
	uint64_t ctx = memo_ctx(rec->pid, have_prev);
	struct entry_memo *m = &r->memo[entry_hash(prev_addr, e->from, e->to) & r->memo_mask];
	if (m->ctx == ctx && m->from_addr == e->from && m->to_addr == e->to &&
	    m->prev_to_addr == prev_addr && m->generation == generation) {
		m->stamp = seq ? seq : m->stamp;
		return m;
	}
	if (seq && m->ctx && m->stamp == seq)
		return NULL;
	if (m->pending)
		flush_entry(r, m);
	r->memo_computed++;
	compute_entry(r, rec->pid, have_prev, calls_only, prev_to, prev_site, e, m);
	m->ctx = ctx;
	m->from_addr = e->from;
	m->to_addr = e->to;
	m->prev_to_addr = prev_addr;
	m->generation = generation;
	m->stamp = seq;
	return m;
}

/* The branches passed not taken from the newest entry's target to the
 * sample IP, into r->steps, in binary *bin; 0 when none, and when the line
 * is impossible (*status says why). */
static size_t trigger_steps(struct ep_reconstructor *r, const struct ep_sample_record *rec,
			    const struct endpoint *last_to, uint32_t last_site, uint32_t *bin,
			    enum ep_walk_status *status)
{
	struct endpoint ip;
	resolve(r, rec->pid, rec->ip, &ip);
	*bin = ip.bin;
	if (last_to->bin == EP_NO_BIN || ip.bin != last_to->bin || !ip.dec) {
		*status = EP_WALK_NO_CODE;
		return 0;
	}
	size_t nsteps = 0;
	*status = ep_decoder_walk_to_ip(ip.dec, last_to->vaddr, ip.vaddr, last_site, r->steps,
					EP_MAX_WALK_STEPS, &nsteps);
	return *status == EP_WALK_OK ? nsteps : 0;
}

static void append_trigger(struct ep_reconstructor *r, const struct ep_sample_record *rec,
			   struct ep_trace *t, const struct endpoint *last_to, uint32_t last_site)
{
	uint32_t bin;
	enum ep_walk_status ws;
	size_t nsteps = trigger_steps(r, rec, last_to, last_site, &bin, &ws);
	if (ws != EP_WALK_OK) {
		r->stats.trigger_inconsistent++;
		return;
	}
	if (nsteps > 0) {
		push_not_taken(r, t, bin, ep_decoder_cache_get(r->decoders, bin), r->steps, nsteps);
		r->stats.trigger_appended++;
	}
}

size_t ep_reconstruct(struct ep_reconstructor *r, const struct ep_sample_record *rec,
		      struct ep_process *proc, struct ep_trace *t)
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
	if (!calls_only)
		memo_ready(r);
	uint64_t generation = sample_process(r, proc);

	for (uint32_t k = nr; k-- > newest;) {
		const struct ep_branch_entry *e = &rec->entries[k];
		struct entry_memo local;
		struct entry_memo *m = entry_outcome(r, rec, k, have_prev, calls_only, &prev_to,
						     prev_site, generation, &local, 0);
		if (m->kernel) {
			st->branch_entries_kernel++;
		} else {
			st->branch_entries_user++;
			st->branch_entries_unresolved += m->unresolved;
		}
		if (m->gap != GAP_NONE) {
			st->gaps++;
			st->gaps_unknown_code += m->gap == GAP_UNKNOWN;
			st->gaps_inconsistent += m->gap >= GAP_INCONSISTENT;
			st->gaps_backwards += m->gap == GAP_BACKWARDS;
			if (m->gap == GAP_OK)
				push_not_taken(r, t, m->from.bin, m->from.dec,
					       ep_decoder_steps(m->from.dec) + m->steps_first,
					       m->nsteps);
			else
				r->cut_pending = true;
			if (r->gap_observer) {
				bool one_bin =
				    prev_to.bin != EP_NO_BIN && prev_to.bin == m->from.bin;
				struct ep_gap_report g = {.sample = st->samples,
							  .pid = rec->pid,
							  .start = rec->entries[k + 1].to,
							  .end = e->from,
							  .bin = one_bin ? m->from.bin : EP_NO_BIN,
							  .start_vaddr = prev_to.vaddr,
							  .end_vaddr = m->from.vaddr,
							  .consistent = m->gap == GAP_OK,
							  .why = m->why};
				r->gap_observer(r->gap_observer_ctx, &g);
			}
		}
		st->entries_mismatched += m->mismatched;
		if (m->site != EP_NO_SITE) {
			struct ep_trace_branch *b = trace_push(r, t);
			if (b) {
				b->bin = m->from.bin;
				b->site = m->site;
				b->range = m->range;
				b->kind = m->kind;
				b->to_bin = m->to.dec ? m->to.bin : EP_NO_BIN;
				b->to_vaddr = m->to.dec ? m->to.vaddr : 0;
				b->gap_start = m->gap == GAP_OK ? prev_to.vaddr : 0;
				b->taken = true;
				b->mispredicted = (e->flags & EP_BR_MISPRED) != 0;
				b->gap_insns = m->taken.gap_insns;
				b->cycles = entry_cycles(e);
			}
		} else {
			r->cut_pending = true;
		}
		prev_to = m->to;
		prev_site = m->next_prev_site;
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

/* Every entry's outcome, oldest first, remembered or computed (the memo
 * filled for ep_reconstruct_counted()): false when computing one would
 * overwrite another this sample uses (two of its entries on one slot). */
static bool fill_entries(struct ep_reconstructor *r, const struct ep_sample_record *rec,
			 uint32_t newest, uint32_t nr)
{
	const struct endpoint none = {.bin = EP_NO_BIN};
	const struct endpoint *prev_to = &none;
	uint32_t prev_site = EP_NO_SITE;
	uint64_t generation = r->gen;
	uint32_t seq = ++r->sample_seq ? r->sample_seq : ++r->sample_seq;
	for (uint32_t k = nr; k-- > newest;) {
		bool have_prev = k + 1 < nr;
		struct entry_memo *m = entry_outcome(r, rec, k, have_prev, false, prev_to,
						     prev_site, generation, NULL, seq);
		if (!m)
			return false;
		prev_to = &m->to;
		prev_site = m->next_prev_site;
	}
	return true;
}

/* Where a sample's counting stands: kept in locals (the counters the loop
 * increments would otherwise alias these, and be reloaded each time). */
struct counting {
	size_t left;	 /* branches the chop still takes */
	size_t n;	 /* spans of out so far */
	size_t branches; /* counted, the sink's included */
	/* the oldest entry counted so far: under a chop its first range is
	 * not counted, so if it stays the oldest it becomes out's last span */
	struct entry_memo *last;
	size_t last_span; /* its span in out, or SIZE_MAX: counted whole in the memo */
	bool last_mispredicted;
	uint32_t last_cycles;
};

/* Entry m's part of the trace when it is not plain or not wholly taken:
 * as a span of out, as far as the chop takes. */
static inline __attribute__((always_inline)) bool
count_entry_span(struct entry_memo *m, bool mispredicted, uint32_t cycles, struct counting *c,
		 bool stop_at_cuts, struct ep_span *items)
{
	bool site = m->site != EP_NO_SITE;
	if (site ? c->left == 0 : stop_at_cuts && c->branches)
		return true;
	uint32_t steps = m->gap == GAP_OK ? m->nsteps : 0;
	size_t room = c->left - site;
	uint32_t take = steps < room ? steps : (uint32_t)room;
	if (site || take) {
		struct ep_span *sp = &items[c->n];
		*sp = whole_span(m);
		/* a span without steps has none to skip: NULL + 0 is undefined
		 * (clang's UBSan reported it under fuzz_import) */
		if (take < steps)
			sp->steps += steps - take;
		sp->nsteps = take;
		sp->mispredicted = mispredicted;
		sp->cycles = cycles;
		sp->cycled = cycles != 0;
		c->last = m;
		c->last_span = c->n++;
		c->last_mispredicted = mispredicted;
		c->last_cycles = cycles;
		c->left -= site + take;
		c->branches += site + take;
	}
	/* after a cut gap the taken branch follows the cut */
	return take < steps || (m->gap != GAP_OK && stop_at_cuts && c->branches);
}

/* Adds entry m's part of the trace (its gap's steps, then its taken
 * branch), newest first, as far as the chop takes: a plain entry taken
 * whole is counted in its memo entry (lazy: a sink takes it later), any
 * other as a span. True when the trace is done: the budget is spent, or a
 * cut comes before what is counted (stop_at_cuts, under a chop). */
static inline __attribute__((always_inline)) bool count_entry(struct entry_memo *m,
							      bool mispredicted, uint32_t cycles,
							      struct counting *c, bool stop_at_cuts,
							      bool lazy, struct ep_span *items)
{
	if (lazy && m->plain && m->branches <= c->left) {
		m->pending++;
		m->pending_mispredicted += mispredicted;
		m->pending_cycles += cycles;
		m->pending_cycled += cycles != 0;
		c->left -= m->branches;
		c->branches += m->branches;
		c->last = m;
		c->last_span = SIZE_MAX;
		c->last_mispredicted = mispredicted;
		c->last_cycles = cycles;
		return false;
	}
	return count_entry_span(m, mispredicted, cycles, c, stop_at_cuts, items);
}

/* Under a chop the oldest entry counted has its first range left out: it
 * goes last in out, where ep_aggregate_spans() looks for it. */
static inline void oldest_last(struct counting *c, struct ep_span *items)
{
	if (!c->last)
		return;
	if (c->last_span == SIZE_MAX) {
		c->last->pending--;
		c->last->pending_mispredicted -= c->last_mispredicted;
		c->last->pending_cycles -= c->last_cycles;
		c->last->pending_cycled -= c->last_cycles != 0;
		items[c->n] = whole_span(c->last);
		items[c->n].cycles = c->last_cycles;
		items[c->n].cycled = c->last_cycles != 0;
		items[c->n++].mispredicted = c->last_mispredicted;
	} else if (c->last_span + 1 < c->n) {
		struct ep_span sp = items[c->last_span];
		items[c->last_span] = items[c->n - 1];
		items[c->n - 1] = sp;
	}
}

/* The remembered outcome of entry k, or NULL. */
static inline __attribute__((always_inline)) struct entry_memo *
memo_hit(const struct ep_reconstructor *r, const struct ep_branch_entry *e, uint64_t prev_addr,
	 uint64_t ctx, uint64_t generation)
{
	struct entry_memo *m = &r->memo[entry_hash(prev_addr, e->from, e->to) & r->memo_mask];
	return ((m->from_addr ^ e->from) | (m->to_addr ^ e->to) | (m->prev_to_addr ^ prev_addr) |
		(m->ctx ^ ctx) | (m->generation ^ generation)) == 0
		   ? m
		   : NULL;
}

/* ms[k] for entries newest..nr-1, all remembered, or false. */
static inline __attribute__((always_inline)) bool
lookup_entries(const struct ep_reconstructor *r, const struct ep_branch_entry *e, uint32_t newest,
	       uint32_t nr, uint64_t ctx, uint64_t oldest_ctx, uint64_t gen, struct entry_memo **ms)
{
	uint32_t oldest = nr - 1;
	for (uint32_t k = newest; k < oldest; k++)
		if (!(ms[k] = memo_hit(r, &e[k], e[k + 1].to, ctx, gen)))
			return false;
	return (ms[oldest] = memo_hit(r, &e[oldest], 0, oldest_ctx, gen)) != NULL;
}

bool ep_reconstruct_counted(struct ep_reconstructor *r, const struct ep_sample_record *rec,
			    struct ep_process *proc, unsigned chop, struct ep_spans *out)
{
	out->n = 0;
	out->branches = 0;
	if (r->calls_only || (rec->flags & EP_SAMPLE_CALLS_ONLY) || r->gap_observer)
		return false;
	uint32_t nr = rec->nr_entries;
	if (nr > EP_MAX_BRANCH_ENTRIES)
		nr = EP_MAX_BRANCH_ENTRIES;
	if (!(rec->flags & EP_SAMPLE_HAS_BRANCHES) || nr == 0) {
		/* nothing to trace */
		r->stats.samples++;
		r->stats.samples_with_branches += (rec->flags & EP_SAMPLE_HAS_BRANCHES) != 0;
		return true;
	}
	if (!memo_ready(r))
		return false;
	/* the duplicated newest entry, as ep_reconstruct() drops it */
	const struct ep_branch_entry *e = rec->entries;
	uint32_t newest = nr >= 2 && e[0].from == e[1].from && e[0].to == e[1].to &&
			  e[0].from - e[0].to > EP_DUPLICATE_LOOP_LIMIT;
	uint64_t ctx = memo_ctx(rec->pid, true), oldest_ctx = memo_ctx(rec->pid, false);
	uint64_t gen = sample_process(r, proc);
	/* every entry remembered first: counting changes the memo entries */
	struct entry_memo *ms[EP_MAX_BRANCH_ENTRIES];
	if (!lookup_entries(r, e, newest, nr, ctx, oldest_ctx, gen, ms)) {
		if (!fill_entries(r, rec, newest, nr) ||
		    !lookup_entries(r, e, newest, nr, ctx, oldest_ctx, gen, ms))
			return false;
	}

	/* the trigger: the trace's newest part */
	struct counting c = {.left = chop ? chop : SIZE_MAX};
	bool done = false;
	bool trigger = r->append_trigger && (rec->flags & EP_SAMPLE_TRIGGER_IS_BRANCH) &&
		       !(rec->flags & EP_SAMPLE_IP_KERNEL);
	enum ep_walk_status trigger_status = EP_WALK_OK;
	size_t trigger_n = 0;
	if (trigger) {
		uint32_t bin;
		size_t n = trigger_n = trigger_steps(
		    r, rec, &ms[newest]->to, ms[newest]->next_prev_site, &bin, &trigger_status);
		size_t take = n < c.left ? n : c.left;
		out->items[0] = (struct ep_span){
		    .steps = r->steps + (n - take), .nsteps = (uint32_t)take, .bin = bin};
		c.n = take > 0;
		c.branches = take;
		c.left -= take;
		done = take < n;
	}
	bool stop_at_cuts = chop != 0;
	bool lazy = r->sink != NULL;
	uint64_t *combos = r->combos;
	uint32_t k = newest;
	if (lazy && !done) {
		/* nearly every entry is plain and taken whole until the chop's
		 * end: those in a loop of their own, which keeps nothing else */
		size_t left = c.left;
		for (; k < nr; k++) {
			struct entry_memo *m = ms[k];
			if (!m->plain || m->branches > left)
				break;
			combos[m->combo]++;
			m->pending++;
			m->pending_mispredicted += e[k].flags & EP_BR_MISPRED;
			uint32_t cycles = entry_cycles(&e[k]);
			m->pending_cycles += cycles;
			m->pending_cycled += cycles != 0;
			left -= m->branches;
		}
		if (k > newest) {
			c.branches += c.left - left;
			c.left = left;
			c.last = ms[k - 1];
			c.last_span = SIZE_MAX;
			c.last_mispredicted = (e[k - 1].flags & EP_BR_MISPRED) != 0;
			c.last_cycles = entry_cycles(&e[k - 1]);
		}
	}
	for (; k < nr; k++) {
		struct entry_memo *m = ms[k];
		combos[m->combo]++;
		if (!done)
			done = count_entry(m, (e[k].flags & EP_BR_MISPRED) != 0,
					   entry_cycles(&e[k]), &c, stop_at_cuts, lazy, out->items);
	}
	if (chop)
		oldest_last(&c, out->items);
	out->n = c.n;
	out->branches = c.branches;

	struct ep_reconstruct_stats *st = &r->stats;
	st->samples++;
	st->samples_with_branches++;
	st->branch_entries += nr;
	st->entries_duplicate += newest;
	st->branch_entries_user += newest;
	if (trigger) {
		st->trigger_inconsistent += trigger_status != EP_WALK_OK;
		st->trigger_appended += trigger_n > 0;
	}
	return true;
}

static bool names_evicted(uint32_t bin, const uint8_t *evicted, size_t n)
{
	return bin != EP_NO_BIN && bin < n && evicted[bin];
}

void ep_reconstructor_forget_binaries(struct ep_reconstructor *r, const uint8_t *evicted, size_t n)
{
	if (r->cache_valid && names_evicted(r->cache_bin, evicted, n))
		r->cache_valid = false;
	for (size_t i = 0; r->memo && i <= r->memo_mask; i++) {
		struct entry_memo *m = &r->memo[i];
		if (m->ctx && (names_evicted(m->from.bin, evicted, n) ||
			       names_evicted(m->to.bin, evicted, n)))
			memset(m, 0, sizeof(*m));
	}
}
