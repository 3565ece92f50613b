/* SPDX-License-Identifier: Apache-2.0 */
/* Instruction types (agent/decode/insn_mix.h) of hand-assembled
 * instructions (encodings from llvm-mc), ranges mixed within a window, and
 * the report and JSON export of a mix. */
#include "test_util.h"

#include <string.h>

#include "agent/decode/insn_mix.h"
#include "common/export/export.h"

#define B(t) (1u << EP_INSN_##t)

struct one {
	const char *text;
	uint8_t bytes[8];
	uint8_t len;
	unsigned types;
};

/* The types of the one instruction bytes[0..len) decodes to (a range that
 * starts and ends at it). */
static unsigned types_of(enum ep_arch arch, const uint8_t *bytes, size_t len)
{
	struct ep_code_segment seg = {.vaddr = 0x1000, .bytes = bytes, .size = len};
	struct ep_insn_mixer *m = ep_insn_mixer_new(arch, &seg, 1);
	assert_non_null(m);
	struct ep_range_mix r;
	ep_insn_mixer_range(m, 0x1000, 0x1000, 0, UINT64_MAX, &r);
	ep_insn_mixer_free(m);
	assert_true(r.decoded);
	assert_int_equal(r.insns, 1);
	unsigned bits = 0;
	for (int t = 0; t < EP_INSN_TYPES; t++) {
		assert_true(r.types[t] <= 1);
		bits |= r.types[t] << t;
	}
	return bits;
}

static void check_all(enum ep_arch arch, const struct one *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned got = types_of(arch, v[i].bytes, v[i].len);
		if (got != v[i].types)
			fail_msg("%s: types 0x%x, expected 0x%x", v[i].text, got, v[i].types);
	}
}

static void test_x86_types(void **state)
{
	(void)state;
	static const struct one v[] = {
	    {"mov (%rdi),%eax", {0x8b, 0x07}, 2, B(LOAD)},
	    {"mov %eax,(%rdi)", {0x89, 0x07}, 2, B(STORE)},
	    {"add %eax,(%rdi)", {0x01, 0x07}, 2, B(LOAD) | B(STORE)},
	    {"lock add %eax,(%rdi)", {0xf0, 0x01, 0x07}, 3, B(LOAD) | B(STORE) | B(ATOMIC)},
	    {"xchg %eax,(%rdi)", {0x87, 0x07}, 2, B(LOAD) | B(STORE) | B(ATOMIC)},
	    {"cmp %eax,(%rdi)", {0x39, 0x07}, 2, B(LOAD)},
	    {"div %rcx", {0x48, 0xf7, 0xf1}, 3, B(DIVIDE)},
	    {"divsd %xmm1,%xmm0", {0xf2, 0x0f, 0x5e, 0xc1}, 4, B(VECTOR) | B(DIVIDE)},
	    {"call *%rax", {0xff, 0xd0}, 2, B(INDIRECT_CALL) | B(STORE)},
	    {"call *(%rax)", {0xff, 0x10}, 2, B(INDIRECT_CALL) | B(STORE) | B(LOAD)},
	    {"call .+5", {0xe8, 0, 0, 0, 0}, 5, B(CALL) | B(STORE)},
	    {"ret", {0xc3}, 1, B(RETURN) | B(LOAD)},
	    {"push %rbx", {0x53}, 1, B(STORE)},
	    {"pop %rbx", {0x5b}, 1, B(LOAD)},
	    {"leave", {0xc9}, 1, B(LOAD)},
	    {"lea (%rdi),%rax", {0x48, 0x8d, 0x07}, 3, B(OTHER)},
	    {"nopw (%rax,%rax)", {0x66, 0x0f, 0x1f, 0x04, 0x00}, 5, B(OTHER)},
	    {"je .+2", {0x74, 0x00}, 2, B(COND_BRANCH)},
	    {"jmp .+2", {0xeb, 0x00}, 2, B(JUMP)},
	    {"jmp *(%rax)", {0xff, 0x20}, 2, B(INDIRECT_JUMP) | B(LOAD)},
	    {"movaps %xmm0,(%rsp)", {0x0f, 0x29, 0x04, 0x24}, 4, B(VECTOR) | B(STORE)},
	    {"add %eax,%ebx", {0x01, 0xc3}, 2, B(OTHER)},
	};
	check_all(EP_ARCH_X86_64, v, sizeof(v) / sizeof(v[0]));
}

