/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The collectors a client talks to (issue 16): one base URL, or several
 * replicas of one fleet ("http://a:7070,http://b:7070", or --collector given
 * more than once). Replicas share one store, so any of them may take any
 * request: a client sends to the one in use and, when a request fails (no
 * connection, a timeout, a 5xx), moves to the next. Each client has a home
 * replica (the first URL, or one picked from a key such as the node's name,
 * so that a fleet configured with one list spreads over all replicas
 * instead of loading the first); one that left its home goes back to it
 * after EP_COLLECTOR_FAILBACK_S, so the load spreads again once a replica
 * that was down is back. Thread-safe: the agent's sender and its binary
 * uploader share one list.
 */
#ifndef EP_COLLECTOR_LIST_H
#define EP_COLLECTOR_LIST_H

#include <stddef.h>
#include <stdint.h>

#define EP_COLLECTOR_FAILBACK_S 60

struct ep_collector_list;

/* spec: URLs separated by commas, each http:// or https://; trailing '/'
 * dropped; a URL listed twice is kept once. NULL with err naming the
 * one that is wrong. */
struct ep_collector_list *ep_collector_list_parse(const char *spec, char *err, size_t errlen);
void ep_collector_list_free(struct ep_collector_list *l);

size_t ep_collector_list_count(const struct ep_collector_list *l);
const char *ep_collector_list_url(const struct ep_collector_list *l, size_t i);

/* Home: URL key % count from now on, and the one in use. */
void ep_collector_list_set_home(struct ep_collector_list *l, uint64_t key);
size_t ep_collector_list_home(const struct ep_collector_list *l);

/* The index to send the next request to: the one in use, or the home
 * again once EP_COLLECTOR_FAILBACK_S passed since it was left. */
size_t ep_collector_list_pick(struct ep_collector_list *l);
/* A request to i failed: unless another thread moved on already, the next
 * one (wrapping) is in use from now. Returns the one in use. */
size_t ep_collector_list_failed(struct ep_collector_list *l, size_t i);
/* How long before the home URL is tried again (default
 * EP_COLLECTOR_FAILBACK_S; the tests shorten it). */
void ep_collector_list_set_failback_ns(struct ep_collector_list *l, uint64_t ns);

/* --collector as a repeatable option (EP_OPT_CALL with value = this):
 * each argument is appended to the ones before, comma-joined, and *out
 * points at the joined text. */
struct ep_collector_arg {
	const char **out;
	char joined[4096];
};
int ep_collector_arg_add(void *arg, const char *value, char *err, size_t errlen);

#endif
