/* SPDX-License-Identifier: Apache-2.0 */
#include "decoder_arch.h"

/* The last operand of a direct branch is its target. */
static uint64_t last_imm(const cs_insn *insn)
{
	const cs_arm64 *a = &insn->detail->arm64;
	if (a->op_count > 0 && a->operands[a->op_count - 1].type == ARM64_OP_IMM)
		return (uint64_t)a->operands[a->op_count - 1].imm;
	return 0;
}

void ep_arm64_classify(const cs_insn *insn, struct ep_insn_info *out)
{
	out->len = (uint8_t)insn->size;
	out->kind = EP_BRANCH_NONE;
	out->target = 0;
	switch (insn->id) {
	case ARM64_INS_B:
		out->target = last_imm(insn);
		out->kind = insn->detail->arm64.cc != ARM64_CC_INVALID &&
				    insn->detail->arm64.cc != ARM64_CC_AL
				? EP_BRANCH_COND
				: EP_BRANCH_JUMP;
		return;
	case ARM64_INS_CBZ:
	case ARM64_INS_CBNZ:
	case ARM64_INS_TBZ:
	case ARM64_INS_TBNZ:
		out->target = last_imm(insn);
		out->kind = EP_BRANCH_COND;
		return;
	case ARM64_INS_BL:
		out->target = last_imm(insn);
		out->kind = EP_BRANCH_CALL;
		return;
	case ARM64_INS_BR:
		out->kind = EP_BRANCH_JUMP_INDIRECT;
		return;
	case ARM64_INS_BLR:
		out->kind = EP_BRANCH_CALL_INDIRECT;
		return;
	case ARM64_INS_RET:
	case ARM64_INS_ERET:
		out->kind = EP_BRANCH_RETURN;
		return;
	case ARM64_INS_BRK:
	case ARM64_INS_HLT:
		out->kind = EP_BRANCH_OTHER;
		return;
	default:
		return;
	}
}
