/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Instruction mix of a profile's ranges: what each executed straight-line
 * range holds, by instruction type. The agent's decoder fills it from the
 * binary (agent/decode/insn_mix.h); the report and the JSON export read it.
 * It lives here because the exports (common/) print it and may not see the
 * agent.
 *
 * The types are properties, not a partition: `lock add %eax,(%rdi)` is a
 * load, a store and an atomic; `call *(%rax)` an indirect call and a load
 * and a store (the return address). The branch types are exclusive among
 * themselves (they are the profile's branch kinds). `other` is an
 * instruction with none of the properties.
 */
#ifndef EP_INSN_MIX_H
#define EP_INSN_MIX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum ep_insn_type {
	EP_INSN_LOAD,	       /* reads data memory (explicit operand, pop, ret, leave) */
	EP_INSN_STORE,	       /* writes data memory (explicit operand, push, call) */
	EP_INSN_COND_BRANCH,   /* conditional direct branch */
	EP_INSN_JUMP,	       /* unconditional direct jump */
	EP_INSN_INDIRECT_JUMP, /* jump through a register or memory */
	EP_INSN_CALL,	       /* direct call */
	EP_INSN_INDIRECT_CALL, /* call through a register or memory */
	EP_INSN_RETURN,
	EP_INSN_VECTOR, /* operates on vector registers: SIMD, and scalar FP on SSE/NEON */
	EP_INSN_ATOMIC, /* locked read-modify-write, exclusive or atomic memory op */
	EP_INSN_DIVIDE, /* integer or floating-point divide */
	EP_INSN_OTHER,	/* none of the above */
	EP_INSN_TYPES,
};

/* The types' names in the enum's order ("load", ..., "other"). */
extern const char *const ep_insn_type_names[EP_INSN_TYPES];

/* What one execution of a range [start, end] runs, within the window the
 * mix was computed for: instructions, and how many of them have each type. */
struct ep_range_mix {
	uint64_t start, end;
	bool decoded; /* false: the code is missing or does not decode there */
	uint32_t insns;
	uint32_t types[EP_INSN_TYPES];
};

/* Executed counts: a range mix times how often the range ran, summed. */
struct ep_insn_totals {
	uint64_t insns;
	uint64_t types[EP_INSN_TYPES];
};

/* The mixes of one binary's ranges within the window [lo, hi) (0,
 * UINT64_MAX: all of it), sorted by (start, end). `missing` says why the
 * binary has none (its file not found, another build): NULL when it has
 * them. out_of_scope: the window is elsewhere (--function names a function
 * of another binary). */
struct ep_binary_mix {
	struct ep_range_mix *ranges;
	size_t n;
	uint64_t lo, hi;
	char *missing;
	bool out_of_scope;
};

/* The mixes of a profile: bins[i] belongs to profile->binaries[i]. scope
 * names the window for people: "" (everything), "range 0x..-0x..",
 * "function NAME". */
struct ep_profile_mix {
	struct ep_binary_mix *bins;
	size_t n;
	char *scope;
};

/* The range's mix, or NULL when the binary mix has none for it. */
const struct ep_range_mix *ep_binary_mix_find(const struct ep_binary_mix *m, uint64_t start,
					      uint64_t end);
/* Sorts m->ranges by (start, end) for ep_binary_mix_find(). */
void ep_binary_mix_sort(struct ep_binary_mix *m);
/* t += r x count, saturating. */
void ep_insn_totals_add(struct ep_insn_totals *t, const struct ep_range_mix *r, uint64_t count);
void ep_profile_mix_free(struct ep_profile_mix *m);

#endif
