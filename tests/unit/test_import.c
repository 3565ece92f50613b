/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The import's fast ways must not change a profile by one byte:
 *  - reconstructing and chopping in one pass from the newest entry back,
 *    with entries counted whole in the reconstructor's memory, against the
 *    full trace built, chopped and counted branch by branch (what a gap
 *    observer still gets);
 *  - a recording shared among N threads, each counting every N-th sample,
 *    against one thread.
 * Compared on the real recordings, serialized.
 */
#include "test_samples.h"

#include <string.h>

#include "agent/pipeline/pipeline.h"
#include "agent/source/perf_data/perf_data_feed.h"
#include "common/profile/profile_file.h"

struct packed {
	uint8_t *bytes;
	size_t len;
};

static struct packed pack(Edgeprof__V1__Profile *profile)
{
	assert_non_null(profile);
	struct packed p = {.len = edgeprof__v1__profile__get_packed_size(profile)};
	p.bytes = malloc(p.len ? p.len : 1);
	assert_non_null(p.bytes);
	assert_int_equal(edgeprof__v1__profile__pack(profile, p.bytes), p.len);
	ep_profile_free(profile);
	return p;
}

static void assert_same(struct packed a, struct packed b, const char *what)
{
	if (a.len != b.len || memcmp(a.bytes, b.bytes, a.len) != 0)
		fail_msg("%s: profiles differ (%zu and %zu bytes)", what, a.len, b.len);
	free(a.bytes);
	free(b.bytes);
}

struct import_case {
	const char *recording, *binary;
	int chop;
	enum ep_range_mode ranges;
};

static const struct import_case cases[] = {
    {"propeller_sample_1.perfdata1", "propeller_sample_1.bin", EP_CHOP_AUTO, EP_RANGES_SPLIT},
    {"propeller_sample_1.perfdata1", "propeller_sample_1.bin", 0, EP_RANGES_SPLIT},
    {"propeller_sample_1.perfdata1", "propeller_sample_1.bin", 7, EP_RANGES_SPLIT},
    {"propeller_sample_1.perfdata1", "propeller_sample_1.bin", 0, EP_RANGES_GAP},
    {"propeller_sample_1.perfdata1", NULL, EP_CHOP_AUTO, EP_RANGES_SPLIT},
    {"test.lbr", "test.binary", EP_CHOP_AUTO, EP_RANGES_SPLIT},
    {"test.lbr", "test.binary", 0, EP_RANGES_SPLIT},
    {"test.lbr", "test.binary", 3, EP_RANGES_SPLIT},
    {"test.lbr", "test.binary", 0, EP_RANGES_GAP},
};

static struct ep_binary_registry *registry(const struct import_case *c)
{
	struct ep_binary_registry *reg = ep_binreg_new();
	assert_non_null(reg);
	char err[256];
	if (c->binary)
		assert_int_equal(
		    ep_binreg_add_file(reg, ep_test_fixture(c->binary), err, sizeof(err)), 0);
	return reg;
}

static struct ep_pipeline *pipeline(const struct import_case *c, struct ep_binary_registry *reg)
{
	struct ep_pipeline_config cfg;
	ep_pipeline_config_default(&cfg);
	cfg.chop = c->chop;
	cfg.range_mode = c->ranges;
	struct ep_pipeline *p = ep_pipeline_new(&cfg, reg);
	assert_non_null(p);
	return p;
}

static void ignore_gap(void *ctx, const struct ep_gap_report *gap)
{
	(void)ctx;
	(void)gap;
}

/* The recording through one pipeline; with a gap observer every sample
 * takes the full trace. */
static struct packed import_one(const struct import_case *c, bool full_trace)
{
	struct ep_binary_registry *reg = registry(c);
	struct ep_pipeline *p = pipeline(c, reg);
	if (full_trace)
		ep_reconstructor_set_gap_observer(ep_pipeline_reconstructor(p), ignore_gap, NULL);
	struct ep_perf_data_feed_info info;
	char err[256];
	assert_int_equal(
	    ep_feed_perf_data(ep_test_fixture(c->recording), p, &info, err, sizeof(err)), 0);
	struct packed out = pack(ep_pipeline_profile(p));
	ep_pipeline_free(p);
	ep_binreg_free(reg);
	return out;
}

/* The comparisons above are not vacuous for cycles: propeller_sample_1
 * has them in every entry, and each way counts some under every chop. */
