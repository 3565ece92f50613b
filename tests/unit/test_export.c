/* SPDX-License-Identifier: Apache-2.0 */
/* Every export format on a hand-made profile whose every line is known:
 * main at 0x1000 (0x40 bytes) calls helper at 0x1100 (0x20 bytes); the
 * code segment maps vaddr 0x1000 to file offset 0x400. The profile's
 * arrays are deliberately out of order: exports must sort. */
#include "test_util.h"

#include <string.h>
#include <unistd.h>

#include "common/export/export.h"

#define K(x) EDGEPROF__V1__BRANCH_KIND__BRANCH_##x

static const struct {
	uint64_t from, to;
	int taken;
	uint64_t count, mispredicted;
	Edgeprof__V1__BranchKind kind;
	int from_ext, to_ext;
} edge_rows[] = {
    {0x1038, 0x1000, 1, 9, 0, K(JUMP), 0, 0},
    {0x1010, 0x1030, 1, 7, 2, K(CONDITIONAL), 0, 0},
    {0x1010, 0x1012, 0, 3, 0, K(CONDITIONAL), 0, 0},
    {0x1020, 0x1100, 1, 5, 0, K(CALL), 0, 0},
    {0x111c, 0x1025, 1, 5, 0, K(RETURN), 0, 0},
    {0x1030, 0, 1, 4, 1, K(CALL_INDIRECT), 0, 1},
    {0, 0x1000, 1, 2, 0, K(UNKNOWN), 1, 0},
    {0x1036, 0x2000, 1, 1, 0, K(JUMP), 0, 0},
    /* a conditional branch to its own next instruction: taken and not
     * taken both end at 0x100a */
    {0x1008, 0x100a, 1, 2, 0, K(CONDITIONAL), 0, 0},
    {0x1008, 0x100a, 0, 6, 0, K(CONDITIONAL), 0, 0},
    {0x2004, 0x2008, 1, 3, 0, K(JUMP), 0, 0},
    {0x1011, 0x1012, 0, 0, 0, K(CONDITIONAL), 0, 0},
    {0x1036, 0x1025, 1, 15, 0, K(JUMP), 0, 0},
};
#define N_EDGES (sizeof(edge_rows) / sizeof(edge_rows[0]))

static const uint64_t range_rows[][3] = {
    {0x1100, 0x111c, 5}, {0x1000, 0x1008, 8}, {0x100a, 0x1010, 10},
    {0x1012, 0x1020, 3}, {0x1030, 0x1038, 7}, {0x1025, 0x1030, 10},
};
#define N_RANGES (sizeof(range_rows) / sizeof(range_rows[0]))

static Edgeprof__V1__Edge edges[N_EDGES], lib_edge;
static Edgeprof__V1__Edge *edge_ptrs[N_EDGES], *lib_edge_ptrs[1];
static Edgeprof__V1__Range ranges[N_RANGES];
static Edgeprof__V1__Range *range_ptrs[N_RANGES];
static Edgeprof__V1__Function funcs[2], lib_func;
static Edgeprof__V1__Function *func_ptrs[2], *lib_func_ptrs[1];
static Edgeprof__V1__LoadSegment segs[2];
static Edgeprof__V1__LoadSegment *seg_ptrs[2];
static Edgeprof__V1__IpCount ips[3], lib_ip;
static Edgeprof__V1__IpCount *ip_ptrs[3], *lib_ip_ptrs[1];
static Edgeprof__V1__BinaryProfile bin, lib;
static Edgeprof__V1__BinaryProfile *bin_ptrs[2];
static Edgeprof__V1__Stats stats;
static Edgeprof__V1__SamplingConfig config;
static Edgeprof__V1__Profile profile;
/* quotes, a backslash, a tab and a byte that is no UTF-8 */
static char *paths[] = {"/opt/demo \"q\"\\x\tz\xff", "/usr/bin/demo"};
static char *lib_paths[] = {"/usr/lib/libx.so"};

