/* SPDX-License-Identifier: Apache-2.0 */
/* The profile model (proto/profile.proto) as every stage builds it: the one
 * order of each repeated field of a BinaryProfile, so that profiles from the
 * agent, the store and the exports compare line by line, and growing a
 * repeated field. Used by the agent, the collector and the CLI alike. */
#ifndef EP_PROFILE_MODEL_H
#define EP_PROFILE_MODEL_H

#include <stddef.h>

#include "profile.pb-c.h"

/* qsort comparators over arrays of message pointers. Edges: by source, then
 * target, then the external flags, not-taken before taken; so the two sides of
 * one branch whose target is its fall-through stay adjacent. Ranges: by
 * (start, end). IPs and functions: by address. */
int ep_edge_cmp(const void *a, const void *b);
int ep_range_cmp(const void *a, const void *b);
int ep_ip_cmp(const void *a, const void *b);
int ep_function_cmp(const void *a, const void *b);

/* Puts edges, ranges, IPs and functions of bp in the orders above. */
void ep_binary_profile_sort(Edgeprof__V1__BinaryProfile *bp);

/* Appends item to a protobuf-c repeated field (pointer array + count); 0, or
 * -1 when out of memory (the field is unchanged, item not taken). */
int ep_pb_append(void ***array, size_t *n, void *item);
#define EP_PB_APPEND(array, n, item) ep_pb_append((void ***)&(array), &(n), (item))

#endif
