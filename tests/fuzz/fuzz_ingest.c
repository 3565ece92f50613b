/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target over the collector's ingest path below the zstd layer
 * (issue 18: overflow-class counts generated, not only hand-written). The
 * input is a decompressed batch payload (proto/ingest.proto's Batch): it is
 * decoded (ep_wire_decode, plain), checked as the collector checks it before
 * storing (ep_wire_check_batch), and merged twice with the collector's
 * pre-aggregation (common/profile/merge.h), accepted or not, so that counts
 * near 2^64 reach the sums. Invariants (abort on failure):
 *   - an accepted batch's counts are within wire.h's bounds (samples <= S <=
 *     EP_WIRE_MAX_SAMPLES, edge and range counts <= S x L, mispredicted <=
 *     count, IP counts <= S);
 *   - every merged count equals the saturating sum of its addends (twice):
 *     never below any addend, never wrapped.
 * Built with EP_FUZZ_WRITE_SEEDS and no libFuzzer, main() writes the seed
 * corpus (valid batches) into the folder named by argv[1].
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/profile/merge.h"
#include "common/util/sat.h"
#include "common/wire/wire.h"

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, "fuzz_ingest: " __VA_ARGS__);                                      \
		fputc('\n', stderr);                                                               \
		abort();                                                                           \
	} while (0)

static const char *s_or_e(const char *s)
{
	return s ? s : "";
}

static bool same_labels(const Edgeprof__V1__Labels *a, const Edgeprof__V1__Labels *b)
{
	static const Edgeprof__V1__Labels none = EDGEPROF__V1__LABELS__INIT;
	a = a ? a : &none;
	b = b ? b : &none;
	return strcmp(s_or_e(a->container_id), s_or_e(b->container_id)) == 0 &&
	       strcmp(s_or_e(a->pod), s_or_e(b->pod)) == 0 &&
	       strcmp(s_or_e(a->namespace_), s_or_e(b->namespace_)) == 0 &&
	       strcmp(s_or_e(a->cgroup), s_or_e(b->cgroup)) == 0 &&
	       strcmp(s_or_e(a->process), s_or_e(b->process)) == 0 &&
	       strcmp(s_or_e(a->session_id), s_or_e(b->session_id)) == 0;
}

/* The batch's binaries that went into merged slice d. */
static bool in_slice(const Edgeprof__V1__BinaryDelta *in, const Edgeprof__V1__BinaryDelta *d)
{
	return strcmp(s_or_e(in->profile->build_id), s_or_e(d->profile->build_id)) == 0 &&
	       same_labels(in->labels, d->labels);
}

static bool same_edge(const Edgeprof__V1__Edge *a, const Edgeprof__V1__Edge *b)
{
	return a->from == b->from && a->to == b->to && !a->taken == !b->taken &&
	       !a->from_external == !b->from_external && !a->to_external == !b->to_external;
}

/* Each addend twice, saturating: what the merge must hold. */
static void add_twice(uint64_t *sum, uint64_t v)
{
	ep_add_sat(sum, v);
	ep_add_sat(sum, v);
}

static void check_sum(const char *what, uint64_t got, uint64_t want, uint64_t largest)
{
	if (got != want || got < largest)
		FAIL("merged %s %llu, expected %llu (largest addend %llu)", what,
		     (unsigned long long)got, (unsigned long long)want,
		     (unsigned long long)largest);
}

static void check_edges(const Edgeprof__V1__Batch *b, const Edgeprof__V1__BinaryProfile *out,
			const Edgeprof__V1__BinaryDelta *d)
{
	for (size_t k = 0; k < out->n_edges; k++) {
		const Edgeprof__V1__Edge *e = out->edges[k];
		uint64_t count = 0, mis = 0, top = 0, top_mis = 0;
		for (size_t i = 0; i < b->n_binaries; i++) {
			if (!in_slice(b->binaries[i], d))
				continue;
			const Edgeprof__V1__BinaryProfile *bp = b->binaries[i]->profile;
			for (size_t j = 0; j < bp->n_edges; j++) {
				if (!same_edge(bp->edges[j], e))
					continue;
				add_twice(&count, bp->edges[j]->count);
				add_twice(&mis, bp->edges[j]->mispredicted);
				top = bp->edges[j]->count > top ? bp->edges[j]->count : top;
				top_mis = bp->edges[j]->mispredicted > top_mis
					      ? bp->edges[j]->mispredicted
					      : top_mis;
			}
		}
		check_sum("edge count", e->count, count, top);
		check_sum("edge mispredicted", e->mispredicted, mis, top_mis);
	}
}

