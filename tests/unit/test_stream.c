/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The stream stage's parts: deltas (a recording cut into batches sums to the
 * whole import exactly), the merge the collector pre-aggregates with, the
 * wire encoding and its limits, and the spool's bound and durability.
 */
#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_util.h"

#include "agent/pipeline/pipeline.h"
#include "agent/resolve/binary.h"
#include "agent/source/perf_data/perf_data_feed.h"
#include "agent/stream/spool.h"
#include "common/profile/merge.h"
#include "common/profile/profile_file.h"
#include "common/util/collector_list.h"
#include "common/util/u64map.h"
#include "common/wire/wire.h"

struct cut_ctx {
	struct ep_pipeline *pipeline;
	struct ep_merge *merge;
	Edgeprof__V1__Stats stats;
	unsigned samples, every, deltas;
};

static void take_delta(struct cut_ctx *c)
{
	Edgeprof__V1__Profile *d = ep_pipeline_take_delta(c->pipeline);
	assert_non_null(d);
	for (size_t i = 0; i < d->n_binaries; i++)
		assert_int_equal(ep_merge_add(c->merge, 0, d->binaries[i], NULL), 0);
	ep_stats_add(&c->stats, d->stats);
	c->deltas++;
	ep_profile_free(d);
}

static void after_sample(void *ctx)
{
	struct cut_ctx *c = ctx;
	if (++c->samples % c->every == 0)
		take_delta(c);
}

static Edgeprof__V1__Profile *import(struct cut_ctx *cut)
{
	struct ep_binary_registry *reg = ep_binreg_new();
	char err[512];
	assert_int_equal(
	    ep_binreg_add_file(reg, ep_test_fixture("propeller_sample_1.bin"), err, sizeof(err)),
	    0);
	struct ep_pipeline_config cfg;
	ep_pipeline_config_default(&cfg);
	struct ep_pipeline *p = ep_pipeline_new(&cfg, reg);
	struct ep_perf_data_feed_info info;
	Edgeprof__V1__Profile *whole = NULL;
	if (cut) {
		cut->pipeline = p;
		assert_int_equal(
		    ep_feed_perf_data_hooked(ep_test_fixture("propeller_sample_1.perfdata1"), p,
					     &info, after_sample, cut, err, sizeof(err)),
		    0);
		take_delta(cut);
	} else {
		assert_int_equal(ep_feed_perf_data(ep_test_fixture("propeller_sample_1.perfdata1"),
						   p, &info, err, sizeof(err)),
				 0);
		whole = ep_pipeline_profile(p);
	}
	ep_pipeline_free(p);
	ep_binreg_free(reg);
	return whole;
}

/* Cut every 97 samples (not a divisor of anything in the file), the deltas
 * merged back give the whole import edge for edge, range for range. */
static void test_deltas_sum_to_the_whole(void **state)
{
	(void)state;
	Edgeprof__V1__Profile *whole = import(NULL);
	struct cut_ctx cut = {.merge = ep_merge_new(), .every = 97};
	edgeprof__v1__stats__init(&cut.stats);
	import(&cut);
	assert_true(cut.deltas > 30);

	struct ep_merged merged;
	assert_int_equal(ep_merge_build(cut.merge, &merged), 0);
	assert_int_equal(merged.n, whole->n_binaries);
	assert_true(whole->n_binaries >= 1);
	uint64_t edges_compared = 0;
	for (size_t b = 0; b < whole->n_binaries; b++) {
		const Edgeprof__V1__BinaryProfile *w = whole->binaries[b];
		const Edgeprof__V1__BinaryProfile *m = NULL;
		for (size_t i = 0; i < merged.n; i++)
			if (strcmp(merged.slices[i].delta->profile->build_id, w->build_id) == 0)
				m = merged.slices[i].delta->profile;
		assert_non_null(m);
		assert_int_equal(m->samples, w->samples);
		assert_int_equal(m->n_edges, w->n_edges);
		for (size_t i = 0; i < w->n_edges; i++) {
			assert_int_equal(m->edges[i]->from, w->edges[i]->from);
			assert_int_equal(m->edges[i]->to, w->edges[i]->to);
			assert_int_equal(m->edges[i]->taken, w->edges[i]->taken);
			assert_int_equal(m->edges[i]->count, w->edges[i]->count);
			assert_int_equal(m->edges[i]->mispredicted, w->edges[i]->mispredicted);
			assert_int_equal(m->edges[i]->kind, w->edges[i]->kind);
			edges_compared++;
		}
		assert_int_equal(m->n_ranges, w->n_ranges);
		for (size_t i = 0; i < w->n_ranges; i++) {
			assert_int_equal(m->ranges[i]->start, w->ranges[i]->start);
			assert_int_equal(m->ranges[i]->end, w->ranges[i]->end);
			assert_int_equal(m->ranges[i]->count, w->ranges[i]->count);
		}
		assert_int_equal(m->n_ips, w->n_ips);
		for (size_t i = 0; i < w->n_ips; i++)
			assert_int_equal(m->ips[i]->count, w->ips[i]->count);
		assert_int_equal(m->n_functions, w->n_functions);
	}
	assert_true(edges_compared >= 10);
	assert_int_equal(cut.stats.samples, whole->stats->samples);
	assert_int_equal(cut.stats.gaps, whole->stats->gaps);
	assert_int_equal(cut.stats.branches_counted, whole->stats->branches_counted);
	ep_merged_free(&merged);
	ep_merge_free(cut.merge);
	ep_profile_free(whole);
}

