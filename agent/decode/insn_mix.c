/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/decode/insn_mix.h"

#include <capstone.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/decode/branch_class.h"

/* No straight line is this long: past it the bytes are data (as in the
 * decoder). */
#define MAX_RANGE_BYTES (1u << 20)

#define BIT(t) (1u << (t))

static unsigned branch_bits(uint8_t kind)
{
	switch (kind) {
	case EP_BRANCH_COND:
		return BIT(EP_INSN_COND_BRANCH);
	case EP_BRANCH_JUMP:
		return BIT(EP_INSN_JUMP);
	case EP_BRANCH_JUMP_INDIRECT:
		return BIT(EP_INSN_INDIRECT_JUMP);
	case EP_BRANCH_CALL:
		return BIT(EP_INSN_CALL);
	case EP_BRANCH_CALL_INDIRECT:
		return BIT(EP_INSN_INDIRECT_CALL);
	case EP_BRANCH_RETURN:
		return BIT(EP_INSN_RETURN);
	default:
		return 0;
	}
}

static bool x86_vector_reg(x86_reg r)
{
	return (r >= X86_REG_MM0 && r <= X86_REG_MM7) ||
	       (r >= X86_REG_XMM0 && r <= X86_REG_ZMM31) || (r >= X86_REG_K0 && r <= X86_REG_K7);
}

/* Memory that an instruction reads or writes without naming it: the stack
 * of push/pop/call/ret/leave. The tables leave these out of the operands,
 * and a call's store of its return address is what makes deep call chains
 * cost. */
static unsigned x86_implicit_memory(unsigned id)
{
	switch (id) {
	case X86_INS_PUSH:
	case X86_INS_PUSHFQ:
	case X86_INS_CALL:
		return BIT(EP_INSN_STORE);
	case X86_INS_POP:
	case X86_INS_POPFQ:
	case X86_INS_RET:
	case X86_INS_LEAVE:
		return BIT(EP_INSN_LOAD);
	default:
		return 0;
	}
}

/* A memory operand that moves no data: lea computes an address, the
 * multi-byte nops and prefetches only name one. */
static bool x86_no_data_access(unsigned id)
{
	switch (id) {
	case X86_INS_LEA:
	case X86_INS_NOP:
	case X86_INS_PREFETCH:
	case X86_INS_PREFETCHNTA:
	case X86_INS_PREFETCHT0:
	case X86_INS_PREFETCHT1:
	case X86_INS_PREFETCHT2:
	case X86_INS_PREFETCHW:
	case X86_INS_CLFLUSH:
		return true;
	default:
		return false;
	}
}

static bool x86_divide(unsigned id)
{
	switch (id) {
	case X86_INS_DIV:
	case X86_INS_IDIV:
	case X86_INS_DIVSS:
	case X86_INS_DIVSD:
	case X86_INS_DIVPS:
	case X86_INS_DIVPD:
	case X86_INS_VDIVSS:
	case X86_INS_VDIVSD:
	case X86_INS_VDIVPS:
	case X86_INS_VDIVPD:
	case X86_INS_FDIV:
	case X86_INS_FDIVR:
	case X86_INS_FDIVP:
	case X86_INS_FDIVRP:
	case X86_INS_FIDIV:
	case X86_INS_FIDIVR:
		return true;
	default:
		return false;
	}
}

unsigned ep_insn_types_x86(const cs_insn *insn)
{
	struct ep_insn_info info;
	ep_x86_classify(insn, &info);
	const cs_x86 *x = &insn->detail->x86;
	unsigned bits = branch_bits(info.kind) | x86_implicit_memory(insn->id);
	bool mem = false;
	for (uint8_t i = 0; i < x->op_count; i++) {
		const cs_x86_op *op = &x->operands[i];
		if (op->type == X86_OP_REG && x86_vector_reg(op->reg))
			bits |= BIT(EP_INSN_VECTOR);
		if (op->type != X86_OP_MEM || x86_no_data_access(insn->id))
			continue;
		mem = true;
		if (op->access & CS_AC_READ)
			bits |= BIT(EP_INSN_LOAD);
		if (op->access & CS_AC_WRITE)
			bits |= BIT(EP_INSN_STORE);
	}
	/* xchg with memory locks the bus whether or not it says lock */
	if (x->prefix[0] == X86_PREFIX_LOCK || (insn->id == X86_INS_XCHG && mem))
		bits |= BIT(EP_INSN_ATOMIC);
	if (x86_divide(insn->id))
		bits |= BIT(EP_INSN_DIVIDE);
	return bits ? bits : BIT(EP_INSN_OTHER);
}

/* arm64 memory instructions by family: capstone 4's access flags are not
 * filled for arm64, and the mnemonics say it plainly (ld*: load, st*:
 * store, the exclusive and atomic families both and atomic). */
static unsigned arm64_memory(const char *m)
{
	static const char *const atomics[] = {
	    "ldxr",  "ldaxr", "ldxp",  "ldaxp", "stxr",	  "stlxr",  "stxp",   "stlxp",	"cas",
	    "swp",   "ldadd", "ldclr", "ldeor", "ldset",  "ldsmax", "ldsmin", "ldumax", "ldumin",
	    "stadd", "stclr", "steor", "stset", "stsmax", "stsmin", "stumax", "stumin"};
	for (size_t i = 0; i < sizeof(atomics) / sizeof(atomics[0]); i++)
		if (strncmp(m, atomics[i], strlen(atomics[i])) == 0) {
			unsigned b = BIT(EP_INSN_ATOMIC);
			/* exclusive loads and stores are one half each; the
			 * rest read, modify and write */
			if (strncmp(m, "ldx", 3) == 0 || strncmp(m, "ldax", 4) == 0)
				return b | BIT(EP_INSN_LOAD);
			if (strncmp(m, "stx", 3) == 0 || strncmp(m, "stlx", 4) == 0)
				return b | BIT(EP_INSN_STORE);
			return b | BIT(EP_INSN_LOAD) | BIT(EP_INSN_STORE);
		}
	if (m[0] == 'l' && m[1] == 'd')
		return BIT(EP_INSN_LOAD);
	if (m[0] == 's' && m[1] == 't')
		return BIT(EP_INSN_STORE);
	return 0;
}