static void check_ranges_ips(const Edgeprof__V1__Batch *b, const Edgeprof__V1__BinaryProfile *out,
			     const Edgeprof__V1__BinaryDelta *d)
{
	for (size_t k = 0; k < out->n_ranges; k++) {
		const Edgeprof__V1__Range *r = out->ranges[k];
		uint64_t count = 0, top = 0;
		for (size_t i = 0; i < b->n_binaries; i++) {
			if (!in_slice(b->binaries[i], d))
				continue;
			const Edgeprof__V1__BinaryProfile *bp = b->binaries[i]->profile;
			for (size_t j = 0; j < bp->n_ranges; j++)
				if (bp->ranges[j]->start == r->start &&
				    bp->ranges[j]->end == r->end) {
					add_twice(&count, bp->ranges[j]->count);
					top =
					    bp->ranges[j]->count > top ? bp->ranges[j]->count : top;
				}
		}
		check_sum("range count", r->count, count, top);
	}
	for (size_t k = 0; k < out->n_ips; k++) {
		uint64_t count = 0, top = 0;
		for (size_t i = 0; i < b->n_binaries; i++) {
			if (!in_slice(b->binaries[i], d))
				continue;
			const Edgeprof__V1__BinaryProfile *bp = b->binaries[i]->profile;
			for (size_t j = 0; j < bp->n_ips; j++)
				if (bp->ips[j]->ip == out->ips[k]->ip) {
					add_twice(&count, bp->ips[j]->count);
					top = bp->ips[j]->count > top ? bp->ips[j]->count : top;
				}
		}
		check_sum("ip count", out->ips[k]->count, count, top);
	}
}

static void check_merged(const Edgeprof__V1__Batch *b, const struct ep_merged *m)
{
	for (size_t s = 0; s < m->n; s++) {
		const Edgeprof__V1__BinaryDelta *d = m->slices[s].delta;
		uint64_t samples = 0, top = 0;
		for (size_t i = 0; i < b->n_binaries; i++)
			if (in_slice(b->binaries[i], d)) {
				add_twice(&samples, b->binaries[i]->profile->samples);
				if (b->binaries[i]->profile->samples > top)
					top = b->binaries[i]->profile->samples;
			}
		check_sum("samples", d->profile->samples, samples, top);
		check_edges(b, d->profile, d);
		check_ranges_ips(b, d->profile, d);
	}
}

/* wire.h's bounds, restated here rather than taken from wire.c. */
static void check_bounds(const Edgeprof__V1__Batch *b)
{
	uint64_t s = 0;
	if (b->stats)
		s = b->stats->samples;
	else
		for (size_t i = 0; i < b->n_binaries; i++)
			s = b->binaries[i]->profile->samples > s ? b->binaries[i]->profile->samples
								 : s;
	uint32_t chop = b->config ? b->config->chop : 0;
	if (s > EP_WIRE_MAX_SAMPLES || chop > EP_WIRE_MAX_STACK)
		FAIL("accepted: samples %llu, chop %u", (unsigned long long)s, chop);
	uint64_t most = s * (chop ? chop : EP_WIRE_MAX_WHOLE_STACK);
	if (most > 65 * (1ULL << 51)) /* wire.h: the largest accepted count */
		FAIL("accepted: per-batch bound %llu over 65 x 2^51", (unsigned long long)most);
	for (size_t i = 0; i < b->n_binaries; i++) {
		const Edgeprof__V1__BinaryProfile *bp = b->binaries[i]->profile;
		if (bp->samples > s)
			FAIL("accepted: binaries[%zu] samples over the batch's", i);
		for (size_t j = 0; j < bp->n_edges; j++)
			if (bp->edges[j]->count > most ||
			    bp->edges[j]->mispredicted > bp->edges[j]->count)
				FAIL("accepted: binaries[%zu] edge %zu out of bounds", i, j);
		for (size_t j = 0; j < bp->n_ranges; j++)
			if (bp->ranges[j]->count > most)
				FAIL("accepted: binaries[%zu] range %zu out of bounds", i, j);
		for (size_t j = 0; j < bp->n_ips; j++)
			if (bp->ips[j]->count > s)
				FAIL("accepted: binaries[%zu] ip %zu out of bounds", i, j);
	}
}

