/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The registry forgets binaries no process maps once their counts were
 * taken: a node that runs many distinct short-lived programs (a build
 * machine) keeps memory flat, and loses no count. Driven the way the live
 * agent drives it: a process maps a binary, samples arrive, the delta is
 * taken (a batch), the process exits and is forgotten, binaries are
 * evicted.
 */
#include "test_samples.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/pipeline/pipeline.h"
#include "common/profile/profile_file.h"

#define SAMPLES_PER_PROCESS 300

/* propeller_sample_1's samples and where its recording mapped the binary */
struct recording {
	struct samples s;
	uint64_t start, len, pgoff;
};

static int keep_mmap(void *ctx, const struct ep_mmap_event *ev)
{
	struct recording *r = ctx;
	if (ev->executable && !ev->kernel && strstr(ev->filename, "propeller_sample_1")) {
		r->start = ev->start;
		r->len = ev->len;
		r->pgoff = ev->pgoff;
	}
	return 0;
}

static int keep(void *ctx, const struct ep_sample_record *rec)
{
	return keep_sample(&((struct recording *)ctx)->s, rec);
}

static void load(struct recording *r)
{
	memset(r, 0, sizeof(*r));
	struct ep_perf_data_callbacks cb = {.ctx = r, .on_mmap = keep_mmap, .on_sample = keep};
	struct ep_perf_data_stats st;
	char err[256];
	assert_int_equal(ep_perf_data_read(ep_test_fixture("propeller_sample_1.perfdata1"), &cb,
					   &st, err, sizeof(err)),
			 0);
	assert_true(r->s.n >= SAMPLES_PER_PROCESS && r->len > 0);
}

/* A copy of propeller_sample_1.bin whose build-id ends in i: a distinct
 * program, as each build of a compiler's test binaries is. */
static void write_copy(const char *dir, unsigned i, char *path, size_t len)
{
	static const uint8_t id[] = {0x57, 0x2a, 0xc7, 0x24, 0x87, 0xae, 0x19, 0x66};
	FILE *in = fopen(ep_test_fixture("propeller_sample_1.bin"), "rb");
	assert_non_null(in);
	static uint8_t buf[1 << 20];
	size_t n = fread(buf, 1, sizeof(buf), in);
	fclose(in);
	assert_true(n > 0 && n < sizeof(buf));
	uint8_t *at = memmem(buf, n, id, sizeof(id));
	assert_non_null(at);
	at[6] = (uint8_t)(i >> 8);
	at[7] = (uint8_t)i;
	snprintf(path, len, "%s/prog-%u", dir, i);
	FILE *out = fopen(path, "wb");
	assert_non_null(out);
	assert_int_equal(fwrite(buf, 1, n, out), n);
	fclose(out);
}

/* A binary's sample and edge totals, summed over profiles by build-id. */
struct totals {
	char id[64];
	uint64_t samples, edges;
};

static void add_totals(struct totals *t, size_t *n, size_t cap, const Edgeprof__V1__Profile *prof)
{
	for (size_t b = 0; b < prof->n_binaries; b++) {
		const Edgeprof__V1__BinaryProfile *bp = prof->binaries[b];
		size_t k = 0;
		while (k < *n && strcmp(t[k].id, bp->build_id) != 0)
			k++;
		if (k == *n) {
			assert_true(*n < cap);
			snprintf(t[k].id, sizeof(t[k].id), "%s", bp->build_id);
			(*n)++;
		}
		t[k].samples += bp->samples;
		for (size_t e = 0; e < bp->n_edges; e++)
			t[k].edges += bp->edges[e]->count;
	}
}

/* One process of pid running binary path for SAMPLES_PER_PROCESS samples. */
static void run_process(struct ep_pipeline *p, const struct recording *r, uint32_t pid,
			const char *path)
{
	ep_pipeline_mmap(p, pid, r->start, r->len, r->pgoff, path, NULL, 0);
	for (size_t i = 0; i < SAMPLES_PER_PROCESS; i++) {
		struct ep_sample_record rec = r->s.recs[i];
		rec.pid = rec.tid = pid;
		ep_pipeline_sample(p, &rec);
	}
}

