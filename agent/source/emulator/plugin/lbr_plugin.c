/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The LBR emulator: a TCG plugin for user-mode QEMU that behaves like a CPU
 * with a branch-stack PMU. QEMU ends every translation block (TB) at a
 * branch, so when a TB starts, the previous TB's last instruction was the
 * branch just completed, and the new TB's start tells whether it was taken.
 * From that the plugin keeps a ring of the last N taken branches, counts
 * the chosen event and, every P +- D events (seeded PRNG), writes a sample
 * record exactly as the BPF program would; at exit it writes the exact count
 * of every edge (the ground truth).
 *
 * Arguments (qemu -plugin lbr.so,ARG=VALUE,...): out=PATH, period=P,
 * jitter=D, lbr=N, seed=S, event=branches|taken|instructions, filter=any|calls,
 * model=fast|reference.
 *
 * Guests: x86_64 (an LBR: the entries carry no branch type, as Intel's
 * legacy LBR and perf without PERF_SAMPLE_BRANCH_TYPE_SAVE give none) and
 * aarch64 (Arm's BRBE: up to 64 entries, each with its branch type, which
 * BRBE records for every entry; here PERF_BR_* as the kernel's BRBE driver
 * hands them on). Each guest's last instruction per block is classified by
 * the decoder's own classifier for its instruction set, so emulated and
 * decoded branch kinds agree.
 *
 * Speed: every block's callback is the emulator's cost, so it is one of six
 * functions specialized per event and filter (on_block_fast), that decides
 * the branch with two compares against the previous block's precomputed
 * fall-through and target, counts the event with one decrement (the period
 * logic runs only for the event that samples), writes the ring
 * with no division, counts indirect branches in the vCPU's own table, and
 * takes no lock. on_block_reference is the same model written plainly, one
 * step per event; model=reference runs it, and the tests hold the fast path
 * to it (tests/integration/test_emulator_model.sh).
 */
#include <capstone.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/source/emulator/emu_stream.h"
#include "agent/source/emulator/qemu_plugin_api.h"
#include "common/decode/branch_class.h"
#include "common/util/u64map.h"

EP_QEMU_PLUGIN_EXPORT int qemu_plugin_version = 1;

#define MAX_VCPUS 256 /* a power of two: the vCPU index is masked */
#define MAX_LBR	  64  /* a power of two: the ring index is masked, never divided */
/* no block starts there: a compare with it never matches */
#define NO_ADDR UINT64_MAX

enum event { EVENT_BRANCHES, EVENT_TAKEN, EVENT_INSTRUCTIONS };

/* One translated block; its counters hold the exact counts of the branch
 * that ends it. A block translated again after a flush gets a new record;
 * counts are merged by address at exit. The first fields are what the next
 * block's callback reads: the branch's outcome is decided by two compares. */
struct block {
	uint64_t start;
	uint64_t not_taken_to; /* a conditional branch's fall-through, else NO_ADDR */
	uint64_t taken_to;     /* the direct target, else NO_ADDR */
	uint64_t last_addr;
	uint64_t taken, not_taken;
	uint64_t salt; /* mixes this block into the vCPUs' indirect-table hashes */
	uint32_t insns;
	uint8_t kind;  /* enum ep_branch_kind of the last instruction */
	bool recorded; /* its taken branch enters the record (filter=calls: calls, returns) */
	uint8_t last_len;
	uint64_t target;	   /* direct target of the last instruction, 0 when none */
	struct ep_u64map *targets; /* indirect branches: target -> count */
	struct block *next_all;
};

/* what a vCPU's first block follows: no branch */
static struct block no_block = {.kind = EP_BRANCH_NONE};

/* One (block, target) count of an indirect branch, in a vCPU's own table:
 * blocks are shared by all vCPUs, so counting there would need a lock on
 * every indirect jump and return. Folded into the blocks at exit. */
struct indirect_slot {
	struct block *b;
	uint64_t target;
	uint64_t count;
};

/* the table of a vCPU that has counted no indirect branch yet: every lookup
 * misses (two slots: the hash of an empty table is shifted by 63) */
static struct indirect_slot no_slots[2];

/* a taken branch in the ring: from the end of block `from` (its
 * last_addr, read when a sample is written) to `to` */
struct ring_entry {
	const struct block *from;
	uint64_t to;
};

