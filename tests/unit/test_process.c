/* SPDX-License-Identifier: Apache-2.0 */
#include "test_util.h"

#include <stdio.h>
#include <string.h>

#include "agent/process/process.h"
#include "common/util/clock.h"
#include "common/util/u64map.h"

/* pid's mappings' generation, 0 for a pid not known */
static uint64_t generation(struct ep_process_table *t, uint32_t pid)
{
	const struct ep_process *p = ep_process_find(t, pid);
	return p ? p->generation : 0;
}

struct fixture {
	struct ep_binary_registry *reg;
	struct ep_binary *pie, *exe;
	struct ep_process_table *pm;
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
	f.pm = ep_process_table_new();
	*state = &f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	ep_process_table_free(f->pm);
	ep_binreg_free(f->reg);
	return 0;
}

static void test_pie_at_a_random_base(void **state)
{
	struct fixture *f = *state;
	/* the way perf records the PIE's text mapping: page-aligned start, pgoff
	 * of the page holding the R E segment (file offset 0x740 -> vaddr 0x1740) */
	const uint64_t base = 0x5629ec741000ULL;
	ep_process_map(f->pm, 7, base + 0x1000, 0x1000, 0x0, f->pie, false);
	struct ep_resolved r;
	/* runtime 0x5629ec7428d0 is compute_flag (perf script names it so) */
	assert_int_equal(ep_process_resolve(f->pm, 7, 0x5629ec7428d0ULL, &r), EP_RESOLVE_OK);
	assert_ptr_equal(r.bin, f->pie);
	assert_int_equal(r.vaddr, 0x18d0);
	/* the bias holds everywhere in [map_start, map_end) */
	assert_true(r.map_start <= 0x5629ec7428d0ULL && 0x5629ec7428d0ULL < r.map_end);
	assert_int_equal((uint64_t)((int64_t)0x5629ec742a6eULL + r.vaddr_bias), 0x1a6e);
	assert_int_equal(ep_process_resolve(f->pm, 7, base + 0x5000, &r), EP_RESOLVE_NO_MAPPING);
	assert_int_equal(ep_process_resolve(f->pm, 8, base + 0x1000, &r), EP_RESOLVE_NO_PROCESS);
	assert_int_equal(ep_process_resolve(f->pm, 7, 0xffffffff81000000ULL, &r),
			 EP_RESOLVE_KERNEL);
}

static void test_overlap_replaces_and_splits(void **state)
{
	struct fixture *f = *state;
	ep_process_map(f->pm, 20, 0x400000, 0x10000, 0, f->exe, false);
	ep_process_map(f->pm, 20, 0x404000, 0x1000, 0, NULL,
		       false); /* punched hole: unknown file */
	struct ep_resolved r;
	assert_int_equal(ep_process_resolve(f->pm, 20, 0x403fff, &r), EP_RESOLVE_OK);
	assert_int_equal(r.vaddr, 0x403fff);
	assert_int_equal(ep_process_resolve(f->pm, 20, 0x404e80, &r), EP_RESOLVE_UNKNOWN_BINARY);
	/* the right part keeps its file offset */
	assert_int_equal(ep_process_resolve(f->pm, 20, 0x405010, &r), EP_RESOLVE_OK);
	assert_int_equal(r.vaddr, 0x405010);
	/* an address mapped but past the file's loadable bytes */
	ep_process_map(f->pm, 20, 0x800000, 0x100000, 0x200000, f->exe, false);
	assert_int_equal(ep_process_resolve(f->pm, 20, 0x800010, &r), EP_RESOLVE_NOT_LOADED);
}

static void test_fork_copies_exec_clears(void **state)
{
	struct fixture *f = *state;
	ep_process_map(f->pm, 30, 0x400000, 0xa000, 0, f->exe, false);
	ep_process_fork(f->pm, 31, 30);
	struct ep_resolved r;
	assert_int_equal(ep_process_resolve(f->pm, 31, 0x404e80, &r), EP_RESOLVE_OK);
	assert_ptr_equal(r.bin, f->exe);
	ep_process_exec(f->pm, 31);
	assert_int_equal(ep_process_resolve(f->pm, 31, 0x404e80, &r), EP_RESOLVE_NO_MAPPING);
	/* the parent is untouched, and exit keeps mappings for late samples */
	ep_process_exit(f->pm, 30, 1);
	assert_int_equal(ep_process_resolve(f->pm, 30, 0x404e80, &r), EP_RESOLVE_OK);
}

