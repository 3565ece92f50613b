/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Decode stage: finds the branch instructions of a binary's code, lazily and
 * cached, and walks straight-line code between two points of a branch trace.
 * Every branch instruction met gets a dense site id and every straight-line
 * range (from the first instruction after a branch to the next branch
 * instruction) a dense range id, so later stages count into arrays.
 * Instruction-set specifics live behind this header (capstone); nothing else
 * knows x86 or arm64. It lives in common/ because the agent walks code with
 * it and the collector draws control-flow graphs and disassembly with it.
 */
#ifndef EP_DECODER_H
#define EP_DECODER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/decode/branch_class.h"
#include "common/decode/code_segment.h"
#include "common/util/arch.h"

const char *ep_branch_kind_name(enum ep_branch_kind kind);

struct ep_site {
	uint64_t addr;	      /* ELF virtual address of the branch instruction */
	uint64_t target;      /* direct target, 0 when indirect or none */
	uint64_t fallthrough; /* address of the next instruction */
	uint8_t kind;	      /* enum ep_branch_kind */
	uint8_t len;
};

/* [start, end]: start is the first instruction after a branch (a target or a
 * fall-through), end the address of the branch instruction closing it
 * (AutoFDO's convention). */
struct ep_range_def {
	uint64_t start;
	uint64_t end;
	uint32_t insns; /* instructions in it, the closing branch included */
};

#define EP_NO_SITE UINT32_MAX

struct ep_walk_step {
	uint32_t site;	/* branch site */
	uint32_t range; /* range ending at that site */
};

enum ep_walk_status {
	EP_WALK_OK = 0,
	EP_WALK_NO_CODE,  /* start or part of the way is not in the binary's code */
	EP_WALK_BLOCKED,  /* met an unconditional transfer (jump, call, return...) first */
	EP_WALK_OVERRUN,  /* ran past the end point without landing on it */
	EP_WALK_BAD_INSN, /* bytes that do not decode */
	EP_WALK_TOO_LONG, /* more conditional branches than the caller's buffer */
};

const char *ep_walk_status_name(enum ep_walk_status status);

struct ep_decoder;

/* segments must outlive the decoder. NULL for an unsupported arch. */
struct ep_decoder *ep_decoder_new(enum ep_arch arch, const struct ep_code_segment *segments,
				  size_t nsegments);
void ep_decoder_free(struct ep_decoder *d);

/*
 * The parts of the code segments that hold data, not instructions: AArch64
 * literal pools and words placed in code, which the ELF names with $d
 * mapping symbols (ep_elf_data_in_code). No walk, sweep or lookup reads
 * them as code (they are "no code"). ranges: sorted, disjoint, kept by the
 * caller while the decoder lives; set before the first decode.
 */
void ep_decoder_set_data(struct ep_decoder *d, const struct ep_addr_range *ranges, size_t n);

uint32_t ep_decoder_site_count(const struct ep_decoder *d);
const struct ep_site *ep_decoder_site(const struct ep_decoder *d, uint32_t site);
/* The whole site table (index by site id): valid until the decoder next
 * meets new code, so hot loops can read it without a call per site. */
const struct ep_site *ep_decoder_sites(const struct ep_decoder *d);
uint32_t ep_decoder_range_count(const struct ep_decoder *d);
const struct ep_range_def *ep_decoder_range(const struct ep_decoder *d, uint32_t range);

/* Site id of the branch instruction at vaddr (decoding it if needed), or
 * EP_NO_SITE when vaddr holds no branch instruction or no code. */
uint32_t ep_decoder_site_at(struct ep_decoder *d, uint64_t vaddr);

/* The instruction at vaddr (its length, branch kind, direct target): for
 * sweeps over a whole function when a profile is built, never the hot
 * path. false when vaddr holds no code or bytes that do not decode. */
bool ep_decoder_insn(struct ep_decoder *d, uint64_t vaddr, struct ep_insn_info *info);
/* The same, with the instruction written as text ("jne 0x1234") into
 * text[textlen]: for disassembly shown to people (the collector's UI). */
bool ep_decoder_insn_text(struct ep_decoder *d, uint64_t vaddr, struct ep_insn_info *info,
			  char *text, size_t textlen);

/*
 * The straight line from start (where a taken branch landed) to the branch
 * instruction at end (the next taken branch). steps[0..*nsteps) receive the
 * conditional branches passed on the way, not taken, oldest first, each with
 * the range ending at it; *closing the site at end and the range ending there.
 * from_site is the taken branch that landed on start, or EP_NO_SITE; with it
 * the decoder finds a direct target's code without an address lookup.
 */
enum ep_walk_status ep_decoder_walk_to_branch(struct ep_decoder *d, uint64_t start, uint64_t end,
					      uint32_t from_site, struct ep_walk_step *steps,
					      size_t max_steps, size_t *nsteps,
					      struct ep_walk_step *closing);

/*
 * The same without the copy: *steps points into the decoder, valid until it
 * next meets new code (the next walk or site lookup). Walks are remembered
 * by (start, end) in a fixed-size table, so a gap walked before costs one
 * lookup.
 */
enum ep_walk_status ep_decoder_walk_lookup(struct ep_decoder *d, uint64_t start, uint64_t end,
					   uint32_t from_site, size_t max_steps,
					   const struct ep_walk_step **steps, size_t *nsteps,
					   struct ep_walk_step *closing);

/* The base ep_decoder_walk_lookup()'s steps point into, for keeping them as
 * an index: an index stays valid for the decoder's life, a pointer only until
 * it next meets new code. */
const struct ep_walk_step *ep_decoder_steps(const struct ep_decoder *d);

/*
 * The straight line from start up to ip, the next instruction to execute
 * (not executed): the conditional branches passed, not taken, with the range
 * ending at each. OK when ip is start or lies on the line.
 */
enum ep_walk_status ep_decoder_walk_to_ip(struct ep_decoder *d, uint64_t start, uint64_t ip,
					  uint32_t from_site, struct ep_walk_step *steps,
					  size_t max_steps, size_t *nsteps);

#endif
