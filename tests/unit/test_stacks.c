/* SPDX-License-Identifier: Apache-2.0 */
/*
 * agent --stacks: IP samples carrying their user call stack, through the
 * pipeline on hand-made binaries: each distinct stack counted in its leaf's
 * binary, innermost first, callers named by their call site (return
 * address - 1), frames in another binary named by it, a caller in no
 * mapping cutting the stack (counted), the bound on distinct stacks (new
 * ones past it dropped and counted, their IPs still counted), a reset
 * forgetting them, and the JSON export writing them.
 */
#include "test_util.h"

#include <elf.h>
#include <string.h>
#include <unistd.h>

#include "agent/pipeline/pipeline.h"
#include "common/export/export.h"
#include "common/profile/profile_file.h"

#define BASE  0x400000ULL
#define LIB   0x7f0000000000ULL
#define CODE  0x1000ULL
#define CSIZE 0x100ULL

/* An x86-64 ELF of one PT_LOAD at vaddr base: CSIZE bytes of nops at CODE. */
static void write_binary(const char *path, uint64_t base)
{
	uint8_t code[CSIZE];
	memset(code, 0x90, sizeof(code));
	Elf64_Ehdr eh = {.e_type = ET_EXEC,
			 .e_machine = EM_X86_64,
			 .e_version = EV_CURRENT,
			 .e_entry = base + CODE,
			 .e_phoff = sizeof(Elf64_Ehdr),
			 .e_ehsize = sizeof(Elf64_Ehdr),
			 .e_phentsize = sizeof(Elf64_Phdr),
			 .e_phnum = 1,
			 .e_shentsize = sizeof(Elf64_Shdr)};
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_ident[EI_VERSION] = EV_CURRENT;
	Elf64_Phdr ph = {.p_type = PT_LOAD,
			 .p_flags = PF_R | PF_X,
			 .p_vaddr = base,
			 .p_paddr = base,
			 .p_filesz = CODE + sizeof(code),
			 .p_memsz = CODE + sizeof(code),
			 .p_align = 0x1000};
	static uint8_t zeros[CODE];
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(&eh, sizeof(eh), 1, f), 1);
	assert_int_equal(fwrite(&ph, sizeof(ph), 1, f), 1);
	assert_int_equal(fwrite(zeros, CODE - sizeof(eh) - sizeof(ph), 1, f), 1);
	assert_int_equal(fwrite(code, sizeof(code), 1, f), 1);
	assert_int_equal(fclose(f), 0);
}

/* An IP sample of pid 42 with its stack: stack[0] the IP, then return
 * addresses, as bpf_get_stack() gives them. */
static void stack_sample(struct ep_pipeline *p, const uint64_t *stack, uint32_t n)
{
	struct ep_sample_record rec;
	memset(&rec, 0, sizeof(rec));
	rec.pid = rec.tid = 42;
	rec.ip = stack[0];
	rec.flags = EP_SAMPLE_BRANCH_READ_FAILED | EP_SAMPLE_HAS_STACK;
	rec.nr_stack = n;
	memcpy(rec.stack, stack, n * sizeof(*stack));
	ep_pipeline_sample(p, &rec);
}

struct fixture {
	char exe[32], lib[32];
	struct ep_binary_registry *reg;
	struct ep_pipeline *p;
};

static void open_fixture(struct fixture *fx, size_t max_stacks)
{
	strcpy(fx->exe, "/tmp/edgeprof-stk-XXXXXX");
	strcpy(fx->lib, "/tmp/edgeprof-stl-XXXXXX");
	int fd = mkstemp(fx->exe);
	assert_true(fd >= 0);
	close(fd);
	fd = mkstemp(fx->lib);
	assert_true(fd >= 0);
	close(fd);
	write_binary(fx->exe, BASE);
	write_binary(fx->lib, 0);
	fx->reg = ep_binreg_new();
	struct ep_pipeline_config cfg;
	ep_pipeline_config_default(&cfg);
	cfg.max_stacks = max_stacks;
	fx->p = ep_pipeline_new(&cfg, fx->reg);
	assert_non_null(fx->p);
	ep_pipeline_mmap(fx->p, 42, BASE, 0x2000, 0, fx->exe, NULL, 0);
	/* the library mapped at LIB: its ELF addresses are LIB less */
	ep_pipeline_mmap(fx->p, 42, LIB, 0x2000, 0, fx->lib, NULL, 0);
}

