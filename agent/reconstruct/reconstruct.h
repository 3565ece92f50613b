/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reconstruct stage (SPEC step 3): turns a sample's taken-branch trace into
 * the full branch trace by decoding the straight-line code between
 * consecutive entries; every conditional branch met there was executed and
 * not taken. An impossible straight line cuts the trace (counted, never
 * guessed). With a branch-counting event the not-taken branches between the
 * newest entry's target and the sample IP are appended, so the trace ends at
 * the branch that triggered the sample.
 */
#ifndef EP_RECONSTRUCT_H
#define EP_RECONSTRUCT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/decode/decoder_cache.h"
#include "agent/process/process.h"
#include "bpf/edgeprof_record.h"
#include "common/decode/decoder.h"

#define EP_NO_BIN   UINT32_MAX
#define EP_NO_RANGE UINT32_MAX

/* One branch of a full branch trace, in the binary that holds it. */
struct ep_trace_branch {
	uint32_t bin;	    /* binary index (ep_binary_index), EP_NO_BIN when unknown */
	uint32_t site;	    /* site in that binary's decoder */
	uint32_t range;	    /* split range ending at this branch; EP_NO_RANGE after a cut */
	uint32_t to_bin;    /* taken: binary of the target, EP_NO_BIN when unknown */
	uint64_t to_vaddr;  /* taken: target address in to_bin */
	uint64_t gap_start; /* taken, after a consistent gap: where the gap began */
	/* taken, after a consistent gap: the gap's instructions (what the
	 * entry's cycles measured), and those cycles (0: none recorded) */
	uint32_t gap_insns;
	uint32_t cycles;
	uint8_t kind; /* enum ep_branch_kind of the site */
	bool taken;
	bool mispredicted;
	bool cut_before; /* the trace is broken right before this branch */
};

struct ep_trace {
	struct ep_trace_branch *branches; /* oldest first */
	size_t n;
	size_t cap;
	size_t last_cut; /* index of the last branch with cut_before (0 when none) */
};

/* Counters of everything reconstruction saw; the profile's Stats. */
struct ep_reconstruct_stats {
	uint64_t samples;
	uint64_t samples_with_branches;
	uint64_t branch_entries;
	uint64_t branch_entries_user;
	uint64_t branch_entries_kernel;
	uint64_t branch_entries_unresolved;
	uint64_t gaps;
	uint64_t gaps_inconsistent;
	uint64_t gaps_unknown_code;
	uint64_t gaps_backwards; /* of the inconsistent: end before start or > 1 MiB */
	uint64_t entries_mismatched;
	uint64_t entries_duplicate;
	uint64_t trigger_appended;
	uint64_t trigger_inconsistent;
	/* entries worked out rather than remembered: what a mapping change of
	 * the sample's process (and only of it) costs again */
	uint64_t entries_computed;
	/* ep_reconstructor_flush() calls: each walks the whole entry memo */
	uint64_t flushes;
	uint64_t memo_entries; /* the memo's size: it grows with what is seen */
};

struct ep_reconstructor;

/* decoders is borrowed: the pipeline owns them (aggregate reads the same
 * decoders' sites and ranges). */
struct ep_reconstructor *ep_reconstructor_new(struct ep_decoder_cache *decoders);
void ep_reconstructor_free(struct ep_reconstructor *r);

/* Whether to extend traces to the sample IP for branch-counting events
 * (default true). Off reproduces the peers' method. */
void ep_reconstructor_set_append_trigger(struct ep_reconstructor *r, bool append);
/* Call-graph mode: the entries are only calls and returns (the hardware's
 * call filter), so the code between them is not a straight line: each entry
 * is counted as a taken edge, no gap is walked, no range counted. A record
 * flagged EP_SAMPLE_CALLS_ONLY is read this way whatever this says. */
void ep_reconstructor_set_calls_only(struct ep_reconstructor *r, bool calls_only);

