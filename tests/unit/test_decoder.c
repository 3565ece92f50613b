/* SPDX-License-Identifier: Apache-2.0 */
#include "test_util.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "common/decode/decoder.h"
#include "common/decode/decoder_debug.h"

/* 0x1000 cmp eax,1 | 0x1003 je 0x1007 | 0x1005 nop | 0x1006 nop |
 * 0x1007 jne 0x1000 | 0x1009 ret | 0x100a call 0x100f | 0x100f syscall |
 * 0x1011 ud2 */
static const uint8_t x86_code[] = {0x83, 0xf8, 0x01, 0x74, 0x02, 0x90, 0x90, 0x75, 0xf7, 0xc3,
				   0xe8, 0x00, 0x00, 0x00, 0x00, 0x0f, 0x05, 0x0f, 0x0b};

/* 0x2000 xor eax,eax | 0x2002 je 0x2007 | 0x2004 jmp 0x2008 | 0x2006 nop |
 * 0x2007 call 0x200c | 0x200c jmp rax | 0x200e call rax | 0x2010 nop |
 * 0x2011 (bad: push es is invalid in 64-bit mode) */
static const uint8_t x86_code2[] = {0x31, 0xc0, 0x74, 0x03, 0xeb, 0x02, 0x90, 0xe8, 0x00,
				    0x00, 0x00, 0x00, 0xff, 0xe0, 0xff, 0xd0, 0x90, 0x06};

/* 0x3000 nop | 0x3001 nop, then the segment ends */
static const uint8_t x86_code3[] = {0x90, 0x90};

static const struct ep_code_segment x86_segs[] = {
    {.vaddr = 0x1000, .bytes = x86_code, .size = sizeof(x86_code)},
    {.vaddr = 0x2000, .bytes = x86_code2, .size = sizeof(x86_code2)},
    {.vaddr = 0x3000, .bytes = x86_code3, .size = sizeof(x86_code3)},
};

static struct ep_decoder *x86_decoder(void)
{
	struct ep_decoder *d = ep_decoder_new(EP_ARCH_X86_64, x86_segs, 3);
	assert_non_null(d);
	return d;
}

static enum ep_walk_status walk(struct ep_decoder *d, uint64_t start, uint64_t end,
				uint32_t from_site, size_t max, size_t *n,
				struct ep_walk_step *steps, struct ep_walk_step *closing)
{
	return ep_decoder_walk_to_branch(d, start, end, from_site, steps, max, n, closing);
}

static void test_insn_text(void **state)
{
	(void)state;
	struct ep_decoder *d = x86_decoder();
	struct ep_insn_info info;
	char text[64];
	assert_true(ep_decoder_insn_text(d, 0x1003, &info, text, sizeof(text)));
	assert_string_equal(text, "je 0x1007");
	assert_int_equal(info.kind, EP_BRANCH_COND);
	assert_int_equal(info.len, 2);
	assert_true(ep_decoder_insn_text(d, 0x1009, &info, text, sizeof(text)));
	assert_string_equal(text, "ret");
	assert_false(ep_decoder_insn_text(d, 0x5000, &info, text, sizeof(text)));
	ep_decoder_free(d);
}