static void merge_and_check(const Edgeprof__V1__Batch *b)
{
	/* the collector's bucket, from the window's end (0: no clock here) */
	int64_t bucket = (int64_t)(b->window_end_ns / 1000000000ULL);
	bucket -= bucket % 60;
	struct ep_merge *m = ep_merge_new();
	if (!m)
		return;
	int rc = 0;
	for (int round = 0; round < 2 && rc == 0; round++)
		for (size_t i = 0; i < b->n_binaries && rc == 0; i++)
			rc = ep_merge_add(m, bucket, b->binaries[i]->profile,
					  b->binaries[i]->labels);
	struct ep_merged out = {0};
	if (rc == 0 && ep_merge_build(m, &out) == 0) {
		check_merged(b, &out);
		ep_merged_free(&out);
	}
	ep_merge_free(m);
}

/* ep_wire_count of bytes that unpack to b: it read them, and counted what
 * b holds. */
static void check_counted(const Edgeprof__V1__Batch *b, int counted, const struct ep_wire_counts *c)
{
	if (counted != 0)
		abort();
	uint64_t edges = 0, ranges = 0, ips = 0, functions = 0;
	for (size_t i = 0; i < b->n_binaries; i++) {
		const Edgeprof__V1__BinaryProfile *p = b->binaries[i]->profile;
		edges += p ? p->n_edges : 0;
		ranges += p ? p->n_ranges : 0;
		ips += p ? p->n_ips : 0;
		functions += p ? p->n_functions : 0;
	}
	if (c->binaries != b->n_binaries || c->edges != edges || c->ranges != ranges ||
	    c->ips != ips || c->functions != functions)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[512];
	struct ep_wire_counts c, none = {0};
	int counted = ep_wire_count(data, size, &none, &c, err, sizeof(err));
	Edgeprof__V1__Batch *b =
	    ep_wire_decode(data, size, false, EP_WIRE_MAX_BATCH, err, sizeof(err));
	if (!b)
		return 0;
	/* what the collector counts before unpacking (its bounds) is what
	 * unpacking gives */
	check_counted(b, counted, &c);
	int bad = ep_wire_check_batch(b, err, sizeof(err));
	if (bad == 0)
		check_bounds(b);
	bool profiles = true; /* merge needs a profile in every binary */
	for (size_t i = 0; i < b->n_binaries; i++)
		profiles = profiles && b->binaries[i]->profile;
	if (profiles)
		merge_and_check(b);
	ep_wire_free(b);
	return 0;
}

#ifndef EP_FUZZ_WRITE_SEEDS
/* Byte mutations rarely turn a count into a 10-byte varint without breaking
 * the nested messages' lengths, so half the mutations decode the batch, set
 * one count (or config.chop) to a value at or past a bound or near 2^64,
 * and encode it again: overflow-class inputs, generated. */
size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

#define MAX_FIELDS 64