static void test_arm64_types(void **state)
{
	(void)state;
	static const struct one v[] = {
	    {"ldr x0, [x1]", {0x20, 0x00, 0x40, 0xf9}, 4, B(LOAD)},
	    {"str x0, [x1]", {0x20, 0x00, 0x00, 0xf9}, 4, B(STORE)},
	    {"ldp x29, x30, [sp], #16", {0xfd, 0x7b, 0xc1, 0xa8}, 4, B(LOAD)},
	    {"sdiv x0, x1, x2", {0x20, 0x0c, 0xc2, 0x9a}, 4, B(DIVIDE)},
	    {"ldaxr x0, [x1]", {0x20, 0xfc, 0x5f, 0xc8}, 4, B(LOAD) | B(ATOMIC)},
	    {"stlxr w2, x0, [x1]", {0x20, 0xfc, 0x02, 0xc8}, 4, B(STORE) | B(ATOMIC)},
	    {"fadd d0, d1, d2", {0x20, 0x28, 0x62, 0x1e}, 4, B(VECTOR)},
	    {"add v0.4s, v1.4s, v2.4s", {0x20, 0x84, 0xa2, 0x4e}, 4, B(VECTOR)},
	    {"fdiv d0, d1, d2", {0x20, 0x18, 0x62, 0x1e}, 4, B(VECTOR) | B(DIVIDE)},
	    {"ret", {0xc0, 0x03, 0x5f, 0xd6}, 4, B(RETURN)},
	    {"bl #0", {0x00, 0x00, 0x00, 0x94}, 4, B(CALL)},
	    {"blr x3", {0x60, 0x00, 0x3f, 0xd6}, 4, B(INDIRECT_CALL)},
	    {"b.eq #8", {0x40, 0x00, 0x00, 0x54}, 4, B(COND_BRANCH)},
	    {"add x0, x1, x2", {0x20, 0x00, 0x02, 0x8b}, 4, B(OTHER)},
	    {"prfm pldl1keep, [x0]", {0x00, 0x00, 0x80, 0xf9}, 4, B(OTHER)},
	};
	check_all(EP_ARCH_AARCH64, v, sizeof(v) / sizeof(v[0]));
}

/* 0x1000 mov (%rdi),%eax | 0x1002 add %eax,(%rdi) | 0x1004 je 0x1006 |
 * 0x1006 ret */
static const uint8_t code[] = {0x8b, 0x07, 0x01, 0x07, 0x74, 0x00, 0xc3};
static const struct ep_code_segment seg = {.vaddr = 0x1000, .bytes = code, .size = sizeof(code)};

static void test_ranges_and_window(void **state)
{
	(void)state;
	struct ep_insn_mixer *m = ep_insn_mixer_new(EP_ARCH_X86_64, &seg, 1);
	assert_non_null(m);
	struct ep_range_mix r;
	ep_insn_mixer_range(m, 0x1000, 0x1004, 0, UINT64_MAX, &r);
	assert_true(r.decoded);
	assert_int_equal(r.insns, 3);
	assert_int_equal(r.types[EP_INSN_LOAD], 2);
	assert_int_equal(r.types[EP_INSN_STORE], 1);
	assert_int_equal(r.types[EP_INSN_COND_BRANCH], 1);
	/* the window keeps the instructions whose address is inside */
	ep_insn_mixer_range(m, 0x1000, 0x1004, 0x1002, 0x1004, &r);
	assert_true(r.decoded);
	assert_int_equal(r.insns, 1);
	assert_int_equal(r.types[EP_INSN_LOAD], 1);
	/* end between instructions, past the code, backwards: not decoded */
	ep_insn_mixer_range(m, 0x1000, 0x1003, 0, UINT64_MAX, &r);
	assert_false(r.decoded);
	assert_int_equal(r.insns, 0);
	ep_insn_mixer_range(m, 0x1000, 0x1010, 0, UINT64_MAX, &r);
	assert_false(r.decoded);
	ep_insn_mixer_range(m, 0x1004, 0x1000, 0, UINT64_MAX, &r);
	assert_false(r.decoded);
	ep_insn_mixer_range(m, 0x2000, 0x2000, 0, UINT64_MAX, &r);
	assert_false(r.decoded);
	ep_insn_mixer_free(m);
	assert_null(ep_insn_mixer_new(EP_ARCH_UNKNOWN, &seg, 1));
}

