/* SPDX-License-Identifier: Apache-2.0 */
/* The perf.data file format as the perf tool writes it
 * (tools/perf/util/header.h): not in the kernel's uapi headers. Shared by
 * the reader (perf_data.c) and the writer (perf_data_writer.c). */
#ifndef EP_PERF_DATA_FORMAT_H
#define EP_PERF_DATA_FORMAT_H

#include <stdint.h>

#define EP_PERF_MAGIC2 "PERFILE2"

/* feature sections, by bit number in the header's features bitmap */
#define EP_PERF_FEAT_BUILD_ID	  2
#define EP_PERF_FEAT_HOSTNAME	  3
#define EP_PERF_FEAT_OSRELEASE	  4
#define EP_PERF_FEAT_VERSION	  5
#define EP_PERF_FEAT_ARCH	  6
#define EP_PERF_FEAT_NRCPUS	  7
#define EP_PERF_FEAT_CPUID	  9
#define EP_PERF_FEAT_CMDLINE	  11
#define EP_PERF_FEAT_EVENT_DESC	  12
#define EP_PERF_FEAT_BRANCH_STACK 15
#define EP_PERF_FEATURE_BITS	  256

#ifndef PERF_RECORD_MISC_MMAP_BUILD_ID
#define PERF_RECORD_MISC_MMAP_BUILD_ID (1 << 14)
#endif
/* a build-id record of the BUILD_ID section that carries its size */
#define EP_PERF_MISC_BUILD_ID_SIZE (1 << 15)
/* perf tool records (not the kernel's): flush marker between buffer reads */
#define EP_PERF_RECORD_FINISHED_ROUND 68

struct ep_perf_file_section {
	uint64_t offset, size;
};

struct ep_perf_file_header {
	char magic[8];
	uint64_t size;
	uint64_t attr_size;
	struct ep_perf_file_section attrs, data, event_types;
	uint64_t features[EP_PERF_FEATURE_BITS / 64];
};

#endif