static uint64_t next_rand(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static size_t count_fields(Edgeprof__V1__Batch *b, uint64_t **f)
{
	size_t n = 0;
	if (b->stats)
		f[n++] = &b->stats->samples;
	for (size_t i = 0; i < b->n_binaries && n + 4 <= MAX_FIELDS; i++) {
		Edgeprof__V1__BinaryProfile *bp = b->binaries[i]->profile;
		if (!bp)
			continue;
		f[n++] = &bp->samples;
		for (size_t j = 0; j < bp->n_edges && n + 2 <= MAX_FIELDS; j++) {
			f[n++] = &bp->edges[j]->count;
			f[n++] = &bp->edges[j]->mispredicted;
		}
		for (size_t j = 0; j < bp->n_ranges && n < MAX_FIELDS; j++)
			f[n++] = &bp->ranges[j]->count;
		for (size_t j = 0; j < bp->n_ips && n < MAX_FIELDS; j++)
			f[n++] = &bp->ips[j]->count;
	}
	return n;
}

static uint64_t interesting(uint64_t old, uint64_t *x)
{
	static const uint64_t values[] = {
	    0,
	    1,
	    EP_WIRE_MAX_SAMPLES,
	    EP_WIRE_MAX_SAMPLES + 1,
	    EP_WIRE_MAX_SAMPLES * EP_WIRE_MAX_STACK,
	    EP_WIRE_MAX_SAMPLES * EP_WIRE_MAX_WHOLE_STACK,
	    EP_WIRE_MAX_SAMPLES * EP_WIRE_MAX_WHOLE_STACK + 1,
	    (1ULL << 63) - 1,
	    1ULL << 63,
	    UINT64_MAX - 1,
	    UINT64_MAX,
	};
	uint64_t r = next_rand(x);
	switch (r % 4) {
	case 0:
		return old * 2 + (r >> 8 & 1);
	case 1:
		return old + (r >> 8 & 1 ? 1 : -1);
	case 2:
		return r;
	default:
		return values[(r >> 8) % (sizeof(values) / sizeof(values[0]))];
	}
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;
	if (next_rand(&x) % 2)
		return LLVMFuzzerMutate(data, size, max_size);
	Edgeprof__V1__Batch *b = edgeprof__v1__batch__unpack(NULL, size, data);
	uint64_t *fields[MAX_FIELDS];
	size_t n = b ? count_fields(b, fields) : 0;
	if (n == 0) {
		ep_wire_free(b);
		return LLVMFuzzerMutate(data, size, max_size);
	}
	for (uint64_t k = 1 + next_rand(&x) % 2; k > 0; k--) {
		uint64_t *f = fields[next_rand(&x) % n];
		*f = interesting(*f, &x);
	}
	if (b->config && next_rand(&x) % 8 == 0)
		b->config->chop =
		    (uint32_t)(next_rand(&x) % 4 == 0 ? next_rand(&x) : next_rand(&x) % 70);
	size_t len = edgeprof__v1__batch__get_packed_size(b);
	if (len > max_size) {
		ep_wire_free(b);
		return LLVMFuzzerMutate(data, size, max_size);
	}
	edgeprof__v1__batch__pack(b, data);
	ep_wire_free(b);
	return len;
}

#else
/* Seeds: valid batches, one with counts at the bounds. */
static int write_seed(const char *dir, const char *name, const Edgeprof__V1__Batch *b)
{
	size_t len = edgeprof__v1__batch__get_packed_size(b);
	uint8_t *buf = malloc(len ? len : 1);
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = buf ? fopen(path, "wb") : NULL;
	int rc = -1;
	if (f) {
		edgeprof__v1__batch__pack(b, buf);
		rc = fwrite(buf, 1, len, f) == len ? 0 : -1;
		rc |= fclose(f);
	}
	free(buf);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	Edgeprof__V1__AgentIdentity agent = EDGEPROF__V1__AGENT_IDENTITY__INIT;
	agent.node = "node-1";
	agent.agent_id = "agent-1";
	agent.version = "seed";
	Edgeprof__V1__SamplingConfig config = EDGEPROF__V1__SAMPLING_CONFIG__INIT;
	config.chop = 32;
	Edgeprof__V1__Stats stats = EDGEPROF__V1__STATS__INIT;
	stats.samples = 1000;
	Edgeprof__V1__Edge e1 = EDGEPROF__V1__EDGE__INIT, e2 = EDGEPROF__V1__EDGE__INIT;
	e1.from = 0x401000, e1.to = 0x401020, e1.taken = true, e1.count = 700, e1.mispredicted = 3;
	e2.from = 0x401004, e2.to = 0x401008, e2.count = 300;
	Edgeprof__V1__Edge *edges[] = {&e1, &e2, &e1};
	Edgeprof__V1__Range r1 = EDGEPROF__V1__RANGE__INIT;
	r1.start = 0x401020, r1.end = 0x401040, r1.count = 690;
	Edgeprof__V1__Range *ranges[] = {&r1};
	Edgeprof__V1__IpCount ip1 = EDGEPROF__V1__IP_COUNT__INIT;
	ip1.ip = 0x401030, ip1.count = 10;
	Edgeprof__V1__IpCount *ips[] = {&ip1};
	char *paths[] = {"/usr/bin/app"};
	Edgeprof__V1__BinaryProfile p1 = EDGEPROF__V1__BINARY_PROFILE__INIT;
	p1.build_id = "0123456789abcdef0123456789abcdef01234567";
	p1.paths = paths, p1.n_paths = 1, p1.arch = "x86_64", p1.samples = 1000;
	p1.edges = edges, p1.n_edges = 3, p1.ranges = ranges, p1.n_ranges = 1;
	p1.ips = ips, p1.n_ips = 1;
	Edgeprof__V1__Labels l1 = EDGEPROF__V1__LABELS__INIT, l2 = EDGEPROF__V1__LABELS__INIT;
	l1.container_id = "c0ffee", l1.pod = "app-1", l1.namespace_ = "default";
	l1.cgroup = "/kubepods/c0ffee", l1.process = "app";
	l2.process = "app";
	Edgeprof__V1__BinaryDelta d1 = EDGEPROF__V1__BINARY_DELTA__INIT;
	Edgeprof__V1__BinaryDelta d2 = EDGEPROF__V1__BINARY_DELTA__INIT;
	d1.profile = &p1, d1.labels = &l1;
	d2.profile = &p1, d2.labels = &l2;
	Edgeprof__V1__BinaryDelta *deltas[] = {&d1, &d2, &d1};
	Edgeprof__V1__Batch b = EDGEPROF__V1__BATCH__INIT;
	b.wire_version = 1, b.agent = &agent, b.sequence = 7;
	b.window_start_ns = 1700000000000000000ULL, b.window_end_ns = 1700000010000000000ULL;
	b.config = &config, b.stats = &stats;
	b.binaries = deltas, b.n_binaries = 3;
	int rc = 0;
	/* two label sets, one repeated */
	rc |= write_seed(argv[1], "batch_two_labels", &b);
	/* one binary, no stats, no config: whole stacks */
	b.stats = NULL, b.config = NULL, b.n_binaries = 1;
	rc |= write_seed(argv[1], "batch_whole_stack", &b);
	/* at the bounds: 2^32 samples, chop 64, an edge of 2^38 */
	stats.samples = EP_WIRE_MAX_SAMPLES, b.stats = &stats;
	config.chop = EP_WIRE_MAX_STACK, b.config = &config;
	p1.samples = EP_WIRE_MAX_SAMPLES;
	e1.count = EP_WIRE_MAX_SAMPLES * EP_WIRE_MAX_STACK, e1.mispredicted = e1.count;
	r1.count = e1.count, ip1.count = EP_WIRE_MAX_SAMPLES;
	rc |= write_seed(argv[1], "batch_at_bounds", &b);
	/* refused (counts past every bound) but merged: sums saturate */
	stats.samples = UINT64_MAX - 1, p1.samples = UINT64_MAX - 1;
	e1.count = UINT64_MAX / 2 + 1, e1.mispredicted = 1, r1.count = UINT64_MAX;
	ip1.count = UINT64_MAX - 100, b.n_binaries = 3;
	rc |= write_seed(argv[1], "batch_refused_huge", &b);
	return rc ? 1 : 0;
}
#endif
