/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The storage suite every backend passes. The backend comes from
 * $EDGEPROF_TEST_STORE (clickhouse:http://127.0.0.1:PORT: each test gets
 * its own database); unset, a fresh SQLite file. Counts are hand-computed.
 */
#include <curl/curl.h>
#include <dirent.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "test_util.h"

#include "collector/api/api.h"
#include "collector/store/store.h"
#include "common/profile/profile_file.h"

static char tmpdir[64];
static int test_number;

/* A spec for a fresh, empty store (the same one again with reopen). */
static const char *store_spec(bool fresh)
{
	static char spec[512];
	const char *env = getenv("EDGEPROF_TEST_STORE");
	if (fresh)
		test_number++;
	if (env && strncmp(env, "clickhouse:", 11) == 0) {
		char db[64];
		snprintf(db, sizeof(db), "edgeprof_test_%d_%d", (int)getpid(), test_number);
		ep_test_clickhouse_spec(spec, sizeof(spec), env, db);
	} else
		snprintf(spec, sizeof(spec), "sqlite:%s/store%d.db", tmpdir, test_number);
	return spec;
}

static bool is_sqlite(void)
{
	const char *env = getenv("EDGEPROF_TEST_STORE");
	return !env || strncmp(env, "sqlite:", 7) == 0;
}

static int setup(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/edgeprof-store-XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	DIR *d = opendir(tmpdir);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		char p[512];
		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", tmpdir, de->d_name);
		unlink(p);
	}
	if (d)
		closedir(d);
	rmdir(tmpdir);
	return 0;
}

/* One slice's worth of counts, built on the stack. */
struct slice_data {
	Edgeprof__V1__BinaryDelta delta;
	Edgeprof__V1__BinaryProfile bp;
	Edgeprof__V1__Labels labels;
	Edgeprof__V1__Edge edges[3], *edge_ptrs[3];
	Edgeprof__V1__Range range, *range_ptr;
	Edgeprof__V1__IpCount ip, *ip_ptr;
	Edgeprof__V1__Function fn, *fn_ptr;
	Edgeprof__V1__LoadSegment seg, *seg_ptr;
	char *paths[1];
};

/* Edges: a taken conditional, its not-taken side, and an edge arriving from
 * another binary into a kernel-half address (>= 2^63), scaled by k. */
static void make_slice(struct slice_data *d, const char *build_id, const char *path,
		       const char *pod, uint64_t k)
{
	memset(d, 0, sizeof(*d));
	edgeprof__v1__binary_delta__init(&d->delta);
	edgeprof__v1__binary_profile__init(&d->bp);
	edgeprof__v1__labels__init(&d->labels);
	d->labels.pod = (char *)pod;
	d->delta.profile = &d->bp;
	d->delta.labels = &d->labels;
	d->bp.build_id = (char *)build_id;
	d->bp.arch = "x86_64";
	d->paths[0] = (char *)path;
	d->bp.paths = d->paths;
	d->bp.n_paths = 1;
	d->bp.samples = 10 * k;
	for (int i = 0; i < 3; i++) {
		edgeprof__v1__edge__init(&d->edges[i]);
		d->edge_ptrs[i] = &d->edges[i];
	}
	d->edges[0] = (Edgeprof__V1__Edge)EDGEPROF__V1__EDGE__INIT;
	d->edges[0].from = 0x1000;
	d->edges[0].to = 0x1040;
	d->edges[0].taken = true;
	d->edges[0].count = 100 * k;
	d->edges[0].mispredicted = k;
	d->edges[0].kind = EDGEPROF__V1__BRANCH_KIND__BRANCH_CONDITIONAL;
	d->edges[1] = (Edgeprof__V1__Edge)EDGEPROF__V1__EDGE__INIT;
	d->edges[1].from = 0x1000;
	d->edges[1].to = 0x1006;
	d->edges[1].count = 7 * k;
	d->edges[1].kind = EDGEPROF__V1__BRANCH_KIND__BRANCH_CONDITIONAL;
	d->edges[2] = (Edgeprof__V1__Edge)EDGEPROF__V1__EDGE__INIT;
	d->edges[2].from_external = true;
	d->edges[2].to = 0xffffffff81000000ULL;
	d->edges[2].taken = true;
	d->edges[2].count = 3 * k;
	d->bp.edges = d->edge_ptrs;
	d->bp.n_edges = 3;
	edgeprof__v1__range__init(&d->range);
	d->range.start = 0x1040;
	d->range.end = 0x1060;
	d->range.count = 50 * k;
	d->range.cycles = 70 * k;
	d->range.cycled_instructions = 90 * k;
	d->range_ptr = &d->range;
	d->bp.ranges = &d->range_ptr;
	d->bp.n_ranges = 1;
	edgeprof__v1__ip_count__init(&d->ip);
	d->ip.ip = 0x1044;
	d->ip.count = 2 * k;
	d->ip_ptr = &d->ip;
	d->bp.ips = &d->ip_ptr;
	d->bp.n_ips = 1;
	edgeprof__v1__function__init(&d->fn);
	d->fn.name = "hot_loop";
	d->fn.start = 0x1000;
	d->fn.size = 0x80;
	d->fn.local_index = 2; /* a static function, BOLT's hot_loop/2 */
	d->fn_ptr = &d->fn;
	d->bp.functions = &d->fn_ptr;
	d->bp.n_functions = 1;
	edgeprof__v1__load_segment__init(&d->seg);
	d->seg.vaddr = 0x1000;
	d->seg.offset = 0x1000;
	d->seg.size = 0x2000;
	d->seg_ptr = &d->seg;
	d->bp.segments = &d->seg_ptr;
	d->bp.n_segments = 1;
}

/* ns: the slice's cycles are cpu-clock nanoseconds (ep_store_slice) */
static void write_unit(struct ep_store *s, const char *agent, uint64_t seq, int64_t bucket,
		       struct slice_data *d, bool ns)
{
	struct ep_store_batch_id id = {agent, seq, "node-1", 1700000000};
	struct ep_store_slice sl = {bucket, &d->delta, 0, ns};
	struct ep_store_commit c = {&id, 1, &sl, 1};
	char err[512];
	assert_int_equal(ep_store_write(s, &c, err, sizeof(err)), 0);
}

static void write_one(struct ep_store *s, const char *agent, uint64_t seq, int64_t bucket,
		      struct slice_data *d)
{
	write_unit(s, agent, seq, bucket, d, false);
}

static struct ep_store *open_store(bool fresh)
{
	char err[512];
	struct ep_store *s = ep_store_open(store_spec(fresh), err, sizeof(err));
	if (!s)
		fail_msg("%s", err);
	return s;
}

static const Edgeprof__V1__Edge *find_edge(const Edgeprof__V1__BinaryProfile *bp, uint64_t from,
					   uint64_t to, bool taken)
{
	for (size_t i = 0; i < bp->n_edges; i++)
		if (bp->edges[i]->from == from && bp->edges[i]->to == to &&
		    bp->edges[i]->taken == taken)
			return bp->edges[i];
	return NULL;
}

static void test_counts_add_up_over_buckets_and_labels(void **state)
{
	(void)state;
	struct ep_store *s = open_store(true);
	struct slice_data a, b, c;
	make_slice(&a, "aa01", "/bin/a", "pod-1", 1);
	make_slice(&b, "aa01", "/bin/a", "pod-2", 2);
	make_slice(&c, "aa01", "/usr/bin/a", "pod-1", 4);
	write_one(s, "agent-1", 1, 60, &a);
	write_one(s, "agent-2", 1, 60, &b);
	write_one(s, "agent-1", 2, 120, &c);

	char err[512];
	struct ep_store_filter f = {.build_id = "aa01"};
	Edgeprof__V1__Profile *p = ep_store_profile(s, &f, err, sizeof(err));
	assert_non_null(p);
	assert_int_equal(p->n_binaries, 1);
	const Edgeprof__V1__BinaryProfile *bp = p->binaries[0];
	assert_string_equal(bp->build_id, "aa01");
	assert_string_equal(bp->arch, "x86_64");
	assert_int_equal(bp->samples, 70);
	assert_int_equal(p->stats->samples, 70);
	assert_string_equal(p->config->source, "collector");
	assert_int_equal(bp->n_edges, 3);
	const Edgeprof__V1__Edge *taken = find_edge(bp, 0x1000, 0x1040, true);
	assert_non_null(taken);
	assert_int_equal(taken->count, 700);
	assert_int_equal(taken->mispredicted, 7);
	assert_int_equal(taken->kind, EDGEPROF__V1__BRANCH_KIND__BRANCH_CONDITIONAL);
	const Edgeprof__V1__Edge *not_taken = find_edge(bp, 0x1000, 0x1006, false);
	assert_non_null(not_taken);
	assert_int_equal(not_taken->count, 49);
	const Edgeprof__V1__Edge *ext = find_edge(bp, 0, 0xffffffff81000000ULL, true);
	assert_non_null(ext);
	assert_true(ext->from_external);
	assert_int_equal(ext->count, 21);
	/* ep_edge_cmp order: the not-taken side first at equal addresses */
	assert_true(bp->edges[0]->from <= bp->edges[2]->from);
	assert_int_equal(bp->n_ranges, 1);
	assert_int_equal(bp->ranges[0]->count, 350);
	/* the branch records' cycles, summed like the counts */
	assert_int_equal(bp->ranges[0]->cycles, 490);
	assert_int_equal(bp->ranges[0]->cycled_instructions, 630);
	assert_string_equal(p->config->cycles_unit, "cycles");
	assert_int_equal(bp->n_ips, 1);
	assert_int_equal(bp->ips[0]->count, 14);
	/* metadata written three times, stored once */
	assert_int_equal(bp->n_functions, 1);
	assert_string_equal(bp->functions[0]->name, "hot_loop");
	assert_int_equal(bp->functions[0]->local_index, 2);
	assert_int_equal(bp->n_segments, 1);
	assert_int_equal(bp->segments[0]->size, 0x2000);
	assert_int_equal(bp->n_paths, 2);
	ep_profile_free(p);

	/* the time filter: only the second bucket */
	f.from_s = 120;
	p = ep_store_profile(s, &f, err, sizeof(err));
	assert_non_null(p);
	assert_int_equal(find_edge(p->binaries[0], 0x1000, 0x1040, true)->count, 400);
	ep_profile_free(p);
	/* [60, 120): only the first */
	f.from_s = 60;
	f.to_s = 120;
	p = ep_store_profile(s, &f, err, sizeof(err));
	assert_int_equal(find_edge(p->binaries[0], 0x1000, 0x1040, true)->count, 300);
	ep_profile_free(p);
	/* the label filter: pod-1 over all time */
	struct ep_store_filter g = {.build_id = "aa01", .pod = "pod-1"};
	p = ep_store_profile(s, &g, err, sizeof(err));
	assert_int_equal(find_edge(p->binaries[0], 0x1000, 0x1040, true)->count, 500);
	assert_int_equal(p->binaries[0]->samples, 50);
	ep_profile_free(p);
	/* a build-id with nothing: a profile without binaries */
	struct ep_store_filter none = {.build_id = "ffff"};
	p = ep_store_profile(s, &none, err, sizeof(err));
	assert_non_null(p);
	assert_int_equal(p->n_binaries, 0);
	ep_profile_free(p);
	ep_store_close(s);
}

/* Queries are prepared once per text and kept (store_sqlite.c's cache):
 * the same text with other values, more texts than the cache holds, and
 * rows written after a query was last run must all answer as if prepared
 * afresh. */
static void test_repeated_queries_see_their_own_filter(void **state)
{
	(void)state;
	struct ep_store *s = open_store(true);
	enum { PODS = 4 };
	char pods[PODS][16];
	struct slice_data d[PODS];
	for (int i = 0; i < PODS; i++) {
		snprintf(pods[i], sizeof(pods[i]), "pod-%d", i);
		make_slice(&d[i], "ee05", "/bin/e", pods[i], (uint64_t)i + 1);
		write_one(s, "agent-1", (uint64_t)i + 1, 60, &d[i]);
	}
	char err[512];
	/* every set of the optional fields: 64 filter texts per query, far more
	 * than the cache holds; each set asked for every pod in turn */
	for (int round = 0; round < 2; round++) {
		for (unsigned mask = 0; mask < 64; mask++) {
			for (int i = 0; i < PODS; i++) {
				struct ep_store_filter f = {.build_id = "ee05",
							    .pod = pods[i],
							    .from_s = mask & 1 ? 60 : 0,
							    .to_s = mask & 2 ? 120 : 0,
							    .container_id = mask & 4 ? "" : NULL,
							    .namespace_ = mask & 8 ? "" : NULL,
							    .cgroup = mask & 16 ? "" : NULL,
							    .process = mask & 32 ? "" : NULL};
				Edgeprof__V1__Profile *p =
				    ep_store_profile(s, &f, err, sizeof(err));
				if (!p)
					fail_msg("round %d mask %u pod %d: %s", round, mask, i,
						 err);
				if (p->n_binaries != 1)
					fail_msg("round %d mask %u pod %d: %zu binaries", round,
						 mask, i, p->n_binaries);
				const Edgeprof__V1__Edge *e =
				    find_edge(p->binaries[0], 0x1000, 0x1040, true);
				assert_non_null(e);
				assert_int_equal(e->count, 100 * (i + 1));
				assert_int_equal(p->binaries[0]->n_functions, 1);
				ep_profile_free(p);
				Edgeprof__V1__BinaryList *l =
				    ep_store_list_binaries(s, &f, NULL, err, sizeof(err));
				assert_non_null(l);
				assert_int_equal(l->n_binaries, 1);
				assert_int_equal(l->binaries[0]->n_paths, 1);
				ep_store_free_list(l);
			}
		}
	}
	/* written after pod-0's statement last ran: counted on the next run */
	write_one(s, "agent-2", 1, 60, &d[0]);
	struct ep_store_filter f0 = {.build_id = "ee05", .pod = pods[0]};
	Edgeprof__V1__Profile *p = ep_store_profile(s, &f0, err, sizeof(err));
	assert_non_null(p);
	assert_int_equal(find_edge(p->binaries[0], 0x1000, 0x1040, true)->count, 200);
	ep_profile_free(p);
	ep_store_close(s);
}

