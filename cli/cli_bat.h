/* SPDX-License-Identifier: Apache-2.0 */
/* export --format fdata of a BOLTed binary: in its input binary's terms. */
#ifndef EP_CLI_BAT_H
#define EP_CLI_BAT_H

#include "profile.pb-c.h"

struct ep_binary_registry;

/* When the binary an fdata export is for (build_id as export takes it) is
 * found (--binary, --symfs, its recorded path) and holds BOLT's address
 * translation table, the fdata in the input binary's terms to output
 * (stdout when NULL): 0 written, 1 failed (logged). -1 when it has no
 * table or its file is not found: the caller writes the plain fdata. */
int ep_cli_export_bat(const Edgeprof__V1__Profile *profile, const char *build_id,
		      struct ep_binary_registry *reg, const char *output);

#endif
