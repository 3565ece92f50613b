/* SPDX-License-Identifier: Apache-2.0 */
#include "cli_util.h"

#include <errno.h>
#include <stdlib.h>

int ep_parse_uint(const char *s, unsigned min, unsigned max, unsigned *out)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v < min || v > max)
		return -1;
	*out = (unsigned)v;
	return 0;
}