static void test_walk_statuses(void **state)
{
	(void)state;
	struct ep_decoder *d = x86_decoder();
	struct ep_walk_step steps[8], closing;
	size_t n;
	assert_int_equal(walk(d, 0x1000, 0x1007, EP_NO_SITE, 8, &n, steps, &closing), EP_WALK_OK);
	assert_int_equal(n, 1);
	const struct ep_site *je = ep_decoder_site(d, steps[0].site);
	assert_int_equal(je->addr, 0x1003);
	assert_int_equal(je->kind, EP_BRANCH_COND);
	assert_int_equal(je->target, 0x1007);
	assert_int_equal(je->fallthrough, 0x1005);
	assert_int_equal(je->len, 2);
	assert_int_equal(ep_decoder_range(d, steps[0].range)->start, 0x1000);
	assert_int_equal(ep_decoder_range(d, steps[0].range)->end, 0x1003);
	assert_int_equal(ep_decoder_site(d, closing.site)->addr, 0x1007);
	assert_int_equal(ep_decoder_range(d, closing.range)->start, 0x1005);
	assert_int_equal(ep_decoder_range(d, closing.range)->end, 0x1007);
	uint32_t range_5_7 = closing.range;

	assert_int_equal(walk(d, 0x1000, 0x1009, EP_NO_SITE, 8, &n, steps, &closing), EP_WALK_OK);
	assert_int_equal(n, 2);
	assert_int_equal(ep_decoder_site(d, steps[1].site)->addr, 0x1007);
	assert_int_equal(steps[1].range, range_5_7);
	assert_int_equal(ep_decoder_site(d, closing.site)->kind, EP_BRANCH_RETURN);
	/* the ret comes first: the call is not on the straight line */
	assert_int_equal(walk(d, 0x1000, 0x100a, EP_NO_SITE, 8, &n, steps, &closing),
			 EP_WALK_BLOCKED);
	assert_int_equal(n, 0);
	/* inside an instruction, and on an instruction that is no branch */
	assert_int_equal(walk(d, 0x1000, 0x1004, EP_NO_SITE, 8, &n, steps, &closing),
			 EP_WALK_OVERRUN);
	assert_int_equal(walk(d, 0x1000, 0x1005, EP_NO_SITE, 8, &n, steps, &closing),
			 EP_WALK_OVERRUN);
	assert_int_equal(walk(d, 0x1000, 0x1001, EP_NO_SITE, 8, &n, steps, &closing),
			 EP_WALK_OVERRUN);
	/* behind the start */
	assert_int_equal(walk(d, 0x1005, 0x1003, EP_NO_SITE, 8, &n, steps, &closing),
			 EP_WALK_OVERRUN);
	assert_int_equal(walk(d, 0x4000, 0x4004, EP_NO_SITE, 8, &n, steps, &closing),
			 EP_WALK_NO_CODE);
	assert_int_equal(walk(d, 0x1000, 0x1009, EP_NO_SITE, 1, &n, steps, &closing),
			 EP_WALK_TOO_LONG);
	assert_int_equal(walk(d, 0x1000, 0x1009, EP_NO_SITE, 2, &n, steps, &closing), EP_WALK_OK);
	/* a different walk through the same straight line shares its range id */
	assert_int_equal(walk(d, 0x1005, 0x1007, EP_NO_SITE, 8, &n, steps, &closing), EP_WALK_OK);
	assert_int_equal(n, 0);
	assert_int_equal(closing.range, range_5_7);
	/* a walk that starts mid-range has a range of its own */
	assert_int_equal(walk(d, 0x1006, 0x1007, EP_NO_SITE, 8, &n, steps, &closing), EP_WALK_OK);
	assert_int_not_equal(closing.range, range_5_7);
	assert_int_equal(ep_decoder_range(d, closing.range)->start, 0x1006);
	/* landing right on a branch: an empty straight line */
	assert_int_equal(walk(d, 0x100a, 0x100a, EP_NO_SITE, 8, &n, steps, &closing), EP_WALK_OK);
	assert_int_equal(n, 0);
	assert_int_equal(ep_decoder_site(d, closing.site)->kind, EP_BRANCH_CALL);
	assert_int_equal(ep_decoder_site(d, closing.site)->target, 0x100f);
	assert_int_equal(ep_decoder_range(d, closing.range)->start, 0x100a);
	assert_int_equal(ep_decoder_range(d, closing.range)->end, 0x100a);
	/* syscall returns to the next instruction: the line runs on to ud2 */
	assert_int_equal(walk(d, 0x100f, 0x1011, EP_NO_SITE, 8, &n, steps, &closing), EP_WALK_OK);
	assert_int_equal(ep_decoder_site(d, closing.site)->kind, EP_BRANCH_OTHER);
	assert_int_equal(walk(d, 0x100f, 0x1013, EP_NO_SITE, 8, &n, steps, &closing),
			 EP_WALK_BLOCKED);
	ep_decoder_free(d);
}

static void test_blocked_bad_and_no_code(void **state)
{
	(void)state;
	struct ep_decoder *d = x86_decoder();
	struct ep_walk_step steps[8], closing;
	size_t n;
	assert_int_equal(walk(d, 0x2000, 0x2004, EP_NO_SITE, 8, &n, steps, &closing), EP_WALK_OK);
	assert_int_equal(n, 1);
	const struct ep_site *jmp = ep_decoder_site(d, closing.site);
	assert_int_equal(jmp->kind, EP_BRANCH_JUMP);
	assert_int_equal(jmp->target, 0x2008);
	/* by a jump, by a call (even one to the next instruction) */
	assert_int_equal(walk(d, 0x2000, 0x2007, EP_NO_SITE, 8, &n, steps, &closing),
			 EP_WALK_BLOCKED);
	assert_int_equal(walk(d, 0x2006, 0x200c, EP_NO_SITE, 8, &n, steps, &closing),
			 EP_WALK_BLOCKED);
	assert_int_equal(walk(d, 0x2006, 0x2007, EP_NO_SITE, 8, &n, steps, &closing), EP_WALK_OK);
	const struct ep_site *call = ep_decoder_site(d, closing.site);
	assert_int_equal(call->kind, EP_BRANCH_CALL);
	assert_int_equal(call->target, 0x200c);
	assert_int_equal(call->fallthrough, 0x200c);
	assert_int_equal(walk(d, 0x200c, 0x200c, EP_NO_SITE, 8, &n, steps, &closing), EP_WALK_OK);
	assert_int_equal(ep_decoder_site(d, closing.site)->kind, EP_BRANCH_JUMP_INDIRECT);
	assert_int_equal(ep_decoder_site(d, closing.site)->target, 0);
	assert_int_equal(walk(d, 0x200e, 0x200e, EP_NO_SITE, 8, &n, steps, &closing), EP_WALK_OK);
	assert_int_equal(ep_decoder_site(d, closing.site)->kind, EP_BRANCH_CALL_INDIRECT);
	/* undecodable bytes before the end */
	assert_int_equal(walk(d, 0x2010, 0x2011, EP_NO_SITE, 8, &n, steps, &closing),
			 EP_WALK_BAD_INSN);
	assert_int_equal(walk(d, 0x2010, 0x2100, EP_NO_SITE, 8, &n, steps, &closing),
			 EP_WALK_BAD_INSN);
	/* running off the end of the code */
	assert_int_equal(walk(d, 0x3000, 0x3005, EP_NO_SITE, 8, &n, steps, &closing),
			 EP_WALK_NO_CODE);
	assert_int_equal(walk(d, 0x3000, 0x3001, EP_NO_SITE, 8, &n, steps, &closing),
			 EP_WALK_OVERRUN);
	assert_int_equal(ep_decoder_walk_to_ip(d, 0x3000, 0x3002, EP_NO_SITE, steps, 8, &n),
			 EP_WALK_NO_CODE);
	assert_int_equal(ep_decoder_walk_to_ip(d, 0x3000, 0x3001, EP_NO_SITE, steps, 8, &n),
			 EP_WALK_OK);
	assert_int_equal(ep_decoder_walk_to_ip(d, 0x2010, 0x2011, EP_NO_SITE, steps, 8, &n),
			 EP_WALK_BAD_INSN);
	ep_decoder_free(d);
}