static Edgeprof__V1__BinaryProfile *one_binary(const char *build_id, uint64_t from, uint64_t count)
{
	static Edgeprof__V1__Edge e[2];
	static Edgeprof__V1__Edge *ep[2];
	static Edgeprof__V1__BinaryProfile bp;
	edgeprof__v1__binary_profile__init(&bp);
	for (int i = 0; i < 2; i++) {
		edgeprof__v1__edge__init(&e[i]);
		ep[i] = &e[i];
	}
	e[0].from = from;
	e[0].to = from + 0x10;
	e[0].taken = true;
	e[0].count = count;
	e[1].from = from; /* same addresses, not taken: another key */
	e[1].to = from + 0x10;
	e[1].count = 1;
	bp.build_id = (char *)build_id;
	bp.edges = ep;
	bp.n_edges = 2;
	bp.samples = 1;
	return &bp;
}

static void test_merge_keeps_buckets_binaries_and_labels_apart(void **state)
{
	(void)state;
	struct ep_merge *m = ep_merge_new();
	Edgeprof__V1__Labels pod_a = EDGEPROF__V1__LABELS__INIT, pod_b = pod_a;
	pod_a.pod = "a";
	pod_b.pod = "b";
	assert_int_equal(ep_merge_add(m, 60, one_binary("aa", 0x1000, 5), &pod_a), 0);
	assert_int_equal(ep_merge_add(m, 60, one_binary("aa", 0x1000, 7), &pod_a), 0);
	assert_int_equal(ep_merge_add(m, 60, one_binary("aa", 0x1000, 11), &pod_b), 0);
	assert_int_equal(ep_merge_add(m, 120, one_binary("aa", 0x1000, 13), &pod_a), 0);
	assert_int_equal(ep_merge_add(m, 60, one_binary("bb", 0x1000, 17), NULL), 0);
	assert_int_equal(ep_merge_slices(m), 4);
	assert_int_equal(ep_merge_rows(m), 8);
	struct ep_merged out;
	assert_int_equal(ep_merge_build(m, &out), 0);
	assert_int_equal(out.n, 4);
	/* sorted by bucket, build-id, labels */
	assert_int_equal(out.slices[0].bucket, 60);
	assert_string_equal(out.slices[0].delta->profile->build_id, "aa");
	assert_string_equal(out.slices[0].delta->labels->pod, "a");
	const Edgeprof__V1__BinaryProfile *a = out.slices[0].delta->profile;
	assert_int_equal(a->n_edges, 2);
	assert_false(a->edges[0]->taken); /* not-taken sorts first at equal addresses */
	assert_int_equal(a->edges[0]->count, 2);
	assert_int_equal(a->edges[1]->count, 12);
	assert_int_equal(a->samples, 2);
	assert_string_equal(out.slices[1].delta->labels->pod, "b");
	assert_int_equal(out.slices[1].delta->profile->edges[1]->count, 11);
	assert_string_equal(out.slices[2].delta->profile->build_id, "bb");
	assert_int_equal(out.slices[2].delta->profile->edges[1]->count, 17);
	assert_int_equal(out.slices[3].bucket, 120);
	assert_int_equal(out.slices[3].delta->profile->edges[1]->count, 13);
	ep_merged_free(&out);
	ep_merge_clear(m);
	assert_int_equal(ep_merge_slices(m), 0);
	assert_int_equal(ep_merge_rows(m), 0);
	ep_merge_free(m);
}