static void test_cycles_are_counted(void **state)
{
	(void)state;
	for (size_t i = 0; i < 4; i++) {
		for (int full = 0; full < 2; full++) {
			struct ep_binary_registry *reg = registry(&cases[i]);
			struct ep_pipeline *p = pipeline(&cases[i], reg);
			if (full)
				ep_reconstructor_set_gap_observer(ep_pipeline_reconstructor(p),
								  ignore_gap, NULL);
			struct ep_perf_data_feed_info info;
			char err[256];
			assert_int_equal(ep_feed_perf_data(ep_test_fixture(cases[i].recording), p,
							   &info, err, sizeof(err)),
					 0);
			Edgeprof__V1__Profile *prof = ep_pipeline_profile(p);
			uint64_t cycles = 0, insns = 0;
			for (size_t b = 0; b < prof->n_binaries; b++)
				for (size_t r = 0; r < prof->binaries[b]->n_ranges; r++) {
					cycles += prof->binaries[b]->ranges[r]->cycles;
					insns += prof->binaries[b]->ranges[r]->cycled_instructions;
				}
			assert_true(cycles > 10000 && insns > 10000);
			ep_profile_free(prof);
			ep_pipeline_free(p);
			ep_binreg_free(reg);
		}
	}
}

static void test_one_pass_equals_full_trace(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char what[256];
		snprintf(what, sizeof(what), "%s chop %d ranges %d", cases[i].recording,
			 cases[i].chop, cases[i].ranges);
		assert_same(import_one(&cases[i], false), import_one(&cases[i], true), what);
	}
}

/* test.lbr counted taken branches only; read as if its event had counted
 * every branch, each trace is extended to the sample IP (the trigger),
 * which the one pass must count the same way too. */
static void test_one_pass_equals_full_trace_with_trigger(void **state)
{
	(void)state;
	struct samples s = {0};
	struct ep_perf_data_callbacks cb = {.ctx = &s, .on_sample = keep_sample};
	struct ep_perf_data_stats st;
	char err[256];
	assert_int_equal(ep_perf_data_read(ep_test_fixture("test.lbr"), &cb, &st, err, sizeof(err)),
			 0);
	static const int chops[] = {EP_CHOP_AUTO, 0, 1, 4};
	for (size_t c = 0; c < sizeof(chops) / sizeof(chops[0]); c++) {
		struct import_case ic = {"test.lbr", "test.binary", chops[c], EP_RANGES_SPLIT};
		struct packed out[2];
		uint64_t appended = 0;
		for (int full = 0; full < 2; full++) {
			struct ep_binary_registry *reg = registry(&ic);
			struct ep_pipeline *p = pipeline(&ic, reg);
			if (full)
				ep_reconstructor_set_gap_observer(ep_pipeline_reconstructor(p),
								  ignore_gap, NULL);
			ep_pipeline_mmap(p, s.recs[0].pid, 0x400000, 0x100000, 0,
					 ep_test_fixture("test.binary"), NULL, 0);
			for (size_t i = 0; i < s.n; i++) {
				struct ep_sample_record rec = s.recs[i];
				rec.flags |= EP_SAMPLE_TRIGGER_IS_BRANCH;
				ep_pipeline_sample(p, &rec);
			}
			Edgeprof__V1__Profile *prof = ep_pipeline_profile(p);
			assert_non_null(prof);
			appended = prof->stats->trigger_appended;
			out[full] = pack(prof);
			ep_pipeline_free(p);
			ep_binreg_free(reg);
		}
		assert_true(appended > 1000);
		char what[64];
		snprintf(what, sizeof(what), "test.lbr with triggers, chop %d", chops[c]);
		assert_same(out[0], out[1], what);
	}
	free(s.recs);
}

static void test_threads_equal_one(void **state)
{
	(void)state;
	enum { MAX = 4 };
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct import_case *c = &cases[i];
		for (unsigned n = 2; n <= MAX; n++) {
			struct ep_binary_registry *regs[MAX];
			struct ep_pipeline *ps[MAX];
			char err[256];
			regs[0] = registry(c);
			for (unsigned j = 0; j < n; j++) {
				if (j)
					regs[j] = ep_binreg_clone(regs[0], err, sizeof(err));
				assert_non_null(regs[j]);
				ps[j] = pipeline(c, regs[j]);
			}
			struct ep_perf_data_feed_info info;
			assert_int_equal(ep_feed_perf_data_parallel(ep_test_fixture(c->recording),
								    ps, n, &info, err, sizeof(err)),
					 0);
			char what[256];
			snprintf(what, sizeof(what), "%s chop %d ranges %d, %u threads",
				 c->recording, c->chop, c->ranges, n);
			assert_same(pack(ep_pipeline_profile_merged(ps, n)), import_one(c, false),
				    what);
			for (unsigned j = 0; j < n; j++) {
				ep_pipeline_free(ps[j]);
				ep_binreg_free(regs[j]);
			}
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cycles_are_counted),
	    cmocka_unit_test(test_one_pass_equals_full_trace),
	    cmocka_unit_test(test_one_pass_equals_full_trace_with_trigger),
	    cmocka_unit_test(test_threads_equal_one),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
