/* SPDX-License-Identifier: Apache-2.0 */
/* Profile inference's solver (issue 34) on small graphs whose answer is
 * known: flow is conserved at every block, counts that agree with flow are
 * kept, a block no sample saw gets what must pass through it, and a graph
 * past the limits keeps its samples. */
#include "test_util.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "common/decode/decoder.h"
#include "common/profile/infer.h"

#define OUT EP_INFER_OUTSIDE

static struct ep_infer_limits limits(void)
{
	struct ep_infer_limits l;
	ep_infer_limits_default(&l);
	return l;
}

/* Every block's flow equals what flows in and what flows out, and what
 * enters from outside equals what leaves. */
static void assert_conserved(const struct ep_infer_block *b, size_t nb,
			     const struct ep_infer_edge *e, size_t ne)
{
	uint64_t in_from_out = 0, out_to_out = 0;
	for (size_t i = 0; i < nb; i++) {
		uint64_t in = 0, out = 0;
		for (size_t k = 0; k < ne; k++) {
			if (e[k].dst == i)
				in += e[k].flow;
			if (e[k].src == i)
				out += e[k].flow;
		}
		assert_int_equal(in, b[i].flow);
		assert_int_equal(out, b[i].flow);
	}
	for (size_t k = 0; k < ne; k++) {
		if (e[k].src == OUT)
			in_from_out += e[k].flow;
		if (e[k].dst == OUT)
			out_to_out += e[k].flow;
	}
	assert_int_equal(in_from_out, out_to_out);
}

static void e_set(struct ep_infer_edge *e, uint32_t src, uint32_t dst, uint64_t count)
{
	*e = (struct ep_infer_edge){.src = src, .dst = dst, .count = count, .known = true};
}

static void b_set(struct ep_infer_block *b, uint64_t count)
{
	*b = (struct ep_infer_block){.count = count, .known = true};
}

/* A diamond 0 -> {1, 2} -> 3 whose samples agree with flow: kept as they
 * are. */
static void test_diamond_consistent(void **state)
{
	(void)state;
	struct ep_infer_block b[4];
	struct ep_infer_edge e[6];
	b_set(&b[0], 100), b_set(&b[1], 70), b_set(&b[2], 30), b_set(&b[3], 100);
	e_set(&e[0], OUT, 0, 100), e_set(&e[1], 0, 1, 70), e_set(&e[2], 0, 2, 30);
	e_set(&e[3], 1, 3, 70), e_set(&e[4], 2, 3, 30), e_set(&e[5], 3, OUT, 100);
	struct ep_infer_limits l = limits();
	assert_int_equal(ep_infer_solve(b, 4, e, 6, &l), EP_INFER_OK);
	assert_conserved(b, 4, e, 6);
	for (size_t i = 0; i < 4; i++)
		assert_int_equal(b[i].flow, b[i].count);
	for (size_t i = 0; i < 6; i++)
		assert_int_equal(e[i].flow, e[i].count);
}

/* The same diamond with noise: the join saw 104 while its arms say 100.
 * Flow holds, and no count moves further than the disagreement. */
static void test_diamond_noisy(void **state)
{
	(void)state;
	struct ep_infer_block b[4];
	struct ep_infer_edge e[6];
	b_set(&b[0], 100), b_set(&b[1], 68), b_set(&b[2], 33), b_set(&b[3], 104);
	e_set(&e[0], OUT, 0, 101), e_set(&e[1], 0, 1, 70), e_set(&e[2], 0, 2, 30);
	e_set(&e[3], 1, 3, 70), e_set(&e[4], 2, 3, 30), e_set(&e[5], 3, OUT, 100);
	struct ep_infer_limits l = limits();
	assert_int_equal(ep_infer_solve(b, 4, e, 6, &l), EP_INFER_OK);
	assert_conserved(b, 4, e, 6);
	for (size_t i = 0; i < 4; i++)
		assert_true(b[i].flow + 4 >= b[i].count && b[i].flow <= b[i].count + 4);
	for (size_t i = 0; i < 6; i++)
		assert_true(e[i].flow + 4 >= e[i].count && e[i].flow <= e[i].count + 4);
}

/* A loop: 0 -> 1 (header) -> 2 (body) -> 1, 1 -> 3 -> out. The body's back
 * edge was seen 0 times though the body ran 9: flow gives the back edge the
 * body's count and the header entry plus back edge. */
