/* SPDX-License-Identifier: Apache-2.0 */
/* JSON strings from bytes that may not be UTF-8 (paths, process and node
 * names come from agents and from the file system, where any byte goes):
 * every JSON writer goes through this, so no document is ever invalid. */
#ifndef EP_JSON_H
#define EP_JSON_H

#include <stdio.h>

/* Writes s (NULL: "") as a quoted JSON string: quotes, backslashes and
 * control characters escaped, each byte that does not start a valid UTF-8
 * sequence (overlong forms, surrogates and code points past U+10FFFF
 * included) written as U+FFFD. */
void ep_json_string(FILE *out, const char *s);

#endif
