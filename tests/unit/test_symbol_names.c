/* SPDX-License-Identifier: Apache-2.0 */
/* The agent and the collector name every function alike (issue 33): the
 * agent's registry (agent/resolve, what profiles and the fdata export
 * name) and the collector's image of the same file (collector/binaries,
 * what its UI names), asked at every address of the executable code of
 * real binaries: the fixtures, /bin/ls (stripped: .dynsym and PLT only),
 * and a PIE with PLT entries and two static functions of one name
 * (tests/workloads/bolt_mix.c + bolt_mix_b.c, built here with cc). */
#include "test_util.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/resolve/binary.h"
#include "collector/binaries/binaries.h"
#include "collector/store/store.h"
#include "common/elf/demangle.h"
#include "common/elf/elf_symbols.h"

/* What the collector's UI names addr (the image's symbol), "" for none. */
static const char *collector_name(struct ep_binary_code *code, uint64_t addr, uint64_t *start,
				  char *buf, size_t len)
{
	const struct ep_symbol *s = ep_binary_code_symbol_at(code, addr);
	*start = s ? s->start : 0;
	buf[0] = '\0';
	return s ? ep_symbol_name(s->name, s->local_index, buf, len) : "";
}

/* What the agent's profiles name addr, "" for none. */
static const char *agent_name(struct ep_binary *bin, uint64_t addr, uint64_t *start, char *buf,
			      size_t len)
{
	const struct ep_symbol *s = ep_binary_symbol_at(bin, addr);
	*start = s ? s->start : 0;
	buf[0] = '\0';
	return s ? ep_symbol_name(s->name, s->local_index, buf, len) : "";
}

struct seen {
	size_t functions, locals, plt, differ;
};

