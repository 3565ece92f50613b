/* SPDX-License-Identifier: Apache-2.0 */
#include "common/profile/model.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int cmp_u64(uint64_t a, uint64_t b)
{
	return a < b ? -1 : a > b;
}

int ep_edge_cmp(const void *pa, const void *pb)
{
	const Edgeprof__V1__Edge *a = *(const Edgeprof__V1__Edge *const *)pa;
	const Edgeprof__V1__Edge *b = *(const Edgeprof__V1__Edge *const *)pb;
	int c = cmp_u64(a->from, b->from);
	if (!c)
		c = cmp_u64(a->to, b->to);
	if (!c)
		c = cmp_u64(!!a->from_external, !!b->from_external);
	if (!c)
		c = cmp_u64(!!a->to_external, !!b->to_external);
	if (!c)
		c = cmp_u64(!!a->taken, !!b->taken);
	return c;
}

int ep_range_cmp(const void *pa, const void *pb)
{
	const Edgeprof__V1__Range *a = *(const Edgeprof__V1__Range *const *)pa;
	const Edgeprof__V1__Range *b = *(const Edgeprof__V1__Range *const *)pb;
	int c = cmp_u64(a->start, b->start);
	return c ? c : cmp_u64(a->end, b->end);
}

int ep_ip_cmp(const void *pa, const void *pb)
{
	const Edgeprof__V1__IpCount *a = *(const Edgeprof__V1__IpCount *const *)pa;
	const Edgeprof__V1__IpCount *b = *(const Edgeprof__V1__IpCount *const *)pb;
	return cmp_u64(a->ip, b->ip);
}

int ep_function_cmp(const void *pa, const void *pb)
{
	const Edgeprof__V1__Function *a = *(const Edgeprof__V1__Function *const *)pa;
	const Edgeprof__V1__Function *b = *(const Edgeprof__V1__Function *const *)pb;
	int c = cmp_u64(a->start, b->start);
	return c ? c : strcmp(a->name ? a->name : "", b->name ? b->name : "");
}

/* An empty repeated field is a NULL array, which qsort must not be given. */
static void sort_field(void *array, size_t n, int (*cmp)(const void *, const void *))
{
	if (n > 1)
		qsort(array, n, sizeof(void *), cmp);
}

void ep_binary_profile_sort(Edgeprof__V1__BinaryProfile *bp)
{
	sort_field(bp->edges, bp->n_edges, ep_edge_cmp);
	sort_field(bp->ranges, bp->n_ranges, ep_range_cmp);
	sort_field(bp->ips, bp->n_ips, ep_ip_cmp);
	sort_field(bp->functions, bp->n_functions, ep_function_cmp);
}

int ep_pb_append(void ***array, size_t *n, void *item)
{
	void **grown = realloc(*array, (*n + 1) * sizeof(*grown));
	if (!grown)
		return -1;
	grown[(*n)++] = item;
	*array = grown;
	return 0;
}