static void test_site_at_and_walk_to_ip(void **state)
{
	(void)state;
	struct ep_decoder *d = x86_decoder();
	assert_int_equal(ep_decoder_site_at(d, 0x1005), EP_NO_SITE);
	assert_int_equal(ep_decoder_site_at(d, 0x1000), EP_NO_SITE);
	assert_int_equal(ep_decoder_site_at(d, 0x100f), EP_NO_SITE); /* syscall */
	assert_int_equal(ep_decoder_site_at(d, 0x5000), EP_NO_SITE);
	assert_int_equal(ep_decoder_site_count(d), 0);
	uint32_t jne = ep_decoder_site_at(d, 0x1007);
	assert_int_not_equal(jne, EP_NO_SITE);
	assert_int_equal(ep_decoder_site(d, jne)->target, 0x1000);
	assert_int_equal(ep_decoder_site_at(d, 0x1007), jne); /* cached, same id */
	assert_int_equal(ep_decoder_site_count(d), 1);
	assert_ptr_equal(ep_decoder_sites(d) + jne, ep_decoder_site(d, jne));

	struct ep_walk_step steps[8];
	size_t n;
	assert_int_equal(ep_decoder_walk_to_ip(d, 0x1000, 0x1000, EP_NO_SITE, steps, 8, &n),
			 EP_WALK_OK);
	assert_int_equal(n, 0);
	assert_int_equal(ep_decoder_walk_to_ip(d, 0x1000, 0x1003, EP_NO_SITE, steps, 8, &n),
			 EP_WALK_OK);
	assert_int_equal(n, 0);
	assert_int_equal(ep_decoder_walk_to_ip(d, 0x1000, 0x1005, EP_NO_SITE, steps, 8, &n),
			 EP_WALK_OK);
	assert_int_equal(n, 1);
	assert_int_equal(ep_decoder_site(d, steps[0].site)->addr, 0x1003);
	assert_int_equal(ep_decoder_range(d, steps[0].range)->start, 0x1000);
	assert_int_equal(ep_decoder_walk_to_ip(d, 0x1000, 0x1006, EP_NO_SITE, steps, 8, &n),
			 EP_WALK_OK);
	assert_int_equal(n, 1);
	/* the ret itself is the next instruction: both conditionals passed */
	assert_int_equal(ep_decoder_walk_to_ip(d, 0x1000, 0x1009, EP_NO_SITE, steps, 8, &n),
			 EP_WALK_OK);
	assert_int_equal(n, 2);
	assert_int_equal(ep_decoder_site(d, steps[1].site), ep_decoder_site(d, jne));
	assert_int_equal(ep_decoder_walk_to_ip(d, 0x1000, 0x1009, EP_NO_SITE, steps, 1, &n),
			 EP_WALK_TOO_LONG);
	assert_int_equal(ep_decoder_walk_to_ip(d, 0x1000, 0x1004, EP_NO_SITE, steps, 8, &n),
			 EP_WALK_OVERRUN);
	assert_int_equal(ep_decoder_walk_to_ip(d, 0x1005, 0x1000, EP_NO_SITE, steps, 8, &n),
			 EP_WALK_OVERRUN);
	assert_int_equal(ep_decoder_walk_to_ip(d, 0x1000, 0x100a, EP_NO_SITE, steps, 8, &n),
			 EP_WALK_BLOCKED);
	assert_int_equal(ep_decoder_walk_to_ip(d, 0x4000, 0x4000, EP_NO_SITE, steps, 8, &n),
			 EP_WALK_NO_CODE);
	ep_decoder_free(d);
}

/* A walk told which branch landed on its start (target or fall-through)
 * answers as one that was not; a from_site that did not land there is no
 * shortcut either. */
