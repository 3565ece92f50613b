/* SPDX-License-Identifier: Apache-2.0 */
#ifndef EP_CLI_UTIL_H
#define EP_CLI_UTIL_H

#include "profile.pb-c.h"

/* Parses a decimal number in [min, max]; 0 on success, -1 otherwise. */
int ep_parse_uint(const char *s, unsigned min, unsigned max, unsigned *out);

struct ep_binary_registry;

/* The options every command that reads recordings shares: 'b' (--binary
 * FILE) and 's' (--symfs DIR). Returns 1 when ch was one of them and went
 * well, -1 when it failed (error logged), 0 when ch is another option. */
int ep_cli_binary_option(struct ep_binary_registry *reg, int ch, const char *arg);

/* The profile in an export format (enum ep_export_format) to output, or
 * stdout when NULL; errors logged. 0 or 1 (the exit code). */
int ep_cli_write_export(const Edgeprof__V1__Profile *profile, int format, const char *build_id,
			const char *output);

#endif