static void test_loop(void **state)
{
	(void)state;
	struct ep_infer_block b[4];
	struct ep_infer_edge e[6];
	b_set(&b[0], 1), b_set(&b[1], 10), b_set(&b[2], 9), b_set(&b[3], 1);
	e_set(&e[0], OUT, 0, 1), e_set(&e[1], 0, 1, 1), e_set(&e[2], 1, 2, 9);
	e_set(&e[3], 2, 1, 0), e_set(&e[4], 1, 3, 1), e_set(&e[5], 3, OUT, 1);
	struct ep_infer_limits l = limits();
	assert_int_equal(ep_infer_solve(b, 4, e, 6, &l), EP_INFER_OK);
	assert_conserved(b, 4, e, 6);
	assert_int_equal(e[3].flow, 9);
	assert_int_equal(b[1].flow, 10);
	assert_int_equal(b[2].flow, 9);
}

/* 0 -> 1 -> 2, the middle block and both its edges unseen while both ends
 * were seen 50 times: it is on the only way, so it ran (> 0; BOLT would
 * split it off as never run). */
static void test_unseen_on_only_path(void **state)
{
	(void)state;
	struct ep_infer_block b[3];
	struct ep_infer_edge e[4];
	b_set(&b[0], 50), b_set(&b[1], 0), b_set(&b[2], 50);
	e_set(&e[0], OUT, 0, 50), e_set(&e[1], 0, 1, 0), e_set(&e[2], 1, 2, 0);
	e_set(&e[3], 2, OUT, 50);
	struct ep_infer_limits l = limits();
	assert_int_equal(ep_infer_solve(b, 3, e, 4, &l), EP_INFER_OK);
	assert_conserved(b, 3, e, 4);
	assert_true(b[1].flow > 0);
	assert_int_equal(b[0].flow, 50);
	assert_int_equal(b[2].flow, 50);
}

/* A block with two ways out, one seen and one not, keeps the unseen one at
 * zero: nothing asks for flow there. */
static void test_unseen_branch_stays_cold(void **state)
{
	(void)state;
	struct ep_infer_block b[4];
	struct ep_infer_edge e[6];
	b_set(&b[0], 20), b_set(&b[1], 20), b_set(&b[2], 0), b_set(&b[3], 20);
	e_set(&e[0], OUT, 0, 20), e_set(&e[1], 0, 1, 20), e_set(&e[2], 0, 2, 0);
	e_set(&e[3], 1, 3, 20), e_set(&e[4], 2, 3, 0), e_set(&e[5], 3, OUT, 20);
	struct ep_infer_limits l = limits();
	assert_int_equal(ep_infer_solve(b, 4, e, 6, &l), EP_INFER_OK);
	assert_conserved(b, 4, e, 6);
	assert_int_equal(b[2].flow, 0);
	assert_int_equal(b[1].flow, 20);
}

/* A self loop and an edge of unknown count: flow conserved, the self loop
 * carries what the block ran more than it was entered. */
static void test_self_loop_unknown(void **state)
{
	(void)state;
	struct ep_infer_block b[2];
	struct ep_infer_edge e[4];
	b_set(&b[0], 40), b_set(&b[1], 4);
	e_set(&e[0], OUT, 0, 4), e_set(&e[1], 0, 0, 30), e_set(&e[2], 0, 1, 4);
	e_set(&e[3], 1, OUT, 0);
	e[3].known = false;
	struct ep_infer_limits l = limits();
	assert_int_equal(ep_infer_solve(b, 2, e, 4, &l), EP_INFER_OK);
	assert_conserved(b, 2, e, 4);
	assert_int_equal(e[3].flow, b[1].flow);
	assert_true(b[1].flow >= 4);
	assert_int_equal(e[1].flow + e[0].flow, b[0].flow);
}

/* Spreading: the unseen arm of the diamond, one edge from code that ran,
 * gets one unit from the entry to the exit, flow still conserved; with
 * depth 0 it stays cold, and a block two edges away waits for depth 2. */
static void test_spread(void **state)
{
	(void)state;
	struct ep_infer_block b[5];
	struct ep_infer_edge e[8];
	b_set(&b[0], 20), b_set(&b[1], 20), b_set(&b[2], 0), b_set(&b[3], 20), b_set(&b[4], 0);
	e_set(&e[0], OUT, 0, 20), e_set(&e[1], 0, 1, 20), e_set(&e[2], 0, 2, 0);
	e_set(&e[3], 1, 3, 20), e_set(&e[4], 2, 4, 0), e_set(&e[5], 4, 3, 0);
	e_set(&e[6], 3, OUT, 20), e_set(&e[7], 2, 2, 0); /* a self loop never taken */
	struct ep_infer_limits l = limits();
	size_t n = 99;
	assert_int_equal(ep_infer_solve(b, 5, e, 8, &l), EP_INFER_OK);
	l.spread_depth = 0;
	assert_int_equal(ep_infer_spread(b, 5, e, 8, &l, &n), EP_INFER_OK);
	assert_int_equal(n, 0);
	assert_int_equal(b[2].flow, 0);
	l.spread_depth = 1;
	assert_int_equal(ep_infer_spread(b, 5, e, 8, &l, &n), EP_INFER_OK);
	/* block 4 is reached by the unit through block 2 on its way out */
	assert_int_equal(n, 1);
	assert_int_equal(b[2].flow, 1);
	assert_int_equal(b[4].flow, 1);
	assert_int_equal(b[0].flow, 21);
	assert_int_equal(e[7].flow, 0);
	assert_conserved(b, 5, e, 8);
}