/* Fills trace with the sample's full branch trace. Returns the number of
 * branches (0 for a sample without a usable stack). proc: the sampled
 * process, whose mappings its entries resolve through (the resolve stage,
 * agent/resolve/mappings.h), remembered under its generation; NULL when
 * it is not known (its entries then resolve to nothing). */
size_t ep_reconstruct(struct ep_reconstructor *r, const struct ep_sample_record *rec,
		      struct ep_process *proc, struct ep_trace *trace);

/* Debugging and oracle tests: called for every gap with its runtime ends,
 * the binary and ELF addresses when both ends resolved to one binary
 * (bin == EP_NO_BIN otherwise), and whether it reconstructed. */
struct ep_gap_report {
	uint64_t sample; /* 1-based sequence number of the sample */
	uint32_t pid;
	uint64_t start, end; /* runtime: previous entry's target, this entry's source */
	uint32_t bin;
	uint64_t start_vaddr, end_vaddr;
	bool consistent;
	const char *why; /* when not consistent */
};
typedef void (*ep_gap_observer)(void *ctx, const struct ep_gap_report *gap);
void ep_reconstructor_set_gap_observer(struct ep_reconstructor *r, ep_gap_observer fn, void *ctx);

/* The counts so far (entries reconstructed by ep_reconstruct_counted() are
 * added up here when asked). */
const struct ep_reconstruct_stats *ep_reconstructor_stats(struct ep_reconstructor *r);

/* Forgets the remembered entries and the resolution cached for binaries
 * with evicted[i] set (flushed before: none has pending counts): their
 * indexes may name other binaries from now on. */
void ep_reconstructor_forget_binaries(struct ep_reconstructor *r, const uint8_t *evicted, size_t n);

/* A part of a full branch trace: steps[0..nsteps) passed not taken (oldest
 * first) in binary bin, then branch (taken or not; NULL when none). */
struct ep_span {
	const struct ep_walk_step *steps;
	const struct ep_trace_branch *branch;
	uint32_t nsteps;
	uint32_t bin;
	bool mispredicted; /* branch's, from the sample (branch->mispredicted is not) */
	/* branch's cycles from the sample(s) (branch->cycles is not), summed
	 * over the times it is counted, and how many of those times had any:
	 * they go to the range ending at branch when that range is counted */
	uint64_t cycles, cycled;
};

/* What one sample counts under a chop, newest span first: the trace's
 * newest branches, never reaching back over a cut (ep_chop()'s rule), less
 * those handed to the sink. Under a chop the oldest branch counted is
 * always the last span's first. */
struct ep_spans {
	struct ep_span items[EP_MAX_BRANCH_ENTRIES + 1]; /* an entry each, and the trigger's */
	size_t n;
	size_t branches; /* counted, the sink's included */
};

/* Where entries that ep_reconstruct_counted() counts whole go: each is
 * remembered with its count and handed over in bulk (times times, its
 * branch mispredicted of them) when its memory is reused or on
 * ep_reconstructor_flush(); pid is the sample's. */
typedef void (*ep_span_sink)(void *ctx, uint32_t pid, const struct ep_span *span, uint64_t times,
			     uint64_t mispredicted);
/* Without a sink every span is handed out in ep_spans. */
void ep_reconstructor_set_span_sink(struct ep_reconstructor *r, ep_span_sink fn, void *ctx);
/* Hands every count held to the sink: before the counts are read, and
 * before a pid's counts go elsewhere. */
void ep_reconstructor_flush(struct ep_reconstructor *r);

/*
 * ep_reconstruct() and ep_chop() in one pass that builds no trace: the
 * entries' remembered outcomes are read from the newest back, and only as
 * far as the chop (C branches, 0 = all) counts. The spans point into the
 * reconstructor and the decoders, valid until the next call. false when
 * the sample needs the full way (call-graph mode, a gap observer, an entry
 * that cannot be remembered): then nothing of it was counted.
 */
bool ep_reconstruct_counted(struct ep_reconstructor *r, const struct ep_sample_record *rec,
			    struct ep_process *proc, unsigned chop, struct ep_spans *out);

void ep_trace_free(struct ep_trace *trace);

#endif
