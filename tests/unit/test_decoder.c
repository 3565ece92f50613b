/* SPDX-License-Identifier: Apache-2.0 */
#include "test_util.h"

#include <string.h>

#include "decode/decoder.h"
#include "resolve/binary.h"

/* 0x1000 cmp eax,1 | 0x1003 je 0x1007 | 0x1005 nop | 0x1006 nop |
 * 0x1007 jne 0x1000 | 0x1009 ret | 0x100a call 0x100f | 0x100f syscall |
 * 0x1011 ud2 */
static const uint8_t x86_code[] = {0x83, 0xf8, 0x01, 0x74, 0x02, 0x90, 0x90, 0x75, 0xf7, 0xc3,
				   0xe8, 0x00, 0x00, 0x00, 0x00, 0x0f, 0x05, 0x0f, 0x0b};

static struct ep_decoder *x86_decoder(void)
{
	static struct ep_code_segment seg = {
	    .vaddr = 0x1000, .bytes = x86_code, .size = sizeof(x86_code)};
	struct ep_decoder *d = ep_decoder_new(EP_ARCH_X86_64, &seg, 1);
	assert_non_null(d);
	return d;
}

static void test_walk_statuses(void **state)
{
	(void)state;
	struct ep_decoder *d = x86_decoder();
	struct ep_walk_step steps[8], closing;
	size_t n;
	assert_int_equal(
	    ep_decoder_walk_to_branch(d, 0x1000, 0x1007, EP_NO_SITE, steps, 8, &n, &closing),
	    EP_WALK_OK);
	assert_int_equal(n, 1);
	const struct ep_site *je = ep_decoder_site(d, steps[0].site);
	assert_int_equal(je->addr, 0x1003);
	assert_int_equal(je->kind, EP_BRANCH_COND);
	assert_int_equal(je->target, 0x1007);
	assert_int_equal(je->fallthrough, 0x1005);
	assert_int_equal(ep_decoder_range(d, steps[0].range)->start, 0x1000);
	assert_int_equal(ep_decoder_range(d, steps[0].range)->end, 0x1003);
	assert_int_equal(ep_decoder_site(d, closing.site)->addr, 0x1007);
	assert_int_equal(ep_decoder_range(d, closing.range)->start, 0x1005);
	uint32_t range_5_7 = closing.range;

	assert_int_equal(
	    ep_decoder_walk_to_branch(d, 0x1000, 0x1009, EP_NO_SITE, steps, 8, &n, &closing),
	    EP_WALK_OK);
	assert_int_equal(n, 2);
	assert_int_equal(ep_decoder_site(d, closing.site)->kind, EP_BRANCH_RETURN);
	/* the ret comes first: the call is not on the straight line */
	assert_int_equal(
	    ep_decoder_walk_to_branch(d, 0x1000, 0x100a, EP_NO_SITE, steps, 8, &n, &closing),
	    EP_WALK_BLOCKED);
	/* inside an instruction, and on an instruction that is no branch */
	assert_int_equal(
	    ep_decoder_walk_to_branch(d, 0x1000, 0x1004, EP_NO_SITE, steps, 8, &n, &closing),
	    EP_WALK_OVERRUN);
	assert_int_equal(
	    ep_decoder_walk_to_branch(d, 0x1000, 0x1005, EP_NO_SITE, steps, 8, &n, &closing),
	    EP_WALK_OVERRUN);
	assert_int_equal(
	    ep_decoder_walk_to_branch(d, 0x2000, 0x2004, EP_NO_SITE, steps, 8, &n, &closing),
	    EP_WALK_NO_CODE);
	assert_int_equal(
	    ep_decoder_walk_to_branch(d, 0x1000, 0x1009, EP_NO_SITE, steps, 1, &n, &closing),
	    EP_WALK_TOO_LONG);
	/* a different walk through the same straight line shares its range id */
	assert_int_equal(
	    ep_decoder_walk_to_branch(d, 0x1005, 0x1007, EP_NO_SITE, steps, 8, &n, &closing),
	    EP_WALK_OK);
	assert_int_equal(n, 0);
	assert_int_equal(closing.range, range_5_7);
	/* landing right on a branch: an empty straight line */
	assert_int_equal(
	    ep_decoder_walk_to_branch(d, 0x100a, 0x100a, EP_NO_SITE, steps, 8, &n, &closing),
	    EP_WALK_OK);
	assert_int_equal(ep_decoder_site(d, closing.site)->kind, EP_BRANCH_CALL);
	assert_int_equal(ep_decoder_site(d, closing.site)->target, 0x100f);
	/* syscall returns to the next instruction: the line runs on to ud2 */
	assert_int_equal(
	    ep_decoder_walk_to_branch(d, 0x100f, 0x1011, EP_NO_SITE, steps, 8, &n, &closing),
	    EP_WALK_OK);
	assert_int_equal(ep_decoder_site(d, closing.site)->kind, EP_BRANCH_OTHER);
	ep_decoder_free(d);
}