struct vcpu {
	/* What every block reads and writes. The events counted since the
	 * period's state below was last brought up to date are until_set -
	 * until: until is how many more events can pass before one that
	 * samples, so the common event is one compare and one
	 * subtraction and the period's logic runs only for the events that
	 * do something (count_event_due). */
	struct block *prev;
	uint64_t until, until_set;
	/* the bytes of ring entries written so far, wrapping at 2^32 (a
	 * multiple of the ring's size): the next entry is at ring_next modulo
	 * the ring's size, one add and one mask, and the entries never written
	 * are the ones with no block */
	uint32_t ring_next;
	/* whole-run totals, plain: only this vCPU's thread writes them;
	 * event=branches: the branches are the events (count_branches) */
	uint64_t branches, instructions;
	struct indirect_slot *indirect; /* open addressing, power-of-two size */
	unsigned indirect_shift;	/* 64 - log2(size): the hash's top bits */
	size_t indirect_cap, indirect_used;
	/* the period's state: events until the next sample */
	uint64_t countdown;
	uint64_t rng;
	uint64_t events;
	/* model=reference keeps the ring its own way */
	unsigned ring_n, ring_head;
	/* the last taken branches; up to lbr of them are the record */
	struct ring_entry ring[MAX_LBR];
} __attribute__((aligned(2048))); /* a power-of-two size: vcpus[i] is a shift away */

static struct {
	int fd;
	enum event event;
	uint64_t period, jitter; /* each sample's period drawn from [P - D, P + D] */
	unsigned lbr;
	bool aarch64;	 /* the guest: aarch64 (BRBE's record), else x86_64 (LBR's) */
	bool calls_only; /* filter=calls: the record keeps calls and returns only */
	/* model=reference: every block goes through the plain model
	 * (on_block_reference), the oracle the tests hold the fast path to */
	bool reference;
	qemu_plugin_vcpu_udata_cb_t on_block; /* the callback of every block */
	uint64_t seed;
	csh cs;
	pthread_mutex_t lock; /* the output, the block list and the maps snapshot */
	struct block *blocks;
	/* address ranges of the last maps snapshot: a block outside them means
	 * new code was mapped (dlopen) and the snapshot is taken again */
	uint64_t (*ranges)[2];
	size_t nranges;
} st = {.fd = -1, .lock = PTHREAD_MUTEX_INITIALIZER};

static struct vcpu vcpus[MAX_VCPUS];

