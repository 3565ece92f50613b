/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The storage suite every backend passes. The backend comes from
 * $EDGEPROF_TEST_STORE (clickhouse:http://127.0.0.1:PORT: each test gets
 * its own database); unset, a fresh SQLite file. Counts are hand-computed.
 */
#include <dirent.h>
#include <sqlite3.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_util.h"

#include "../../collector/store/store.h"
#include "profile/profile_file.h"

static char tmpdir[64];
static int test_number;

/* A spec for a fresh, empty store (the same one again with reopen). */
static const char *store_spec(bool fresh)
{
	static char spec[512];
	const char *env = getenv("EDGEPROF_TEST_STORE");
	if (fresh)
		test_number++;
	if (env && strncmp(env, "clickhouse:", 11) == 0)
		snprintf(spec, sizeof(spec), "%s/?database=edgeprof_test_%d_%d", env, (int)getpid(),
			 test_number);
	else
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

static void write_one(struct ep_store *s, const char *agent, uint64_t seq, int64_t bucket,
		      struct slice_data *d)
{
	struct ep_store_batch_id id = {agent, seq, "node-1", 1700000000};
	struct ep_store_slice sl = {bucket, &d->delta, 0};
	struct ep_store_commit c = {&id, 1, &sl, 1};
	char err[512];
	assert_int_equal(ep_store_write(s, &c, err, sizeof(err)), 0);
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
	assert_int_equal(bp->n_ips, 1);
	assert_int_equal(bp->ips[0]->count, 14);
	/* metadata written three times, stored once */
	assert_int_equal(bp->n_functions, 1);
	assert_string_equal(bp->functions[0]->name, "hot_loop");
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
	Edgeprof__V1__BinaryList *l = ep_store_list_binaries(s, &all, err, sizeof(err));
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
	l = ep_store_list_binaries(s, &pod2, err, sizeof(err));
	assert_int_equal(l->n_binaries, 1);
	assert_int_equal(l->binaries[0]->samples, 10);
	ep_store_free_list(l);
	struct ep_store_filter late = {.from_s = 200};
	l = ep_store_list_binaries(s, &late, err, sizeof(err));
	assert_int_equal(l->n_binaries, 1);
	assert_string_equal(l->binaries[0]->build_id, "cc03");
	ep_store_free_list(l);
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
	struct ep_store_slice sl[2] = {{60, &old.delta, 0}, {3 * week, &recent.delta, 1}};
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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_counts_add_up_over_buckets_and_labels),
	    cmocka_unit_test(test_batch_ids_are_remembered),
	    cmocka_unit_test(test_list_binaries),
	    cmocka_unit_test(test_prune_forgets_old_buckets_and_batch_ids),
	    cmocka_unit_test(test_bad_specs_name_the_problem),
	    cmocka_unit_test(test_newer_sqlite_schema_is_refused),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