static void close_fixture(struct fixture *fx)
{
	ep_pipeline_free(fx->p);
	ep_binreg_free(fx->reg);
	unlink(fx->exe);
	unlink(fx->lib);
}

static const Edgeprof__V1__BinaryProfile *binary_named(const Edgeprof__V1__Profile *prof,
						       const char *path)
{
	for (size_t i = 0; i < prof->n_binaries; i++)
		if (prof->binaries[i]->n_paths && strcmp(prof->binaries[i]->paths[0], path) == 0)
			return prof->binaries[i];
	return NULL;
}

static const Edgeprof__V1__StackCount *stack_with_leaf(const Edgeprof__V1__BinaryProfile *bp,
						       uint64_t leaf)
{
	for (size_t i = 0; i < bp->n_stacks; i++)
		if (bp->stacks[i]->n_frames && bp->stacks[i]->frames[0] == leaf)
			return bp->stacks[i];
	return NULL;
}

static void test_stacks_counted_innermost_first(void **state)
{
	(void)state;
	struct fixture fx;
	open_fixture(&fx, 0);
	const uint64_t a[] = {BASE + CODE + 1, BASE + CODE + 0x20, BASE + CODE + 0x40};
	/* its caller in the library, the one past it in no mapping */
	const uint64_t b[] = {BASE + CODE + 2, LIB + CODE + 0x10, 0x5000, BASE + CODE + 0x40};
	/* the leaf in the library */
	const uint64_t c[] = {LIB + CODE + 3, BASE + CODE + 0x30};
	for (int i = 0; i < 3; i++)
		stack_sample(fx.p, a, 3);
	stack_sample(fx.p, b, 4);
	stack_sample(fx.p, c, 2);
	Edgeprof__V1__Profile *prof = ep_pipeline_profile(fx.p);
	assert_non_null(prof);
	const Edgeprof__V1__BinaryProfile *exe = binary_named(prof, fx.exe);
	const Edgeprof__V1__BinaryProfile *lib = binary_named(prof, fx.lib);
	assert_non_null(exe);
	assert_non_null(lib);
	assert_int_equal(exe->n_stacks, 2);
	const Edgeprof__V1__StackCount *sa = stack_with_leaf(exe, CODE + 1 + BASE);
	assert_non_null(sa);
	assert_int_equal(sa->count, 3);
	assert_int_equal(sa->n_frames, 3);
	assert_int_equal(sa->frames[1], BASE + CODE + 0x1f);
	assert_int_equal(sa->frames[2], BASE + CODE + 0x3f);
	assert_int_equal(sa->n_frame_binaries, 0); /* all in this binary */
	const Edgeprof__V1__StackCount *sb = stack_with_leaf(exe, BASE + CODE + 2);
	assert_non_null(sb);
	assert_int_equal(sb->count, 1);
	assert_int_equal(sb->n_frames, 2); /* cut at 0x5000 */
	assert_int_equal(sb->frames[1], CODE + 0xf);
	assert_int_equal(sb->n_frame_binaries, 2);
	assert_int_equal(sb->frame_binaries[0], 0);
	assert_int_equal(sb->frame_binaries[1], 1);
	assert_int_equal(exe->n_stack_binaries, 1);
	assert_string_equal(exe->stack_binaries[0], fx.lib); /* no build-id: its path */
	assert_int_equal(lib->n_stacks, 1);
	assert_int_equal(lib->stacks[0]->frames[0], CODE + 3);
	assert_int_equal(lib->stacks[0]->frames[1], BASE + CODE + 0x2f);
	assert_string_equal(lib->stack_binaries[0], fx.exe);
	assert_int_equal(prof->stats->stacks_cut_unresolved, 1);
	assert_int_equal(prof->stats->stacks_dropped, 0);
	assert_int_equal(prof->stats->samples_ip_unresolved, 0);

	/* the JSON export names each frame's binary, innermost first */
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);
	char err[256];
	assert_int_equal(ep_export(prof, EP_EXPORT_JSON, NULL, out, err, sizeof(err)), 0);
	fclose(out);
	char want[256];
	snprintf(
	    want, sizeof(want),
	    "{\"count\": 1, \"frames\": [{\"addr\": \"0x%llx\", \"function\": \"\", "
	    "\"binary\": \"\"}, {\"addr\": \"0x%llx\", \"function\": \"\", \"binary\": \"%s\"}]}",
	    (unsigned long long)(BASE + CODE + 2), (unsigned long long)(CODE + 0xf), fx.lib);
	assert_non_null(strstr(text, want));
	free(text);
	ep_profile_free(prof);
	close_fixture(&fx);
}

