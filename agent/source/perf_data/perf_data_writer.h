/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Writes a perf.data file as `perf record -b` would: one event with a branch
 * stack, COMM and MMAP2 records, samples, and the feature sections perf,
 * perf2bolt and create_llvm_prof read (build-ids among them). The reader's
 * counterpart (perf_data.h): a recording made without a PMU (the emulator)
 * can go to the peers' tools. Records are streamed to the file as they come;
 * the header and the feature sections are written at ep_perf_writer_close().
 */
#ifndef EP_PERF_DATA_WRITER_H
#define EP_PERF_DATA_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "bpf/edgeprof_record.h"

/* The event the samples claim to come from, as perf_event_attr holds it. */
struct ep_perf_writer_event {
	uint32_t type; /* PERF_TYPE_* */
	uint64_t config;
	uint64_t period;
	uint64_t branch_sample_type; /* PERF_SAMPLE_BRANCH_* (privilege bits included) */
	const char *name;	     /* HEADER_EVENT_DESC's name: "branches", ... */
	const char *cpuid;	     /* HEADER_CPUID, e.g. "GenuineIntel,6,85,4" */
	const char *arch;	     /* HEADER_ARCH as uname -m, a static string; NULL: "x86_64" */
	const char *cmdline;	     /* HEADER_CMDLINE (one string), may be NULL */
	uint32_t nr_cpus;
};

struct ep_perf_writer;

/* NULL with err ("PATH: why") when the file cannot be created. */
struct ep_perf_writer *ep_perf_writer_open(const char *path, const struct ep_perf_writer_event *ev,
					   char *err, size_t errlen);

/* A process's name (PERF_RECORD_COMM with the exec bit). */
void ep_perf_writer_comm(struct ep_perf_writer *w, uint32_t pid, uint32_t tid, const char *comm,
			 uint64_t time);

struct ep_perf_writer_mmap {
	uint32_t pid, tid;
	uint64_t start, len, pgoff;
	uint32_t maj, min, prot, flags;
	uint64_t ino;
	const char *path;
	const uint8_t *build_id; /* NULL when unknown; else it goes to HEADER_BUILD_ID */
	size_t build_id_len;
};

/* An executable mapping (PERF_RECORD_MMAP2). */
void ep_perf_writer_mmap2(struct ep_perf_writer *w, const struct ep_perf_writer_mmap *m,
			  uint64_t time);

/* A sample: ip, pid/tid, time, cpu, period and the branch stack (newest
 * first, flags in perf_branch_entry's layout). */
void ep_perf_writer_sample(struct ep_perf_writer *w, const struct ep_sample_record *rec);

/* Ends the data, writes the feature sections and the header, closes and
 * frees w. 0, or -1 with err when any write failed (the file is then
 * incomplete). */
int ep_perf_writer_close(struct ep_perf_writer *w, char *err, size_t errlen);

#endif