static void test_batch_ids_are_remembered(void **state)
{
	(void)state;
	struct ep_store *s = open_store(true);
	char err[512];
	assert_int_equal(ep_store_has_batch(s, "agent-1", 1, err, sizeof(err)), 0);
	struct slice_data a;
	make_slice(&a, "bb02", "/bin/b", "", 1);
	write_one(s, "agent-1", 1, 60, &a);
	assert_int_equal(ep_store_has_batch(s, "agent-1", 1, err, sizeof(err)), 1);
	/* the same sequence from another agent is another batch */
	assert_int_equal(ep_store_has_batch(s, "agent-2", 1, err, sizeof(err)), 0);
	assert_int_equal(ep_store_has_batch(s, "agent-1", 2, err, sizeof(err)), 0);
	/* and a quote in an id is data, not SQL */
	assert_int_equal(ep_store_has_batch(s, "x' OR '1'='1", 1, err, sizeof(err)), 0);
	ep_store_close(s);
	/* remembered across a restart */
	s = open_store(false);
	assert_int_equal(ep_store_has_batch(s, "agent-1", 1, err, sizeof(err)), 1);
	struct ep_store_filter f = {.build_id = "bb02"};
	Edgeprof__V1__Profile *p = ep_store_profile(s, &f, err, sizeof(err));
	assert_non_null(p);
	assert_int_equal(find_edge(p->binaries[0], 0x1000, 0x1040, true)->count, 100);
	ep_profile_free(p);
	ep_store_close(s);
}

/* Between calls no statement keeps a read open: one would pin the WAL at
 * its snapshot, and the file would grow with every write for as long as
 * the collector runs (seen: 316 MB of WAL over a 4 KB database, 19 of
 * 76,835 frames checkpointed, after a batch lookup that found its batch
 * left its statement on a row). Every kind of call is made, then another
 * connection checkpoints everything. */
static void test_no_read_stays_open_between_calls(void **state)
{
	(void)state;
	if (!is_sqlite())
		skip();
	struct ep_store *s = open_store(true);
	char err[512];
	struct slice_data a, b;
	make_slice(&a, "aa01", "/bin/a", "c1", 1);
	make_slice(&b, "bb02", "/bin/b", "c2", 1);
	for (uint64_t seq = 1; seq <= 20; seq++) {
		write_one(s, "agent-1", seq, 60 * (int64_t)seq, seq % 2 ? &a : &b);
		/* found: its statement stops on a row */
		assert_int_equal(ep_store_has_batch(s, "agent-1", seq, err, sizeof(err)), 1);
		struct ep_store_filter f = {.build_id = "aa01"};
		Edgeprof__V1__Profile *p = ep_store_profile(s, &f, err, sizeof(err));
		assert_non_null(p);
		ep_profile_free(p);
		struct ep_store_filter all = {0};
		Edgeprof__V1__BinaryList *l =
		    ep_store_list_binaries(s, &all, NULL, err, sizeof(err));
		assert_non_null(l);
		ep_store_free_list(l);
	}
	sqlite3 *db;
	assert_int_equal(sqlite3_open(store_spec(false) + 7, &db), SQLITE_OK);
	/* the file's WAL mode is seen once it is read */
	assert_int_equal(sqlite3_exec(db, "SELECT count(*) FROM sqlite_master", NULL, NULL, NULL),
			 SQLITE_OK);
	int log = -1, done = -1;
	assert_int_equal(
	    sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_PASSIVE, &log, &done), SQLITE_OK);
	print_message("wal: %d frames, %d checkpointed\n", log, done);
	assert_true(log > 0);
	assert_int_equal(done, log);
	sqlite3_close(db);
	ep_store_close(s);
}

static void test_list_binaries(void **state)
{
	(void)state;
	struct ep_store *s = open_store(true);
	struct slice_data a, b, c;
	make_slice(&a, "cc03", "/bin/c", "pod-1", 1);
	make_slice(&b, "aa03", "/bin/a", "", 1);
	make_slice(&c, "cc03", "/bin/c", "pod-2", 1);
	write_one(s, "agent-1", 1, 180, &a);
	write_one(s, "agent-1", 2, 60, &b);
	write_one(s, "agent-2", 7, 240, &c);
	char err[512];
	struct ep_store_filter all = {0};
	Edgeprof__V1__BinaryList *l = ep_store_list_binaries(s, &all, NULL, err, sizeof(err));
	assert_non_null(l);
	assert_int_equal(l->n_binaries, 2);
	assert_string_equal(l->binaries[0]->build_id, "aa03");
	assert_string_equal(l->binaries[1]->build_id, "cc03");
	const Edgeprof__V1__BinaryInfo *cc = l->binaries[1];
	assert_int_equal(cc->samples, 20);
	assert_int_equal(cc->first_seen_s, 180);
	assert_int_equal(cc->last_seen_s, 240);
	assert_int_equal(cc->n_paths, 1); /* the same path twice, kept once */
	assert_string_equal(cc->paths[0], "/bin/c");
	assert_string_equal(cc->arch, "x86_64");
	assert_int_equal(cc->n_labels, 2);
	assert_string_equal(cc->labels[0]->pod, "pod-1");
	assert_string_equal(cc->labels[1]->pod, "pod-2");
	ep_store_free_list(l);
	/* filters apply to the listing too */
	struct ep_store_filter pod2 = {.pod = "pod-2"};
	l = ep_store_list_binaries(s, &pod2, NULL, err, sizeof(err));
	assert_int_equal(l->n_binaries, 1);
	assert_int_equal(l->binaries[0]->samples, 10);
	ep_store_free_list(l);
	struct ep_store_filter late = {.from_s = 200};
	l = ep_store_list_binaries(s, &late, NULL, err, sizeof(err));
	assert_int_equal(l->n_binaries, 1);
	assert_string_equal(l->binaries[0]->build_id, "cc03");
	ep_store_free_list(l);
	ep_store_close(s);
}

/* Label values as prefixes (issue 36: the UI shows a container id's first
 * 12 digits, and a pod's name is typed by its start): in listings and in
 * profiles, bytewise, '%' and '_' being no wildcards; whole values
 * otherwise. */
static void test_label_prefixes(void **state)
{
	(void)state;
	struct ep_store *s = open_store(true);
	struct slice_data a, b, c;
	make_slice(&a, "cc04", "/bin/c", "web-7d9f8-x2k4q", 1);
	make_slice(&b, "cc04", "/bin/c", "web_7d9f8", 1);
	make_slice(&c, "dd04", "/bin/d", "db-0", 1);
	write_one(s, "agent-1", 1, 60, &a);
	write_one(s, "agent-1", 2, 60, &b);
	write_one(s, "agent-1", 3, 60, &c);
	char err[512];
	const struct {
		const char *pod;
		bool prefix;
		size_t binaries;
		uint64_t samples; /* of the first binary */
	} cases[] = {{"web-7d9f8", true, 1, 10}, {"web", true, 1, 20},
		     {"web-7d9f8", false, 0, 0}, {"web_", true, 1, 10},
		     {"web%", true, 0, 0},	 {"", true, 2, 20},
		     {"db-0", true, 1, 10},	 {"web-7d9f8-x2k4q", false, 1, 10}};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct ep_store_filter f = {.pod = cases[i].pod, .prefix = cases[i].prefix};
		Edgeprof__V1__BinaryList *l = ep_store_list_binaries(s, &f, NULL, err, sizeof(err));
		assert_non_null(l);
		if (l->n_binaries != cases[i].binaries)
			fail_msg("pod %s%s: %zu binaries listed, %zu expected", cases[i].pod,
				 cases[i].prefix ? "*" : "", l->n_binaries, cases[i].binaries);
		if (l->n_binaries && cases[i].binaries == 1)
			assert_int_equal(l->binaries[0]->samples, cases[i].samples);
		ep_store_free_list(l);
		f.build_id =
		    cases[i].binaries == 2 || strncmp(cases[i].pod, "db", 2) == 0 ? "dd04" : "cc04";
		Edgeprof__V1__Profile *p = ep_store_profile(s, &f, err, sizeof(err));
		assert_non_null(p);
		if (p->n_binaries != (cases[i].binaries ? 1u : 0u))
			fail_msg("pod %s%s: profile of %zu binaries", cases[i].pod,
				 cases[i].prefix ? "*" : "", p->n_binaries);
		if (p->n_binaries && cases[i].binaries == 1)
			assert_int_equal(p->binaries[0]->samples, cases[i].samples);
		ep_profile_free(p);
	}
	ep_store_close(s);
}

/* Pages (issue 32: every list is bounded): following each page's last
 * build-id lists every binary exactly once, in order; the hottest-first
 * order pages by offset; totals count every page. */
static void test_list_pages_cover_every_binary_once(void **state)
{
	(void)state;
	struct ep_store *s = open_store(true);
	enum { N = 23 };
	char ids[N][8];
	struct slice_data d[N];
	struct ep_store_batch_id id = {"agent-1", 1, "node-1", 1700000000};
	struct ep_store_slice sl[N];
	for (int i = 0; i < N; i++) {
		snprintf(ids[i], sizeof(ids[i]), "%02x%02x", i * 7 % N, i);
		make_slice(&d[i], ids[i], "/bin/p", "", (uint64_t)i + 1);
		sl[i] = (struct ep_store_slice){60, &d[i].delta, 0, false};
	}
	struct ep_store_commit c = {&id, 1, sl, N};
	char err[512];
	assert_int_equal(ep_store_write(s, &c, err, sizeof(err)), 0);
	struct ep_store_filter all = {0};
	bool seen[N] = {false};
	char after[16] = "";
	int pages = 0, listed = 0;
	for (bool more = true; more; pages++) {
		struct ep_store_page page = {
		    .after = pages ? after : NULL, .limit = 5, .labels = 3};
		Edgeprof__V1__BinaryList *l =
		    ep_store_list_binaries(s, &all, &page, err, sizeof(err));
		if (!l)
			fail_msg("%s", err);
		assert_true(l->n_binaries <= 5);
		for (size_t i = 0; i < l->n_binaries; i++) {
			const char *b = l->binaries[i]->build_id;
			assert_true(strcmp(b, after) > 0 || (!pages && !i));
			snprintf(after, sizeof(after), "%s", b);
			for (int k = 0; k < N; k++)
				if (strcmp(ids[k], b) == 0) {
					assert_false(seen[k]);
					seen[k] = true;
					assert_int_equal(l->binaries[i]->samples, 10 * (k + 1));
					assert_int_equal(l->binaries[i]->label_sets, 1);
				}
			listed++;
		}
		more = l->more;
		ep_store_free_list(l);
	}
	assert_int_equal(listed, N);
	assert_int_equal(pages, (N + 4) / 5);
	for (int k = 0; k < N; k++)
		assert_true(seen[k]);
	/* hottest first, by offset, with the totals */
	uint64_t last = UINT64_MAX;
	listed = 0;
	for (size_t offset = 0;; offset += 4) {
		struct ep_store_page page = {
		    .by_samples = true, .offset = offset, .limit = 4, .totals = true};
		Edgeprof__V1__BinaryList *l =
		    ep_store_list_binaries(s, &all, &page, err, sizeof(err));
		assert_non_null(l);
		assert_int_equal(l->total_binaries, N);
		assert_int_equal(l->total_samples, 10 * N * (N + 1) / 2);
		for (size_t i = 0; i < l->n_binaries; i++) {
			assert_true(l->binaries[i]->samples < last);
			last = l->binaries[i]->samples;
			assert_int_equal(l->binaries[i]->n_labels, 0); /* labels 0: none */
			listed++;
		}
		bool more = l->more;
		ep_store_free_list(l);
		if (!more)
			break;
	}
	assert_int_equal(listed, N);
	ep_store_close(s);
}

/* Label cardinality (issue 32): a binary with many label sets lists at most
 * N of them, the most sampled, and each dimension says how many values it
 * has and its N most sampled; one with few is listed whole. */
