/* SPDX-License-Identifier: Apache-2.0 */
#include "cli/cli_util.h"

#include "agent/resolve/binary.h"

static int add_binary(void *reg, const char *path, char *err, size_t errlen)
{
	return ep_binreg_add_file(reg, path, err, errlen);
}

static int set_symfs(void *reg, const char *dir, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	ep_binreg_set_symfs(reg, dir);
	return 0;
}

void ep_cli_binary_options(struct ep_option out[3], struct ep_binary_registry *reg)
{
	out[0] = (struct ep_option){"binary", 0, EP_OPT_CALL, reg, .call = add_binary};
	out[1] = (struct ep_option){"symfs", 0, EP_OPT_CALL, reg, .call = set_symfs};
	out[2] = (struct ep_option)EP_OPTION_END;
}
