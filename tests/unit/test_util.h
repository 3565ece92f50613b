/* SPDX-License-Identifier: Apache-2.0 */
/* Shared by the cmocka unit tests. */
#ifndef EP_TEST_UTIL_H
#define EP_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* The real LBR recordings (tests/data/lbr, or $EDGEPROF_FIXTURES). Tests
 * run from the repository root. A missing file is named on stderr here, so
 * the failure that follows (an open that fails deep in a reader) is not the
 * only word a reader of the log gets. */
static inline const char *ep_test_fixture(const char *name)
{
	static char paths[8][4096];
	static int next;
	const char *dir = getenv("EDGEPROF_FIXTURES");
	if (!dir)
		dir = "tests/data/lbr";
	char *p = paths[next++ % 8];
	snprintf(p, sizeof(paths[0]), "%s/%s", dir, name);
	FILE *f = fopen(p, "rb");
	if (f)
		fclose(f);
	else
		fprintf(stderr, "test data missing: %s (run the tests from the repository root)\n",
			p);
	return p;
}

/* The whole file at path (malloc'd, one byte spare), its size in *len. */
static inline uint8_t *ep_test_slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/* The length of url's server part: before its parameters ('?') and the
 * slashes ahead of them. */
static inline int ep_test_url_server_len(const char *url)
{
	int n = (int)strcspn(url, "?");
	while (n > 0 && url[n - 1] == '/')
		n--;
	return n;
}

/* A ClickHouse store spec from $EDGEPROF_TEST_STORE (clickhouse:URL, with
 * parameters such as cluster=NAME after a '?') for a database of its own. */
static inline void ep_test_clickhouse_spec(char *spec, size_t len, const char *env,
					   const char *database)
{
	const char *q = strchr(env, '?');
	snprintf(spec, len, "%.*s/?database=%s%s%s", ep_test_url_server_len(env), env, database,
		 q ? "&" : "", q ? q + 1 : "");
}

#endif
