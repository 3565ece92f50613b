/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Layout: "EDGEPROF" | u32 format version | u32 reserved (0) | u64 payload
 * length | payload: one packed edgeprof.v1.Profile. Little-endian. The
 * length lets a truncated file be told from a corrupt one before protobuf
 * sees it.
 */
#include "profile_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC	       "EDGEPROF"
#define FORMAT_VERSION 1u
#define HEADER_SIZE    24
#define MAX_PAYLOAD    (4ULL << 30)

static int write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int ep_profile_write(const char *path, const Edgeprof__V1__Profile *profile, char *err,
		     size_t errlen)
{
	size_t len = protobuf_c_message_get_packed_size(&profile->base);
	uint8_t *buf = malloc(HEADER_SIZE + len);
	if (!buf) {
		snprintf(err, errlen, "%s: out of memory packing %zu bytes", path, len);
		return -1;
	}
	memcpy(buf, MAGIC, 8);
	uint32_t version = FORMAT_VERSION, reserved = 0;
	uint64_t length = len;
	memcpy(buf + 8, &version, 4);
	memcpy(buf + 12, &reserved, 4);
	memcpy(buf + 16, &length, 8);
	protobuf_c_message_pack(&profile->base, buf + HEADER_SIZE);

	/* a temporary file beside the target and a rename: readers see the old
	 * profile or the new one, never half of one, whatever happens */
	size_t plen = strlen(path);
	char *tmp = malloc(plen + 16);
	if (!tmp) {
		free(buf);
		snprintf(err, errlen, "%s: out of memory", path);
		return -1;
	}
	snprintf(tmp, plen + 16, "%s.tmp.XXXXXX", path);
	int fd = mkstemp(tmp);
	int rc = -1;
	if (fd < 0) {
		snprintf(err, errlen, "%s: write failed: %s", path, strerror(errno));
		goto out;
	}
	if (write_all(fd, buf, HEADER_SIZE + len) != 0 || fsync(fd) != 0) {
		snprintf(err, errlen, "%s: write failed: %s", path, strerror(errno));
		close(fd);
		unlink(tmp);
		goto out;
	}
	fchmod(fd, 0644);
	if (close(fd) != 0 || rename(tmp, path) != 0) {
		snprintf(err, errlen, "%s: write failed: %s", path, strerror(errno));
		unlink(tmp);
		goto out;
	}
	rc = 0;
out:
	free(tmp);
	free(buf);
	return rc;
}

int ep_profile_read(const char *path, Edgeprof__V1__Profile **out, char *err, size_t errlen)
{
	*out = NULL;
	FILE *f = fopen(path, "rb");
	if (!f) {
		snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
		return -1;
	}
	uint8_t header[HEADER_SIZE];
	size_t got = fread(header, 1, HEADER_SIZE, f);
	if (got < 8 || memcmp(header, MAGIC, 8) != 0) {
		snprintf(err, errlen, "%s: not an edgeprof profile", path);
		fclose(f);
		return -1;
	}
	if (got < HEADER_SIZE) {
		snprintf(err, errlen, "%s: truncated profile (%zu of %d header bytes)", path, got,
			 HEADER_SIZE);
		fclose(f);
		return -1;
	}
	uint32_t version;
	uint64_t length;
	memcpy(&version, header + 8, 4);
	memcpy(&length, header + 16, 8);
	if (version > FORMAT_VERSION || version == 0) {
		snprintf(err, errlen,
			 "%s: profile format version %u is not supported (this edgeprof "
			 "reads version %u)",
			 path, version, FORMAT_VERSION);
		fclose(f);
		return -1;
	}
	if (length > MAX_PAYLOAD) {
		snprintf(err, errlen, "%s: corrupt profile: payload of %llu bytes", path,
			 (unsigned long long)length);
		fclose(f);
		return -1;
	}
	uint8_t *buf = malloc(length ? length : 1);
	if (!buf) {
		snprintf(err, errlen, "%s: out of memory reading %llu bytes", path,
			 (unsigned long long)length);
		fclose(f);
		return -1;
	}
	got = fread(buf, 1, length, f);
	fclose(f);
	if (got < length) {
		snprintf(err, errlen, "%s: truncated profile (%zu of %llu bytes)", path, got,
			 (unsigned long long)length);
		free(buf);
		return -1;
	}
	*out = edgeprof__v1__profile__unpack(NULL, length, buf);
	free(buf);
	if (!*out) {
		snprintf(err, errlen, "%s: corrupt profile: protobuf decoding failed", path);
		return -1;
	}
	return 0;
}

void ep_profile_free(Edgeprof__V1__Profile *profile)
{
	if (profile)
		protobuf_c_message_free_unpacked(&profile->base, NULL);
}
