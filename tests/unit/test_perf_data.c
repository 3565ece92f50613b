/* SPDX-License-Identifier: Apache-2.0 */
/* The perf.data reader on the real recordings: numbers from the fixtures'
 * README (published with them) and from perf itself. */
#include "test_util.h"

#include <string.h>
#include <unistd.h>

#include "agent/source/perf_data/perf_data.h"

struct counts {
	uint64_t samples, full32, full16, entries, mmap, mmap2, build_ids;
	bool propeller_id_seen;
	uint64_t first_ip, first_from, first_to;
};

static int on_sample(void *ctx, const struct ep_sample_record *rec)
{
	struct counts *c = ctx;
	if (c->samples == 0) {
		c->first_ip = rec->ip;
		c->first_from = rec->nr_entries ? rec->entries[0].from : 0;
		c->first_to = rec->nr_entries ? rec->entries[0].to : 0;
	}
	c->samples++;
	c->entries += rec->nr_entries;
	c->full32 += rec->nr_entries == 32;
	c->full16 += rec->nr_entries == 16;
	assert_true(rec->flags & EP_SAMPLE_HAS_BRANCHES);
	return 0;
}

static int on_mmap(void *ctx, const struct ep_mmap_event *ev)
{
	struct counts *c = ctx;
	if (ev->is_mmap2)
		c->mmap2++;
	else
		c->mmap++;
	return 0;
}

static int on_build_id(void *ctx, const struct ep_perf_build_id *bid)
{
	struct counts *c = ctx;
	c->build_ids++;
	const char *suffix = "propeller_sample_1.bin.gen";
	size_t n = strlen(bid->filename), m = strlen(suffix);
	if (n >= m && strcmp(bid->filename + n - m, suffix) == 0) {
		static const uint8_t want[] = {0x57, 0x2a, 0xc7, 0x24, 0x87, 0xae, 0x19, 0x66};
		assert_int_equal(bid->build_id_len, 8);
		assert_memory_equal(bid->build_id, want, 8);
		c->propeller_id_seen = true;
	}
	return 0;
}

static int read_counts(const char *path, struct counts *c, struct ep_perf_data_stats *st, char *err,
		       size_t errlen)
{
	memset(c, 0, sizeof(*c));
	struct ep_perf_data_callbacks cb = {
	    .ctx = c, .on_sample = on_sample, .on_mmap = on_mmap, .on_build_id = on_build_id};
	return ep_perf_data_read(path, &cb, st, err, errlen);
}

/* "ip from/to..." of perf script's first sample, in perf's (time) order */
static void perf_first(const char *path, uint64_t *ip, uint64_t *from, uint64_t *to)
{
	char cmd[512], line[4096];
	snprintf(cmd, sizeof(cmd), "perf script -i %s -F ip,brstack 2>/dev/null | head -1", path);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	assert_non_null(fgets(line, sizeof(line), p));
	pclose(p);
	unsigned long long a, b, c;
	assert_int_equal(sscanf(line, " %llx 0x%llx/0x%llx", &a, &b, &c), 3);
	*ip = a;
	*from = b;
	*to = c;
}

static void test_propeller(void **state)
{
	(void)state;
	struct counts c;
	struct ep_perf_data_stats st;
	char err[256];
	assert_int_equal(
	    read_counts(ep_test_fixture("propeller_sample_1.perfdata1"), &c, &st, err, sizeof(err)),
	    0);
	assert_int_equal(c.samples, 3740);
	assert_int_equal(c.full32, 3732);
	assert_int_equal(c.entries, 119424);
	assert_true(c.mmap2 > 0);
	assert_true(c.propeller_id_seen);
	assert_int_equal(st.samples, 3740);
}

static void test_lbr_old_perf(void **state)
{
	(void)state;
	struct counts c;
	struct ep_perf_data_stats st;
	char err[256];
	const char *path = ep_test_fixture("test.lbr");
	assert_int_equal(read_counts(path, &c, &st, err, sizeof(err)), 0);
	assert_int_equal(c.samples, 9232);
	assert_int_equal(c.full16, 9232);
	assert_int_equal(c.mmap2, 0);
	assert_true(c.mmap > 0);
	uint64_t ip, from, to;
	perf_first(path, &ip, &from, &to);
	/* both deliver in time order: the first samples agree */
	assert_int_equal(c.first_ip, ip);
	assert_int_equal(c.first_from, from);
	assert_int_equal(c.first_to, to);
}