static void test_from_site(void **state)
{
	(void)state;
	struct ep_decoder *d = x86_decoder();
	struct ep_walk_step steps[8], closing, ref[8], ref_closing;
	size_t n, ref_n;
	uint32_t jne = ep_decoder_site_at(d, 0x1007), je = ep_decoder_site_at(d, 0x1003);
	for (int round = 0; round < 2; round++) {
		assert_int_equal(walk(d, 0x1000, 0x1009, jne, 8, &n, steps, &closing), EP_WALK_OK);
		assert_int_equal(walk(d, 0x1000, 0x1009, EP_NO_SITE, 8, &ref_n, ref, &ref_closing),
				 EP_WALK_OK);
		assert_int_equal(n, ref_n);
		assert_memory_equal(steps, ref, n * sizeof(*steps));
		assert_memory_equal(&closing, &ref_closing, sizeof(closing));
		/* je's fall-through, then its target */
		assert_int_equal(walk(d, 0x1005, 0x1007, je, 8, &n, steps, &closing), EP_WALK_OK);
		assert_int_equal(n, 0);
		assert_int_equal(closing.site, jne);
		assert_int_equal(ep_decoder_range(d, closing.range)->start, 0x1005);
		assert_int_equal(walk(d, 0x1007, 0x1007, je, 8, &n, steps, &closing), EP_WALK_OK);
		assert_int_equal(closing.site, jne);
		assert_int_equal(ep_decoder_range(d, closing.range)->start, 0x1007);
		assert_int_equal(walk(d, 0x1006, 0x1007, je, 8, &n, steps, &closing), EP_WALK_OK);
		assert_int_equal(ep_decoder_range(d, closing.range)->start, 0x1006);
		assert_int_equal(ep_decoder_walk_to_ip(d, 0x1000, 0x1005, jne, steps, 8, &n),
				 EP_WALK_OK);
		assert_int_equal(n, 1);
	}
	ep_decoder_free(d);
}

/* A walk whose run brings many new sites (the site table grows under it)
 * after a known from_site. */
static void test_many_sites(void **state)
{
	(void)state;
	enum { NJE = 300 };
	uint8_t code[2 + 2 * NJE + 1];
	code[0] = 0xeb; /* jmp +0 */
	code[1] = 0x00;
	for (int i = 0; i < NJE; i++) {
		code[2 + 2 * i] = 0x74; /* je +0 */
		code[3 + 2 * i] = 0x00;
	}
	code[2 + 2 * NJE] = 0xc3;
	struct ep_code_segment seg = {.vaddr = 0x6000, .bytes = code, .size = sizeof(code)};
	struct ep_decoder *d = ep_decoder_new(EP_ARCH_X86_64, &seg, 1);
	assert_non_null(d);
	uint32_t jmp = ep_decoder_site_at(d, 0x6000);
	assert_int_equal(ep_decoder_site(d, jmp)->target, 0x6002);
	static struct ep_walk_step steps[NJE + 1];
	struct ep_walk_step closing;
	size_t n;
	uint64_t ret = 0x6002 + 2 * NJE;
	for (int round = 0; round < 2; round++) {
		assert_int_equal(
		    ep_decoder_walk_to_branch(d, 0x6002, ret, jmp, steps, NJE, &n, &closing),
		    EP_WALK_OK);
		assert_int_equal(n, NJE);
		assert_int_equal(ep_decoder_site(d, closing.site)->kind, EP_BRANCH_RETURN);
		/* every range but the first is empty: je +0 falls onto the next je */
		assert_int_equal(ep_decoder_range(d, steps[NJE - 1].range)->start,
				 ep_decoder_range(d, steps[NJE - 1].range)->end);
		assert_int_equal(
		    ep_decoder_walk_to_branch(d, 0x6002, ret, jmp, steps, NJE - 1, &n, &closing),
		    EP_WALK_TOO_LONG);
		assert_int_equal(ep_decoder_walk_to_ip(d, 0x6002, ret - 2, jmp, steps, NJE, &n),
				 EP_WALK_OK);
		assert_int_equal(n, NJE - 1);
	}
	assert_int_equal(ep_decoder_site_count(d), NJE + 2);
	assert_int_equal(ep_decoder_range_count(d), NJE + 1);
	ep_decoder_free(d);
}

static void test_line_insns(void **state)
{
	(void)state;
	struct ep_decoder *d = x86_decoder();
	uint64_t a[8];
	size_t n;
	assert_int_equal(ep_decoder_line_insns(d, 0x1000, 0x1007, a, 8, &n), EP_WALK_OK);
	assert_int_equal(n, 5);
	const uint64_t want[] = {0x1000, 0x1003, 0x1005, 0x1006, 0x1007};
	assert_memory_equal(a, want, sizeof(want));
	assert_int_equal(ep_decoder_line_insns(d, 0x1000, 0x1004, a, 8, &n), EP_WALK_OVERRUN);
	assert_int_equal(ep_decoder_line_insns(d, 0x1000, 0x100a, a, 8, &n), EP_WALK_BLOCKED);
	assert_int_equal(ep_decoder_line_insns(d, 0x1000, 0x1007, a, 2, &n), EP_WALK_TOO_LONG);
	assert_int_equal(ep_decoder_line_insns(d, 0x2010, 0x2011, a, 8, &n), EP_WALK_BAD_INSN);
	assert_int_equal(ep_decoder_line_insns(d, 0x3000, 0x3002, a, 8, &n), EP_WALK_NO_CODE);
	ep_decoder_free(d);
}

