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

#endif
