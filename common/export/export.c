/* SPDX-License-Identifier: Apache-2.0 */
/* The export entry points and what the formats share. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/export/export_internal.h"
#include "common/profile/model.h"

const char *const ep_export_format_names[] = {
    [EP_EXPORT_JSON] = "json",	  [EP_EXPORT_FDATA] = "fdata",	   [EP_EXPORT_PREAGG] = "preagg",
    [EP_EXPORT_AFDO] = "afdo",	  [EP_EXPORT_PROFGEN] = "profgen", [EP_EXPORT_PPROF] = "pprof",
    [EP_EXPORT_PPROF + 1] = NULL,
};

int ep_export_parse_format(const char *name)
{
	for (int i = 0; name && ep_export_format_names[i]; i++)
		if (strcmp(name, ep_export_format_names[i]) == 0)
			return i;
	return -1;
}

static int cmp_function(const void *pa, const void *pb)
{
	const Edgeprof__V1__Function *a = *(const Edgeprof__V1__Function *const *)pa;
	const Edgeprof__V1__Function *b = *(const Edgeprof__V1__Function *const *)pb;
	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	if (a->size != b->size)
		return a->size < b->size ? -1 : 1;
	return strcmp(a->name, b->name);
}

int ep_func_index_init(struct ep_func_index *ix, const Edgeprof__V1__BinaryProfile *bp)
{
	ix->n = bp->n_functions;
	ix->f = malloc((ix->n ? ix->n : 1) * sizeof(*ix->f));
	if (!ix->f)
		return -1;
	for (size_t i = 0; i < ix->n; i++)
		ix->f[i] = bp->functions[i];
	qsort(ix->f, ix->n, sizeof(*ix->f), cmp_function);
	return 0;
}

void ep_func_index_free(struct ep_func_index *ix)
{
	free(ix->f);
	ix->f = NULL;
	ix->n = 0;
}

long ep_func_index_find(const struct ep_func_index *ix, uint64_t addr)
{
	size_t lo = 0, hi = ix->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (ix->f[mid]->start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return -1;
	const Edgeprof__V1__Function *f = ix->f[lo - 1];
	return addr - f->start < (f->size ? f->size : 1) ? (long)(lo - 1) : -1;
}

const Edgeprof__V1__Edge **ep_export_sorted_edges(const Edgeprof__V1__BinaryProfile *bp)
{
	const Edgeprof__V1__Edge **e = malloc((bp->n_edges ? bp->n_edges : 1) * sizeof(*e));
	if (!e)
		return NULL;
	for (size_t i = 0; i < bp->n_edges; i++)
		e[i] = bp->edges[i];
	qsort(e, bp->n_edges, sizeof(*e), ep_edge_cmp);
	return e;
}

const Edgeprof__V1__Range **ep_export_sorted_ranges(const Edgeprof__V1__BinaryProfile *bp)
{
	const Edgeprof__V1__Range **r = malloc((bp->n_ranges ? bp->n_ranges : 1) * sizeof(*r));
	if (!r)
		return NULL;
	for (size_t i = 0; i < bp->n_ranges; i++)
		r[i] = bp->ranges[i];
	qsort(r, bp->n_ranges, sizeof(*r), ep_range_cmp);
	return r;
}

bool ep_export_same_ends(const Edgeprof__V1__Edge *a, const Edgeprof__V1__Edge *b)
{
	return a->from == b->from && a->to == b->to && !a->from_external == !b->from_external &&
	       !a->to_external == !b->to_external;
}

const char *ep_export_kind_name(Edgeprof__V1__BranchKind kind)
{
	switch (kind) {
	case EDGEPROF__V1__BRANCH_KIND__BRANCH_CONDITIONAL:
		return "conditional";
	case EDGEPROF__V1__BRANCH_KIND__BRANCH_JUMP:
		return "jump";
	case EDGEPROF__V1__BRANCH_KIND__BRANCH_JUMP_INDIRECT:
		return "jump_indirect";
	case EDGEPROF__V1__BRANCH_KIND__BRANCH_CALL:
		return "call";
	case EDGEPROF__V1__BRANCH_KIND__BRANCH_CALL_INDIRECT:
		return "call_indirect";
	case EDGEPROF__V1__BRANCH_KIND__BRANCH_RETURN:
		return "return";
	case EDGEPROF__V1__BRANCH_KIND__BRANCH_OTHER:
		return "other";
	case EDGEPROF__V1__BRANCH_KIND__BRANCH_FALLTHROUGH:
		return "fallthrough";
	default:
		return "unknown";
	}
}

int ep_export_finish(FILE *out, char *err, size_t errlen)
{
	if (!ferror(out))
		return 0;
	snprintf(err, errlen, "export: write failed: %s", strerror(errno ? errno : EIO));
	return -1;
}

int ep_export_oom(char *err, size_t errlen)
{
	snprintf(err, errlen, "export: out of memory");
	return -1;
}

const Edgeprof__V1__BinaryProfile *ep_export_select_binary(const Edgeprof__V1__Profile *p,
							   const char *build_id, char *err,
							   size_t errlen)
{
	const Edgeprof__V1__BinaryProfile *best = NULL;
	size_t matches = 0;
	size_t plen = build_id ? strlen(build_id) : 0;
	if (build_id && plen == 0) {
		snprintf(err, errlen, "--build-id: empty build-id prefix");
		return NULL;
	}
	for (size_t i = 0; i < p->n_binaries; i++) {
		const Edgeprof__V1__BinaryProfile *bp = p->binaries[i];
		if (build_id) {
			if (strncasecmp(bp->build_id, build_id, plen) == 0) {
				best = bp;
				matches++;
			}
			continue;
		}
		if (!best || bp->samples > best->samples ||
		    (bp->samples == best->samples && bp->n_edges > best->n_edges))
			best = bp;
	}
	if (build_id && matches == 0) {
		snprintf(err, errlen, "no binary in the profile has a build-id starting with %s",
			 build_id);
		return NULL;
	}
	if (matches > 1) {
		snprintf(err, errlen, "build-id prefix %s matches %zu binaries of the profile",
			 build_id, matches);
		return NULL;
	}
	if (!best)
		snprintf(err, errlen, "the profile holds no binary");
	return best;
}

int ep_export(const Edgeprof__V1__Profile *profile, enum ep_export_format format,
	      const char *build_id, FILE *out, char *err, size_t errlen)
{
	return ep_export_mix(profile, format, build_id, NULL, out, err, errlen);
}

int ep_export_mix(const Edgeprof__V1__Profile *profile, enum ep_export_format format,
		  const char *build_id, const struct ep_profile_mix *mix, FILE *out, char *err,
		  size_t errlen)
{
	const Edgeprof__V1__BinaryProfile *bp = NULL;
	/* json and pprof hold every binary unless one is asked for */
	if ((format != EP_EXPORT_JSON && format != EP_EXPORT_PPROF) || build_id) {
		bp = ep_export_select_binary(profile, build_id, err, errlen);
		if (!bp)
			return -1;
	}
	switch (format) {
	case EP_EXPORT_JSON:
		return ep_export_json(profile, bp, mix, out, err, errlen);
	case EP_EXPORT_FDATA:
		return ep_export_fdata(bp, out, err, errlen);
	case EP_EXPORT_PREAGG:
		return ep_export_preagg(profile, bp, out, err, errlen);
	case EP_EXPORT_AFDO:
		return ep_export_afdo(bp, out, err, errlen);
	case EP_EXPORT_PROFGEN:
		return ep_export_profgen(profile, bp, out, err, errlen);
	case EP_EXPORT_PPROF:
		return ep_export_pprof(profile, bp, out, err, errlen);
	}
	snprintf(err, errlen, "unknown export format %d", (int)format);
	return -1;
}