static void test_list_summarises_many_label_sets(void **state)
{
	(void)state;
	struct ep_store *s = open_store(true);
	enum { SETS = 300, N = 10 };
	static struct slice_data d[SETS];
	static char pods[SETS][16], containers[SETS][24];
	static const char *const namespaces[3] = {"ns-a", "ns-b", "ns-c"};
	struct ep_store_slice sl[SETS];
	for (int i = 0; i < SETS; i++) {
		snprintf(pods[i], sizeof(pods[i]), "pod-%03d", i);
		snprintf(containers[i], sizeof(containers[i]), "c%03d", i);
		make_slice(&d[i], "ab12", "/bin/many", pods[i], 1);
		d[i].bp.samples = (uint64_t)i + 1; /* pod-299 the most sampled */
		d[i].labels.container_id = containers[i];
		d[i].labels.namespace_ = (char *)namespaces[i % 3];
		d[i].labels.process = "worker";
		sl[i] = (struct ep_store_slice){60, &d[i].delta, 0, false};
	}
	struct slice_data few;
	make_slice(&few, "cd34", "/bin/few", "pod-x", 1);
	struct ep_store_batch_id ids[2] = {{"agent-1", 1, "node-1", 1700000000},
					   {"agent-1", 2, "node-1", 1700000000}};
	struct ep_store_commit c = {&ids[0], 1, sl, SETS};
	char err[512];
	assert_int_equal(ep_store_write(s, &c, err, sizeof(err)), 0);
	write_one(s, "agent-1", 2, 120, &few);

	struct ep_store_filter all = {0};
	struct ep_store_page page = {.labels = N};
	Edgeprof__V1__BinaryList *l = ep_store_list_binaries(s, &all, &page, err, sizeof(err));
	if (!l)
		fail_msg("%s", err);
	assert_int_equal(l->n_binaries, 2);
	const Edgeprof__V1__BinaryInfo *b = l->binaries[0];
	assert_string_equal(b->build_id, "ab12");
	assert_int_equal(b->samples, SETS * (SETS + 1) / 2);
	assert_int_equal(b->label_sets, SETS);
	assert_true(b->labels_truncated);
	assert_int_equal(b->n_labels, N);
	assert_int_equal(b->n_label_samples, N);
	for (int i = 0; i < N; i++) {
		assert_string_equal(b->labels[i]->pod, pods[SETS - 1 - i]);
		assert_int_equal(b->label_samples[i], SETS - i);
	}
	assert_int_equal(b->n_dimensions, 5);
	const char *const names[5] = {"container_id", "pod", "namespace", "cgroup", "process"};
	const uint64_t distinct[5] = {SETS, SETS, 3, 1, 1};
	for (int k = 0; k < 5; k++) {
		const Edgeprof__V1__LabelDimension *dim = b->dimensions[k];
		assert_string_equal(dim->name, names[k]);
		assert_int_equal(dim->distinct, distinct[k]);
		assert_true(dim->exact);
		assert_int_equal(dim->summarized, distinct[k] > N);
		assert_int_equal(dim->n_values, distinct[k] > N ? N : distinct[k]);
	}
	assert_string_equal(b->dimensions[1]->values[0]->value, "pod-299");
	assert_int_equal(b->dimensions[1]->values[0]->samples, SETS);
	assert_string_equal(b->dimensions[1]->values[N - 1]->value, "pod-290");
	/* namespaces: the sums of a third of the sets each, ns-c (i % 3 == 2:
	 * samples 3, 6, ..., 300) the most */
	assert_string_equal(b->dimensions[2]->values[0]->value, "ns-c");
	assert_int_equal(b->dimensions[2]->values[0]->samples, 3 * 100 * 101 / 2);
	assert_string_equal(b->dimensions[4]->values[0]->value, "worker");
	const Edgeprof__V1__BinaryInfo *f = l->binaries[1];
	assert_int_equal(f->label_sets, 1);
	assert_false(f->labels_truncated);
	assert_int_equal(f->n_labels, 1);
	assert_string_equal(f->labels[0]->pod, "pod-x");
	assert_false(f->dimensions[1]->summarized);
	ep_store_free_list(l);

	/* under a label filter: its sets only */
	struct ep_store_filter ns = {.namespace_ = "ns-b"};
	l = ep_store_list_binaries(s, &ns, &page, err, sizeof(err));
	assert_non_null(l);
	assert_int_equal(l->n_binaries, 1);
	assert_int_equal(l->binaries[0]->label_sets, SETS / 3);
	assert_int_equal(l->binaries[0]->dimensions[2]->distinct, 1);
	assert_int_equal(l->binaries[0]->dimensions[1]->distinct, SETS / 3);
	assert_string_equal(l->binaries[0]->labels[0]->pod, "pod-298");
	ep_store_free_list(l);

	/* more values than the listing's N: few label sets listed whole when
	 * N is larger */
	struct ep_store_page wide = {.labels = 1000};
	l = ep_store_list_binaries(s, &all, &wide, err, sizeof(err));
	assert_non_null(l);
	assert_int_equal(l->binaries[0]->n_labels, SETS);
	assert_false(l->binaries[0]->labels_truncated);
	/* listed whole: by their values */
	assert_string_equal(l->binaries[0]->labels[0]->container_id, "c000");
	assert_string_equal(l->binaries[0]->labels[SETS - 1]->container_id, "c299");
	ep_store_free_list(l);

	/* the API's JSON: the summary, and the next page's cursor */
	struct ep_store_page one = {.limit = 1, .labels = N};
	struct ep_api_response r = {0};
	ep_api_binaries(s, &all, &one, &r);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.body, "\"label_sets\": 300"));
	assert_non_null(strstr(r.body, "\"labels_truncated\": true"));
	assert_non_null(strstr(r.body, "\"pod\": {\"distinct\": 300, \"summarized\": true"));
	assert_non_null(strstr(r.body, "\"next\": \"ab12\""));
	free(r.body);
	ep_store_close(s);
}

/* Past what SQLite counts exactly (4,096 values of a dimension): an
 * estimate within 2%, said to be one; ClickHouse counts exactly. */
static void test_list_estimates_past_exact_values(void **state)
{
	(void)state;
	struct ep_store *s = open_store(true);
	enum { SETS = 10000 };
	struct slice_data *d = calloc(SETS, sizeof(*d));
	char(*pods)[16] = calloc(SETS, sizeof(*pods));
	struct ep_store_slice *sl = calloc(SETS, sizeof(*sl));
	assert_non_null(d);
	assert_non_null(pods);
	assert_non_null(sl);
	for (int i = 0; i < SETS; i++) {
		snprintf(pods[i], sizeof(pods[i]), "pod-%05d", i);
		make_slice(&d[i], "ef56", "/bin/churn", pods[i], 1);
		d[i].bp.samples = i == 77 ? 1000 : 1; /* one stands out */
		sl[i] = (struct ep_store_slice){60, &d[i].delta, 0, false};
	}
	struct ep_store_batch_id id = {"agent-1", 1, "node-1", 1700000000};
	struct ep_store_commit c = {&id, 1, sl, SETS};
	char err[512];
	assert_int_equal(ep_store_write(s, &c, err, sizeof(err)), 0);
	struct ep_store_filter all = {0};
	struct ep_store_page page = {.labels = 5};
	Edgeprof__V1__BinaryList *l = ep_store_list_binaries(s, &all, &page, err, sizeof(err));
	if (!l)
		fail_msg("%s", err);
	const Edgeprof__V1__BinaryInfo *b = l->binaries[0];
	assert_int_equal(b->label_sets, SETS);
	const Edgeprof__V1__LabelDimension *pod = b->dimensions[1];
	assert_true(pod->summarized);
	assert_int_equal(pod->exact, !is_sqlite());
	assert_true(pod->distinct >= SETS * 98 / 100 && pod->distinct <= SETS * 102 / 100);
	assert_int_equal(pod->n_values, 5);
	assert_string_equal(pod->values[0]->value, "pod-00077");
	assert_true(pod->values[0]->samples >= 1000);
	assert_true(b->dimensions[2]->exact); /* one namespace: "" */
	assert_int_equal(b->dimensions[2]->distinct, 1);
	ep_store_free_list(l);
	free(d);
	free(pods);
	free(sl);
	ep_store_close(s);
}

/* Retention: buckets before the cut go (whole weeks for ClickHouse, whose
 * partitions are weeks), later ones stay; so do old batch ids. */
static void test_prune_forgets_old_buckets_and_batch_ids(void **state)
{
	(void)state;
	struct ep_store *s = open_store(true);
	const int64_t week = 604800;
	struct slice_data old, recent;
	make_slice(&old, "dd04", "/bin/d", "", 1);
	make_slice(&recent, "dd04", "/bin/d", "", 2);
	struct ep_store_batch_id ids[2] = {{"agent-1", 1, "node", 100},
					   {"agent-1", 2, "node", 3 * week + 100}};
	struct ep_store_slice sl[2] = {{60, &old.delta, 0, false},
				       {3 * week, &recent.delta, 1, false}};
	struct ep_store_commit c = {ids, 2, sl, 2};
	char err[512];
	assert_int_equal(ep_store_write(s, &c, err, sizeof(err)), 0);
	if (ep_store_prune(s, 2 * week, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	struct ep_store_filter f = {.build_id = "dd04"};
	Edgeprof__V1__Profile *p = ep_store_profile(s, &f, err, sizeof(err));
	assert_non_null(p);
	assert_int_equal(p->n_binaries, 1);
	assert_int_equal(find_edge(p->binaries[0], 0x1000, 0x1040, true)->count, 200);
	assert_int_equal(p->binaries[0]->samples, 20);
	/* a newer agent's row names the local: BOLT's name is not lost to the
	 * older row of the same function */
	assert_int_equal(p->binaries[0]->n_functions, 1);
	assert_int_equal(p->binaries[0]->functions[0]->local_index, 2);
	ep_profile_free(p);
	/* ClickHouse deletes batch ids by a background mutation: give it time */
	int old_known = 1;
	for (int i = 0; i < 50 && old_known == 1; i++) {
		old_known = ep_store_has_batch(s, "agent-1", 1, err, sizeof(err));
		if (old_known == 1)
			usleep(100000);
	}
	assert_int_equal(old_known, 0);
	assert_int_equal(ep_store_has_batch(s, "agent-1", 2, err, sizeof(err)), 1);
	ep_store_close(s);
}

/* --- listings over label sets that span many buckets (issue 32: pod churn).
 * SQLite lists from rollups kept beside the minute rows (per label set and
 * per binary: all time, per hour, per minute); these check that every
 * listing still equals what the minute rows say, after writes, resends of a
 * bucket and retention. */

enum { RB = 3, RL = 24, RM = 330 }; /* binaries, label sets, minutes */
/* a week's end inside the minutes (ClickHouse prunes whole weeks), and an
 * hour's half at the first: the windows' edges fall inside hours */
#define CHURN_WEEK (3 * 604800LL)
#define CHURN_BASE (CHURN_WEEK - 150 * 60)

struct churn {
	uint64_t samples[RB][RL][RM];
	char pods[RL][16], nss[RL][8], procs[RL][8], ids[RB][8];
};

static bool churn_session(int l)
{
	return l >= RL - 2; /* the last two label sets are a session's */
}

/* Label set l lives from minute l * 13 % 200 for 20 to 169 minutes, on
 * binary b unless (l + b) % 4 == 0, with 1 to 4 samples a minute. */
static void churn_make(struct churn *c)
{
	memset(c, 0, sizeof(*c));
	for (int l = 0; l < RL; l++) {
		snprintf(c->pods[l], sizeof(c->pods[l]), "pod-%02d", churn_session(l) ? l - 20 : l);
		snprintf(c->nss[l], sizeof(c->nss[l]), "ns-%d", l % 3);
		snprintf(c->procs[l], sizeof(c->procs[l]), "proc-%d", l % 2);
		int start = l * 13 % 200, len = 20 + l * 37 % 150;
		for (int b = 0; b < RB; b++)
			for (int m = start; m < start + len && m < RM && (l + b) % 4; m++)
				c->samples[b][l][m] = 1 + (uint64_t)(l + m + b) % 4;
	}
	for (int b = 0; b < RB; b++)
		snprintf(c->ids[b], sizeof(c->ids[b]), "ab%02x", 0x30 + b);
}

/* Writes minutes [m0, m1) in commits of ten minutes, as the ingest does;
 * the minutes m % 50 == 7 twice (a resend's second batch adds to the same
 * rows), which the oracle counts twice. */
static void churn_write(struct ep_store *s, struct churn *c, int m0, int m1, uint64_t *seq)
{
	struct slice_data *d = calloc(10 * RB * RL, sizeof(*d));
	struct ep_store_slice *sl = calloc(10 * RB * RL, sizeof(*sl));
	assert_non_null(d);
	assert_non_null(sl);
	for (int first = m0; first < m1; first += 10) {
		for (int pass = 0; pass < 2; pass++) {
			size_t n = 0;
			for (int m = first; m < first + 10 && m < m1; m++) {
				if (pass && m % 50 != 7)
					continue;
				for (int b = 0; b < RB; b++)
					for (int l = 0; l < RL; l++) {
						uint64_t k = c->samples[b][l][m];
						if (!k || (pass && !(k /= 2)))
							continue;
						make_slice(&d[n], c->ids[b], "/bin/churn",
							   c->pods[l], 1);
						d[n].bp.samples = k;
						d[n].labels.namespace_ = c->nss[l];
						d[n].labels.process = c->procs[l];
						d[n].labels.session_id =
						    churn_session(l) ? "s-1" : "";
						sl[n] = (struct ep_store_slice){
						    CHURN_BASE + 60LL * m, &d[n].delta, 0, false};
						n++;
					}
			}
			if (!n)
				continue;
			/* received after its buckets, as retention expects */
			struct ep_store_batch_id id = {"churn", ++*seq, "node-1",
						       CHURN_BASE + 60LL * (first + 10)};
			struct ep_store_commit cm = {&id, 1, sl, n};
			char err[512];
			if (ep_store_write(s, &cm, err, sizeof(err)) != 0)
				fail_msg("%s", err);
			/* what the second batch added, for the oracle */
			for (int m = first; pass && m < first + 10 && m < m1; m++)
				for (int b = 0; b < RB && m % 50 == 7; b++)
					for (int l = 0; l < RL; l++)
						c->samples[b][l][m] += c->samples[b][l][m] / 2;
		}
	}
	free(d);
	free(sl);
}

/* The oracle's answer: whether filter f takes label set l, and minute m. */
static bool churn_takes(const struct churn *c, const struct ep_store_filter *f, int b, int l)
{
	bool session = f->session_id && *f->session_id;
	return churn_session(l) == session && (!f->build_id || !strcmp(f->build_id, c->ids[b])) &&
	       (!f->namespace_ || !strcmp(f->namespace_, c->nss[l])) &&
	       (!f->pod || !strcmp(f->pod, c->pods[l])) &&
	       (!f->process || !strcmp(f->process, c->procs[l]));
}

static bool churn_in(const struct ep_store_filter *f, int m)
{
	int64_t bucket = CHURN_BASE + 60LL * m;
	return (!f->from_s || bucket >= f->from_s) && (!f->to_s || bucket < f->to_s);
}

/* The store's listing under f equals the oracle's: each binary's samples,
 * first and last bucket, its label sets (all listed) and their samples,
 * its namespaces' samples, and the totals. */
static void churn_check(struct ep_store *s, const struct churn *c, const struct ep_store_filter *f,
			const char *what)
{
	char err[512];
	struct ep_store_page page = {.limit = 10, .labels = 1000, .totals = true};
	Edgeprof__V1__BinaryList *list = ep_store_list_binaries(s, f, &page, err, sizeof(err));
	if (!list)
		fail_msg("%s: %s", what, err);
	size_t listed = 0;
	uint64_t total = 0, binaries = 0;
	for (int b = 0; b < RB; b++) {
		uint64_t sum = 0, per[RL] = {0};
		int64_t first = 0, last = 0;
		size_t sets = 0;
		for (int l = 0; l < RL; l++)
			for (int m = 0; m < RM && churn_takes(c, f, b, l); m++) {
				uint64_t k = churn_in(f, m) ? c->samples[b][l][m] : 0;
				int64_t bucket = CHURN_BASE + 60LL * m;
				if (!k)
					continue;
				per[l] += k;
				sum += k;
				first = !first || bucket < first ? bucket : first;
				last = bucket > last ? bucket : last;
			}
		for (int l = 0; l < RL; l++)
			sets += per[l] > 0;
		if (!sum)
			continue;
		binaries++;
		total += sum;
		if (listed >= list->n_binaries)
			fail_msg("%s: %s not listed", what, c->ids[b]);
		const Edgeprof__V1__BinaryInfo *bi = list->binaries[listed++];
		if (strcmp(bi->build_id, c->ids[b]) || bi->samples != sum ||
		    bi->first_seen_s != first || bi->last_seen_s != last ||
		    bi->label_sets != sets || bi->n_labels != sets)
			fail_msg("%s: %s: %" PRIu64 " samples, %" PRId64 " to %" PRId64 ", %" PRIu64
				 " label sets (%zu listed); expected %s: %" PRIu64 ", %" PRId64
				 " to %" PRId64 ", %zu",
				 what, bi->build_id, bi->samples, bi->first_seen_s, bi->last_seen_s,
				 bi->label_sets, bi->n_labels, c->ids[b], sum, first, last, sets);
		for (size_t j = 0; j < bi->n_labels; j++) {
			const Edgeprof__V1__Labels *lj = bi->labels[j];
			int l = 0;
			while (l < RL && (strcmp(c->pods[l], lj->pod) ||
					  churn_session(l) != (*lj->session_id != '\0')))
				l++;
			if (l == RL || strcmp(lj->namespace_, c->nss[l]) ||
			    bi->label_samples[j] != per[l])
				fail_msg("%s: %s: label set %s: %" PRIu64
					 " samples, expected %" PRIu64,
					 what, bi->build_id, lj->pod, bi->label_samples[j],
					 l < RL ? per[l] : 0);
		}
		const Edgeprof__V1__LabelDimension *ns = bi->dimensions[2];
		size_t distinct = 0;
		for (int v = 0; v < 3; v++) {
			char name[8];
			uint64_t want = 0;
			snprintf(name, sizeof(name), "ns-%d", v);
			for (int l = 0; l < RL; l++)
				want += strcmp(c->nss[l], name) ? 0 : per[l];
			distinct += want > 0;
			uint64_t got = 0;
			for (size_t i = 0; i < ns->n_values; i++)
				if (!strcmp(ns->values[i]->value, name))
					got = ns->values[i]->samples;
			if (got != want)
				fail_msg("%s: %s: %s: %" PRIu64 " samples, expected %" PRIu64, what,
					 bi->build_id, name, got, want);
		}
		assert_true(ns->exact);
		assert_int_equal(ns->distinct, distinct);
	}
	if (list->n_binaries != listed || list->total_binaries != binaries ||
	    list->total_samples != total)
		fail_msg("%s: %zu binaries listed, totals %" PRIu64 " and %" PRIu64
			 "; expected %zu, %" PRIu64 " and %" PRIu64,
			 what, list->n_binaries, list->total_binaries, list->total_samples, listed,
			 binaries, total);
	ep_store_free_list(list);
}

/* windows whose edges fall inside hours and minutes, on hours, past the
 * data; label filters alone and with windows; one binary */
static const struct ep_store_filter churn_filters[] = {
    {0},
    {.from_s = CHURN_BASE + 47 * 60 + 17},
    {.from_s = CHURN_BASE + 95 * 60, .to_s = CHURN_BASE + 250 * 60},
    {.to_s = CHURN_BASE + 200 * 60},
    {.from_s = CHURN_BASE + 40 * 60, .to_s = CHURN_BASE + 55 * 60},
    {.from_s = CHURN_WEEK - 3600, .to_s = CHURN_WEEK + 3600},
    {.from_s = CHURN_BASE + 400 * 60},
    {.namespace_ = "ns-1"},
    {.pod = "pod-05"},
    {.session_id = "s-1"},
    {.session_id = "s-1", .from_s = CHURN_BASE + 100 * 60 + 30},
    {.namespace_ = "ns-2", .from_s = CHURN_BASE + 65 * 60, .to_s = CHURN_BASE + 301 * 60},
    {.pod = "pod-07", .process = "proc-1", .to_s = CHURN_BASE + 130 * 60},
    {.build_id = "ab31", .from_s = CHURN_BASE + 33 * 60, .to_s = CHURN_BASE + 299 * 60},
    {.build_id = "ab32"},
    {.namespace_ = "ns-9"},
};

static void churn_check_all(struct ep_store *s, const struct churn *c, const char *when)
{
	for (size_t i = 0; i < sizeof(churn_filters) / sizeof(churn_filters[0]); i++) {
		char what[64];
		snprintf(what, sizeof(what), "%s, filter %zu", when, i);
		churn_check(s, c, &churn_filters[i], what);
	}
}

/* SQLite's rollups against the minute rows of the file at path: the rows
 * of each that the other lacks (0: they agree), and the label sets' values'
 * ids against their texts. */
static int rollup_mismatches(const char *path)
{
#define CONT	   " FROM samples WHERE label_set IN (SELECT id FROM label_sets WHERE session_id = '')"
#define VALUE(col) "COALESCE((SELECT value FROM label_values WHERE id = t." col "), '')"
	static const char *const pairs[][2] = {
	    {"SELECT binary_id, label_set, SUM(count), MIN(bucket), MAX(bucket) FROM samples"
	     " GROUP BY 1, 2",
	     "SELECT binary_id, label_set, count, first_bucket, last_bucket FROM label_totals"},
	    {"SELECT binary_id, label_set, bucket - bucket % 3600, SUM(count) FROM samples"
	     " GROUP BY 1, 2, 3",
	     "SELECT binary_id, label_set, hour, count FROM label_hours"},
	    {"SELECT bucket, binary_id, SUM(count)" CONT " GROUP BY 1, 2",
	     "SELECT bucket, binary_id, count FROM binary_minutes"},
	    {"SELECT bucket - bucket % 3600, binary_id, SUM(count), MIN(bucket), "
	     "MAX(bucket)" CONT " GROUP BY 1, 2",
	     "SELECT hour, binary_id, count, first_bucket, last_bucket FROM binary_hours"},
	    {"SELECT binary_id, SUM(count), MIN(bucket), MAX(bucket)" CONT " GROUP BY 1",
	     "SELECT binary_id, count, first_bucket, last_bucket FROM binary_totals"},
	    {"SELECT t.label_set, l.container_id, l.pod, l.namespace, l.cgroup, l.process,"
	     " l.session_id FROM label_totals t JOIN label_sets l ON l.id = t.label_set",
	     "SELECT t.label_set, " VALUE("v_container") ", " VALUE("v_pod") ", " VALUE(
		 "v_"
		 "namesp"
		 "ace") ", " VALUE("v_cgroup") ", " VALUE("v_process") ", " VALUE("v_session") " FR"
											       "OM "
											       "lab"
											       "el_"
											       "tot"
											       "als"
											       " "
											       "t"},
	};
#undef CONT
#undef VALUE
	sqlite3 *db;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	int wrong = 0;
	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++)
		for (int way = 0; way < 2; way++) {
			char sql[2048];
			snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM (%s EXCEPT %s)",
				 pairs[i][way], pairs[i][!way]);
			sqlite3_stmt *q;
			if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) != SQLITE_OK)
				fail_msg("%s: %s", sql, sqlite3_errmsg(db));
			assert_int_equal(sqlite3_step(q), SQLITE_ROW);
			int n = sqlite3_column_int(q, 0);
			if (n)
				print_message("rollups %zu (%s): %d rows differ\n", i,
					      way ? "rollup" : "minutes", n);
			wrong += n;
			sqlite3_finalize(q);
		}
	sqlite3_close(db);
	return wrong;
}

