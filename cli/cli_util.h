/* SPDX-License-Identifier: Apache-2.0 */
/* What several commands share beyond common/util/options. */
#ifndef EP_CLI_UTIL_H
#define EP_CLI_UTIL_H

#include "common/util/options.h"
#include "profile.pb-c.h"

struct ep_binary_registry;

/* The options every command that reads recordings takes: --binary FILE
 * (repeatable), --symfs DIR, and what reading one binary may cost,
 * --binary-code-max-mib N and --binary-symbols-max-mib N (ep_binreg_set_limits),
 * into reg; and what a perf.data's tables may, --perf-data-tables-max-mib N
 * (ep_perf_data_set_tables_max), and what all the binaries held may,
 * --binaries-held-max-mib N (ep_binreg_set_held_max). Fills out[0..6] (the
 * last is the table's end). */
void ep_cli_binary_options(struct ep_option out[7], struct ep_binary_registry *reg);

/* The profile in an export format (enum ep_export_format) to output, or
 * stdout when NULL; errors logged. 0 or 1 (the exit code). */
int ep_cli_write_export(const Edgeprof__V1__Profile *profile, int format, const char *build_id,
			const char *output);
/* The same with the instruction mix (NULL: none) in the JSON. */
struct ep_profile_mix;
int ep_cli_write_export_mix(const Edgeprof__V1__Profile *profile, int format, const char *build_id,
			    const struct ep_profile_mix *mix, const char *output);

#endif
