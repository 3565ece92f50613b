/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Instruction types (common/profile/insn_mix.h) from capstone: x86-64 from
 * the operands' registers and access flags and the lock prefix, arm64 from
 * the instruction families and capstone's groups. The one place that says
 * what a load, a vector instruction or an atomic is.
 */
#ifndef EP_DECODE_INSN_MIX_H
#define EP_DECODE_INSN_MIX_H

#include <stddef.h>
#include <stdint.h>

#include "agent/resolve/binary.h"
#include "common/profile/insn_mix.h"
#include "common/util/arch.h"
#include "profile.pb-c.h"

struct cs_insn;

/* Bit (1 << enum ep_insn_type) for each type of one decoded instruction
 * (capstone detail mode on); EP_INSN_OTHER alone when it has none. */
unsigned ep_insn_types_x86(const struct cs_insn *insn);
unsigned ep_insn_types_arm64(const struct cs_insn *insn);

struct ep_insn_mixer;

/* segments must outlive the mixer. NULL for an unsupported arch or when
 * memory runs out. */
struct ep_insn_mixer *ep_insn_mixer_new(enum ep_arch arch, const struct ep_code_segment *segments,
					size_t nsegments);
void ep_insn_mixer_free(struct ep_insn_mixer *m);

/* The instructions from start up to and including the one at end, those
 * whose address is in [lo, hi), into out (start and end set too).
 * out->decoded is false when the bytes are missing, do not decode, or the
 * line does not land on end. */
void ep_insn_mixer_range(struct ep_insn_mixer *m, uint64_t start, uint64_t end, uint64_t lo,
			 uint64_t hi, struct ep_range_mix *out);

/* The mix of every range of bp (whose code is bin's) within [lo, hi):
 * ranges wholly outside are left out. 0, or -1 when memory runs out. */
int ep_insn_mix_binary(const Edgeprof__V1__BinaryProfile *bp, const struct ep_binary *bin,
		       uint64_t lo, uint64_t hi, struct ep_binary_mix *out);

#endif
