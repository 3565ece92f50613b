/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A live process's executable mappings, read from /proc: asked of the
 * kernel where it answers PROCMAP_QUERY (Linux 6.11), else the maps text
 * read in one go and parsed in place. The live agent reads them for every
 * process it samples; when is the feed's policy (live_feed.h).
 */
#ifndef EP_PROC_MAPS_H
#define EP_PROC_MAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One executable mapping. */
struct ep_maps_entry {
	uint64_t start, end, offset;
	uint64_t dev, ino; /* the file's, as the kernel names it (0: none) */
	const char *path;  /* "/..." for a file, else "" or a pseudo name ("[vdso]") */
	bool deleted;	   /* the file was deleted: " (deleted)" is cut off path */
};

struct ep_proc_maps {
	char *buf; /* the last maps text read, kept for the next */
	size_t cap;
	bool text; /* a kernel without PROCMAP_QUERY: the maps text is read */
};

/* Calls fn for each of pid's executable mappings, in address order: 1, or
 * 0 when the process is gone. */
int ep_proc_maps_read(struct ep_proc_maps *r, uint32_t pid,
		      void (*fn)(void *ctx, const struct ep_maps_entry *m), void *ctx);
void ep_proc_maps_free(struct ep_proc_maps *r);

/* The next executable mapping of text[*pos..len) (a /proc/PID/maps text,
 * read whole): true with *out, *pos past its line; false at the end. The
 * path is cut out of text in place (the newline becomes its NUL), so text
 * is written to and out->path points into it. Lines that do not parse are
 * skipped, and so is a last line without its newline (a read cut short). */
bool ep_maps_next_exec(char *text, size_t len, size_t *pos, struct ep_maps_entry *out);

#endif
