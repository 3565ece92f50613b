/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Opening an input that must be a regular file (a recording, a binary, a
 * token file) without ever blocking: open() of a FIFO with no writer waits
 * forever, and so do some devices, before any check on the descriptor can
 * run. The file is opened with O_NONBLOCK, refused unless it is regular, and
 * O_NONBLOCK is cleared again (it means nothing for a regular file, but
 * reads should not depend on that).
 */
#ifndef EP_REGULAR_FILE_H
#define EP_REGULAR_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A read-only descriptor (O_CLOEXEC) of path, or -1 with why saying what is
 * wrong without the path: "cannot open: No such file or directory", "is a
 * FIFO, not a regular file". */
int ep_open_regular(const char *path, char *why, size_t whylen);

/* "a FIFO", "a directory", "a symbolic link", ...: what st_mode says a file
 * is, for messages. */
const char *ep_file_kind(mode_t mode);

/* Reads n bytes at offset of fd, again where a read stops short or is
 * interrupted: how many were read (n, or fewer with errno saying why, 0
 * when the file ended first). */
size_t ep_pread_full(int fd, void *buf, size_t n, uint64_t offset);

#endif
