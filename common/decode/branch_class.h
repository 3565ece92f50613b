/* SPDX-License-Identifier: Apache-2.0 */
/* What kind of branch one instruction is, per instruction set: the decoder's
 * sites are built from it, and the QEMU LBR emulator plugin (which is loaded
 * by QEMU and links only this part, not the decoder) classifies the
 * instructions it sees the same way, so emulated and decoded kinds agree. */
#ifndef EP_BRANCH_CLASS_H
#define EP_BRANCH_CLASS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* capstone's instruction; only the classifiers' callers see capstone.h */
struct cs_insn;

enum ep_branch_kind {
	EP_BRANCH_NONE = 0,
	EP_BRANCH_COND,		 /* conditional direct: taken or not taken */
	EP_BRANCH_JUMP,		 /* unconditional direct jump */
	EP_BRANCH_JUMP_INDIRECT, /* jmp *reg/mem, br */
	EP_BRANCH_CALL,		 /* direct call */
	EP_BRANCH_CALL_INDIRECT,
	EP_BRANCH_RETURN,
	EP_BRANCH_OTHER, /* leaves straight-line flow some other way: ud2, hlt, int3, iret... */
};

struct ep_insn_info {
	uint8_t kind; /* enum ep_branch_kind, EP_BRANCH_NONE for other instructions */
	uint8_t len;
	uint64_t target; /* direct target, else 0 */
};

/* Each classifies one decoded instruction (capstone detail mode on). */
void ep_x86_classify(const struct cs_insn *insn, struct ep_insn_info *out);
void ep_arm64_classify(const struct cs_insn *insn, struct ep_insn_info *out);
/* The AArch64 instruction word w (read little-endian) at pc: AArch64 needs
 * no disassembler to find its branches, and capstone 4 knows too few. */
void ep_arm64_classify_word(uint32_t w, uint64_t pc, struct ep_insn_info *out);
/* Text for the branches capstone 4 cannot print (the pointer-authenticated
 * ones, BC.cond), as objdump writes them; false for any other word. */
bool ep_arm64_branch_text(uint32_t w, uint64_t pc, char *text, size_t len);

#endif