static void build(void)
{
	for (size_t i = 0; i < N_EDGES; i++) {
		Edgeprof__V1__Edge *e = &edges[i];
		edgeprof__v1__edge__init(e);
		e->from = edge_rows[i].from, e->to = edge_rows[i].to;
		e->taken = edge_rows[i].taken, e->count = edge_rows[i].count;
		e->mispredicted = edge_rows[i].mispredicted, e->kind = edge_rows[i].kind;
		e->from_external = edge_rows[i].from_ext, e->to_external = edge_rows[i].to_ext;
		edge_ptrs[i] = e;
	}
	for (size_t i = 0; i < N_RANGES; i++) {
		edgeprof__v1__range__init(&ranges[i]);
		ranges[i].start = range_rows[i][0], ranges[i].end = range_rows[i][1];
		ranges[i].count = range_rows[i][2];
		range_ptrs[i] = &ranges[i];
	}
	edgeprof__v1__function__init(&funcs[0]);
	funcs[0].name = "helper", funcs[0].start = 0x1100, funcs[0].size = 0x20;
	edgeprof__v1__function__init(&funcs[1]);
	funcs[1].name = "main", funcs[1].start = 0x1000, funcs[1].size = 0x40;
	func_ptrs[0] = &funcs[0], func_ptrs[1] = &funcs[1];
	edgeprof__v1__load_segment__init(&segs[0]);
	segs[0].vaddr = 0, segs[0].offset = 0, segs[0].size = 0x800;
	edgeprof__v1__load_segment__init(&segs[1]);
	segs[1].vaddr = 0x1000, segs[1].offset = 0x400, segs[1].size = 0x1000;
	seg_ptrs[0] = &segs[0], seg_ptrs[1] = &segs[1];
	static const uint64_t ip_rows[][2] = {{0x1012, 4}, {0x3000, 2}, {0x1000, 1}};
	for (int i = 0; i < 3; i++) {
		edgeprof__v1__ip_count__init(&ips[i]);
		ips[i].ip = ip_rows[i][0], ips[i].count = ip_rows[i][1];
		ip_ptrs[i] = &ips[i];
	}
	edgeprof__v1__binary_profile__init(&bin);
	bin.build_id = "abcd1234", bin.arch = "x86_64", bin.samples = 10;
	bin.paths = paths, bin.n_paths = 2;
	bin.edges = edge_ptrs, bin.n_edges = N_EDGES;
	bin.ranges = range_ptrs, bin.n_ranges = N_RANGES;
	bin.functions = func_ptrs, bin.n_functions = 2;
	bin.segments = seg_ptrs, bin.n_segments = 2;
	bin.ips = ip_ptrs, bin.n_ips = 3;

	/* a second binary: fewer samples, and only sample IPs plus one edge */
	edgeprof__v1__edge__init(&lib_edge);
	lib_edge.from = 0x500, lib_edge.to = 0x600, lib_edge.taken = 1, lib_edge.count = 1;
	lib_edge_ptrs[0] = &lib_edge;
	edgeprof__v1__function__init(&lib_func);
	lib_func.name = "memcpy", lib_func.start = 0x700, lib_func.size = 0x100;
	lib_func_ptrs[0] = &lib_func;
	edgeprof__v1__ip_count__init(&lib_ip);
	lib_ip.ip = 0x710, lib_ip.count = 3;
	lib_ip_ptrs[0] = &lib_ip;
	edgeprof__v1__binary_profile__init(&lib);
	lib.build_id = "abff0000", lib.arch = "x86_64", lib.samples = 3;
	lib.paths = lib_paths, lib.n_paths = 1;
	lib.edges = lib_edge_ptrs, lib.n_edges = 1;
	lib.functions = lib_func_ptrs, lib.n_functions = 1;
	lib.ips = lib_ip_ptrs, lib.n_ips = 1;

	bin_ptrs[0] = &lib, bin_ptrs[1] = &bin;
	edgeprof__v1__stats__init(&stats);
	stats.samples = 13, stats.gaps = 20, stats.gaps_inconsistent = 1;
	edgeprof__v1__sampling_config__init(&config);
	config.source = "emulator", config.range_mode = "split", config.chop = 32;
	config.mode = "edges";
	config.entries = 32;
	edgeprof__v1__profile__init(&profile);
	profile.format_version = 1, profile.stats = &stats, profile.config = &config;
	profile.binaries = bin_ptrs, profile.n_binaries = 2;
}