/* Session counts are sampled at their own rate: a delta that differs from
 * another only by session_id must stay a slice of its own. */
static void test_merge_keeps_sessions_apart(void **state)
{
	(void)state;
	struct ep_merge *m = ep_merge_new();
	Edgeprof__V1__Labels cont = EDGEPROF__V1__LABELS__INIT, sess = cont, empty = cont;
	cont.container_id = sess.container_id = "c1";
	sess.session_id = "s-1";
	empty.session_id = ""; /* "" is the continuous profile, like NULL labels */
	assert_int_equal(ep_merge_add(m, 60, one_binary("aa", 0x1000, 5), &cont), 0);
	assert_int_equal(ep_merge_add(m, 60, one_binary("aa", 0x1000, 7), &sess), 0);
	assert_int_equal(ep_merge_add(m, 60, one_binary("aa", 0x1000, 11), &sess), 0);
	assert_int_equal(ep_merge_add(m, 60, one_binary("aa", 0x1000, 13), &empty), 0);
	assert_int_equal(ep_merge_add(m, 60, one_binary("aa", 0x1000, 17), NULL), 0);
	assert_int_equal(ep_merge_slices(m), 3);
	struct ep_merged out;
	assert_int_equal(ep_merge_build(m, &out), 0);
	assert_int_equal(out.n, 3);
	/* labels sort by container before session: "", then c1/"", then c1/s-1 */
	assert_string_equal(out.slices[0].delta->labels->session_id, "");
	assert_int_equal(out.slices[0].delta->profile->edges[1]->count, 30);
	assert_string_equal(out.slices[1].delta->labels->container_id, "c1");
	assert_string_equal(out.slices[1].delta->labels->session_id, "");
	assert_int_equal(out.slices[1].delta->profile->edges[1]->count, 5);
	assert_string_equal(out.slices[2].delta->labels->container_id, "c1");
	assert_string_equal(out.slices[2].delta->labels->session_id, "s-1");
	assert_int_equal(out.slices[2].delta->profile->edges[1]->count, 18);
	ep_merged_free(&out);
	ep_merge_free(m);
}

static void test_wire_round_trip_and_limits(void **state)
{
	(void)state;
	Edgeprof__V1__AgentIdentity agent = EDGEPROF__V1__AGENT_IDENTITY__INIT;
	agent.agent_id = "agent-1";
	Edgeprof__V1__BinaryDelta d = EDGEPROF__V1__BINARY_DELTA__INIT;
	d.profile = one_binary("cafe", 0xffffffff81000000ULL, 42);
	Edgeprof__V1__BinaryDelta *dp = &d;
	Edgeprof__V1__Batch b = EDGEPROF__V1__BATCH__INIT;
	b.wire_version = EP_WIRE_VERSION;
	b.agent = &agent;
	b.sequence = 7;
	b.binaries = &dp;
	b.n_binaries = 1;
	uint8_t *bytes;
	size_t len;
	assert_int_equal(ep_wire_encode(&b, &bytes, &len), 0);
	char err[256];
	Edgeprof__V1__Batch *back = ep_wire_decode(bytes, len, true, 1 << 20, err, sizeof(err));
	assert_non_null(back);
	assert_int_equal(back->sequence, 7);
	assert_string_equal(back->agent->agent_id, "agent-1");
	assert_int_equal(back->binaries[0]->profile->edges[0]->from, 0xffffffff81000000ULL);
	assert_int_equal(back->binaries[0]->profile->edges[0]->count, 42);
	ep_wire_free(back);

	/* truncated zstd frame */
	assert_null(ep_wire_decode(bytes, len / 2, true, 1 << 20, err, sizeof(err)));
	assert_non_null(strstr(err, "truncated"));
	/* not zstd at all */
	assert_null(
	    ep_wire_decode((const uint8_t *)"garbage!", 8, true, 1 << 20, err, sizeof(err)));
	assert_non_null(strstr(err, "zstd"));
	/* a decompression bomb is stopped at the limit, not after */
	assert_null(ep_wire_decode(bytes, len, true, 8, err, sizeof(err)));
	assert_non_null(strstr(err, "decompressed"));
	free(bytes);
	/* plain protobuf that is not a Batch */
	const uint8_t junk[] = {0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f};
	assert_null(ep_wire_decode(junk, sizeof(junk), false, 1 << 20, err, sizeof(err)));
	assert_non_null(strstr(err, "not an edgeprof.v1.Batch"));
}

