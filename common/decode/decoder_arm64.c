/* SPDX-License-Identifier: Apache-2.0 */
/*
 * AArch64 classification, from the instruction word alone (Arm ARM, "Branches,
 * Exception Generating and System instructions"). Capstone is not asked:
 * Debian 12's capstone 4 does not know the pointer-authenticated branches
 * (RETAA, BRAA, BLRAA, ERETAA... of Armv8.3, which compilers emit for
 * -mbranch-protection) nor BC.cond, and fails on them; a walk would stop
 * there as undecodable, or worse a sweep would step over a return. Every
 * other word is an instruction that does not branch: AArch64 instructions are
 * all 4 bytes, so no word can hide the start of the next one, and whether a
 * word is a valid SVE or atomic instruction (which capstone 4 does not know
 * either) changes nothing for the straight line.
 *
 * svc/hvc/smc are ordinary instructions here for the same reason as x86's
 * syscall: execution resumes right after them.
 */
#include "common/decode/branch_class.h"

#include <capstone.h>
#include <stdbool.h>
#include <stdio.h>

/* pc plus imm, a signed count of words bits wide */
static uint64_t branch_target(uint64_t pc, uint32_t imm, unsigned bits)
{
	int64_t half = (int64_t)1 << (bits - 1);
	int64_t words = ((int64_t)imm ^ half) - half;
	return pc + (uint64_t)(words * 4);
}

/* The register-branch group: 1101011 opc(4) op2(5) op3(6) Rn(5) op4(5). */
static uint8_t register_branch(uint32_t w)
{
	unsigned opc = (w >> 21) & 0xf, op2 = (w >> 16) & 0x1f, op3 = (w >> 10) & 0x3f;
	unsigned rn = (w >> 5) & 0x1f, op4 = w & 0x1f;
	/* op3 00001x: authenticated with key A (0) or B (1) */
	bool plain = op3 == 0 && op4 == 0, pac = (op3 & 0x3e) == 0x02;
	if (op2 != 0x1f)
		return EP_BRANCH_OTHER;
	switch (opc) {
	case 0x0: /* BR; BRAAZ, BRABZ: the modifier is zero (op4 = 11111) */
		return plain || (pac && op4 == 0x1f) ? EP_BRANCH_JUMP_INDIRECT : EP_BRANCH_OTHER;
	case 0x1: /* BLR; BLRAAZ, BLRABZ */
		return plain || (pac && op4 == 0x1f) ? EP_BRANCH_CALL_INDIRECT : EP_BRANCH_OTHER;
	case 0x2: /* RET (any Rn); RETAA, RETAB (Rn, op4 = 11111: x30 signed by sp) */
		return plain || (pac && rn == 0x1f && op4 == 0x1f) ? EP_BRANCH_RETURN
								   : EP_BRANCH_OTHER;
	case 0x8: /* BRAA, BRAB: op4 is the modifier register */
		return pac ? EP_BRANCH_JUMP_INDIRECT : EP_BRANCH_OTHER;
	case 0x9: /* BLRAA, BLRAB */
		return pac ? EP_BRANCH_CALL_INDIRECT : EP_BRANCH_OTHER;
	default:
		/* ERET, ERETAA, ERETAB, DRPS, and the unallocated rest: an
		 * exception return or an undefined instruction, after which no
		 * user-mode straight line goes on */
		return EP_BRANCH_OTHER;
	}
}

