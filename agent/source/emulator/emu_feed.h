/* SPDX-License-Identifier: Apache-2.0 */
/* Feeds an emulated run (source stage) into a pipeline: runs a program under
 * user-mode QEMU with the LBR emulator plugin, which samples branch stacks
 * the way the hardware and the BPF program do, and feeds what it wrote
 * through the pipeline like any other source. This is also how a machine
 * without a branch-stack PMU profiles a test run. */
#ifndef EP_EMU_FEED_H
#define EP_EMU_FEED_H

#include <stdbool.h>
#include <stdint.h>

#include "agent/pipeline/pipeline.h"
#include "agent/source/emulator/emu_reader.h"
#include "profile.pb-c.h"

/* What the plugin samples (its arguments). */
struct ep_emu_config {
	const char *event; /* branches | taken | instructions */
	unsigned period, jitter, lbr, seed;
	bool calls_only; /* the record keeps calls and returns only */
	/* also write the run as a `perf record -b` file there (NULL: none) */
	const char *perf_data;
};

struct ep_emu_result {
	int status; /* the program's, as waitpid() gives it */
	struct ep_emu_stats stats;
	/* Ground truth: every edge of the run with its exact count, resolved
	 * like the samples, in model order; complete only when stats.ended.
	 * Free with ep_profile_free(). */
	Edgeprof__V1__Profile *exact;
	uint64_t exact_unresolved; /* edges whose source is in no known binary */
};

/* The program to run, found like the shell finds it (malloc'd); NULL when
 * missing. */
char *ep_emu_find_program(const char *name);

/* Runs cmd (NULL-terminated) under QEMU and feeds its samples and mappings
 * into pipeline. 0 once the program ran (a damaged stream is logged and what
 * came before it kept), or -1 (logged) when it could not be run; out is
 * filled either way and freed with ep_emu_result_free(). */
int ep_feed_emulated(const struct ep_emu_config *cfg, char *const *cmd,
		     struct ep_pipeline *pipeline, struct ep_emu_result *out);
void ep_emu_result_free(struct ep_emu_result *r);

#endif
