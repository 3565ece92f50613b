/* SPDX-License-Identifier: Apache-2.0 */
#include "common/util/collector_list.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util/clock.h"

struct ep_collector_list {
	char **urls;
	size_t n;
	pthread_mutex_t lock;
	size_t current, home;
	uint64_t left_home_ns; /* monotonic; when current stopped being home */
	uint64_t failback_ns;
};

void ep_collector_list_free(struct ep_collector_list *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->n; i++)
		free(l->urls[i]);
	free(l->urls);
	pthread_mutex_destroy(&l->lock);
	free(l);
}

static int add_url(struct ep_collector_list *l, const char *p, size_t len, char *err, size_t errlen)
{
	while (len && (*p == ' ' || *p == '\t')) {
		p++;
		len--;
	}
	while (len && (p[len - 1] == ' ' || p[len - 1] == '\t' || p[len - 1] == '/'))
		len--;
	if (!(len > 7 && strncmp(p, "http://", 7) == 0) &&
	    !(len > 8 && strncmp(p, "https://", 8) == 0)) {
		snprintf(err, errlen,
			 "--collector '%.*s': expected http://HOST:PORT or https://...", (int)len,
			 p);
		return -1;
	}
	for (size_t i = 0; i < l->n; i++)
		if (strlen(l->urls[i]) == len && strncmp(l->urls[i], p, len) == 0)
			return 0;
	char *url = strndup(p, len);
	char **grown = url ? realloc(l->urls, (l->n + 1) * sizeof(*grown)) : NULL;
	if (!grown) {
		free(url);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	l->urls = grown;
	l->urls[l->n++] = url;
	return 0;
}

struct ep_collector_list *ep_collector_list_parse(const char *spec, char *err, size_t errlen)
{
	struct ep_collector_list *l = calloc(1, sizeof(*l));
	if (!l) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	pthread_mutex_init(&l->lock, NULL);
	l->failback_ns = EP_COLLECTOR_FAILBACK_S * EP_NS_PER_S;
	for (const char *p = spec ? spec : "";;) {
		size_t len = strcspn(p, ",");
		if (add_url(l, p, len, err, errlen) != 0) {
			ep_collector_list_free(l);
			return NULL;
		}
		if (!p[len])
			break;
		p += len + 1;
	}
	return l;
}

size_t ep_collector_list_count(const struct ep_collector_list *l)
{
	return l->n;
}

const char *ep_collector_list_url(const struct ep_collector_list *l, size_t i)
{
	return l->urls[i % l->n];
}

void ep_collector_list_set_home(struct ep_collector_list *l, uint64_t key)
{
	pthread_mutex_lock(&l->lock);
	l->home = l->current = (size_t)(key % l->n);
	pthread_mutex_unlock(&l->lock);
}

size_t ep_collector_list_home(const struct ep_collector_list *l)
{
	return l->home;
}

size_t ep_collector_list_pick(struct ep_collector_list *l)
{
	pthread_mutex_lock(&l->lock);
	if (l->current != l->home && ep_mono_ns() - l->left_home_ns >= l->failback_ns)
		l->current = l->home;
	size_t i = l->current;
	pthread_mutex_unlock(&l->lock);
	return i;
}

size_t ep_collector_list_failed(struct ep_collector_list *l, size_t i)
{
	pthread_mutex_lock(&l->lock);
	if (l->current == i) {
		l->current = (i + 1) % l->n;
		if (i == l->home)
			l->left_home_ns = ep_mono_ns();
	}
	size_t now = l->current;
	pthread_mutex_unlock(&l->lock);
	return now;
}

void ep_collector_list_set_failback_ns(struct ep_collector_list *l, uint64_t ns)
{
	pthread_mutex_lock(&l->lock);
	l->failback_ns = ns;
	pthread_mutex_unlock(&l->lock);
}

int ep_collector_arg_add(void *arg, const char *value, char *err, size_t errlen)
{
	struct ep_collector_arg *a = arg;
	size_t used = strlen(a->joined);
	int n =
	    snprintf(a->joined + used, sizeof(a->joined) - used, "%s%s", used ? "," : "", value);
	if (n < 0 || (size_t)n >= sizeof(a->joined) - used) {
		a->joined[used] = '\0';
		snprintf(err, errlen, "the collectors' URLs are longer than %zu bytes in all",
			 sizeof(a->joined) - 1);
		return -1;
	}
	*a->out = a->joined;
	return 0;
}
