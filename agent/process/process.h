/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The process table: one record per process, all the agent keeps about it.
 * The pipeline counts through it (its mappings, its label set, whether it
 * was sampled since the reconstructor's last flush). A live sample comes
 * here first (ep_process_sampled): the record, the sample's IP resolved in
 * its mappings, and whether /proc is to be read first, from what the
 * record keeps (when the maps were read, the reads left after an exec);
 * the live source's feed does the reading, and forgets a process a while
 * after its exit.
 * Records stay where they are (a pointer holds until the record is
 * removed: by ep_process_forget, ep_process_forget_exited or
 * ep_process_flushed).
 */
#ifndef EP_PROCESS_H
#define EP_PROCESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/resolve/mappings.h"

/* Processes sampled since the last flush, at most: an agent that only
 * writes a file never takes deltas, and a flush is cheap next to that many
 * processes' samples. */
#define EP_SAMPLED_PIDS_MAX 4096

struct ep_process {
	struct ep_mappings maps;
	/* Moves with every change of maps, from the table's counter: unique
	 * across processes and over time, so a reused pid never meets its
	 * predecessor's cached resolutions, and other processes' changes leave
	 * this one's alone. */
	uint64_t generation;
	/* monotonic ns the last read of its maps from /proc began; 0: none
	 * since it started or exec'd */
	uint64_t maps_read_ns;
	uint64_t exit_ns;   /* monotonic ns its exit was seen; 0: running */
	uint64_t cgroup_id; /* the cgroup (v2) it was last seen in; 0: none yet */
	/* monotonic ns of an executable mmap its maps were not read after
	 * (--watch-mmaps: a dlopen); 0: none */
	uint64_t mmap_ns;
	uint32_t pid;
	uint32_t set;	      /* where its counts go: the pipeline's label set, 0 unlabelled */
	uint8_t rereads_left; /* maps reads its samples may still ask for at once (exec) */
	bool execd;	      /* exec'd since it was made: a new program */
	/* its labels are its cgroups' as they are, for good: a child forked
	 * from it has them too, until it is seen moved to another cgroup */
	bool labelled;
	bool sampled;  /* since the last flush: it may have counts pending */
	bool retiring; /* forgotten, but kept until that flush for its set */
};

struct ep_process_table;

struct ep_process_table *ep_process_table_new(void);
void ep_process_table_free(struct ep_process_table *t);

/* The running (or exited, not yet forgotten) process pid, NULL when none. */
struct ep_process *ep_process_find(struct ep_process_table *t, uint32_t pid);
/* The same, made when new (a forgotten one is taken up again with what it
 * still had pending); NULL only when memory runs out. */
struct ep_process *ep_process_get(struct ep_process_table *t, uint32_t pid);
/* The record pid's pending counts go by (its set): a forgotten one's kept
 * for them included; NULL for a pid not known. */
struct ep_process *ep_process_of_counts(struct ep_process_table *t, uint32_t pid);

/* A mapping of pid's, as ep_mappings_add (the process is made if new). */
void ep_process_map(struct ep_process_table *t, uint32_t pid, uint64_t start, uint64_t len,
		    uint64_t pgoff, struct ep_binary *bin, bool anon);
/* The child starts with a copy of the parent's mappings (as of when the
 * parent's were read), its label set and its labels. */
struct ep_process *ep_process_fork(struct ep_process_table *t, uint32_t child_pid,
				   uint32_t parent_pid);
/* exec replaced the address space: no mappings until they are read (the
 * process is made if new); NULL only when memory runs out. */
struct ep_process *ep_process_exec(struct ep_process_table *t, uint32_t pid);
/* The process ended at at_ns. It stays (samples taken before the exit can
 * still be on their way) until ep_process_forget_exited drops it. */
void ep_process_exit(struct ep_process_table *t, uint32_t pid, uint64_t at_ns);
/* Drops the processes that exited before before_ns (their pids not used
 * again since); how many. */
size_t ep_process_forget_exited(struct ep_process_table *t, uint64_t before_ns);
/* Drops a process and its mappings; one sampled since the last flush stays
 * (retiring, without mappings) until then. */
void ep_process_forget(struct ep_process_table *t, uint32_t pid);

/* Why a live process's maps are read from /proc. */
enum ep_maps_read {
	EP_MAPS_AT_EXEC,	 /* a new program's first sample: not at the exec itself */
	EP_MAPS_AT_FIRST_SAMPLE, /* a process running before the agent, or unseen */
	EP_MAPS_UNRESOLVED,	 /* a sample in no known mapping, at most once a second */
	EP_MAPS_AT_MMAP,	 /* --watch-mmaps: new code mapped */
	/* a sample taken after a new program's first read, in none of its
	 * mappings: a library mapped since (dlopen, a few per exec) */
	EP_MAPS_AFTER_EXEC,
	EP_MAPS_READ_KINDS,
	EP_MAPS_NOT_DUE = EP_MAPS_READ_KINDS, /* no read is due */
};

/* A sample of a live process, as the process table takes it. */
struct ep_process_sample {
	uint32_t pid;
	bool kernel; /* its IP is the kernel's */
	uint64_t ip, cgroup_id, time_ns;
};

/* The process of a live sample, made when new (NULL only when memory runs
 * out), its IP in *ip, resolved unless *due says why the process's maps are
 * to be read before the sample is counted (then the caller reads them and
 * resolves it, ep_mappings_resolve_ip):
 * at its first sample (the cgroup it is in noted then), after an
 * executable mmap, when the IP is in none of them (at most once a
 * second, or at once for the reads left after an exec). The live
 * source's policy, from what the record keeps; the source reads. */
struct ep_process *ep_process_sampled(struct ep_process_table *t, const struct ep_process_sample *s,
				      enum ep_maps_read *due, struct ep_sample_ip *ip);
/* p was seen in cgroup (v2) id: its labels are not its parent's any more
 * when that is another one (a runtime moved it, or made it in its cgroup:
 * clone3's CLONE_INTO_CGROUP, of which no move is seen). */
void ep_process_seen_in(struct ep_process *p, uint64_t id);

/* addr of pid as (binary, ELF address): EP_RESOLVE_NO_PROCESS for a pid
 * not known. */
enum ep_resolve_status ep_process_resolve(struct ep_process_table *t, uint32_t pid, uint64_t addr,
					  struct ep_resolved *out);

/* p sampled since the last flush. false when EP_SAMPLED_PIDS_MAX others
 * are (nothing marked: the caller flushes, then marks again). */
bool ep_process_mark_sampled(struct ep_process_table *t, struct ep_process *p);
/* The reconstructor was flushed: nothing is pending any more, and the
 * retiring records go. */
void ep_process_flushed(struct ep_process_table *t);

/* Processes known, forgotten ones kept for their counts not included. */
size_t ep_process_count(const struct ep_process_table *t);
/* Calls fn for every record, retiring ones included (the table must not
 * change meanwhile). */
void ep_process_each(struct ep_process_table *t, void (*fn)(void *ctx, struct ep_process *p),
		     void *ctx);
/* Sets in_use[i] for the index i of every binary a known process maps
 * (exited ones not yet forgotten included): those the registry keeps. */
void ep_process_mark_binaries(struct ep_process_table *t, uint8_t *in_use, size_t n);

#endif
