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

/* The real LBR recordings (../shared/fixtures/lbr beside the checkout, or
 * $EDGEPROF_FIXTURES). Tests run from the repository root. */
static inline const char *ep_test_fixture(const char *name)
{
	static char paths[8][4096];
	static int next;
	const char *dir = getenv("EDGEPROF_FIXTURES");
	if (!dir)
		dir = "../shared/fixtures/lbr";
	char *p = paths[next++ % 8];
	snprintf(p, sizeof(paths[0]), "%s/%s", dir, name);
	return p;
}

/* A ClickHouse store spec from $EDGEPROF_TEST_STORE (clickhouse:URL, with
 * parameters such as cluster=NAME after a '?') for a database of its own. */
static inline void ep_test_clickhouse_spec(char *spec, size_t len, const char *env,
					   const char *database)
{
	const char *q = strchr(env, '?');
	int base = q ? (int)(q - env) : (int)strlen(env);
	while (base > 0 && env[base - 1] == '/')
		base--;
	snprintf(spec, len, "%.*s/?database=%s%s%s", base, env, database, q ? "&" : "",
		 q ? q + 1 : "");
}

#endif
