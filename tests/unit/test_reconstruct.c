/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The reconstructor remembers what each branch entry did under (pid,
 * mapping generation, previous target, source, target). These tests check
 * that a remembered entry gives what computing it gives, and that a change
 * of mappings is never answered from memory.
 */
#include "test_samples.h"

#include <string.h>

#include "agent/pipeline/pipeline.h"
#include "agent/source/perf_data/perf_data.h"
#include "common/profile/profile_file.h"

/* test.lbr's samples; test.binary is mapped at 0x400000 (not PIE). */
static void load_samples(struct samples *s)
{
	memset(s, 0, sizeof(*s));
	struct ep_perf_data_callbacks cb = {.ctx = s, .on_sample = keep_sample};
	struct ep_perf_data_stats st;
	char err[256];
	assert_int_equal(ep_perf_data_read(ep_test_fixture("test.lbr"), &cb, &st, err, sizeof(err)),
			 0);
	assert_true(s->n > 9000);
}

static struct ep_pipeline *new_pipeline(struct ep_binary_registry *reg, uint32_t pid)
{
	struct ep_pipeline_config cfg;
	ep_pipeline_config_default(&cfg);
	struct ep_pipeline *p = ep_pipeline_new(&cfg, reg);
	assert_non_null(p);
	ep_pipeline_mmap(p, pid, 0x400000, 0x100000, 0, ep_test_fixture("test.binary"), NULL, 0);
	return p;
}

/* The sampled process, as the pipeline hands it to the reconstructor. */
static struct ep_process *process_of(struct ep_pipeline *p, const struct ep_sample_record *rec)
{
	return ep_process_find(ep_pipeline_process_table(p), rec->pid);
}

/* The same sample twice in a row: the second time every entry is
 * remembered, and the trace is the same, branch for branch. */
static void test_remembered_entries_give_the_same_trace(void **state)
{
	(void)state;
	struct samples s;
	load_samples(&s);
	struct ep_binary_registry *reg = ep_binreg_new();
	struct ep_pipeline *p = new_pipeline(reg, s.recs[0].pid);
	struct ep_reconstructor *r = ep_pipeline_reconstructor(p);
	struct ep_trace a = {0}, b = {0};
	size_t branches = 0;
	for (size_t i = 0; i < s.n; i++) {
		size_t na = ep_reconstruct(r, &s.recs[i], process_of(p, &s.recs[i]), &a);
		size_t nb = ep_reconstruct(r, &s.recs[i], process_of(p, &s.recs[i]), &b);
		assert_int_equal(na, nb);
		assert_int_equal(a.last_cut, b.last_cut);
		for (size_t k = 0; k < na; k++) {
			const struct ep_trace_branch *x = &a.branches[k], *y = &b.branches[k];
			assert_int_equal(x->bin, y->bin);
			assert_int_equal(x->site, y->site);
			assert_int_equal(x->range, y->range);
			assert_int_equal(x->to_bin, y->to_bin);
			assert_int_equal(x->to_vaddr, y->to_vaddr);
			assert_int_equal(x->gap_start, y->gap_start);
			assert_int_equal(x->kind, y->kind);
			assert_int_equal(x->taken, y->taken);
			assert_int_equal(x->mispredicted, y->mispredicted);
			assert_int_equal(x->cut_before, y->cut_before);
		}
		branches += na;
	}
	assert_true(branches > 100000);
	ep_trace_free(&a);
	ep_trace_free(&b);
	ep_pipeline_free(p);
	ep_binreg_free(reg);
	free(s.recs);
}

/* After an exec the process has no mappings: the same stack, remembered
 * under the old mappings, must now come out unresolved. */