static char *make_dir(void)
{
	char tmpl[] = "/tmp/edgeprof-spool-XXXXXX";
	char *d = mkdtemp(tmpl);
	assert_non_null(d);
	return strdup(d);
}

static void remove_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		char p[4096];
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		unlink(p);
	}
	if (d)
		closedir(d);
	rmdir(dir);
}

static void test_spool_order_bound_and_restart(void **state)
{
	(void)state;
	char *dir = make_dir();
	char err[512];
	struct ep_spool *s = ep_spool_open(dir, 3000, err, sizeof(err));
	assert_non_null(s);
	uint8_t buf[1000];
	for (int i = 0; i < 5; i++) {
		memset(buf, 'a' + i, sizeof(buf));
		assert_int_equal(ep_spool_put(s, buf, sizeof(buf), err, sizeof(err)), 0);
	}
	struct ep_spool_counters c;
	ep_spool_counters(s, &c);
	/* 5 x 1000 bytes into 3000: the two oldest went */
	assert_int_equal(c.files, 3);
	assert_int_equal(c.bytes, 3000);
	assert_int_equal(c.dropped_files, 2);
	uint64_t id;
	uint8_t *data;
	size_t len;
	assert_int_equal(ep_spool_peek(s, &id, &data, &len, err, sizeof(err)), 1);
	assert_int_equal(len, 1000);
	assert_int_equal(data[0], 'c');
	free(data);
	ep_spool_remove(s, id);
	ep_spool_close(s);

	/* a crash mid-put leaves a .tmp: never acknowledged, so removed */
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s/00000000000000000099.batch.tmp", dir);
	FILE *f = fopen(tmp, "w");
	fputs("half", f);
	fclose(f);
	s = ep_spool_open(dir, 3000, err, sizeof(err));
	assert_non_null(s);
	ep_spool_counters(s, &c);
	assert_int_equal(c.files, 2);
	assert_int_not_equal(access(tmp, F_OK), 0);
	assert_int_equal(ep_spool_peek(s, &id, &data, &len, err, sizeof(err)), 1);
	assert_int_equal(data[0], 'd');
	free(data);
	ep_spool_remove(s, id);
	/* new batches number after the old ones: order survives restarts */
	memset(buf, 'z', sizeof(buf));
	assert_int_equal(ep_spool_put(s, buf, 10, err, sizeof(err)), 0);
	assert_int_equal(ep_spool_peek(s, &id, &data, &len, err, sizeof(err)), 1);
	assert_int_equal(data[0], 'e');
	free(data);
	ep_spool_remove(s, id);
	assert_int_equal(ep_spool_peek(s, &id, &data, &len, err, sizeof(err)), 1);
	assert_int_equal(data[0], 'z');
	free(data);
	ep_spool_remove(s, id);
	assert_int_equal(ep_spool_peek(s, &id, &data, &len, err, sizeof(err)), 0);
	ep_spool_close(s);
	remove_dir(dir);
	free(dir);
}

/* Writes n bytes of c to DIR/NAME. */
static void spit_file(const char *dir, const char *name, int c, size_t n)
{
	char p[4096];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	for (size_t i = 0; i < n; i++)
		fputc(c, f);
	fclose(f);
}

/* What the spool reads back is input too (a damaged disk, or files put
 * there): only regular files of 1 to min(max_bytes, EP_SPOOL_BATCH_MAX)
 * bytes are taken, none is waited on, at most one file per
 * EP_SPOOL_BYTES_PER_FILE bytes is indexed, and no batch over the bound is
 * written. Before, a FIFO there blocked the sender for ever, a sparse 1 GiB
 * file was read into 1 GiB of memory, and 5,000 tiny files were all kept. */
