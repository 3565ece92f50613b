/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An interval bigger than one batch may hold goes in parts (agent/stream/
 * batch_split.c, issue 32 item 3): each part within the bounds, every row
 * in exactly one part, the samples counted once, and each part a batch the
 * collector's checks accept (Batch.interval_samples).
 */
#include <string.h>

#include "test_util.h"

#include "agent/stream/batch_split.h"
#include "common/profile/merge.h"
#include "common/wire/wire.h"

struct bin {
	Edgeprof__V1__BinaryProfile bp;
	Edgeprof__V1__Edge e[64], *ep[64];
	Edgeprof__V1__Range r[64], *rp[64];
	Edgeprof__V1__IpCount i[64], *ip[64];
	char *paths[1];
};

static void make_bin(struct bin *b, const char *id, size_t edges, size_t ranges, size_t ips,
		     uint64_t samples)
{
	memset(b, 0, sizeof(*b));
	edgeprof__v1__binary_profile__init(&b->bp);
	b->bp.build_id = (char *)id;
	b->bp.arch = "x86_64";
	b->paths[0] = "/bin/x";
	b->bp.paths = b->paths;
	b->bp.n_paths = 1;
	b->bp.samples = samples;
	for (size_t k = 0; k < edges; k++) {
		edgeprof__v1__edge__init(&b->e[k]);
		b->e[k].from = 0x1000 + k;
		b->e[k].to = 0x2000;
		b->e[k].taken = true;
		b->e[k].count = k + 1;
		b->ep[k] = &b->e[k];
	}
	for (size_t k = 0; k < ranges; k++) {
		edgeprof__v1__range__init(&b->r[k]);
		b->r[k].start = 0x1000 + k;
		b->r[k].end = 0x1100;
		b->r[k].count = 1;
		b->rp[k] = &b->r[k];
	}
	for (size_t k = 0; k < ips; k++) {
		edgeprof__v1__ip_count__init(&b->i[k]);
		b->i[k].ip = 0x1000 + k;
		b->i[k].count = 1;
		b->ip[k] = &b->i[k];
	}
	b->bp.edges = b->ep;
	b->bp.n_edges = edges;
	b->bp.ranges = b->rp;
	b->bp.n_ranges = ranges;
	b->bp.ips = b->ip;
	b->bp.n_ips = ips;
}

static size_t rows(const Edgeprof__V1__BinaryProfile *p)
{
	return p->n_edges + p->n_ranges + p->n_ips + p->n_functions;
}

static void test_binaries_go_whole_while_they_fit(void **state)
{
	(void)state;
	static struct bin b[5];
	Edgeprof__V1__BinaryProfile *bps[5];
	for (int i = 0; i < 5; i++) {
		make_bin(&b[i], "ab", 6, 3, 1, 10);
		bps[i] = &b[i].bp;
	}
	Edgeprof__V1__Profile delta = EDGEPROF__V1__PROFILE__INIT;
	delta.binaries = bps;
	delta.n_binaries = 5;
	struct ep_batch_parts parts;
	/* 10 rows each: two fit in 25 */
	struct ep_batch_bounds bounds = {.rows = 25};
	assert_int_equal(ep_batch_split(&delta, &bounds, &parts), 0);
	assert_int_equal(parts.nparts, 3);
	assert_int_equal(parts.end[0], 2);
	assert_int_equal(parts.end[1], 4);
	assert_int_equal(parts.end[2], 5);
	ep_batch_parts_free(&parts);
	/* at most 2 binaries a part */
	bounds = (struct ep_batch_bounds){.binaries = 2};
	assert_int_equal(ep_batch_split(&delta, &bounds, &parts), 0);
	assert_int_equal(parts.nparts, 3);
	ep_batch_parts_free(&parts);
	/* the defaults: one part */
	assert_int_equal(ep_batch_split(&delta, NULL, &parts), 0);
	assert_int_equal(parts.nparts, 1);
	assert_int_equal(parts.npieces, 5);
	assert_null(parts.pieces[0].profile->labels);
	ep_batch_parts_free(&parts);
}

/* One binary of 61 rows in parts of at most 20: every row once, in order,
 * the samples, paths and segments in the first piece only; each part a
 * batch the collector accepts, and the parts' merge is the binary. */
