/* SPDX-License-Identifier: Apache-2.0 */
#ifndef EP_CLI_UTIL_H
#define EP_CLI_UTIL_H

/* Parses a decimal number in [min, max]; 0 on success, -1 otherwise. */
int ep_parse_uint(const char *s, unsigned min, unsigned max, unsigned *out);

#endif