static void test_new_mappings_are_not_answered_from_memory(void **state)
{
	(void)state;
	struct samples s;
	load_samples(&s);
	struct ep_binary_registry *reg = ep_binreg_new();
	const struct ep_sample_record *rec = &s.recs[s.n / 2];
	struct ep_pipeline *p = new_pipeline(reg, rec->pid);
	struct ep_reconstructor *r = ep_pipeline_reconstructor(p);
	const struct ep_reconstruct_stats *st = ep_reconstructor_stats(r);
	struct ep_trace t = {0};
	size_t before = ep_reconstruct(r, rec, process_of(p, rec), &t);
	assert_true(before > 10);
	uint64_t unresolved = st->branch_entries_unresolved;
	ep_pipeline_exec(p, rec->pid);
	assert_int_equal(ep_reconstruct(r, rec, process_of(p, rec), &t), 0);
	assert_true(st->branch_entries_unresolved >= unresolved + rec->nr_entries - 1);
	/* mapped again: resolved again, the same trace length */
	ep_pipeline_mmap(p, rec->pid, 0x400000, 0x100000, 0, ep_test_fixture("test.binary"), NULL,
			 0);
	assert_int_equal(ep_reconstruct(r, rec, process_of(p, rec), &t), before);
	ep_trace_free(&t);
	ep_pipeline_free(p);
	ep_binreg_free(reg);
	free(s.recs);
}

/* Another process's exec, fork, mappings and exit change nothing this
 * process resolves: its remembered entries stay valid (on a busy node every
 * process the machine starts would otherwise empty the memo for all). */
static void test_other_processes_keep_remembered_entries(void **state)
{
	(void)state;
	struct samples s;
	load_samples(&s);
	struct ep_binary_registry *reg = ep_binreg_new();
	const struct ep_sample_record *rec = &s.recs[s.n / 2];
	uint32_t pid = rec->pid, other = pid + 1, child = pid + 2;
	struct ep_pipeline *p = new_pipeline(reg, pid);
	struct ep_reconstructor *r = ep_pipeline_reconstructor(p);
	ep_pipeline_sample(p, rec);
	uint64_t computed = ep_reconstructor_stats(r)->entries_computed;
	assert_true(computed > 0);
	ep_pipeline_sample(p, rec);
	assert_int_equal(ep_reconstructor_stats(r)->entries_computed, computed);
	for (int round = 0; round < 3; round++) {
		ep_pipeline_fork(p, child, other);
		ep_pipeline_exec(p, child);
		ep_pipeline_mmap(p, child, 0x400000, 0x100000, 0, ep_test_fixture("test.binary"),
				 NULL, 0);
		ep_pipeline_mmap_anon(p, other, 0x7f0000000000ULL, 0x1000);
		ep_pipeline_exit(p, child);
		ep_pipeline_forget(p, child);
		ep_pipeline_sample(p, rec);
		assert_int_equal(ep_reconstructor_stats(r)->entries_computed, computed);
	}
	/* the same events for pid itself do make it compute again */
	ep_pipeline_mmap_anon(p, pid, 0x7f0000000000ULL, 0x1000);
	ep_pipeline_sample(p, rec);
	assert_true(ep_reconstructor_stats(r)->entries_computed > computed);
	/* and a pid used again after it was forgotten is a new process */
	computed = ep_reconstructor_stats(r)->entries_computed;
	ep_pipeline_forget(p, pid);
	ep_pipeline_mmap(p, pid, 0x400000, 0x100000, 0, ep_test_fixture("test.binary"), NULL, 0);
	ep_pipeline_sample(p, rec);
	assert_true(ep_reconstructor_stats(r)->entries_computed > computed);
	ep_pipeline_free(p);
	ep_binreg_free(reg);
	free(s.recs);
}

/* Edges counted per container, over a profile's label sets. */
static uint64_t edges_of(const Edgeprof__V1__Profile *prof, const char *container)
{
	uint64_t sum = 0;
	for (size_t i = 0; i < prof->n_binaries; i++) {
		const Edgeprof__V1__BinaryProfile *bp = prof->binaries[i];
		const char *c =
		    bp->labels && bp->labels->container_id ? bp->labels->container_id : "";
		if (strcmp(c, container) != 0)
			continue;
		for (size_t k = 0; k < bp->n_edges; k++)
			sum += bp->edges[k]->count;
	}
	return sum;
}