static void write_record(uint32_t type, const void *payload, size_t size)
{
	size_t total = sizeof(struct ep_emu_record_header) + size;
	uint8_t *buf = malloc(total);
	if (!buf)
		return;
	struct ep_emu_record_header h = {.type = type, .size = (uint32_t)size};
	memcpy(buf, &h, sizeof(h));
	if (size) /* an empty record's payload may be NULL, which memcpy may not take */
		memcpy(buf + sizeof(h), payload, size);
	for (size_t done = 0; done < total;) {
		ssize_t n = write(st.fd, buf + done, total - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		done += (size_t)n;
	}
	free(buf);
}

/* splitmix64: seeded, so the same seed gives the same samples */
static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t draw_period(struct vcpu *v)
{
	if (st.jitter == 0)
		return st.period;
	return st.period - st.jitter + rng_next(&v->rng) % (2 * st.jitter + 1);
}

/* /proc/self/maps in one buffer (NUL-terminated), or NULL */
static char *read_self_maps(size_t *len_out)
{
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	size_t cap = 1 << 16, len = 0;
	char *text = malloc(cap);
	for (;;) {
		if (!text)
			break;
		if (len + 1 >= cap) {
			char *t = realloc(text, cap * 2);
			if (!t) {
				free(text);
				text = NULL;
				break;
			}
			text = t;
			cap *= 2;
		}
		ssize_t n = read(fd, text + len, cap - 1 - len);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	if (text)
		text[len] = '\0';
	*len_out = len;
	return text;
}

/* The start address and inode of a maps line's file mapping (inode 0: not a file). */
static bool maps_line_file(const char *line, uint64_t *start, uint64_t *ino)
{
	unsigned long long a, b, off, inode;
	unsigned maj, min;
	if (sscanf(line, "%llx-%llx %*s %llx %x:%x %llu", &a, &b, &off, &maj, &min, &inode) != 6)
		return false;
	*start = a;
	*ino = inode;
	return true;
}

/* The host's own file mappings (QEMU, its libraries, this plugin), all there
 * before QEMU loads the guest: in user mode they share the address space
 * with the guest's, and written into the snapshots they would reach perf.data
 * and the pipeline as if the guest had mapped them (the guest's libc and the
 * host's are the same file at other addresses). */
static struct host_map {
	uint64_t start, ino;
} * host_maps;
static size_t n_host_maps;

static void remember_host_maps(void)
{
	size_t len;
	char *text = read_self_maps(&len);
	if (!text)
		return;
	size_t lines = 0;
	for (size_t i = 0; i < len; i++)
		lines += text[i] == '\n';
	host_maps = calloc(lines + 1, sizeof(*host_maps));
	for (char *line = text; host_maps && line < text + len;) {
		char *nl = memchr(line, '\n', (size_t)(text + len - line));
		uint64_t start, ino;
		if (maps_line_file(line, &start, &ino) && ino != 0)
			host_maps[n_host_maps++] = (struct host_map){start, ino};
		line = nl ? nl + 1 : text + len;
	}
	free(text);
}

static bool host_mapping(const char *line)
{
	uint64_t start, ino;
	if (!maps_line_file(line, &start, &ino) || ino == 0)
		return false;
	for (size_t i = 0; i < n_host_maps; i++)
		if (host_maps[i].start == start && host_maps[i].ino == ino)
			return true;
	return false;
}

static void snapshot_maps_locked(void)
{
	size_t len;
	char *text = read_self_maps(&len);
	if (!text)
		return;
	/* the guest's lines only, compacted in place */
	size_t kept = 0;
	for (char *line = text; line < text + len;) {
		char *nl = memchr(line, '\n', (size_t)(text + len - line));
		size_t n = (size_t)((nl ? nl + 1 : text + len) - line);
		if (!host_mapping(line)) {
			memmove(text + kept, line, n);
			kept += n;
		}
		line += n;
	}
	len = kept;
	text[len] = '\0';
	write_record(EP_EMU_MAPS, text, len);
	free(st.ranges);
	st.ranges = NULL;
	st.nranges = 0;
	size_t n = 0;
	for (size_t i = 0; i < len; i++)
		n += text[i] == '\n';
	st.ranges = calloc(n + 1, sizeof(*st.ranges));
	for (char *line = text; st.ranges && line < text + len;) {
		char *nl = memchr(line, '\n', (size_t)(text + len - line));
		unsigned long long a, b;
		if (sscanf(line, "%llx-%llx", &a, &b) == 2) {
			st.ranges[st.nranges][0] = a;
			st.ranges[st.nranges][1] = b;
			st.nranges++;
		}
		line = nl ? nl + 1 : text + len;
	}
	free(text);
}

static bool mapped(uint64_t addr)
{
	for (size_t i = 0; i < st.nranges; i++)
		if (addr >= st.ranges[i][0] && addr < st.ranges[i][1])
			return true;
	return false;
}

/* A taken branch's type as BRBE's driver reports it (perf_branch_entry.type,
 * PERF_BR_*): a conditional branch that was taken is PERF_BR_COND, B and
 * B.AL are PERF_BR_UNCOND, and so on. A block entered some other way (a
 * signal's delivery after an ordinary instruction) is PERF_BR_UNKNOWN. */
static uint64_t perf_branch_type(uint8_t kind)
{
	switch (kind) {
	case EP_BRANCH_COND:
		return PERF_BR_COND;
	case EP_BRANCH_JUMP:
		return PERF_BR_UNCOND;
	case EP_BRANCH_JUMP_INDIRECT:
		return PERF_BR_IND;
	case EP_BRANCH_CALL:
		return PERF_BR_CALL;
	case EP_BRANCH_CALL_INDIRECT:
		return PERF_BR_IND_CALL;
	case EP_BRANCH_RETURN:
		return PERF_BR_RET;
	default:
		return PERF_BR_UNKNOWN;
	}
}

static void emit_sample(struct vcpu *v, unsigned vcpu_index, uint64_t ip)
{
	struct ep_sample_record rec;
	memset(&rec, 0, offsetof(struct ep_sample_record, entries));
	rec.pid = (uint32_t)getpid();
	rec.tid = (uint32_t)syscall(SYS_gettid);
	rec.cpu = vcpu_index;
	rec.time_ns = v->events;
	rec.ip = ip;
	rec.period = st.period;
	rec.flags = EP_SAMPLE_HAS_BRANCHES;
	if (st.event == EVENT_BRANCHES)
		rec.flags |= EP_SAMPLE_TRIGGER_IS_BRANCH;
	if (st.calls_only)
		rec.flags |= EP_SAMPLE_CALLS_ONLY;
	unsigned head = v->ring_head, n = v->ring_n;
	if (!st.reference) {
		head = (v->ring_next % sizeof(v->ring)) / sizeof(v->ring[0]);
		for (n = 0; n < st.lbr && v->ring[(head - 1 - n) & (MAX_LBR - 1)].from; n++)
			;
	}
	rec.nr_entries = n;
	for (unsigned k = 0; k < n; k++) {
		const struct ring_entry *e = &v->ring[(head - 1 - k) & (MAX_LBR - 1)];
		/* the type is read here, per sample, not per branch: the hot
		 * path stays the same for both guests */
		uint64_t type = st.aarch64 ? perf_branch_type(e->from->kind) : 0;
		rec.entries[k] = (struct ep_branch_entry){
		    .from = e->from->last_addr, .to = e->to, .flags = type << EP_BR_TYPE_SHIFT};
	}
	size_t size = offsetof(struct ep_sample_record, entries) +
		      rec.nr_entries * sizeof(struct ep_branch_entry);
	pthread_mutex_lock(&st.lock);
	write_record(EP_EMU_SAMPLE, &rec, size);
	pthread_mutex_unlock(&st.lock);
}

/* n more events: the period's logic, one call per counted block */
static void count_event(struct vcpu *v, unsigned vcpu_index, uint64_t n, uint64_t ip)
{
	v->events += n;
	if (v->countdown > n) {
		v->countdown -= n;
		return;
	}
	emit_sample(v, vcpu_index, ip);
	v->countdown = draw_period(v);
}

/* How many events can pass before one that samples. */
static void arm_until(struct vcpu *v)
{
	v->until = v->until_set = v->countdown;
}

/* The fast path's event that reaches a sample: the events
 * before it changed nothing but the counts, so they are applied at once,
 * then this one goes through count_event() like every event of the plain
 * model. */
static __attribute__((noinline)) void count_event_due(struct vcpu *v, unsigned vcpu_index,
						      uint64_t n, uint64_t ip)
{
	uint64_t passed = v->until_set - v->until;
	v->events += passed;
	v->countdown -= passed;
	count_event(v, vcpu_index, n, ip);
	arm_until(v);
}

/* One event (a branch): the common case is one decrement. */
static inline __attribute__((always_inline)) void count_one(struct vcpu *v, unsigned vcpu_index,
							    uint64_t ip)
{
	if (__builtin_expect(--v->until != 0, 1))
		return;
	v->until = 1; /* count_event_due counts this one itself */
	count_event_due(v, vcpu_index, 1, ip);
}

static size_t indirect_slot_of(const struct vcpu *v, const struct block *b, uint64_t target)
{
	return (size_t)(((target * 0x9e3779b97f4a7c15ULL) ^ b->salt) >> v->indirect_shift);
}

/* Doubles v's indirect table (the first one has 1024 slots); false when out
 * of memory. */
static bool indirect_grow(struct vcpu *v)
{
	size_t cap = v->indirect_cap ? v->indirect_cap * 2 : 1024;
	struct indirect_slot *t = calloc(cap, sizeof(*t));
	if (!t)
		return false;
	struct indirect_slot *old = v->indirect;
	size_t old_cap = v->indirect_cap;
	v->indirect = t;
	v->indirect_cap = cap;
	v->indirect_shift = 64 - (unsigned)__builtin_ctzll(cap);
	for (size_t i = 0; i < old_cap; i++) {
		struct indirect_slot *e = &old[i];
		if (!e->b)
			continue;
		size_t h = indirect_slot_of(v, e->b, e->target);
		while (t[h].b)
			h = (h + 1) & (cap - 1);
		t[h] = *e;
	}
	if (old != no_slots)
		free(old);
	return true;
}

/* p's indirect branch to target, not in the first slot its hash names. One
 * found further on trades places with the one in that slot, so the
 * branches taken often settle where the fast path looks first, whatever was
 * inserted before them (start-up code's returns): that one stays on its
 * probe path, as every slot between its first and this one is taken. */
static __attribute__((noinline)) void count_indirect_probe(struct vcpu *v, struct block *p,
							   uint64_t target)
{
	if (2 * (v->indirect_used + 1) > v->indirect_cap && !indirect_grow(v))
		return;
	size_t mask = v->indirect_cap - 1;
	size_t first = indirect_slot_of(v, p, target);
	for (size_t h = first;; h = (h + 1) & mask) {
		struct indirect_slot *e = &v->indirect[h];
		if (e->b == p && e->target == target) {
			struct indirect_slot found = *e;
			*e = v->indirect[first];
			found.count++;
			v->indirect[first] = found;
			return;
		}
		if (!e->b) {
			*e = (struct indirect_slot){.b = p, .target = target, .count = 1};
			v->indirect_used++;
			return;
		}
	}
}

/* p's indirect branch to target, not found in its first slot; then, with
 * count, the event, since the counts may come last (the sample reads none)
 * and the callers tail-call this, keeping their common path free of saved
 * registers. */
static __attribute__((noinline)) void count_indirect_probe_then(struct vcpu *v, struct block *p,
								uint64_t target,
								unsigned vcpu_index, bool count)
{
	count_indirect_probe(v, p, target);
	if (count)
		count_one(v, vcpu_index, target);
}

/* p's branch to `to` was taken: counted, and into the record */
static inline __attribute__((always_inline)) void
taken_to(struct vcpu *v, struct block *p, uint64_t to, enum event ev, bool calls_only)
{
	if (ev != EVENT_BRANCHES)
		v->branches++;
	if (!calls_only || p->recorded) {
		uint32_t next = v->ring_next;
		v->ring_next = next + sizeof(struct ring_entry);
		struct ring_entry *e = (void *)((char *)v->ring + (next & (sizeof(v->ring) - 1)));
		e->from = p;
		e->to = to;
	}
}

/* What follows the count of instructions: the previous block p's branch
 * went to b. The counts of the edge come before the event's, as a sample
 * reads none of them. */
static inline __attribute__((always_inline)) void branch_to(struct vcpu *v, struct block *p,
							    struct block *b, unsigned vcpu_index,
							    enum event ev, bool calls_only)
{
	uint64_t to = b->start;
	/* not_taken_to is NO_ADDR unless p ends in a conditional branch */
	if (to == p->not_taken_to) {
		p->not_taken++;
		if (ev == EVENT_BRANCHES)
			count_one(v, vcpu_index, to);
		else
			v->branches++;
		return;
	}
	/* taken_to is NO_ADDR unless p ends in a direct branch */
	if (to == p->taken_to) {
		p->taken++;
		taken_to(v, p, to, ev, calls_only);
		if (ev != EVENT_INSTRUCTIONS)
			count_one(v, vcpu_index, to);
		return;
	}
	if (p->kind == EP_BRANCH_NONE)
		return;
	/* indirect, or a direct branch that went elsewhere (a signal) */
	taken_to(v, p, to, ev, calls_only);
	struct indirect_slot *e = &v->indirect[indirect_slot_of(v, p, to)];
	if (__builtin_expect(e->b != p || e->target != to, 0)) {
		count_indirect_probe_then(v, p, to, vcpu_index, ev != EVENT_INSTRUCTIONS);
		return;
	}
	e->count++;
	if (ev != EVENT_INSTRUCTIONS)
		count_one(v, vcpu_index, to);
}

/* event=instructions, a block whose instructions reach a sample:
 * counted before its branch-in, as in the plain model */
static __attribute__((noinline)) void instructions_due(struct vcpu *v, struct block *p,
						       struct block *b, unsigned vcpu_index,
						       bool calls_only)
{
	count_event_due(v, vcpu_index, b->insns, b->start);
	branch_to(v, p, b, vcpu_index, EVENT_INSTRUCTIONS, calls_only);
}

/* The block b starts. Specialized per event at compile time; decides the
 * outcome, the record and the counts as on_block_reference does. */
static inline __attribute__((always_inline)) void
on_block_fast(unsigned int vcpu_index, struct block *b, enum event ev, bool calls_only)
{
	struct vcpu *v = &vcpus[vcpu_index & (MAX_VCPUS - 1)];
	/* an opaque pointer from here: else GCC addresses every field from st
	 * and the index again (three more instructions a ring push) */
	__asm__("" : "+r"(v));
	struct block *p = v->prev;
	v->prev = b;
	v->instructions += b->insns;
	if (ev == EVENT_INSTRUCTIONS) {
		if (__builtin_expect(v->until <= b->insns, 0)) {
			instructions_due(v, p, b, vcpu_index, calls_only);
			return;
		}
		v->until -= b->insns;
	}
	branch_to(v, p, b, vcpu_index, ev, calls_only);
}

#define ON_BLOCK(name, ev, calls_only)                                                             \
	static void name(unsigned int vcpu_index, void *udata)                                     \
	{                                                                                          \
		on_block_fast(vcpu_index, udata, ev, calls_only);                                  \
	}
ON_BLOCK(on_block_branches, EVENT_BRANCHES, false)
ON_BLOCK(on_block_taken, EVENT_TAKEN, false)
ON_BLOCK(on_block_instructions, EVENT_INSTRUCTIONS, false)
ON_BLOCK(on_block_branches_calls, EVENT_BRANCHES, true)
ON_BLOCK(on_block_taken_calls, EVENT_TAKEN, true)
ON_BLOCK(on_block_instructions_calls, EVENT_INSTRUCTIONS, true)

/* The plain model, one step per event and nothing deferred: what the
 * emulator computes, written for reading. model=reference runs it instead
 * of the fast path, and the tests (test_emulator_model.sh) check that both
 * write the same stream. */
static void on_block_reference(unsigned int vcpu_index, void *udata)
{
	struct block *b = udata;
	struct vcpu *v = &vcpus[vcpu_index % MAX_VCPUS];
	struct block *p = v->prev;
	v->prev = b;
	v->instructions += b->insns;
	if (st.event == EVENT_INSTRUCTIONS)
		count_event(v, vcpu_index, b->insns, b->start);
	if (p->kind == EP_BRANCH_NONE)
		return;
	uint64_t fallthrough = p->last_addr + p->last_len;
	bool taken = p->kind != EP_BRANCH_COND || b->start != fallthrough;
	v->branches++;
	if (!taken) {
		p->not_taken++;
	} else if (p->target && p->target == b->start) {
		p->taken++;
	} else {
		pthread_mutex_lock(&st.lock);
		if (!p->targets)
			p->targets = calloc(1, sizeof(*p->targets));
		uint64_t *c = p->targets ? ep_u64map_upsert(p->targets, b->start, NULL) : NULL;
		if (c)
			(*c)++;
		pthread_mutex_unlock(&st.lock);
	}
	/* the hardware's call filter (PERF_SAMPLE_BRANCH_ANY_CALL|ANY_RETURN):
	 * only calls and returns enter the record */
	bool recorded =
	    taken && (!st.calls_only || p->kind == EP_BRANCH_CALL ||
		      p->kind == EP_BRANCH_CALL_INDIRECT || p->kind == EP_BRANCH_RETURN);
	if (recorded) {
		v->ring[v->ring_head] = (struct ring_entry){.from = p, .to = b->start};
		v->ring_head = (v->ring_head + 1) % MAX_LBR;
		if (v->ring_n < st.lbr)
			v->ring_n++;
	}
	if (st.event == EVENT_BRANCHES || (st.event == EVENT_TAKEN && taken))
		count_event(v, vcpu_index, 1, b->start);
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	(void)id;
	size_t n = qemu_plugin_tb_n_insns(tb);
	if (n == 0)
		return;
	struct block *b = calloc(1, sizeof(*b));
	if (!b)
		return;
	b->start = qemu_plugin_tb_vaddr(tb);
	b->insns = (uint32_t)n;
	struct qemu_plugin_insn *last = qemu_plugin_tb_get_insn(tb, n - 1);
	b->last_addr = qemu_plugin_insn_vaddr(last);
	size_t len = qemu_plugin_insn_size(last);
	b->last_len = (uint8_t)len;
	const uint8_t *code = qemu_plugin_insn_data(last);
	if (st.aarch64) {
		struct ep_insn_info info;
		if (len == 4) {
			ep_arm64_classify_word((uint32_t)code[0] | (uint32_t)code[1] << 8 |
						   (uint32_t)code[2] << 16 |
						   (uint32_t)code[3] << 24,
					       b->last_addr, &info);
			b->kind = info.kind;
			b->target = info.target;
		}
	} else {
		cs_insn *insn = NULL;
		if (cs_disasm(st.cs, code, len, b->last_addr, 1, &insn) == 1) {
			struct ep_insn_info info;
			ep_x86_classify(insn, &info);
			b->kind = info.kind;
			b->target = info.target;
		}
		if (insn)
			cs_free(insn, 1);
	}
	b->not_taken_to = b->kind == EP_BRANCH_COND ? b->last_addr + b->last_len : NO_ADDR;
	b->taken_to = b->target ? b->target : NO_ADDR;
	b->recorded = !st.calls_only || b->kind == EP_BRANCH_CALL ||
		      b->kind == EP_BRANCH_CALL_INDIRECT || b->kind == EP_BRANCH_RETURN;
	b->salt = ep_hash_u64((uint64_t)(uintptr_t)b);
	pthread_mutex_lock(&st.lock);
	b->next_all = st.blocks;
	st.blocks = b;
	if (!mapped(b->start))
		snapshot_maps_locked();
	pthread_mutex_unlock(&st.lock);
	qemu_plugin_register_vcpu_tb_exec_cb(tb, st.on_block, QEMU_PLUGIN_CB_NO_REGS, b);
}

/* The exact edges in (from, to, taken) order: the stream then does not
 * depend on the order of the blocks' and the vCPUs' hash tables (edges to
 * code outside every binary share one entry in the profile, written in
 * this order). */
static int exact_cmp(const void *a, const void *b)
{
	const struct ep_emu_exact *x = a, *y = b;
	if (x->from != y->from)
		return x->from < y->from ? -1 : 1;
	if (x->to != y->to)
		return x->to < y->to ? -1 : 1;
	return (x->taken > y->taken) - (x->taken < y->taken);
}

/* Exact counts merged by (from, to, taken): a block translated twice holds
 * part of the same branch's count in each copy. */
static void write_exact(void)
{
	struct ep_u64map index; /* from ^ to-hash -> slot, probing on the hash */
	ep_u64map_init(&index);
	struct ep_emu_exact *edges = NULL;
	size_t n = 0, cap = 0;
	for (struct block *b = st.blocks; b; b = b->next_all) {
		if (b->kind == EP_BRANCH_NONE)
			continue;
		struct ep_emu_exact pending[2] = {
		    {.from = b->last_addr, .to = b->target, .count = b->taken, .taken = 1},
		    {.from = b->last_addr,
		     .to = b->last_addr + b->last_len,
		     .count = b->not_taken,
		     .taken = 0},
		};
		for (size_t i = 0; i < 2 + (b->targets ? b->targets->capacity : 0); i++) {
			struct ep_emu_exact e;
			if (i < 2) {
				e = pending[i];
			} else {
				size_t k = i - 2;
				if (!b->targets->used[k])
					continue;
				e = (struct ep_emu_exact){.from = b->last_addr,
							  .to = b->targets->keys[k],
							  .count = b->targets->values[k],
							  .taken = 1};
			}
			if (e.count == 0)
				continue;
			e.kind = b->kind;
			uint64_t h = ep_hash_u64(e.from) ^ (e.to * 31) ^ e.taken;
			uint64_t *slot;
			for (;; h++) {
				slot = ep_u64map_get(&index, h);
				if (!slot ||
				    (edges[*slot].from == e.from && edges[*slot].to == e.to &&
				     edges[*slot].taken == e.taken))
					break;
			}
			if (slot) {
				edges[*slot].count += e.count;
				continue;
			}
			if (n == cap) {
				cap = cap ? cap * 2 : 1024;
				struct ep_emu_exact *ne = realloc(edges, cap * sizeof(*ne));
				if (!ne)
					goto out;
				edges = ne;
			}
			slot = ep_u64map_upsert(&index, h, NULL);
			if (!slot)
				goto out;
			*slot = n;
			edges[n++] = e;
		}
	}
	if (n > 1) /* no edges (a program that ran no branch): edges is NULL */
		qsort(edges, n, sizeof(*edges), exact_cmp);
	write_record(EP_EMU_EXACT, edges, n * sizeof(*edges));
out:
	free(edges);
	ep_u64map_free(&index);
}

/* The branches v ran: event=branches counts them only as events, those
 * brought up to date and those since. */
static uint64_t branches_of(const struct vcpu *v)
{
	if (st.reference || st.event != EVENT_BRANCHES)
		return v->branches;
	return v->events + (v->until_set - v->until);
}

/* The vCPUs' indirect-branch tables into their blocks' target maps, and
 * their totals summed: what write_exact() and the end record read. */
static void merge_vcpus(uint64_t totals[2])
{
	for (unsigned i = 0; i < MAX_VCPUS; i++) {
		struct vcpu *v = &vcpus[i];
		totals[0] += branches_of(v);
		totals[1] += v->instructions;
		for (size_t k = 0; k < v->indirect_cap; k++) {
			struct indirect_slot *e = &v->indirect[k];
			if (!e->b)
				continue;
			if (!e->b->targets)
				e->b->targets = calloc(1, sizeof(*e->b->targets));
			uint64_t *c =
			    e->b->targets ? ep_u64map_upsert(e->b->targets, e->target, NULL) : NULL;
			if (c)
				*c += e->count;
		}
		if (v->indirect != no_slots)
			free(v->indirect);
		v->indirect = no_slots;
		v->indirect_shift = 63;
		v->indirect_cap = v->indirect_used = 0;
	}
}

static void on_exit_cb(qemu_plugin_id_t id, void *udata)
{
	(void)id;
	(void)udata;
	pthread_mutex_lock(&st.lock);
	uint64_t totals[2] = {0, 0};
	merge_vcpus(totals);
	write_exact();
	write_record(EP_EMU_END, totals, sizeof(totals));
	for (struct block *b = st.blocks; b;) {
		struct block *next = b->next_all;
		if (b->targets) {
			ep_u64map_free(b->targets);
			free(b->targets);
		}
		free(b);
		b = next;
	}
	st.blocks = NULL;
	free(st.ranges);
	st.ranges = NULL;
	free(host_maps);
	host_maps = NULL;
	n_host_maps = 0;
	close(st.fd);
	st.fd = -1;
	pthread_mutex_unlock(&st.lock);
	if (st.cs)
		cs_close(&st.cs);
}

static bool parse_u64(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || end == s || *end)
		return false;
	*out = v;
	return true;
}

/* The guest's instruction set from QEMU's target name; 0, or -1 (said) for
 * one the plugin cannot classify. */
static int pick_guest(const char *target)
{
	st.aarch64 = strcmp(target, "aarch64") == 0;
	if (!st.aarch64 && strcmp(target, "x86_64") != 0) {
		fprintf(stderr,
			"edgeprof-lbr: only x86_64 and aarch64 guests are supported, not %s\n",
			target);
		return -1;
	}
	return 0;
}

/* x86's classifier reads capstone's decoding; aarch64's reads the word and
 * needs no disassembler. */
static int open_classifier(void)
{
	if (st.aarch64)
		return 0;
	if (cs_open(CS_ARCH_X86, CS_MODE_64, &st.cs) != CS_ERR_OK)
		return -1;
	cs_option(st.cs, CS_OPT_DETAIL, CS_OPT_ON);
	return 0;
}

EP_QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
					      int argc, char **argv)
{
	if (pick_guest(info->target_name) != 0)
		return -1;
	const char *out = NULL;
	uint64_t lbr = 32;
	st.period = 100003;
	st.jitter = 0;
	st.seed = 1;
	st.event = EVENT_BRANCHES;
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		const char *eq = strchr(a, '=');
		if (!eq)
			goto bad;
		const char *v = eq + 1;
		size_t klen = (size_t)(eq - a);
		bool ok = true;
		if (klen == 3 && strncmp(a, "out", 3) == 0) {
			out = v;
		} else if (klen == 6 && strncmp(a, "period", 6) == 0) {
			ok = parse_u64(v, &st.period) && st.period > 0;
		} else if (klen == 6 && strncmp(a, "jitter", 6) == 0) {
			ok = parse_u64(v, &st.jitter);
		} else if (klen == 3 && strncmp(a, "lbr", 3) == 0) {
			ok = parse_u64(v, &lbr) && lbr >= 1 && lbr <= MAX_LBR;
		} else if (klen == 4 && strncmp(a, "seed", 4) == 0) {
			ok = parse_u64(v, &st.seed);
		} else if (klen == 6 && strncmp(a, "filter", 6) == 0) {
			if (strcmp(v, "calls") == 0)
				st.calls_only = true;
			else
				ok = strcmp(v, "any") == 0;
		} else if (klen == 5 && strncmp(a, "model", 5) == 0) {
			if (strcmp(v, "reference") == 0)
				st.reference = true;
			else
				ok = strcmp(v, "fast") == 0;
		} else if (klen == 5 && strncmp(a, "event", 5) == 0) {
			if (strcmp(v, "branches") == 0)
				st.event = EVENT_BRANCHES;
			else if (strcmp(v, "taken") == 0)
				st.event = EVENT_TAKEN;
			else if (strcmp(v, "instructions") == 0)
				st.event = EVENT_INSTRUCTIONS;
			else
				ok = false;
		} else {
			ok = false;
		}
		if (!ok)
			goto bad;
	}
	if (!out || st.jitter >= st.period) {
		fprintf(stderr, "edgeprof-lbr: needs out=PATH and jitter < period\n");
		return -1;
	}
	st.lbr = (unsigned)lbr;
	static const qemu_plugin_vcpu_udata_cb_t fast[3][2] = {
	    [EVENT_BRANCHES] = {on_block_branches, on_block_branches_calls},
	    [EVENT_TAKEN] = {on_block_taken, on_block_taken_calls},
	    [EVENT_INSTRUCTIONS] = {on_block_instructions, on_block_instructions_calls},
	};
	st.on_block = st.reference ? on_block_reference : fast[st.event][st.calls_only];
	st.fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (st.fd < 0) {
		fprintf(stderr, "edgeprof-lbr: %s: %s\n", out, strerror(errno));
		return -1;
	}
	if (write(st.fd, EP_EMU_MAGIC, 8) != 8 || open_classifier() != 0)
		return -1;
	remember_host_maps();
	for (unsigned i = 0; i < MAX_VCPUS; i++) {
		struct vcpu *v = &vcpus[i];
		v->prev = &no_block;
		v->indirect = no_slots;
		v->indirect_shift = 63;
		v->rng = st.seed * 0x100000001b3ULL + i;
		/* the first sample at a uniform phase of its period, as a counter
		 * enabled at a moment unrelated to the program: with a fixed
		 * period (jitter 0, the peers' way) the seed would otherwise change
		 * nothing, and every recording of a program would be the same draw */
		v->countdown = 1 + rng_next(&v->rng) % draw_period(v);
		arm_until(v);
	}
	qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
	qemu_plugin_register_atexit_cb(id, on_exit_cb, NULL);
	return 0;
bad:
	fprintf(stderr, "edgeprof-lbr: bad argument; use out=PATH,period=P,jitter=D,lbr=N,seed=S,"
			"event=branches|taken|instructions,model=fast|reference\n");
	return -1;
}