/* Pod churn over five and a half hours, three binaries, a session, resent
 * batches: every listing (all time, windows whose edges fall inside hours
 * and minutes, label filters, a session) equals the sums of the minutes it
 * covers; and so it stays after retention forgets the week before, and (in
 * SQLite, which forgets bucket by bucket) a cut inside an hour and a
 * minute. SQLite's rollups equal its minute rows all along. */
static void test_listings_equal_the_minutes_they_sum(void **state)
{
	(void)state;
	struct ep_store *s = open_store(true);
	const char *path = store_spec(false) + 7;
	struct churn *c = malloc(sizeof(*c));
	assert_non_null(c);
	churn_make(c);
	uint64_t seq = 0;
	churn_write(s, c, 0, RM, &seq);
	churn_check_all(s, c, "written");
	if (is_sqlite())
		assert_int_equal(rollup_mismatches(path), 0);
	char err[512];
	const int64_t cuts[2] = {CHURN_WEEK, CHURN_WEEK + 47 * 60 + 30};
	for (int i = 0; i < (is_sqlite() ? 2 : 1); i++) {
		if (ep_store_prune(s, cuts[i], err, sizeof(err)) != 0)
			fail_msg("%s", err);
		for (int m = 0; m < RM; m++)
			for (int b = 0; b < RB && CHURN_BASE + 60LL * m < cuts[i]; b++)
				for (int l = 0; l < RL; l++)
					c->samples[b][l][m] = 0;
		churn_check_all(s, c, i ? "pruned inside an hour" : "pruned a week");
		if (is_sqlite())
			assert_int_equal(rollup_mismatches(path), 0);
	}
	/* and they go on from what is left: the last hour written again (the
	 * oracle then holds what was written, to which what was there adds) */
	static uint64_t had[RB][RL][60];
	for (int m = RM - 60; m < RM; m++)
		for (int b = 0; b < RB; b++)
			for (int l = 0; l < RL; l++)
				had[b][l][m - (RM - 60)] = c->samples[b][l][m];
	churn_write(s, c, RM - 60, RM, &seq);
	for (int m = RM - 60; m < RM; m++)
		for (int b = 0; b < RB; b++)
			for (int l = 0; l < RL; l++)
				c->samples[b][l][m] += had[b][l][m - (RM - 60)];
	churn_check_all(s, c, "written after retention");
	if (is_sqlite())
		assert_int_equal(rollup_mismatches(path), 0);
	free(c);
	ep_store_close(s);
}

/* More label sets share the least samples of those listed than there is
 * room for: those listed are the first of them by value, as ClickHouse
 * orders them, whichever way SQLite finds them (by label_sets' order while
 * the store holds few label sets, by reading the binary's again when it
 * holds many more), with or without a window. */
