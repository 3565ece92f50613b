/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Counts from agents near 2^64 (issue 18, defect 1): the collector's
 * pre-aggregation (and the agent's running totals) saturate instead of
 * wrapping, and ep_wire_check_counts draws the per-batch bound that
 * wire.h documents.
 */
#include <string.h>

#include "test_util.h"

#include "common/export/export.h"
#include "common/profile/merge.h"
#include "common/wire/wire.h"

struct one_binary {
	Edgeprof__V1__BinaryProfile bp;
	Edgeprof__V1__Edge e, *ep;
	Edgeprof__V1__Range r, *rp;
	Edgeprof__V1__IpCount ip, *ipp;
};

static void make_binary(struct one_binary *x, uint64_t samples, uint64_t count)
{
	memset(x, 0, sizeof(*x));
	edgeprof__v1__binary_profile__init(&x->bp);
	edgeprof__v1__edge__init(&x->e);
	edgeprof__v1__range__init(&x->r);
	edgeprof__v1__ip_count__init(&x->ip);
	x->bp.build_id = "beef";
	x->bp.samples = samples;
	x->e.from = 0x1000;
	x->e.to = 0x1040;
	x->e.taken = true;
	x->e.count = count;
	x->e.mispredicted = count;
	x->ep = &x->e;
	x->bp.edges = &x->ep;
	x->bp.n_edges = 1;
	x->r.start = 0x1040;
	x->r.end = 0x1060;
	x->r.count = count;
	x->rp = &x->r;
	x->bp.ranges = &x->rp;
	x->bp.n_ranges = 1;
	x->ip.ip = 0x1044;
	x->ip.count = count;
	x->ipp = &x->ip;
	x->bp.ips = &x->ipp;
	x->bp.n_ips = 1;
}

static void test_merge_saturates(void **state)
{
	(void)state;
	struct ep_merge *m = ep_merge_new();
	struct one_binary a, b;
	make_binary(&a, UINT64_MAX - 150, UINT64_MAX - 150);
	make_binary(&b, 100, 100);
	assert_int_equal(ep_merge_add(m, 60, &a.bp, NULL), 0);
	assert_int_equal(ep_merge_add(m, 60, &b.bp, NULL), 0);
	assert_int_equal(ep_merge_add(m, 60, &b.bp, NULL), 0);
	struct ep_merged out;
	assert_int_equal(ep_merge_build(m, &out), 0);
	assert_int_equal(out.n, 1);
	const Edgeprof__V1__BinaryProfile *bp = out.slices[0].delta->profile;
	/* 2^64 - 151 + 200 wrapped to 49 before */
	assert_true(bp->samples == UINT64_MAX);
	assert_true(bp->edges[0]->count == UINT64_MAX);
	assert_true(bp->edges[0]->mispredicted == UINT64_MAX);
	assert_true(bp->ranges[0]->count == UINT64_MAX);
	assert_true(bp->ips[0]->count == UINT64_MAX);
	ep_merged_free(&out);
	ep_merge_free(m);

	Edgeprof__V1__Stats total = EDGEPROF__V1__STATS__INIT, delta = EDGEPROF__V1__STATS__INIT;
	total.samples = UINT64_MAX - 1;
	delta.samples = 5;
	delta.branches_counted = 7;
	ep_stats_add(&total, &delta);
	assert_true(total.samples == UINT64_MAX);
	assert_int_equal(total.branches_counted, 7);
}

static void test_batch_bound(void **state)
{
	(void)state;
	struct one_binary x;
	Edgeprof__V1__BinaryDelta d = EDGEPROF__V1__BINARY_DELTA__INIT, *dp = &d;
	Edgeprof__V1__SamplingConfig cfg = EDGEPROF__V1__SAMPLING_CONFIG__INIT;
	Edgeprof__V1__Stats stats = EDGEPROF__V1__STATS__INIT;
	Edgeprof__V1__Batch b = EDGEPROF__V1__BATCH__INIT;
	b.binaries = &dp;
	b.n_binaries = 1;
	d.profile = &x.bp;
	char err[512];
	/* chop 16, 1000 samples: 16,000 per count */
	cfg.chop = 16;
	b.config = &cfg;
	stats.samples = 1000;
	b.stats = &stats;
	make_binary(&x, 10, 16000);
	x.ip.count = 1000;
	assert_int_equal(ep_wire_check_counts(&b, err, sizeof(err)), 0);
	x.r.count = 16001;
	assert_int_equal(ep_wire_check_counts(&b, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "range 0x1040-0x1060 count 16001"));
	/* cycles: at most 65,535 per entry, over at most 2^20 instructions */
	x.r.count = 2;
	x.r.cycles = 2 * 65535;
	x.r.cycled_instructions = 2ull << 20;
	assert_int_equal(ep_wire_check_counts(&b, err, sizeof(err)), 0);
	x.r.cycles++;
	assert_int_equal(ep_wire_check_counts(&b, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "count 2 (cycles 131071 over 2097152 instructions)"));
	/* cycles from a cycles event's IP samples (agent --cycles) have no per
	 * entry bound: a slow instruction may take many samples in a range
	 * counted once; a cpu-clock source the same */
	cfg.cycles_source = "cycles_event";
	assert_int_equal(ep_wire_check_counts(&b, err, sizeof(err)), 0);
	cfg.cycles_source = "cpu_clock";
	assert_int_equal(ep_wire_check_counts(&b, err, sizeof(err)), 0);
	cfg.cycles_source = "branch_records";
	assert_int_equal(ep_wire_check_counts(&b, err, sizeof(err)), -1);
	cfg.cycles_source = "";
	x.r.cycles--;
	x.r.cycled_instructions++;
	assert_int_equal(ep_wire_check_counts(&b, err, sizeof(err)), -1);
	cfg.cycles_source = "cycles_event"; /* instructions stay bounded */
	assert_int_equal(ep_wire_check_counts(&b, err, sizeof(err)), -1);
	cfg.cycles_source = "";
	x.r.cycles = x.r.cycled_instructions = 0;
	x.r.count = 1;
	x.ip.count = 1001; /* one IP per sample */
	assert_int_equal(ep_wire_check_counts(&b, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "ip 0x1044 count 1001"));
	x.ip.count = 1;
	x.e.mispredicted = x.e.count + 1;
	assert_int_equal(ep_wire_check_counts(&b, err, sizeof(err)), -1);
	x.e.mispredicted = 0;
	/* the whole stack counted (chop 0): 65 x 2^19 per sample */
	cfg.chop = 0;
	x.e.count = 1000 * EP_WIRE_MAX_WHOLE_STACK;
	assert_int_equal(ep_wire_check_counts(&b, err, sizeof(err)), 0);
	x.e.count++;
	assert_int_equal(ep_wire_check_counts(&b, err, sizeof(err)), -1);
	x.e.count = 1;
	cfg.chop = 65;
	assert_int_equal(ep_wire_check_counts(&b, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "config.chop 65"));
	cfg.chop = 64;
	/* without stats, the largest binary's samples stand for the batch's */
	b.stats = NULL;
	x.ip.count = 10;
	assert_int_equal(ep_wire_check_counts(&b, err, sizeof(err)), 0);
	x.ip.count = 11;
	assert_int_equal(ep_wire_check_counts(&b, err, sizeof(err)), -1);
	/* the most samples one batch may have */
	x.ip.count = 1;
	x.bp.samples = EP_WIRE_MAX_SAMPLES;
	assert_int_equal(ep_wire_check_counts(&b, err, sizeof(err)), 0);
	x.bp.samples++;
	assert_int_equal(ep_wire_check_counts(&b, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "samples in one batch"));
}

/* The exports sum the rows of one edge's two ends too (a branch to the next
 * instruction is both taken and not taken there): saturated, not wrapped. */
static void test_export_sums_saturate(void **state)
{
	(void)state;
	struct one_binary x;
	make_binary(&x, 10, UINT64_MAX - 5);
	x.e.to = 0x1002;
	x.e.mispredicted = 0;
	Edgeprof__V1__Edge nt = EDGEPROF__V1__EDGE__INIT, *edges[2] = {&x.e, &nt};
	nt.from = 0x1000;
	nt.to = 0x1002;
	nt.count = 10;
	nt.kind = EDGEPROF__V1__BRANCH_KIND__BRANCH_CONDITIONAL;
	x.e.kind = EDGEPROF__V1__BRANCH_KIND__BRANCH_CONDITIONAL;
	x.bp.edges = edges;
	x.bp.n_edges = 2;
	x.bp.n_ranges = 0;
	x.bp.arch = "x86_64";
	Edgeprof__V1__BinaryProfile *bps[1] = {&x.bp};
	Edgeprof__V1__Profile p = EDGEPROF__V1__PROFILE__INIT;
	p.binaries = bps;
	p.n_binaries = 1;
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);
	char err[256];
	assert_int_equal(ep_export(&p, EP_EXPORT_PREAGG, NULL, out, err, sizeof(err)), 0);
	fclose(out);
	/* 2^64 - 6 + 10 wrapped to 4 */
	assert_non_null(strstr(text, "B 1000 1002 18446744073709551615 0"));
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_merge_saturates),
	    cmocka_unit_test(test_batch_bound),
	    cmocka_unit_test(test_export_sums_saturate),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
