/* SPDX-License-Identifier: Apache-2.0 */
/* The pprof export on a hand-made profile, read back through zlib and
 * pprof's own message definitions: the sample types, each function's sum of
 * each, the call edges as callee-then-caller samples, the mappings, the
 * names, the labels, and what is left out (fall-throughs, ends in other
 * binaries). go tool pprof reads real profiles' exports in
 * tests/integration/test_pprof.sh. */
#include "test_util.h"

#include <stdbool.h>
#include <zlib.h>

#include "common/export/export.h"
#include "pprof.pb-c.h"

#define K(x) EDGEPROF__V1__BRANCH_KIND__BRANCH_##x

/* app (0x1000 main, 0x1100 helper, a local: helper/2) */
static const struct {
	uint64_t from, to;
	int taken;
	uint64_t count;
	Edgeprof__V1__BranchKind kind;
	int from_ext, to_ext;
} edge_rows[] = {
    {0x1020, 0x1100, 1, 7, K(CALL), 0, 0},
    {0x1030, 0x1100, 1, 3, K(CALL_INDIRECT), 0, 0},
    {0x111c, 0x1025, 1, 7, K(RETURN), 0, 0},
    /* no branch: the ranges' code */
    {0x1008, 0x100a, 0, 50, K(FALLTHROUGH), 0, 0},
    {0x1010, 0x1012, 0, 4, K(CONDITIONAL), 0, 0},
    /* a call into another binary: a branch here, no call edge (no callee) */
    {0x1034, 0, 1, 9, K(CALL), 0, 1},
    /* from another binary: in no function of this one */
    {0, 0x1000, 1, 2, K(CALL), 1, 0},
};
#define N_EDGES (sizeof(edge_rows) / sizeof(edge_rows[0]))

static Edgeprof__V1__Edge edges[N_EDGES], *edge_ptrs[N_EDGES];
static Edgeprof__V1__Range range, *range_ptrs[1];
static Edgeprof__V1__Function funcs[3], *func_ptrs[2], *lib_func_ptrs[1];
static Edgeprof__V1__LoadSegment segs[2], *seg_ptrs[2];
static Edgeprof__V1__IpCount ips[4], *ip_ptrs[2], *pod_ip_ptrs[1], *lib_ip_ptrs[1];
static Edgeprof__V1__Labels pod_labels;
static Edgeprof__V1__BinaryProfile app, app_pod, lib, *bin_ptrs[3];
static Edgeprof__V1__SamplingConfig config;
static Edgeprof__V1__Profile profile;
static char *app_paths[] = {"/bin/app"}, *lib_paths[] = {"/lib/libx.so"};

static void set_ip(Edgeprof__V1__IpCount *ip, uint64_t addr, uint64_t count, uint64_t cycles)
{
	edgeprof__v1__ip_count__init(ip);
	ip->ip = addr, ip->count = count, ip->cycles = cycles;
}

static void set_function(Edgeprof__V1__Function *f, const char *name, uint64_t start, uint64_t size,
			 uint32_t local_index)
{
	edgeprof__v1__function__init(f);
	f->name = (char *)name, f->start = start, f->size = size, f->local_index = local_index;
}

