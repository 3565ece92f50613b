/* SPDX-License-Identifier: Apache-2.0 */
#include "test_util.h"

#include <stdio.h>
#include <string.h>

#include "agent/resolve/procmap.h"
#include "common/util/u64map.h"

struct fixture {
	struct ep_binary_registry *reg;
	struct ep_binary *pie, *exe;
	struct ep_procmap *pm;
};

static int setup(void **state)
{
	static struct fixture f;
	char err[256];
	f.reg = ep_binreg_new();
	if (ep_binreg_add_file(f.reg, ep_test_fixture("propeller_sample_1.bin"), err,
			       sizeof(err)) ||
	    ep_binreg_add_file(f.reg, ep_test_fixture("test.binary"), err, sizeof(err)))
		return -1;
	f.pie = ep_binreg_at(f.reg, 0);
	f.exe = ep_binreg_at(f.reg, 1);
	f.pm = ep_procmap_new();
	*state = &f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	ep_procmap_free(f->pm);
	ep_binreg_free(f->reg);
	return 0;
}

static void test_pie_at_a_random_base(void **state)
{
	struct fixture *f = *state;
	/* the way perf records the PIE's text mapping: page-aligned start, pgoff
	 * of the page holding the R E segment (file offset 0x740 -> vaddr 0x1740) */
	const uint64_t base = 0x5629ec741000ULL;
	ep_procmap_add(f->pm, 7, base + 0x1000, 0x1000, 0x0, f->pie);
	struct ep_resolved r;
	/* runtime 0x5629ec7428d0 is compute_flag (perf script names it so) */
	assert_int_equal(ep_procmap_resolve(f->pm, 7, 0x5629ec7428d0ULL, &r), EP_RESOLVE_OK);
	assert_ptr_equal(r.bin, f->pie);
	assert_int_equal(r.vaddr, 0x18d0);
	/* the bias holds everywhere in [map_start, map_end) */
	assert_true(r.map_start <= 0x5629ec7428d0ULL && 0x5629ec7428d0ULL < r.map_end);
	assert_int_equal((uint64_t)((int64_t)0x5629ec742a6eULL + r.vaddr_bias), 0x1a6e);
	assert_int_equal(ep_procmap_resolve(f->pm, 7, base + 0x5000, &r), EP_RESOLVE_NO_MAPPING);
	assert_int_equal(ep_procmap_resolve(f->pm, 8, base + 0x1000, &r), EP_RESOLVE_NO_PROCESS);
	assert_int_equal(ep_procmap_resolve(f->pm, 7, 0xffffffff81000000ULL, &r),
			 EP_RESOLVE_KERNEL);
}

static void test_overlap_replaces_and_splits(void **state)
{
	struct fixture *f = *state;
	ep_procmap_add(f->pm, 20, 0x400000, 0x10000, 0, f->exe);
	ep_procmap_add(f->pm, 20, 0x404000, 0x1000, 0, NULL); /* punched hole: unknown file */
	struct ep_resolved r;
	assert_int_equal(ep_procmap_resolve(f->pm, 20, 0x403fff, &r), EP_RESOLVE_OK);
	assert_int_equal(r.vaddr, 0x403fff);
	assert_int_equal(ep_procmap_resolve(f->pm, 20, 0x404e80, &r), EP_RESOLVE_UNKNOWN_BINARY);
	/* the right part keeps its file offset */
	assert_int_equal(ep_procmap_resolve(f->pm, 20, 0x405010, &r), EP_RESOLVE_OK);
	assert_int_equal(r.vaddr, 0x405010);
	/* an address mapped but past the file's loadable bytes */
	ep_procmap_add(f->pm, 20, 0x800000, 0x100000, 0x200000, f->exe);
	assert_int_equal(ep_procmap_resolve(f->pm, 20, 0x800010, &r), EP_RESOLVE_NOT_LOADED);
}

