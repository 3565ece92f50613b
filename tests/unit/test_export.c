/* SPDX-License-Identifier: Apache-2.0 */
/* The profile file and the export formats on a small profile whose every
 * line is known. */
#include "test_util.h"

#include <string.h>
#include <unistd.h>

#include "export/export.h"
#include "profile/profile_file.h"

static Edgeprof__V1__Edge edges[4];
static Edgeprof__V1__Edge *edge_ptrs[4];
static Edgeprof__V1__Range ranges[1];
static Edgeprof__V1__Range *range_ptrs[1];
static Edgeprof__V1__Function funcs[1];
static Edgeprof__V1__Function *func_ptrs[1];
static Edgeprof__V1__LoadSegment segs[1];
static Edgeprof__V1__LoadSegment *seg_ptrs[1];
static Edgeprof__V1__IpCount ips[1];
static Edgeprof__V1__IpCount *ip_ptrs[1];
static Edgeprof__V1__BinaryProfile bin;
static Edgeprof__V1__BinaryProfile *bin_ptrs[1];
static Edgeprof__V1__Stats stats;
static Edgeprof__V1__Profile profile;
static char *paths[] = {"/usr/bin/demo \"quoted\""};

/* main at 0x401000 (size 0x40), loaded from file offset 0x1000 */
static void build(void)
{
	for (int i = 0; i < 4; i++) {
		edgeprof__v1__edge__init(&edges[i]);
		edge_ptrs[i] = &edges[i];
	}
	edges[0] = (Edgeprof__V1__Edge)EDGEPROF__V1__EDGE__INIT;
	edges[0].from = 0x401010, edges[0].to = 0x401030, edges[0].taken = 1, edges[0].count = 7,
	edges[0].mispredicted = 2, edges[0].kind = EDGEPROF__V1__BRANCH_KIND__BRANCH_CONDITIONAL;
	edges[1] = (Edgeprof__V1__Edge)EDGEPROF__V1__EDGE__INIT;
	edges[1].from = 0x401010, edges[1].to = 0x401012, edges[1].taken = 0, edges[1].count = 3,
	edges[1].kind = EDGEPROF__V1__BRANCH_KIND__BRANCH_CONDITIONAL;
	edges[2] = (Edgeprof__V1__Edge)EDGEPROF__V1__EDGE__INIT;
	edges[2].from = 0x401020, edges[2].to = 0, edges[2].to_external = 1, edges[2].taken = 1,
	edges[2].count = 5, edges[2].kind = EDGEPROF__V1__BRANCH_KIND__BRANCH_CALL;
	edges[3] = (Edgeprof__V1__Edge)EDGEPROF__V1__EDGE__INIT;
	edges[3].from = 0x401038, edges[3].to = 0x401000, edges[3].taken = 1, edges[3].count = 9,
	edges[3].kind = EDGEPROF__V1__BRANCH_KIND__BRANCH_JUMP;
	edgeprof__v1__range__init(&ranges[0]);
	ranges[0].start = 0x401000, ranges[0].end = 0x401010, ranges[0].count = 10;
	range_ptrs[0] = &ranges[0];
	edgeprof__v1__function__init(&funcs[0]);
	funcs[0].name = "main", funcs[0].start = 0x401000, funcs[0].size = 0x40;
	func_ptrs[0] = &funcs[0];
	edgeprof__v1__load_segment__init(&segs[0]);
	segs[0].vaddr = 0x400000, segs[0].offset = 0, segs[0].size = 0x2000;
	seg_ptrs[0] = &segs[0];
	edgeprof__v1__ip_count__init(&ips[0]);
	ips[0].ip = 0x401012, ips[0].count = 4;
	ip_ptrs[0] = &ips[0];
	edgeprof__v1__binary_profile__init(&bin);
	bin.build_id = "abcd", bin.arch = "x86_64", bin.samples = 10;
	bin.paths = paths, bin.n_paths = 1;
	bin.edges = edge_ptrs, bin.n_edges = 4;
	bin.ranges = range_ptrs, bin.n_ranges = 1;
	bin.functions = func_ptrs, bin.n_functions = 1;
	bin.segments = seg_ptrs, bin.n_segments = 1;
	bin.ips = ip_ptrs, bin.n_ips = 1;
	bin_ptrs[0] = &bin;
	edgeprof__v1__stats__init(&stats);
	stats.samples = 10, stats.gaps = 20, stats.gaps_inconsistent = 1;
	edgeprof__v1__profile__init(&profile);
	profile.format_version = 1, profile.stats = &stats;
	profile.binaries = bin_ptrs, profile.n_binaries = 1;
}

