/* SPDX-License-Identifier: Apache-2.0 */
#include "common/util/json.h"

#include <stdint.h>

/* Length of the valid UTF-8 sequence at s, or 0. */
static size_t utf8_len(const unsigned char *s)
{
	size_t n;
	uint32_t cp;
	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0)
		n = 2, cp = s[0] & 0x1f;
	else if ((s[0] & 0xf0) == 0xe0)
		n = 3, cp = s[0] & 0x0f;
	else if ((s[0] & 0xf8) == 0xf0)
		n = 4, cp = s[0] & 0x07;
	else
		return 0;
	for (size_t i = 1; i < n; i++) {
		/* also stops at the terminating NUL */
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	static const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
	if (cp < min[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

void ep_json_string(FILE *out, const char *str)
{
	const unsigned char *s = (const unsigned char *)(str ? str : "");
	fputc('"', out);
	while (*s) {
		size_t n = utf8_len(s);
		if (n == 0) {
			fputs("\\ufffd", out);
			s++;
			continue;
		}
		switch (*s) {
		case '"':
			fputs("\\\"", out);
			break;
		case '\\':
			fputs("\\\\", out);
			break;
		case '\n':
			fputs("\\n", out);
			break;
		case '\t':
			fputs("\\t", out);
			break;
		default:
			if (*s < 0x20)
				fprintf(out, "\\u%04x", *s);
			else
				fwrite(s, 1, n, out);
		}
		s += n;
	}
	fputc('"', out);
}
