/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Output files other than profiles (exports, --exact-out, --perf-data, the
 * collector's --port-file), written the way profiles are
 * (common/profile/profile_file.c): to a new file beside the target, synced,
 * then renamed over it. A reader never sees half a file, a failed write
 * leaves the old one alone, and nothing but a regular file is ever
 * replaced: opening a FIFO for writing waits for a reader for ever, a
 * device would be written into, and a symbolic link is refused rather than
 * followed (run as root, a link someone planted would have us overwrite
 * any file on the machine). The kinds refused are said in one line naming
 * the target, the same words as the profile writer's.
 */
#ifndef EP_OUTPUT_FILE_H
#define EP_OUTPUT_FILE_H

#include <stddef.h>
#include <stdio.h>

/* 0 when path is absent or a regular file; -1 with err naming it:
 * "PATH: is a FIFO, not a regular file: refusing to replace it". */
int ep_output_check(const char *path, char *err, size_t errlen);

struct ep_output {
	FILE *f; /* where to write, fopen()'s mode given */
	char *path, *tmp;
};

/* Checks path, then creates the temporary file beside it (mode 0666 less
 * the umask, as fopen would). 0, or -1 with err naming path. */
int ep_output_open(struct ep_output *o, const char *path, const char *mode, char *err,
		   size_t errlen);
/* Flushes, syncs and closes the file, checks path again (something may
 * have taken the name meanwhile) and renames the file over it. 0, or -1
 * with err naming path; the temporary file is gone either way. */
int ep_output_commit(struct ep_output *o, char *err, size_t errlen);
/* The temporary file closed and removed, the target left as it was. */
void ep_output_discard(struct ep_output *o);

#endif