void ep_arm64_classify_word(uint32_t w, uint64_t pc, struct ep_insn_info *out)
{
	out->len = 4;
	out->kind = EP_BRANCH_NONE;
	out->target = 0;
	if ((w & 0xff000000) == 0x54000000) {
		/* B.cond, and BC.cond (bit 4: the same branch, hinted
		 * consistent). AL and NV both mean always. */
		unsigned cond = w & 0xf;
		out->kind = cond >= 0xe ? EP_BRANCH_JUMP : EP_BRANCH_COND;
		out->target = branch_target(pc, (w >> 5) & 0x7ffff, 19);
	} else if ((w & 0x7e000000) == 0x34000000) { /* CBZ, CBNZ */
		out->kind = EP_BRANCH_COND;
		out->target = branch_target(pc, (w >> 5) & 0x7ffff, 19);
	} else if ((w & 0x7e000000) == 0x36000000) { /* TBZ, TBNZ */
		out->kind = EP_BRANCH_COND;
		out->target = branch_target(pc, (w >> 5) & 0x3fff, 14);
	} else if ((w & 0x7c000000) == 0x14000000) { /* B, BL (bit 31) */
		out->kind = w >> 31 ? EP_BRANCH_CALL : EP_BRANCH_JUMP;
		out->target = branch_target(pc, w & 0x3ffffff, 26);
	} else if ((w & 0xfe000000) == 0xd6000000) {
		out->kind = register_branch(w);
	} else if ((w & 0xff000000) == 0xd4000000) {
		/* exception generation: opc(3) imm16 op2(3) LL(2). BRK, HLT
		 * (LL 00, opc 001 or 010) and DCPS1-3 (opc 101) stop the
		 * straight line; SVC, HVC, SMC (opc 000) resume after it */
		unsigned opc = (w >> 21) & 7, ll = w & 3;
		if ((ll == 0 && (opc == 1 || opc == 2)) || (opc == 5 && ll != 0))
			out->kind = EP_BRANCH_OTHER;
	} else if ((w >> 16) == 0) {
		/* UDF: permanently undefined, x86's ud2 */
		out->kind = EP_BRANCH_OTHER;
	}
}

void ep_arm64_classify(const cs_insn *insn, struct ep_insn_info *out)
{
	const uint8_t *b = insn->bytes;
	ep_arm64_classify_word((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
				   (uint32_t)b[3] << 24,
			       insn->address, out);
}

bool ep_arm64_branch_text(uint32_t w, uint64_t pc, char *text, size_t len)
{
	static const char *const conds[16] = {"eq", "ne", "cs", "cc", "mi", "pl", "vs", "vc",
					      "hi", "ls", "ge", "lt", "gt", "le", "al", "nv"};
	if ((w & 0xff000010) == 0x54000010) {
		struct ep_insn_info info;
		ep_arm64_classify_word(w, pc, &info);
		snprintf(text, len, "bc.%s 0x%llx", conds[w & 0xf],
			 (unsigned long long)info.target);
		return true;
	}
	unsigned opc = (w >> 21) & 0xf, op2 = (w >> 16) & 0x1f, op3 = (w >> 10) & 0x3f;
	unsigned rn = (w >> 5) & 0x1f, rm = w & 0x1f;
	if ((w & 0xfe000000) != 0xd6000000 || op2 != 0x1f || (op3 & 0x3e) != 0x02)
		return false;
	/* the names: base, 'a' for authenticate, the key, 'z' for a zero modifier */
	char key = op3 & 1 ? 'b' : 'a';
	switch (opc) {
	case 0x0:
	case 0x1:
		if (rm != 0x1f)
			return false;
		snprintf(text, len, "%sa%cz x%u", opc ? "blr" : "br", key, rn);
		return true;
	case 0x2:
	case 0x4:
		if (rn != 0x1f || rm != 0x1f)
			return false;
		snprintf(text, len, "%sa%c", opc == 0x2 ? "ret" : "eret", key);
		return true;
	case 0x8:
	case 0x9:
		if (rm == 0x1f)
			snprintf(text, len, "%sa%c x%u, sp", opc == 0x9 ? "blr" : "br", key, rn);
		else
			snprintf(text, len, "%sa%c x%u, x%u", opc == 0x9 ? "blr" : "br", key, rn,
				 rm);
		return true;
	default:
		return false;
	}
}
