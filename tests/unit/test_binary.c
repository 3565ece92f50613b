/* SPDX-License-Identifier: Apache-2.0 */
/* The resolve stage's ELF side, checked against readelf/nm on the fixtures
 * and a system library. */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/resolve/binary.h"

/* First line of a shell command's output, or "" */
static void run_line(const char *cmd, char *out, size_t len)
{
	out[0] = '\0';
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	if (!fgets(out, (int)len, p))
		out[0] = '\0';
	pclose(p);
	out[strcspn(out, "\n")] = '\0';
}

static void test_non_pie_without_build_id(void **state)
{
	(void)state;
	struct ep_binary_registry *reg = ep_binreg_new();
	char err[256];
	assert_int_equal(ep_binreg_add_file(reg, ep_test_fixture("test.binary"), err, sizeof(err)),
			 0);
	struct ep_binary *b = ep_binreg_at(reg, 0);
	assert_int_equal(ep_binary_arch(b), EP_ARCH_X86_64);
	assert_false(ep_binary_is_pie(b));
	size_t len;
	ep_binary_build_id(b, &len);
	assert_int_equal(len, 0);
	uint64_t vaddr;
	/* readelf -lW: LOAD 0x000000 -> 0x400000 (R E), 0x00a000 -> 0x60a000 */
	assert_true(ep_binary_offset_to_vaddr(b, 0x4e80, &vaddr));
	assert_int_equal(vaddr, 0x404e80);
	assert_true(ep_binary_offset_to_vaddr(b, 0xa010, &vaddr));
	assert_int_equal(vaddr, 0x60a010);
	assert_false(ep_binary_offset_to_vaddr(b, 0x100000, &vaddr));
	size_t nseg;
	const struct ep_code_segment *seg = ep_binary_code_segments(b, &nseg);
	assert_int_equal(nseg, 1);
	assert_int_equal(seg[0].vaddr, 0x400000);
	assert_int_equal(seg[0].size, 0x9f94);

	/* every function nm lists with a size is found by its own address */
	char cmd[512];
	snprintf(cmd, sizeof(cmd),
		 "nm -S --defined-only %s | awk '$4 != \"\" && ($3==\"T\"||$3==\"t\")'",
		 ep_test_fixture("test.binary"));
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	char line[512];
	int checked = 0;
	while (fgets(line, sizeof(line), p)) {
		unsigned long long start, size;
		char type, name[256];
		if (sscanf(line, "%llx %llx %c %255s", &start, &size, &type, name) != 4 ||
		    size == 0)
			continue;
		const struct ep_symbol *s = ep_binary_symbol_at(b, start + size - 1);
		assert_non_null(s);
		assert_int_equal(s->start, start);
		checked++;
	}
	pclose(p);
	assert_true(checked > 10);
	ep_binreg_free(reg);
}

static void test_pie_with_short_build_id(void **state)
{
	(void)state;
	struct ep_binary_registry *reg = ep_binreg_new();
	char err[256];
	assert_int_equal(
	    ep_binreg_add_file(reg, ep_test_fixture("propeller_sample_1.bin"), err, sizeof(err)),
	    0);
	struct ep_binary *b = ep_binreg_at(reg, 0);
	assert_true(ep_binary_is_pie(b));
	assert_string_equal(ep_binary_build_id_hex(b), "572ac72487ae1966");
	uint64_t vaddr;
	/* readelf -lW: LOAD 0x000740 -> 0x1740 (R E), 0x000b90 -> 0x2b90 (RW) */
	assert_true(ep_binary_offset_to_vaddr(b, 0x8d0, &vaddr));
	assert_int_equal(vaddr, 0x18d0);
	assert_true(ep_binary_offset_to_vaddr(b, 0xbb0, &vaddr));
	assert_int_equal(vaddr, 0x2bb0);
	const struct ep_symbol *s = ep_binary_symbol_at(b, 0x18e3);
	assert_non_null(s);
	assert_string_equal(s->name, "compute_flag"); /* nm -S: 18d0 size 36 */

	/* perf pads the 8-byte id to 20 bytes: still the same file */
	uint8_t padded[20] = {0x57, 0x2a, 0xc7, 0x24, 0x87, 0xae, 0x19, 0x66};
	assert_ptr_equal(ep_binreg_lookup(reg, "/elsewhere/prog.gen", padded, 20), b);
	assert_string_equal(ep_binary_recorded_path(b), "/elsewhere/prog.gen");
	ep_binreg_free(reg);
}

