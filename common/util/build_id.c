/* SPDX-License-Identifier: Apache-2.0 */
#include "common/util/build_id.h"

#include <stdio.h>
#include <string.h>

static bool lower_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* n digits of s (n <= EP_BUILD_ID_HEX_MAX), all lowercase hex */
static bool all_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!lower_hex(s[i]))
			return false;
	return true;
}

bool ep_build_id_valid(const char *s)
{
	size_t n = strnlen(s, EP_BUILD_ID_HEX_MAX + 1);
	return n > 0 && n <= EP_BUILD_ID_HEX_MAX && n % 2 == 0 && all_hex(s, n);
}

/* why = "build-id 'S' (N characters): WHAT; RULE", S being what a client
 * sent: shown cut, and printable */
static void refuse(const char *s, const char *what, const char *rule, char *why, size_t whylen)
{
	char shown[44];
	size_t n = strnlen(s, 4096), i;
	for (i = 0; i < n && i < 40; i++)
		shown[i] = s[i] >= 0x20 && s[i] < 0x7f && s[i] != '\'' ? s[i] : '?';
	shown[i] = '\0';
	snprintf(why, whylen, "build-id '%s%s' (%zu%s characters): %s; %s", shown,
		 n > i ? "..." : "", n, n >= 4096 ? "+" : "", what, rule);
}

int ep_build_id_check(const char *s, char *why, size_t whylen)
{
	if (ep_build_id_valid(s))
		return 0;
	size_t n = strnlen(s, EP_BUILD_ID_HEX_MAX + 1);
	refuse(s,
	       n == 0			 ? "empty"
	       : n > EP_BUILD_ID_HEX_MAX ? "too long"
	       : !all_hex(s, n)		 ? "not lowercase hex"
					 : "an odd number of hex digits",
	       "a build-id is 1-64 bytes in lowercase hex", why, whylen);
	return -1;
}

int ep_build_id_option(void *value, const char *arg, char *err, size_t errlen)
{
	/* getopt's argument is argv's own string: lowering it in place keeps
	 * the value a plain pointer */
	char *s = (char *)arg;
	for (char *p = s; *p; p++)
		if (*p >= 'A' && *p <= 'F')
			*p = (char)(*p - 'A' + 'a');
	size_t n = strnlen(s, EP_BUILD_ID_HEX_MAX + 1);
	if (n == 0 || n > EP_BUILD_ID_HEX_MAX || !all_hex(s, n)) {
		refuse(s,
		       n == 0			 ? "empty"
		       : n > EP_BUILD_ID_HEX_MAX ? "too long"
						 : "not hex",
		       "expected a build-id or its first digits: up to 128 hex digits", err,
		       errlen);
		return -1;
	}
	*(const char **)value = s;
	return 0;
}