static void test_site_at_and_walk_to_ip(void **state)
{
	(void)state;
	struct ep_decoder *d = x86_decoder();
	assert_int_equal(ep_decoder_site_at(d, 0x1005), EP_NO_SITE);
	assert_int_equal(ep_decoder_site_at(d, 0x1000), EP_NO_SITE);
	uint32_t jne = ep_decoder_site_at(d, 0x1007);
	assert_int_not_equal(jne, EP_NO_SITE);
	assert_int_equal(ep_decoder_site(d, jne)->target, 0x1000);
	assert_int_equal(ep_decoder_site_at(d, 0x1007), jne); /* cached, same id */

	struct ep_walk_step steps[8];
	size_t n;
	assert_int_equal(ep_decoder_walk_to_ip(d, 0x1000, 0x1000, EP_NO_SITE, steps, 8, &n),
			 EP_WALK_OK);
	assert_int_equal(n, 0);
	assert_int_equal(ep_decoder_walk_to_ip(d, 0x1000, 0x1005, EP_NO_SITE, steps, 8, &n),
			 EP_WALK_OK);
	assert_int_equal(n, 1);
	assert_int_equal(ep_decoder_walk_to_ip(d, 0x1000, 0x1009, EP_NO_SITE, steps, 8, &n),
			 EP_WALK_OK);
	assert_int_equal(n, 2);
	assert_int_equal(ep_decoder_walk_to_ip(d, 0x1000, 0x1004, EP_NO_SITE, steps, 8, &n),
			 EP_WALK_OVERRUN);
	assert_int_equal(ep_decoder_walk_to_ip(d, 0x1000, 0x100a, EP_NO_SITE, steps, 8, &n),
			 EP_WALK_BLOCKED);
	ep_decoder_free(d);
}

/* Every branch objdump (a decoder we did not write) finds in test.binary's
 * main is a site of ours, with the same kind of target. */
static void test_agrees_with_objdump(void **state)
{
	(void)state;
	struct ep_binary_registry *reg = ep_binreg_new();
	char err[256];
	assert_int_equal(ep_binreg_add_file(reg, ep_test_fixture("test.binary"), err, sizeof(err)),
			 0);
	size_t nseg;
	const struct ep_code_segment *segs = ep_binary_code_segments(ep_binreg_at(reg, 0), &nseg);
	struct ep_decoder *d = ep_decoder_new(EP_ARCH_X86_64, segs, nseg);
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "objdump -d --no-show-raw-insn %s",
		 ep_test_fixture("test.binary"));
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	char line[512];
	int branches = 0, direct = 0;
	while (fgets(line, sizeof(line), p)) {
		unsigned long long addr, target;
		char mnem[32];
		if (sscanf(line, " %llx: %31s", &addr, mnem) != 2)
			continue;
		bool jump = mnem[0] == 'j', call = strncmp(mnem, "call", 4) == 0,
		     ret = strncmp(mnem, "ret", 3) == 0 || strncmp(mnem, "repz", 4) == 0;
		if (strncmp(mnem, "repz", 4) == 0 && !strstr(line, "ret"))
			continue;
		if (!jump && !call && !ret)
			continue;
		uint32_t site = ep_decoder_site_at(d, addr);
		assert_int_not_equal(site, EP_NO_SITE);
		const struct ep_site *s = ep_decoder_site(d, site);
		if (ret)
			assert_int_equal(s->kind, EP_BRANCH_RETURN);
		else if (call)
			assert_true(s->kind == EP_BRANCH_CALL ||
				    s->kind == EP_BRANCH_CALL_INDIRECT);
		else if (strcmp(mnem, "jmp") == 0)
			assert_true(s->kind == EP_BRANCH_JUMP ||
				    s->kind == EP_BRANCH_JUMP_INDIRECT);
		else
			assert_int_equal(s->kind, EP_BRANCH_COND);
		const char *t = strstr(line, mnem) + strlen(mnem);
		if (!strchr(t, '*') && sscanf(t, " %llx", &target) == 1) {
			assert_int_equal(s->target, target);
			direct++;
		}
		branches++;
	}
	pclose(p);
	printf("# %d branches (%d direct) agree with objdump\n", branches, direct);
	assert_true(branches > 1000);
	ep_decoder_free(d);
	ep_binreg_free(reg);
}

static void test_arm64_kinds(void **state)
{
	(void)state;
	/* b.eq +8; cbz x0,+8; tbz w1,#3,+8; b +8; bl +8; br x1; blr x1; ret */
	static const uint32_t insns[] = {0x54000040, 0xb4000040, 0x36180041, 0x14000002,
					 0x94000002, 0xd61f0020, 0xd63f0020, 0xd65f03c0};
	static const uint8_t kinds[] = {
	    EP_BRANCH_COND, EP_BRANCH_COND,	     EP_BRANCH_COND,	      EP_BRANCH_JUMP,
	    EP_BRANCH_CALL, EP_BRANCH_JUMP_INDIRECT, EP_BRANCH_CALL_INDIRECT, EP_BRANCH_RETURN};
	struct ep_code_segment seg = {
	    .vaddr = 0x4000, .bytes = (const uint8_t *)insns, .size = sizeof(insns)};
	struct ep_decoder *d = ep_decoder_new(EP_ARCH_AARCH64, &seg, 1);
	assert_non_null(d);
	for (unsigned i = 0; i < 8; i++) {
		uint64_t addr = 0x4000 + 4 * i;
		uint32_t site = ep_decoder_site_at(d, addr);
		assert_int_not_equal(site, EP_NO_SITE);
		const struct ep_site *s = ep_decoder_site(d, site);
		assert_int_equal(s->kind, kinds[i]);
		assert_int_equal(s->len, 4);
		if (i < 5)
			assert_int_equal(s->target, addr + 8);
	}
	ep_decoder_free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_walk_statuses),
	    cmocka_unit_test(test_site_at_and_walk_to_ip),
	    cmocka_unit_test(test_agrees_with_objdump),
	    cmocka_unit_test(test_arm64_kinds),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
