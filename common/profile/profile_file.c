/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The profile file, little-endian:
 *
 *   offset size
 *        0    8  magic "EDGEPROF"
 *        8    4  format version, 2 (bumped when the layout or the meaning of
 *                the payload changes incompatibly; proto fields are only ever
 *                added, which needs no bump)
 *       12    4  CRC-32 (zlib's) of the whole file, these 4 bytes as 0;
 *                version 1 had 0 here and no checksum
 *       16    8  payload length in bytes
 *       24  ...  payload: one packed edgeprof.v1.Profile (proto/profile.proto)
 *
 * Nothing follows the payload. The magic tells a profile from a perf.data
 * or anything else before protobuf sees it (protobuf would accept many
 * random files as some message); the length tells a truncated file (a
 * crash during a copy, a full disk elsewhere) from a corrupt one; the
 * checksum tells a damaged file from a profile: a changed count or address
 * is still a valid message (108 of 1,000 randomly damaged profiles read
 * without an error before version 2). Version 1 files are still read,
 * without the check: they were written before it existed.
 *
 * Writing goes to a temporary file beside the target, fsync'd, then renamed
 * over it: a reader sees the old profile or the new one, never half of one,
 * and a failed write leaves the old one alone. The rename replaces whatever
 * has the target's name, so a target that is not a regular file (a device,
 * a FIFO, a socket, a symbolic link) is refused instead: as root, -o
 * /dev/full once replaced the device with a file. A symbolic link is refused
 * rather than followed: an agent running as root writing through a link
 * that someone else could plant would overwrite any file on the machine. The message is streamed
 * through a small buffer, so writing needs no second copy of the profile.
 *
 * Reading takes the whole payload into one buffer of the declared size:
 * profiles are small next to memory, and protobuf-c unpacks from one
 * buffer. The declared size is checked against the file's size first, so
 * a damaged length cannot make us allocate gigabytes for a small file, and
 * is capped at 4 GiB.
 */
#include "common/profile/profile_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "common/util/regular_file.h"

#define MAGIC		       "EDGEPROF"
#define MAGIC_SIZE	       8
#define FORMAT_VERSION	       2u
#define FIRST_CHECKSUM_VERSION 2u
#define CHECKSUM_OFFSET	       12
#define HEADER_SIZE	       24
#define MAX_PAYLOAD	       (4ULL << 30)

/* what a profile's payload, and what it unpacks to, may take */
static uint64_t profile_max = (uint64_t)EP_PROFILE_DEFAULT_MAX_MIB << 20;

void ep_profile_set_max(uint64_t bytes)
{
	if (bytes)
		profile_max = bytes;
}

/* protobuf-c's allocations while it unpacks, counted (with malloc's own
 * 16 bytes each) and refused past the bound. Plain malloc underneath:
 * ep_profile_free() frees them as usual. */
struct counted_alloc {
	uint64_t left;
	bool over;
};

static void *counted_malloc(void *data, size_t size)
{
	struct counted_alloc *c = data;
	if (size > c->left || c->left - size < 16) {
		c->over = true;
		return NULL;
	}
	c->left -= size + 16;
	return malloc(size);
}

static void counted_free(void *data, void *p)
{
	(void)data;
	free(p);
}

static void put_le(uint8_t *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int n)
{
	uint64_t v = 0;
	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* Writes to fd through a buffer; the first error sticks and later output
 * is dropped, since protobuf-c's append callback cannot fail. */
struct fd_writer {
	ProtobufCBuffer base;
	int fd;
	int error; /* errno of the first failure, 0 while all is well */
	uint64_t written;
	uLong crc; /* of every byte appended */
	size_t used;
	uint8_t buf[1 << 16];
};

static void fd_flush(struct fd_writer *w)
{
	const uint8_t *p = w->buf;
	while (w->used > 0 && !w->error) {
		ssize_t n = write(w->fd, p, w->used);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			w->error = n < 0 ? errno : EIO;
			break;
		}
		p += n;
		w->used -= (size_t)n;
		w->written += (uint64_t)n;
	}
	w->used = 0;
}