static void test_spool_bounds_what_it_reads_back(void **state)
{
	(void)state;
	char *dir = make_dir();
	char err[512], p[4096];
	spit_file(dir, "00000000000000000001.batch", 'a', 100);
	snprintf(p, sizeof(p), "%s/00000000000000000002.batch", dir);
	assert_int_equal(mkfifo(p, 0600), 0);
	snprintf(p, sizeof(p), "%s/00000000000000000003.batch", dir);
	assert_int_equal(symlink("00000000000000000001.batch", p), 0);
	spit_file(dir, "00000000000000000004.batch", 'x', 0);
	snprintf(p, sizeof(p), "%s/00000000000000000005.batch", dir);
	int fd = open(p, O_WRONLY | O_CREAT, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 1LL << 30), 0); /* sparse: no disk */
	close(fd);
	spit_file(dir, "00000000000000000006.batch", 'b', 200);
	struct ep_spool *s = ep_spool_open(dir, 1 << 20, err, sizeof(err));
	assert_non_null(s);
	struct ep_spool_counters c;
	ep_spool_counters(s, &c);
	assert_int_equal(c.files, 2);
	assert_int_equal(c.bytes, 300);
	assert_int_equal(c.refused_files, 4);
	assert_int_not_equal(access(p, F_OK), 0); /* removed, not left to the next agent */
	uint64_t id;
	uint8_t *data;
	size_t len;
	assert_int_equal(ep_spool_peek(s, &id, &data, &len, err, sizeof(err)), 1);
	assert_int_equal(id, 1);
	assert_int_equal(len, 100);
	free(data);
	ep_spool_remove(s, id);
	/* changed since it was listed: refused, not read at its new size */
	snprintf(p, sizeof(p), "%s/00000000000000000006.batch", dir);
	assert_int_equal(truncate(p, 1LL << 30), 0);
	assert_int_equal(ep_spool_peek(s, &id, &data, &len, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "1073741824 bytes, where 200 were written"));
	ep_spool_counters(s, &c);
	assert_int_equal(c.refused_files, 5);
	assert_int_equal(c.files, 0);
	/* a batch over the bound (here the whole spool's) is not written */
	uint8_t *big = calloc(1, (1 << 20) + 1);
	assert_non_null(big);
	assert_int_equal(ep_spool_put(s, big, (1 << 20) + 1, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "a batch of 1048577 bytes is over the 1048576 bytes"));
	free(big);
	ep_spool_close(s);

	/* 5,000 tiny files in a 1 MiB spool: the newest 2,048 are kept */
	for (int i = 1; i <= 5000; i++) {
		char name[64];
		snprintf(name, sizeof(name), "%020d.batch", i);
		spit_file(dir, name, 'c', 10);
	}
	s = ep_spool_open(dir, 1 << 20, err, sizeof(err));
	assert_non_null(s);
	ep_spool_counters(s, &c);
	assert_int_equal(c.files, (1 << 20) / EP_SPOOL_BYTES_PER_FILE);
	assert_int_equal(c.dropped_files, 5000 - c.files);
	assert_int_equal(ep_spool_peek(s, &id, &data, &len, err, sizeof(err)), 1);
	assert_int_equal(id, 5000 - c.files + 1);
	free(data);
	ep_spool_close(s);
	remove_dir(dir);
	free(dir);
}

static void test_spool_errors_name_the_directory(void **state)
{
	(void)state;
	char err[512];
	assert_null(ep_spool_open("/proc/edgeprof-no/spool", 1000, err, sizeof(err)));
	assert_non_null(strstr(err, "/proc/edgeprof-no/spool"));
}

/* Several collectors: the URLs as given (a trailing '/' dropped, one
 * listed twice kept once), --collector repeated joins them, a failure
 * moves to the next (wrapping), a second thread's report of the same
 * failure does not skip one, and the first is used again after the
 * failback time. */
