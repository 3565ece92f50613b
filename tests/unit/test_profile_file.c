/* SPDX-License-Identifier: Apache-2.0 */
/* The profile file: round trip, header layout, atomic replacement, and a
 * clear one-line error for every kind of damage. */
#include "test_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <zlib.h>

#include "common/profile/profile_file.h"

#define MAX_EDGES 64

struct fixture {
	char dir[64];
	char path[128];
	Edgeprof__V1__Profile profile;
	Edgeprof__V1__Stats stats;
	Edgeprof__V1__BinaryProfile bin;
	Edgeprof__V1__BinaryProfile *bins[1];
	Edgeprof__V1__Edge edges[MAX_EDGES];
	Edgeprof__V1__Edge *edge_ptrs[MAX_EDGES];
	char *paths[1];
};

/* A profile of one binary with n edges (n decides the file's size). */
static void build(struct fixture *fx, size_t n, uint64_t seed)
{
	edgeprof__v1__stats__init(&fx->stats);
	fx->stats.samples = 100 + seed;
	edgeprof__v1__binary_profile__init(&fx->bin);
	fx->paths[0] = "/usr/bin/demo";
	fx->bin.build_id = "abcd", fx->bin.arch = "x86_64", fx->bin.samples = 7;
	fx->bin.paths = fx->paths, fx->bin.n_paths = 1;
	for (size_t i = 0; i < n; i++) {
		edgeprof__v1__edge__init(&fx->edges[i]);
		fx->edges[i].from = 0x401000 + 16 * i;
		fx->edges[i].to = 0x402000 + i;
		fx->edges[i].taken = i % 2;
		fx->edges[i].count = seed * 1000 + i;
		fx->edge_ptrs[i] = &fx->edges[i];
	}
	fx->bin.edges = fx->edge_ptrs, fx->bin.n_edges = n;
	fx->bins[0] = &fx->bin;
	edgeprof__v1__profile__init(&fx->profile);
	fx->profile.format_version = 1, fx->profile.stats = &fx->stats;
	fx->profile.binaries = fx->bins, fx->profile.n_binaries = 1;
}

static int setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof(*fx));
	if (!fx)
		return -1;
	strcpy(fx->dir, "/tmp/edgeprof-pf-XXXXXX");
	if (!mkdtemp(fx->dir))
		return -1;
	snprintf(fx->path, sizeof(fx->path), "%s/p.prof", fx->dir);
	build(fx, 4, 1);
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;
	DIR *d = opendir(fx->dir);
	struct dirent *de;
	char p[400];
	while (d && (de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
			snprintf(p, sizeof(p), "%s/%s", fx->dir, de->d_name);
			unlink(p);
		}
	if (d)
		closedir(d);
	rmdir(fx->dir);
	free(fx);
	return 0;
}

static size_t dir_entries(const char *dir)
{
	size_t n = 0;
	DIR *d = opendir(dir);
	struct dirent *de;
	while (d && (de = readdir(d)))
		n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	if (d)
		closedir(d);
	return n;
}

static uint8_t *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	uint8_t *buf = malloc(1 << 20);
	assert_non_null(buf);
	*len = fread(buf, 1, 1 << 20, f);
	fclose(f);
	return buf;
}

static void spit(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	fclose(f);
}

/* The packed bytes of a message: equal bytes, equal profiles. */
static uint8_t *packed(const Edgeprof__V1__Profile *p, size_t *len)
{
	*len = edgeprof__v1__profile__get_packed_size(p);
	uint8_t *buf = malloc(*len + 1);
	assert_non_null(buf);
	edgeprof__v1__profile__pack(p, buf);
	return buf;
}

/* Reads path, expecting failure with exactly the message want. */
static void expect_error(const char *path, const char *want)
{
	Edgeprof__V1__Profile *p = (Edgeprof__V1__Profile *)1;
	char err[512] = "";
	assert_int_equal(ep_profile_read(path, &p, err, sizeof(err)), -1);
	assert_null(p);
	assert_string_equal(err, want);
}

