/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ep_wire_count (common/wire/wire_count.c): what a batch holds, read from
 * its bytes before they are unpacked, and what unpacking them takes, which
 * the collector reserves (issue 32, item 3).
 */
#include <malloc.h>
#include <string.h>

#include "test_util.h"

#include "common/wire/wire.h"

/* A batch of nbin binaries, each with edges edges, ranges ranges, ips IPs
 * and one function; binary i's labels are pod-(i % sets). */
static uint8_t *make_batch(size_t nbin, size_t edges, size_t ranges, size_t ips, size_t sets,
			   size_t *len)
{
	Edgeprof__V1__Batch b = EDGEPROF__V1__BATCH__INIT;
	Edgeprof__V1__AgentIdentity agent = EDGEPROF__V1__AGENT_IDENTITY__INIT;
	agent.agent_id = "a";
	b.agent = &agent;
	b.wire_version = 1;
	b.sequence = 1;
	Edgeprof__V1__BinaryDelta **d = calloc(nbin, sizeof(*d));
	char(*pods)[16] = calloc(nbin, sizeof(*pods));
	for (size_t i = 0; i < nbin; i++) {
		d[i] = calloc(1, sizeof(**d));
		edgeprof__v1__binary_delta__init(d[i]);
		Edgeprof__V1__BinaryProfile *p = calloc(1, sizeof(*p));
		edgeprof__v1__binary_profile__init(p);
		p->build_id = "ab";
		p->n_edges = edges;
		p->edges = calloc(edges + 1, sizeof(*p->edges));
		for (size_t k = 0; k < edges; k++) {
			p->edges[k] = calloc(1, sizeof(**p->edges));
			edgeprof__v1__edge__init(p->edges[k]);
			p->edges[k]->from = 0x1000 + k;
			p->edges[k]->count = 1;
		}
		p->n_ranges = ranges;
		p->ranges = calloc(ranges + 1, sizeof(*p->ranges));
		for (size_t k = 0; k < ranges; k++) {
			p->ranges[k] = calloc(1, sizeof(**p->ranges));
			edgeprof__v1__range__init(p->ranges[k]);
			p->ranges[k]->start = k;
		}
		p->n_ips = ips;
		p->ips = calloc(ips + 1, sizeof(*p->ips));
		for (size_t k = 0; k < ips; k++) {
			p->ips[k] = calloc(1, sizeof(**p->ips));
			edgeprof__v1__ip_count__init(p->ips[k]);
			p->ips[k]->ip = k;
		}
		Edgeprof__V1__Function *fn = calloc(1, sizeof(*fn));
		edgeprof__v1__function__init(fn);
		fn->name = "main";
		p->functions = calloc(1, sizeof(*p->functions));
		p->functions[0] = fn;
		p->n_functions = 1;
		Edgeprof__V1__Labels *l = calloc(1, sizeof(*l));
		edgeprof__v1__labels__init(l);
		snprintf(pods[i], sizeof(pods[i]), "pod-%zu", i % sets);
		l->pod = pods[i];
		d[i]->labels = l;
		d[i]->profile = p;
	}
	b.binaries = d;
	b.n_binaries = nbin;
	*len = edgeprof__v1__batch__get_packed_size(&b);
	uint8_t *out = malloc(*len + 64);
	edgeprof__v1__batch__pack(&b, out);
	for (size_t i = 0; i < nbin; i++) {
		Edgeprof__V1__BinaryProfile *p = d[i]->profile;
		for (size_t k = 0; k < p->n_edges; k++)
			free(p->edges[k]);
		for (size_t k = 0; k < p->n_ranges; k++)
			free(p->ranges[k]);
		for (size_t k = 0; k < p->n_ips; k++)
			free(p->ips[k]);
		free(p->edges);
		free(p->ranges);
		free(p->ips);
		free(p->functions[0]);
		free(p->functions);
		free(p);
		free(d[i]->labels);
		free(d[i]);
	}
	free(d);
	free(pods);
	return out;
}

