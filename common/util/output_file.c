/* SPDX-License-Identifier: Apache-2.0 */
#include "common/util/output_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util/regular_file.h"

int ep_output_check(const char *path, char *err, size_t errlen)
{
	struct stat st;
	if (lstat(path, &st) != 0)
		return 0; /* nothing there: what stops its creation is said then */
	if (S_ISREG(st.st_mode))
		return 0;
	snprintf(err, errlen, "%s: is %s%s, not a regular file: refusing to replace it", path,
		 ep_file_kind(st.st_mode),
		 S_ISLNK(st.st_mode) ? " (name the file it points to instead)" : "");
	return -1;
}

int ep_output_open(struct ep_output *o, const char *path, const char *mode, char *err,
		   size_t errlen)
{
	*o = (struct ep_output){0};
	if (ep_output_check(path, err, errlen) != 0)
		return -1;
	size_t len = strlen(path) + 48;
	o->path = strdup(path);
	o->tmp = malloc(len);
	int fd = -1;
	/* O_EXCL: a name no one else uses, not even a link planted there */
	for (unsigned attempt = 0; o->path && o->tmp && fd < 0 && attempt < 100; attempt++) {
		snprintf(o->tmp, len, "%s.tmp.%ld.%u", path, (long)getpid(), attempt);
		fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
		if (fd < 0 && errno != EEXIST)
			break;
	}
	if (fd < 0) {
		snprintf(err, errlen, "%s: cannot create: %s", path,
			 o->path && o->tmp ? strerror(errno) : "out of memory");
		free(o->path);
		free(o->tmp);
		*o = (struct ep_output){0};
		return -1;
	}
	o->f = fdopen(fd, mode);
	if (!o->f) {
		snprintf(err, errlen, "%s: cannot create: %s", path, strerror(errno));
		close(fd);
		ep_output_discard(o);
		return -1;
	}
	return 0;
}

void ep_output_discard(struct ep_output *o)
{
	if (o->f)
		fclose(o->f);
	if (o->tmp)
		unlink(o->tmp);
	free(o->path);
	free(o->tmp);
	*o = (struct ep_output){0};
}

int ep_output_commit(struct ep_output *o, char *err, size_t errlen)
{
	int error = 0;
	if (fflush(o->f) != 0 || ferror(o->f))
		error = errno ? errno : EIO;
	if (!error && fsync(fileno(o->f)) != 0)
		error = errno;
	if (fclose(o->f) != 0 && !error)
		error = errno;
	o->f = NULL;
	if (error) {
		snprintf(err, errlen, "%s: write failed: %s", o->path, strerror(error));
		ep_output_discard(o);
		return -1;
	}
	if (ep_output_check(o->path, err, errlen) != 0) {
		ep_output_discard(o);
		return -1;
	}
	if (rename(o->tmp, o->path) != 0) {
		snprintf(err, errlen, "%s: write failed: %s", o->path, strerror(errno));
		ep_output_discard(o);
		return -1;
	}
	/* the rename itself durable; a file system that cannot sync a
	 * directory still has the file in place */
	const char *slash = strrchr(o->path, '/');
	char *dir =
	    slash ? strndup(o->path, slash == o->path ? 1 : (size_t)(slash - o->path)) : NULL;
	int dfd = open(dir ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	free(dir);
	if (dfd >= 0) {
		(void)fsync(dfd);
		close(dfd);
	}
	free(o->tmp);
	o->tmp = NULL; /* renamed: nothing to remove */
	ep_output_discard(o);
	return 0;
}
