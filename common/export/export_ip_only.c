/* SPDX-License-Identifier: Apache-2.0 */
/* The formats IP samples alone cannot make: refused, naming why, rather
 * than written empty (a 0-byte fdata that BOLT reads as "no profile"). */
#include <stdio.h>
#include <string.h>

#include "common/export/export.h"

/* What format is made of, NULL when IP samples make it. */
static const char *needs(int format)
{
	switch (format) {
	case EP_EXPORT_FDATA:
	case EP_EXPORT_PREAGG:
		return "taken branches";
	case EP_EXPORT_AFDO:
	case EP_EXPORT_PROFGEN:
		return "taken branches and the ranges between them";
	default:
		return NULL;
	}
}

int ep_export_check_branches(const Edgeprof__V1__Profile *profile, enum ep_export_format format,
			     const char *build_id, char *why, size_t len)
{
	if (!needs((int)format))
		return 0;
	char err[256];
	const Edgeprof__V1__BinaryProfile *bp =
	    ep_export_select_binary(profile, build_id, err, sizeof(err));
	/* no binary: the export says why itself; no IPs either: nothing sampled */
	if (!bp || bp->n_edges || bp->n_ranges || !bp->n_ips)
		return 0;
	/* the formats that can be made, as the enum grows */
	char others[128] = "";
	for (int i = 0; ep_export_format_names[i]; i++) {
		size_t n = strlen(others);
		if (!needs(i))
			snprintf(others + n, sizeof(others) - n, "%s%s", n ? "|" : "",
				 ep_export_format_names[i]);
	}
	snprintf(why, len,
		 "IP samples only (no branch stacks): %s needs %s; record on a machine with "
		 "LBR/BRBE, or use --format %s",
		 ep_export_format_names[format], needs((int)format), others);
	return -1;
}