static char *export_to_string(enum ep_export_format f, const char *build_id, int *rc, char *err,
			      size_t errlen)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);
	assert_non_null(out);
	*rc = ep_export(&profile, f, build_id, out, err, errlen);
	fclose(out);
	return buf;
}

/* Exports the default binary in format f, expecting success and want. */
static void expect_export(enum ep_export_format f, const char *build_id, const char *want)
{
	char err[256] = "";
	int rc;
	char *s = export_to_string(f, build_id, &rc, err, sizeof(err));
	assert_string_equal(err, "");
	assert_int_equal(rc, 0);
	assert_string_equal(s, want);
	free(s);
}

static void expect_export_error(enum ep_export_format f, const char *build_id, const char *want)
{
	char err[256] = "";
	int rc;
	char *s = export_to_string(f, build_id, &rc, err, sizeof(err));
	assert_int_equal(rc, -1);
	assert_string_equal(err, want);
	free(s);
}

/* A binary with IP samples only (no branch-stack PMU): the formats made of
 * branches refuse, saying why; json and binaries with branches go on. */
static void test_ip_only_refused(void **state)
{
	(void)state;
	build();
	char why[256] = "";
	for (int f = EP_EXPORT_FDATA; f <= EP_EXPORT_PROFGEN; f++)
		assert_int_equal(ep_export_check_branches(&profile, f, "abcd", why, sizeof(why)),
				 0);
	lib.n_edges = 0;
	assert_int_equal(
	    ep_export_check_branches(&profile, EP_EXPORT_JSON, "abff", why, sizeof(why)), 0);
	assert_int_equal(
	    ep_export_check_branches(&profile, EP_EXPORT_FDATA, "abcd", why, sizeof(why)), 0);
	assert_int_equal(
	    ep_export_check_branches(&profile, EP_EXPORT_FDATA, "abff", why, sizeof(why)), -1);
	assert_string_equal(why, "IP samples only (no branch stacks): fdata needs taken branches; "
				 "record on a machine with LBR/BRBE, or use --format json|pprof");
	assert_int_equal(
	    ep_export_check_branches(&profile, EP_EXPORT_PPROF, "abff", why, sizeof(why)), 0);
	for (int f = EP_EXPORT_PREAGG; f <= EP_EXPORT_PROFGEN; f++)
		assert_int_equal(ep_export_check_branches(&profile, f, "abff", why, sizeof(why)),
				 -1);
	lib.n_ips = 0; /* nothing sampled: not IP-only, the export says what it has */
	assert_int_equal(
	    ep_export_check_branches(&profile, EP_EXPORT_FDATA, "abff", why, sizeof(why)), 0);
	build();
}

static void test_parse_format(void **state)
{
	(void)state;
	assert_int_equal(ep_export_parse_format("json"), EP_EXPORT_JSON);
	assert_int_equal(ep_export_parse_format("fdata"), EP_EXPORT_FDATA);
	assert_int_equal(ep_export_parse_format("preagg"), EP_EXPORT_PREAGG);
	assert_int_equal(ep_export_parse_format("afdo"), EP_EXPORT_AFDO);
	assert_int_equal(ep_export_parse_format("profgen"), EP_EXPORT_PROFGEN);
	assert_int_equal(ep_export_parse_format("FDATA"), -1);
	assert_int_equal(ep_export_parse_format(""), -1);
}

static void test_fdata(void **state)
{
	(void)state;
	build();
	expect_export(EP_EXPORT_FDATA, NULL,
		      "0 [unknown] 0 1 main 0 0 2\n"
		      "1 main 8 1 main a 0 8\n"
		      "1 main 10 1 main 12 0 3\n"
		      "1 main 10 1 main 30 2 7\n"
		      "1 main 20 1 helper 0 0 5\n"
		      "1 main 30 0 [unknown] 0 1 4\n"
		      "1 main 36 1 main 25 0 15\n"
		      "1 main 36 0 [unknown] 2000 0 1\n"
		      "1 main 38 1 main 0 0 9\n"
		      "1 helper 1c 1 main 25 0 5\n");
	/* a name BOLT's reader would split is written as an unknown end */
	funcs[0].name = "operator new";
	char err[256];
	int rc;
	char *s = export_to_string(EP_EXPORT_FDATA, NULL, &rc, err, sizeof(err));
	assert_int_equal(rc, 0);
	assert_non_null(strstr(s, "1 main 20 0 [unknown] 1100 0 5\n"));
	assert_null(strstr(s, "operator"));
	free(s);
}