static void test_fork_copies_exec_clears(void **state)
{
	struct fixture *f = *state;
	ep_procmap_add(f->pm, 30, 0x400000, 0xa000, 0, f->exe);
	ep_procmap_fork(f->pm, 31, 30);
	struct ep_resolved r;
	assert_int_equal(ep_procmap_resolve(f->pm, 31, 0x404e80, &r), EP_RESOLVE_OK);
	assert_ptr_equal(r.bin, f->exe);
	ep_procmap_exec(f->pm, 31);
	assert_int_equal(ep_procmap_resolve(f->pm, 31, 0x404e80, &r), EP_RESOLVE_NO_MAPPING);
	/* the parent is untouched, and exit keeps mappings for late samples */
	ep_procmap_exit(f->pm, 30);
	assert_int_equal(ep_procmap_resolve(f->pm, 30, 0x404e80, &r), EP_RESOLVE_OK);
}

/* Forgetting many processes in any order keeps the others intact (the
 * array is compacted, the index follows), and every change of a process
 * moves its generation so cached resolutions die with it, and only its. */
static void test_forget_keeps_the_rest_and_moves_the_generation(void **state)
{
	struct fixture *f = *state;
	struct ep_procmap *pm = ep_procmap_new();
	for (uint32_t pid = 100; pid < 400; pid++)
		ep_procmap_add(pm, pid, 0x400000 + pid * 0x100000ull, 0xa000, 0, f->exe);
	assert_int_equal(ep_procmap_processes(pm), 300);
	uint64_t gen = ep_procmap_generation(pm, 100), kept = ep_procmap_generation(pm, 101);
	assert_true(gen != 0 && kept != 0 && gen != kept);
	for (uint32_t pid = 100; pid < 400; pid += 3)
		ep_procmap_forget(pm, pid);
	assert_int_equal(ep_procmap_generation(pm, 100), 0);
	assert_int_equal(ep_procmap_generation(pm, 101), kept);
	assert_int_equal(ep_procmap_processes(pm), 200);
	struct ep_resolved r;
	for (uint32_t pid = 100; pid < 400; pid++) {
		uint64_t addr = 0x400000 + pid * 0x100000ull + 0x4e80;
		enum ep_resolve_status st = ep_procmap_resolve(pm, pid, addr, &r);
		if ((pid - 100) % 3 == 0) {
			assert_int_equal(st, EP_RESOLVE_NO_PROCESS);
		} else {
			assert_int_equal(st, EP_RESOLVE_OK);
			assert_int_equal(r.vaddr, 0x404e80);
		}
	}
	ep_procmap_forget(pm, 99999); /* unknown: nothing happens */
	assert_int_equal(ep_procmap_processes(pm), 200);
	/* a forgotten pid seen again is a new process: never its old generation */
	ep_procmap_add(pm, 100, 0x400000, 0xa000, 0, f->exe);
	assert_true(ep_procmap_generation(pm, 100) > gen);
	gen = ep_procmap_generation(pm, 101);
	uint64_t other = ep_procmap_generation(pm, 102);
	ep_procmap_exec(pm, 101);
	assert_true(ep_procmap_generation(pm, 101) > gen);
	gen = ep_procmap_generation(pm, 101);
	ep_procmap_fork(pm, 500, 102);
	ep_procmap_add(pm, 500, 0x900000, 0x1000, 0, f->exe);
	ep_procmap_exec(pm, 500);
	ep_procmap_forget(pm, 500);
	ep_procmap_add_anon(pm, 101, 0x7f0000000000ULL, 0x1000);
	assert_true(ep_procmap_generation(pm, 101) > gen);
	assert_int_equal(ep_procmap_generation(pm, 102), other);
	ep_procmap_free(pm);
}

/* The map's removal against a plain array, through growth and collisions. */
static void test_u64map_remove_matches_a_reference(void **state)
{
	(void)state;
	enum { KEYS = 4096 };
	static uint64_t ref[KEYS];
	static bool present[KEYS];
	struct ep_u64map m;
	ep_u64map_init(&m);
	uint64_t x = 12345;
	for (int round = 0; round < 200000; round++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		unsigned k = (unsigned)(x >> 33) % KEYS;
		if ((x >> 20) & 1) {
			uint64_t *v = ep_u64map_upsert(&m, k * 0x1000ull, NULL);
			assert_non_null(v);
			*v = x;
			ref[k] = x;
			present[k] = true;
		} else {
			assert_int_equal(ep_u64map_remove(&m, k * 0x1000ull), present[k]);
			present[k] = false;
		}
	}
	size_t n = 0;
	for (unsigned k = 0; k < KEYS; k++) {
		uint64_t *v = ep_u64map_get(&m, k * 0x1000ull);
		if (present[k]) {
			assert_non_null(v);
			assert_int_equal(*v, ref[k]);
			n++;
		} else {
			assert_null(v);
		}
	}
	assert_int_equal(m.count, n);
	ep_u64map_free(&m);
}