static void write_prefix(const char *src, const char *dst, long bytes)
{
	FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
	assert_non_null(in);
	assert_non_null(out);
	static char buf[1 << 16];
	while (bytes > 0) {
		size_t n =
		    fread(buf, 1, bytes < (long)sizeof(buf) ? (size_t)bytes : sizeof(buf), in);
		if (n == 0)
			break;
		fwrite(buf, 1, n, out);
		bytes -= (long)n;
	}
	fclose(in);
	fclose(out);
}

static void test_truncated_and_garbage(void **state)
{
	(void)state;
	char path[] = "/tmp/edgeprof-trunc-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	struct counts c;
	struct ep_perf_data_stats st;
	char err[256];
	/* cut in the middle of the data section */
	write_prefix(ep_test_fixture("propeller_sample_1.perfdata1"), path, 1500000);
	assert_int_equal(read_counts(path, &c, &st, err, sizeof(err)), -1);
	assert_non_null(strstr(err, path));
	assert_non_null(strstr(err, "byte "));
	assert_true(c.samples > 1000 && c.samples < 3740); /* what came before is delivered */
	/* cut inside the header */
	write_prefix(ep_test_fixture("propeller_sample_1.perfdata1"), path, 50);
	assert_int_equal(read_counts(path, &c, &st, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "too short"));
	/* not perf.data at all */
	write_prefix(ep_test_fixture("test.binary"), path, 4096);
	assert_int_equal(read_counts(path, &c, &st, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not a perf.data file"));
	unlink(path);
}

/* A copy of the propeller recording with the 8 bytes at off set to v and
 * those at off2 to v2 (off2 0: only the first). */
static void write_patched(const char *dst, uint64_t off, uint64_t v, uint64_t off2, uint64_t v2)
{
	const char *src = ep_test_fixture("propeller_sample_1.perfdata1");
	FILE *in = fopen(src, "rb");
	assert_non_null(in);
	assert_int_equal(fseek(in, 0, SEEK_END), 0);
	long size = ftell(in);
	rewind(in);
	uint8_t *buf = malloc((size_t)size);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)size, in), (size_t)size);
	fclose(in);
	memcpy(buf + off, &v, 8);
	if (off2)
		memcpy(buf + off2, &v2, 8);
	FILE *out = fopen(dst, "wb");
	assert_non_null(out);
	assert_int_equal(fwrite(buf, 1, (size_t)size, out), (size_t)size);
	fclose(out);
	free(buf);
}

/* The first attribute's ids section pointing past the end of the file: the
 * read fails, naming where, and the ids buffer read for it is freed (the
 * ASan+UBSan build's leak check fails this test otherwise). */
static void test_ids_cut_off(void **state)
{
	(void)state;
	char path[] = "/tmp/edgeprof-ids-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	uint64_t hdr[6];
	FILE *f = fopen(ep_test_fixture("propeller_sample_1.perfdata1"), "rb");
	assert_non_null(f);
	assert_int_equal(fread(hdr, 8, 6, f), 6);
	fclose(f);
	uint64_t attr_size = hdr[2], attrs_offset = hdr[3];
	/* the ids section: the last 16 bytes of the attr, {offset, size} */
	uint64_t ids_at = attrs_offset + attr_size - 16;
	/* 8 ids (the fixture may have none) far past the end */
	write_patched(path, ids_at, 1ULL << 40, ids_at + 8, 64);
	struct counts c;
	struct ep_perf_data_stats st;
	char err[256];
	assert_int_equal(read_counts(path, &c, &st, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "event ids cut off by the end of the file"));
	unlink(path);
}

/* A data section whose size runs past 2^64 (here 2^64-1): the records up to
 * the end of the file are read and the damage named, where the end offset
 * used to wrap below the start and nothing was read, without an error. */
static void test_data_size_wraps(void **state)
{
	(void)state;
	char path[] = "/tmp/edgeprof-size-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	write_patched(path, 48, UINT64_MAX, 0, 0); /* data.size */
	struct counts c;
	struct ep_perf_data_stats st;
	char err[256];
	assert_int_equal(read_counts(path, &c, &st, err, sizeof(err)), -1);
	assert_non_null(strstr(err, path));
	assert_non_null(strstr(err, "byte "));
	assert_int_equal(c.samples, 3740); /* every record before the end of the file */
	unlink(path);
}

