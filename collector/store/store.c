/* SPDX-License-Identifier: Apache-2.0 */
#include "store.h"

#include <stdio.h>
#include <string.h>

#include "store_backend.h"

struct ep_store *ep_store_open(const char *spec, char *err, size_t errlen)
{
	struct ep_store *s = NULL;
	if (strncmp(spec, "sqlite:", 7) == 0 && spec[7])
		s = ep_store_sqlite_open(spec + 7, err, errlen);
	else if (strncmp(spec, "clickhouse:", 11) == 0 && spec[11])
		snprintf(err, errlen, "store '%s': the ClickHouse store is not built yet", spec);
	else
		snprintf(err, errlen, "store '%s': expected sqlite:PATH or clickhouse:URL", spec);
	if (s)
		pthread_mutex_init(&s->lock, NULL);
	return s;
}

void ep_store_close(struct ep_store *s)
{
	if (!s)
		return;
	pthread_mutex_destroy(&s->lock);
	s->ops->close(s);
}

const char *ep_store_kind(const struct ep_store *s)
{
	return s->ops->kind;
}

int ep_store_has_batch(struct ep_store *s, const char *agent_id, uint64_t sequence, char *err,
		       size_t errlen)
{
	pthread_mutex_lock(&s->lock);
	int r = s->ops->has_batch(s, agent_id, sequence, err, errlen);
	pthread_mutex_unlock(&s->lock);
	return r;
}

int ep_store_write(struct ep_store *s, const struct ep_store_commit *c, char *err, size_t errlen)
{
	pthread_mutex_lock(&s->lock);
	int r = s->ops->write(s, c, err, errlen);
	pthread_mutex_unlock(&s->lock);
	return r;
}

Edgeprof__V1__BinaryList *ep_store_list_binaries(struct ep_store *s,
						 const struct ep_store_filter *f, char *err,
						 size_t errlen)
{
	pthread_mutex_lock(&s->lock);
	Edgeprof__V1__BinaryList *r = s->ops->list_binaries(s, f, err, errlen);
	pthread_mutex_unlock(&s->lock);
	return r;
}

void ep_store_free_list(Edgeprof__V1__BinaryList *list)
{
	if (list)
		protobuf_c_message_free_unpacked(&list->base, NULL);
}

Edgeprof__V1__Profile *ep_store_profile(struct ep_store *s, const struct ep_store_filter *f,
					char *err, size_t errlen)
{
	pthread_mutex_lock(&s->lock);
	Edgeprof__V1__Profile *r = s->ops->profile(s, f, err, errlen);
	pthread_mutex_unlock(&s->lock);
	return r;
}
