/* SPDX-License-Identifier: Apache-2.0 */
#include "cli_util.h"

#include <errno.h>
#include <stdlib.h>

#include "../resolve/binary.h"
#include "../util/log.h"

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

int ep_cli_binary_option(struct ep_binary_registry *reg, int ch, const char *arg)
{
	char err[512];
	switch (ch) {
	case 'b':
		if (ep_binreg_add_file(reg, arg, err, sizeof(err)) != 0) {
			ep_error("%s", err);
			return -1;
		}
		return 1;
	case 's':
		ep_binreg_set_symfs(reg, arg);
		return 1;
	default:
		return 0;
	}
}