static void test_round_trip_and_layout(void **state)
{
	struct fixture *fx = *state;
	char err[512];
	assert_int_equal(ep_profile_write(fx->path, &fx->profile, err, sizeof(err)), 0);
	Edgeprof__V1__Profile *back = NULL;
	assert_int_equal(ep_profile_read(fx->path, &back, err, sizeof(err)), 0);
	size_t la, lb;
	uint8_t *a = packed(&fx->profile, &la), *b = packed(back, &lb);
	assert_int_equal(la, lb);
	assert_memory_equal(a, b, la);
	assert_string_equal(back->binaries[0]->paths[0], "/usr/bin/demo");
	ep_profile_free(back);

	size_t flen;
	uint8_t *file = slurp(fx->path, &flen);
	assert_int_equal(flen, 24 + la);
	assert_memory_equal(file, "EDGEPROF", 8);
	static const uint8_t version[4] = {2, 0, 0, 0};
	assert_memory_equal(file + 8, version, 4);
	/* the CRC-32 of the whole file with its own 4 bytes as 0 */
	uint32_t stored = (uint32_t)file[12] | (uint32_t)file[13] << 8 | (uint32_t)file[14] << 16 |
			  (uint32_t)file[15] << 24;
	memset(file + 12, 0, 4);
	assert_int_equal(stored, (uint32_t)crc32(0, file, (uInt)flen));
	uint64_t len = 0;
	for (int i = 7; i >= 0; i--)
		len = len << 8 | file[16 + i];
	assert_int_equal(len, la);
	assert_memory_equal(file + 24, a, la);
	free(file);
	free(a);
	free(b);
}

static void test_replace_leaves_no_temp_and_follows_umask(void **state)
{
	struct fixture *fx = *state;
	char err[512];
	mode_t old = umask(022);
	assert_int_equal(ep_profile_write(fx->path, &fx->profile, err, sizeof(err)), 0);
	build(fx, 9, 2);
	assert_int_equal(ep_profile_write(fx->path, &fx->profile, err, sizeof(err)), 0);
	umask(old);
	struct stat st;
	assert_int_equal(stat(fx->path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0644);
	assert_int_equal(dir_entries(fx->dir), 1);
	Edgeprof__V1__Profile *back = NULL;
	assert_int_equal(ep_profile_read(fx->path, &back, err, sizeof(err)), 0);
	assert_int_equal(back->binaries[0]->n_edges, 9);
	assert_int_equal(back->stats->samples, 102);
	ep_profile_free(back);
}

/* A write that fails half way (here: the file size limit, as a full disk
 * would) names the path and the cause and leaves the old profile whole. */
static void test_failed_write_keeps_old_profile(void **state)
{
	struct fixture *fx = *state;
	char err[512];
	assert_int_equal(ep_profile_write(fx->path, &fx->profile, err, sizeof(err)), 0);
	size_t old_len;
	uint8_t *old = slurp(fx->path, &old_len);

	build(fx, MAX_EDGES, 3);
	assert_true(edgeprof__v1__profile__get_packed_size(&fx->profile) > 2 * old_len);
	struct rlimit saved, small = {.rlim_cur = old_len + 10, .rlim_max = RLIM_INFINITY};
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &saved), 0);
	small.rlim_max = saved.rlim_max;
	void (*handler)(int) = signal(SIGXFSZ, SIG_IGN);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
	int rc = ep_profile_write(fx->path, &fx->profile, err, sizeof(err));
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &saved), 0);
	signal(SIGXFSZ, handler);

	assert_int_equal(rc, -1);
	char want[512];
	snprintf(want, sizeof(want), "%s: write failed: File too large", fx->path);
	assert_string_equal(err, want);
	size_t now_len;
	uint8_t *now = slurp(fx->path, &now_len);
	assert_int_equal(now_len, old_len);
	assert_memory_equal(now, old, old_len);
	assert_int_equal(dir_entries(fx->dir), 1);
	free(old);
	free(now);
}

static void test_unwritable_place(void **state)
{
	struct fixture *fx = *state;
	char err[512];
	assert_int_equal(
	    ep_profile_write("/nonexistent-dir/p.prof", &fx->profile, err, sizeof(err)), -1);
	assert_string_equal(err,
			    "/nonexistent-dir/p.prof: write failed: No such file or directory");
}

/* Writes to target, expecting the refusal want; the target must be left
 * as it was (still of type mode), with no temporary file beside it. */
static void expect_refused(struct fixture *fx, const char *target, mode_t mode, const char *what)
{
	char err[512] = "", want[512];
	size_t before = dir_entries(fx->dir);
	assert_int_equal(ep_profile_write(target, &fx->profile, err, sizeof(err)), -1);
	snprintf(want, sizeof(want), "%s: is %s, not a regular file: refusing to replace it",
		 target, what);
	assert_string_equal(err, want);
	struct stat st;
	assert_int_equal(lstat(target, &st), 0);
	assert_int_equal(st.st_mode & S_IFMT, mode);
	assert_int_equal(dir_entries(fx->dir), before);
}