static void test_a_big_binary_is_cut_and_adds_up(void **state)
{
	(void)state;
	static struct bin big, small;
	make_bin(&big, "cd", 40, 15, 6, 7);
	make_bin(&small, "ef", 2, 1, 1, 3);
	/* agent --stacks: its stacks (and what names their binaries) go in one
	 * piece, not in every one */
	Edgeprof__V1__StackCount st[3], *stp[3];
	char *stack_bins[1] = {"ef"};
	for (size_t i = 0; i < 3; i++) {
		edgeprof__v1__stack_count__init(&st[i]);
		st[i].count = i + 1;
		stp[i] = &st[i];
	}
	big.bp.stacks = stp;
	big.bp.n_stacks = 3;
	big.bp.stack_binaries = stack_bins;
	big.bp.n_stack_binaries = 1;
	size_t stacks = 0, stack_binaries = 0;
	Edgeprof__V1__BinaryProfile *bps[2] = {&big.bp, &small.bp};
	Edgeprof__V1__Stats stats = EDGEPROF__V1__STATS__INIT;
	stats.samples = 10;
	Edgeprof__V1__SamplingConfig cfg = EDGEPROF__V1__SAMPLING_CONFIG__INIT;
	cfg.chop = 16;
	Edgeprof__V1__Profile delta = EDGEPROF__V1__PROFILE__INIT;
	delta.binaries = bps;
	delta.n_binaries = 2;
	delta.stats = &stats;
	delta.config = &cfg;
	struct ep_batch_parts parts;
	struct ep_batch_bounds bounds = {.rows = 20};
	assert_int_equal(ep_batch_split(&delta, &bounds, &parts), 0);
	assert_true(parts.nparts >= 4);
	size_t edges = 0, samples = 0, paths = 0;
	struct ep_merge *whole = ep_merge_new(), *sum = ep_merge_new();
	assert_int_equal(ep_merge_add(whole, 60, &big.bp, NULL), 0);
	assert_int_equal(ep_merge_add(whole, 60, &small.bp, NULL), 0);
	for (size_t k = 0, from = 0; k < parts.nparts; from = parts.end[k++]) {
		size_t part_rows = 0;
		Edgeprof__V1__BinaryDelta d[4], *dp[4];
		size_t n = parts.end[k] - from;
		assert_true(n <= 4);
		for (size_t i = 0; i < n; i++) {
			const Edgeprof__V1__BinaryProfile *p = parts.pieces[from + i].profile;
			part_rows += rows(p);
			if (strcmp(p->build_id, "cd") == 0) {
				/* the edges in order, each once */
				for (size_t e = 0; e < p->n_edges; e++)
					assert_int_equal(p->edges[e]->from, 0x1000 + edges + e);
				edges += p->n_edges;
				samples += p->samples;
				paths += p->n_paths;
				stacks += p->n_stacks;
				stack_binaries += p->n_stack_binaries;
			}
			edgeprof__v1__binary_delta__init(&d[i]);
			d[i].profile = (Edgeprof__V1__BinaryProfile *)p;
			dp[i] = &d[i];
			assert_int_equal(ep_merge_add(sum, 60, p, NULL), 0);
		}
		assert_true(part_rows <= 20);
		/* the batch it becomes, as the streamer writes it */
		Edgeprof__V1__AgentIdentity agent = EDGEPROF__V1__AGENT_IDENTITY__INIT;
		agent.agent_id = "a";
		Edgeprof__V1__Batch b = EDGEPROF__V1__BATCH__INIT;
		b.wire_version = 1;
		b.sequence = k + 1;
		b.agent = &agent;
		b.config = &cfg;
		b.stats = k == 0 ? &stats : NULL;
		b.interval_samples = k == 0 ? 0 : stats.samples;
		b.binaries = dp;
		b.n_binaries = n;
		char err[512];
		if (ep_wire_check_batch(&b, err, sizeof(err)) != 0)
			fail_msg("part %zu: %s", k, err);
		/* without interval_samples a part of pieces without samples
		 * would be refused */
		bool none = true;
		for (size_t i = 0; i < n; i++)
			none = none && !dp[i]->profile->samples;
		if (k > 0 && none) {
			b.interval_samples = 0;
			assert_int_not_equal(ep_wire_check_batch(&b, err, sizeof(err)), 0);
		}
	}
	assert_int_equal(edges, 40);
	assert_int_equal(samples, 7);
	assert_int_equal(paths, 1);
	assert_int_equal(stacks, 3);
	assert_int_equal(stack_binaries, 1);
	struct ep_merged mw, ms;
	assert_int_equal(ep_merge_build(whole, &mw), 0);
	assert_int_equal(ep_merge_build(sum, &ms), 0);
	assert_int_equal(mw.n, ms.n);
	for (size_t i = 0; i < mw.n; i++) {
		const Edgeprof__V1__BinaryProfile *a = mw.slices[i].delta->profile,
						  *z = ms.slices[i].delta->profile;
		assert_string_equal(a->build_id, z->build_id);
		assert_int_equal(a->samples, z->samples);
		assert_int_equal(a->n_edges, z->n_edges);
		assert_int_equal(a->n_ranges, z->n_ranges);
		assert_int_equal(a->n_ips, z->n_ips);
		for (size_t e = 0; e < a->n_edges; e++)
			assert_int_equal(a->edges[e]->count, z->edges[e]->count);
	}
	ep_merged_free(&mw);
	ep_merged_free(&ms);
	ep_merge_free(whole);
	ep_merge_free(sum);
	ep_batch_parts_free(&parts);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_binaries_go_whole_while_they_fit),
	    cmocka_unit_test(test_a_big_binary_is_cut_and_adds_up),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
