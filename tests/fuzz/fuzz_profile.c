/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target over the profile file reader (ep_profile_read,
 * common/profile/profile_file.h) and what `edgeprof report` and
 * `edgeprof export` do with a profile it accepts (common/export/export.h:
 * every format and the report). The input is a profile file; a version 2
 * input is read twice, as it is and with its checksum made right, since
 * byte mutations would almost never get past the CRC-32 to the payload
 * (version 1, without a checksum, reaches it directly). Invariants: a file
 * refused says why; an accepted one exports without a sanitizer report.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "common/export/export.h"
#include "common/profile/profile_file.h"
#include "tests/fuzz/fuzz_util.h"

#define FAIL(...) EP_FUZZ_FAIL("fuzz_profile", __VA_ARGS__)

/* profile_file.c's layout: magic, version, CRC-32 at 12, length, payload */
#define HEADER_SIZE	24
#define CHECKSUM_OFFSET 12

static FILE *devnull;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	devnull = fopen("/dev/null", "w");
	return devnull ? 0 : -1;
}

static void use(const Edgeprof__V1__Profile *p)
{
	char err[512];
	for (int f = EP_EXPORT_JSON; f <= EP_EXPORT_PPROF; f++) {
		ep_export(p, (enum ep_export_format)f, NULL, devnull, err, sizeof(err));
		/* a build-id prefix selects one binary: the first's, if any */
		if (p->n_binaries && p->binaries[0] && p->binaries[0]->build_id)
			ep_export(p, (enum ep_export_format)f, p->binaries[0]->build_id, devnull,
				  err, sizeof(err));
	}
	ep_report(p, 5, devnull);
}

static void read_one(const uint8_t *data, size_t size)
{
	Edgeprof__V1__Profile *p = NULL;
	char err[512] = "";
	if (ep_profile_read(ep_fuzz_file(data, size), &p, err, sizeof(err)) == 0) {
		use(p);
		ep_profile_free(p);
	} else if (!err[0] || p) {
		FAIL("refused without a reason, or with a profile");
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	read_one(data, size);
	if (size < HEADER_SIZE || memcmp(data, "EDGEPROF", 8) != 0 || data[8] != 2)
		return 0;
	uint8_t *fixed = malloc(size);
	if (!fixed)
		return 0;
	memcpy(fixed, data, size);
	memset(fixed + CHECKSUM_OFFSET, 0, 4);
	uint32_t crc = (uint32_t)crc32_z(crc32_z(0, NULL, 0), fixed, size);
	for (int i = 0; i < 4; i++)
		fixed[CHECKSUM_OFFSET + i] = (uint8_t)(crc >> (8 * i));
	read_one(fixed, size);
	free(fixed);
	return 0;
}