static void test_system_library_build_id_matches_readelf(void **state)
{
	(void)state;
	const char *libc = "/lib/x86_64-linux-gnu/libc.so.6";
	if (access(libc, R_OK) != 0)
		skip();
	char want[128];
	run_line("readelf -n /lib/x86_64-linux-gnu/libc.so.6 | awk '/Build ID/ {print $3}'", want,
		 sizeof(want));
	assert_true(strlen(want) >= 16);
	struct ep_binary_registry *reg = ep_binreg_new();
	struct ep_binary *b = ep_binreg_lookup(reg, libc, NULL, 0);
	assert_non_null(b);
	assert_string_equal(ep_binary_build_id_hex(b), want);
	assert_false(ep_binary_is_pie(b)); /* a shared library, not an executable */
	/* the same file through another name is the same binary */
	assert_ptr_equal(ep_binreg_lookup(reg, "/usr/lib/x86_64-linux-gnu/libc.so.6", NULL, 0), b);
	assert_int_equal(ep_binreg_count(reg), 1);
	ep_binreg_free(reg);
}

static void test_errors_and_misses(void **state)
{
	(void)state;
	struct ep_binary_registry *reg = ep_binreg_new();
	char err[256];
	assert_int_equal(ep_binreg_add_file(reg, "/nonexistent/prog", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "/nonexistent/prog"));
	assert_int_equal(ep_binreg_add_file(reg, ep_test_fixture("README.md"), err, sizeof(err)),
			 -1);
	assert_non_null(strstr(err, "not an ELF file"));
	assert_null(ep_binreg_lookup(reg, "/nonexistent/lib.so", NULL, 0));
	assert_null(ep_binreg_lookup(reg, "[vdso]", NULL, 0));
	/* a wrong build-id still returns the file found by path (warned) */
	assert_int_equal(ep_binreg_add_file(reg, ep_test_fixture("test.binary"), err, sizeof(err)),
			 0);
	assert_int_equal(
	    ep_binreg_add_file(reg, ep_test_fixture("propeller_sample_1.bin"), err, sizeof(err)),
	    0);
	uint8_t other[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	struct ep_binary *b = ep_binreg_lookup(reg, "/x/propeller_sample_1.bin", other, 8);
	assert_non_null(b);
	assert_string_equal(ep_binary_build_id_hex(b), "572ac72487ae1966");
	ep_binreg_free(reg);
}

/* Copies src to dst (a test's own file, free to replace). */
static void copy_file(const char *src, const char *dst)
{
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", src, dst);
	assert_int_equal(system(cmd), 0);
}

/* Lazily opened binaries (IP-only profiles never decode): the code is read
 * at first use, byte for byte what an eager open reads; from a file changed
 * since the open, no code at all rather than other code. */
static void test_lazy_code(void **state)
{
	(void)state;
	char dir[] = "/tmp/ep-test-lazy-XXXXXX", path[256], err[256];
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/test.binary", dir);
	copy_file(ep_test_fixture("test.binary"), path);

	struct ep_binary_registry *eager = ep_binreg_new(), *lazy = ep_binreg_new();
	ep_binreg_set_lazy_code(lazy, true);
	assert_int_equal(ep_binreg_add_file(eager, path, err, sizeof(err)), 0);
	assert_int_equal(ep_binreg_add_file(lazy, path, err, sizeof(err)), 0);
	size_t ne, nl;
	const struct ep_code_segment *se = ep_binary_code_segments(ep_binreg_at(eager, 0), &ne);
	const struct ep_code_segment *sl = ep_binary_code_segments(ep_binreg_at(lazy, 0), &nl);
	assert_int_equal(nl, ne);
	assert_int_equal(nl, 1);
	assert_int_equal(sl[0].vaddr, se[0].vaddr);
	assert_int_equal(sl[0].size, se[0].size);
	assert_non_null(sl[0].bytes);
	assert_memory_equal(sl[0].bytes, se[0].bytes, se[0].size);

	/* opened lazily, then the file is replaced before the code is asked for */
	struct ep_binary_registry *late = ep_binreg_new();
	ep_binreg_set_lazy_code(late, true);
	assert_int_equal(ep_binreg_add_file(late, path, err, sizeof(err)), 0);
	char tmp[300];
	snprintf(tmp, sizeof(tmp), "%s.new", path);
	copy_file(ep_test_fixture("test.binary"), tmp);
	assert_int_equal(rename(tmp, path), 0); /* same bytes, another inode */
	size_t nlate = 9;
	ep_binary_code_segments(ep_binreg_at(late, 0), &nlate);
	assert_int_equal(nlate, 0);

	ep_binreg_free(eager);
	ep_binreg_free(lazy);
	ep_binreg_free(late);
	unlink(path);
	rmdir(dir);
}

/* What BOLT needs to find a function by name: PLT entries are "SYM@PLT"
 * (checked against objdump's names for .plt), _init (size 0) ends with
 * .init instead of swallowing .plt, and a local knows it is one. */
static void test_plt_entries_and_locals(void **state)
{
	(void)state;
	struct ep_binary_registry *reg = ep_binreg_new();
	char err[256];
	const char *path = ep_test_fixture("test.binary");
	assert_int_equal(ep_binreg_add_file(reg, path, err, sizeof(err)), 0);
	struct ep_binary *b = ep_binreg_at(reg, 0);
	char cmd[512], line[512];
	snprintf(cmd, sizeof(cmd), "objdump -d -j .plt %s | grep '@plt>:'", path);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	int checked = 0;
	while (fgets(line, sizeof(line), p)) {
		unsigned long long addr;
		char name[256], want[300];
		if (sscanf(line, "%llx <%255[^@]@plt>:", &addr, name) != 2)
			continue;
		snprintf(want, sizeof(want), "%s@PLT", name);
		const struct ep_symbol *s = ep_binary_symbol_at(b, addr + 15);
		assert_non_null(s);
		assert_string_equal(s->name, want);
		assert_int_equal(s->start, addr);
		assert_int_equal(s->size, 16);
		assert_int_equal(s->local_index, 0);
		checked++;
	}
	pclose(p);
	assert_int_equal(checked, 0x1a0 / 16 - 1); /* every entry but PLT0 */
	/* readelf -SW: .init 0x4009c8 size 0x18; .plt 0x4009e0 */
	const struct ep_symbol *init = ep_binary_symbol_at(b, 0x4009c8);
	assert_non_null(init);
	assert_string_equal(init->name, "_init");
	assert_int_equal(init->size, 0x18);
	/* PLT0, the lazy resolver's stub: BOLT's pseudo function of .plt
	 * (perf2bolt names a first call's jump through it so) */
	const struct ep_symbol *plt0 = ep_binary_symbol_at(b, 0x4009e0);
	assert_non_null(plt0);
	assert_string_equal(plt0->name, "__BOLT_PSEUDO_.plt");
	assert_int_equal(plt0->size, 16);
	/* readelf -sW: send_tree is LOCAL (the only one of that name), main GLOBAL */
	const struct ep_symbol *local = ep_binary_symbol_at(b, 0x404c80);
	assert_string_equal(local->name, "send_tree");
	assert_int_equal(local->local_index, 1);
	assert_int_equal(ep_binary_symbol_at(b, 0x400b80)->local_index, 0);
	ep_binreg_free(reg);
}

/* A shared library's PLT (lazy .plt, relocated through .rela.plt) and its
 * .plt.got (slots relocated by GLOB_DAT in .rela.dyn, the table most of a
 * library's relocations are in): every entry named as objdump names it. */
static void test_plt_names_of_a_library(void **state)
{
	(void)state;
	const char *path = "/lib/x86_64-linux-gnu/libstdc++.so.6";
	if (access(path, R_OK) != 0)
		skip();
	struct ep_binary_registry *reg = ep_binreg_new();
	char err[256];
	assert_int_equal(ep_binreg_add_file(reg, path, err, sizeof(err)), 0);
	struct ep_binary *b = ep_binreg_at(reg, 0);
	char cmd[512], line[1024];
	snprintf(cmd, sizeof(cmd), "objdump -d -j .plt -j .plt.got %s | grep '@plt>:'", path);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	int checked = 0, in_plt_got = 0;
	while (fgets(line, sizeof(line), p)) {
		unsigned long long addr;
		char name[900], want[920];
		if (sscanf(line, "%llx <%899[^@]@plt>:", &addr, name) != 2)
			continue;
		snprintf(want, sizeof(want), "%s@PLT", name);
		const struct ep_symbol *s = ep_binary_symbol_at(b, addr);
		assert_non_null(s);
		assert_string_equal(s->name, want);
		assert_int_equal(s->start, addr);
		in_plt_got += s->size == 8;
		checked++;
	}
	pclose(p);
	assert_true(checked > 100);
	assert_true(in_plt_got > 0);
	ep_binreg_free(reg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_non_pie_without_build_id),
	    cmocka_unit_test(test_pie_with_short_build_id),
	    cmocka_unit_test(test_system_library_build_id_matches_readelf),
	    cmocka_unit_test(test_errors_and_misses),
	    cmocka_unit_test(test_lazy_code),
	    cmocka_unit_test(test_plt_entries_and_locals),
	    cmocka_unit_test(test_plt_names_of_a_library),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
