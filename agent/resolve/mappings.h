/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Resolve stage, part 2: what one process has mapped where, so a runtime
 * address becomes (binary, ELF virtual address). PIE, ASLR, shared libraries
 * and containers all land on the same binary this way. The process table
 * (agent/process/process.h) keeps one set of mappings per process.
 */
#ifndef EP_MAPPINGS_H
#define EP_MAPPINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/resolve/binary.h"

enum ep_resolve_status {
	EP_RESOLVE_OK = 0,
	EP_RESOLVE_KERNEL,	   /* a kernel address */
	EP_RESOLVE_NO_PROCESS,	   /* pid never seen */
	EP_RESOLVE_NO_MAPPING,	   /* address in no known mapping of the pid */
	EP_RESOLVE_UNKNOWN_BINARY, /* mapped, but its file was not found */
	EP_RESOLVE_NOT_LOADED,	   /* file offset outside every PT_LOAD segment */
	EP_RESOLVE_ANON_CODE,	   /* code of no file: JIT output, [vdso] */
};

struct ep_resolved {
	struct ep_binary *bin;
	uint64_t vaddr;
	/* The runtime range [map_start, map_end) this came from: callers resolve
	 * neighbouring addresses of one mapping without another lookup. */
	uint64_t map_start, map_end;
	int64_t vaddr_bias; /* vaddr = runtime address + vaddr_bias inside the map */
};

struct ep_mapping {
	uint64_t start, end, pgoff;
	struct ep_binary *bin; /* NULL: the file is unknown, or none (anon) */
	bool anon;	       /* code of no file */
};

/* One process's executable mappings, sorted and non-overlapping. Zeroed is
 * empty. */
struct ep_mappings {
	struct ep_mapping *v;
	size_t n, cap;
	size_t last_hit; /* most addresses fall in the mapping of the one before */
};

/* A new mapping of [start, start+len) at file offset pgoff; bin NULL when
 * the file is unknown; anon: executable memory of no file (JIT output,
 * [vdso]), whose addresses resolve to EP_RESOLVE_ANON_CODE so they are known
 * not to need a maps re-read. Replaces whatever overlapped it. 0, or -1 when
 * nothing was added (an empty or wrapping range, no memory). */
int ep_mappings_add(struct ep_mappings *m, uint64_t start, uint64_t len, uint64_t pgoff,
		    struct ep_binary *bin, bool anon);
/* dst becomes a copy of src (a forked child's); 0, or -1 when memory ran
 * out (dst is then empty). */
int ep_mappings_copy(struct ep_mappings *dst, const struct ep_mappings *src);
/* Empty again, the memory kept (an exec). */
void ep_mappings_clear(struct ep_mappings *m);
void ep_mappings_free(struct ep_mappings *m);
/* Sets in_use[i] for the index i of every binary mapped. */
void ep_mappings_mark_binaries(const struct ep_mappings *m, uint8_t *in_use, size_t n);

/* addr as (binary, ELF address); never EP_RESOLVE_NO_PROCESS. */
enum ep_resolve_status ep_mappings_resolve(struct ep_mappings *m, uint64_t addr,
					   struct ep_resolved *out);

/* A sample's IP, and where a process's mappings place it. */
struct ep_sample_ip {
	uint64_t addr;
	bool kernel; /* the sample says it is the kernel's: not resolved */
	enum ep_resolve_status status;
	uint32_t bin; /* ep_binary_index, when status is EP_RESOLVE_OK */
	uint64_t vaddr;
};
/* ip->addr resolved in m (a kernel IP is left as it is). */
void ep_mappings_resolve_ip(struct ep_mappings *m, struct ep_sample_ip *ip);

#endif