static void test_preagg(void **state)
{
	(void)state;
	build();
	/* 0x1025 is entered 5 times by helper's return and 15 times from main:
	 * a quarter of its range's 10 runs came from outside (floored) */
	expect_export(EP_EXPORT_PREAGG, NULL,
		      "B 0 1000 2 0\n"
		      "B 1008 100a 8 0\n"
		      "B 1010 1012 3 0\n"
		      "B 1010 1030 7 2\n"
		      "B 1020 1100 5 0\n"
		      "B 1030 0 4 1\n"
		      "B 1036 1025 15 0\n"
		      "B 1036 2000 1 0\n"
		      "B 1038 1000 9 0\n"
		      "B 111c 1025 5 0\n"
		      "B 2004 2008 3 0\n"
		      "F 1000 1008 8\n"
		      "F 100a 1010 10\n"
		      "F 1012 1020 3\n"
		      "f 1025 1030 2\n"
		      "F 1025 1030 8\n"
		      "F 1030 1038 7\n"
		      "F 1100 111c 5\n");
	/* whole gaps already walk over the not-taken branches */
	config.range_mode = "gap";
	char err[256];
	int rc;
	char *s = export_to_string(EP_EXPORT_PREAGG, NULL, &rc, err, sizeof(err));
	assert_int_equal(rc, 0);
	assert_non_null(strstr(s, "B 1008 100a 2 0\nB 1010 1030 7 2\n"));
	assert_null(strstr(s, "B 1010 1012"));
	free(s);
}

static void test_afdo(void **state)
{
	(void)state;
	build();
	/* file offsets: vaddr - 0x1000 + 0x400; 0x3000, 0x2000 and the
	 * external ends lie outside every segment and are left out */
	expect_export(EP_EXPORT_AFDO, NULL,
		      "6\n400-408:8\n40a-410:10\n412-420:3\n425-430:10\n430-438:7\n500-51c:5\n"
		      "2\n400:1\n412:4\n"
		      "6\n408->40a:2\n410->430:7\n420->500:5\n436->425:15\n438->400:9\n"
		      "51c->425:5\n");
	bin.n_segments = 0;
	expect_export_error(EP_EXPORT_AFDO, NULL,
			    "/opt/demo \"q\"\\x\tz\xff: the profile has no load segments for this "
			    "binary, so its addresses cannot be turned into the file offsets "
			    "AutoFDO reads");
}

static void test_profgen(void **state)
{
	(void)state;
	build();
	/* virtual addresses, no sample IPs; only taken edges with both ends
	 * in a load segment (0x3000 and 0x2000 are in none) */
	const char *want = "6\n1000-1008:8\n100a-1010:10\n1012-1020:3\n1025-1030:10\n"
			   "1030-1038:7\n1100-111c:5\n"
			   "6\n1008->100a:2\n1010->1030:7\n1020->1100:5\n1036->1025:15\n"
			   "1038->1000:9\n111c->1025:5\n";
	expect_export(EP_EXPORT_PROFGEN, NULL, want);
	/* a profile without segments needs none: every edge inside the
	 * binary is written, 0x2000 and 0x2004 too */
	bin.n_segments = 0;
	expect_export(EP_EXPORT_PROFGEN, NULL,
		      "6\n1000-1008:8\n100a-1010:10\n1012-1020:3\n1025-1030:10\n"
		      "1030-1038:7\n1100-111c:5\n"
		      "8\n1008->100a:2\n1010->1030:7\n1020->1100:5\n1036->1025:15\n"
		      "1036->2000:1\n1038->1000:9\n111c->1025:5\n2004->2008:3\n");
}

/* profgen writes estimated executions: every count times P/C (period over
 * chop), which is what clang's sample loader expects to add its 1 to. */