/* A block with no way to an exit (an endless loop the samples never saw)
 * gets nothing: a unit in would never leave. */
static void test_spread_no_way_out(void **state)
{
	(void)state;
	struct ep_infer_block b[3];
	struct ep_infer_edge e[5];
	b_set(&b[0], 10), b_set(&b[1], 10), b_set(&b[2], 0);
	e_set(&e[0], OUT, 0, 10), e_set(&e[1], 0, 1, 10), e_set(&e[2], 1, OUT, 10);
	e_set(&e[3], 0, 2, 0), e_set(&e[4], 2, 2, 0);
	struct ep_infer_limits l = limits();
	l.spread_depth = 8;
	size_t n = 99;
	assert_int_equal(ep_infer_solve(b, 3, e, 5, &l), EP_INFER_OK);
	assert_int_equal(ep_infer_spread(b, 3, e, 5, &l, &n), EP_INFER_OK);
	assert_int_equal(n, 0);
	assert_int_equal(b[2].flow, 0);
	assert_conserved(b, 3, e, 5);
}

static Edgeprof__V1__Edge *edge(uint64_t from, uint64_t to, bool taken, uint64_t count,
				Edgeprof__V1__BranchKind kind)
{
	Edgeprof__V1__Edge *e = malloc(sizeof(*e));
	assert_non_null(e);
	edgeprof__v1__edge__init(e);
	e->from = from, e->to = to, e->taken = taken, e->count = count, e->kind = kind;
	e->from_external = from == 0;
	e->to_external = to == 0;
	return e;
}

static Edgeprof__V1__Range *range(uint64_t start, uint64_t end, uint64_t count)
{
	Edgeprof__V1__Range *r = malloc(sizeof(*r));
	assert_non_null(r);
	edgeprof__v1__range__init(r);
	r->start = start, r->end = end, r->count = count;
	return r;
}

static uint64_t count_of(const Edgeprof__V1__BinaryProfile *bp, uint64_t from, uint64_t to,
			 bool taken)
{
	for (size_t i = 0; i < bp->n_edges; i++)
		if (bp->edges[i]->from == from && bp->edges[i]->to == to &&
		    !bp->edges[i]->taken == !taken)
			return bp->edges[i]->count;
	return 0;
}

/* A function's code decoded, its samples rewritten: a diamond whose taken
 * arm no sample saw. Its conditional branch's taken edge, and the
 * fall-through from that arm into the join (a BRANCH_FALLTHROUGH edge from
 * the instruction before the join), get the unit spread through it; the
 * seen edges keep their samples times 16; the return carries both. */
static void test_profile_on_code(void **state)
{
	(void)state;
	static const uint8_t code[] = {
	    0x85, 0xff,	      /* 1000: test %edi,%edi */
	    0x74, 0x04,	      /* 1002: je 1008 */
	    0xff, 0xc0,	      /* 1004: inc %eax */
	    0xeb, 0x02,	      /* 1006: jmp 100a */
	    0xff, 0xc8,	      /* 1008: dec %eax (no sample) */
	    0xff, 0xc0, 0xc3, /* 100a: inc %eax; 100c: ret */
	};
	struct ep_code_segment seg = {.vaddr = 0x1000, .bytes = code, .size = sizeof(code)};
	struct ep_decoder *dec = ep_decoder_new(EP_ARCH_X86_64, &seg, 1);
	assert_non_null(dec);
	Edgeprof__V1__BinaryProfile bp = EDGEPROF__V1__BINARY_PROFILE__INIT;
	Edgeprof__V1__Function fn = EDGEPROF__V1__FUNCTION__INIT;
	fn.name = "f", fn.start = 0x1000, fn.size = sizeof(code);
	Edgeprof__V1__Function *fns[] = {&fn};
	bp.functions = fns, bp.n_functions = 1;
	Edgeprof__V1__Edge *edges[] = {
	    edge(0, 0x1000, true, 10, EDGEPROF__V1__BRANCH_KIND__BRANCH_CALL),
	    edge(0x1002, 0x1004, false, 10, EDGEPROF__V1__BRANCH_KIND__BRANCH_CONDITIONAL),
	    edge(0x1006, 0x100a, true, 10, EDGEPROF__V1__BRANCH_KIND__BRANCH_JUMP),
	    edge(0x100c, 0, true, 10, EDGEPROF__V1__BRANCH_KIND__BRANCH_RETURN),
	};
	Edgeprof__V1__Range *ranges[] = {range(0x1000, 0x1002, 10), range(0x1004, 0x1006, 10),
					 range(0x100a, 0x100c, 10)};
	bp.edges = edges, bp.n_edges = 4;
	bp.ranges = ranges, bp.n_ranges = 3;
	struct ep_infer_limits l = limits();
	Edgeprof__V1__BinaryProfile *out = NULL;
	struct ep_infer_stats st;
	assert_int_equal(ep_infer_profile(&bp, dec, &l, &out, &st), 0);
	assert_int_equal(st.functions, 1);
	assert_int_equal(st.blocks, 4);
	assert_int_equal(st.blocks_zero_sampled, 1);
	assert_int_equal(st.blocks_spread, 1);
	assert_int_equal(count_of(out, 0x1002, 0x1004, false), 160);
	assert_int_equal(count_of(out, 0x1002, 0x1008, true), 1);
	assert_int_equal(count_of(out, 0x1006, 0x100a, true), 160);
	assert_int_equal(count_of(out, 0x1008, 0x100a, false), 1);
	assert_int_equal(count_of(out, 0x100c, 0, true), 161);
	assert_int_equal(count_of(out, 0, 0x1000, true), 160); /* calls: kept, times 16 */
	edgeprof__v1__binary_profile__free_unpacked(out, NULL);
	for (size_t i = 0; i < 4; i++)
		free(edges[i]);
	for (size_t i = 0; i < 3; i++)
		free(ranges[i]);
	ep_decoder_free(dec);
}