/* Instructions that leave the straight line in less common ways. */
static void test_x86_kinds(void **state)
{
	(void)state;
	static const uint8_t code[] = {
	    0xcc,				/* 0 int3 */
	    0xcd, 0x80,				/* 1 int 0x80 */
	    0xf4,				/* 3 hlt */
	    0x48, 0xcf,				/* 4 iretq */
	    0xe2, 0xfe,				/* 6 loop 6 */
	    0xe3, 0x02,				/* 8 jrcxz 0xc */
	    0xc2, 0x08, 0x00,			/* a ret 8 */
	    0xf3, 0xc3,				/* d repz ret */
	    0x3e, 0xff, 0xe0,			/* f notrack jmp rax */
	    0xeb, 0xfe,				/* 12 jmp 0x12 */
	    0xff, 0x15, 0x00, 0x00, 0x00, 0x00, /* 14 call [rip] */
	    0x0f, 0x0b,				/* 1a ud2 */
	    0x0f, 0x34,				/* 1c sysenter */
	    0x0f, 0x84, 0x00, 0x00, 0x00, 0x00, /* 1e je near 0x24 */
	};
	static const struct {
		uint8_t off, kind, len;
		uint64_t target;
	} want[] = {
	    {0x00, EP_BRANCH_OTHER, 1, 0},	   {0x01, EP_BRANCH_OTHER, 2, 0},
	    {0x03, EP_BRANCH_OTHER, 1, 0},	   {0x04, EP_BRANCH_OTHER, 2, 0},
	    {0x06, EP_BRANCH_COND, 2, 0x8006},	   {0x08, EP_BRANCH_COND, 2, 0x800c},
	    {0x0a, EP_BRANCH_RETURN, 3, 0},	   {0x0d, EP_BRANCH_RETURN, 2, 0},
	    {0x0f, EP_BRANCH_JUMP_INDIRECT, 3, 0}, {0x12, EP_BRANCH_JUMP, 2, 0x8012},
	    {0x14, EP_BRANCH_CALL_INDIRECT, 6, 0}, {0x1a, EP_BRANCH_OTHER, 2, 0},
	    {0x1c, EP_BRANCH_NONE, 2, 0},	   {0x1e, EP_BRANCH_COND, 6, 0x8024},
	};
	struct ep_code_segment seg = {.vaddr = 0x8000, .bytes = code, .size = sizeof(code)};
	struct ep_decoder *d = ep_decoder_new(EP_ARCH_X86_64, &seg, 1);
	assert_non_null(d);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		uint32_t site = ep_decoder_site_at(d, 0x8000 + want[i].off);
		if (want[i].kind == EP_BRANCH_NONE) {
			assert_int_equal(site, EP_NO_SITE);
			continue;
		}
		assert_int_not_equal(site, EP_NO_SITE);
		const struct ep_site *s = ep_decoder_site(d, site);
		assert_int_equal(s->addr, 0x8000 + want[i].off);
		assert_int_equal(s->kind, want[i].kind);
		assert_int_equal(s->len, want[i].len);
		assert_int_equal(s->target, want[i].target);
		assert_int_equal(s->fallthrough, s->addr + s->len);
	}
	ep_decoder_free(d);
}

struct objdump_insn {
	uint64_t addr;
	uint64_t target; /* direct target, 0 if none */
	uint8_t kind;	 /* what we expect the decoder to say */
};

static uint8_t expected_kind(const char *mnem, bool indirect)
{
	if (strncmp(mnem, "ret", 3) == 0)
		return EP_BRANCH_RETURN;
	if (strncmp(mnem, "call", 4) == 0)
		return indirect ? EP_BRANCH_CALL_INDIRECT : EP_BRANCH_CALL;
	if (strcmp(mnem, "jmp") == 0)
		return indirect ? EP_BRANCH_JUMP_INDIRECT : EP_BRANCH_JUMP;
	if (mnem[0] == 'j' || strncmp(mnem, "loop", 4) == 0)
		return EP_BRANCH_COND;
	if (!strcmp(mnem, "hlt") || !strcmp(mnem, "ud2") || !strcmp(mnem, "int3"))
		return EP_BRANCH_OTHER;
	return EP_BRANCH_NONE;
}

/* Every instruction objdump -d lists; kind from its mnemonic (prefixes such
 * as bnd, notrack, repz skipped). */
static struct objdump_insn *objdump_insns(const char *path, size_t *count)
{
	char cmd[4200];
	snprintf(cmd, sizeof(cmd), "objdump -d --no-show-raw-insn %s", path);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	size_t n = 0, cap = 1024;
	struct objdump_insn *v = malloc(cap * sizeof(*v));
	assert_non_null(v);
	char line[1024];
	while (fgets(line, sizeof(line), p)) {
		unsigned long long addr, target;
		char *tab = strchr(line, '\t');
		if (!tab || sscanf(line, " %llx:", &addr) != 1)
			continue;
		char *save = NULL, *mnem = strtok_r(tab + 1, " \t\n", &save);
		while (mnem &&
		       (!strcmp(mnem, "bnd") || !strcmp(mnem, "notrack") || !strcmp(mnem, "repz") ||
			!strcmp(mnem, "rep") || !strcmp(mnem, "cs") || !strcmp(mnem, "ds") ||
			!strcmp(mnem, "data16")))
			mnem = strtok_r(NULL, " \t\n", &save);
		if (!mnem)
			continue;
		char *ops = strtok_r(NULL, "\n", &save);
		bool indirect = ops && strchr(ops, '*');
		if (n == cap) {
			cap *= 2;
			v = realloc(v, cap * sizeof(*v));
			assert_non_null(v);
		}
		v[n].addr = addr;
		v[n].kind = expected_kind(mnem, indirect);
		v[n].target = 0;
		if (v[n].kind != EP_BRANCH_NONE && !indirect && ops &&
		    sscanf(ops, " %llx", &target) == 1)
			v[n].target = target;
		n++;
	}
	pclose(p);
	*count = n;
	return v;
}