static void test_profgen_estimated_executions(void **state)
{
	(void)state;
	build();
	config.event = "branches", config.period = 1000; /* chop 32: x31.25, rounded */
	const char *want = "6\n1000-1008:250\n100a-1010:313\n1012-1020:94\n1025-1030:313\n"
			   "1030-1038:219\n1100-111c:156\n"
			   "6\n1008->100a:63\n1010->1030:219\n1020->1100:156\n1036->1025:469\n"
			   "1038->1000:281\n111c->1025:156\n";
	expect_export(EP_EXPORT_PROFGEN, NULL, want);
	/* the taken chop under the taken-branches event: the same probability C/P */
	config.event = "taken", config.chop_unit = "taken";
	expect_export(EP_EXPORT_PROFGEN, NULL, want);
	/* a chop in branches under an event counting taken ones: P/C is not the
	 * probability, so the counts stay as sampled */
	config.chop_unit = "branches";
	char err[256] = "";
	int rc;
	char *s = export_to_string(EP_EXPORT_PROFGEN, NULL, &rc, err, sizeof(err));
	assert_int_equal(rc, 0);
	assert_non_null(strstr(s, "1000-1008:8\n"));
	free(s);
	/* whole stacks: P over the mean branches counted per sample (130 / 13) */
	config.event = "branches", config.chop = 0, stats.branches_counted = 130;
	s = export_to_string(EP_EXPORT_PROFGEN, NULL, &rc, err, sizeof(err));
	assert_non_null(strstr(s, "1000-1008:800\n"));
	assert_non_null(strstr(s, "1036->1025:1500\n"));
	free(s);
	/* a scale that would take the hottest address past 2^32 / 16 is lowered
	 * to reach it exactly: clang saturates 32-bit weights one by one. The
	 * ranges that hold an address add up: 0x1030 ends one (10) and starts
	 * another (7), 17 in all */
	config.chop = 32, config.period = 1ull << 40;
	s = export_to_string(EP_EXPORT_PROFGEN, NULL, &rc, err, sizeof(err));
	assert_non_null(strstr(s, "1025-1030:157903209\n"));
	assert_non_null(strstr(s, "1030-1038:110532246\n"));
	assert_non_null(strstr(s, "1000-1008:126322567\n"));
	free(s);
	/* 0x1004-0x1008 in two ranges: 8 + 10 = 18 */
	ranges[2].start = 0x1004;
	s = export_to_string(EP_EXPORT_PROFGEN, NULL, &rc, err, sizeof(err));
	assert_non_null(strstr(s, "1004-1010:149130808\n"));
	assert_non_null(strstr(s, "1000-1008:119304647\n"));
	free(s);
}

static void test_binary_selection(void **state)
{
	(void)state;
	build();
	/* default: the most samples; a prefix, any case; refusals say why */
	expect_export(EP_EXPORT_PREAGG, "ABF", "B 500 600 1 0\n");
	expect_export_error(EP_EXPORT_FDATA, "ab",
			    "build-id prefix ab matches 2 binaries of the profile");
	expect_export_error(EP_EXPORT_PREAGG, "ffff",
			    "no binary in the profile has a build-id starting with ffff");
	expect_export_error(EP_EXPORT_JSON, "", "--build-id: empty build-id prefix");
	profile.n_binaries = 0;
	expect_export_error(EP_EXPORT_FDATA, NULL, "the profile holds no binary");
	expect_export(
	    EP_EXPORT_JSON, NULL,
	    "{\"stats\": {\"samples\": 13, \"samples_with_branches\": 0, "
	    "\"branch_entries\": 0, \"branch_entries_user\": 0, "
	    "\"branch_entries_kernel\": 0, \"branch_entries_unresolved\": 0, "
	    "\"gaps\": 20, \"gaps_inconsistent\": 1, \"gaps_unknown_code\": 0, "
	    "\"branches_counted\": 0, \"branches_short\": 0, \"trigger_appended\": 0, "
	    "\"trigger_inconsistent\": 0, \"entries_mismatched\": 0, "
	    "\"lost_records\": 0, \"ranges_counted\": 0, \"gaps_backwards\": 0, "
	    "\"entries_duplicate\": 0, \"processes_gone\": 0, \"cycles_samples\": 0, "
	    "\"cycles_samples_unresolved\": 0, \"cycles_lost_records\": 0, "
	    "\"samples_ip_kernel\": 0, \"samples_ip_jit\": 0, "
	    "\"samples_ip_unresolved\": 0, \"stacks_dropped\": 0, \"stacks_cut_unresolved\": 0},\n"
	    " \"config\": {\"source\": \"emulator\", \"event\": \"\", \"period\": 0, "
	    "\"jitter\": 0, \"entries\": 32, \"chop\": 32, \"trigger_appended\": false, "
	    "\"range_mode\": \"split\", \"mode\": \"edges\", \"chop_unit\": \"\", "
	    "\"cycles_source\": \"\", \"cycles_unit\": \"\", \"cycles_period\": 0, "
	    "\"cycles_jitter\": 0, \"cycles_scale\": 0},\n"
	    " \"profiles\": []}\n");
}

