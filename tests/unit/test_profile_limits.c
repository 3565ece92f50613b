/* SPDX-License-Identifier: Apache-2.0 */
/* What reading one profile file may take (issue 32): its payload, and the
 * messages protobuf-c unpacks from it, within ep_profile_set_max()'s
 * bound (report's and export's --profile-max-mib). */
#include "test_util.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "common/profile/profile_file.h"

/* A version-1 profile file (no checksum) whose payload is n empty
 * BinaryProfile messages: field 4, length 0, two bytes each. */
static void write_empty_binaries(const char *path, size_t n)
{
	size_t len = 2 * n;
	uint8_t *file = calloc(1, 24 + len);
	assert_non_null(file);
	memcpy(file, "EDGEPROF", 8);
	file[8] = 1;
	for (int i = 0; i < 8; i++)
		file[16 + i] = (uint8_t)((uint64_t)len >> (8 * i));
	for (size_t i = 0; i < n; i++) {
		file[24 + 2 * i] = 4 << 3 | 2;
		file[24 + 2 * i + 1] = 0;
	}
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(file, 1, 24 + len, f), 24 + len);
	fclose(f);
	free(file);
}

/* 1 MB of payload unpacks to ~100 MB of messages (an empty one is a few
 * hundred bytes of protobuf-c's structs): refused past the bound, naming
 * the file, the payload and the bound; read within it. */
static void test_unpacked_bounded(void **state)
{
	(void)state;
	char path[] = "/tmp/edgeprof-prof-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	write_empty_binaries(path, 500000);
	char err[512], want[512];
	Edgeprof__V1__Profile *p = NULL;
	ep_profile_set_max(16 << 20);
	assert_int_equal(ep_profile_read(path, &p, err, sizeof(err)), -1);
	assert_null(p);
	snprintf(want, sizeof(want),
		 "%s: its 1000000-byte payload unpacks to more than the 16 MiB "
		 "--profile-max-mib allows",
		 path);
	assert_string_equal(err, want);
	ep_profile_set_max((uint64_t)EP_PROFILE_DEFAULT_MAX_MIB << 20);
	assert_int_equal(ep_profile_read(path, &p, err, sizeof(err)), 0);
	assert_int_equal(p->n_binaries, 500000);
	ep_profile_free(p);
	unlink(path);
}

/* The payload itself past the bound: refused before it is read. */
static void test_payload_bounded(void **state)
{
	(void)state;
	char path[] = "/tmp/edgeprof-prof-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	write_empty_binaries(path, 1 << 20);
	char err[512], want[512];
	Edgeprof__V1__Profile *p = NULL;
	ep_profile_set_max(1 << 20);
	assert_int_equal(ep_profile_read(path, &p, err, sizeof(err)), -1);
	ep_profile_set_max((uint64_t)EP_PROFILE_DEFAULT_MAX_MIB << 20);
	snprintf(want, sizeof(want),
		 "%s: a payload of 2097152 bytes: more than the 1 MiB --profile-max-mib allows",
		 path);
	assert_string_equal(err, want);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_unpacked_bounded),
	    cmocka_unit_test(test_payload_bounded),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
