/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/source/live/proc_maps.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* the longest maps text read: a process with ~500,000 mappings */
#define MAPS_MAX_BYTES (64u << 20)

/* /proc/PID/maps whole, in the reader's buffer (kept between reads); NULL
 * when the process is gone. */
static char *slurp_maps(struct ep_proc_maps *r, uint32_t pid, size_t *len)
{
	char path[40];
	snprintf(path, sizeof(path), "/proc/%u/maps", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	size_t n = 0;
	for (;;) {
		if (r->cap - n < 4096) {
			size_t cap = r->cap ? r->cap * 2 : 64 * 1024;
			char *b = cap <= MAPS_MAX_BYTES ? realloc(r->buf, cap) : NULL;
			if (!b)
				break; /* what was read is used: lines cut short are skipped */
			r->buf = b;
			r->cap = cap;
		}
		ssize_t got = read(fd, r->buf + n, r->cap - n);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			if (got < 0 && n == 0) {
				close(fd);
				return NULL;
			}
			break;
		}
		n += (size_t)got;
	}
	close(fd);
	*len = n;
	return r->buf;
}

/* PROCMAP_QUERY (Linux 6.11): the kernel answers for the executable
 * mappings alone, one ioctl each, without writing every mapping's line
 * (~3x less CPU than reading the text of a just-started process here).
 * Declared here: Debian 12's headers predate it. */
struct ep_procmap_query {
	uint64_t size, query_flags, query_addr;
	uint64_t vma_start, vma_end, vma_flags, vma_page_size, vma_offset, inode;
	uint32_t dev_major, dev_minor, vma_name_size, build_id_size;
	uint64_t vma_name_addr, build_id_addr;
};
#define EP_PROCMAP_QUERY	    _IOWR('f', 17, struct ep_procmap_query)
#define EP_PROCMAP_VMA_EXECUTABLE   0x04
#define EP_PROCMAP_COVERING_OR_NEXT 0x10

/* 1: read; 0: the process is gone; -1: this kernel has no PROCMAP_QUERY. */
static int query_maps(uint32_t pid, void (*fn)(void *ctx, const struct ep_maps_entry *m), void *ctx)
{
	static const char deleted[] = " (deleted)";
	const size_t dlen = sizeof(deleted) - 1;
	char path[40], name[PATH_MAX + 16];
	snprintf(path, sizeof(path), "/proc/%u/maps", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	int rc = 1;
	for (uint64_t addr = 0;;) {
		struct ep_procmap_query q = {.size = sizeof(q),
					     .query_flags = EP_PROCMAP_VMA_EXECUTABLE |
							    EP_PROCMAP_COVERING_OR_NEXT,
					     .query_addr = addr,
					     .vma_name_addr = (uint64_t)(uintptr_t)name,
					     .vma_name_size = sizeof(name)};
		if (ioctl(fd, EP_PROCMAP_QUERY, &q) != 0) {
			/* ENOENT: no mapping past addr; ESRCH: gone meanwhile */
			if (addr == 0 && (errno == ENOTTY || errno == EINVAL))
				rc = -1;
			break;
		}
		if (q.vma_end <= addr)
			break; /* never seen; a loop guard */
		addr = q.vma_end;
		if (!q.vma_name_size)
			name[0] = '\0';
		struct ep_maps_entry m = {.start = q.vma_start,
					  .end = q.vma_end,
					  .offset = q.vma_offset,
					  .dev = makedev(q.dev_major, q.dev_minor),
					  .ino = q.inode,
					  .path = name};
		size_t len = strlen(name);
		if (name[0] == '/' && len > dlen && strcmp(name + len - dlen, deleted) == 0) {
			name[len - dlen] = '\0';
			m.deleted = true;
		}
		fn(ctx, &m);
	}
	close(fd);
	return rc;
}

int ep_proc_maps_read(struct ep_proc_maps *r, uint32_t pid,
		      void (*fn)(void *ctx, const struct ep_maps_entry *m), void *ctx)
{
	int queried = r->text ? -1 : query_maps(pid, fn, ctx);
	if (queried >= 0)
		return queried;
	r->text = true;
	size_t len, pos = 0;
	char *text = slurp_maps(r, pid, &len);
	struct ep_maps_entry m;
	while (text && ep_maps_next_exec(text, len, &pos, &m))
		fn(ctx, &m);
	return text != NULL;
}

void ep_proc_maps_free(struct ep_proc_maps *r)
{
	free(r->buf);
	*r = (struct ep_proc_maps){0};
}

static bool parse_hex(const char *s, const char *end, const char **after, uint64_t *out)
{
	uint64_t v = 0;
	const char *p = s;
	for (; p < end; p++) {
		unsigned d;
		if (*p >= '0' && *p <= '9')
			d = (unsigned)(*p - '0');
		else if (*p >= 'a' && *p <= 'f')
			d = (unsigned)(*p - 'a' + 10);
		else
			break;
		if (v >> 60)
			return false;
		v = v << 4 | d;
	}
	*after = p;
	*out = v;
	return p > s;
}

/* Past one field and the blanks after it. */
static const char *skip_field(const char *p, const char *end)
{
	while (p < end && *p != ' ')
		p++;
	while (p < end && *p == ' ')
		p++;
	return p;
}

/* "START-END PERMS OFFSET DEV INODE   PATH": parsed by hand, since the
 * live agent reads the maps of every process the machine starts (sscanf
 * over stdio cost it more than the kernel's writing of them). */
bool ep_maps_next_exec(char *text, size_t len, size_t *pos, struct ep_maps_entry *out)
{
	static const char deleted[] = " (deleted)";
	const size_t dlen = sizeof(deleted) - 1;
	while (*pos < len) {
		char *line = text + *pos, *end = memchr(line, '\n', len - *pos);
		if (!end)
			break; /* a last line cut short: its path may be too */
		*pos = (size_t)(end - text) + 1;
		const char *p = line;
		uint64_t start, stop, offset;
		if (!parse_hex(p, end, &p, &start) || p >= end || *p++ != '-' ||
		    !parse_hex(p, end, &p, &stop) || p >= end || *p++ != ' ' || end - p < 5 ||
		    p[2] != 'x' || stop <= start)
			continue;
		p = skip_field(p, end);
		if (!parse_hex(p, end, &p, &offset))
			continue;
		while (p < end && *p == ' ')
			p++;
		uint64_t major, minor, ino = 0;
		const char *q = p;
		bool dev = parse_hex(q, end, &q, &major) && q < end && *q++ == ':' &&
			   parse_hex(q, end, &q, &minor);
		p = skip_field(p, end);
		for (; p < end && *p >= '0' && *p <= '9' && ino < UINT64_MAX / 10; p++)
			ino = ino * 10 + (uint64_t)(*p - '0');
		p = skip_field(p, end);
		*end = '\0';
		out->start = start;
		out->end = stop;
		out->offset = offset;
		out->dev = dev ? makedev(major, minor) : 0;
		out->ino = dev ? ino : 0;
		out->deleted = false;
		if ((size_t)(end - p) > dlen && memcmp(end - dlen, deleted, dlen) == 0 &&
		    *p == '/') {
			end[-(ptrdiff_t)dlen] = '\0';
			out->deleted = true;
		}
		out->path = p;
		return true;
	}
	return false;
}