/* Runs a jq filter over the JSON export (raw output) and returns its
 * first line. */
static char *jq(const char *json_path, const char *filter)
{
	char cmd[1024];
	static char line[1024];
	snprintf(cmd, sizeof(cmd), "jq -r '%s' %s", filter, json_path);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	line[0] = 0;
	assert_non_null(fgets(line, sizeof(line), p));
	assert_int_equal(pclose(p), 0);
	line[strcspn(line, "\n")] = 0;
	return line;
}

static void test_json_is_valid_complete_and_sorted(void **state)
{
	(void)state;
	build();
	char path[] = "/tmp/edgeprof-json-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	FILE *out = fdopen(fd, "w");
	char err[256], cmd[512];
	assert_int_equal(ep_export(&profile, EP_EXPORT_JSON, NULL, out, err, sizeof(err)), 0);
	fclose(out);
	snprintf(cmd, sizeof(cmd), "python3 -m json.tool %s >/dev/null", path);
	assert_int_equal(system(cmd), 0);

	char want[64];
	snprintf(want, sizeof(want), "%u", edgeprof__v1__stats__descriptor.n_fields);
	assert_string_equal(jq(path, ".stats | keys | length"), want);
	snprintf(want, sizeof(want), "%u", edgeprof__v1__sampling_config__descriptor.n_fields);
	assert_string_equal(jq(path, ".config | keys | length"), want);
	assert_string_equal(jq(path,
			       "[.stats.samples, .stats.gaps_inconsistent, .config.range_mode]"
			       " | map(tostring) | join(\",\")"),
			    "13,1,split");
	/* binaries in the profile's order; everything inside sorted */
	assert_string_equal(jq(path, "[.profiles[].build_id] | join(\",\")"), "abff0000,abcd1234");
	assert_string_equal(
	    jq(path, "[.profiles[1].branches[] | \"\\(.from)>\\(.to):\\(.taken)\"] | join(\" \")"),
	    "0x0>0x1000:true 0x1008>0x100a:false 0x1008>0x100a:true 0x1010>0x1012:false "
	    "0x1010>0x1030:true 0x1011>0x1012:false 0x1020>0x1100:true 0x1030>0x0:true "
	    "0x1036>0x1025:true 0x1036>0x2000:true 0x1038>0x1000:true 0x111c>0x1025:true "
	    "0x2004>0x2008:true");
	assert_string_equal(jq(path,
			       ".profiles[1].branches[4] | [.count, .mispredicted, .kind,"
			       " .to_external, .from_external] | map(tostring) | join(\",\")"),
			    "7,2,conditional,false,false");
	assert_string_equal(jq(path, ".profiles[1].branches[7] | [.kind, .to_external] |"
				     " map(tostring) | join(\",\")"),
			    "call_indirect,true");
	assert_string_equal(
	    jq(path, "[.profiles[1].ranges[] | \"\\(.start)-\\(.end):\\(.count)\"] | join(\" \")"),
	    "0x1000-0x1008:8 0x100a-0x1010:10 0x1012-0x1020:3 0x1025-0x1030:10 "
	    "0x1030-0x1038:7 0x1100-0x111c:5");
	assert_string_equal(jq(path, "[.profiles[1].ips[] | \"\\(.ip):\\(.count)\"] | join(\" \")"),
			    "0x1000:1 0x1012:4 0x3000:2");
	assert_string_equal(jq(path,
			       "[.profiles[1].functions[] | \"\\(.name)@\\(.start)+\\(.size)\"]"
			       " | join(\" \")"),
			    "main@0x1000+64 helper@0x1100+32");
	assert_string_equal(jq(path, "[.profiles[1] | .arch, .samples, (.paths | length)] |"
				     " map(tostring) | join(\",\")"),
			    "x86_64,10,2");
	/* the path survives escaping; the stray byte becomes U+FFFD */
	assert_string_equal(jq(path, ".profiles[1].path | @json"),
			    "\"/opt/demo \\\"q\\\"\\\\x\\tz\xef\xbf\xbd\"");
	unlink(path);
}

