/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/stream/spool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util/log.h"
#include "common/util/regular_file.h"

#define SUFFIX ".batch"

struct entry {
	uint64_t id;
	uint64_t size;
};

struct ep_spool {
	pthread_mutex_t lock;
	char *dir;
	uint64_t max_bytes;
	uint64_t batch_max;    /* a file's most (EP_SPOOL_BATCH_MAX, max_bytes) */
	size_t max_files;      /* EP_SPOOL_BYTES_PER_FILE */
	struct entry *entries; /* ids ascending: a ring would do, but eviction is rare */
	size_t n, cap;
	uint64_t next_id;
	struct ep_spool_counters counters;
};

static void entry_path(const struct ep_spool *s, uint64_t id, char *out, size_t len)
{
	snprintf(out, len, "%s/%020" PRIu64 SUFFIX, s->dir, id);
}

static int cmp_entry(const void *pa, const void *pb)
{
	const struct entry *a = pa, *b = pb;
	return a->id < b->id ? -1 : a->id > b->id;
}

static int push_entry(struct ep_spool *s, uint64_t id, uint64_t size)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		struct entry *e = realloc(s->entries, cap * sizeof(*e));
		if (!e)
			return -1;
		s->entries = e;
		s->cap = cap;
	}
	s->entries[s->n++] = (struct entry){id, size};
	s->counters.files++;
	s->counters.bytes += size;
	return 0;
}

static void pop_front(struct ep_spool *s)
{
	s->counters.files--;
	s->counters.bytes -= s->entries[0].size;
	memmove(s->entries, s->entries + 1, (s->n - 1) * sizeof(*s->entries));
	s->n--;
}

static int mkdir_p(const char *dir)
{
	char buf[PATH_MAX];
	if (snprintf(buf, sizeof(buf), "%s", dir) >= (int)sizeof(buf)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0700) != 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	return mkdir(buf, 0700) != 0 && errno != EEXIST ? -1 : 0;
}

/* What dropping the oldest batches dropped, for one warning. */
struct dropped {
	uint64_t files, bytes;
	bool by_count; /* the file bound, not the byte bound */
};

/* Drops the oldest batches until incoming bytes in incoming_files more
 * files fit; adds them to *d. Oldest first: the newest counts are the ones
 * an operator is looking at. */
static void drop_oldest(struct ep_spool *s, uint64_t incoming, size_t incoming_files,
			struct dropped *d)
{
	while (s->n && (s->counters.bytes + incoming > s->max_bytes ||
			s->n + incoming_files > s->max_files)) {
		d->by_count |= s->counters.bytes + incoming <= s->max_bytes;
		char path[PATH_MAX];
		entry_path(s, s->entries[0].id, path, sizeof(path));
		unlink(path);
		d->files++;
		d->bytes += s->entries[0].size;
		s->counters.dropped_files++;
		s->counters.dropped_bytes += s->entries[0].size;
		pop_front(s);
	}
}

static void say_dropped(const struct ep_spool *s, const struct dropped *d)
{
	char limit[64];
	if (d->by_count)
		snprintf(limit, sizeof(limit), "%zu files", s->max_files);
	else
		snprintf(limit, sizeof(limit), "%" PRIu64 " bytes", s->max_bytes);
	if (d->files)
		ep_warn("spool %s: full (limit %s): dropped the %" PRIu64
			" oldest batches (%" PRIu64 " bytes) the collector had not acknowledged",
			s->dir, limit, d->files, d->bytes);
}

/* Keeps the newest batches found on disk within the bounds (sorted here),
 * the others removed as dropped: called every max_files entries too, so
 * the index of a directory of millions of files never holds more than
 * twice the bound. */
static void trim_oldest(struct ep_spool *s, struct dropped *d)
{
	if (s->n > 1)
		qsort(s->entries, s->n, sizeof(*s->entries), cmp_entry);
	drop_oldest(s, 0, 0, d);
}