/* A digest of every edge and range a profile counts. */
static uint64_t profile_digest(const Edgeprof__V1__Profile *prof)
{
	uint64_t d = 0;
	for (size_t i = 0; i < prof->n_binaries; i++) {
		const Edgeprof__V1__BinaryProfile *bp = prof->binaries[i];
		for (size_t k = 0; k < bp->n_edges; k++) {
			const Edgeprof__V1__Edge *e = bp->edges[k];
			d += (e->from * 0x9e3779b97f4a7c15ULL ^ e->to ^ (uint64_t)e->taken << 63) *
			     (e->count + 1);
		}
		for (size_t k = 0; k < bp->n_ranges; k++)
			d += (bp->ranges[k]->start * 31 + bp->ranges[k]->end) *
			     (bp->ranges[k]->count + 7);
	}
	return d;
}

/* The memo starts small (a short recording's flushes walk little of it)
 * and grows with the entries seen, carrying what it remembers along: the
 * counts are those of every entry computed afresh. */
static void test_memo_grows_with_what_is_seen(void **state)
{
	(void)state;
	struct samples s;
	load_samples(&s);
	const size_t n = s.n;
	uint64_t digest[2];
	for (int fresh = 0; fresh < 2; fresh++) {
		struct ep_binary_registry *reg = ep_binreg_new();
		const uint32_t pid = s.recs[0].pid;
		struct ep_pipeline *p = new_pipeline(reg, pid);
		const struct ep_reconstruct_stats *st =
		    ep_reconstructor_stats(ep_pipeline_reconstructor(p));
		for (size_t i = 0; i < n; i++) {
			if (fresh) {
				/* new mappings: nothing remembered applies */
				ep_pipeline_exec(p, pid);
				ep_pipeline_mmap(p, pid, 0x400000, 0x100000, 0,
						 ep_test_fixture("test.binary"), NULL, 0);
			}
			ep_pipeline_sample(p, &s.recs[i]);
			if (i == 0)
				assert_int_equal(st->memo_entries, 512);
		}
		/* test.lbr's entries fit in 4096 with few computed twice */
		if (!fresh)
			assert_true(st->memo_entries > 512 && st->memo_entries <= 8192);
		Edgeprof__V1__Profile *prof = ep_pipeline_take_delta(p);
		assert_non_null(prof);
		assert_true(edges_of(prof, "") > 50000);
		digest[fresh] = profile_digest(prof);
		ep_profile_free(prof);
		ep_pipeline_free(p);
		ep_binreg_free(reg);
	}
	assert_int_equal(digest[0], digest[1]);
	free(s.recs);
}

static void sample_as(struct ep_pipeline *p, const struct samples *s, size_t from, size_t to,
		      uint32_t pid)
{
	for (size_t i = from; i < to; i++) {
		struct ep_sample_record rec = s->recs[i];
		rec.pid = pid;
		ep_pipeline_sample(p, &rec);
	}
}

/* The edges that the samples recs[from..to) count, run as pid. */
static uint64_t edges_alone(const struct samples *s, size_t from, size_t to, uint32_t pid)
{
	struct ep_binary_registry *reg = ep_binreg_new();
	struct ep_pipeline *p = new_pipeline(reg, pid);
	sample_as(p, s, from, to, pid);
	Edgeprof__V1__Profile *prof = ep_pipeline_take_delta(p);
	assert_non_null(prof);
	uint64_t n = edges_of(prof, "");
	ep_profile_free(prof);
	ep_pipeline_free(p);
	ep_binreg_free(reg);
	return n;
}