/* The executable PT_LOAD of a non-PIE binary, read here with libelf so the
 * test does not lean on the resolve stage. */
static uint8_t *read_code(const char *path, struct ep_code_segment *seg)
{
	assert_int_not_equal(elf_version(EV_CURRENT), EV_NONE);
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	assert_non_null(e);
	size_t phnum;
	assert_int_equal(elf_getphdrnum(e, &phnum), 0);
	uint8_t *bytes = NULL;
	for (size_t i = 0; i < phnum && !bytes; i++) {
		GElf_Phdr ph;
		assert_non_null(gelf_getphdr(e, (int)i, &ph));
		if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X))
			continue;
		bytes = malloc(ph.p_filesz);
		assert_non_null(bytes);
		assert_int_equal(pread(fd, bytes, ph.p_filesz, (off_t)ph.p_offset),
				 (ssize_t)ph.p_filesz);
		*seg = (struct ep_code_segment){
		    .vaddr = ph.p_vaddr, .bytes = bytes, .size = ph.p_filesz};
	}
	elf_end(e);
	close(fd);
	assert_non_null(bytes);
	return bytes;
}

/* test.binary's code and objdump's listing of it, for the tests that
 * compare walks over the whole program. */
struct listing {
	struct ep_code_segment seg;
	uint8_t *bytes;
	struct objdump_insn *v;
	size_t count;
};

static const struct objdump_insn *listing_load(struct listing *l)
{
	const char *path = ep_test_fixture("test.binary");
	l->bytes = read_code(path, &l->seg);
	l->v = objdump_insns(path, &l->count);
	return l->v;
}

static void listing_free(struct listing *l)
{
	free(l->v);
	free(l->bytes);
}

/*
 * objdump, a decoder we did not write, against ours on test.binary: every
 * instruction it lists is a site exactly when it is a branch, with the same
 * kind and target; and from every direct target, each walk along objdump's
 * listing to the branches that follow gives the conditionals objdump shows
 * in between, and walk_to_ip accepts exactly its instruction starts.
 */
static void test_agrees_with_objdump(void **state)
{
	(void)state;
	struct listing l;
	const struct objdump_insn *v = listing_load(&l);
	size_t count = l.count;
	assert_true(count > 5000);
	struct ep_decoder *d = ep_decoder_new(EP_ARCH_X86_64, &l.seg, 1);
	assert_non_null(d);

	int branches = 0, direct = 0;
	for (size_t i = 0; i < count; i++) {
		uint32_t site = ep_decoder_site_at(d, v[i].addr);
		if (v[i].kind == EP_BRANCH_NONE) {
			assert_int_equal(site, EP_NO_SITE);
			continue;
		}
		assert_int_not_equal(site, EP_NO_SITE);
		const struct ep_site *s = ep_decoder_site(d, site);
		assert_int_equal(s->addr, v[i].addr);
		assert_int_equal(s->kind, v[i].kind);
		assert_int_equal(s->target, v[i].target);
		if (i + 1 < count && v[i + 1].addr > s->addr && v[i + 1].addr - s->addr < 16)
			assert_int_equal(s->fallthrough, v[i + 1].addr);
		branches++;
		direct += v[i].target != 0;
	}
	printf("# %d branches (%d direct) agree with objdump\n", branches, direct);
	assert_true(branches > 1000);

	int walks = 0, gaps = 0;
	struct ep_walk_step steps[256], closing;
	for (size_t i = 0; i < count; i++) {
		if (!v[i].target)
			continue;
		/* the target's index in the listing (sorted by address) */
		size_t lo = 0, hi = count;
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;
			if (v[mid].addr < v[i].target)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo == count || v[lo].addr != v[i].target)
			continue;
		uint32_t from = ep_decoder_site_at(d, v[i].addr);
		uint64_t start = v[lo].addr;
		size_t conds = 0;
		for (size_t j = lo; j < count; j++) {
			size_t n;
			if (j > lo && v[j].addr + 1 < v[j + 1 < count ? j + 1 : j].addr)
				assert_int_equal(ep_decoder_walk_to_ip(d, start, v[j].addr + 1,
								       from, steps, 256, &n),
						 EP_WALK_OVERRUN);
			assert_int_equal(
			    ep_decoder_walk_to_ip(d, start, v[j].addr, from, steps, 256, &n),
			    EP_WALK_OK);
			assert_int_equal(n, conds);
			if (v[j].kind != EP_BRANCH_NONE) {
				assert_int_equal(ep_decoder_walk_to_branch(d, start, v[j].addr,
									   from, steps, 256, &n,
									   &closing),
						 EP_WALK_OK);
				assert_int_equal(n, conds);
				assert_int_equal(ep_decoder_site(d, closing.site)->addr, v[j].addr);
				const struct ep_range_def *r = ep_decoder_range(d, closing.range);
				assert_int_equal(r->end, v[j].addr);
				assert_true(r->start >= start && r->start <= r->end);
				for (size_t k = 0; k < n; k++)
					assert_int_equal(ep_decoder_site(d, steps[k].site)->kind,
							 EP_BRANCH_COND);
				walks++;
			} else {
				assert_int_equal(ep_decoder_walk_to_branch(d, start, v[j].addr,
									   from, steps, 256, &n,
									   &closing),
						 EP_WALK_OVERRUN);
			}
			if (v[j].kind != EP_BRANCH_NONE && v[j].kind != EP_BRANCH_COND)
				break;
			conds += v[j].kind == EP_BRANCH_COND;
			if (j + 1 == count || conds >= 200)
				break;
			/* objdump's listing jumps a gap (between sections) */
			if (ep_decoder_walk_to_ip(d, v[j].addr, v[j + 1].addr, EP_NO_SITE, steps,
						  256, &n) != EP_WALK_OK) {
				gaps++;
				break;
			}
		}
	}
	printf("# %d walks agree with objdump, %d stopped at a gap\n", walks, gaps);
	assert_true(walks > 1000);
	assert_true(gaps < 10);
	ep_decoder_free(d);
	listing_free(&l);
}

