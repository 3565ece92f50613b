/* SPDX-License-Identifier: Apache-2.0 */
#include "decoder_arch.h"

static bool in_group(const cs_insn *insn, uint8_t group)
{
	for (uint8_t i = 0; i < insn->detail->groups_count; i++)
		if (insn->detail->groups[i] == group)
			return true;
	return false;
}

/* Direct target when the only operand is an immediate, else 0 (indirect). */
static uint64_t direct_target(const cs_insn *insn)
{
	const cs_x86 *x = &insn->detail->x86;
	if (x->op_count == 1 && x->operands[0].type == X86_OP_IMM)
		return (uint64_t)x->operands[0].imm;
	return 0;
}

void ep_x86_classify(const cs_insn *insn, struct ep_insn_info *out)
{
	out->len = (uint8_t)insn->size;
	out->kind = EP_BRANCH_NONE;
	out->target = 0;
	switch (insn->id) {
	/* Execution continues after them as far as user-mode branch records
	 * are concerned: the kernel's side is filtered out. */
	case X86_INS_SYSCALL:
	case X86_INS_SYSENTER:
		return;
	case X86_INS_UD2:
	case X86_INS_UD0:
	case X86_INS_HLT:
	case X86_INS_SYSRET:
	case X86_INS_SYSEXIT:
		out->kind = EP_BRANCH_OTHER;
		return;
	case X86_INS_JMP:
	case X86_INS_LJMP:
		out->target = direct_target(insn);
		out->kind = out->target ? EP_BRANCH_JUMP : EP_BRANCH_JUMP_INDIRECT;
		return;
	case X86_INS_CALL:
	case X86_INS_LCALL:
		out->target = direct_target(insn);
		out->kind = out->target ? EP_BRANCH_CALL : EP_BRANCH_CALL_INDIRECT;
		return;
	case X86_INS_RET:
	case X86_INS_RETF:
	case X86_INS_RETFQ:
		out->kind = EP_BRANCH_RETURN;
		return;
	default:
		break;
	}
	if (in_group(insn, CS_GRP_JUMP)) {
		/* every other jump is conditional: jcc, jrcxz, loop* */
		out->target = direct_target(insn);
		out->kind = EP_BRANCH_COND;
	} else if (in_group(insn, CS_GRP_IRET) || in_group(insn, CS_GRP_INT) ||
		   in_group(insn, CS_GRP_RET)) {
		out->kind = EP_BRANCH_OTHER;
	}
}