static void test_json_one_binary(void **state)
{
	(void)state;
	build();
	char err[256];
	int rc;
	char *s = export_to_string(EP_EXPORT_JSON, "abf", &rc, err, sizeof(err));
	assert_int_equal(rc, 0);
	assert_non_null(strstr(s, "\"build_id\": \"abff0000\""));
	assert_null(strstr(s, "abcd1234"));
	free(s);
}

static void test_write_error_is_reported(void **state)
{
	(void)state;
	build();
	FILE *out = fopen("/dev/full", "w");
	assert_non_null(out);
	setvbuf(out, NULL, _IONBF, 0);
	char err[256] = "";
	assert_int_equal(ep_export(&profile, EP_EXPORT_FDATA, NULL, out, err, sizeof(err)), -1);
	assert_string_equal(err, "export: write failed: No space left on device");
	fclose(out);
}

static char *report(unsigned top)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);
	assert_non_null(out);
	assert_int_equal(ep_report(&profile, top, out), 0);
	fclose(out);
	return buf;
}

static void test_report(void **state)
{
	(void)state;
	build();
	char *s = report(2);
	/* the binary with more samples comes first */
	char *a = strstr(s, "\n/opt/demo \"q\"\\x\tz\xff  build-id abcd1234  x86_64  10 samples, "
			    "13 edges, 62 branch executions counted\n");
	char *b = strstr(s, "\n/usr/lib/libx.so  build-id abff0000  x86_64  3 samples, 1 edges, "
			    "1 branch executions counted\n");
	assert_non_null(a);
	assert_non_null(b);
	assert_true(a < b);
	assert_true(strncmp(s, "13 samples (0 with branch stacks)", 33) == 0);
	assert_non_null(strstr(s, "(chop 32 of 32 entries)\n"));
	/* the two hottest taken edges, named by function and offset */
	assert_non_null(strstr(a, "  hottest taken edges:\n"
				  "         count   mispr  kind           from -> to\n"
				  "            15    0.0%  jump           main+0x36 -> main+0x25\n"
				  "             9    0.0%  jump           main+0x38 -> main+0x0\n"
				  "  hottest functions by branches:\n"));
	/* main: 52 branch executions out of it, 370 bytes run (sum of
	 * count x length of its ranges); helper: 5 and 145 */
	assert_non_null(strstr(a, "  hottest functions by branches:\n"
				  "      branches     bytes run   share samples  function\n"
				  "            52           370   71.4%       5  main\n"
				  "             5           145    0.0%       0  helper\n"
				  "  hottest functions by code run:\n"
				  "      branches     bytes run   share samples  function\n"
				  "            52           370   71.4%       5  main\n"
				  "             5           145    0.0%       0  helper\n"));
	/* a binary with no branch out of a known function: ranked by samples */
	assert_non_null(strstr(b, "  hottest functions by samples:\n"
				  "      branches     bytes run   share samples  function\n"
				  "             0             0  100.0%       3  memcpy\n"));
	free(s);
	/* the same binary without symbols (ld.so's, say): its samples fall in
	 * no function, so there is no function table, not a heading alone */
	Edgeprof__V1__BinaryProfile *libx = NULL;
	for (size_t i = 0; i < profile.n_binaries; i++)
		if (strcmp(profile.binaries[i]->build_id, "abff0000") == 0)
			libx = profile.binaries[i];
	assert_non_null(libx);
	size_t n_functions = libx->n_functions;
	libx->n_functions = 0;
	s = report(2);
	b = strstr(s, "\n/usr/lib/libx.so  build-id abff0000");
	assert_non_null(b);
	assert_null(strstr(b, "hottest functions"));
	libx->n_functions = n_functions;
	free(s);
	s = report(1);
	assert_null(strstr(s, "main+0x38 -> main+0x0"));
	assert_null(strstr(s, "helper\n"));
	free(s);
}

