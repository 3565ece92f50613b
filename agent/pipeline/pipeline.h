/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The stages wired together: every source (perf.data import, the BPF ring
 * buffer, the emulator) feeds process events and samples here, and gets a
 * profile back. resolve -> reconstruct -> chop -> aggregate.
 */
#ifndef EP_PIPELINE_H
#define EP_PIPELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/aggregate/aggregate.h"
#include "agent/chop/chop.h"
#include "agent/decode/decoder_cache.h"
#include "agent/process/process.h"
#include "agent/reconstruct/reconstruct.h"
#include "agent/resolve/binary.h"
#include "profile.pb-c.h"

#define EP_CHOP_AUTO (-1)
/* containers (label sets) counted apart at once; more share the unlabelled set */
#define EP_MAX_LABEL_SETS 256

struct ep_pipeline_config {
	/* C of SPEC step 4; 0 = whole stack; EP_CHOP_AUTO = the hardware's
	 * stack size, i.e. the longest stack seen. */
	int chop;
	/* the event counts taken branches only: C counts taken branches, each
	 * with the not-taken ones before it (ep_chop_taken), and AUTO is N-1 */
	bool chop_taken;
	enum ep_range_mode range_mode;
	bool append_trigger;
	bool calls_only; /* call-graph mode: entries are calls and returns only */
	/* agent --stacks: distinct call stacks per profile, per label set
	 * (0: EP_STACKS_MAX) */
	size_t max_stacks;
};

void ep_pipeline_config_default(struct ep_pipeline_config *cfg);

struct ep_pipeline;

/* binaries is borrowed: the caller registers --binary files and --symfs on
 * it first and frees it after the pipeline. */
struct ep_pipeline *ep_pipeline_new(const struct ep_pipeline_config *cfg,
				    struct ep_binary_registry *binaries);
void ep_pipeline_free(struct ep_pipeline *p);
/* The registry the pipeline was made with. */
struct ep_binary_registry *ep_pipeline_binaries(const struct ep_pipeline *p);

/* A build-id the recording names for a file (perf's HEADER_BUILD_ID). */
void ep_pipeline_note_build_id(struct ep_pipeline *p, const char *path, const uint8_t *build_id,
			       size_t len);
/* An executable mapping; build_id NULL when the event carries none (then a
 * noted build-id for the path is used). */
void ep_pipeline_mmap(struct ep_pipeline *p, uint32_t pid, uint64_t start, uint64_t len,
		      uint64_t pgoff, const char *path, const uint8_t *build_id,
		      size_t build_id_len);
/* A live process's mapping: the file is read at open_path, named path. */
void ep_pipeline_mmap_at(struct ep_pipeline *p, uint32_t pid, uint64_t start, uint64_t len,
			 uint64_t pgoff, const char *path, const char *open_path);
/* The same for a file already opened, st its stat(): false, adding nothing,
 * when none is (then ep_pipeline_mmap_at reads it). No system call. */
bool ep_pipeline_mmap_known(struct ep_pipeline *p, uint32_t pid, uint64_t start, uint64_t len,
			    uint64_t pgoff, const char *path, const struct stat *st);
/* Executable memory of no file (JIT output, [vdso]). */
void ep_pipeline_mmap_anon(struct ep_pipeline *p, uint32_t pid, uint64_t start, uint64_t len);
void ep_pipeline_fork(struct ep_pipeline *p, uint32_t child_pid, uint32_t parent_pid);
void ep_pipeline_exec(struct ep_pipeline *p, uint32_t pid);
/* The process ended. Samples may still arrive after it in a recording, so
 * its mappings stay until its pid is used again (or it is forgotten). */
void ep_pipeline_exit(struct ep_pipeline *p, uint32_t pid);
/* Where pid's counts go from now on: the set with these labels (a
 * container), kept apart in the deltas; NULL or empty labels: the
 * unlabelled set. Forked children follow their parent. */
void ep_pipeline_label_pid(struct ep_pipeline *p, uint32_t pid, const Edgeprof__V1__Labels *labels);
/* The same for a process of the pipeline's table (ep_pipeline_process_table). */
void ep_pipeline_label(struct ep_pipeline *p, struct ep_process *pr,
		       const Edgeprof__V1__Labels *labels);
/* Label sets alive (the unlabelled one not counted). */
size_t ep_pipeline_label_sets(const struct ep_pipeline *p);