struct ep_spool *ep_spool_open(const char *dir, uint64_t max_bytes, char *err, size_t errlen)
{
	if (mkdir_p(dir) != 0) {
		snprintf(err, errlen, "spool %s: cannot create: %s", dir, strerror(errno));
		return NULL;
	}
	DIR *d = opendir(dir);
	if (!d) {
		snprintf(err, errlen, "spool %s: %s", dir, strerror(errno));
		return NULL;
	}
	struct ep_spool *s = calloc(1, sizeof(*s));
	if (!s || !(s->dir = strdup(dir))) {
		free(s);
		closedir(d);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	pthread_mutex_init(&s->lock, NULL);
	s->max_bytes = max_bytes;
	s->batch_max = max_bytes < EP_SPOOL_BATCH_MAX ? max_bytes : EP_SPOOL_BATCH_MAX;
	s->max_files = max_bytes / EP_SPOOL_BYTES_PER_FILE < 16
			   ? 16
			   : (size_t)(max_bytes / EP_SPOOL_BYTES_PER_FILE);
	s->next_id = 1;
	struct dirent *de;
	char first[NAME_MAX + 1] = "", first_why[128] = "";
	uint64_t refused = 0;
	struct dropped dropped = {0};
	while ((de = readdir(d))) {
		char path[PATH_MAX];
		size_t nlen = strlen(de->d_name);
		if (nlen > 4 && strcmp(de->d_name + nlen - 4, ".tmp") == 0) {
			/* a put interrupted by a crash: never acknowledged, never complete */
			snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
			unlink(path);
			continue;
		}
		char *end;
		unsigned long long id = strtoull(de->d_name, &end, 10);
		if (end == de->d_name || strcmp(end, SUFFIX) != 0)
			continue;
		struct stat st;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (lstat(path, &st) != 0)
			continue;
		/* what a put writes is a regular file of 1 to batch_max bytes;
		 * anything else is not read, not even a link to a batch */
		char why[128] = "";
		if (!S_ISREG(st.st_mode))
			snprintf(why, sizeof(why), "%s", ep_file_kind(st.st_mode));
		else if (st.st_size == 0)
			snprintf(why, sizeof(why), "empty");
		else if ((uint64_t)st.st_size > s->batch_max)
			snprintf(why, sizeof(why), "%lld bytes, over %" PRIu64,
				 (long long)st.st_size, s->batch_max);
		if (why[0]) {
			if (!refused++) {
				snprintf(first, sizeof(first), "%s", de->d_name);
				snprintf(first_why, sizeof(first_why), "%s", why);
			}
			s->counters.refused_files++;
			unlink(path);
			continue;
		}
		if (push_entry(s, id, (uint64_t)st.st_size) != 0)
			continue;
		if (id >= s->next_id)
			s->next_id = id + 1;
		if (s->n >= 2 * s->max_files)
			trim_oldest(s, &dropped);
	}
	closedir(d);
	if (refused)
		ep_warn("spool %s: %" PRIu64 " files that are no batch removed (%s: %s%s)", dir,
			refused, first, first_why, refused > 1 ? "; and others" : "");
	trim_oldest(s, &dropped); /* a previous agent's bounds may have been larger */
	say_dropped(s, &dropped);
	if (s->n)
		ep_info("spool %s: %zu batches (%" PRIu64 " bytes) from an earlier run to send",
			dir, s->n, s->counters.bytes);
	return s;
}

void ep_spool_close(struct ep_spool *s)
{
	if (!s)
		return;
	pthread_mutex_destroy(&s->lock);
	free(s->entries);
	free(s->dir);
	free(s);
}

static int write_all(int fd, const uint8_t *data, size_t len)
{
	while (len) {
		ssize_t w = write(fd, data, len);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		data += w;
		len -= (size_t)w;
	}
	return 0;
}

/* Oldest first: the newest counts are the ones an operator is looking at.
 * Room for incoming bytes in incoming_files more files. */
int ep_spool_put(struct ep_spool *s, const uint8_t *data, size_t len, char *err, size_t errlen)
{
	pthread_mutex_lock(&s->lock);
	if (len == 0 || len > s->batch_max) {
		/* it could not be read back (ep_spool_peek's bound) */
		snprintf(err, errlen,
			 "spool %s: a batch of %zu bytes is over the %" PRIu64
			 " bytes one batch may take (EP_SPOOL_BATCH_MAX, --spool-max-mib)",
			 s->dir, len, s->batch_max);
		s->counters.refused_files++;
		pthread_mutex_unlock(&s->lock);
		return -1;
	}
	struct dropped d = {0};
	drop_oldest(s, len, 1, &d);
	say_dropped(s, &d);
	uint64_t id = s->next_id++;
	char path[PATH_MAX], tmp[PATH_MAX + 8];
	entry_path(s, id, path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	int rc = -1;
	if (fd >= 0 && write_all(fd, data, len) == 0 && fsync(fd) == 0) {
		close(fd);
		fd = -1;
		rc = rename(tmp, path);
	}
	if (rc != 0) {
		snprintf(err, errlen, "spool %s: cannot write a batch of %zu bytes: %s", s->dir,
			 len, strerror(errno));
		if (fd >= 0)
			close(fd);
		unlink(tmp);
		s->counters.write_failed++;
	} else if (push_entry(s, id, len) != 0) {
		unlink(path);
		snprintf(err, errlen, "out of memory");
		s->counters.write_failed++;
		rc = -1;
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* The whole of the file at path, which must still be the size it had when
 * listed (size): a malloc'd buffer, or NULL with why. Opened without
 * blocking and only when regular: whatever is found in the spool is read
 * with the same care as any input. */
static uint8_t *read_batch(const char *path, uint64_t size, uint64_t max, char *why, size_t whylen)
{
	int fd = ep_open_regular(path, why, whylen);
	if (fd < 0)
		return NULL;
	struct stat st;
	uint8_t *buf = NULL;
	if (fstat(fd, &st) != 0) {
		snprintf(why, whylen, "%s", strerror(errno));
	} else if ((uint64_t)st.st_size != size || size == 0 || size > max) {
		snprintf(why, whylen,
			 "%lld bytes, where %" PRIu64 " were written (at most %" PRIu64 ")",
			 (long long)st.st_size, size, max);
	} else if (!(buf = malloc(size))) {
		snprintf(why, whylen, "out of memory for %" PRIu64 " bytes", size);
	} else {
		size_t got = 0;
		while (got < size) {
			ssize_t n = read(fd, buf + got, size - got);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				snprintf(why, whylen, "%s", n < 0 ? strerror(errno) : "short read");
				break;
			}
			got += (size_t)n;
		}
		if (got < size) {
			free(buf);
			buf = NULL;
		}
	}
	close(fd);
	return buf;
}

int ep_spool_peek(struct ep_spool *s, uint64_t *id, uint8_t **data, size_t *len, char *err,
		  size_t errlen)
{
	pthread_mutex_lock(&s->lock);
	int rc = 0;
	if (s->n) {
		char path[PATH_MAX], why[256];
		entry_path(s, s->entries[0].id, path, sizeof(path));
		size_t size = s->entries[0].size;
		uint8_t *buf = read_batch(path, size, s->batch_max, why, sizeof(why));
		if (buf) {
			*id = s->entries[0].id;
			*data = buf;
			*len = size;
			rc = 1;
		} else {
			snprintf(err, errlen, "spool %s: batch %s unreadable (%s): dropped", s->dir,
				 path, why);
			unlink(path);
			s->counters.refused_files++;
			pop_front(s);
			rc = -1;
		}
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

void ep_spool_remove(struct ep_spool *s, uint64_t id)
{
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->n; i++) {
		if (s->entries[i].id != id)
			continue;
		char path[PATH_MAX];
		entry_path(s, id, path, sizeof(path));
		unlink(path);
		s->counters.files--;
		s->counters.bytes -= s->entries[i].size;
		memmove(s->entries + i, s->entries + i + 1, (s->n - i - 1) * sizeof(*s->entries));
		s->n--;
		break;
	}
	pthread_mutex_unlock(&s->lock);
}

void ep_spool_counters(struct ep_spool *s, struct ep_spool_counters *out)
{
	pthread_mutex_lock(&s->lock);
	*out = s->counters;
	pthread_mutex_unlock(&s->lock);
}
