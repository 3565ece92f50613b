/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Export stage: turns a profile into what optimizers and people read.
 *  json    edgeprof's own schema (README)
 *  fdata   BOLT's profile format (llvm-bolt -data)
 *  preagg  BOLT's pre-aggregated format (perf2bolt -pa -p)
 *  afdo    AutoFDO's text profile (create_llvm_prof --profiler text)
 *  profgen llvm-profgen's unsymbolized profile (--unsymbolized-profile,
 *          --use-offset=false): AutoFDO through LLVM's own converter, in
 *          estimated executions (counts times period / chop)
 *  pprof   pprof's profile.proto, gzip-compressed (go tool pprof): sample
 *          IPs, time, branches per address and the call graph
 * and the human report (hottest edges and functions).
 */
#ifndef EP_EXPORT_H
#define EP_EXPORT_H

#include <stdio.h>

#include "profile.pb-c.h"

enum ep_export_format {
	EP_EXPORT_JSON,
	EP_EXPORT_FDATA,
	EP_EXPORT_PREAGG,
	EP_EXPORT_AFDO,
	EP_EXPORT_PROFGEN,
	EP_EXPORT_PPROF,
};

/* The formats' names in the enum's order, NULL-terminated (an option's
 * choices). */
extern const char *const ep_export_format_names[];

/* "json", "fdata", "preagg", "afdo", "profgen", "pprof"; -1 for anything
 * else. */
int ep_export_parse_format(const char *name);

/* build_id selects one binary of the profile (hex prefix), NULL = the format's
 * default: all binaries for json and pprof; for the single-binary formats the binary
 * with the most samples. Returns 0, or -1 with err saying why (for example a
 * build-id prefix matching no binary). */
int ep_export(const Edgeprof__V1__Profile *profile, enum ep_export_format format,
	      const char *build_id, FILE *out, char *err, size_t errlen);

/* The binary a single-binary format is for: the one whose build-id starts
 * with build_id (case-insensitive, as people type hex), or with none given
 * the one with the most samples, then the most edges. NULL with err. */
const Edgeprof__V1__BinaryProfile *ep_export_select_binary(const Edgeprof__V1__Profile *p,
							   const char *build_id, char *err,
							   size_t errlen);

/* -1 with why when format needs branch records and the binary it is for
 * (as ep_export_select_binary picks it) has IP samples only: a node
 * without a branch-stack PMU (most cloud VMs). 0 otherwise. */
int ep_export_check_branches(const Edgeprof__V1__Profile *profile, enum ep_export_format format,
			     const char *build_id, char *why, size_t len);

struct ep_bat; /* common/elf/elf_bat.h */
/* fdata of bp, a binary written by `llvm-bolt --enable-bat` whose address
 * translation table is bat, in the input binary's terms: its functions and
 * offsets, as perf2bolt writes them from a BAT binary
 * (export_fdata_bat.c). */
int ep_export_fdata_bat(const Edgeprof__V1__Profile *profile, const Edgeprof__V1__BinaryProfile *bp,
			const struct ep_bat *bat, FILE *out, char *err, size_t errlen);

struct ep_profile_mix; /* common/profile/insn_mix.h */

/* ep_export() with the instruction mix of the profile's ranges added to the
 * JSON (mix->bins[i] for profile->binaries[i]); the other formats have no
 * place for it and ignore it. */
int ep_export_mix(const Edgeprof__V1__Profile *profile, enum ep_export_format format,
		  const char *build_id, const struct ep_profile_mix *mix, FILE *out, char *err,
		  size_t errlen);

/* The instruction mix per binary (by type) and of its `top` functions. */
int ep_report_insn_mix(const Edgeprof__V1__Profile *profile, const struct ep_profile_mix *mix,
		       unsigned top, FILE *out);

/* Cycles per instruction from the branch records' cycles: per binary the
 * `top` blocks by cycles and by CPI, and the functions by cycles. */
int ep_report_cpi(const Edgeprof__V1__Profile *profile, unsigned top, FILE *out);

/* Hottest `top` edges and functions of every binary, for people. */
int ep_report(const Edgeprof__V1__Profile *profile, unsigned top, FILE *out);

#endif
