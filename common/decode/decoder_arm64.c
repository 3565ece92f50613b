/* SPDX-License-Identifier: Apache-2.0 */
/* AArch64 classification. svc/hvc are ordinary instructions here for the
 * same reason as x86's syscall: execution resumes right after them. */
#include "common/decode/branch_class.h"

#include <capstone.h>
#include <stdbool.h>

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
		out->kind = EP_BRANCH_RETURN;
		return;
	/* Exception returns and breakpoints leave the straight line without a
	 * user-mode branch record to continue from. */
	case ARM64_INS_ERET:
	case ARM64_INS_BRK:
	case ARM64_INS_HLT:
	case ARM64_INS_DCPS1:
	case ARM64_INS_DCPS2:
	case ARM64_INS_DCPS3:
		out->kind = EP_BRANCH_OTHER;
		return;
	default:
		return;
	}
}
