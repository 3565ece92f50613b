/* SPDX-License-Identifier: Apache-2.0 */
/* Shared by the export formats (internal). */
#ifndef EP_EXPORT_INTERNAL_H
#define EP_EXPORT_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "export.h"

int ep_export_json(const Edgeprof__V1__Profile *p, const Edgeprof__V1__BinaryProfile *only,
		   FILE *out);
int ep_export_fdata(const Edgeprof__V1__BinaryProfile *bp, FILE *out);
int ep_export_preagg(const Edgeprof__V1__BinaryProfile *bp, FILE *out);
int ep_export_afdo(const Edgeprof__V1__BinaryProfile *bp, FILE *out);

/* The function containing addr (binary search over bp->functions, which
 * the aggregator sorts by start), or NULL. */
const Edgeprof__V1__Function *ep_export_function_at(const Edgeprof__V1__BinaryProfile *bp,
						    uint64_t addr);
/* Its index in bp->functions, or -1. */
long ep_export_function_index(const Edgeprof__V1__BinaryProfile *bp, uint64_t addr);
const char *ep_export_kind_name(Edgeprof__V1__BranchKind kind);

#endif