/* Runs built in a different order (so tails are shared differently) give
 * the same walks: sites and ranges compared by address. */
static void test_build_order(void **state)
{
	(void)state;
	struct listing l;
	const struct objdump_insn *v = listing_load(&l);
	size_t count = l.count;
	struct ep_decoder *fwd = ep_decoder_new(EP_ARCH_X86_64, &l.seg, 1);
	struct ep_decoder *bwd = ep_decoder_new(EP_ARCH_X86_64, &l.seg, 1);
	/* warm up: one from low addresses upwards, the other downwards */
	struct ep_walk_step s1[256], s2[256], c1, c2;
	size_t n1, n2;
	for (size_t i = 0; i < count; i++) {
		ep_decoder_walk_to_ip(fwd, v[i].addr, v[i].addr, EP_NO_SITE, s1, 256, &n1);
		ep_decoder_walk_to_ip(bwd, v[count - 1 - i].addr, v[count - 1 - i].addr, EP_NO_SITE,
				      s2, 256, &n2);
	}
	int compared = 0;
	for (size_t i = 0; i < count; i++) {
		for (size_t j = i; j < count && j < i + 64; j++) {
			if (v[j].kind == EP_BRANCH_NONE)
				continue;
			enum ep_walk_status a = ep_decoder_walk_to_branch(
			    fwd, v[i].addr, v[j].addr, EP_NO_SITE, s1, 256, &n1, &c1);
			enum ep_walk_status b = ep_decoder_walk_to_branch(
			    bwd, v[i].addr, v[j].addr, EP_NO_SITE, s2, 256, &n2, &c2);
			assert_int_equal(a, b);
			if (a != EP_WALK_OK)
				break;
			assert_int_equal(n1, n2);
			for (size_t k = 0; k <= n1; k++) {
				struct ep_walk_step x = k < n1 ? s1[k] : c1,
						    y = k < n2 ? s2[k] : c2;
				assert_int_equal(ep_decoder_site(fwd, x.site)->addr,
						 ep_decoder_site(bwd, y.site)->addr);
				const struct ep_range_def *rx = ep_decoder_range(fwd, x.range),
							  *ry = ep_decoder_range(bwd, y.range);
				assert_int_equal(rx->start, ry->start);
				assert_int_equal(rx->end, ry->end);
				assert_int_equal(rx->insns, ry->insns);
				/* objdump's instructions from start to end */
				uint32_t listed = 0;
				for (size_t q = 0; q < count && v[q].addr <= rx->end; q++)
					listed += v[q].addr >= rx->start;
				assert_int_equal(rx->insns, listed);
			}
			compared++;
		}
	}
	printf("# %d walks equal in both build orders\n", compared);
	assert_true(compared > 1000);
	ep_decoder_free(fwd);
	ep_decoder_free(bwd);
	listing_free(&l);
}

/* Walks are remembered by (start, end) in a fixed-size table: walked again
 * (remembered, or evicted by a colliding gap and walked anew) each gives
 * what it gave the first time, and the uncopied lookup gives the same steps
 * as the copying walk. Enough gaps to collide in the table many times. */
static void test_walk_memo(void **state)
{
	(void)state;
	struct listing l;
	const struct objdump_insn *v = listing_load(&l);
	size_t count = l.count;
	struct ep_decoder *d = ep_decoder_new(EP_ARCH_X86_64, &l.seg, 1);
	struct walk_result {
		uint64_t start, end;
		uint64_t digest; /* status, steps and closing site */
	} *res = NULL;
	size_t nres = 0, cap = 0;
	struct ep_walk_step steps[256], closing;
	for (int pass = 0; pass < 2; pass++) {
		size_t k = 0;
		for (size_t i = 0; i < count; i++) {
			for (size_t j = i; j < count && j < i + 64; j++) {
				if (v[j].kind == EP_BRANCH_NONE)
					continue;
				size_t n = 0;
				enum ep_walk_status ws = ep_decoder_walk_to_branch(
				    d, v[i].addr, v[j].addr, EP_NO_SITE, steps, 256, &n, &closing);
				uint64_t digest = (uint64_t)ws * 1000003 + n;
				if (ws == EP_WALK_OK) {
					const struct ep_walk_step *found = NULL;
					size_t n2 = 0;
					struct ep_walk_step c2;
					assert_int_equal(ep_decoder_walk_lookup(
							     d, v[i].addr, v[j].addr, EP_NO_SITE,
							     256, &found, &n2, &c2),
							 EP_WALK_OK);
					assert_int_equal(n2, n);
					assert_memory_equal(found, steps, n * sizeof(*steps));
					assert_memory_equal(&c2, &closing, sizeof(c2));
					for (size_t m = 0; m < n; m++)
						digest = digest * 31 + steps[m].site * 7 +
							 steps[m].range;
					digest = digest * 31 + closing.site * 7 + closing.range;
				}
				if (pass == 0) {
					if (nres == cap) {
						cap = cap ? cap * 2 : 4096;
						res = realloc(res, cap * sizeof(*res));
						assert_non_null(res);
					}
					res[nres++] =
					    (struct walk_result){v[i].addr, v[j].addr, digest};
				} else {
					assert_true(k < nres);
					assert_int_equal(res[k].start, v[i].addr);
					assert_int_equal(res[k].end, v[j].addr);
					assert_int_equal(res[k].digest, digest);
				}
				k++;
			}
		}
	}
	printf("# %zu walks repeated\n", nres);
	assert_true(nres > 16384); /* more gaps than the table holds */
	free(res);
	ep_decoder_free(d);
	listing_free(&l);
}