/* fuzz_perf_data's find: a data section starting off an 8-byte boundary had
 * every record read as misaligned u64 words (UBSan); it is refused, naming
 * the header field, before any record is read. */
static void test_data_section_misaligned(void **state)
{
	(void)state;
	char path[] = "/tmp/edgeprof-align-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	write_patched(path, 40, 232 + 2, 0, 0); /* data.offset, 232 in the fixture */
	struct counts c;
	struct ep_perf_data_stats st;
	char err[256];
	assert_int_equal(read_counts(path, &c, &st, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "byte 40: data section at byte 234 is not 8-byte aligned"));
	assert_int_equal(c.samples, 0);
	unlink(path);
}

static int on_long_build_id(void *ctx, const struct ep_perf_build_id *bid)
{
	size_t *longest = ctx;
	if (strlen(bid->filename) > *longest)
		*longest = strlen(bid->filename);
	return 0;
}

/* fuzz_perf_data's find: a build-id entry of the largest size accepted
 * (4,140 bytes, its file name unterminated) had its name's NUL written one
 * byte past the reader's buffer; the ASan+UBSan build reports it without
 * the fix. The input is the fuzz regression input itself: the propeller
 * recording cut short, its build-id section pointed at such an entry. */
static void test_build_id_entry_fills_buffer(void **state)
{
	(void)state;
	size_t longest = 0;
	struct ep_perf_data_callbacks cb = {.ctx = &longest, .on_build_id = on_long_build_id};
	struct ep_perf_data_stats st;
	char err[512];
	assert_int_equal(
	    ep_perf_data_read("tests/fuzz/corpus/perf_data/regress_build_id_entry_4140", &cb, &st,
			      err, sizeof(err)),
	    0);
	assert_int_equal(longest, 4140 - 36); /* the entry after its 36-byte head */
}

struct order {
	uint64_t samples, last_time, backwards, sum_ip;
};

static int on_sample_order(void *ctx, const struct ep_sample_record *rec)
{
	struct order *o = ctx;
	o->samples++;
	o->backwards += rec->time_ns < o->last_time;
	o->last_time = rec->time_ns;
	o->sum_ip += rec->ip;
	return 0;
}

/* test.lbr has no FINISHED_ROUND records: everything is held for ordering
 * unless the cap says otherwise. Capped, the held bytes stay under the cap
 * (plus the record that crossed it) and every sample still arrives, in time
 * order (the file's samples are in time order). */
static void test_hold_cap_without_rounds(void **state)
{
	(void)state;
	char err[256];
	struct ep_perf_data_stats full, capped;
	struct order a = {0}, b = {0};
	struct ep_perf_data_callbacks cb = {.ctx = &a, .on_sample = on_sample_order};
	assert_int_equal(
	    ep_perf_data_read(ep_test_fixture("test.lbr"), &cb, &full, err, sizeof(err)), 0);
	cb.ctx = &b;
	const uint64_t cap = 64 << 10;
	assert_int_equal(ep_perf_data_read_capped(ep_test_fixture("test.lbr"), &cb, cap, &capped,
						  err, sizeof(err)),
			 0);
	assert_true(full.hold_bytes_peak > 3000000); /* the whole data section */
	assert_true(capped.hold_bytes_peak <= cap + 65536);
	assert_true(capped.hold_bytes_peak > cap);
	assert_int_equal(b.samples, 9232);
	assert_int_equal(a.samples, 9232);
	assert_int_equal(b.backwards, 0);
	assert_int_equal(a.sum_ip, b.sum_ip);
}

/* The propeller recording with its HEADER_BUILD_ID table replaced by n
 * entries of 52 bytes, all naming one path (same) or each its own. */
