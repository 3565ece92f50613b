/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A batch's bytes sit in the agent's spool for as long as the collector is
 * away, and a disk or memory error there must not become counts (issue 18,
 * defect 9: one flipped bit once changed a stored edge's target and count).
 * Every single-bit flip of an encoded batch is either refused by the decoder
 * or decodes to the very same batch.
 */
#include <string.h>
#include <zstd.h>

#include "test_util.h"

#include "common/wire/wire.h"

#define NBIN   2
#define NEDGE  24
#define NRANGE 8

struct batch_data {
	Edgeprof__V1__Batch b;
	Edgeprof__V1__AgentIdentity agent;
	Edgeprof__V1__SamplingConfig cfg;
	Edgeprof__V1__BinaryDelta d[NBIN], *dp[NBIN];
	Edgeprof__V1__BinaryProfile bp[NBIN];
	Edgeprof__V1__Labels labels[NBIN];
	Edgeprof__V1__Edge e[NBIN][NEDGE], *ep[NBIN][NEDGE];
	Edgeprof__V1__Range r[NBIN][NRANGE], *rp[NBIN][NRANGE];
	char *paths[NBIN][1];
};

static void make_batch(struct batch_data *x)
{
	static const char *const ids[NBIN] = {"9f3c0a11d2e4b5a6c7d8e9f0a1b2c3d4e5f60718",
					      "0badc0ffee0123456789abcdef0123456789abcd"};
	static const char *const paths[NBIN] = {"/usr/bin/web-server", "/usr/lib/libc.so.6"};
	memset(x, 0, sizeof(*x));
	edgeprof__v1__batch__init(&x->b);
	edgeprof__v1__agent_identity__init(&x->agent);
	edgeprof__v1__sampling_config__init(&x->cfg);
	x->agent.agent_id = "agent-7f3e";
	x->agent.node = "node-12";
	x->agent.version = "edgeprof test";
	x->cfg.source = "bpf";
	x->cfg.event = "branches";
	x->cfg.period = 1000003;
	x->cfg.entries = 32;
	x->cfg.chop = 32;
	x->b.wire_version = EP_WIRE_VERSION;
	x->b.agent = &x->agent;
	x->b.config = &x->cfg;
	x->b.sequence = 42;
	x->b.window_start_ns = 1700000000000000000ULL;
	x->b.window_end_ns = 1700000010000000000ULL;
	for (int i = 0; i < NBIN; i++) {
		Edgeprof__V1__BinaryProfile *bp = &x->bp[i];
		edgeprof__v1__binary_delta__init(&x->d[i]);
		edgeprof__v1__binary_profile__init(bp);
		edgeprof__v1__labels__init(&x->labels[i]);
		x->labels[i].process = "web";
		x->d[i].profile = bp;
		x->d[i].labels = &x->labels[i];
		x->dp[i] = &x->d[i];
		bp->build_id = (char *)ids[i];
		bp->arch = "x86_64";
		x->paths[i][0] = (char *)paths[i];
		bp->paths = x->paths[i];
		bp->n_paths = 1;
		bp->samples = 1234 + (uint64_t)i;
		for (int j = 0; j < NEDGE; j++) {
			Edgeprof__V1__Edge *e = &x->e[i][j];
			edgeprof__v1__edge__init(e);
			e->from = 0x401000 + (uint64_t)j * 0x37;
			e->to = e->from + (j % 3 ? 0x20 : 6);
			e->taken = j % 3 != 0;
			e->count = 100 + (uint64_t)(j * j * 13 % 997);
			e->kind = EDGEPROF__V1__BRANCH_KIND__BRANCH_CONDITIONAL;
			x->ep[i][j] = e;
		}
		bp->edges = x->ep[i];
		bp->n_edges = NEDGE;
		for (int j = 0; j < NRANGE; j++) {
			Edgeprof__V1__Range *r = &x->r[i][j];
			edgeprof__v1__range__init(r);
			r->start = 0x402000 + (uint64_t)j * 0x40;
			r->end = r->start + 0x1c;
			r->count = 50 + (uint64_t)j;
			x->rp[i][j] = r;
		}
		bp->ranges = x->rp[i];
		bp->n_ranges = NRANGE;
	}
	x->b.binaries = x->dp;
	x->b.n_binaries = NBIN;
}

static void test_every_flipped_bit_is_refused_or_harmless(void **state)
{
	(void)state;
	struct batch_data x;
	make_batch(&x);
	size_t plain_len = edgeprof__v1__batch__get_packed_size(&x.b);
	uint8_t *plain = malloc(plain_len);
	assert_non_null(plain);
	edgeprof__v1__batch__pack(&x.b, plain);
	uint8_t *bytes, *copy;
	size_t len;
	assert_int_equal(ep_wire_encode(&x.b, &bytes, &len), 0);
	copy = malloc(len);
	assert_non_null(copy);
	size_t refused = 0, identical = 0, changed = 0, checksum_named = 0;
	char err[256];
	for (size_t bit = 0; bit < len * 8; bit++) {
		memcpy(copy, bytes, len);
		copy[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		Edgeprof__V1__Batch *back =
		    ep_wire_decode(copy, len, true, 1 << 20, err, sizeof(err));
		if (!back) {
			refused++;
			checksum_named += strstr(err, "checksum") != NULL;
			continue;
		}
		size_t n = edgeprof__v1__batch__get_packed_size(back);
		uint8_t *again = malloc(n ? n : 1);
		assert_non_null(again);
		edgeprof__v1__batch__pack(back, again);
		if (n == plain_len && memcmp(again, plain, n) == 0)
			identical++;
		else
			changed++;
		free(again);
		ep_wire_free(back);
	}
	print_message("%zu bytes, %zu bit flips: %zu refused (%zu naming the checksum), "
		      "%zu decoded identical, %zu decoded changed\n",
		      len, len * 8, refused, checksum_named, identical, changed);
	assert_int_equal(changed, 0);
	/* the payload is covered by the checksum: most flips land there */
	assert_true(checksum_named > len * 8 / 2);
	free(copy);
	free(bytes);
	free(plain);
}

/* The batch packed and put in a zstd frame with or without the checksum. */
static uint8_t *frame(const Edgeprof__V1__Batch *b, int checksum, size_t *len)
{
	size_t plain_len = edgeprof__v1__batch__get_packed_size(b);
	uint8_t *plain = malloc(plain_len);
	assert_non_null(plain);
	edgeprof__v1__batch__pack(b, plain);
	size_t cap = ZSTD_compressBound(plain_len);
	uint8_t *z = malloc(cap);
	ZSTD_CCtx *c = ZSTD_createCCtx();
	assert_non_null(z);
	assert_non_null(c);
	assert_false(ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, checksum)));
	*len = ZSTD_compress2(c, z, cap, plain, plain_len);
	assert_false(ZSTD_isError(*len));
	ZSTD_freeCCtx(c);
	free(plain);
	return z;
}

