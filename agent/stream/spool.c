/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/stream/spool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util/log.h"

#define SUFFIX ".batch"

struct entry {
	uint64_t id;
	uint64_t size;
};

struct ep_spool {
	pthread_mutex_t lock;
	char *dir;
	uint64_t max_bytes;
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
	s->next_id = 1;
	struct dirent *de;
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
		if (stat(path, &st) != 0 || push_entry(s, id, (uint64_t)st.st_size) != 0)
			continue;
		if (id >= s->next_id)
			s->next_id = id + 1;
	}
	closedir(d);
	if (s->n > 1)
		qsort(s->entries, s->n, sizeof(*s->entries), cmp_entry);
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

/* Oldest first: the newest counts are the ones an operator is looking at. */
static void evict_for(struct ep_spool *s, uint64_t incoming)
{
	uint64_t files = 0, bytes = 0;
	while (s->n && s->counters.bytes + incoming > s->max_bytes) {
		char path[PATH_MAX];
		entry_path(s, s->entries[0].id, path, sizeof(path));
		unlink(path);
		files++;
		bytes += s->entries[0].size;
		s->counters.dropped_files++;
		s->counters.dropped_bytes += s->entries[0].size;
		pop_front(s);
	}
	if (files)
		ep_warn("spool %s: full (limit %" PRIu64 " bytes): dropped the %" PRIu64
			" oldest batches (%" PRIu64 " bytes) the collector had not acknowledged",
			s->dir, s->max_bytes, files, bytes);
}

int ep_spool_put(struct ep_spool *s, const uint8_t *data, size_t len, char *err, size_t errlen)
{
	pthread_mutex_lock(&s->lock);
	evict_for(s, len);
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

int ep_spool_peek(struct ep_spool *s, uint64_t *id, uint8_t **data, size_t *len, char *err,
		  size_t errlen)
{
	pthread_mutex_lock(&s->lock);
	int rc = 0;
	while (s->n) {
		char path[PATH_MAX];
		entry_path(s, s->entries[0].id, path, sizeof(path));
		FILE *f = fopen(path, "rb");
		uint8_t *buf = NULL;
		size_t size = s->entries[0].size;
		if (f && (buf = malloc(size ? size : 1)) && fread(buf, 1, size, f) == size) {
			fclose(f);
			*id = s->entries[0].id;
			*data = buf;
			*len = size;
			rc = 1;
			break;
		}
		snprintf(err, errlen, "spool %s: batch %s unreadable (%s): dropped", s->dir, path,
			 f ? "short read" : strerror(errno));
		if (f)
			fclose(f);
		free(buf);
		unlink(path);
		s->counters.dropped_files++;
		s->counters.dropped_bytes += s->entries[0].size;
		pop_front(s);
		rc = -1;
		break;
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