static void test_list_ties_go_by_value(void **state)
{
	(void)state;
	struct ep_store *s = open_store(true);
	enum { SETS = 30, N = 8, MANY = 6000 };
	struct slice_data *d = calloc(MANY, sizeof(*d));
	struct ep_store_slice *sl = calloc(MANY, sizeof(*sl));
	char(*pods)[16] = calloc(MANY, sizeof(*pods));
	assert_non_null(d);
	assert_non_null(sl);
	assert_non_null(pods);
	/* tie-03, -09, -14, -21, -27 have 10 samples; tie-00 to -02 and -04
	 * one; the 21 others 3: the listing's last three are tie-05 to -07.
	 * Written out of their order by value */
	for (int i = 0; i < SETS; i++) {
		int p = i * 7 % SETS;
		snprintf(pods[i], sizeof(pods[i]), "tie-%02d", p);
		make_slice(&d[i], "ab40", "/bin/tie", pods[i], 1);
		d[i].bp.samples = p == 3 || p == 9 || p == 14 || p == 21 || p == 27 ? 10
				  : p < 5					    ? 1
										    : 3;
		sl[i] = (struct ep_store_slice){600, &d[i].delta, 0, false};
	}
	struct ep_store_batch_id id = {"agent-1", 1, "node-1", 1700000000};
	struct ep_store_commit c = {&id, 1, sl, SETS};
	char err[512];
	if (ep_store_write(s, &c, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	static const char *const want[N] = {"tie-03", "tie-09", "tie-14", "tie-21",
					    "tie-27", "tie-05", "tie-06", "tie-07"};
	struct ep_store_page page = {.labels = N};
	const struct ep_store_filter filters[2] = {
	    {.build_id = "ab40"}, {.build_id = "ab40", .from_s = 600, .to_s = 660}};
	for (int round = 0; round < 2; round++) {
		for (int k = 0; k < 2; k++) {
			Edgeprof__V1__BinaryList *l =
			    ep_store_list_binaries(s, &filters[k], &page, err, sizeof(err));
			if (!l)
				fail_msg("%s", err);
			assert_int_equal(l->n_binaries, 1);
			const Edgeprof__V1__BinaryInfo *b = l->binaries[0];
			assert_int_equal(b->label_sets, SETS);
			assert_true(b->labels_truncated);
			assert_int_equal(b->n_labels, N);
			for (int i = 0; i < N; i++) {
				if (strcmp(b->labels[i]->pod, want[i]))
					fail_msg("round %d, filter %d: label set %d is %s, not %s",
						 round, k, i, b->labels[i]->pod, want[i]);
				assert_int_equal(b->label_samples[i], i < 5 ? 10 : 3);
			}
			/* the pods' values in the same order */
			const Edgeprof__V1__LabelDimension *pod = b->dimensions[1];
			assert_int_equal(pod->n_values, N);
			for (int i = 0; i < N; i++)
				assert_string_equal(pod->values[i]->value, want[i]);
			ep_store_free_list(l);
		}
		if (round)
			break;
		/* many label sets of another binary, all tied too */
		for (int i = 0; i < MANY; i++) {
			snprintf(pods[i], sizeof(pods[i]), "many-%05d", i);
			make_slice(&d[i], "ab41", "/bin/many", pods[i], 1);
			d[i].bp.samples = 3;
			sl[i] = (struct ep_store_slice){600, &d[i].delta, 0, false};
		}
		id.sequence = 2;
		c.nslices = MANY;
		if (ep_store_write(s, &c, err, sizeof(err)) != 0)
			fail_msg("%s", err);
	}
	/* and the binary that holds them: the first N of them by value */
	struct ep_store_filter many = {.build_id = "ab41"};
	Edgeprof__V1__BinaryList *l = ep_store_list_binaries(s, &many, &page, err, sizeof(err));
	assert_non_null(l);
	assert_int_equal(l->binaries[0]->label_sets, MANY);
	for (int i = 0; i < N; i++) {
		char p[16];
		snprintf(p, sizeof(p), "many-%05d", i);
		assert_string_equal(l->binaries[0]->labels[i]->pod, p);
	}
	ep_store_free_list(l);
	free(d);
	free(sl);
	free(pods);
	ep_store_close(s);
}

/* A file of schema 5 (no rollups, label values not interned) gets its
 * rollups at open, equal to its minute rows, and lists as it did. */
static void test_sqlite_version_5_file_builds_rollups(void **state)
{
	(void)state;
	if (!is_sqlite())
		skip();
	struct ep_store *s = open_store(true);
	const char *path = store_spec(false) + 7;
	struct churn *c = malloc(sizeof(*c));
	assert_non_null(c);
	churn_make(c);
	uint64_t seq = 0;
	churn_write(s, c, 0, RM, &seq);
	ep_store_close(s);
	/* back to what version 5 wrote */
	sqlite3 *db;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	char *msg = NULL;
	if (sqlite3_exec(
		db,
		"DROP TABLE label_totals; DROP TABLE label_hours; DROP TABLE binary_totals;"
		" DROP TABLE binary_hours; DROP TABLE binary_minutes; DROP TABLE label_values;"
		" ALTER TABLE label_sets DROP COLUMN v_container;"
		" ALTER TABLE label_sets DROP COLUMN v_pod;"
		" ALTER TABLE label_sets DROP COLUMN v_namespace;"
		" ALTER TABLE label_sets DROP COLUMN v_cgroup;"
		" ALTER TABLE label_sets DROP COLUMN v_process;"
		" ALTER TABLE label_sets DROP COLUMN v_session; PRAGMA user_version = 5",
		NULL, NULL, &msg) != SQLITE_OK)
		fail_msg("making a version 5 file: %s", msg);
	sqlite3_close(db);
	s = open_store(false);
	churn_check_all(s, c, "migrated");
	assert_int_equal(rollup_mismatches(path), 0);
	/* and kept from then on */
	char err[512];
	if (ep_store_prune(s, CHURN_WEEK + 61 * 60, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	for (int m = 0; m < RM; m++)
		for (int b = 0; b < RB && CHURN_BASE + 60LL * m < CHURN_WEEK + 61 * 60; b++)
			for (int l = 0; l < RL; l++)
				c->samples[b][l][m] = 0;
	churn_check_all(s, c, "migrated, pruned");
	assert_int_equal(rollup_mismatches(path), 0);
	ep_store_close(s);
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	sqlite3_stmt *q;
	assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &q, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(q), SQLITE_ROW);
	assert_int_equal(sqlite3_column_int(q, 0), 6);
	sqlite3_finalize(q);
	sqlite3_close(db);
	free(c);
}

static void test_bad_specs_name_the_problem(void **state)
{
	(void)state;
	char err[512];
	assert_null(ep_store_open("sqlite:/proc/edgeprof-none/x.db", err, sizeof(err)));
	assert_non_null(strstr(err, "/proc/edgeprof-none/x.db"));
	assert_null(ep_store_open("postgres://x", err, sizeof(err)));
	assert_non_null(strstr(err, "expected sqlite:PATH or clickhouse:URL"));
	assert_null(ep_store_open("clickhouse:ftp://x", err, sizeof(err)));
	assert_non_null(strstr(err, "expected http://"));
	assert_null(ep_store_open("clickhouse:http://127.0.0.1:1/?database=a;b", err, sizeof(err)));
	assert_non_null(strstr(err, "database name"));
}

/* SQLite only: a file from a newer collector is refused, not rewritten. */
static void test_newer_sqlite_schema_is_refused(void **state)
{
	(void)state;
	if (!is_sqlite())
		skip();
	struct ep_store *s = open_store(true);
	ep_store_close(s);
	sqlite3 *db;
	assert_int_equal(sqlite3_open(store_spec(false) + 7, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "PRAGMA user_version = 99", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	char err[512];
	assert_null(ep_store_open(store_spec(false), err, sizeof(err)));
	assert_non_null(strstr(err, "schema version 99 is newer"));
}

/* Continuous and session counts of the same binary, container and edges,
 * stored in one commit from one batch: a filter gets one side or the other,
 * never their sum. */
static void test_session_counts_are_kept_apart(void **state)
{
	(void)state;
	struct ep_store *s = open_store(true);
	struct slice_data cont, sess;
	make_slice(&cont, "ee05", "/bin/e", "", 1);
	make_slice(&sess, "ee05", "/bin/e", "", 5);
	cont.labels.container_id = sess.labels.container_id = "c1";
	sess.labels.session_id = "s-1";
	struct ep_store_batch_id id = {"agent-1", 1, "node-1", 1700000000};
	struct ep_store_slice sl[2] = {{60, &cont.delta, 0, false}, {60, &sess.delta, 0, false}};
	struct ep_store_commit c = {&id, 1, sl, 2};
	char err[512];
	if (ep_store_write(s, &c, err, sizeof(err)) != 0)
		fail_msg("%s", err);

	const char *const sides[] = {NULL, "", "s-1", "s-2"};
	const uint64_t taken[] = {100, 100, 500, 0}, samples[] = {10, 10, 50, 0};
	for (int i = 0; i < 4; i++) {
		struct ep_store_filter f = {.build_id = "ee05", .session_id = sides[i]};
		Edgeprof__V1__Profile *p = ep_store_profile(s, &f, err, sizeof(err));
		if (!p)
			fail_msg("%s", err);
		if (!taken[i]) {
			assert_int_equal(p->n_binaries, 0);
			ep_profile_free(p);
			continue;
		}
		assert_int_equal(p->n_binaries, 1);
		const Edgeprof__V1__BinaryProfile *bp = p->binaries[0];
		assert_int_equal(find_edge(bp, 0x1000, 0x1040, true)->count, taken[i]);
		assert_int_equal(find_edge(bp, 0x1000, 0x1006, false)->count, taken[i] / 100 * 7);
		assert_int_equal(bp->samples, samples[i]);
		assert_int_equal(bp->ranges[0]->count, taken[i] / 2);
		assert_int_equal(bp->ips[0]->count, taken[i] / 50);
		ep_profile_free(p);
	}
	/* the listing too, with the session in the label set */
	struct ep_store_filter all = {0}, s1 = {.session_id = "s-1"}, s2 = {.session_id = "s-2"};
	Edgeprof__V1__BinaryList *l = ep_store_list_binaries(s, &all, NULL, err, sizeof(err));
	assert_non_null(l);
	assert_int_equal(l->n_binaries, 1);
	assert_int_equal(l->binaries[0]->samples, 10);
	assert_int_equal(l->binaries[0]->n_labels, 1);
	assert_string_equal(l->binaries[0]->labels[0]->container_id, "c1");
	assert_string_equal(l->binaries[0]->labels[0]->session_id, "");
	ep_store_free_list(l);
	l = ep_store_list_binaries(s, &s1, NULL, err, sizeof(err));
	assert_non_null(l);
	assert_int_equal(l->n_binaries, 1);
	assert_int_equal(l->binaries[0]->samples, 50);
	assert_int_equal(l->binaries[0]->n_labels, 1);
	assert_string_equal(l->binaries[0]->labels[0]->container_id, "c1");
	assert_string_equal(l->binaries[0]->labels[0]->session_id, "s-1");
	ep_store_free_list(l);
	l = ep_store_list_binaries(s, &s2, NULL, err, sizeof(err));
	assert_non_null(l);
	assert_int_equal(l->n_binaries, 0);
	ep_store_free_list(l);
	/* GET /v1/binaries shows a session's label sets with their session */
	struct ep_api_response r = {0};
	ep_api_binaries(s, &s1, NULL, &r);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.body, "\"container_id\": \"c1\""));
	assert_non_null(strstr(r.body, "\"session_id\": \"s-1\""));
	assert_non_null(strstr(r.body, "\"samples\": 50"));
	free(r.body);
	memset(&r, 0, sizeof(r));
	ep_api_binaries(s, &all, NULL, &r);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.body, "\"samples\": 10"));
	assert_null(strstr(r.body, "session_id"));
	free(r.body);
	ep_store_close(s);
}

static void make_session(Edgeprof__V1__Session *m, const char *id, int64_t created_s,
			 Edgeprof__V1__SessionState state, uint64_t updated_ns)
{
	static char *refused[] = {"node-7", "node\t8"};
	edgeprof__v1__session__init(m);
	m->id = (char *)id;
	m->node = "node-1";
	m->container_id = "0123456789abcdef";
	m->cgroup = "/sys/fs/cgroup/kubepods/x";
	m->pid = 4242;
	m->duration_ms = 30000;
	m->period = 20011;
	m->mode = "edges";
	m->state = state;
	m->message = "cgroup /kubepods/x\nresolved"; /* bytes TSV escapes */
	m->created_s = created_s;
	m->started_s = created_s + 1;
	m->ended_s = state >= EDGEPROF__V1__SESSION_STATE__SESSION_DONE ? created_s + 31 : 0;
	m->agent_id = "agent-1";
	m->samples = 123456;
	m->deadline_ns = (uint64_t)(created_s + 31) * 1000000000ULL;
	m->refused_by = refused;
	m->n_refused_by = 2;
	m->updated_ns = updated_ns;
}

static void assert_same_session(const Edgeprof__V1__Session *a, const Edgeprof__V1__Session *b)
{
	/* every field, by the wire form: equal messages pack to equal bytes */
	size_t la = edgeprof__v1__session__get_packed_size(a);
	size_t lb = edgeprof__v1__session__get_packed_size(b);
	assert_int_equal(la, lb);
	uint8_t *pa = malloc(la), *pb = malloc(lb);
	edgeprof__v1__session__pack(a, pa);
	edgeprof__v1__session__pack(b, pb);
	assert_memory_equal(pa, pb, la);
	free(pa);
	free(pb);
}

static void test_sessions_round_trip_newest_wins(void **state)
{
	(void)state;
	struct ep_store *s = open_store(true);
	char err[512];
	Edgeprof__V1__Session m;
	make_session(&m, "s-1", 1700000000, EDGEPROF__V1__SESSION_STATE__SESSION_RUNNING,
		     1700000001000000000ULL);
	if (ep_store_session_put(s, &m, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	Edgeprof__V1__Session *got = ep_store_session_get(s, "s-1", err, sizeof(err));
	if (!got)
		fail_msg("%s", err);
	assert_string_equal(got->id, "s-1");
	assert_int_equal(got->pid, 4242);
	assert_string_equal(got->message, "cgroup /kubepods/x\nresolved");
	assert_int_equal(got->n_refused_by, 2);
	assert_string_equal(got->refused_by[1], "node\t8");
	assert_int_equal(got->deadline_ns, 1700000031000000000ULL);
	assert_same_session(got, &m);
	ep_store_free_session(got);

	/* an update moves it on */
	Edgeprof__V1__Session done;
	make_session(&done, "s-1", 1700000000, EDGEPROF__V1__SESSION_STATE__SESSION_DONE,
		     1700000040000000000ULL);
	done.samples = 999;
	assert_int_equal(ep_store_session_put(s, &done, err, sizeof(err)), 0);
	got = ep_store_session_get(s, "s-1", err, sizeof(err));
	assert_non_null(got);
	assert_int_equal(got->state, EDGEPROF__V1__SESSION_STATE__SESSION_DONE);
	assert_same_session(got, &done);
	ep_store_free_session(got);
	/* an older one (a slower collector) does not move it back */
	assert_int_equal(ep_store_session_put(s, &m, err, sizeof(err)), 0);
	got = ep_store_session_get(s, "s-1", err, sizeof(err));
	assert_non_null(got);
	assert_int_equal(got->state, EDGEPROF__V1__SESSION_STATE__SESSION_DONE);
	assert_int_equal(got->samples, 999);
	ep_store_free_session(got);
	/* at equal updated_ns the later put wins */
	done.samples = 1000;
	assert_int_equal(ep_store_session_put(s, &done, err, sizeof(err)), 0);
	got = ep_store_session_get(s, "s-1", err, sizeof(err));
	assert_non_null(got);
	assert_int_equal(got->samples, 1000);
	ep_store_free_session(got);

	/* an unknown id: NULL, and no error */
	strcpy(err, "stale");
	assert_null(ep_store_session_get(s, "s-none", err, sizeof(err)));
	assert_string_equal(err, "");
	assert_null(ep_store_session_get(s, "x' OR '1'='1", err, sizeof(err)));
	assert_string_equal(err, "");
	/* no id: refused */
	Edgeprof__V1__Session anon;
	make_session(&anon, "", 1, EDGEPROF__V1__SESSION_STATE__SESSION_PENDING, 1);
	assert_int_equal(ep_store_session_put(s, &anon, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "id"));

	/* unfinished: pending and running only, by created_s then id */
	Edgeprof__V1__Session more[4];
	make_session(&more[0], "s-b", 1700000100, EDGEPROF__V1__SESSION_STATE__SESSION_PENDING, 5);
	make_session(&more[1], "s-a", 1700000100, EDGEPROF__V1__SESSION_STATE__SESSION_RUNNING, 5);
	make_session(&more[2], "s-0", 1700000200, EDGEPROF__V1__SESSION_STATE__SESSION_PENDING, 5);
	make_session(&more[3], "s-f", 1700000050, EDGEPROF__V1__SESSION_STATE__SESSION_FAILED, 5);
	for (int i = 0; i < 4; i++)
		assert_int_equal(ep_store_session_put(s, &more[i], err, sizeof(err)), 0);
	/* s-b taken by an agent: still unfinished, once */
	more[0].state = EDGEPROF__V1__SESSION_STATE__SESSION_RUNNING;
	more[0].updated_ns = 6;
	assert_int_equal(ep_store_session_put(s, &more[0], err, sizeof(err)), 0);
	ep_store_close(s);
	/* and all of it survives a restart */
	s = open_store(false);
	Edgeprof__V1__SessionList *l = ep_store_sessions_unfinished(s, err, sizeof(err));
	if (!l)
		fail_msg("%s", err);
	assert_int_equal(l->n_sessions, 3);
	assert_string_equal(l->sessions[0]->id, "s-a");
	assert_string_equal(l->sessions[1]->id, "s-b");
	assert_int_equal(l->sessions[1]->state, EDGEPROF__V1__SESSION_STATE__SESSION_RUNNING);
	assert_string_equal(l->sessions[2]->id, "s-0");
	assert_same_session(l->sessions[2], &more[2]);
	ep_store_free_session_list(l);
	got = ep_store_session_get(s, "s-1", err, sizeof(err));
	assert_non_null(got);
	assert_same_session(got, &done);
	ep_store_free_session(got);
	ep_store_close(s);
}

/* Retention forgets finished sessions that ended before the cut (or, never
 * started, were created before it); running ones and later ones stay. */
static void test_prune_forgets_finished_sessions(void **state)
{
	(void)state;
	struct ep_store *s = open_store(true);
	char err[512];
	const int64_t week = 604800;
	Edgeprof__V1__Session m[5];
	make_session(&m[0], "old-done", 100, EDGEPROF__V1__SESSION_STATE__SESSION_DONE, 1);
	make_session(&m[1], "old-failed", 100, EDGEPROF__V1__SESSION_STATE__SESSION_FAILED, 1);
	m[1].ended_s = 0; /* failed before it started */
	make_session(&m[2], "old-running", 100, EDGEPROF__V1__SESSION_STATE__SESSION_RUNNING, 1);
	make_session(&m[3], "new-done", 3 * week, EDGEPROF__V1__SESSION_STATE__SESSION_DONE, 1);
	/* created before the cut, ended after it */
	make_session(&m[4], "long-done", 2 * week - 10, EDGEPROF__V1__SESSION_STATE__SESSION_DONE,
		     1);
	for (int i = 0; i < 5; i++)
		assert_int_equal(ep_store_session_put(s, &m[i], err, sizeof(err)), 0);
	/* an old running version of a session that is done now: goes with it */
	Edgeprof__V1__Session before;
	make_session(&before, "old-done", 100, EDGEPROF__V1__SESSION_STATE__SESSION_RUNNING, 0);
	assert_int_equal(ep_store_session_put(s, &before, err, sizeof(err)), 0);
	/* and the other way round: only the newest version decides */
	Edgeprof__V1__Session failed, retried;
	make_session(&failed, "retried", 100, EDGEPROF__V1__SESSION_STATE__SESSION_FAILED, 1);
	make_session(&retried, "retried", 100, EDGEPROF__V1__SESSION_STATE__SESSION_RUNNING, 2);
	assert_int_equal(ep_store_session_put(s, &failed, err, sizeof(err)), 0);
	assert_int_equal(ep_store_session_put(s, &retried, err, sizeof(err)), 0);
	if (ep_store_prune(s, 2 * week, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	const char *gone[] = {"old-done", "old-failed"},
		   *kept[] = {"old-running", "new-done", "long-done", "retried"};
	/* ClickHouse deletes by a background mutation: give it time */
	for (int g = 0; g < 2; g++) {
		Edgeprof__V1__Session *got = NULL;
		for (int i = 0; i < 50; i++) {
			ep_store_free_session(got);
			got = ep_store_session_get(s, gone[g], err, sizeof(err));
			if (!got)
				break;
			usleep(100000);
		}
		assert_null(got);
		assert_string_equal(err, "");
	}
	for (int k = 0; k < 4; k++) {
		Edgeprof__V1__Session *got = ep_store_session_get(s, kept[k], err, sizeof(err));
		assert_non_null(got);
		ep_store_free_session(got);
	}
	Edgeprof__V1__SessionList *l = ep_store_sessions_unfinished(s, err, sizeof(err));
	assert_non_null(l);
	assert_int_equal(l->n_sessions, 2);
	assert_string_equal(l->sessions[0]->id, "old-running");
	assert_string_equal(l->sessions[1]->id, "retried");
	ep_store_free_session_list(l);
	ep_store_close(s);
}

/* The finished sessions listed for the UI: the latest ended first (one
 * that never started by its creation), at most the limit, none unfinished. */
static void test_finished_sessions_latest_first(void **state)
{
	(void)state;
	struct ep_store *s = open_store(true);
	char err[512];
	Edgeprof__V1__Session m[4];
	make_session(&m[0], "ended-early", 100, EDGEPROF__V1__SESSION_STATE__SESSION_DONE, 1);
	make_session(&m[1], "ended-late", 50, EDGEPROF__V1__SESSION_STATE__SESSION_DONE, 1);
	m[1].ended_s = 1000;
	make_session(&m[2], "never-started", 500, EDGEPROF__V1__SESSION_STATE__SESSION_FAILED, 1);
	m[2].ended_s = 0;
	make_session(&m[3], "running", 900, EDGEPROF__V1__SESSION_STATE__SESSION_RUNNING, 1);
	for (int i = 0; i < 4; i++)
		assert_int_equal(ep_store_session_put(s, &m[i], err, sizeof(err)), 0);
	Edgeprof__V1__SessionList *l = ep_store_sessions_finished(s, 10, err, sizeof(err));
	assert_non_null(l);
	assert_int_equal(l->n_sessions, 3);
	assert_string_equal(l->sessions[0]->id, "ended-late");
	assert_string_equal(l->sessions[1]->id, "never-started");
	assert_string_equal(l->sessions[2]->id, "ended-early");
	ep_store_free_session_list(l);
	l = ep_store_sessions_finished(s, 1, err, sizeof(err));
	assert_non_null(l);
	assert_int_equal(l->n_sessions, 1);
	assert_string_equal(l->sessions[0]->id, "ended-late");
	ep_store_free_session_list(l);
	ep_store_close(s);
}

static void put_node(struct ep_store *s, const char *name, const char *agent, uint64_t seen_ns,
		     uint64_t samples, uint64_t lost)
{
	Edgeprof__V1__Node n = EDGEPROF__V1__NODE__INIT;
	n.name = (char *)name;
	n.agent_id = (char *)agent;
	n.version = (char *)"0.1.0";
	n.event = (char *)"cpu-clock";
	n.sessions = true;
	n.seen_ns = seen_ns;
	n.samples_per_s = 12.5;
	n.samples = samples;
	n.samples_with_branches = samples / 2;
	n.lost = lost;
	Edgeprof__V1__Node *one[] = {&n};
	char err[512];
	if (ep_store_nodes_put(s, one, 1, err, sizeof(err)) != 0)
		fail_msg("%s", err);
}

/* Nodes as collector replicas put them: the newest record wins whichever
 * put it (and in whichever order), every put's sums add up, the list comes
 * sorted by name, and retention forgets a node not seen since the cut. */
static void test_nodes_newest_wins_sums_add(void **state)
{
	(void)state;
	struct ep_store *s = open_store(true);
	char err[512];
	const uint64_t sec = 1000000000ULL;
	const uint64_t now = (uint64_t)time(NULL) * sec;
	put_node(s, "n2", "agent-b", now - 5 * sec, 100, 1);
	put_node(s, "n1", "agent-a", now - 3 * sec, 10, 0);
	/* a replica that heard an older batch writes after a newer one */
	put_node(s, "n2", "agent-old", now - 9 * sec, 30, 2);
	put_node(s, "n2", "agent-c", now - 1 * sec, 0, 0);
	put_node(s, "gone", "agent-g", 100 * sec, 7, 0);
	Edgeprof__V1__NodeList *l = ep_store_nodes(s, err, sizeof(err));
	if (!l)
		fail_msg("%s", err);
	assert_int_equal(l->n_nodes, 3);
	assert_string_equal(l->nodes[0]->name, "gone");
	assert_string_equal(l->nodes[1]->name, "n1");
	assert_string_equal(l->nodes[1]->agent_id, "agent-a");
	assert_int_equal(l->nodes[1]->samples, 10);
	const Edgeprof__V1__Node *n2 = l->nodes[2];
	assert_string_equal(n2->name, "n2");
	assert_string_equal(n2->agent_id, "agent-c");
	assert_int_equal(n2->seen_ns, now - 1 * sec);
	assert_true(n2->sessions);
	assert_string_equal(n2->event, "cpu-clock");
	assert_true(n2->samples_per_s == 12.5);
	assert_int_equal(n2->samples, 130);
	assert_int_equal(n2->samples_with_branches, 65);
	assert_int_equal(n2->lost, 3);
	ep_store_free_node_list(l);
	if (ep_store_prune(s, (int64_t)(now / sec) - 3600, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	/* ClickHouse deletes by a background mutation: wait for it */
	for (int i = 0; i < 100; i++) {
		l = ep_store_nodes(s, err, sizeof(err));
		assert_non_null(l);
		if (l->n_nodes == 2)
			break;
		ep_store_free_node_list(l);
		l = NULL;
		usleep(100000);
	}
	assert_non_null(l);
	assert_int_equal(l->n_nodes, 2);
	assert_string_equal(l->nodes[0]->name, "n1");
	assert_string_equal(l->nodes[1]->agent_id, "agent-c");
	assert_int_equal(l->nodes[1]->samples, 130);
	ep_store_free_node_list(l);
	ep_store_close(s);
}

/* The schema of a version-1 SQLite file, as the collector wrote it before
 * sessions: the migration must take this exact file. */
static const char sqlite_v1_schema[] =
    "CREATE TABLE IF NOT EXISTS binaries(id INTEGER PRIMARY KEY, build_id TEXT NOT NULL UNIQUE,"
    " arch TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS binary_paths(binary_id INTEGER NOT NULL, path TEXT NOT NULL,"
    " PRIMARY KEY(binary_id, path)) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS label_sets(id INTEGER PRIMARY KEY, container_id TEXT NOT NULL,"
    " pod TEXT NOT NULL, namespace TEXT NOT NULL, cgroup TEXT NOT NULL, process TEXT NOT NULL,"
    " UNIQUE(container_id, pod, namespace, cgroup, process));"
    "CREATE TABLE IF NOT EXISTS samples(binary_id INTEGER NOT NULL, bucket INTEGER NOT NULL,"
    " label_set INTEGER NOT NULL, count INTEGER NOT NULL,"
    " PRIMARY KEY(binary_id, bucket, label_set)) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS edges(binary_id INTEGER NOT NULL, bucket INTEGER NOT NULL,"
    " label_set INTEGER NOT NULL, from_addr INTEGER NOT NULL, to_addr INTEGER NOT NULL,"
    " flags INTEGER NOT NULL, kind INTEGER NOT NULL, count INTEGER NOT NULL,"
    " mispredicted INTEGER NOT NULL,"
    " PRIMARY KEY(binary_id, bucket, label_set, from_addr, to_addr, flags)) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS ranges(binary_id INTEGER NOT NULL, bucket INTEGER NOT NULL,"
    " label_set INTEGER NOT NULL, start_addr INTEGER NOT NULL, end_addr INTEGER NOT NULL,"
    " count INTEGER NOT NULL,"
    " PRIMARY KEY(binary_id, bucket, label_set, start_addr, end_addr)) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS ips(binary_id INTEGER NOT NULL, bucket INTEGER NOT NULL,"
    " label_set INTEGER NOT NULL, ip INTEGER NOT NULL, count INTEGER NOT NULL,"
    " PRIMARY KEY(binary_id, bucket, label_set, ip)) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS functions(binary_id INTEGER NOT NULL, start_addr INTEGER NOT NULL,"
    " name TEXT NOT NULL, size INTEGER NOT NULL, PRIMARY KEY(binary_id, start_addr, name))"
    " WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS segments(binary_id INTEGER NOT NULL, vaddr INTEGER NOT NULL,"
    " file_offset INTEGER NOT NULL, size INTEGER NOT NULL,"
    " PRIMARY KEY(binary_id, vaddr, file_offset, size)) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS batches(agent_id TEXT NOT NULL, sequence INTEGER NOT NULL,"
    " node TEXT NOT NULL, received INTEGER NOT NULL, PRIMARY KEY(agent_id, sequence))"
    " WITHOUT ROWID;";

/* A version-1 file opens, migrates (label_sets rebuilt with session_id in
 * its key, ids kept), keeps its counts and takes session counts. */
static Edgeprof__V1__Profile *profile_of(struct ep_store *s, const struct ep_store_filter *f)
{
	char err[512];
	Edgeprof__V1__Profile *p = ep_store_profile(s, f, err, sizeof(err));
	if (!p)
		fail_msg("%s", err);
	assert_int_equal(p->n_binaries, 1);
	assert_int_equal(p->binaries[0]->n_ips, 1);
	assert_int_equal(p->binaries[0]->n_ranges, 1);
	return p;
}

/* agent --cycles' time at IPs is summed over batches like the counts, and
 * cycles and cpu-clock nanoseconds are never added: a profile gives one
 * unit and says which. */
static void test_ip_cycles_sum_and_units_stay_apart(void **state)
{
	(void)state;
	struct ep_store *s = open_store(true);
	struct slice_data c1, c2, n1, n2, mixed;
	make_slice(&c1, "cc01", "/bin/c", "pod-1", 1);
	make_slice(&c2, "cc01", "/bin/c", "pod-1", 2);
	c1.ip.cycles = 1000;
	c2.ip.cycles = 3000;
	write_unit(s, "agent-1", 1, 60, &c1, false);
	write_unit(s, "agent-1", 2, 60, &c2, false);
	struct ep_store_filter fc = {.build_id = "cc01"};
	Edgeprof__V1__Profile *p = profile_of(s, &fc);
	assert_int_equal(p->binaries[0]->ips[0]->cycles, 4000);
	assert_int_equal(p->binaries[0]->ips[0]->count, 6);
	assert_int_equal(p->binaries[0]->ranges[0]->cycles, 210);
	assert_string_equal(p->config->cycles_unit, "cycles");
	ep_profile_free(p);

	/* nanoseconds alone: summed, and said to be nanoseconds */
	make_slice(&n1, "dd01", "/bin/d", "pod-1", 1);
	make_slice(&n2, "dd01", "/bin/d", "pod-1", 4);
	n1.ip.cycles = 5000;
	n2.ip.cycles = 7000;
	write_unit(s, "agent-2", 1, 60, &n1, true);
	write_unit(s, "agent-2", 2, 120, &n2, true);
	struct ep_store_filter fn = {.build_id = "dd01"};
	p = profile_of(s, &fn);
	assert_int_equal(p->binaries[0]->ips[0]->cycles, 12000);
	assert_int_equal(p->binaries[0]->ranges[0]->cycles, 350);
	assert_int_equal(p->binaries[0]->ranges[0]->cycled_instructions, 450);
	assert_string_equal(p->config->cycles_unit, "ns");
	assert_string_equal(p->config->cycles_source, "cpu_clock");
	ep_profile_free(p);

	/* a node without a cycles event profiles cc01 too, in the same bucket
	 * and labels: the cycles are given alone, not 1,000,000 ns more */
	make_slice(&mixed, "cc01", "/bin/c", "pod-1", 8);
	mixed.ip.cycles = 1000000;
	write_unit(s, "agent-3", 1, 60, &mixed, true);
	p = profile_of(s, &fc);
	assert_int_equal(p->binaries[0]->ips[0]->cycles, 4000);
	assert_int_equal(p->binaries[0]->ips[0]->count, 22);
	assert_int_equal(p->binaries[0]->ranges[0]->cycles, 210);
	assert_int_equal(p->binaries[0]->ranges[0]->cycled_instructions, 270);
	assert_string_equal(p->config->cycles_unit, "cycles");
	ep_profile_free(p);
	/* and its nanoseconds are kept: a later bucket holds only them */
	write_unit(s, "agent-3", 2, 180, &mixed, true);
	struct ep_store_filter later = {.build_id = "cc01", .from_s = 180};
	p = profile_of(s, &later);
	assert_int_equal(p->binaries[0]->ips[0]->cycles, 1000000);
	assert_int_equal(p->binaries[0]->ranges[0]->cycles, 560);
	assert_string_equal(p->config->cycles_unit, "ns");
	ep_profile_free(p);
	ep_store_close(s);
}

static void test_sqlite_version_1_file_migrates(void **state)
{
	(void)state;
	if (!is_sqlite())
		skip();
	const char *path = store_spec(true) + 7;
	sqlite3 *db;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, sqlite_v1_schema, NULL, NULL, NULL), SQLITE_OK);
	/* label set 7, not 1: the count rows must still find theirs */
	const char *rows = "INSERT INTO binaries VALUES(3, 'ff06', 'x86_64');"
			   "INSERT INTO binary_paths VALUES(3, '/bin/f');"
			   "INSERT INTO label_sets VALUES(7, 'c1', '', '', '', '');"
			   "INSERT INTO samples VALUES(3, 60, 7, 10);"
			   "INSERT INTO edges VALUES(3, 60, 7, 4096, 4160, 1, 1, 100, 1);"
			   "INSERT INTO ranges VALUES(3, 60, 7, 4160, 4192, 50);"
			   "INSERT INTO ips VALUES(3, 60, 7, 4164, 2);"
			   "INSERT INTO functions VALUES(3, 4096, 'hot_loop', 128);"
			   "INSERT INTO batches VALUES('agent-1', 1, 'node-1', 1700000000);"
			   "PRAGMA user_version = 1;";
	assert_int_equal(sqlite3_exec(db, rows, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);

	struct ep_store *s = open_store(false);
	char err[512];
	assert_int_equal(ep_store_has_batch(s, "agent-1", 1, err, sizeof(err)), 1);
	struct ep_store_filter f = {.build_id = "ff06"};
	Edgeprof__V1__Profile *p = ep_store_profile(s, &f, err, sizeof(err));
	if (!p)
		fail_msg("%s", err);
	assert_int_equal(p->n_binaries, 1);
	assert_int_equal(find_edge(p->binaries[0], 0x1000, 0x1040, true)->count, 100);
	assert_int_equal(p->binaries[0]->samples, 10);
	assert_int_equal(p->binaries[0]->ranges[0]->count, 50);
	/* version 4's columns: a range from before them has no cycles */
	assert_int_equal(p->binaries[0]->ranges[0]->cycles, 0);
	assert_int_equal(p->binaries[0]->ranges[0]->cycled_instructions, 0);
	/* version 5's: nor an IP, and a profile without any names no unit */
	assert_int_equal(p->binaries[0]->ips[0]->cycles, 0);
	assert_string_equal(p->config->cycles_unit, "");
	/* version 3's column: a function from before it reads as global */
	assert_int_equal(p->binaries[0]->n_functions, 1);
	assert_int_equal(p->binaries[0]->functions[0]->local_index, 0);
	ep_profile_free(p);
	/* the same labels again, continuous and for a session */
	struct slice_data cont, sess;
	make_slice(&cont, "ff06", "/bin/f", "", 1);
	make_slice(&sess, "ff06", "/bin/f", "", 5);
	cont.labels.container_id = sess.labels.container_id = "c1";
	sess.labels.session_id = "s-1";
	struct ep_store_batch_id id = {"agent-1", 2, "node-1", 1700000100};
	struct ep_store_slice sl[2] = {{60, &cont.delta, 0, false}, {60, &sess.delta, 0, false}};
	struct ep_store_commit c = {&id, 1, sl, 2};
	if (ep_store_write(s, &c, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	p = ep_store_profile(s, &f, err, sizeof(err));
	assert_non_null(p);
	assert_int_equal(find_edge(p->binaries[0], 0x1000, 0x1040, true)->count, 200);
	assert_int_equal(p->binaries[0]->samples, 20);
	/* a newer agent's row names the local: BOLT's name is not lost to the
	 * older row of the same function */
	assert_int_equal(p->binaries[0]->n_functions, 1);
	assert_int_equal(p->binaries[0]->functions[0]->local_index, 2);
	ep_profile_free(p);
	f.session_id = "s-1";
	p = ep_store_profile(s, &f, err, sizeof(err));
	assert_non_null(p);
	assert_int_equal(find_edge(p->binaries[0], 0x1000, 0x1040, true)->count, 500);
	assert_int_equal(p->binaries[0]->samples, 50);
	ep_profile_free(p);

	/* the listing from the rollups built at open: the continuous label
	 * set and the session's apart */
	struct ep_store_filter all = {0}, s1 = {.session_id = "s-1"};
	Edgeprof__V1__BinaryList *l = ep_store_list_binaries(s, &all, NULL, err, sizeof(err));
	assert_non_null(l);
	assert_int_equal(l->n_binaries, 1);
	assert_int_equal(l->binaries[0]->samples, 20);
	assert_int_equal(l->binaries[0]->label_sets, 1);
	assert_string_equal(l->binaries[0]->labels[0]->container_id, "c1");
	ep_store_free_list(l);
	l = ep_store_list_binaries(s, &s1, NULL, err, sizeof(err));
	assert_non_null(l);
	assert_int_equal(l->binaries[0]->samples, 50);
	ep_store_free_list(l);
	ep_store_close(s);
	assert_int_equal(rollup_mismatches(path), 0);

	/* version 6 now, the old label set kept its id, and opening again is a no-op */
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	sqlite3_stmt *q;
	assert_int_equal(
	    sqlite3_prepare_v2(db,
			       "SELECT (SELECT user_version FROM pragma_user_version),"
			       " (SELECT id FROM label_sets WHERE container_id = 'c1'"
			       " AND session_id = ''), (SELECT COUNT(*) FROM label_sets)",
			       -1, &q, NULL),
	    SQLITE_OK);
	assert_int_equal(sqlite3_step(q), SQLITE_ROW);
	assert_int_equal(sqlite3_column_int(q, 0), 6);
	assert_int_equal(sqlite3_column_int(q, 1), 7);
	assert_int_equal(sqlite3_column_int(q, 2), 2);
	sqlite3_finalize(q);
	sqlite3_close(db);
	s = open_store(false);
	p = ep_store_profile(s, &f, err, sizeof(err));
	assert_non_null(p);
	assert_int_equal(find_edge(p->binaries[0], 0x1000, 0x1040, true)->count, 500);
	ep_profile_free(p);
	ep_store_close(s);
}

static size_t ch_answer(char *data, size_t size, size_t n, void *out)
{
	FILE *f = out;
	return fwrite(data, size, n, f) * size;
}

/* Runs sql on the test's ClickHouse database; the answer in out (malloc'd)
 * when not NULL. 0 on HTTP 200. */
static int ch_query(const char *db, const char *sql, char **out)
{
	const char *base = getenv("EDGEPROF_TEST_STORE") + 11;
	char url[512];
	/* the server in the spec, without its parameters (cluster=) */
	snprintf(url, sizeof(url), "%.*s/?database=%s", ep_test_url_server_len(base), base, db);
	char *answer = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&answer, &len);
	CURL *c = curl_easy_init();
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, sql);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, ch_answer);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, f);
	long status = 0;
	int rc = curl_easy_perform(c) == CURLE_OK ? 0 : -1;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(c);
	fclose(f);
	if (rc != 0 || status != 200) {
		print_error("clickhouse: %s: %s\n", sql, answer ? answer : "");
		rc = -1;
	}
	if (out)
		*out = answer;
	else
		free(answer);
	return rc;
}

/* The count tables as the collector created them before sessions. */
static const char *const clickhouse_v1_tables[] = {
    "CREATE TABLE IF NOT EXISTS batches (agent_id String, sequence UInt64, node String,"
    " received Int64) ENGINE = ReplacingMergeTree() ORDER BY (agent_id, sequence)",
    "CREATE TABLE IF NOT EXISTS samples (build_id String, arch String, bucket Int64,"
    " container_id String, pod String, namespace String, cgroup String, process String,"
    " count UInt64, agent_id String, sequence UInt64) ENGINE = ReplacingMergeTree()"
    " PARTITION BY intDiv(bucket, 604800) ORDER BY (build_id, bucket, container_id, pod,"
    " namespace, cgroup, process, agent_id, sequence)",
    "CREATE TABLE IF NOT EXISTS edges (build_id String, bucket Int64, container_id String,"
    " pod String, namespace String, cgroup String, process String, from_addr UInt64,"
    " to_addr UInt64, flags UInt8, kind UInt8, count UInt64, mispredicted UInt64,"
    " agent_id String, sequence UInt64) ENGINE = ReplacingMergeTree()"
    " PARTITION BY intDiv(bucket, 604800) ORDER BY (build_id, bucket, container_id, pod,"
    " namespace, cgroup, process, from_addr, to_addr, flags, agent_id, sequence)",
    "CREATE TABLE IF NOT EXISTS ranges (build_id String, bucket Int64, container_id String,"
    " pod String, namespace String, cgroup String, process String, start_addr UInt64,"
    " end_addr UInt64, count UInt64, agent_id String, sequence UInt64)"
    " ENGINE = ReplacingMergeTree() PARTITION BY intDiv(bucket, 604800) ORDER BY (build_id,"
    " bucket, container_id, pod, namespace, cgroup, process, start_addr, end_addr, agent_id,"
    " sequence)",
    "CREATE TABLE IF NOT EXISTS ips (build_id String, bucket Int64, container_id String,"
    " pod String, namespace String, cgroup String, process String, ip UInt64, count UInt64,"
    " agent_id String, sequence UInt64) ENGINE = ReplacingMergeTree()"
    " PARTITION BY intDiv(bucket, 604800) ORDER BY (build_id, bucket, container_id, pod,"
    " namespace, cgroup, process, ip, agent_id, sequence)",
    "CREATE TABLE IF NOT EXISTS paths (build_id String, path String)"
    " ENGINE = ReplacingMergeTree() ORDER BY (build_id, path)",
    "CREATE TABLE IF NOT EXISTS functions (build_id String, start_addr UInt64, name String,"
    " size UInt64) ENGINE = ReplacingMergeTree() ORDER BY (build_id, start_addr, name)",
    "CREATE TABLE IF NOT EXISTS segments (build_id String, vaddr UInt64, file_offset UInt64,"
    " size UInt64) ENGINE = ReplacingMergeTree() ORDER BY (build_id, vaddr, file_offset, size)",
};

/* Tables from before sessions gain session_id, in their sorting key too (a
 * session row must not replace the continuous row of its batch when parts
 * merge), keep their rows and take session counts. */
static void test_clickhouse_tables_from_before_sessions_migrate(void **state)
{
	(void)state;
	if (is_sqlite())
		skip();
	store_spec(true);
	char db[128];
	snprintf(db, sizeof(db), "edgeprof_test_%d_%d", (int)getpid(), test_number);
	char create[256];
	snprintf(create, sizeof(create), "CREATE DATABASE %s", db);
	assert_int_equal(ch_query("default", create, NULL), 0);
	for (size_t i = 0; i < sizeof(clickhouse_v1_tables) / sizeof(clickhouse_v1_tables[0]); i++)
		assert_int_equal(ch_query(db, clickhouse_v1_tables[i], NULL), 0);
	assert_int_equal(ch_query(db,
				  "INSERT INTO samples VALUES ('ff06', 'x86_64', 60, 'c1', '', '',"
				  " '', '', 10, 'agent-1', 1)",
				  NULL),
			 0);
	assert_int_equal(
	    ch_query(db,
		     "INSERT INTO edges VALUES ('ff06', 60, 'c1', '', '', '', '', 4096,"
		     " 4160, 1, 1, 100, 1, 'agent-1', 1)",
		     NULL),
	    0);
	assert_int_equal(
	    ch_query(db, "INSERT INTO batches VALUES ('agent-1', 1, 'node-1', 1700000000)", NULL),
	    0);

	struct ep_store *s = open_store(false);
	char err[512];
	struct ep_store_filter f = {.build_id = "ff06"};
	Edgeprof__V1__Profile *p = ep_store_profile(s, &f, err, sizeof(err));
	if (!p)
		fail_msg("%s", err);
	assert_int_equal(p->n_binaries, 1);
	assert_int_equal(find_edge(p->binaries[0], 0x1000, 0x1040, true)->count, 100);
	assert_int_equal(p->binaries[0]->samples, 10);
	ep_profile_free(p);
	/* continuous and session rows of one batch, equal in every key column
	 * but session_id */
	struct slice_data cont, sess;
	make_slice(&cont, "ff06", "/bin/f", "", 1);
	make_slice(&sess, "ff06", "/bin/f", "", 5);
	cont.labels.container_id = sess.labels.container_id = "c1";
	sess.labels.session_id = "s-1";
	struct ep_store_batch_id id = {"agent-1", 2, "node-1", 1700000100};
	struct ep_store_slice sl[2] = {{60, &cont.delta, 0, false}, {60, &sess.delta, 0, false}};
	struct ep_store_commit c = {&id, 1, sl, 2};
	if (ep_store_write(s, &c, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	ep_store_close(s);
	/* opening again changes nothing; merging parts keeps both rows */
	s = open_store(false);
	assert_int_equal(ch_query(db, "OPTIMIZE TABLE edges FINAL", NULL), 0);
	assert_int_equal(ch_query(db, "OPTIMIZE TABLE samples FINAL", NULL), 0);
	const uint64_t taken[] = {200, 500}, samples[] = {20, 50};
	for (int i = 0; i < 2; i++) {
		f.session_id = i ? "s-1" : NULL;
		p = ep_store_profile(s, &f, err, sizeof(err));
		if (!p)
			fail_msg("%s", err);
		assert_int_equal(find_edge(p->binaries[0], 0x1000, 0x1040, true)->count, taken[i]);
		assert_int_equal(p->binaries[0]->samples, samples[i]);
		ep_profile_free(p);
	}
	ep_store_close(s);
	char *keys = NULL;
	assert_int_equal(
	    ch_query(db,
		     "SELECT count() FROM system.tables WHERE database = currentDatabase()"
		     " AND name IN ('samples', 'edges', 'ranges', 'ips') AND"
		     " sorting_key LIKE '%, session_id'",
		     &keys),
	    0);
	assert_string_equal(keys, "4\n");
	free(keys);
}

/* Counts near 2^64 (issue 18, defect 1): the ingest refuses implausible
 * batches, but many plausible ones still add up, so every sum saturates at
 * 2^64 - 1 instead of wrapping (which lowered others' counts) or failing
 * (which made every listing answer 503 for as long as the rows were kept),
 * and one binary's rows never break another's listing or profile. */
static void test_counts_saturate_and_never_break_other_binaries(void **state)
{
	(void)state;
	struct ep_store *s = open_store(true);
	struct slice_data huge1, huge2, near1, near2, other;
	make_slice(&huge1, "ee05", "/bin/e", "pod-1", 1);
	huge1.bp.samples = INT64_MAX;
	make_slice(&huge2, "ee05", "/bin/e", "pod-2", 1);
	huge2.bp.samples = 1;
	make_slice(&other, "ff05", "/bin/f", "", 1);
	write_one(s, "agent-1", 1, 60, &huge1);
	write_one(s, "agent-1", 2, 60, &huge2);
	write_one(s, "agent-2", 1, 60, &other);
	/* the same key twice: summed in place (SQLite) or at query time */
	make_slice(&near1, "ee05", "/bin/e", "pod-1", 1);
	near1.edges[0].count = UINT64_MAX - 150;
	near1.ip.count = UINT64_MAX;
	make_slice(&near2, "ee05", "/bin/e", "pod-1", 1);
	near2.range.count = UINT64_MAX - 10;
	write_one(s, "agent-1", 3, 60, &near1);
	write_one(s, "agent-1", 4, 60, &near2);

	char err[512] = "";
	struct ep_store_filter all = {0};
	Edgeprof__V1__BinaryList *l = ep_store_list_binaries(s, &all, NULL, err, sizeof(err));
	if (!l)
		fail_msg("listing: %s", err);
	assert_int_equal(l->n_binaries, 2);
	assert_string_equal(l->binaries[0]->build_id, "ee05");
	/* 2^63 - 1 + 1 + 10 + 10: past int64, still exact as a uint64 */
	assert_true(l->binaries[0]->samples == (uint64_t)INT64_MAX + 21);
	assert_string_equal(l->binaries[1]->build_id, "ff05");
	assert_int_equal(l->binaries[1]->samples, 10);
	ep_store_free_list(l);

	struct ep_store_filter f = {.build_id = "ee05"};
	Edgeprof__V1__Profile *p = ep_store_profile(s, &f, err, sizeof(err));
	if (!p)
		fail_msg("profile: %s", err);
	const Edgeprof__V1__BinaryProfile *bp = p->binaries[0];
	/* (2^64 - 151) + 100 + 100 + 200 (pod-2): saturated, not 149 */
	assert_true(find_edge(bp, 0x1000, 0x1040, true)->count == UINT64_MAX);
	assert_int_equal(find_edge(bp, 0x1000, 0x1006, false)->count, 7 * 4);
	assert_true(bp->ranges[0]->count == UINT64_MAX);
	assert_true(bp->ips[0]->count == UINT64_MAX);
	ep_profile_free(p);
	struct ep_store_filter pod2 = {.build_id = "ee05", .pod = "pod-2"};
	p = ep_store_profile(s, &pod2, err, sizeof(err));
	assert_non_null(p);
	assert_int_equal(find_edge(p->binaries[0], 0x1000, 0x1040, true)->count, 100);
	ep_profile_free(p);
	struct ep_store_filter g = {.build_id = "ff05"};
	p = ep_store_profile(s, &g, err, sizeof(err));
	assert_non_null(p);
	assert_int_equal(find_edge(p->binaries[0], 0x1000, 0x1040, true)->count, 100);
	ep_profile_free(p);

	struct ep_api_response r = {0};
	ep_api_binaries(s, &all, NULL, &r);
	assert_int_equal(r.status, 200);
	free(r.body);
	ep_store_close(s);
}

/* An image read back: its trust, and its bytes equal to want. */
static void assert_image(struct ep_store *s, const char *build_id, int trust, const char *want)
{
	char err[512];
	uint8_t *got = NULL;
	size_t len = 0;
	int r = ep_store_image_get(s, build_id, &got, &len, err, sizeof(err));
	if (r < 0)
		fail_msg("%s", err);
	assert_int_equal(r, trust);
	assert_int_equal(len, strlen(want));
	assert_memory_equal(got, want, len);
	free(got);
}

static int put_image(struct ep_store *s, const char *build_id, int64_t uploaded_s,
		     enum ep_image_trust trust, const char *bytes)
{
	char err[512];
	int r = ep_store_image_put(s, build_id, uploaded_s, trust, (const uint8_t *)bytes,
				   strlen(bytes), err, sizeof(err));
	if (r < 0)
		fail_msg("%s", err);
	return r;
}

/* Issue 32 item 7: the first image of a build-id stayed for ever, so an
 * agent's (which any container can choose) kept out the real code. An
 * agent's image is provisional: a trusted one (an authenticated upload,
 * debuginfod) replaces it, never the other way round, and of equal trust
 * the first stays; across a reopen too. */
static void test_images_trusted_replaces_provisional(void **state)
{
	(void)state;
	struct ep_store *s = open_store(true);
	char err[512];
	assert_int_equal(ep_store_image_get(s, "abcd", NULL, NULL, err, sizeof(err)), 0);
	assert_int_equal(put_image(s, "abcd", 100, EP_IMAGE_PROVISIONAL, "planted"), 1);
	assert_int_equal(put_image(s, "abcd", 110, EP_IMAGE_PROVISIONAL, "second"), 0);
	assert_image(s, "abcd", EP_IMAGE_PROVISIONAL, "planted");
	assert_int_equal(put_image(s, "abcd", 120, EP_IMAGE_TRUSTED, "real"), 2);
	assert_int_equal(put_image(s, "abcd", 130, EP_IMAGE_PROVISIONAL, "again"), 0);
	assert_int_equal(put_image(s, "abcd", 140, EP_IMAGE_TRUSTED, "later"), 0);
	assert_image(s, "abcd", EP_IMAGE_TRUSTED, "real");
	/* trusted first: a provisional one never gets in */
	assert_int_equal(put_image(s, "ef01", 100, EP_IMAGE_TRUSTED, "ci"), 1);
	assert_int_equal(put_image(s, "ef01", 110, EP_IMAGE_PROVISIONAL, "agent"), 0);
	assert_int_equal(ep_store_image_get(s, "ef01", NULL, NULL, err, sizeof(err)),
			 EP_IMAGE_TRUSTED);
	ep_store_close(s);
	s = open_store(false);
	assert_image(s, "abcd", EP_IMAGE_TRUSTED, "real");
	assert_image(s, "ef01", EP_IMAGE_TRUSTED, "ci");
	assert_int_equal(ep_store_image_get(s, "0123", NULL, NULL, err, sizeof(err)), 0);
	ep_store_close(s);
}

/* Issue 32 item 7: binary_images was never pruned. Retention forgets an
 * image stored before the cut once its build-id has no counts left; one
 * whose binary still has counts stays, and so does one stored since the
 * cut (CI uploads a build before it runs). ClickHouse deletes by a
 * background mutation: the test waits for it. */
static void test_prune_forgets_images_without_counts(void **state)
{
	(void)state;
	struct ep_store *s = open_store(true);
	const int64_t week = 604800;
	struct slice_data old, recent;
	make_slice(&old, "ee05", "/bin/e", "", 1);
	make_slice(&recent, "cd08", "/bin/c", "", 1);
	write_one(s, "agent-1", 1, 60, &old);
	write_one(s, "agent-1", 2, 3 * week, &recent);
	assert_int_equal(put_image(s, "ee05", 100, EP_IMAGE_TRUSTED, "e"), 1);
	assert_int_equal(put_image(s, "ff06", 100, EP_IMAGE_PROVISIONAL, "f"), 1);
	assert_int_equal(put_image(s, "cd08", 100, EP_IMAGE_TRUSTED, "c"), 1);
	assert_int_equal(put_image(s, "ab07", 3 * week, EP_IMAGE_TRUSTED, "a"), 1);
	char err[512];
	if (ep_store_prune(s, 2 * week, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	const char *gone[] = {"ee05", "ff06"};
	for (int g = 0; g < 2; g++) {
		int r = 1;
		for (int i = 0; i < 100 && r != 0; i++) {
			r = ep_store_image_get(s, gone[g], NULL, NULL, err, sizeof(err));
			if (r < 0)
				fail_msg("%s", err);
			if (r)
				usleep(100000);
		}
		assert_int_equal(r, 0);
	}
	assert_image(s, "cd08", EP_IMAGE_TRUSTED, "c");
	assert_image(s, "ab07", EP_IMAGE_TRUSTED, "a");
	ep_store_close(s);
}

/* Images stored before trust was kept: provisional (anyone who reached the
 * collector could have sent them), so an upload replaces them; a
 * ClickHouse merge keeps the trusted row, not the older one. */
static void test_images_from_before_trust_are_provisional(void **state)
{
	(void)state;
	const char *spec = store_spec(true);
	char db[128];
	snprintf(db, sizeof(db), "edgeprof_test_%d_%d", (int)getpid(), test_number);
	if (is_sqlite()) {
		sqlite3 *sq;
		assert_int_equal(sqlite3_open(spec + 7, &sq), SQLITE_OK);
		assert_int_equal(
		    sqlite3_exec(sq,
				 "CREATE TABLE binary_images(build_id TEXT PRIMARY KEY,"
				 " uploaded_s INTEGER NOT NULL, image BLOB NOT NULL) WITHOUT ROWID;"
				 "INSERT INTO binary_images VALUES('abcd', 100, X'6f6c64');"
				 "PRAGMA user_version = 5;",
				 NULL, NULL, NULL),
		    SQLITE_OK);
		sqlite3_close(sq);
	} else {
		char create[256];
		snprintf(create, sizeof(create), "CREATE DATABASE %s", db);
		assert_int_equal(ch_query("default", create, NULL), 0);
		assert_int_equal(ch_query(db,
					  "CREATE TABLE binary_images (build_id String, uploaded_s"
					  " Int64, keep UInt64, image String) ENGINE ="
					  " ReplacingMergeTree(keep) ORDER BY build_id",
					  NULL),
				 0);
		assert_int_equal(ch_query(db,
					  "INSERT INTO binary_images VALUES ('abcd', 100,"
					  " 18446744073709551515, '6f6c64')",
					  NULL),
				 0);
	}
	struct ep_store *s = open_store(false);
	assert_image(s, "abcd", EP_IMAGE_PROVISIONAL, "old");
	assert_int_equal(put_image(s, "abcd", 200, EP_IMAGE_PROVISIONAL, "agent"), 0);
	assert_int_equal(put_image(s, "abcd", 300, EP_IMAGE_TRUSTED, "new"), 2);
	assert_image(s, "abcd", EP_IMAGE_TRUSTED, "new");
	ep_store_close(s);
	if (!is_sqlite())
		assert_int_equal(ch_query(db, "OPTIMIZE TABLE binary_images FINAL", NULL), 0);
	s = open_store(false);
	assert_image(s, "abcd", EP_IMAGE_TRUSTED, "new");
	ep_store_close(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_counts_add_up_over_buckets_and_labels),
	    cmocka_unit_test(test_ip_cycles_sum_and_units_stay_apart),
	    cmocka_unit_test(test_repeated_queries_see_their_own_filter),
	    cmocka_unit_test(test_batch_ids_are_remembered),
	    cmocka_unit_test(test_no_read_stays_open_between_calls),
	    cmocka_unit_test(test_list_binaries),
	    cmocka_unit_test(test_label_prefixes),
	    cmocka_unit_test(test_list_pages_cover_every_binary_once),
	    cmocka_unit_test(test_list_summarises_many_label_sets),
	    cmocka_unit_test(test_list_estimates_past_exact_values),
	    cmocka_unit_test(test_listings_equal_the_minutes_they_sum),
	    cmocka_unit_test(test_list_ties_go_by_value),
	    cmocka_unit_test(test_counts_saturate_and_never_break_other_binaries),
	    cmocka_unit_test(test_prune_forgets_old_buckets_and_batch_ids),
	    cmocka_unit_test(test_bad_specs_name_the_problem),
	    cmocka_unit_test(test_newer_sqlite_schema_is_refused),
	    cmocka_unit_test(test_session_counts_are_kept_apart),
	    cmocka_unit_test(test_sessions_round_trip_newest_wins),
	    cmocka_unit_test(test_prune_forgets_finished_sessions),
	    cmocka_unit_test(test_finished_sessions_latest_first),
	    cmocka_unit_test(test_nodes_newest_wins_sums_add),
	    cmocka_unit_test(test_sqlite_version_1_file_migrates),
	    cmocka_unit_test(test_sqlite_version_5_file_builds_rollups),
	    cmocka_unit_test(test_clickhouse_tables_from_before_sessions_migrate),
	    cmocka_unit_test(test_images_trusted_replaces_provisional),
	    cmocka_unit_test(test_prune_forgets_images_without_counts),
	    cmocka_unit_test(test_images_from_before_trust_are_provisional),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
