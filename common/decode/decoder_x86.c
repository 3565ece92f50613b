/* SPDX-License-Identifier: Apache-2.0 */
/*
 * x86-64 classification. Also linked into the LBR emulator plugin on its own,
 * so it must not depend on the rest of the decoder.
 */
#include "common/decode/branch_class.h"

#include <capstone.h>
#include <stdbool.h>

static bool in_group(const cs_insn *insn, uint8_t group)
{
	for (uint8_t i = 0; i < insn->detail->groups_count; i++)
		if (insn->detail->groups[i] == group)
			return true;
	return false;
}

/*
 * A relative branch carries its target as its only immediate operand; any
 * register or memory operand makes it indirect. Deciding on the operand type
 * rather than on the value keeps a branch to address 0 direct.
 */
static bool direct_target(const cs_insn *insn, uint64_t *target)
{
	const cs_x86 *x = &insn->detail->x86;
	if (x->op_count == 1 && x->operands[0].type == X86_OP_IMM) {
		*target = (uint64_t)x->operands[0].imm;
		return true;
	}
	*target = 0;
	return false;
}

void ep_x86_classify(const cs_insn *insn, struct ep_insn_info *out)
{
	out->len = (uint8_t)insn->size;
	out->kind = EP_BRANCH_NONE;
	out->target = 0;
	switch (insn->id) {
	/*
	 * capstone files these under "int", but user-mode branch records
	 * filter the kernel's side out and execution resumes at the next
	 * instruction, so the straight line goes on.
	 */
	case X86_INS_SYSCALL:
	case X86_INS_SYSENTER:
		return;
	/* ud2 has no group in capstone 4; hlt only "privilege". */
	case X86_INS_UD2:
	case X86_INS_UD2B:
	case X86_INS_UD0:
	case X86_INS_HLT:
	case X86_INS_SYSRET:
	case X86_INS_SYSEXIT:
		out->kind = EP_BRANCH_OTHER;
		return;
	case X86_INS_JMP:
	case X86_INS_LJMP:
		out->kind =
		    direct_target(insn, &out->target) ? EP_BRANCH_JUMP : EP_BRANCH_JUMP_INDIRECT;
		return;
	case X86_INS_CALL:
	case X86_INS_LCALL:
		out->kind =
		    direct_target(insn, &out->target) ? EP_BRANCH_CALL : EP_BRANCH_CALL_INDIRECT;
		return;
	case X86_INS_RET:
	case X86_INS_RETF:
	case X86_INS_RETFQ:
		out->kind = EP_BRANCH_RETURN;
		return;
	/* Conditional, but capstone 4 leaves loop* out of the jump group. */
	case X86_INS_LOOP:
	case X86_INS_LOOPE:
	case X86_INS_LOOPNE:
		direct_target(insn, &out->target);
		out->kind = EP_BRANCH_COND;
		return;
	default:
		break;
	}
	if (in_group(insn, CS_GRP_JUMP)) {
		/*
		 * Every remaining jump is conditional: jcc, jrcxz, and xbegin,
		 * whose abort path is the "taken" side.
		 */
		direct_target(insn, &out->target);
		out->kind = EP_BRANCH_COND;
	} else if (in_group(insn, CS_GRP_IRET) || in_group(insn, CS_GRP_INT) ||
		   in_group(insn, CS_GRP_RET)) {
		out->kind = EP_BRANCH_OTHER;
	}
}