/* What BOLT needs beyond the edges: a local function is written "NAME/N",
 * a fall-through edge is a line of its own in fdata only (perf2bolt makes
 * its own from the F traces, AutoFDO's ranges already count that code),
 * and a trace inside a PLT entry is left out of preagg. */
static void test_bolt_names_plt_fallthrough(void **state)
{
	(void)state;
	build();
	funcs[0].local_index = 3; /* helper is static: helper/3 */
	Edgeprof__V1__Function plt;
	edgeprof__v1__function__init(&plt);
	plt.name = "puts@PLT", plt.start = 0x2000, plt.size = 0x10;
	Edgeprof__V1__Function *fp[3] = {&funcs[0], &funcs[1], &plt};
	bin.functions = fp, bin.n_functions = 3;
	/* main's range 0x1012..0x1020 runs into 0x101a, a jump target: from
	 * the instruction before it (0x1017) */
	Edgeprof__V1__Edge ft;
	edgeprof__v1__edge__init(&ft);
	ft.from = 0x1017, ft.to = 0x101a, ft.count = 3, ft.kind = K(FALLTHROUGH);
	Edgeprof__V1__Edge *ep[N_EDGES + 1];
	memcpy(ep, edge_ptrs, sizeof(edge_ptrs));
	ep[N_EDGES] = &ft;
	bin.edges = ep, bin.n_edges = N_EDGES + 1;
	Edgeprof__V1__Range plt_range;
	edgeprof__v1__range__init(&plt_range);
	plt_range.start = 0x2000, plt_range.end = 0x2004, plt_range.count = 3;
	Edgeprof__V1__Range *rp[N_RANGES + 1];
	memcpy(rp, range_ptrs, sizeof(range_ptrs));
	rp[N_RANGES] = &plt_range;
	bin.ranges = rp, bin.n_ranges = N_RANGES + 1;

	char err[256];
	int rc;
	char *s = export_to_string(EP_EXPORT_FDATA, NULL, &rc, err, sizeof(err));
	assert_int_equal(rc, 0);
	assert_non_null(strstr(s, "1 main 20 1 helper/3 0 0 5\n"));
	assert_non_null(strstr(s, "1 helper/3 1c 1 main 25 0 5\n"));
	assert_non_null(strstr(s, "1 main 17 1 main 1a 0 3\n"));
	assert_non_null(strstr(s, "1 main 36 1 puts@PLT 0 0 1\n"));
	assert_non_null(strstr(s, "1 puts@PLT 4 1 puts@PLT 8 0 3\n"));
	free(s);
	s = export_to_string(EP_EXPORT_PREAGG, NULL, &rc, err, sizeof(err));
	assert_int_equal(rc, 0);
	assert_null(strstr(s, "B 1017"));
	assert_null(strstr(s, "F 2000"));
	assert_non_null(strstr(s, "B 2004 2008 3 0\n")); /* branches stay */
	assert_non_null(strstr(s, "F 1012 1020 3\n"));
	free(s);
	s = export_to_string(EP_EXPORT_AFDO, NULL, &rc, err, sizeof(err));
	assert_int_equal(rc, 0);
	assert_null(strstr(s, "617->61a")); /* file offsets: vaddr - 0xc00 */
	free(s);
	s = export_to_string(EP_EXPORT_JSON, "abcd1234", &rc, err, sizeof(err));
	assert_int_equal(rc, 0);
	assert_non_null(strstr(s, "\"kind\": \"fallthrough\""));
	free(s);
	build();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse_format),
	    cmocka_unit_test(test_ip_only_refused),
	    cmocka_unit_test(test_fdata),
	    cmocka_unit_test(test_bolt_names_plt_fallthrough),
	    cmocka_unit_test(test_preagg),
	    cmocka_unit_test(test_afdo),
	    cmocka_unit_test(test_profgen),
	    cmocka_unit_test(test_profgen_estimated_executions),
	    cmocka_unit_test(test_binary_selection),
	    cmocka_unit_test(test_json_is_valid_complete_and_sorted),
	    cmocka_unit_test(test_json_one_binary),
	    cmocka_unit_test(test_write_error_is_reported),
	    cmocka_unit_test(test_report),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
