/* SPDX-License-Identifier: Apache-2.0 */
/* An HTTP answer collected by libcurl (http_client.h's requests, the
 * ClickHouse store). */
#ifndef EP_HTTP_BODY_H
#define EP_HTTP_BODY_H

#include <stdbool.h>
#include <stddef.h>

struct ep_http_body {
	char *data; /* NUL-terminated once anything arrived; free() it */
	size_t len;
	size_t max; /* refuse more than this (curl then fails the transfer); 0: no limit */
	bool over;  /* refused for max */
};

/* For CURLOPT_WRITEFUNCTION with CURLOPT_WRITEDATA = struct ep_http_body *. */
size_t ep_http_body_write(char *ptr, size_t size, size_t nmemb, void *userdata);

#endif
