/* SPDX-License-Identifier: Apache-2.0 */
/* Bearer tokens from files, for the agent and the collector alike. */
#ifndef EP_SECRET_H
#define EP_SECRET_H

#include <stddef.h>

/* Reads the token (surrounding whitespace removed) into out. Refuses a
 * file others can read (mode o+r or o+w): a token anyone on the node can read
 * authenticates nothing. 0, or -1 with err naming the file. */
int ep_read_token_file(const char *path, char *out, size_t outlen, char *err, size_t errlen);

#endif
