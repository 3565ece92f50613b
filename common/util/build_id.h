/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A build-id as edgeprof names binaries by it: the GNU build-id note's bytes
 * in lowercase hex. Every input that names one (a batch's binaries, the
 * collector's ?build_id= and /v1/images/ID, --build-id) is checked here, so
 * an id that no binary can have is refused where it enters, in one line,
 * rather than stored as a key that matches nothing (or, in another case,
 * the same binary as the lowercase key).
 */
#ifndef EP_BUILD_ID_H
#define EP_BUILD_ID_H

#include <stdbool.h>
#include <stddef.h>

/* The longest build-id note kept (EP_ELF_BUILD_ID_MAX bytes), in hex. Real
 * ones are 20 bytes (GNU ld's sha1, the default), 16 (md5, uuid), 8 (lld's
 * fast) or 32 (Go's -B gobuildid); ld's --build-id=0xHEX may set any
 * length. */
#define EP_BUILD_ID_HEX_MAX 128

/* Whether s is 1 to 64 bytes in lowercase hex (2 to EP_BUILD_ID_HEX_MAX
 * digits, an even count). */
bool ep_build_id_valid(const char *s);

/* 0 when ep_build_id_valid(s); -1 with why saying what s is not, naming s
 * (its first characters, anything unprintable as '?'). */
int ep_build_id_check(const char *s, char *why, size_t whylen);

/* An option's EP_OPT_CALL (common/util/options.h), for --build-id: a
 * build-id or its first digits (export picks a profile's binary by
 * prefix), so 1 to EP_BUILD_ID_HEX_MAX hex digits; uppercase ones are
 * lowered in place (tools print ids both ways). *(const char **)value =
 * arg, or -1 with err. A whole id, as the collector is asked for, is checked
 * again with ep_build_id_check(). */
int ep_build_id_option(void *value, const char *arg, char *err, size_t errlen);

#endif