/* Drops an exited process's mappings once none of its samples can still
 * arrive (the live agent: a while after the exit event). */
void ep_pipeline_forget(struct ep_pipeline *p, uint32_t pid);
size_t ep_pipeline_processes(const struct ep_pipeline *p);
/* The processes the pipeline counts through: the live source's feed keeps
 * its /proc reading and forgetting there. */
struct ep_process_table *ep_pipeline_process_table(struct ep_pipeline *p);

void ep_pipeline_sample(struct ep_pipeline *p, const struct ep_sample_record *rec);
/* The same for a sample whose process the caller has from the table
 * (ep_process_sampled: NULL when none could be made), and its IP resolved
 * in that process's mappings as they are (ep_mappings_resolve_ip). */
void ep_pipeline_sample_of(struct ep_pipeline *p, const struct ep_sample_record *rec,
			   struct ep_process *pr, const struct ep_sample_ip *ip);
/* A sample another pipeline counts (a recording read by several threads,
 * each counting a share of its samples): only what later samples depend
 * on is kept, so each pipeline counts its share as one pipeline would. */
void ep_pipeline_skip_sample(struct ep_pipeline *p, const struct ep_sample_record *rec);

/* Where the cycles come from (SamplingConfig.cycles_*): set by the live
 * agent from what agent --cycles found, again as that changes. The strings
 * are static. */
struct ep_pipeline_cycles {
	/* "cycles_event", "cpu_clock" (IP samples), "branch_records"; NULL:
	 * none asked for (the branch records' cycles are then still said) */
	const char *source;
	const char *unit;	 /* "cycles" or "ns" */
	uint64_t period, jitter; /* the IP-sampling event's */
	/* the branch event's mean period: IP samples' cycles are scaled by
	 * C / it to the counts' scale (SamplingConfig.cycles_scale) */
	uint64_t branch_period;
};
void ep_pipeline_set_cycles(struct ep_pipeline *p, const struct ep_pipeline_cycles *c);
/* One IP sample of the cycles event (agent --cycles): its period of
 * cycles at its address, resolved like a sample's IP. */
void ep_pipeline_cycles_sample(struct ep_pipeline *p, const struct ep_cycles_record *rec);
/* Cycles records dropped before they reached us (their ring buffer full). */
void ep_pipeline_add_cycles_lost(struct ep_pipeline *p, uint64_t lost);

/* Resolves a runtime address of pid through the mappings seen so far. */
enum ep_resolve_status ep_pipeline_resolve(struct ep_pipeline *p, uint32_t pid, uint64_t addr,
					   struct ep_resolved *out);

/* Records dropped before they reached us (PERF_RECORD_LOST, ring buffer). */
void ep_pipeline_add_lost(struct ep_pipeline *p, uint64_t lost);
/* Live processes that exited before their maps or binaries could be read
 * (Stats.processes_gone), counted rather than logged one by one. */
void ep_pipeline_add_gone(struct ep_pipeline *p, uint64_t gone);

/* The profile of everything so far, one BinaryProfile per binary (label
 * sets summed), with stats and config filled in
 * (config.source and config.event are left for the caller). Free with
 * ep_profile_free(). */
Edgeprof__V1__Profile *ep_pipeline_profile(struct ep_pipeline *p);

/* The profile of pipelines that each counted a share of one recording's
 * samples (and skipped the others): byte for byte the one a single
 * pipeline would have built. Their own binary registries must have been
 * given the same files and seen the same mappings (so binary indexes
 * agree); label sets are not merged. */
Edgeprof__V1__Profile *ep_pipeline_profile_merged(struct ep_pipeline *const *ps, size_t n);

/* What was counted since the previous delta (stats too), then forgets it:
 * the streamer's unit, one BinaryProfile per binary and label set (with its
 * labels). Once deltas are taken, ep_pipeline_profile() holds only the
 * counts since the last one (stats stay totals). */
Edgeprof__V1__Profile *ep_pipeline_take_delta(struct ep_pipeline *p);

/* The reconstructor, for gap observers (debugging, oracle tests). */
struct ep_reconstructor *ep_pipeline_reconstructor(struct ep_pipeline *p);
/* The decoders the stages share, to look at a reconstructed gap's code. */
struct ep_decoder_cache *ep_pipeline_decoders(struct ep_pipeline *p);

unsigned ep_pipeline_chop_used(const struct ep_pipeline *p);

#endif