static void build(void)
{
	for (size_t i = 0; i < N_EDGES; i++) {
		Edgeprof__V1__Edge *e = &edges[i];
		edgeprof__v1__edge__init(e);
		e->from = edge_rows[i].from, e->to = edge_rows[i].to;
		e->taken = edge_rows[i].taken, e->count = edge_rows[i].count;
		e->kind = edge_rows[i].kind;
		e->from_external = edge_rows[i].from_ext, e->to_external = edge_rows[i].to_ext;
		edge_ptrs[i] = e;
	}
	edgeprof__v1__range__init(&range);
	range.start = 0x1025, range.end = 0x1038, range.count = 10, range.cycles = 40;
	range_ptrs[0] = &range;
	set_function(&funcs[0], "helper", 0x1100, 0x20, 2);
	set_function(&funcs[1], "main", 0x1000, 0x40, 0);
	set_function(&funcs[2], "memcpy", 0x700, 0x100, 0);
	func_ptrs[0] = &funcs[0], func_ptrs[1] = &funcs[1], lib_func_ptrs[0] = &funcs[2];
	edgeprof__v1__load_segment__init(&segs[0]);
	segs[0].vaddr = 0x1000, segs[0].offset = 0x400, segs[0].size = 0x1000;
	edgeprof__v1__load_segment__init(&segs[1]);
	segs[1].vaddr = 0, segs[1].offset = 0, segs[1].size = 0x800;
	seg_ptrs[0] = &segs[0], seg_ptrs[1] = &segs[1];
	set_ip(&ips[0], 0x1010, 5, 100);
	set_ip(&ips[1], 0x3000, 2, 0); /* in no function */
	set_ip(&ips[2], 0x1010, 1, 0);
	set_ip(&ips[3], 0x710, 3, 0);
	ip_ptrs[0] = &ips[0], ip_ptrs[1] = &ips[1], pod_ip_ptrs[0] = &ips[2];
	lib_ip_ptrs[0] = &ips[3];

	edgeprof__v1__binary_profile__init(&app);
	app.build_id = "aa11", app.arch = "x86_64", app.samples = 7;
	app.paths = app_paths, app.n_paths = 1;
	app.edges = edge_ptrs, app.n_edges = N_EDGES;
	app.ranges = range_ptrs, app.n_ranges = 1;
	app.functions = func_ptrs, app.n_functions = 2;
	app.segments = seg_ptrs, app.n_segments = 2;
	app.ips = ip_ptrs, app.n_ips = 2;
	/* the same binary's counts in a pod: the same mapping and locations */
	edgeprof__v1__labels__init(&pod_labels);
	pod_labels.pod = "web-1", pod_labels.namespace_ = "shop";
	app_pod = app;
	app_pod.n_edges = app_pod.n_ranges = 0;
	app_pod.ips = pod_ip_ptrs, app_pod.n_ips = 1;
	app_pod.labels = &pod_labels;
	/* a library without segments (an old profile) */
	edgeprof__v1__binary_profile__init(&lib);
	lib.build_id = "bb22", lib.arch = "x86_64", lib.samples = 3;
	lib.paths = lib_paths, lib.n_paths = 1;
	lib.functions = lib_func_ptrs, lib.n_functions = 1;
	lib.ips = lib_ip_ptrs, lib.n_ips = 1;
	/* out of order: the export sorts */
	bin_ptrs[0] = &lib, bin_ptrs[1] = &app_pod, bin_ptrs[2] = &app;
	edgeprof__v1__sampling_config__init(&config);
	edgeprof__v1__profile__init(&profile);
	profile.config = &config;
	profile.binaries = bin_ptrs, profile.n_binaries = 3;
}

/* The export of `profile`, gunzipped and unpacked. */
static Perftools__Profiles__Profile *export_pprof(const char *build_id)
{
	char *buf = NULL, err[256] = "";
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);
	assert_non_null(out);
	assert_int_equal(ep_export(&profile, EP_EXPORT_PPROF, build_id, out, err, sizeof(err)), 0);
	fclose(out);
	assert_true(len > 2 && (uint8_t)buf[0] == 0x1f && (uint8_t)buf[1] == 0x8b); /* gzip */
	size_t cap = 1 << 20;
	uint8_t *raw = malloc(cap);
	assert_non_null(raw);
	z_stream z = {.next_in = (Bytef *)buf, .avail_in = (uInt)len};
	assert_int_equal(inflateInit2(&z, 15 + 16), Z_OK);
	z.next_out = raw, z.avail_out = (uInt)cap;
	assert_int_equal(inflate(&z, Z_FINISH), Z_STREAM_END);
	Perftools__Profiles__Profile *p =
	    perftools__profiles__profile__unpack(NULL, z.total_out, raw);
	inflateEnd(&z);
	free(raw);
	free(buf);
	assert_non_null(p);
	return p;
}