static void test_collector_list_fails_over_and_back(void **state)
{
	(void)state;
	char err[512];
	const char *joined = NULL;
	struct ep_collector_arg arg = {.out = &joined};
	assert_int_equal(ep_collector_arg_add(&arg, "http://a:1/,https://b:2", err, sizeof(err)),
			 0);
	assert_int_equal(ep_collector_arg_add(&arg, "http://c:3", err, sizeof(err)), 0);
	assert_int_equal(ep_collector_arg_add(&arg, "http://a:1", err, sizeof(err)), 0);
	assert_string_equal(joined, "http://a:1/,https://b:2,http://c:3,http://a:1");
	struct ep_collector_list *l = ep_collector_list_parse(joined, err, sizeof(err));
	assert_non_null(l);
	assert_int_equal(ep_collector_list_count(l), 3);
	assert_string_equal(ep_collector_list_url(l, 0), "http://a:1");
	assert_string_equal(ep_collector_list_url(l, 1), "https://b:2");
	assert_string_equal(ep_collector_list_url(l, 2), "http://c:3");
	assert_int_equal(ep_collector_list_pick(l), 0);
	assert_int_equal(ep_collector_list_failed(l, 0), 1);
	/* the uploader saw the same failure of 0 a moment later */
	assert_int_equal(ep_collector_list_failed(l, 0), 1);
	assert_int_equal(ep_collector_list_pick(l), 1);
	assert_int_equal(ep_collector_list_failed(l, 1), 2);
	assert_int_equal(ep_collector_list_failed(l, 2), 0);
	assert_int_equal(ep_collector_list_failed(l, 0), 1);
	/* within the failback time the one in use stays; after it, the first */
	assert_int_equal(ep_collector_list_pick(l), 1);
	ep_collector_list_set_failback_ns(l, 0);
	assert_int_equal(ep_collector_list_pick(l), 0);
	ep_collector_list_free(l);
	assert_null(ep_collector_list_parse("http://a:1,ftp://b", err, sizeof(err)));
	assert_string_equal(err, "--collector 'ftp://b': expected http://HOST:PORT or https://...");
	assert_null(ep_collector_list_parse("http://a:1,", err, sizeof(err)));
	assert_null(ep_collector_list_parse("", err, sizeof(err)));
}

/* A fleet given one list spreads over it: each node's home replica picked
 * from its name, failed over from and returned to like the first. */
static void test_collector_list_homes_spread(void **state)
{
	(void)state;
	char err[512];
	struct ep_collector_list *l =
	    ep_collector_list_parse("http://a:1,http://b:2,http://c:3", err, sizeof(err));
	assert_non_null(l);
	ep_collector_list_set_home(l, 7); /* 7 % 3 */
	assert_int_equal(ep_collector_list_home(l), 1);
	assert_int_equal(ep_collector_list_pick(l), 1);
	assert_int_equal(ep_collector_list_failed(l, 1), 2);
	assert_int_equal(ep_collector_list_pick(l), 2);
	ep_collector_list_set_failback_ns(l, 0);
	assert_int_equal(ep_collector_list_pick(l), 1);
	/* 300 nodes named as a DaemonSet's are: each replica home to a third,
	 * give or take (a binomial's sd is ~8 here) */
	unsigned homes[3] = {0};
	for (int i = 0; i < 300; i++) {
		char node[32];
		snprintf(node, sizeof(node), "ip-10-0-%d-%d.ec2.internal", i / 50, i % 50 + 10);
		ep_collector_list_set_home(l, ep_hash_bytes(node, strlen(node)));
		homes[ep_collector_list_home(l)]++;
	}
	for (int k = 0; k < 3; k++)
		assert_in_range(homes[k], 70, 130);
	ep_collector_list_free(l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_deltas_sum_to_the_whole),
	    cmocka_unit_test(test_merge_keeps_buckets_binaries_and_labels_apart),
	    cmocka_unit_test(test_merge_keeps_sessions_apart),
	    cmocka_unit_test(test_wire_round_trip_and_limits),
	    cmocka_unit_test(test_spool_order_bound_and_restart),
	    cmocka_unit_test(test_spool_errors_name_the_directory),
	    cmocka_unit_test(test_spool_bounds_what_it_reads_back),
	    cmocka_unit_test(test_collector_list_fails_over_and_back),
	    cmocka_unit_test(test_collector_list_homes_spread),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