static void test_counts_what_the_batch_holds(void **state)
{
	(void)state;
	size_t len;
	uint8_t *bytes = make_batch(5, 10, 4, 3, 2, &len);
	struct ep_wire_counts c, none = {0};
	char err[256];
	assert_int_equal(ep_wire_count(bytes, len, &none, &c, err, sizeof(err)), 0);
	assert_int_equal(c.binaries, 5);
	assert_int_equal(c.edges, 50);
	assert_int_equal(c.ranges, 20);
	assert_int_equal(c.ips, 15);
	assert_int_equal(c.functions, 5);
	assert_int_equal(c.label_sets, 2); /* pod-0 and pod-1 */
	/* within bounds: 0; one past a bound: refused naming it */
	struct ep_wire_counts limits = {.binaries = 5, .edges = 50, .label_sets = 2};
	const char *which = NULL;
	assert_int_equal(ep_wire_check_limits(&c, &limits, &which, err, sizeof(err)), 0);
	limits.edges = 49;
	assert_int_equal(ep_wire_check_limits(&c, &limits, &which, err, sizeof(err)), -1);
	assert_string_equal(which, "edges");
	assert_non_null(strstr(err, "50 edges in one batch: more than the 49"));
	limits.edges = 50;
	limits.label_sets = 1;
	assert_int_equal(ep_wire_count(bytes, len, &limits, &c, err, sizeof(err)), 0);
	assert_int_equal(ep_wire_check_limits(&c, &limits, &which, err, sizeof(err)), -1);
	assert_string_equal(which, "label_sets");
	assert_non_null(strstr(err, "more than 1 distinct label sets"));
	/* bytes that are no Batch: refused, as unpacking would */
	assert_int_equal(ep_wire_count(bytes, len - 1, &none, &c, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not an edgeprof.v1.Batch"));
	free(bytes);
}

/* Unknown fields are kept by the unpacking, one record each: counted. */
static void test_unknown_fields_count(void **state)
{
	(void)state;
	size_t n = 100000, len = 0;
	uint8_t *bytes = malloc(n * 3);
	/* a Batch of field 99 (varint 0), 100,000 times: 3 bytes each */
	for (size_t i = 0; i < n; i++) {
		bytes[len++] = ((99 << 3) & 0x7f) | 0x80;
		bytes[len++] = (99 << 3) >> 7;
		bytes[len++] = 0;
	}
	struct ep_wire_counts c, none = {0};
	char err[256];
	assert_int_equal(ep_wire_count(bytes, len, &none, &c, err, sizeof(err)), 0);
	assert_true(c.decoded_bytes >= n * 64);
	/* as the heap sees it */
	struct mallinfo2 before = mallinfo2();
	Edgeprof__V1__Batch *b = edgeprof__v1__batch__unpack(NULL, len, bytes);
	struct mallinfo2 after = mallinfo2();
	assert_non_null(b);
	assert_true(c.decoded_bytes >=
		    (after.uordblks + after.hblkhd) - (before.uordblks + before.hblkhd));
	ep_wire_free(b);
	free(bytes);
}

/* What unpacking takes, as the heap sees it: the estimate is never below
 * it, and not far above. */
static void test_decoded_bytes_bound_the_heap(void **state)
{
	(void)state;
	size_t len;
	uint8_t *bytes = make_batch(50, 2000, 1000, 1000, 10, &len);
	struct ep_wire_counts c, none = {0};
	char err[256];
	assert_int_equal(ep_wire_count(bytes, len, &none, &c, err, sizeof(err)), 0);
	struct mallinfo2 before = mallinfo2();
	Edgeprof__V1__Batch *b = edgeprof__v1__batch__unpack(NULL, len, bytes);
	struct mallinfo2 after = mallinfo2();
	assert_non_null(b);
	size_t used = (after.uordblks + after.hblkhd) - (before.uordblks + before.hblkhd);
	fprintf(stderr, "# %zu bytes unpacked to %zu on the heap, estimated %llu\n", len, used,
		(unsigned long long)c.decoded_bytes);
	assert_true(c.decoded_bytes >= used);
	/* ASan's allocator keeps no mallinfo: 0 there */
	assert_true(!used || c.decoded_bytes <= used * 2);
	ep_wire_free(b);
	free(bytes);
}

/* agent --stacks: a BinaryProfile's stacks (packed frames of 1-byte
 * varints, 8 bytes each once unpacked) and stack_binaries are reserved
 * too, not counted as the few raw bytes of an unknown field. */
static void test_stacks_bound_the_heap(void **state)
{
	(void)state;
	enum { NSTACKS = 2000, DEPTH = 64 };
	Edgeprof__V1__BinaryProfile p = EDGEPROF__V1__BINARY_PROFILE__INIT;
	p.build_id = "ab";
	Edgeprof__V1__StackCount *st = calloc(NSTACKS, sizeof(*st));
	Edgeprof__V1__StackCount **sp = calloc(NSTACKS, sizeof(*sp));
	uint64_t frames[DEPTH];
	uint32_t fb[DEPTH];
	for (size_t k = 0; k < DEPTH; k++) {
		frames[k] = k;
		fb[k] = k % 2;
	}
	for (size_t i = 0; i < NSTACKS; i++) {
		edgeprof__v1__stack_count__init(&st[i]);
		st[i].count = 1;
		st[i].frames = frames;
		st[i].n_frames = DEPTH;
		st[i].frame_binaries = fb;
		st[i].n_frame_binaries = DEPTH;
		sp[i] = &st[i];
	}
	p.stacks = sp;
	p.n_stacks = NSTACKS;
	char *names[] = {"cd"};
	p.stack_binaries = names;
	p.n_stack_binaries = 1;
	Edgeprof__V1__BinaryDelta d = EDGEPROF__V1__BINARY_DELTA__INIT;
	d.profile = &p;
	Edgeprof__V1__BinaryDelta *dp = &d;
	Edgeprof__V1__Batch b = EDGEPROF__V1__BATCH__INIT;
	b.wire_version = 1;
	b.binaries = &dp;
	b.n_binaries = 1;
	size_t len = edgeprof__v1__batch__get_packed_size(&b);
	uint8_t *bytes = malloc(len);
	edgeprof__v1__batch__pack(&b, bytes);
	free(sp);
	free(st);
	struct ep_wire_counts c, none = {0};
	char err[256];
	assert_int_equal(ep_wire_count(bytes, len, &none, &c, err, sizeof(err)), 0);
	struct mallinfo2 before = mallinfo2();
	Edgeprof__V1__Batch *u = edgeprof__v1__batch__unpack(NULL, len, bytes);
	struct mallinfo2 after = mallinfo2();
	assert_non_null(u);
	assert_int_equal(u->binaries[0]->profile->n_stacks, NSTACKS);
	size_t used = (after.uordblks + after.hblkhd) - (before.uordblks + before.hblkhd);
	fprintf(stderr, "# stacks: %zu bytes unpacked to %zu on the heap, estimated %llu\n", len,
		used, (unsigned long long)c.decoded_bytes);
	assert_true(c.decoded_bytes >= used);
	assert_true(!used || c.decoded_bytes <= used * 2);
	ep_wire_free(u);
	free(bytes);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_counts_what_the_batch_holds),
	    cmocka_unit_test(test_unknown_fields_count),
	    cmocka_unit_test(test_decoded_bytes_bound_the_heap),
	    cmocka_unit_test(test_stacks_bound_the_heap),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