static void test_distinct_stacks_bounded(void **state)
{
	(void)state;
	struct fixture fx;
	open_fixture(&fx, 2);
	for (uint64_t k = 0; k < 4; k++) {
		const uint64_t s[] = {BASE + CODE + k, BASE + CODE + 0x20};
		/* k 0 and 1 are kept; 2 and 3, twice each, are past the bound */
		stack_sample(fx.p, s, 2);
		if (k >= 2)
			stack_sample(fx.p, s, 2);
	}
	Edgeprof__V1__Profile *prof = ep_pipeline_profile(fx.p);
	assert_non_null(prof);
	const Edgeprof__V1__BinaryProfile *exe = binary_named(prof, fx.exe);
	assert_int_equal(exe->n_stacks, 2);
	assert_int_equal(prof->stats->stacks_dropped, 4);
	assert_int_equal(exe->samples, 6); /* every IP counted still */
	ep_profile_free(prof);

	/* a delta forgets the stacks: new ones fit again */
	prof = ep_pipeline_take_delta(fx.p);
	ep_profile_free(prof);
	const uint64_t s[] = {BASE + CODE + 9, BASE + CODE + 0x20};
	stack_sample(fx.p, s, 2);
	prof = ep_pipeline_take_delta(fx.p);
	assert_non_null(prof);
	exe = binary_named(prof, fx.exe);
	assert_non_null(exe);
	assert_int_equal(exe->n_stacks, 1);
	assert_int_equal(exe->stacks[0]->count, 1);
	assert_int_equal(prof->stats->stacks_dropped, 0); /* a delta's stats */
	ep_profile_free(prof);
	close_fixture(&fx);
}

/* report: a stack of long names is cut to its line, never past it (the
 * ASan build checks), deeper frames "..."; most samples without frame
 * pointers: not drawn, said. */
static void test_report_stacks(void **state)
{
	(void)state;
	char name[600];
	memset(name, 'f', sizeof(name) - 1);
	name[sizeof(name) - 1] = 0;
	Edgeprof__V1__Function fn = EDGEPROF__V1__FUNCTION__INIT, *fnp = &fn;
	fn.name = name, fn.start = 0x1000, fn.size = 0x100;
	uint64_t frames[20];
	for (size_t k = 0; k < 20; k++)
		frames[k] = 0x1010 + k;
	Edgeprof__V1__StackCount st = EDGEPROF__V1__STACK_COUNT__INIT, *stp = &st;
	st.count = 3, st.frames = frames, st.n_frames = 20;
	Edgeprof__V1__BinaryProfile bp = EDGEPROF__V1__BINARY_PROFILE__INIT, *bpp = &bp;
	bp.build_id = "ab", bp.arch = "x86_64", bp.samples = 3;
	bp.functions = &fnp, bp.n_functions = 1;
	bp.stacks = &stp, bp.n_stacks = 1;
	Edgeprof__V1__Profile prof = EDGEPROF__V1__PROFILE__INIT;
	prof.binaries = &bpp, prof.n_binaries = 1;
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);
	assert_int_equal(ep_report(&prof, 10, out), 0);
	fclose(out);
	assert_non_null(strstr(text, "hottest call stacks (3 samples with stacks, of 3)"));
	assert_non_null(strstr(text, " <- ...\n"));
	free(text);
	bp.stack_samples_no_frame_pointer = 2;
	out = open_memstream(&text, &len);
	assert_int_equal(ep_report(&prof, 10, out), 0);
	fclose(out);
	assert_non_null(strstr(text, "call stacks not shown: 2 of their 3 samples"));
	assert_null(strstr(text, "hottest call stacks"));
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_stacks_counted_innermost_first),
	    cmocka_unit_test(test_distinct_stacks_bounded),
	    cmocka_unit_test(test_report_stacks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