static const char *str(const Perftools__Profiles__Profile *p, int64_t i)
{
	assert_true(i >= 0 && (size_t)i < p->n_string_table);
	return p->string_table[i];
}

static int type_index(const Perftools__Profiles__Profile *p, const char *type, const char *unit)
{
	for (size_t i = 0; i < p->n_sample_type; i++)
		if (strcmp(str(p, p->sample_type[i]->type), type) == 0 &&
		    strcmp(str(p, p->sample_type[i]->unit), unit) == 0)
			return (int)i;
	return -1;
}

static const Perftools__Profiles__Location *location(const Perftools__Profiles__Profile *p,
						     uint64_t id)
{
	for (size_t i = 0; i < p->n_location; i++)
		if (p->location[i]->id == id)
			return p->location[i];
	fail_msg("no location %llu", (unsigned long long)id);
	return NULL;
}

static const Perftools__Profiles__Function *function_at(const Perftools__Profiles__Profile *p,
							uint64_t loc_id)
{
	const Perftools__Profiles__Location *l = location(p, loc_id);
	if (l->n_line == 0)
		return NULL;
	assert_int_equal(l->n_line, 1);
	for (size_t i = 0; i < p->n_function; i++)
		if (p->function[i]->id == l->line[0]->function_id)
			return p->function[i];
	fail_msg("no function %llu", (unsigned long long)l->line[0]->function_id);
	return NULL;
}

/* The sum of sample type t over the one-frame samples whose frame is in
 * the function named name ("" for none). */
static int64_t flat(const Perftools__Profiles__Profile *p, int t, const char *name)
{
	int64_t sum = 0;
	for (size_t i = 0; i < p->n_sample; i++) {
		const Perftools__Profiles__Sample *s = p->sample[i];
		assert_int_equal(s->n_value, p->n_sample_type);
		if (s->n_location_id != 1)
			continue;
		const Perftools__Profiles__Function *f = function_at(p, s->location_id[0]);
		if (strcmp(f ? str(p, f->name) : "", name) == 0)
			sum += s->value[t];
	}
	return sum;
}

static void test_format_name(void **state)
{
	(void)state;
	assert_int_equal(ep_export_parse_format("pprof"), EP_EXPORT_PPROF);
	assert_string_equal(ep_export_format_names[EP_EXPORT_PPROF], "pprof");
}

static void test_sample_types_and_sums(void **state)
{
	(void)state;
	build();
	Perftools__Profiles__Profile *p = export_pprof(NULL);
	assert_int_equal(p->n_sample_type, 4);
	int samples = type_index(p, "samples", "count"), cycles = type_index(p, "cycles", "count");
	int branches = type_index(p, "branches", "count"), calls = type_index(p, "calls", "count");
	assert_int_equal(samples, 0); /* the count first, by pprof's convention */
	assert_true(cycles > 0 && branches > 0 && calls > 0);
	assert_string_equal(str(p, p->default_sample_type), "samples");
	assert_string_equal(str(p, 0), "");

	/* both label sets' samples at 0x1010, and none where no function is */
	assert_int_equal(flat(p, samples, "main"), 6);
	assert_int_equal(flat(p, samples, ""), 2);
	assert_int_equal(flat(p, samples, "memcpy"), 3);
	/* the IP's cycles and the range's, at its closing branch */
	assert_int_equal(flat(p, cycles, "main"), 140);
	/* every branch out of the function but the fall-through (50), and
	 * none from another binary (2) */
	assert_int_equal(flat(p, branches, "main"), 7 + 3 + 4 + 9);
	assert_int_equal(flat(p, branches, "helper"), 7);
	assert_int_equal(flat(p, branches, ""), 0);

	/* the calls: callee first, then the caller, one per call site */
	int64_t seen = 0;
	for (size_t i = 0; i < p->n_sample; i++) {
		const Perftools__Profiles__Sample *s = p->sample[i];
		if (s->n_location_id != 2) {
			assert_int_equal(s->value[calls], 0);
			continue;
		}
		assert_string_equal(str(p, function_at(p, s->location_id[0])->name), "helper");
		assert_string_equal(str(p, function_at(p, s->location_id[1])->name), "main");
		assert_int_equal(location(p, s->location_id[0])->address, 0x1100);
		uint64_t site = location(p, s->location_id[1])->address;
		assert_true((site == 0x1020 && s->value[calls] == 7) ||
			    (site == 0x1030 && s->value[calls] == 3));
		assert_int_equal(s->value[samples] + s->value[branches] + s->value[cycles], 0);
		seen += s->value[calls];
	}
	assert_int_equal(seen, 10);
	perftools__profiles__profile__free_unpacked(p, NULL);
}