static void write_build_ids(const char *dst, unsigned n, bool same)
{
	FILE *in = fopen(ep_test_fixture("propeller_sample_1.perfdata1"), "rb");
	assert_non_null(in);
	assert_int_equal(fseek(in, 0, SEEK_END), 0);
	size_t size = (size_t)ftell(in), entry = 36 + 16;
	rewind(in);
	uint8_t *buf = malloc(size + (size_t)n * entry);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, size, in), size);
	fclose(in);
	uint64_t data_off, data_size, features;
	memcpy(&data_off, buf + 40, 8);
	memcpy(&data_size, buf + 48, 8);
	memcpy(&features, buf + 72, 8);
	assert_true(features & (1u << 2)); /* HEADER_BUILD_ID */
	/* its {offset, size} in the table after the data, after the bits below */
	uint64_t at = data_off + data_size + 16 * (uint64_t)__builtin_popcountll(features & 3);
	uint64_t section[2] = {size, (uint64_t)n * entry};
	memcpy(buf + at, section, sizeof(section));
	for (unsigned i = 0; i < n; i++) {
		uint8_t *e = buf + size + (size_t)i * entry;
		memset(e, 0, entry);
		uint16_t esize = (uint16_t)entry;
		memcpy(e + 6, &esize, 2);
		e[12] = (uint8_t)(i + 1); /* the id */
		snprintf((char *)e + 36, 16, same ? "/x/same" : "/x/%u", i);
	}
	FILE *out = fopen(dst, "wb");
	assert_non_null(out);
	assert_int_equal(fwrite(buf, 1, size + (size_t)n * entry, out), size + (size_t)n * entry);
	fclose(out);
	free(buf);
}

/* A build-id table of 200,000 entries: what is delivered (and so kept by
 * the caller: the pipeline copies every name) stays within the tables
 * bound, the others are counted, and the records are all read. */
static void test_build_id_table_bounded(void **state)
{
	(void)state;
	char path[] = "/tmp/edgeprof-bids-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	write_build_ids(path, 200000, false);
	ep_perf_data_set_tables_max(1 << 20);
	struct counts c;
	struct ep_perf_data_stats st;
	char err[256];
	assert_int_equal(read_counts(path, &c, &st, err, sizeof(err)), 0);
	ep_perf_data_set_tables_max((uint64_t)EP_PERF_DATA_DEFAULT_TABLES_MIB << 20);
	assert_int_equal(st.build_ids, 200000);
	assert_true(c.build_ids > 1000 && c.build_ids * (52 + 64) <= 1 << 20);
	assert_int_equal(st.build_ids_dropped, 200000 - c.build_ids);
	assert_int_equal(st.tables_max, 1 << 20);
	assert_int_equal(c.samples, 3740); /* the records, all of them */
	/* within the default bound: every entry */
	assert_int_equal(read_counts(path, &c, &st, err, sizeof(err)), 0);
	assert_int_equal(c.build_ids, 200000);
	assert_int_equal(st.build_ids_dropped, 0);
	unlink(path);
}

/* An attribute with 128 Ki event ids (the most one may have), against a
 * 1 MiB bound: 256 such attributes would index 32 M ids. Refused, naming
 * the count and the bound, before they are read. */
static void test_ids_bounded(void **state)
{
	(void)state;
	char path[] = "/tmp/edgeprof-idsmax-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	uint64_t hdr[6];
	FILE *f = fopen(ep_test_fixture("propeller_sample_1.perfdata1"), "rb");
	assert_non_null(f);
	assert_int_equal(fread(hdr, 8, 6, f), 6);
	fclose(f);
	uint64_t ids_at = hdr[3] + hdr[2] - 16;
	write_patched(path, ids_at, 0, ids_at + 8, 1 << 20);
	ep_perf_data_set_tables_max(1 << 20);
	struct counts c;
	struct ep_perf_data_stats st;
	char err[256];
	assert_int_equal(read_counts(path, &c, &st, err, sizeof(err)), -1);
	ep_perf_data_set_tables_max((uint64_t)EP_PERF_DATA_DEFAULT_TABLES_MIB << 20);
	assert_non_null(strstr(err, "event attribute 0 has 131072 ids: past the 1 MiB "
				    "--perf-data-tables-max-mib allows"));
	assert_int_equal(c.samples, 0);
	/* the default bound takes them (the ids are the file's first bytes) */
	assert_int_equal(read_counts(path, &c, &st, err, sizeof(err)), 0);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_propeller),
	    cmocka_unit_test(test_lbr_old_perf),
	    cmocka_unit_test(test_truncated_and_garbage),
	    cmocka_unit_test(test_hold_cap_without_rounds),
	    cmocka_unit_test(test_ids_cut_off),
	    cmocka_unit_test(test_data_size_wraps),
	    cmocka_unit_test(test_build_id_entry_fills_buffer),
	    cmocka_unit_test(test_data_section_misaligned),
	    cmocka_unit_test(test_build_id_table_bounded),
	    cmocka_unit_test(test_ids_bounded),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
