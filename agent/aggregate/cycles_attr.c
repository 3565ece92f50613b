/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/aggregate/cycles_attr.h"

#include <stdlib.h>

static int by_ip(const void *pa, const void *pb)
{
	const struct ep_ip_cycles *a = pa, *b = pb;
	return a->ip < b->ip ? -1 : a->ip > b->ip;
}

/* a range's index by its start */
struct start_index {
	uint64_t start;
	size_t i;
};

static int by_start(const void *pa, const void *pb)
{
	const struct start_index *a = pa, *b = pb;
	return a->start < b->start ? -1 : a->start > b->start;
}

/*
 * One sweep over the addresses in order, with the ranges begun at or
 * before the current one kept in `active` and those ended before it
 * dropped: at each address `active` is exactly the ranges holding it. The
 * overlap at any address is a few ranges, so this is near
 * O((R + I) log(R + I)).
 */
int ep_cycles_attribute(struct ep_cycles_range *ranges, size_t nranges, struct ep_ip_cycles *ips,
			size_t nips, double scale)
{
	struct start_index *order = malloc((nranges + 1) * sizeof(*order));
	size_t *active = malloc((nranges + 1) * sizeof(*active));
	if (!order || !active) {
		free(order);
		free(active);
		return -1;
	}
	for (size_t i = 0; i < nranges; i++)
		order[i] = (struct start_index){ranges[i].start, i};
	qsort(order, nranges, sizeof(*order), by_start);
	qsort(ips, nips, sizeof(*ips), by_ip);
	size_t next = 0, nactive = 0;
	for (size_t j = 0; j < nips; j++) {
		uint64_t ip = ips[j].ip;
		while (next < nranges && order[next].start <= ip)
			active[nactive++] = order[next++].i;
		uint64_t total = 0;
		for (size_t k = 0; k < nactive;) {
			const struct ep_cycles_range *r = &ranges[active[k]];
			if (r->end < ip) {
				active[k] = active[--nactive];
				continue;
			}
			total += r->count;
			k++;
		}
		if (!total)
			continue;
		double share = (double)ips[j].cycles * scale / (double)total;
		for (size_t k = 0; k < nactive; k++)
			ranges[active[k]].cycles += share * (double)ranges[active[k]].count;
		ips[j].cycles = 0;
	}
	free(order);
	free(active);
	return 0;
}
