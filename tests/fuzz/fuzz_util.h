/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Shared by the libFuzzer targets (tests/fuzz/fuzz_*.c). Readers that only
 * take a path are given the input through a memfd named by its
 * /proc/self/fd path: a regular file (as ep_open_regular() demands) that
 * never touches a disk, rewritten in place for every input.
 */
#ifndef EP_FUZZ_UTIL_H
#define EP_FUZZ_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define EP_FUZZ_FAIL(target, ...)                                                                  \
	do {                                                                                       \
		fprintf(stderr, target ": " __VA_ARGS__);                                          \
		fputc('\n', stderr);                                                               \
		abort();                                                                           \
	} while (0)

/* The input as a file: its path, valid until the next call. */
static inline const char *ep_fuzz_file(const uint8_t *data, size_t size)
{
	static int fd = -1;
	static char path[64];
	if (fd < 0) {
		fd = memfd_create("fuzz-input", MFD_CLOEXEC);
		if (fd < 0) {
			perror("memfd_create");
			abort();
		}
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	}
	if (ftruncate(fd, 0) != 0 || (size && pwrite(fd, data, size, 0) != (ssize_t)size)) {
		perror("fuzz input");
		abort();
	}
	return path;
}

/* Reads every byte of [p, p + n): ASan then reports a pointer or a length
 * the parser got wrong, even where the callers here would not look. */
static volatile uint8_t ep_fuzz_sink;
static inline void ep_fuzz_touch(const void *p, size_t n)
{
	uint8_t x = 0;
	for (size_t i = 0; i < n; i++)
		x ^= ((const uint8_t *)p)[i];
	ep_fuzz_sink = x;
}

/* A string the parser handed out: NUL-terminated and readable whole. */
static inline size_t ep_fuzz_str(const char *s)
{
	if (!s)
		return 0;
	size_t n = strlen(s);
	ep_fuzz_touch(s, n);
	return n;
}

#endif