/* -o renames over its target: a FIFO, a device node or a symbolic link
 * there would be replaced by a regular file (as root, -o /dev/full once
 * replaced the device), so they are refused and left alone. The device is
 * one made here, never a real one. */
static void test_refuses_special_targets(void **state)
{
	struct fixture *fx = *state;
	char target[256], err[512];
	snprintf(target, sizeof(target), "%s/fifo", fx->dir);
	assert_int_equal(mkfifo(target, 0600), 0);
	expect_refused(fx, target, S_IFIFO, "a FIFO");

	/* a link to a profile: the profile stays as it was, the link too */
	assert_int_equal(ep_profile_write(fx->path, &fx->profile, err, sizeof(err)), 0);
	size_t old_len;
	uint8_t *old = slurp(fx->path, &old_len);
	snprintf(target, sizeof(target), "%s/link", fx->dir);
	assert_int_equal(symlink(fx->path, target), 0);
	build(fx, 9, 2);
	expect_refused(fx, target, S_IFLNK, "a symbolic link (name the file it points to instead)");
	size_t now_len;
	uint8_t *now = slurp(fx->path, &now_len);
	assert_int_equal(now_len, old_len);
	assert_memory_equal(now, old, old_len);
	free(old);
	free(now);

	snprintf(target, sizeof(target), "%s/sub", fx->dir);
	assert_int_equal(mkdir(target, 0700), 0);
	expect_refused(fx, target, S_IFDIR, "a directory");
	rmdir(target);

	/* a null device of our own (mknod needs root: skipped without it) */
	snprintf(target, sizeof(target), "%s/null", fx->dir);
	if (mknod(target, S_IFCHR | 0600, makedev(1, 3)) == 0)
		expect_refused(fx, target, S_IFCHR, "a character device");
	else
		print_message("# no mknod (%s): the device case is skipped\n", strerror(errno));
}

/* The start-up check does what the write would and leaves nothing behind. */
static void test_check_target(void **state)
{
	struct fixture *fx = *state;
	char err[512] = "", target[256], want[512];
	assert_int_equal(ep_profile_check_target(fx->path, err, sizeof(err)), 0);
	assert_int_equal(dir_entries(fx->dir), 0);
	snprintf(target, sizeof(target), "%s/none/p.prof", fx->dir);
	assert_int_equal(ep_profile_check_target(target, err, sizeof(err)), -1);
	snprintf(want, sizeof(want),
		 "%s: cannot write the profile there: No such file or directory", target);
	assert_string_equal(err, want);
	snprintf(target, sizeof(target), "%s/fifo", fx->dir);
	assert_int_equal(mkfifo(target, 0600), 0);
	assert_int_equal(ep_profile_check_target(target, err, sizeof(err)), -1);
	snprintf(want, sizeof(want), "%s: is a FIFO, not a regular file: refusing to replace it",
		 target);
	assert_string_equal(err, want);
	if (geteuid() != 0) { /* root writes into a read-only directory anyway */
		assert_int_equal(chmod(fx->dir, 0500), 0);
		assert_int_equal(ep_profile_check_target(fx->path, err, sizeof(err)), -1);
		snprintf(want, sizeof(want),
			 "%s: cannot write the profile there: Permission denied", fx->path);
		assert_string_equal(err, want);
		assert_int_equal(chmod(fx->dir, 0700), 0);
	}
}

static void test_truncated(void **state)
{
	struct fixture *fx = *state;
	char err[512], want[512];
	assert_int_equal(ep_profile_write(fx->path, &fx->profile, err, sizeof(err)), 0);
	struct stat st;
	assert_int_equal(stat(fx->path, &st), 0);
	assert_int_equal(truncate(fx->path, 30), 0);
	snprintf(want, sizeof(want), "%s: truncated profile (30 of %lld bytes)", fx->path,
		 (long long)st.st_size);
	expect_error(fx->path, want);
	assert_int_equal(truncate(fx->path, 10), 0);
	snprintf(want, sizeof(want), "%s: truncated profile (10 of 24 header bytes)", fx->path);
	expect_error(fx->path, want);
}

