/* SPDX-License-Identifier: Apache-2.0 */
/* The formats IP samples alone cannot make: refused, naming why, rather
 * than written empty (a 0-byte fdata that BOLT reads as "no profile"). */
#include <stdio.h>

#include "common/export/export.h"

int ep_export_check_branches(const Edgeprof__V1__Profile *profile, enum ep_export_format format,
			     const char *build_id, char *why, size_t len)
{
	const char *needs;
	switch (format) {
	case EP_EXPORT_FDATA:
	case EP_EXPORT_PREAGG:
		needs = "taken branches";
		break;
	case EP_EXPORT_AFDO:
	case EP_EXPORT_PROFGEN:
		needs = "taken branches and the ranges between them";
		break;
	default:
		return 0;
	}
	char err[256];
	const Edgeprof__V1__BinaryProfile *bp =
	    ep_export_select_binary(profile, build_id, err, sizeof(err));
	/* no binary: the export says why itself; no IPs either: nothing sampled */
	if (!bp || bp->n_edges || bp->n_ranges || !bp->n_ips)
		return 0;
	snprintf(why, len,
		 "IP samples only (no branch stacks): %s needs %s; record on a machine with "
		 "LBR/BRBE, or use the json format",
		 ep_export_format_names[format], needs);
	return -1;
}
