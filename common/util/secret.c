/* SPDX-License-Identifier: Apache-2.0 */
#include "common/util/secret.h"
#include "common/util/regular_file.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int ep_read_token_file(const char *path, char *out, size_t outlen, char *err, size_t errlen)
{
	char why[128];
	int fd = ep_open_regular(path, why, sizeof(why));
	if (fd < 0) {
		snprintf(err, errlen, "token file %s: %s", path, why);
		return -1;
	}
	struct stat st;
	if (fstat(fd, &st) != 0) {
		snprintf(err, errlen, "token file %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	if (st.st_mode & (S_IROTH | S_IWOTH)) {
		snprintf(err, errlen,
			 "token file %s is accessible to every user (mode %04o): chmod o-rw it",
			 path, (unsigned)(st.st_mode & 07777));
		close(fd);
		return -1;
	}
	ssize_t n = read(fd, out, outlen - 1);
	close(fd);
	if (n < 0) {
		snprintf(err, errlen, "token file %s: %s", path, strerror(errno));
		return -1;
	}
	out[n] = '\0';
	size_t start = 0, end = (size_t)n;
	while (start < end && isspace((unsigned char)out[start]))
		start++;
	while (end > start && isspace((unsigned char)out[end - 1]))
		end--;
	memmove(out, out + start, end - start);
	out[end - start] = '\0';
	if (!out[0] || (size_t)n == outlen - 1) {
		snprintf(err, errlen, "token file %s: %s", path,
			 out[0] ? "token too long" : "empty");
		return -1;
	}
	for (const char *p = out; *p; p++) {
		if (!isgraph((unsigned char)*p)) {
			snprintf(err, errlen,
				 "token file %s: the token has a non-printable character", path);
			return -1;
		}
	}
	return 0;
}