static void fd_append(ProtobufCBuffer *buffer, size_t len, const uint8_t *data)
{
	struct fd_writer *w = (struct fd_writer *)buffer;
	w->crc = crc32_z(w->crc, data, len);
	while (len > 0 && !w->error) {
		size_t n = sizeof(w->buf) - w->used;
		if (n > len)
			n = len;
		memcpy(w->buf + w->used, data, n);
		w->used += n;
		data += n;
		len -= n;
		if (w->used == sizeof(w->buf))
			fd_flush(w);
	}
}

/* A new file beside path that no one else uses: the rename must stay within
 * one file system, and the mode must follow the umask like any new file. */
static int create_temp(const char *path, char **tmp_out)
{
	size_t len = strlen(path) + 48;
	char *tmp = malloc(len);
	if (!tmp) {
		errno = ENOMEM;
		return -1;
	}
	for (unsigned attempt = 0; attempt < 100; attempt++) {
		snprintf(tmp, len, "%s.tmp.%ld.%u", path, (long)getpid(), attempt);
		int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
		if (fd >= 0) {
			*tmp_out = tmp;
			return fd;
		}
		if (errno != EEXIST)
			break;
	}
	int saved = errno;
	free(tmp);
	errno = saved;
	return -1;
}

/* Nothing but a regular file may be replaced (see the top of the file). */
static int check_replaceable(const char *path, char *err, size_t errlen)
{
	struct stat st;
	if (lstat(path, &st) != 0) {
		if (errno == ENOENT)
			return 0; /* a missing directory is said when creating the file */
		snprintf(err, errlen, "%s: cannot write the profile there: %s", path,
			 strerror(errno));
		return -1;
	}
	if (S_ISREG(st.st_mode))
		return 0;
	snprintf(err, errlen, "%s: is %s%s, not a regular file: refusing to replace it", path,
		 ep_file_kind(st.st_mode),
		 S_ISLNK(st.st_mode) ? " (name the file it points to instead)" : "");
	return -1;
}

/* Makes the rename itself durable; a file system that cannot sync a
 * directory still has the new profile in place, so errors are ignored. */