static void test_arm64_kinds(void **state)
{
	(void)state;
	/* b.eq +8; cbz x0,+8; tbz w1,#3,+8; b +8; bl +8; br x1; blr x1; ret;
	 * cbnz w2,-4; tbnz x3,#40,+12; b.al +8 (always: a jump); add x0,x0,#1;
	 * svc #0 */
	static const uint32_t insns[] = {0x54000040, 0xb4000040, 0x36180041, 0x14000002, 0x94000002,
					 0xd61f0020, 0xd63f0020, 0xd65f03c0, 0x35ffffe2, 0xb7400063,
					 0x5400004e, 0x91000400, 0xd4000001};
	static const struct {
		uint8_t kind;
		int64_t delta; /* target - addr, or 0 */
	} want[] = {
	    {EP_BRANCH_COND, 8},	  {EP_BRANCH_COND, 8},	 {EP_BRANCH_COND, 8},
	    {EP_BRANCH_JUMP, 8},	  {EP_BRANCH_CALL, 8},	 {EP_BRANCH_JUMP_INDIRECT, 0},
	    {EP_BRANCH_CALL_INDIRECT, 0}, {EP_BRANCH_RETURN, 0}, {EP_BRANCH_COND, -4},
	    {EP_BRANCH_COND, 12},	  {EP_BRANCH_JUMP, 8},	 {EP_BRANCH_NONE, 0},
	    {EP_BRANCH_NONE, 0},
	};
	struct ep_code_segment seg = {
	    .vaddr = 0x4000, .bytes = (const uint8_t *)insns, .size = sizeof(insns)};
	struct ep_decoder *d = ep_decoder_new(EP_ARCH_AARCH64, &seg, 1);
	assert_non_null(d);
	for (unsigned i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		uint64_t addr = 0x4000 + 4 * i;
		uint32_t site = ep_decoder_site_at(d, addr);
		if (want[i].kind == EP_BRANCH_NONE) {
			assert_int_equal(site, EP_NO_SITE);
			continue;
		}
		assert_int_not_equal(site, EP_NO_SITE);
		const struct ep_site *s = ep_decoder_site(d, site);
		assert_int_equal(s->kind, want[i].kind);
		assert_int_equal(s->len, 4);
		assert_int_equal(s->fallthrough, addr + 4);
		assert_int_equal(s->target, want[i].delta ? addr + (uint64_t)want[i].delta : 0);
	}
	/* a walk on arm64: b.eq, cbz and tbz passed, the b closes */
	struct ep_walk_step steps[8], closing;
	size_t n;
	assert_int_equal(walk(d, 0x4000, 0x400c, EP_NO_SITE, 8, &n, steps, &closing), EP_WALK_OK);
	assert_int_equal(n, 3);
	assert_int_equal(ep_decoder_site(d, closing.site)->kind, EP_BRANCH_JUMP);
	assert_int_equal(walk(d, 0x4000, 0x4002, EP_NO_SITE, 8, &n, steps, &closing),
			 EP_WALK_OVERRUN);
	assert_int_equal(walk(d, 0x402c, 0x4034, EP_NO_SITE, 8, &n, steps, &closing),
			 EP_WALK_NO_CODE);
	ep_decoder_free(d);
}

static void test_unsupported_arch(void **state)
{
	(void)state;
	assert_null(ep_decoder_new(EP_ARCH_UNKNOWN, x86_segs, 1));
	assert_string_equal(ep_branch_kind_name(EP_BRANCH_COND), "conditional");
	assert_string_equal(ep_walk_status_name(EP_WALK_OK), "ok");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_walk_statuses),
	    cmocka_unit_test(test_insn_text),
	    cmocka_unit_test(test_blocked_bad_and_no_code),
	    cmocka_unit_test(test_site_at_and_walk_to_ip),
	    cmocka_unit_test(test_from_site),
	    cmocka_unit_test(test_many_sites),
	    cmocka_unit_test(test_line_insns),
	    cmocka_unit_test(test_x86_kinds),
	    cmocka_unit_test(test_agrees_with_objdump),
	    cmocka_unit_test(test_build_order),
	    cmocka_unit_test(test_walk_memo),
	    cmocka_unit_test(test_arm64_kinds),
	    cmocka_unit_test(test_unsupported_arch),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
