/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The profile file: one edgeprof.v1.Profile protobuf message (proto/), with a
 * small header so a file is recognised and versioned before it is parsed.
 * Written atomically (temporary file + rename) so a crash never leaves half a
 * profile behind. Only a regular file is ever replaced: a target that is
 * anything else (a FIFO, a device, a symbolic link, ...) is refused.
 */
#ifndef EP_PROFILE_FILE_H
#define EP_PROFILE_FILE_H

#include <stddef.h>

#include "profile.pb-c.h"

/* Whether ep_profile_write() could write path: nothing but a regular file
 * there, and a file can be created in its directory (one is, and removed).
 * For commands to refuse a bad -o at start-up rather than at their first
 * write. 0, or -1 with err naming the path and the problem. */
int ep_profile_check_target(const char *path, char *err, size_t errlen);
/* Returns 0, or -1 with err naming the path and the problem. */
int ep_profile_write(const char *path, const Edgeprof__V1__Profile *profile, char *err,
		     size_t errlen);
/* On success *out must be released with ep_profile_free(). */
int ep_profile_read(const char *path, Edgeprof__V1__Profile **out, char *err, size_t errlen);
void ep_profile_free(Edgeprof__V1__Profile *profile);

#endif