/* Past the limits: refused by name, the samples kept as the flows. */
static void test_limits(void **state)
{
	(void)state;
	struct ep_infer_block b[3];
	struct ep_infer_edge e[4];
	b_set(&b[0], 50), b_set(&b[1], 0), b_set(&b[2], 50);
	e_set(&e[0], OUT, 0, 50), e_set(&e[1], 0, 1, 0), e_set(&e[2], 1, 2, 0);
	e_set(&e[3], 2, OUT, 50);
	struct ep_infer_limits l = limits();
	l.max_blocks = 2;
	assert_int_equal(ep_infer_solve(b, 3, e, 4, &l), EP_INFER_TOO_BIG);
	assert_int_equal(b[1].flow, 0);
	assert_int_equal(e[1].flow, 0);
	l = limits();
	l.max_work = 3;
	assert_int_equal(ep_infer_solve(b, 3, e, 4, &l), EP_INFER_TOO_SLOW);
	assert_int_equal(b[1].flow, 0);
	l = limits();
	b[0].count = EP_INFER_MAX_COUNT;
	assert_int_equal(ep_infer_solve(b, 3, e, 4, &l), EP_INFER_TOO_MANY);
	e[2].dst = 7;
	b[0].count = 1;
	assert_int_equal(ep_infer_solve(b, 3, e, 4, &l), EP_INFER_BAD_GRAPH);
	assert_non_null(strstr(ep_infer_status_name(EP_INFER_TOO_BIG), "--infer-max-blocks"));
}

/* A long chain of blocks with random noise on every count: flow conserved
 * throughout, solved within the default work. */
static void test_chain_noise(void **state)
{
	(void)state;
	enum { N = 2000 };
	static struct ep_infer_block b[N];
	static struct ep_infer_edge e[2 * N + 1];
	size_t ne = 0;
	uint32_t x = 12345;
	for (uint32_t i = 0; i < N; i++) {
		x = x * 1103515245u + 12345u;
		b_set(&b[i], 1000 + (x >> 16) % 50);
		e_set(&e[ne++], i == 0 ? OUT : i - 1, i, 1000 + (x >> 8) % 40);
		if (i % 7 == 3) /* a back edge, seen or not */
			e_set(&e[ne++], i, i - 2, (x >> 4) % 3);
	}
	e_set(&e[ne++], N - 1, OUT, 1000);
	struct ep_infer_limits l = limits();
	assert_int_equal(ep_infer_solve(b, N, e, ne, &l), EP_INFER_OK);
	assert_conserved(b, N, e, ne);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_diamond_consistent),
	    cmocka_unit_test(test_diamond_noisy),
	    cmocka_unit_test(test_loop),
	    cmocka_unit_test(test_unseen_on_only_path),
	    cmocka_unit_test(test_unseen_branch_stays_cold),
	    cmocka_unit_test(test_self_loop_unknown),
	    cmocka_unit_test(test_spread),
	    cmocka_unit_test(test_spread_no_way_out),
	    cmocka_unit_test(test_profile_on_code),
	    cmocka_unit_test(test_limits),
	    cmocka_unit_test(test_chain_noise),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
