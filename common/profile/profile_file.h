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
#include <stdint.h>

#include "profile.pb-c.h"

/* Whether ep_profile_write() could write path: nothing but a regular file
 * there, and a file can be created in its directory (one is, and removed).
 * For commands to refuse a bad -o at start-up rather than at their first
 * write. 0, or -1 with err naming the path and the problem. */
int ep_profile_check_target(const char *path, char *err, size_t errlen);
/* Returns 0, or -1 with err naming the path and the problem. */
int ep_profile_write(const char *path, const Edgeprof__V1__Profile *profile, char *err,
		     size_t errlen);
/* On success *out must be released with ep_profile_free(). A payload, or
 * the messages unpacked from it, past the bound ep_profile_set_max() set
 * is refused, naming the file, the size and the bound. */
int ep_profile_read(const char *path, Edgeprof__V1__Profile **out, char *err, size_t errlen);

/* What reading one profile may take: its payload, and the messages it
 * unpacks to (an empty sub-message is 2 bytes of payload and a few hundred
 * unpacked), at most bytes each (0 keeps the bound). Default
 * EP_PROFILE_DEFAULT_MAX_MIB; report's and export's --profile-max-mib.
 * Process-wide: set at start, before any profile is read. */
#define EP_PROFILE_DEFAULT_MAX_MIB 1024
void ep_profile_set_max(uint64_t bytes);
void ep_profile_free(Edgeprof__V1__Profile *profile);

#endif