static char *export_to_string(enum ep_export_format f, const char *build_id, int *rc)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);
	char err[256];
	*rc = ep_export(&profile, f, build_id, out, err, sizeof(err));
	fclose(out);
	return buf;
}

static void test_fdata(void **state)
{
	(void)state;
	build();
	int rc;
	char *s = export_to_string(EP_EXPORT_FDATA, NULL, &rc);
	assert_int_equal(rc, 0);
	assert_string_equal(s, "1 main 10 1 main 30 2 7\n"
			       "1 main 10 1 main 12 0 3\n"
			       "1 main 20 0 [unknown] 0 0 5\n"
			       "1 main 38 1 main 0 0 9\n");
	free(s);
}

static void test_preagg_and_afdo(void **state)
{
	(void)state;
	build();
	int rc;
	char *s = export_to_string(EP_EXPORT_PREAGG, "ab", &rc);
	assert_int_equal(rc, 0);
	assert_string_equal(s, "B 401010 401030 7 2\n"
			       "B 401010 401012 3 0\n"
			       "B 401038 401000 9 0\n"
			       "F 401000 401010 10\n");
	free(s);
	s = export_to_string(EP_EXPORT_AFDO, NULL, &rc);
	assert_int_equal(rc, 0);
	/* AutoFDO counts in file offsets: vaddr - 0x400000 here */
	assert_string_equal(s, "1\n1000-1010:10\n1\n1012:4\n2\n1010->1030:7\n1038->1000:9\n");
	free(s);
	s = export_to_string(EP_EXPORT_FDATA, "ffff", &rc);
	assert_int_equal(rc, -1);
	free(s);
}

static void test_json_is_valid_and_complete(void **state)
{
	(void)state;
	build();
	char path[] = "/tmp/edgeprof-json-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	FILE *out = fdopen(fd, "w");
	char err[256];
	assert_int_equal(ep_export(&profile, EP_EXPORT_JSON, NULL, out, err, sizeof(err)), 0);
	fclose(out);
	char cmd[512], line[256];
	snprintf(
	    cmd, sizeof(cmd),
	    "jq -r '[.stats.samples, .stats.gaps_inconsistent, (.profiles[0].branches|length),"
	    " .profiles[0].branches[1].to, .profiles[0].branches[1].taken,"
	    " .profiles[0].path, .profiles[0].ranges[0].end] | map(tostring) | join(\",\")' %s",
	    path);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	assert_non_null(fgets(line, sizeof(line), p));
	pclose(p);
	unlink(path);
	assert_string_equal(line, "10,1,4,0x401012,false,/usr/bin/demo \"quoted\",0x401010\n");
}

static void test_profile_file_round_trip_and_damage(void **state)
{
	(void)state;
	build();
	char path[] = "/tmp/edgeprof-prof-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	char err[256];
	assert_int_equal(ep_profile_write(path, &profile, err, sizeof(err)), 0);
	Edgeprof__V1__Profile *back = NULL;
	assert_int_equal(ep_profile_read(path, &back, err, sizeof(err)), 0);
	assert_int_equal(back->n_binaries, 1);
	assert_int_equal(back->binaries[0]->n_edges, 4);
	assert_int_equal(back->binaries[0]->edges[3]->count, 9);
	assert_string_equal(back->binaries[0]->paths[0], paths[0]);
	ep_profile_free(back);
	/* cut short: says so with both sizes */
	assert_int_equal(truncate(path, 30), 0);
	assert_int_equal(ep_profile_read(path, &back, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "truncated profile"));
	/* a file of something else */
	FILE *f = fopen(path, "w");
	fputs("PERFILE2 and more", f);
	fclose(f);
	assert_int_equal(ep_profile_read(path, &back, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not an edgeprof profile"));
	/* an unwritable place: clear error, nothing left behind */
	assert_int_equal(ep_profile_write("/nonexistent-dir/p.prof", &profile, err, sizeof(err)),
			 -1);
	assert_non_null(strstr(err, "/nonexistent-dir/p.prof: write failed"));
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_fdata),
	    cmocka_unit_test(test_preagg_and_afdo),
	    cmocka_unit_test(test_json_is_valid_and_complete),
	    cmocka_unit_test(test_profile_file_round_trip_and_damage),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