/* Forgetting many processes in any order keeps the others intact (the
 * array is compacted, the index follows), and every change of a process
 * moves its generation so cached resolutions die with it, and only its. */
static void test_forget_keeps_the_rest_and_moves_the_generation(void **state)
{
	struct fixture *f = *state;
	struct ep_process_table *pm = ep_process_table_new();
	for (uint32_t pid = 100; pid < 400; pid++)
		ep_process_map(pm, pid, 0x400000 + pid * 0x100000ull, 0xa000, 0, f->exe, false);
	assert_int_equal(ep_process_count(pm), 300);
	uint64_t gen = generation(pm, 100), kept = generation(pm, 101);
	assert_true(gen != 0 && kept != 0 && gen != kept);
	for (uint32_t pid = 100; pid < 400; pid += 3)
		ep_process_forget(pm, pid);
	assert_int_equal(generation(pm, 100), 0);
	assert_int_equal(generation(pm, 101), kept);
	assert_int_equal(ep_process_count(pm), 200);
	struct ep_resolved r;
	for (uint32_t pid = 100; pid < 400; pid++) {
		uint64_t addr = 0x400000 + pid * 0x100000ull + 0x4e80;
		enum ep_resolve_status st = ep_process_resolve(pm, pid, addr, &r);
		if ((pid - 100) % 3 == 0) {
			assert_int_equal(st, EP_RESOLVE_NO_PROCESS);
		} else {
			assert_int_equal(st, EP_RESOLVE_OK);
			assert_int_equal(r.vaddr, 0x404e80);
		}
	}
	ep_process_forget(pm, 99999); /* unknown: nothing happens */
	assert_int_equal(ep_process_count(pm), 200);
	/* a forgotten pid seen again is a new process: never its old generation */
	ep_process_map(pm, 100, 0x400000, 0xa000, 0, f->exe, false);
	assert_true(generation(pm, 100) > gen);
	gen = generation(pm, 101);
	uint64_t other = generation(pm, 102);
	ep_process_exec(pm, 101);
	assert_true(generation(pm, 101) > gen);
	gen = generation(pm, 101);
	ep_process_fork(pm, 500, 102);
	ep_process_map(pm, 500, 0x900000, 0x1000, 0, f->exe, false);
	ep_process_exec(pm, 500);
	ep_process_forget(pm, 500);
	ep_process_map(pm, 101, 0x7f0000000000ULL, 0x1000, 0, NULL, true);
	assert_true(generation(pm, 101) > gen);
	assert_int_equal(generation(pm, 102), other);
	ep_process_table_free(pm);
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

/* Everything the agent keeps about a process is in its record: a forked
 * child starts with its parent's mappings, label set and maps read time
 * (a child of a process never seen has its maps read at its first
 * sample), and an exec leaves a new program with none of them read. */
static void test_fork_and_exec_of_a_record(void **state)
{
	struct fixture *f = *state;
	struct ep_process_table *t = ep_process_table_new();
	ep_process_map(t, 40, 0x400000, 0xa000, 0, f->exe, false);
	struct ep_process *parent = ep_process_find(t, 40);
	assert_non_null(parent);
	parent->set = 3;
	parent->maps_read_ns = 77;
	struct ep_process *child = ep_process_fork(t, 41, 40);
	assert_non_null(child);
	assert_int_equal(child->set, 3);
	assert_int_equal(child->maps_read_ns, 77);
	assert_int_equal(child->maps.n, 1);
	assert_true(child->generation != parent->generation);
	struct ep_process *orphan = ep_process_fork(t, 42, 9999);
	assert_int_equal(orphan->set, 0);
	assert_int_equal(orphan->maps_read_ns, 0);
	assert_int_equal(orphan->maps.n, 0);
	uint64_t gen = child->generation;
	assert_ptr_equal(ep_process_exec(t, 41), child);
	assert_true(child->execd);
	assert_int_equal(child->maps.n, 0);
	assert_int_equal(child->maps_read_ns, 0);
	assert_int_equal(child->set, 3); /* labelled anew at its first sample */
	assert_true(child->generation > gen);
	/* an exec of a process not seen before makes it, as a new program */
	assert_non_null(ep_process_exec(t, 43));
	assert_true(ep_process_find(t, 43)->execd);
	assert_int_equal(ep_process_count(t), 4);
	ep_process_table_free(t);
}

/* A process sampled since the last flush may have counts pending: when it
 * is forgotten its record stays (retiring, without mappings, not found as
 * a process) so that its counts still go to its set, and goes at the
 * flush; a pid used again meanwhile takes the record up with what is
 * pending. At most EP_SAMPLED_PIDS_MAX are marked between flushes. */
static void test_sampled_records_outlive_their_process_until_the_flush(void **state)
{
	struct fixture *f = *state;
	struct ep_process_table *t = ep_process_table_new();
	for (uint32_t pid = 1; pid <= EP_SAMPLED_PIDS_MAX; pid++) {
		struct ep_process *p = ep_process_get(t, pid);
		p->set = pid % 7;
		assert_true(ep_process_mark_sampled(t, p));
		assert_true(ep_process_mark_sampled(t, p)); /* once is enough */
	}
	struct ep_process *late = ep_process_get(t, 90000);
	assert_false(ep_process_mark_sampled(t, late));
	assert_false(late->sampled);
	ep_process_map(t, 5, 0x400000, 0xa000, 0, f->exe, false);
	ep_process_forget(t, 5);
	ep_process_forget(t, 90000);
	assert_null(ep_process_find(t, 5));
	assert_null(ep_process_of_counts(t, 90000));
	struct ep_process *gone = ep_process_of_counts(t, 5);
	assert_non_null(gone);
	assert_true(gone->retiring);
	assert_int_equal(gone->set, 5);
	assert_int_equal(generation(t, 5), 0);
	struct ep_resolved r;
	assert_int_equal(ep_process_resolve(t, 5, 0x404e80, &r), EP_RESOLVE_NO_PROCESS);
	assert_int_equal(ep_process_count(t), EP_SAMPLED_PIDS_MAX - 1);
	/* pid 6 is forgotten and used again before the flush */
	ep_process_forget(t, 6);
	struct ep_process *again = ep_process_get(t, 6);
	assert_false(again->retiring);
	assert_true(again->sampled);
	assert_int_equal(again->set, 6);
	ep_process_flushed(t);
	assert_null(ep_process_of_counts(t, 5));
	assert_non_null(ep_process_find(t, 6));
	assert_false(ep_process_find(t, 6)->sampled);
	assert_int_equal(ep_process_count(t), EP_SAMPLED_PIDS_MAX - 1);
	/* room again */
	assert_true(ep_process_mark_sampled(t, ep_process_get(t, 90000)));
	ep_process_table_free(t);
}

/* Exited processes are forgotten oldest first once their time is past,
 * through any number of exits (the queue wraps and grows); a pid used
 * again since its exit is not the process that exited, and stays. */
static void test_exited_processes_are_forgotten_in_exit_order(void **state)
{
	(void)state;
	struct ep_process_table *t = ep_process_table_new();
	uint64_t now = 1000;
	size_t forgotten = 0;
	for (uint32_t round = 0; round < 20; round++) {
		for (uint32_t i = 0; i < 100 * (round % 5 + 1); i++) {
			uint32_t pid = 1000 + (round * 1000 + i) % 50000;
			ep_process_fork(t, pid, 1);
			ep_process_exit(t, pid, ++now);
		}
		forgotten += ep_process_forget_exited(t, now - 49);
		assert_int_equal(ep_process_count(t), 50);
	}
	forgotten += ep_process_forget_exited(t, now + 1);
	assert_int_equal(ep_process_count(t), 0);
	assert_true(forgotten > 5000);
	ep_process_fork(t, 7, 1);
	ep_process_exit(t, 7, ++now);
	ep_process_fork(t, 8, 1);
	ep_process_exit(t, 8, ++now);
	ep_process_fork(t, 7, 1); /* pid 7 again: a new process */
	assert_int_equal(ep_process_forget_exited(t, now + 1), 1);
	assert_non_null(ep_process_find(t, 7));
	assert_null(ep_process_find(t, 8));
	ep_process_exit(t, 99, ++now); /* never seen: nothing to forget */
	assert_int_equal(ep_process_forget_exited(t, now + 1), 0);
	ep_process_table_free(t);
}

/* A live sample's way in: the record, its IP resolved, and why the maps
 * are to be read first (the live source's policy, from the record). */
static void test_a_sample_says_when_maps_are_read(void **state)
{
	struct fixture *f = *state;
	const uint64_t base = 0x5629ec741000ULL, now = ep_mono_ns();
	struct ep_process_sample s = {.pid = 40, .ip = 0x5629ec7428d0ULL, .cgroup_id = 5};
	enum ep_maps_read due;
	struct ep_sample_ip ip;
	s.time_ns = now;
	/* first sight: its cgroup noted, a read due, the IP not resolved yet */
	struct ep_process *pr = ep_process_sampled(f->pm, &s, &due, &ip);
	assert_non_null(pr);
	assert_int_equal(due, EP_MAPS_AT_FIRST_SAMPLE);
	assert_int_equal(pr->cgroup_id, 5);
	assert_int_equal(ip.status, EP_RESOLVE_NO_PROCESS);
	/* the caller reads the maps, then resolves */
	ep_process_map(f->pm, 40, base + 0x1000, 0x1000, 0x0, f->pie, false);
	pr->maps_read_ns = now;
	ep_mappings_resolve_ip(&pr->maps, &ip);
	assert_int_equal(ip.status, EP_RESOLVE_OK);
	assert_int_equal(ip.vaddr, 0x18d0);
	assert_int_equal(ip.bin, ep_binary_index(f->pie));
	/* the next sample: the same record, resolved, nothing due; its cgroup
	 * is noted at the first sample only */
	s.cgroup_id = 6;
	s.time_ns = now + 1;
	assert_ptr_equal(ep_process_sampled(f->pm, &s, &due, &ip), pr);
	assert_int_equal(due, EP_MAPS_NOT_DUE);
	assert_int_equal(ip.status, EP_RESOLVE_OK);
	assert_int_equal(ip.vaddr, 0x18d0);
	assert_int_equal(pr->cgroup_id, 5);
	/* a kernel IP is not resolved */
	s.kernel = true;
	ep_process_sampled(f->pm, &s, &due, &ip);
	assert_int_equal(due, EP_MAPS_NOT_DUE);
	assert_true(ip.kernel);
	assert_int_equal(ip.status, EP_RESOLVE_NO_PROCESS);
	s.kernel = false;
	/* in none of the mappings: a read at once while reads are left after
	 * an exec, else not within a second of the last read */
	s.ip = base + 0x5000;
	pr->rereads_left = 1;
	ep_process_sampled(f->pm, &s, &due, &ip);
	assert_int_equal(due, EP_MAPS_AFTER_EXEC);
	assert_int_equal(pr->rereads_left, 0);
	ep_process_sampled(f->pm, &s, &due, &ip);
	assert_int_equal(due, EP_MAPS_NOT_DUE);
	assert_int_equal(ip.status, EP_RESOLVE_NO_MAPPING);
	pr->maps_read_ns = now - 2000000000ULL;
	ep_process_sampled(f->pm, &s, &due, &ip);
	assert_int_equal(due, EP_MAPS_UNRESOLVED);
	/* an executable mmap since: read at the first sample taken after it */
	pr->maps_read_ns = now;
	s.ip = 0x5629ec7428d0ULL;
	pr->mmap_ns = now + 10;
	ep_process_sampled(f->pm, &s, &due, &ip);
	assert_int_equal(due, EP_MAPS_NOT_DUE);
	s.time_ns = now + 10;
	ep_process_sampled(f->pm, &s, &due, &ip);
	assert_int_equal(due, EP_MAPS_AT_MMAP);
	/* a new program: read at its first sample, as an exec's */
	ep_process_exec(f->pm, 40);
	ep_process_sampled(f->pm, &s, &due, &ip);
	assert_int_equal(due, EP_MAPS_AT_EXEC);
	ep_process_forget(f->pm, 40);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_pie_at_a_random_base),
	    cmocka_unit_test(test_overlap_replaces_and_splits),
	    cmocka_unit_test(test_fork_copies_exec_clears),
	    cmocka_unit_test(test_forget_keeps_the_rest_and_moves_the_generation),
	    cmocka_unit_test(test_u64map_remove_matches_a_reference),
	    cmocka_unit_test(test_fork_and_exec_of_a_record),
	    cmocka_unit_test(test_sampled_records_outlive_their_process_until_the_flush),
	    cmocka_unit_test(test_exited_processes_are_forgotten_in_exit_order),
	    cmocka_unit_test(test_a_sample_says_when_maps_are_read),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