static void test_not_a_profile(void **state)
{
	struct fixture *fx = *state;
	char want[512];
	spit(fx->path, "PERFILE2 and more", 17);
	snprintf(want, sizeof(want), "%s: not an edgeprof profile (no EDGEPROF header)", fx->path);
	expect_error(fx->path, want);
	spit(fx->path, "", 0);
	snprintf(want, sizeof(want), "%s: not an edgeprof profile (empty file)", fx->path);
	expect_error(fx->path, want);
	snprintf(want, sizeof(want), "%s/none.prof: cannot open: No such file or directory",
		 fx->dir);
	char missing[256];
	snprintf(missing, sizeof(missing), "%s/none.prof", fx->dir);
	expect_error(missing, want);
	snprintf(want, sizeof(want), "%s: is a directory, not a regular file", fx->dir);
	expect_error(fx->dir, want);
}

/* Rewrites header field [off, off+n) of the written profile with v. */
static void patch_header(const char *path, int off, int n, uint64_t v)
{
	size_t len;
	uint8_t *buf = slurp(path, &len);
	for (int i = 0; i < n; i++)
		buf[off + i] = (uint8_t)(v >> (8 * i));
	spit(path, buf, len);
	free(buf);
}

static void test_damaged_header(void **state)
{
	struct fixture *fx = *state;
	char err[512], want[512];
	assert_int_equal(ep_profile_write(fx->path, &fx->profile, err, sizeof(err)), 0);
	patch_header(fx->path, 8, 4, 3);
	snprintf(want, sizeof(want),
		 "%s: profile format version 3 is newer than this edgeprof reads (2)", fx->path);
	expect_error(fx->path, want);
	/* version 1 had no checksum: its 4 bytes were 0 */
	patch_header(fx->path, 8, 4, 1);
	patch_header(fx->path, 12, 4, 0x10);
	snprintf(want, sizeof(want), "%s: corrupt profile header (version 1, reserved 0x10)",
		 fx->path);
	expect_error(fx->path, want);
	patch_header(fx->path, 12, 4, 0);
	/* a damaged length: refused before anything is allocated for it */
	patch_header(fx->path, 16, 8, 5ULL << 30);
	snprintf(want, sizeof(want),
		 "%s: corrupt profile: declared payload of 5368709120 bytes is over the 4 GiB "
		 "limit",
		 fx->path);
	expect_error(fx->path, want);
	struct stat st;
	assert_int_equal(stat(fx->path, &st), 0);
	patch_header(fx->path, 16, 8, 3ULL << 30);
	snprintf(want, sizeof(want), "%s: truncated profile (%lld of %llu bytes)", fx->path,
		 (long long)st.st_size, 24 + (3ULL << 30));
	expect_error(fx->path, want);
}

static void test_damaged_payload(void **state)
{
	struct fixture *fx = *state;
	char err[512], want[512];
	assert_int_equal(ep_profile_write(fx->path, &fx->profile, err, sizeof(err)), 0);
	size_t len;
	uint8_t *buf = slurp(fx->path, &len);
	/* bytes glued after the payload */
	buf[len] = 'x';
	spit(fx->path, buf, len + 1);
	snprintf(want, sizeof(want), "%s: corrupt profile: data after the %zu bytes declared",
		 fx->path, len);
	expect_error(fx->path, want);
	/* one bit changed: the checksum says so */
	uint32_t stored = (uint32_t)buf[12] | (uint32_t)buf[13] << 8 | (uint32_t)buf[14] << 16 |
			  (uint32_t)buf[15] << 24;
	buf[len - 1] ^= 4;
	memset(buf + 12, 0, 4);
	uint32_t now = (uint32_t)crc32(0, buf, (uInt)len);
	spit(fx->path, buf, len);
	patch_header(fx->path, 12, 4, stored);
	snprintf(want, sizeof(want),
		 "%s: corrupt profile: checksum %#010x, the file's bytes give %#010x", fx->path,
		 stored, now);
	expect_error(fx->path, want);
	/* a payload that is no protobuf message (an unterminated varint), with
	 * the right checksum */
	memset(buf + 24, 0xff, len - 24);
	spit(fx->path, buf, len);
	patch_header(fx->path, 12, 4, crc32(0, buf, (uInt)len));
	snprintf(want, sizeof(want),
		 "%s: corrupt profile: the %zu-byte payload is not an edgeprof.v1.Profile message",
		 fx->path, len - 24);
	expect_error(fx->path, want);
	free(buf);
}

/* Files written before the checksum (format version 1: 0 in its place)
 * are still read. */