/* A frame without a checksum would be stored whatever happened to it: it
 * is refused, saying so (it was decoded and stored before). */
static void test_frame_without_checksum_is_refused(void **state)
{
	(void)state;
	struct batch_data x;
	make_batch(&x);
	char err[256];
	size_t len;
	uint8_t *z = frame(&x.b, 1, &len);
	Edgeprof__V1__Batch *back = ep_wire_decode(z, len, true, 1 << 20, err, sizeof(err));
	assert_non_null(back);
	ep_wire_free(back);
	free(z);
	z = frame(&x.b, 0, &len);
	assert_null(ep_wire_decode(z, len, true, 1 << 20, err, sizeof(err)));
	assert_non_null(strstr(err, "zstd frame without a content checksum"));
	free(z);
}

/* A second frame after the checked one (or anything else) is refused:
 * it would be decoded as more of the batch, unchecked. */
static void test_bytes_after_the_frame_are_refused(void **state)
{
	(void)state;
	struct batch_data x;
	make_batch(&x);
	char err[256];
	size_t a, b;
	uint8_t *one = frame(&x.b, 1, &a), *two = frame(&x.b, 0, &b);
	uint8_t *both = malloc(a + b);
	assert_non_null(both);
	memcpy(both, one, a);
	memcpy(both + a, two, b);
	assert_null(ep_wire_decode(both, a + b, true, 1 << 20, err, sizeof(err)));
	char want[64];
	snprintf(want, sizeof(want), "%zu bytes after the zstd frame", b);
	assert_string_equal(err, want);
	free(both);
	free(one);
	free(two);
}

/* A binary's build-id is the key its counts are stored under: "" (none)
 * or 1-64 bytes of lowercase hex; anything else is refused naming it. */