static void test_mappings_names_labels(void **state)
{
	(void)state;
	build();
	Perftools__Profiles__Profile *p = export_pprof(NULL);
	/* one mapping per binary: the pod's counts share the app's */
	assert_int_equal(p->n_mapping, 2);
	for (size_t i = 0; i < p->n_mapping; i++) {
		const Perftools__Profiles__Mapping *m = p->mapping[i];
		assert_int_equal(m->id, i + 1);
		assert_true(m->has_functions);
		if (strcmp(str(p, m->build_id), "aa11") == 0) {
			assert_string_equal(str(p, m->filename), "/bin/app");
			/* the lowest segment at its offset: ELF addresses as they are */
			assert_int_equal(m->memory_start, 0);
			assert_int_equal(m->memory_limit, 0x2000);
			assert_int_equal(m->file_offset, 0);
		} else {
			assert_string_equal(str(p, m->build_id), "bb22");
			assert_string_equal(str(p, m->filename), "/lib/libx.so");
			assert_int_equal(m->memory_start, 0);
			assert_int_equal(m->memory_limit, 0x711);
		}
	}
	/* every address once per mapping */
	for (size_t i = 0; i < p->n_location; i++)
		for (size_t j = i + 1; j < p->n_location; j++)
			assert_false(p->location[i]->mapping_id == p->location[j]->mapping_id &&
				     p->location[i]->address == p->location[j]->address);
	/* the plain name; BOLT's NAME/N as the system's; the binary as file */
	bool helper = false;
	for (size_t i = 0; i < p->n_function; i++) {
		const Perftools__Profiles__Function *f = p->function[i];
		if (strcmp(str(p, f->name), "helper") != 0)
			continue;
		helper = true;
		assert_string_equal(str(p, f->system_name), "helper/2");
		assert_string_equal(str(p, f->filename), "/bin/app");
	}
	assert_true(helper);
	/* the pod's sample carries its labels, the others none */
	size_t labelled = 0;
	for (size_t i = 0; i < p->n_sample; i++) {
		const Perftools__Profiles__Sample *s = p->sample[i];
		if (s->n_label == 0)
			continue;
		labelled++;
		assert_int_equal(s->n_label, 2);
		assert_string_equal(str(p, s->label[0]->key), "pod");
		assert_string_equal(str(p, s->label[0]->str), "web-1");
		assert_string_equal(str(p, s->label[1]->key), "namespace");
		assert_string_equal(str(p, s->label[1]->str), "shop");
		assert_int_equal(s->value[0], 1);
	}
	assert_int_equal(labelled, 1);
	perftools__profiles__profile__free_unpacked(p, NULL);
}