/*
 * A container's short processes come and go hundreds of times a second on
 * a busy node. A process that has not been sampled since the last flush has
 * no counts pending, so its fork and exit must not flush the reconstructor
 * (each flush walks the whole entry memo). Counts that are pending still go
 * to the container they were sampled in, also when a gone process's pid is
 * used again, in another container, before the next flush.
 */
static void test_labelled_processes_come_and_go_without_flushing(void **state)
{
	(void)state;
	struct samples s;
	load_samples(&s);
	const uint32_t parent = 100, child = 200;
	struct ep_binary_registry *reg = ep_binreg_new();
	struct ep_pipeline *p = new_pipeline(reg, parent);
	const struct ep_reconstruct_stats *st =
	    ep_reconstructor_stats(ep_pipeline_reconstructor(p));
	Edgeprof__V1__Labels one = EDGEPROF__V1__LABELS__INIT, two = EDGEPROF__V1__LABELS__INIT;
	one.container_id = "one";
	two.container_id = "two";
	ep_pipeline_label_pid(p, parent, &one);
	sample_as(p, &s, 0, 500, parent);
	uint64_t flushes = st->flushes;
	for (uint32_t i = 0; i < 300; i++) {
		ep_pipeline_fork(p, 1000 + i, parent);
		ep_pipeline_exit(p, 1000 + i);
		ep_pipeline_forget(p, 1000 + i);
	}
	assert_int_equal(st->flushes, flushes);

	/* child runs in container one and is gone, its counts still pending */
	ep_pipeline_fork(p, child, parent);
	sample_as(p, &s, 500, 1000, child);
	ep_pipeline_exit(p, child);
	ep_pipeline_forget(p, child);
	assert_int_equal(st->flushes, flushes);
	/* its pid comes back in container two: now the pending counts must go */
	ep_pipeline_label_pid(p, child, &two);
	assert_int_equal(st->flushes, flushes + 1);
	ep_pipeline_mmap(p, child, 0x400000, 0x100000, 0, ep_test_fixture("test.binary"), NULL, 0);
	sample_as(p, &s, 1000, 1400, child);
	/* parent is gone too: its set goes once its counts are taken */
	ep_pipeline_forget(p, parent);

	Edgeprof__V1__Profile *prof = ep_pipeline_take_delta(p);
	assert_non_null(prof);
	uint64_t in_one = edges_of(prof, "one"), in_two = edges_of(prof, "two");
	uint64_t want_one = edges_alone(&s, 0, 500, parent) + edges_alone(&s, 500, 1000, child);
	uint64_t want_two = edges_alone(&s, 1000, 1400, child);
	assert_true(want_one > 1000 && want_two > 1000);
	assert_int_equal(in_one, want_one);
	assert_int_equal(in_two, want_two);
	assert_int_equal(edges_of(prof, ""), 0);
	ep_profile_free(prof);
	assert_int_equal(ep_pipeline_label_sets(p), 1);

	/* an agent that only writes a file never takes deltas: what it keeps
	 * of the pids sampled since the last flush stays bounded */
	flushes = st->flushes;
	for (uint32_t i = 0; i < 5000; i++) {
		struct ep_sample_record rec = s.recs[i];
		rec.pid = 10000 + i;
		ep_pipeline_sample(p, &rec);
	}
	assert_int_equal(st->flushes, flushes + 1);
	/* the pid whose sample made that flush is still known to hold counts */
	ep_pipeline_label_pid(p, 10000 + 4096, &one);
	assert_int_equal(st->flushes, flushes + 2);
	ep_pipeline_free(p);
	ep_binreg_free(reg);
	free(s.recs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_remembered_entries_give_the_same_trace),
	    cmocka_unit_test(test_new_mappings_are_not_answered_from_memory),
	    cmocka_unit_test(test_other_processes_keep_remembered_entries),
	    cmocka_unit_test(test_labelled_processes_come_and_go_without_flushing),
	    cmocka_unit_test(test_memo_grows_with_what_is_seen),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