static void test_build_id_not_hex_is_refused(void **state)
{
	(void)state;
	struct batch_data x;
	char err[512], long_id[200];
	memset(long_id, 'a', 130);
	long_id[130] = '\0';
	static const char *const good[] = {"", "ab", "0123456789abcdef",
					   "9f3c0a11d2e4b5a6c7d8e9f0a1b2c3d4e5f60718"};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		make_batch(&x);
		x.bp[1].build_id = (char *)good[i];
		assert_int_equal(ep_wire_check_batch(&x.b, err, sizeof(err)), 0);
	}
	const struct {
		const char *id, *why;
	} bad[] = {
	    {"xyz1", "binaries[1]: build-id 'xyz1' (4 characters): not lowercase hex"},
	    {"ABCD", "binaries[1]: build-id 'ABCD' (4 characters): not lowercase hex"},
	    {"abc", "binaries[1]: build-id 'abc' (3 characters): an odd number of hex digits"},
	    {"ab\ncd", "binaries[1]: build-id 'ab?cd' (5 characters): not lowercase hex"},
	    {long_id, "binaries[1]: build-id 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...' (130 "
		      "characters): too long"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		make_batch(&x);
		x.bp[1].build_id = (char *)bad[i].id;
		assert_int_equal(ep_wire_check_batch(&x.b, err, sizeof(err)), EP_WIRE_BAD_BATCH);
		assert_non_null(strstr(err, "a build-id is 1-64 bytes in lowercase hex"));
		if (strncmp(err, bad[i].why, strlen(bad[i].why)) != 0)
			fail_msg("'%s': got '%s'", bad[i].id, err);
	}
}

/* Every string a batch carries has a bound (wire.h EP_WIRE_MAX_*): one at
 * its bound passes, one byte past it is refused naming the field. */
static void test_strings_past_their_bound_are_refused(void **state)
{
	(void)state;
	struct batch_data x;
	char err[512];
	char *s = malloc(EP_WIRE_MAX_SYMBOL + 2);
	assert_non_null(s);
	const struct {
		const char *field;
		size_t max;
	} cases[] = {
	    {"agent.node", EP_WIRE_MAX_NAME},
	    {"agent.version", EP_WIRE_MAX_NAME},
	    {"labels.pod", EP_WIRE_MAX_NAME},
	    {"labels.cgroup", EP_WIRE_MAX_PATH},
	    {"a path", EP_WIRE_MAX_PATH},
	    {"config.source", EP_WIRE_MAX_PATH},
	    {"a function's name", EP_WIRE_MAX_SYMBOL},
	};
	Edgeprof__V1__Function fn, *fns[1] = {&fn};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		for (size_t extra = 0; extra < 2; extra++) {
			memset(s, 'n', cases[i].max + extra);
			s[cases[i].max + extra] = '\0';
			make_batch(&x);
			edgeprof__v1__function__init(&fn);
			fn.name = "main";
			x.bp[1].functions = fns;
			x.bp[1].n_functions = 1;
			const char *f = cases[i].field;
			if (!strcmp(f, "agent.node"))
				x.agent.node = s;
			else if (!strcmp(f, "agent.version"))
				x.agent.version = s;
			else if (!strcmp(f, "labels.pod"))
				x.labels[1].pod = s;
			else if (!strcmp(f, "labels.cgroup"))
				x.labels[1].cgroup = s;
			else if (!strcmp(f, "a path"))
				x.paths[1][0] = s;
			else if (!strcmp(f, "config.source"))
				x.cfg.source = s;
			else
				fn.name = s;
			int rc = ep_wire_check_batch(&x.b, err, sizeof(err));
			if (!extra) {
				if (rc != 0)
					fail_msg("%s at its bound %zu refused: %s", f, cases[i].max,
						 err);
				continue;
			}
			assert_int_equal(rc, EP_WIRE_BAD_STRING);
			char want[128];
			snprintf(want, sizeof(want), "more than %zu bytes", cases[i].max);
			if (strncmp(err, f, strlen(f)) != 0 || !strstr(err, want))
				fail_msg("%s past its bound: got '%s'", f, err);
		}
	}
	make_batch(&x);
	char *caps[EP_WIRE_MAX_CAPABILITIES + 1];
	for (size_t i = 0; i <= EP_WIRE_MAX_CAPABILITIES; i++)
		caps[i] = "profile-session";
	x.b.capabilities = caps;
	x.b.n_capabilities = EP_WIRE_MAX_CAPABILITIES;
	assert_int_equal(ep_wire_check_batch(&x.b, err, sizeof(err)), 0);
	x.b.n_capabilities = EP_WIRE_MAX_CAPABILITIES + 1;
	assert_int_equal(ep_wire_check_batch(&x.b, err, sizeof(err)), EP_WIRE_BAD_STRING);
	assert_non_null(strstr(err, "capabilities"));
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_every_flipped_bit_is_refused_or_harmless),
	    cmocka_unit_test(test_frame_without_checksum_is_refused),
	    cmocka_unit_test(test_bytes_after_the_frame_are_refused),
	    cmocka_unit_test(test_build_id_not_hex_is_refused),
	    cmocka_unit_test(test_strings_past_their_bound_are_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
