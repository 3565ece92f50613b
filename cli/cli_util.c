/* SPDX-License-Identifier: Apache-2.0 */
#include "cli/cli_util.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "agent/resolve/binary.h"
#include "agent/source/perf_data/perf_data.h"
#include "common/util/regular_file.h"

static int add_binary(void *reg, const char *path, char *err, size_t errlen)
{
	return ep_binreg_add_file(reg, path, err, errlen);
}

static int set_symfs(void *reg, const char *dir, char *err, size_t errlen)
{
	/* the recorded paths are looked up under it: a directory, or nothing
	 * is ever found there */
	struct stat st;
	if (stat(dir, &st) != 0) {
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "%s: is %s, not a directory", dir, ep_file_kind(st.st_mode));
		return -1;
	}
	ep_binreg_set_symfs(reg, dir);
	return 0;
}

enum limit { CODE, SYMBOLS, PERF_TABLES, HELD };

/* --binary-code-max-mib N, --binary-symbols-max-mib N,
 * --perf-data-tables-max-mib N: 1 to 1 TiB */
static int set_limit(struct ep_binary_registry *reg, const char *arg, enum limit which, char *err,
		     size_t errlen)
{
	unsigned mib;
	if (ep_parse_uint(arg, 1, 1u << 20, &mib) != 0) {
		snprintf(err, errlen, "'%s' is not a number of MiB from 1 to %u", arg, 1u << 20);
		return -1;
	}
	uint64_t bytes = (uint64_t)mib << 20;
	if (which == PERF_TABLES)
		ep_perf_data_set_tables_max(bytes);
	else if (which == HELD)
		ep_binreg_set_held_max(reg, bytes);
	else
		ep_binreg_set_limits(reg, which == CODE ? bytes : 0, which == SYMBOLS ? bytes : 0);
	return 0;
}

static int set_code_max(void *reg, const char *arg, char *err, size_t errlen)
{
	return set_limit(reg, arg, CODE, err, errlen);
}

static int set_symbols_max(void *reg, const char *arg, char *err, size_t errlen)
{
	return set_limit(reg, arg, SYMBOLS, err, errlen);
}

static int set_perf_tables_max(void *reg, const char *arg, char *err, size_t errlen)
{
	return set_limit(reg, arg, PERF_TABLES, err, errlen);
}

static int set_held_max(void *reg, const char *arg, char *err, size_t errlen)
{
	return set_limit(reg, arg, HELD, err, errlen);
}

void ep_cli_binary_options(struct ep_option out[7], struct ep_binary_registry *reg)
{
	out[0] = (struct ep_option){"binary", 0, EP_OPT_CALL, reg, .call = add_binary};
	out[1] = (struct ep_option){"symfs", 0, EP_OPT_CALL, reg, .call = set_symfs};
	out[2] =
	    (struct ep_option){"binary-code-max-mib", 0, EP_OPT_CALL, reg, .call = set_code_max};
	out[3] = (struct ep_option){"binary-symbols-max-mib", 0, EP_OPT_CALL, reg,
				    .call = set_symbols_max};
	out[4] = (struct ep_option){"perf-data-tables-max-mib", 0, EP_OPT_CALL, reg,
				    .call = set_perf_tables_max};
	out[5] =
	    (struct ep_option){"binaries-held-max-mib", 0, EP_OPT_CALL, reg, .call = set_held_max};
	out[6] = (struct ep_option)EP_OPTION_END;
}