/* path through both, compared at every byte of its executable code. */
static struct seen compare(const char *path)
{
	char err[512], msg[512], dbpath[128], spec[160];
	struct ep_binary_registry *reg = ep_binreg_new();
	assert_non_null(reg);
	if (ep_binreg_add_file(reg, path, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	struct ep_binary *bin = ep_binreg_at(reg, 0);
	const char *id = ep_binary_build_id_hex(bin);
	assert_true(strlen(id) > 0);

	snprintf(dbpath, sizeof(dbpath), "/tmp/ep-test-symnames-%d.db", (int)getpid());
	unlink(dbpath);
	snprintf(spec, sizeof(spec), "sqlite:%s", dbpath);
	struct ep_store *store = ep_store_open(spec, err, sizeof(err));
	assert_non_null(store);
	struct ep_binaries *bs = ep_binaries_new(store, 0);
	size_t len;
	uint8_t *elf = ep_test_slurp(path, &len);
	struct ep_image_claim claim = {
	    .build_id = id, .path = path, .source = EP_IMAGE_FROM_UPLOAD};
	int status = ep_binaries_upload(bs, elf, len, &claim, msg, sizeof(msg));
	if (status != 201)
		fail_msg("%s: upload answered %d: %s", path, status, msg);
	struct ep_binary_code *code = ep_binaries_code(bs, id, err, sizeof(err));
	assert_non_null(code);

	struct seen seen = {0};
	size_t nseg;
	const struct ep_code_segment *seg = ep_binary_code_segments(bin, &nseg);
	uint64_t last_start = UINT64_MAX;
	for (size_t i = 0; i < nseg; i++) {
		for (uint64_t a = seg[i].vaddr; a - seg[i].vaddr < seg[i].size; a++) {
			char an[4096], cn[4096];
			uint64_t as, cs;
			agent_name(bin, a, &as, an, sizeof(an));
			collector_name(code, a, &cs, cn, sizeof(cn));
			if (strcmp(an, cn) != 0 || as != cs) {
				if (seen.differ++ < 5)
					fprintf(stderr,
						"# %s 0x%llx: agent '%s' (0x%llx), collector '%s' "
						"(0x%llx)\n",
						path, (unsigned long long)a, an,
						(unsigned long long)as, cn, (unsigned long long)cs);
				continue;
			}
			if (!an[0] || as == last_start)
				continue;
			last_start = as;
			seen.functions++;
			seen.locals += strchr(an, '/') != NULL;
			seen.plt += strstr(an, "@PLT") != NULL;
		}
	}
	fprintf(stderr, "# %s: %zu functions (%zu locals, %zu PLT entries), %zu addresses differ\n",
		path, seen.functions, seen.locals, seen.plt, seen.differ);
	ep_binary_code_release(code);
	ep_binaries_free(bs);
	ep_store_close(store);
	free(elf);
	ep_binreg_free(reg);
	unlink(dbpath);
	return seen;
}

static void test_fixture(void **state)
{
	(void)state;
	struct seen s = compare(ep_test_fixture("propeller_sample_1.bin"));
	assert_int_equal(s.differ, 0);
	assert_true(s.functions >= 5);
}

static void test_system_binary(void **state)
{
	(void)state;
	if (access("/bin/ls", R_OK) != 0)
		skip();
	struct seen s = compare("/bin/ls");
	assert_int_equal(s.differ, 0);
	assert_true(s.plt > 50);
}

/* BOLT's names that the image lacked: step/1 and step/2, SYM@PLT. */
static void test_pie_with_plt_and_locals(void **state)
{
	(void)state;
	char dir[] = "/tmp/ep-test-symnames-XXXXXX", path[128], cmd[512];
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/bolt_mix", dir);
	snprintf(cmd, sizeof(cmd),
		 "cc -O2 -fpie -pie -Wl,--build-id -o %s tests/workloads/bolt_mix.c "
		 "tests/workloads/bolt_mix_b.c",
		 path);
	if (system(cmd) != 0)
		fail_msg("could not build %s (%s)", path, cmd);
	struct seen s = compare(path);
	assert_int_equal(s.differ, 0);
	assert_true(s.locals >= 2);
	assert_true(s.plt >= 3);
	unlink(path);
	rmdir(dir);
}

/* An image stored before the one reader (aliases, size-0 symbols) is
 * looked up by the collector as the reader would have kept it. */
static void test_table_over_old_image(void **state)
{
	(void)state;
	struct ep_symbol *v = malloc(4 * sizeof(*v));
	assert_non_null(v);
	v[0] = (struct ep_symbol){.name = "b", .start = 0x20};
	v[1] = (struct ep_symbol){.name = "a", .start = 0x10, .size = 16, .local_index = 1};
	v[2] = (struct ep_symbol){.name = "c", .start = 0x40, .size = 8};
	v[3] = (struct ep_symbol){.name = "a_alias", .start = 0x10, .size = 16};
	struct ep_elf_symtab t;
	ep_elf_symtab_of(v, 4, &t);
	assert_int_equal(t.n, 3);
	assert_string_equal(ep_elf_symtab_at(&t, 0x1f)->name, "a_alias"); /* the global */
	assert_string_equal(ep_elf_symtab_at(&t, 0x3f)->name, "b");	  /* up to c */
	assert_int_equal(ep_elf_symtab_at(&t, 0x20)->size, 0x20);
	assert_string_equal(ep_elf_symtab_at(&t, 0x47)->name, "c");
	assert_null(ep_elf_symtab_at(&t, 0x48));
	assert_null(ep_elf_symtab_at(&t, 0xf));
	ep_elf_symtab_free(&t);
}

/* The UI's names: as c++filt (binutils) prints them, less Rust's crate and
 * symbol hashes (c++filt asks for DMGL_VERBOSE); a suffix kept; other
 * names given back as they are. */
static void test_demangle(void **state)
{
	(void)state;
	static const char *const cases[][2] = {
	    {"_ZN2ep8hot_workEmi", "ep::hot_work(unsigned long, int)"},
	    {"_ZNSt6vectorIiSaIiEE9push_backERKi",
	     "std::vector<int, std::allocator<int> >::push_back(int const&)"},
	    {"_RNvCs15kBYyAo9fc_7mycrate7example", "mycrate::example"},
	    {"_RNvMNtCs7cvVwEgnwwf_4core3fmtNtB2_9Formatter3pad", "<core::fmt::Formatter>::pad"},
	    {"_ZN7mycrate6legacy17h0123456789abcdefE", "mycrate::legacy"},
	    {"_Z1fv@PLT", "f()@PLT"},
	    {"main", "main"},
	    {"_Zinvalid", "_Zinvalid"},
	    {"_R", "_R"},
	};
	char buf[256];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_string_equal(ep_demangle(cases[i][0], buf, sizeof(buf)), cases[i][1]);
	const char *plain = "hot_loop/2";
	assert_ptr_equal(ep_demangle(plain, buf, sizeof(buf)), plain);
	/* names come from any container's binary (an agent's upload): deep
	 * nesting stops at libiberty's recursion limit instead of the stack,
	 * and a name past MAX_MANGLED is shown raw */
	static char deep[4096];
	memcpy(deep, "_Z1f", 4);
	memset(deep + 4, 'P', sizeof(deep) - 6); /* f(int ****...) */
	deep[sizeof(deep) - 2] = 'i';
	assert_ptr_equal(ep_demangle(deep, buf, sizeof(buf)), deep);
	deep[2100] = 'i', deep[2101] = '\0'; /* 2,096 deep: past the limit too */
	assert_ptr_equal(ep_demangle(deep, buf, sizeof(buf)), deep);
	deep[40] = 'i', deep[41] = '\0';
	assert_string_equal(ep_demangle(deep, buf, sizeof(buf)),
			    "f(int************************************)");
	static char big[8192];
	memset(big, 'x', sizeof(big) - 1);
	memcpy(big, "_Z", 2);
	assert_ptr_equal(ep_demangle(big, buf, sizeof(buf)), big);
	/* cut to the buffer, still a string */
	char small[8];
	assert_string_equal(ep_demangle("_ZN2ep8hot_workEmi", small, sizeof(small)), "ep::hot");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_table_over_old_image),
	    cmocka_unit_test(test_fixture),
	    cmocka_unit_test(test_system_binary),
	    cmocka_unit_test(test_pie_with_plt_and_locals),
	    cmocka_unit_test(test_demangle),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
