/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Shared by the export formats (internal). A profile may come from a file
 * written by another version, by hand, or damaged, so nothing here trusts
 * its order: every format sorts what it writes, and function lookups go
 * through an index built here.
 */
#ifndef EP_EXPORT_INTERNAL_H
#define EP_EXPORT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/export/export.h"
#include "common/profile/insn_mix.h"

/* A binary's functions sorted by start address. */
struct ep_func_index {
	const Edgeprof__V1__Function **f;
	size_t n;
};

/* Returns 0, or -1 when memory runs out. */
int ep_func_index_init(struct ep_func_index *ix, const Edgeprof__V1__BinaryProfile *bp);
void ep_func_index_free(struct ep_func_index *ix);
/* Index (into ix->f) of the function containing addr, or -1. A function of
 * size 0 covers its first byte only. */
long ep_func_index_find(const struct ep_func_index *ix, uint64_t addr);

/* agent --stacks: bp's hottest call stacks (top of them) by function, fx
 * its functions, p the profile holding the other binaries their frames
 * name; or why they are not shown. 0, or -1 when memory runs out. */
int ep_report_stacks(const Edgeprof__V1__Profile *p, const Edgeprof__V1__BinaryProfile *bp,
		     const struct ep_func_index *fx, unsigned top, FILE *out);

/* The binary's edges sorted by from, to, the external flags (which only
 * tell apart ends at address 0), then taken (not taken first); ranges by
 * start, end. NULL when memory runs out. Free the array, not the
 * elements. */
const Edgeprof__V1__Edge **ep_export_sorted_edges(const Edgeprof__V1__BinaryProfile *bp);
const Edgeprof__V1__Range **ep_export_sorted_ranges(const Edgeprof__V1__BinaryProfile *bp);

/* Whether two edges (sorted neighbours) name the same from/to pair: a
 * conditional branch to its own next instruction has a taken and a
 * not-taken edge that the optimizer formats cannot tell apart. */
bool ep_export_same_ends(const Edgeprof__V1__Edge *a, const Edgeprof__V1__Edge *b);

const char *ep_export_kind_name(Edgeprof__V1__BranchKind kind);

/* Every format returns 0, or -1 with err saying why. */
/* mix: NULL, or the instruction mix to add (per range, per binary) */
int ep_export_json(const Edgeprof__V1__Profile *p, const Edgeprof__V1__BinaryProfile *only,
		   const struct ep_profile_mix *mix, FILE *out, char *err, size_t errlen);
int ep_export_fdata(const Edgeprof__V1__BinaryProfile *bp, FILE *out, char *err, size_t errlen);
int ep_export_preagg(const Edgeprof__V1__Profile *p, const Edgeprof__V1__BinaryProfile *bp,
		     FILE *out, char *err, size_t errlen);
int ep_export_afdo(const Edgeprof__V1__BinaryProfile *bp, FILE *out, char *err, size_t errlen);
int ep_export_profgen(const Edgeprof__V1__Profile *p, const Edgeprof__V1__BinaryProfile *bp,
		      FILE *out, char *err, size_t errlen);
/* only: NULL for every binary of p (export_pprof.c) */
int ep_export_pprof(const Edgeprof__V1__Profile *p, const Edgeprof__V1__BinaryProfile *only,
		    FILE *out, char *err, size_t errlen);

/* The instruction mix (export_mix.c). Sums of a binary's ranges: per
 * function (per_func[fx->n]: in no known function) and in all. */
struct ep_binary_mix;
struct ep_mix_sums {
	struct ep_insn_totals *per_func;
	struct ep_insn_totals total;
	uint64_t ranges, undecoded;
};
int ep_mix_totals(const Edgeprof__V1__BinaryProfile *bp, const struct ep_binary_mix *m,
		  const struct ep_func_index *fx, struct ep_mix_sums *out);
void ep_mix_sums_free(struct ep_mix_sums *s);
/* {"instructions": N, "load": N, ...} */
void ep_mix_json_counts(FILE *out, const struct ep_insn_totals *t);
/* A range's `, "insn_mix": {...}` (null when its code did not decode;
 * nothing when it is outside the window). */
void ep_mix_json_range(FILE *out, const struct ep_binary_mix *m, const Edgeprof__V1__Range *r);
/* The binary's `,\n  "insn_mix": {...}`; -1 when memory runs out. */
int ep_mix_json_binary(FILE *out, const Edgeprof__V1__BinaryProfile *bp,
		       const struct ep_binary_mix *m, const struct ep_func_index *fx,
		       const char *scope);

/* Cycles per instruction (report_cpi.c): a range's `, "cpi": X, "ipc": Y`
 * when it has cycles, and the binary's `,\n  "cpi": {...}` (totals and per
 * function) when any range has; -1 when memory runs out. */
void ep_cpi_json_range(FILE *out, const Edgeprof__V1__Range *r);
int ep_cpi_json_binary(FILE *out, const Edgeprof__V1__BinaryProfile *bp,
		       const struct ep_func_index *fx);

/* The last step of every format: -1 with err set if out saw an error. */
int ep_export_finish(FILE *out, char *err, size_t errlen);
/* For the formats' allocation failures. */
int ep_export_oom(char *err, size_t errlen);

#endif