unsigned ep_insn_types_arm64(const cs_insn *insn)
{
	struct ep_insn_info info;
	ep_arm64_classify(insn, &info);
	unsigned bits = branch_bits(info.kind) | arm64_memory(insn->mnemonic);
	for (uint8_t i = 0; i < insn->detail->groups_count; i++) {
		uint8_t g = insn->detail->groups[i];
		if (g == ARM64_GRP_NEON || g == ARM64_GRP_FPARMV8)
			bits |= BIT(EP_INSN_VECTOR);
	}
	if (insn->id == ARM64_INS_SDIV || insn->id == ARM64_INS_UDIV || insn->id == ARM64_INS_FDIV)
		bits |= BIT(EP_INSN_DIVIDE);
	return bits ? bits : BIT(EP_INSN_OTHER);
}

struct ep_insn_mixer {
	enum ep_arch arch;
	const struct ep_code_segment *segments;
	size_t nsegments;
	csh cs;
	cs_insn *insn;
};

struct ep_insn_mixer *ep_insn_mixer_new(enum ep_arch arch, const struct ep_code_segment *segments,
					size_t nsegments)
{
	cs_arch cs_arch = arch == EP_ARCH_X86_64 ? CS_ARCH_X86 : CS_ARCH_ARM64;
	cs_mode cs_mode = arch == EP_ARCH_X86_64 ? CS_MODE_64 : CS_MODE_ARM;
	if (arch != EP_ARCH_X86_64 && arch != EP_ARCH_AARCH64)
		return NULL;
	struct ep_insn_mixer *m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->arch = arch;
	m->segments = segments;
	m->nsegments = nsegments;
	if (cs_open(cs_arch, cs_mode, &m->cs) != CS_ERR_OK) {
		free(m);
		return NULL;
	}
	cs_option(m->cs, CS_OPT_DETAIL, CS_OPT_ON);
	m->insn = cs_malloc(m->cs);
	if (!m->insn) {
		cs_close(&m->cs);
		free(m);
		return NULL;
	}
	return m;
}

void ep_insn_mixer_free(struct ep_insn_mixer *m)
{
	if (!m)
		return;
	cs_free(m->insn, 1);
	cs_close(&m->cs);
	free(m);
}

static const struct ep_code_segment *segment_of(const struct ep_insn_mixer *m, uint64_t addr)
{
	for (size_t i = 0; i < m->nsegments; i++)
		if (addr >= m->segments[i].vaddr &&
		    addr - m->segments[i].vaddr < m->segments[i].size)
			return &m->segments[i];
	return NULL;
}

void ep_insn_mixer_range(struct ep_insn_mixer *m, uint64_t start, uint64_t end, uint64_t lo,
			 uint64_t hi, struct ep_range_mix *out)
{
	memset(out, 0, sizeof(*out));
	out->start = start;
	out->end = end;
	const struct ep_code_segment *s = segment_of(m, start);
	if (!s || end < start || end - start >= MAX_RANGE_BYTES)
		return;
	const uint8_t *code = s->bytes + (start - s->vaddr);
	size_t avail = s->size - (size_t)(start - s->vaddr);
	uint64_t addr = start;
	for (;;) {
		uint64_t at = addr;
		if (!cs_disasm_iter(m->cs, &code, &avail, &addr, m->insn))
			break;
		if (at >= lo && at < hi) {
			unsigned bits = m->arch == EP_ARCH_X86_64 ? ep_insn_types_x86(m->insn)
								  : ep_insn_types_arm64(m->insn);
			out->insns++;
			for (int t = 0; t < EP_INSN_TYPES; t++)
				out->types[t] += (bits >> t) & 1;
		}
		if (at == end) {
			out->decoded = true;
			return;
		}
		if (at > end)
			break;
	}
	/* not landing on end: nothing of it is counted */
	memset(out->types, 0, sizeof(out->types));
	out->insns = 0;
}

int ep_insn_mix_binary(const Edgeprof__V1__BinaryProfile *bp, const struct ep_binary *bin,
		       uint64_t lo, uint64_t hi, struct ep_binary_mix *out)
{
	*out = (struct ep_binary_mix){.lo = lo, .hi = hi};
	size_t nseg = 0;
	const struct ep_code_segment *segs = ep_binary_code_segments(bin, &nseg);
	struct ep_insn_mixer *m = ep_insn_mixer_new(ep_binary_arch(bin), segs, nseg);
	if (!m)
		return -1;
	out->ranges = calloc(bp->n_ranges ? bp->n_ranges : 1, sizeof(*out->ranges));
	if (!out->ranges) {
		ep_insn_mixer_free(m);
		return -1;
	}
	for (size_t i = 0; i < bp->n_ranges; i++) {
		const Edgeprof__V1__Range *r = bp->ranges[i];
		if (r->end < lo || r->start >= hi)
			continue;
		ep_insn_mixer_range(m, r->start, r->end, lo, hi, &out->ranges[out->n++]);
	}
	ep_insn_mixer_free(m);
	ep_binary_mix_sort(out);
	return 0;
}
