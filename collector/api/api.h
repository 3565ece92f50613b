/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Export stage on the collector: answers about what the store holds.
 *   binaries  the binaries with counts (JSON), under a time and label filter
 *   profile   one binary's (or every binary's) summed profile, as json,
 *             fdata, preagg, afdo, profgen (common/export) or proto (edgeprof.v1.Profile,
 *             which `edgeprof report/export --collector` read)
 */
#ifndef EP_API_H
#define EP_API_H

#include <stddef.h>

#include "collector/store/store.h"

struct ep_api_response {
	int status;
	const char *content_type;
	char *body; /* malloc'd */
	size_t len;
};

void ep_api_binaries(struct ep_store *store, const struct ep_store_filter *f,
		     struct ep_api_response *r);
/* f->build_id NULL: every binary under the filter, in one profile. */
void ep_api_profile(struct ep_store *store, const struct ep_store_filter *f, const char *format,
		    struct ep_api_response *r);

/* An on-demand session (collector/sessions) as JSON, or as
 * edgeprof.v1.Session with format "proto" (what `edgeprof profile` reads). */
void ep_api_session(const Edgeprof__V1__Session *s, const char *format, int status,
		    struct ep_api_response *r);

#endif