static void sync_parent(const char *path)
{
	const char *slash = strrchr(path, '/');
	char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : NULL;
	int fd = open(dir ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	free(dir);
	if (fd >= 0) {
		(void)fsync(fd);
		close(fd);
	}
}

int ep_profile_check_target(const char *path, char *err, size_t errlen)
{
	if (check_replaceable(path, err, errlen) != 0)
		return -1;
	/* what the write will do first: a file of our own beside the target */
	char *tmp = NULL;
	int fd = create_temp(path, &tmp);
	if (fd < 0) {
		snprintf(err, errlen, "%s: cannot write the profile there: %s", path,
			 strerror(errno));
		return -1;
	}
	close(fd);
	unlink(tmp);
	free(tmp);
	return 0;
}

int ep_profile_write(const char *path, const Edgeprof__V1__Profile *profile, char *err,
		     size_t errlen)
{
	size_t len = protobuf_c_message_get_packed_size(&profile->base);
	uint8_t header[HEADER_SIZE] = {0};
	memcpy(header, MAGIC, MAGIC_SIZE);
	put_le(header + 8, FORMAT_VERSION, 4);
	put_le(header + 16, len, 8);

	if (check_replaceable(path, err, errlen) != 0)
		return -1;
	struct fd_writer *w = calloc(1, sizeof(*w));
	char *tmp = NULL;
	int fd = w ? create_temp(path, &tmp) : -1;
	if (fd < 0) {
		snprintf(err, errlen, "%s: write failed: %s", path, strerror(w ? errno : ENOMEM));
		free(w);
		return -1;
	}
	w->base.append = fd_append;
	w->fd = fd;
	w->crc = crc32_z(0, NULL, 0);
	fd_append(&w->base, HEADER_SIZE, header);
	protobuf_c_message_pack_to_buffer(&profile->base, &w->base);
	fd_flush(w);
	int error = w->error;
	if (!error && w->written != HEADER_SIZE + (uint64_t)len)
		error = EIO; /* the packer and the size it announced disagree */
	/* the checksum is known once the payload has streamed past */
	uint8_t crc[4];
	put_le(crc, w->crc, 4);
	ssize_t n = error ? 0 : pwrite(fd, crc, sizeof(crc), CHECKSUM_OFFSET);
	if (!error && n != (ssize_t)sizeof(crc))
		error = n < 0 ? errno : EIO;
	if (!error && fsync(fd) != 0)
		error = errno;
	if (close(fd) != 0 && !error)
		error = errno;
	/* again just before the rename: something may have taken the name since */
	bool refused = !error && check_replaceable(path, err, errlen) != 0;
	if (!error && !refused && rename(tmp, path) != 0)
		error = errno;
	if (error || refused) {
		unlink(tmp);
		if (error)
			snprintf(err, errlen, "%s: write failed: %s", path, strerror(error));
	} else {
		sync_parent(path);
	}
	free(tmp);
	free(w);
	return error || refused ? -1 : 0;
}

/* Reads up to len bytes; returns how many (fewer only at the end of the
 * file), or -1 with errno set. */
static ssize_t read_full(int fd, uint8_t *buf, size_t len)
{
	size_t got = 0;
	while (got < len) {
		ssize_t n = read(fd, buf + got, len - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

/* Fills *buf with the payload. A regular file's size is known, so the
 * buffer is allocated once; a pipe's is not, so the buffer grows as bytes
 * arrive, never past the declared length. Returns the bytes read (fewer
 * than len when the input ends early), or -1 with errno set. */
static ssize_t read_payload(int fd, bool regular, size_t len, uint8_t **buf)
{
	size_t cap = regular || len < (1u << 20) ? len : (1u << 20);
	size_t got = 0;
	*buf = malloc(cap ? cap : 1);
	if (!*buf)
		return -1;
	for (;;) {
		ssize_t n = read_full(fd, *buf + got, cap - got);
		if (n < 0)
			return -1;
		got += (size_t)n;
		if (got < cap || cap == len)
			return (ssize_t)got;
		cap = cap > len / 2 ? len : cap * 2;
		uint8_t *bigger = realloc(*buf, cap);
		if (!bigger)
			return -1;
		*buf = bigger;
	}
}

/* The message in buf[0..length), its allocations counted against the
 * bound: 0, or -1 with err. */
static int unpack(const char *path, const uint8_t *buf, uint64_t length,
		  Edgeprof__V1__Profile **out, char *err, size_t errlen)
{
	struct counted_alloc count = {.left = profile_max};
	ProtobufCAllocator alloc = {
	    .alloc = counted_malloc, .free = counted_free, .allocator_data = &count};
	*out = edgeprof__v1__profile__unpack(&alloc, (size_t)length, buf);
	if (!*out && count.over) {
		snprintf(err, errlen,
			 "%s: its %llu-byte payload unpacks to more than the %llu MiB "
			 "--profile-max-mib allows",
			 path, (unsigned long long)length, (unsigned long long)(profile_max >> 20));
		return -1;
	}
	if (!*out) {
		snprintf(err, errlen,
			 "%s: corrupt profile: the %llu-byte payload is not an edgeprof.v1.Profile "
			 "message",
			 path, (unsigned long long)length);
		return -1;
	}
	return 0;
}

static int read_profile(int fd, const char *path, Edgeprof__V1__Profile **out, char *err,
			size_t errlen)
{
	struct stat st;
	if (fstat(fd, &st) != 0) {
		snprintf(err, errlen, "%s: read failed: %s", path, strerror(errno));
		return -1;
	}
	if (S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "%s: is a directory, not a profile", path);
		return -1;
	}
	bool regular = S_ISREG(st.st_mode);
	uint8_t header[HEADER_SIZE];
	ssize_t got = read_full(fd, header, HEADER_SIZE);
	if (got < 0) {
		snprintf(err, errlen, "%s: read failed: %s", path, strerror(errno));
		return -1;
	}
	if (got == 0) {
		snprintf(err, errlen, "%s: not an edgeprof profile (empty file)", path);
		return -1;
	}
	if (memcmp(header, MAGIC, got < MAGIC_SIZE ? (size_t)got : MAGIC_SIZE) != 0) {
		snprintf(err, errlen, "%s: not an edgeprof profile (no %s header)", path, MAGIC);
		return -1;
	}
	if (got < HEADER_SIZE) {
		snprintf(err, errlen, "%s: truncated profile (%zd of %d header bytes)", path, got,
			 HEADER_SIZE);
		return -1;
	}
	uint32_t version = (uint32_t)get_le(header + 8, 4);
	uint32_t stored_crc = (uint32_t)get_le(header + CHECKSUM_OFFSET, 4);
	uint64_t length = get_le(header + 16, 8);
	if (version == 0 || (version < FIRST_CHECKSUM_VERSION && stored_crc != 0)) {
		snprintf(err, errlen, "%s: corrupt profile header (version %u, reserved %#x)", path,
			 version, stored_crc);
		return -1;
	}
	if (version > FORMAT_VERSION) {
		snprintf(err, errlen,
			 "%s: profile format version %u is newer than this edgeprof reads (%u)",
			 path, version, FORMAT_VERSION);
		return -1;
	}
	if (length > MAX_PAYLOAD || length > SIZE_MAX - 1) {
		snprintf(err, errlen,
			 "%s: corrupt profile: declared payload of %llu bytes is over the 4 GiB "
			 "limit",
			 path, (unsigned long long)length);
		return -1;
	}
	unsigned long long total = HEADER_SIZE + length;
	if (regular && (unsigned long long)st.st_size < total) {
		snprintf(err, errlen, "%s: truncated profile (%lld of %llu bytes)", path,
			 (long long)st.st_size, total);
		return -1;
	}
	if (length > profile_max) {
		snprintf(err, errlen,
			 "%s: a payload of %llu bytes: more than the %llu MiB --profile-max-mib "
			 "allows",
			 path, (unsigned long long)length, (unsigned long long)(profile_max >> 20));
		return -1;
	}
	uint8_t *buf = NULL;
	got = read_payload(fd, regular, (size_t)length, &buf);
	if (got < 0) {
		snprintf(err, errlen, "%s: read failed: %s", path, strerror(errno));
		free(buf);
		return -1;
	}
	if ((uint64_t)got < length) {
		snprintf(err, errlen, "%s: truncated profile (%llu of %llu bytes)", path,
			 (unsigned long long)(HEADER_SIZE + got), total);
		free(buf);
		return -1;
	}
	/* bytes past the payload mean a damaged file or two glued together */
	uint8_t extra[4096];
	ssize_t more = read_full(fd, extra, sizeof(extra));
	if (more != 0) {
		if (more < 0)
			snprintf(err, errlen, "%s: read failed: %s", path, strerror(errno));
		else
			snprintf(err, errlen,
				 "%s: corrupt profile: data after the %llu bytes declared", path,
				 total);
		free(buf);
		return -1;
	}
	if (version >= FIRST_CHECKSUM_VERSION) {
		put_le(header + CHECKSUM_OFFSET, 0, 4);
		uLong crc =
		    crc32_z(crc32_z(crc32_z(0, NULL, 0), header, HEADER_SIZE), buf, (size_t)length);
		if ((uint32_t)crc != stored_crc) {
			snprintf(err, errlen,
				 "%s: corrupt profile: checksum %#010x, the file's bytes give "
				 "%#010x",
				 path, stored_crc, (unsigned)crc);
			free(buf);
			return -1;
		}
	}
	int rc = unpack(path, buf, length, out, err, errlen);
	free(buf);
	return rc;
}

int ep_profile_read(const char *path, Edgeprof__V1__Profile **out, char *err, size_t errlen)
{
	*out = NULL;
	/* a FIFO with no writer would block the open for ever (`report
	 * FIFO` hung): a profile is a regular file */
	char why[256];
	int fd = ep_open_regular(path, why, sizeof(why));
	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", path, why);
		return -1;
	}
	int rc = read_profile(fd, path, out, err, errlen);
	close(fd);
	return rc;
}

void ep_profile_free(Edgeprof__V1__Profile *profile)
{
	if (profile)
		protobuf_c_message_free_unpacked(&profile->base, NULL);
}