static void test_reads_version_1(void **state)
{
	struct fixture *fx = *state;
	size_t la;
	uint8_t *payload = packed(&fx->profile, &la);
	uint8_t *file = calloc(1, 24 + la);
	assert_non_null(file);
	memcpy(file, "EDGEPROF", 8);
	file[8] = 1;
	for (int i = 0; i < 8; i++)
		file[16 + i] = (uint8_t)((uint64_t)la >> (8 * i));
	memcpy(file + 24, payload, la);
	spit(fx->path, file, 24 + la);
	Edgeprof__V1__Profile *back = NULL;
	char err[512];
	assert_int_equal(ep_profile_read(fx->path, &back, err, sizeof(err)), 0);
	assert_int_equal(back->binaries[0]->n_edges, 4);
	assert_int_equal(back->stats->samples, 101);
	ep_profile_free(back);
	free(file);
	free(payload);
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* 1,000 seeded mutations of a profile (1 to 4 bytes changed anywhere, each
 * to another value, or the file cut or extended by a byte): not one may be
 * read as a profile. Without a checksum a changed count or address is a
 * valid message still (114 of 1,000 in issue 18's run). */
static void test_mutations_rejected(void **state)
{
	struct fixture *fx = *state;
	char err[512];
	build(fx, MAX_EDGES, 5);
	assert_int_equal(ep_profile_write(fx->path, &fx->profile, err, sizeof(err)), 0);
	size_t len;
	uint8_t *good = slurp(fx->path, &len);
	uint8_t *bad = malloc(len + 1);
	assert_non_null(bad);
	unsigned read_ok = 0;
	for (uint64_t seed = 1; seed <= 1000; seed++) {
		uint64_t rng = seed * 0x9e3779b97f4a7c15ULL;
		memcpy(bad, good, len);
		size_t n = len;
		unsigned kind = (unsigned)(xorshift(&rng) % 10);
		if (kind == 0) {
			n = len - 1; /* one byte short */
		} else if (kind == 1) {
			bad[len] = (uint8_t)xorshift(&rng); /* one byte more */
			n = len + 1;
		} else {
			unsigned changes = 1 + (unsigned)(xorshift(&rng) % 4);
			for (unsigned i = 0; i < changes; i++)
				bad[xorshift(&rng) % len] ^= (uint8_t)(1 + xorshift(&rng) % 255);
			if (memcmp(bad, good, len) == 0)
				bad[0] ^= 1; /* the changes undid each other */
		}
		spit(fx->path, bad, n);
		Edgeprof__V1__Profile *back = NULL;
		if (ep_profile_read(fx->path, &back, err, sizeof(err)) == 0) {
			read_ok++;
			ep_profile_free(back);
		} else {
			assert_non_null(strstr(err, fx->path));
		}
	}
	print_message("# %u of 1000 mutated profiles read without an error\n", read_ok);
	assert_int_equal(read_ok, 0);
	free(bad);
	free(good);
}

/* A pipe or a FIFO is refused at once, naming it: a FIFO with no writer
 * blocked the open for ever (`report FIFO` hung), so a profile is read from
 * regular files only, like every input (common/util/regular_file.h). */
static void test_read_from_pipe(void **state)
{
	struct fixture *fx = *state;
	char err[512], want[512], path[64];
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fds[0]);
	Edgeprof__V1__Profile *back = NULL;
	assert_int_equal(ep_profile_read(path, &back, err, sizeof(err)), -1);
	snprintf(want, sizeof(want), "%s: is a FIFO, not a regular file", path);
	assert_string_equal(err, want);
	close(fds[0]);
	close(fds[1]);
	/* a named one, no writer ever: refused, not waited on */
	char fifo[256];
	snprintf(fifo, sizeof(fifo), "%s/fifo", fx->dir);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	assert_int_equal(ep_profile_read(fifo, &back, err, sizeof(err)), -1);
	snprintf(want, sizeof(want), "%s: is a FIFO, not a regular file", fifo);
	assert_string_equal(err, want);
	assert_null(back);
	unlink(fifo);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_round_trip_and_layout, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_replace_leaves_no_temp_and_follows_umask, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_failed_write_keeps_old_profile, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_unwritable_place, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_refuses_special_targets, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_check_target, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_truncated, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_not_a_profile, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_damaged_header, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_damaged_payload, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_read_from_pipe, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_mutations_rejected, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_reads_version_1, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
