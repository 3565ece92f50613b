/* SPDX-License-Identifier: Apache-2.0 */
#include "test_util.h"

#include "resolve/procmap.h"

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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_pie_at_a_random_base),
	    cmocka_unit_test(test_overlap_replaces_and_splits),
	    cmocka_unit_test(test_fork_copies_exec_clears),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
