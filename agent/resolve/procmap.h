/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Resolve stage, part 2: what each process had mapped where, so a runtime
 * address becomes (binary, ELF virtual address). PIE, ASLR, shared libraries
 * and containers all land on the same binary this way.
 */
#ifndef EP_PROCMAP_H
#define EP_PROCMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/resolve/binary.h"

struct ep_procmap;

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

struct ep_procmap *ep_procmap_new(void);
void ep_procmap_free(struct ep_procmap *pm);

/* A new mapping of [start, start+len) at file offset pgoff; bin NULL when the
 * file is unknown. Replaces whatever overlapped it. */
void ep_procmap_add(struct ep_procmap *pm, uint32_t pid, uint64_t start, uint64_t len,
		    uint64_t pgoff, struct ep_binary *bin);
/* Executable memory of no file (JIT output, [vdso]): its addresses resolve
 * to EP_RESOLVE_ANON_CODE, so they are known not to need a maps re-read. */
void ep_procmap_add_anon(struct ep_procmap *pm, uint32_t pid, uint64_t start, uint64_t len);
/* The child starts with a copy of the parent's mappings. */
void ep_procmap_fork(struct ep_procmap *pm, uint32_t child_pid, uint32_t parent_pid);
/* exec replaced the address space: forget the pid's mappings. */
void ep_procmap_exec(struct ep_procmap *pm, uint32_t pid);
/* The process ended. Samples may still arrive after it in a recording, so the
 * mappings stay until the pid is reused (fork/exec). */
void ep_procmap_exit(struct ep_procmap *pm, uint32_t pid);

/* Drops a process and its mappings (the live agent, a while after exit). */
void ep_procmap_forget(struct ep_procmap *pm, uint32_t pid);
size_t ep_procmap_processes(const struct ep_procmap *pm);
/* Sets in_use[i] for the index i of every binary a known process maps
 * (exited ones not yet forgotten included): those the registry keeps. */
void ep_procmap_mark_binaries(const struct ep_procmap *pm, uint8_t *in_use, size_t n);
/* pid's mappings' generation: it changes with every add, fork and exec of
 * pid, and a pid forgotten and seen again never gets an old one back, so a
 * resolution cached under (pid, generation) is valid while it stays the
 * same. Per process: other processes' events (every exec on a busy node)
 * leave pid's cached resolutions alone. 0 for a pid not known (whose
 * addresses all resolve to EP_RESOLVE_NO_PROCESS). */
uint64_t ep_procmap_generation(struct ep_procmap *pm, uint32_t pid);
/* Moves whenever any process's generation does: while it stays the same,
 * a generation asked for before still holds, without asking again (the
 * hot path reads it through the pointer, once per sample). */
const uint64_t *ep_procmap_changes(const struct ep_procmap *pm);

enum ep_resolve_status ep_procmap_resolve(struct ep_procmap *pm, uint32_t pid, uint64_t addr,
					  struct ep_resolved *out);

/* One executable mapping of a /proc/PID/maps text. */
struct ep_maps_entry {
	uint64_t start, end, offset;
	const char *path; /* "/..." for a file, else "" or a pseudo name ("[vdso]") */
	bool deleted;	  /* the file was deleted: " (deleted)" is cut off path */
};

/* The next executable mapping of text[*pos..len) (a /proc/PID/maps text,
 * read whole): true with *out, *pos past its line; false at the end. The
 * path is cut out of text in place (the newline becomes its NUL), so text
 * is written to and out->path points into it. Lines that do not parse are
 * skipped, and so is a last line without its newline (a read cut short). */
bool ep_maps_next_exec(char *text, size_t len, size_t *pos, struct ep_maps_entry *out);

#endif