/* A profile of two ranges (one not decodable), exported with its mix:
 * counts are the range's mix times its count, per range, per function and
 * in total. */
static void test_export(void **state)
{
	(void)state;
	Edgeprof__V1__Range r1 = EDGEPROF__V1__RANGE__INIT, r2 = EDGEPROF__V1__RANGE__INIT;
	r1.start = 0x1000, r1.end = 0x1004, r1.count = 10;
	r2.start = 0x1000, r2.end = 0x1003, r2.count = 5;
	Edgeprof__V1__Range *ranges[] = {&r2, &r1};
	Edgeprof__V1__Function f = EDGEPROF__V1__FUNCTION__INIT;
	f.name = "fn", f.start = 0x1000, f.size = 7;
	Edgeprof__V1__Function *funcs[] = {&f};
	Edgeprof__V1__BinaryProfile bp = EDGEPROF__V1__BINARY_PROFILE__INIT;
	char *paths[] = {"/bin/x"};
	bp.paths = paths, bp.n_paths = 1, bp.build_id = "ab", bp.arch = "x86_64";
	bp.ranges = ranges, bp.n_ranges = 2, bp.functions = funcs, bp.n_functions = 1;
	Edgeprof__V1__BinaryProfile *bins[] = {&bp};
	Edgeprof__V1__Profile p = EDGEPROF__V1__PROFILE__INIT;
	p.binaries = bins, p.n_binaries = 1;

	struct ep_insn_mixer *m = ep_insn_mixer_new(EP_ARCH_X86_64, &seg, 1);
	struct ep_range_mix rm[2];
	ep_insn_mixer_range(m, 0x1000, 0x1004, 0, UINT64_MAX, &rm[0]);
	ep_insn_mixer_range(m, 0x1000, 0x1003, 0, UINT64_MAX, &rm[1]);
	ep_insn_mixer_free(m);
	struct ep_binary_mix bm = {.ranges = rm, .n = 2, .lo = 0, .hi = UINT64_MAX};
	ep_binary_mix_sort(&bm);
	struct ep_profile_mix mix = {.bins = &bm, .n = 1, .scope = ""};

	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);
	char err[256];
	assert_int_equal(ep_export_mix(&p, EP_EXPORT_JSON, NULL, &mix, out, err, sizeof(err)), 0);
	fclose(out);
	assert_non_null(strstr(buf, "\"count\": 10, \"cycles\": 0, \"cycled_instructions\": 0, "
				    "\"insn_mix\": {\"instructions\": 30, "
				    "\"load\": 20, \"store\": 10, \"cond_branch\": 10,"));
	assert_non_null(strstr(buf, "\"cycled_instructions\": 0, \"insn_mix\": null"));
	assert_non_null(strstr(buf, "\"ranges\": 1, \"ranges_undecoded\": 1, \"total\": "
				    "{\"instructions\": 30, \"load\": 20"));
	assert_non_null(strstr(buf, "{\"name\": \"fn\", \"start\": \"0x1000\", \"mix\": "
				    "{\"instructions\": 30,"));
	free(buf);

	out = open_memstream(&buf, &len);
	assert_int_equal(ep_report_insn_mix(&p, &mix, 10, out), 0);
	fclose(out);
	assert_non_null(strstr(buf, "30 instructions executed in 1 ranges (1 ranges not decoded)"));
	assert_non_null(strstr(buf, "  load                       20  66.67%"));
	free(buf);

	/* a binary without its file: said, no counts */
	bm.missing = "/bin/x: binary not found";
	out = open_memstream(&buf, &len);
	assert_int_equal(ep_export_mix(&p, EP_EXPORT_JSON, NULL, &mix, out, err, sizeof(err)), 0);
	fclose(out);
	assert_non_null(strstr(buf, "\"insn_mix\": {\"scope\": \"\", \"missing\": \"/bin/x: "
				    "binary not found\"}"));
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_x86_types),
	    cmocka_unit_test(test_arm64_types),
	    cmocka_unit_test(test_ranges_and_window),
	    cmocka_unit_test(test_export),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