/* The maps lines the kernel writes (show_map_vma): only executable ones
 * come back, files with their path (a space inside kept, " (deleted)" cut
 * and said), anonymous code and [vdso] with theirs; a last line without its
 * newline (a read cut short) is not trusted. */
static void test_maps_text_parsed_in_place(void **state)
{
	(void)state;
	char text[] = "555555554000-555555556000 r--p 00000000 fd:01 1048602                    "
		      "/usr/bin/cat\n"
		      "555555556000-55555555a000 r-xp 00002000 fd:01 1048602                    "
		      "/usr/bin/cat\n"
		      "7ffff7dd0000-7ffff7f45000 r-xp 00028000 fd:01 1050002                    "
		      "/opt/my app/lib x.so (deleted)\n"
		      "7ffff7f45000-7ffff7f60000 rwxp 00000000 00:00 0 \n"
		      "garbage line\n"
		      "7ffff7fc1000-7ffff7fc3000 r-xp 00000000 00:00 0                          "
		      "[vdso]\n"
		      "7ffff7fc3000-7ffff7fc4000 r-xp 00000000 fd:01 1050003                    "
		      "/cut/short";
	size_t pos = 0, len = strlen(text);
	struct ep_maps_entry m;
	assert_true(ep_maps_next_exec(text, len, &pos, &m));
	assert_int_equal(m.start, 0x555555556000ULL);
	assert_int_equal(m.end, 0x55555555a000ULL);
	assert_int_equal(m.offset, 0x2000);
	assert_string_equal(m.path, "/usr/bin/cat");
	assert_false(m.deleted);
	assert_true(ep_maps_next_exec(text, len, &pos, &m));
	assert_int_equal(m.offset, 0x28000);
	assert_string_equal(m.path, "/opt/my app/lib x.so");
	assert_true(m.deleted);
	assert_true(ep_maps_next_exec(text, len, &pos, &m));
	assert_int_equal(m.start, 0x7ffff7f45000ULL);
	assert_string_equal(m.path, "");
	assert_true(ep_maps_next_exec(text, len, &pos, &m));
	assert_string_equal(m.path, "[vdso]");
	assert_false(ep_maps_next_exec(text, len, &pos, &m));
}

/* Our own maps, read whole, against sscanf's reading of the same text: the
 * same executable mappings, in the same order. */
static void test_maps_of_this_process(void **state)
{
	(void)state;
	static char text[1 << 20], copy[1 << 20];
	FILE *f = fopen("/proc/self/maps", "r");
	assert_non_null(f);
	size_t len = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	memcpy(copy, text, len);
	copy[len] = '\0';
	size_t pos = 0, n = 0;
	struct ep_maps_entry m;
	char *save = NULL, *line = strtok_r(copy, "\n", &save);
	while (ep_maps_next_exec(text, len, &pos, &m)) {
		unsigned long long start, end, offset;
		char perms[8];
		int at = 0;
		for (; line; line = strtok_r(NULL, "\n", &save))
			if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %n", &start, &end, perms,
				   &offset, &at) == 4 &&
			    perms[2] == 'x')
				break;
		assert_non_null(line);
		assert_int_equal(m.start, start);
		assert_int_equal(m.end, end);
		assert_int_equal(m.offset, offset);
		assert_string_equal(m.path, line + at);
		line = strtok_r(NULL, "\n", &save);
		n++;
	}
	assert_true(n >= 2); /* this program and libc at least */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_pie_at_a_random_base),
	    cmocka_unit_test(test_overlap_replaces_and_splits),
	    cmocka_unit_test(test_fork_copies_exec_clears),
	    cmocka_unit_test(test_forget_keeps_the_rest_and_moves_the_generation),
	    cmocka_unit_test(test_u64map_remove_matches_a_reference),
	    cmocka_unit_test(test_maps_text_parsed_in_place),
	    cmocka_unit_test(test_maps_of_this_process),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