static void test_one_binary_ip_only(void **state)
{
	(void)state;
	build();
	/* --build-id: that binary only; an IP-only one has the count alone */
	Perftools__Profiles__Profile *p = export_pprof("bb");
	assert_int_equal(p->n_sample_type, 1);
	assert_int_equal(p->n_mapping, 1);
	assert_int_equal(p->n_sample, 1);
	assert_int_equal(flat(p, 0, "memcpy"), 3);
	perftools__profiles__profile__free_unpacked(p, NULL);
	/* time in nanoseconds where cpu-clock stood in for cycles */
	config.cycles_unit = "ns";
	app.n_edges = 0;
	profile.n_binaries = 2; /* lib and the app: "aa" names one binary */
	bin_ptrs[1] = &app;
	p = export_pprof("aa");
	assert_int_equal(p->n_sample_type, 2);
	assert_int_equal(type_index(p, "cpu", "nanoseconds"), 1);
	assert_int_equal(flat(p, 1, "main"), 140);
	perftools__profiles__profile__free_unpacked(p, NULL);
}

static void test_write_error_is_reported(void **state)
{
	(void)state;
	build();
	FILE *out = fopen("/dev/full", "w");
	assert_non_null(out);
	setvbuf(out, NULL, _IONBF, 0);
	char err[256] = "";
	assert_int_equal(ep_export(&profile, EP_EXPORT_PPROF, NULL, out, err, sizeof(err)), -1);
	assert_string_equal(err, "export: write failed: No space left on device");
	fclose(out);
}

/* agent --stacks: a stack becomes one sample of all its frames, leaf first,
 * each in its own binary's mapping, cut before a binary the export lacks;
 * its leaf IP's one-frame sample keeps only the samples no stack holds. */
static void test_stacks_are_multi_frame_samples(void **state)
{
	(void)state;
	build();
	static uint64_t frames[] = {0x1010, 0x1105, 0x710, 0x9999};
	static uint32_t fbins[] = {0, 0, 1, 2};
	static char *others[] = {"bb22", "cc33"};
	static Edgeprof__V1__StackCount st, *stp[1];
	edgeprof__v1__stack_count__init(&st);
	st.count = 4;
	st.frames = frames, st.n_frames = 4;
	st.frame_binaries = fbins, st.n_frame_binaries = 4;
	stp[0] = &st;
	app.stacks = stp, app.n_stacks = 1;
	app.stack_binaries = others, app.n_stack_binaries = 2;
	Perftools__Profiles__Profile *p = export_pprof(NULL);
	int t = type_index(p, "samples", "count");
	int64_t total = 0;
	size_t stacks = 0;
	for (size_t i = 0; i < p->n_sample; i++) {
		const Perftools__Profiles__Sample *s = p->sample[i];
		total += s->value[t];
		if (s->n_location_id < 2 || s->value[t] == 0)
			continue;
		stacks++;
		assert_int_equal(s->n_location_id, 3); /* cut before cc33 */
		assert_int_equal(s->value[t], 4);
		const char *want[] = {"main", "helper", "memcpy"};
		for (size_t k = 0; k < 3; k++)
			assert_string_equal(str(p, function_at(p, s->location_id[k])->name),
					    want[k]);
		assert_int_not_equal(location(p, s->location_id[2])->mapping_id,
				     location(p, s->location_id[0])->mapping_id);
	}
	assert_int_equal(stacks, 1);
	assert_int_equal(total, 5 + 2 + 1 + 3);	     /* each sample once */
	assert_int_equal(flat(p, t, "main"), 1 + 1); /* app's 5 less the stack's 4, the pod's 1 */
	perftools__profiles__profile__free_unpacked(p, NULL);
	app.n_stacks = 0, app.n_stack_binaries = 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_format_name),
	    cmocka_unit_test(test_sample_types_and_sums),
	    cmocka_unit_test(test_mappings_names_labels),
	    cmocka_unit_test(test_one_binary_ip_only),
	    cmocka_unit_test(test_write_error_is_reported),
	    cmocka_unit_test(test_stacks_are_multi_frame_samples),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