static void test_churn_keeps_memory_flat_and_every_count(void **state)
{
	(void)state;
	enum { PROGRAMS = 120 };
	struct recording r;
	load(&r);
	char dir[] = "/tmp/edgeprof-evict-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char path[PROGRAMS + 1][256];
	for (unsigned i = 0; i <= PROGRAMS; i++)
		write_copy(dir, i, path[i], sizeof(path[i]));

	/* what one process of one copy counts, evicting nothing */
	struct ep_binary_registry *ref_reg = ep_binreg_new();
	struct ep_pipeline_config cfg;
	ep_pipeline_config_default(&cfg);
	struct ep_pipeline *ref = ep_pipeline_new(&cfg, ref_reg);
	run_process(ref, &r, 1000, path[0]);
	Edgeprof__V1__Profile *ref_prof = ep_pipeline_take_delta(ref);
	struct totals want[4] = {0};
	size_t nwant = 0;
	add_totals(want, &nwant, 4, ref_prof);
	assert_int_equal(nwant, 1);
	assert_true(want[0].samples > 0 && want[0].edges > 0);

	struct ep_binary_registry *reg = ep_binreg_new();
	struct ep_pipeline *p = ep_pipeline_new(&cfg, reg);
	static struct totals got[PROGRAMS + 8];
	size_t ngot = 0;
	struct ep_binreg_stats st;
	/* a long-lived process maps copy 0 the whole time: never evicted */
	run_process(p, &r, 5, path[PROGRAMS]);
	uint64_t most_held = 0;
	for (unsigned i = 0; i < PROGRAMS; i++) {
		uint32_t pid = 100 + i;
		run_process(p, &r, pid, path[i]);
		Edgeprof__V1__Profile *delta = ep_pipeline_take_delta(p);
		assert_non_null(delta);
		add_totals(got, &ngot, PROGRAMS + 8, delta);
		ep_profile_free(delta);
		ep_pipeline_exit(p, pid);
		ep_pipeline_forget(p, pid);
		ep_binreg_evict(reg, 0);
		ep_binreg_stats(reg, &st);
		most_held = st.held > most_held ? st.held : most_held;
		/* flat: the long-lived one, and the last program until it is idle
		 * for a whole interval */
		assert_true(st.held <= 3);
		assert_true(ep_binreg_count(reg) <= 4);
	}
	ep_binreg_evict(reg, 0);
	ep_binreg_stats(reg, &st);
	print_message("%u programs: at most %llu binaries held, %llu evicted, %zu indexes\n",
		      PROGRAMS, (unsigned long long)most_held, (unsigned long long)st.evicted,
		      ep_binreg_count(reg));
	assert_int_equal(st.held, 1);
	assert_int_equal(st.evicted, PROGRAMS);
	assert_int_equal(st.opened, PROGRAMS + 1);
	/* every evicted program's counts were delivered, each exactly one
	 * process's: nothing lost, nothing doubled */
	assert_int_equal(ngot, PROGRAMS + 1);
	for (size_t k = 0; k < ngot; k++) {
		assert_int_equal(got[k].samples, want[0].samples);
		assert_int_equal(got[k].edges, want[0].edges);
	}

	/* a program run again after its eviction is read again, and counted */
	run_process(p, &r, 7000, path[3]);
	ep_binreg_stats(reg, &st);
	assert_int_equal(st.reread, 1);
	assert_int_equal(st.opened, PROGRAMS + 2);
	Edgeprof__V1__Profile *again = ep_pipeline_take_delta(p);
	struct totals t[4] = {0};
	size_t nt = 0;
	add_totals(t, &nt, 4, again);
	assert_int_equal(nt, 1);
	assert_int_equal(t[0].samples, want[0].samples);
	assert_int_equal(t[0].edges, want[0].edges);
	ep_profile_free(again);

	ep_profile_free(ref_prof);
	ep_pipeline_free(ref);
	ep_binreg_free(ref_reg);
	ep_pipeline_free(p);
	ep_binreg_free(reg);
	for (unsigned i = 0; i <= PROGRAMS; i++)
		unlink(path[i]);
	rmdir(dir);
	free(r.s.recs);
}

/* Counts not yet taken (a file-only agent's running totals) keep their
 * binary, and so does a lookup since the last eviction. */
static void test_untaken_counts_and_recent_lookups_keep_a_binary(void **state)
{
	(void)state;
	struct recording r;
	load(&r);
	char dir[] = "/tmp/edgeprof-evict-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char a[256], b[256];
	write_copy(dir, 1, a, sizeof(a));
	write_copy(dir, 2, b, sizeof(b));
	struct ep_binary_registry *reg = ep_binreg_new();
	struct ep_pipeline_config cfg;
	ep_pipeline_config_default(&cfg);
	struct ep_pipeline *p = ep_pipeline_new(&cfg, reg);
	run_process(p, &r, 10, a);
	ep_pipeline_forget(p, 10);
	ep_binreg_evict(reg, 0);
	ep_binreg_evict(reg, 0);
	struct ep_binreg_stats st;
	ep_binreg_stats(reg, &st);
	assert_int_equal(st.evicted, 0); /* its counts are still in the pipeline */
	Edgeprof__V1__Profile *prof = ep_pipeline_profile(p);
	assert_true(prof->n_binaries == 1 && prof->binaries[0]->samples > 0);
	ep_profile_free(prof);

	/* b mapped and forgotten before any count: looked up since the last
	 * eviction, kept once, then evicted */
	ep_pipeline_mmap(p, 11, r.start, r.len, r.pgoff, b, NULL, 0);
	ep_pipeline_forget(p, 11);
	assert_int_equal(ep_binreg_evict(reg, 0), 0);
	assert_int_equal(ep_binreg_evict(reg, 0), 1);
	/* past a memory bound the idle rule is not waited for */
	ep_pipeline_mmap(p, 12, r.start, r.len, r.pgoff, b, NULL, 0);
	ep_pipeline_forget(p, 12);
	assert_int_equal(ep_binreg_evict(reg, 1), 1);
	ep_binreg_stats(reg, &st);
	assert_int_equal(st.held, 1);
	assert_int_equal(st.reread, 1);
	ep_pipeline_free(p);
	ep_binreg_free(reg);
	unlink(a);
	unlink(b);
	rmdir(dir);
	free(r.s.recs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_churn_keeps_memory_flat_and_every_count),
	    cmocka_unit_test(test_untaken_counts_and_recent_lookups_keep_a_binary),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
