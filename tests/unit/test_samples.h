/* SPDX-License-Identifier: Apache-2.0 */
/* A perf.data reader callback that keeps every sample, for the unit tests
 * that replay one recording several ways. */
#ifndef EP_TEST_SAMPLES_H
#define EP_TEST_SAMPLES_H

#include "test_util.h"

#include "agent/source/perf_data/perf_data.h"

struct samples {
	struct ep_sample_record *recs;
	size_t n, cap;
};

static inline int keep_sample(void *ctx, const struct ep_sample_record *rec)
{
	struct samples *s = ctx;
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 1024;
		s->recs = realloc(s->recs, s->cap * sizeof(*s->recs));
		assert_non_null(s->recs);
	}
	s->recs[s->n++] = *rec;
	return 0;
}

#endif
