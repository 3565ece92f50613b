/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Source stage: reads a perf.data file (the format `perf record` writes) as
 * a stream of records, turning each PERF_RECORD_SAMPLE with a branch stack
 * into the shared struct ep_sample_record and passing process events
 * (MMAP/MMAP2, COMM, FORK, EXIT) and the HEADER_BUILD_ID feature section on
 * through callbacks. The file is mapped and read once in order; pages read are given back as
 * it goes, so it is never resident whole.
 */
#ifndef EP_PERF_DATA_H
#define EP_PERF_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bpf/edgeprof_record.h"

/* One perf_event_attr of the file, decoded. */
struct ep_perf_event_desc {
	uint32_t type; /* PERF_TYPE_* */
	uint64_t config;
	uint64_t sample_type;	     /* PERF_SAMPLE_* bits */
	uint64_t branch_sample_type; /* PERF_SAMPLE_BRANCH_* bits */
	uint64_t read_format;
	uint64_t sample_period; /* or frequency when freq is set */
	bool freq;
	bool sample_id_all;
	bool exclude_kernel;
	bool exclude_user;
	bool branch_hw_index;	  /* PERF_SAMPLE_BRANCH_HW_INDEX: stack has hw_idx */
	bool counts_all_branches; /* event counts every completed branch */
	char name[64];		  /* "cycles", "branches", "raw 0x1c4", ... */
};

struct ep_mmap_event {
	uint32_t pid, tid;
	uint64_t start, len, pgoff;
	bool executable; /* PROT_EXEC, or a plain MMAP (which perf only records for code) */
	bool is_mmap2;
	uint32_t prot, flags;
	uint32_t maj, min;
	uint64_t ino;
	uint8_t build_id[EP_BUILD_ID_MAX]; /* MMAP2 with PERF_RECORD_MISC_MMAP_BUILD_ID */
	uint8_t build_id_len;		   /* 0 when the record carries none */
	bool kernel;			   /* cpumode says kernel (the kernel's own maps) */
	const char *filename;
};

struct ep_perf_build_id {
	int32_t pid;
	bool kernel;
	uint8_t build_id[EP_BUILD_ID_MAX];
	uint8_t build_id_len; /* perf pads ids to 20 bytes; this is the real length when known */
	const char *filename;
};

/* Return non-zero from a callback to stop reading (the value is returned). */
struct ep_perf_data_callbacks {
	void *ctx;
	int (*on_event_desc)(void *ctx, const struct ep_perf_event_desc *desc);
	int (*on_build_id)(void *ctx, const struct ep_perf_build_id *bid);
	int (*on_mmap)(void *ctx, const struct ep_mmap_event *ev);
	int (*on_comm)(void *ctx, uint32_t pid, uint32_t tid, const char *comm, bool exec);
	int (*on_fork)(void *ctx, uint32_t pid, uint32_t ppid, uint32_t tid, uint32_t ptid);
	int (*on_exit)(void *ctx, uint32_t pid, uint32_t ppid, uint32_t tid, uint32_t ptid);
	int (*on_sample)(void *ctx, const struct ep_sample_record *rec);
	/* A sample another reader of the same file delivers (see
	 * ep_perf_data_read_part()): everything but the entries is read. */
	int (*on_other_sample)(void *ctx, const struct ep_sample_record *rec);
};

struct ep_perf_data_stats {
	uint64_t file_size;
	uint64_t bytes_read;
	uint64_t records;
	uint64_t samples;
	uint64_t samples_with_branches;
	uint64_t samples_truncated_stack; /* stack longer than EP_MAX_BRANCH_ENTRIES */
	uint64_t mmaps, comms, forks, exits;
	uint64_t lost_records; /* PERF_RECORD_LOST: events the kernel dropped */
	uint64_t other_records;
	/* most bytes of records held at once for time ordering */
	uint64_t hold_bytes_peak;
	/* the HEADER_BUILD_ID table's entries, and those of them not delivered:
	 * past the tables bound (ep_perf_data_set_tables_max) */
	uint64_t build_ids, build_ids_dropped;
	uint64_t tables_max; /* that bound, for the caller's message */
};

/* What one recording's tables may take besides its records (issue 32): its
 * event ids (8 bytes each and their index entry) and the build-id entries
 * delivered to on_build_id (each one's bytes, and what a caller keeps for
 * one). Past it a file's ids are refused (the file is not read) and the
 * build-id entries left are not delivered (counted in the stats). Default
 * EP_PERF_DATA_DEFAULT_TABLES_MIB; the commands' --perf-data-tables-max-mib.
 * Process-wide: set at start, before any file is read. */
#define EP_PERF_DATA_DEFAULT_TABLES_MIB 64
void ep_perf_data_set_tables_max(uint64_t bytes);

/*
 * Reads the whole file, calling back in file order: event descriptions and
 * build-ids first (from the header and feature sections), then the data
 * records. Returns 0 on success. On a malformed or truncated file returns -1
 * with err holding "PATH: byte OFFSET: what is wrong"; everything before
 * that offset has already been delivered, so the caller's aggregate of it
 * stays usable. A callback's non-zero return stops reading and is returned.
 */
int ep_perf_data_read(const char *path, const struct ep_perf_data_callbacks *cb,
		      struct ep_perf_data_stats *stats, char *err, size_t errlen);

/* The same, holding at most hold_max_bytes of records for time ordering
 * (ep_perf_data_read: 256 MiB): past it what is held is ordered and
 * delivered. Records are held as (time, offset) keys, 16 bytes each, and
 * the file behind the reader is not kept resident, so a recording without
 * FINISHED_ROUND markers costs keys, not copies. */
int ep_perf_data_read_capped(const char *path, const struct ep_perf_data_callbacks *cb,
			     uint64_t hold_max_bytes, struct ep_perf_data_stats *stats, char *err,
			     size_t errlen);

/* The same, as one of parts readers of the file that share its samples:
 * every parts-th sample from the part-th (0-based, in delivery order) goes
 * to on_sample, the others to on_other_sample; every other record to every
 * reader, so each sees the same process events in the same order. */
int ep_perf_data_read_part(const char *path, const struct ep_perf_data_callbacks *cb, unsigned part,
			   unsigned parts, struct ep_perf_data_stats *stats, char *err,
			   size_t errlen);

#endif
