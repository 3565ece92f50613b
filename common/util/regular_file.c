/* SPDX-License-Identifier: Apache-2.0 */
#include "common/util/regular_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *ep_file_kind(mode_t mode)
{
	return S_ISREG(mode)	? "a regular file"
	       : S_ISLNK(mode)	? "a symbolic link"
	       : S_ISDIR(mode)	? "a directory"
	       : S_ISFIFO(mode) ? "a FIFO"
	       : S_ISCHR(mode)	? "a character device"
	       : S_ISBLK(mode)	? "a block device"
	       : S_ISSOCK(mode) ? "a socket"
				: "of an unknown type";
}

static int refuse(const struct stat *st, char *why, size_t whylen)
{
	snprintf(why, whylen, "is %s, not a regular file", ep_file_kind(st->st_mode));
	return -1;
}

int ep_open_regular(const char *path, char *why, size_t whylen)
{
	/* a device is not even opened: opening some has effects (a tape
	 * rewinds, a modem hangs up); the descriptor is checked again below,
	 * since the name may point elsewhere by then */
	struct stat st;
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
		return refuse(&st, why, whylen);
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		snprintf(why, whylen, "cannot open: %s", strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) != 0) {
		snprintf(why, whylen, "cannot open: %s", strerror(errno));
		close(fd);
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return refuse(&st, why, whylen);
	}
	int flags = fcntl(fd, F_GETFL);
	if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
		snprintf(why, whylen, "cannot open: %s", strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

size_t ep_pread_full(int fd, void *buf, size_t n, uint64_t offset)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = pread(fd, (uint8_t *)buf + got, n - got, (off_t)(offset + got));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (r == 0)
				errno = 0;
			break;
		}
		got += (size_t)r;
	}
	return got;
}
