/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>
#include <string.h>

#include "export_internal.h"

int ep_export_parse_format(const char *name)
{
	static const char *const names[] = {"json", "fdata", "preagg", "afdo"};
	for (int i = 0; i < 4; i++)
		if (strcmp(name, names[i]) == 0)
			return i;
	return -1;
}

long ep_export_function_index(const Edgeprof__V1__BinaryProfile *bp, uint64_t addr)
{
	size_t lo = 0, hi = bp->n_functions;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (bp->functions[mid]->start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return -1;
	const Edgeprof__V1__Function *f = bp->functions[lo - 1];
	return addr - f->start < (f->size ? f->size : 1) ? (long)(lo - 1) : -1;
}

const Edgeprof__V1__Function *ep_export_function_at(const Edgeprof__V1__BinaryProfile *bp,
						    uint64_t addr)
{
	long k = ep_export_function_index(bp, addr);
	return k >= 0 ? bp->functions[k] : NULL;
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
	default:
		return "unknown";
	}
}

/* The binary an optimizer format is written for: the one the build-id
 * prefix names, or the one with the most samples (then edges). */
static const Edgeprof__V1__BinaryProfile *
select_binary(const Edgeprof__V1__Profile *p, const char *build_id, char *err, size_t errlen)
{
	const Edgeprof__V1__BinaryProfile *best = NULL;
	for (size_t i = 0; i < p->n_binaries; i++) {
		const Edgeprof__V1__BinaryProfile *bp = p->binaries[i];
		if (build_id) {
			if (strncmp(bp->build_id, build_id, strlen(build_id)) == 0 && build_id[0])
				return bp;
			continue;
		}
		if (!best || bp->samples > best->samples ||
		    (bp->samples == best->samples && bp->n_edges > best->n_edges))
			best = bp;
	}
	if (build_id)
		snprintf(err, errlen, "no binary in the profile has build-id %s", build_id);
	else if (!best)
		snprintf(err, errlen, "the profile holds no binary");
	return best;
}

int ep_export(const Edgeprof__V1__Profile *profile, enum ep_export_format format,
	      const char *build_id, FILE *out, char *err, size_t errlen)
{
	const Edgeprof__V1__BinaryProfile *bp = NULL;
	if (format != EP_EXPORT_JSON || build_id) {
		bp = select_binary(profile, build_id, err, errlen);
		if (!bp)
			return -1;
	}
	switch (format) {
	case EP_EXPORT_JSON:
		return ep_export_json(profile, bp, out);
	case EP_EXPORT_FDATA:
		return ep_export_fdata(bp, out);
	case EP_EXPORT_PREAGG:
		return ep_export_preagg(bp, out);
	case EP_EXPORT_AFDO:
		return ep_export_afdo(bp, out);
	}
	snprintf(err, errlen, "unknown export format %d", (int)format);
	return -1;
}
