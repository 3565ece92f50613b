/* SPDX-License-Identifier: Apache-2.0 */
#include "common/util/http_body.h"

#include <stdlib.h>
#include <string.h>

size_t ep_http_body_write(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	struct ep_http_body *b = userdata;
	size_t n = size * nmemb;
	if (b->max && b->len + n > b->max) {
		b->over = true;
		return 0;
	}
	char *d = realloc(b->data, b->len + n + 1);
	if (!d)
		return 0;
	memcpy(d + b->len, ptr, n);
	b->data = d;
	b->len += n;
	d[b->len] = '\0';
	return n;
}
