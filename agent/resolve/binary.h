/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Resolve stage, part 1: the profiled binaries on disk. Opens ELF files with
 * libelf, reads their build-id, loadable segments (file offset <-> virtual
 * address), executable code and functions (common/elf/elf_symbols.h, as the
 * collector reads them). A registry finds the file for a mapping seen at
 * run time: by build-id first, by path otherwise.
 *
 * binary.c reads one file, binary_registry.c finds and counts them,
 * binary_evict.c forgets the ones no longer needed (binary_internal.h is
 * what they share).
 */
#ifndef EP_BINARY_H
#define EP_BINARY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "common/decode/code_segment.h"
#include "common/elf/elf_note.h"
#include "common/elf/elf_symbols.h"
#include "common/util/arch.h"

struct ep_binary;
struct ep_binary_registry;

struct ep_binary_registry *ep_binreg_new(void);
void ep_binreg_free(struct ep_binary_registry *reg);

/* --binary FILE: a file that may be any of the recorded binaries. Returns 0,
 * or -1 with err naming the file and the problem (missing, not ELF, ...). */
int ep_binreg_add_file(struct ep_binary_registry *reg, const char *path, char *err, size_t errlen);
/* A registry with reg's --binary files (opened again, same order, so same
 * indexes) and settings, and nothing looked up yet: for another thread
 * reading the same recording. NULL with err when a file cannot be opened. */
struct ep_binary_registry *ep_binreg_clone(const struct ep_binary_registry *reg, char *err,
					   size_t errlen);
/* --symfs DIR: recorded paths are looked up under DIR first. */
void ep_binreg_set_symfs(struct ep_binary_registry *reg, const char *dir);
/* Binaries opened from now on keep only where their code lies, and read it
 * at the first ep_binary_code_segments() (from the same file: same device,
 * inode, size and mtime, else none). For profiles that never decode (IP
 * samples only), whose code copies would be memory for nothing. */
void ep_binreg_set_lazy_code(struct ep_binary_registry *reg, bool lazy);

/* What reading one binary may cost (common/elf/elf_budget.h): its
 * executable code copied, in all (never more than the file holds, however
 * many segments cover its bytes), and its tables (libelf's headers, the
 * symbol and string tables, relocations, notes read) with the symbols and
 * names kept. Past them code is cut short (its branches unresolved, as for
 * a file gone), tables are not read and symbols not kept; a file whose
 * header counts alone are past the tables bound is not opened. Each such
 * binary is counted (ep_binreg_stats) and the first few said. Defaults:
 * EP_ELF_DEFAULT_CODE_MIB, EP_ELF_DEFAULT_TABLES_MIB; messages name
 * --binary-code-max-mib and --binary-symbols-max-mib. 0 keeps a bound as
 * it is. */
void ep_binreg_set_limits(struct ep_binary_registry *reg, uint64_t code_bytes,
			  uint64_t table_bytes);

/* What every binary held may cost together (0, the default: no bound):
 * their code copies, symbols and names, however many processes map them.
 * A binary opened when the others leave less than its own limits is read
 * as far as what they leave (said and counted like its own limits); one
 * opened when they leave nothing is not read (counted as refused), and
 * tried again at its next lookup, evictions making room. */
#define EP_BINREG_DEFAULT_HELD_MIB 160
void ep_binreg_set_held_max(struct ep_binary_registry *reg, uint64_t bytes);
uint64_t ep_binreg_held_max(const struct ep_binary_registry *reg);

/* Since the registry was made: files under /proc/PID/ that could not be
 * opened, of those the ones whose process had exited, and the last
 * failure's message (empty when none). */
struct ep_binreg_proc_failures {
	uint64_t failed, gone;
	char last[512];
};
void ep_binreg_proc_failures(const struct ep_binary_registry *reg,
			     struct ep_binreg_proc_failures *out);

/*
 * The binary behind a mapping of recorded_path (as the recording names it)
 * with build_id (NULL/0 when unknown). Order: a --binary file with that
 * build-id; a --binary file whose path or basename matches; symfs/recorded
 * path; the recorded path itself. A file found by path whose build-id differs
 * from the recorded one is still used but warned about once. Returns NULL
 * (warned once per path) when nothing readable is found. The same file is
 * returned for every lookup that resolves to it.
 */
struct ep_binary *ep_binreg_lookup(struct ep_binary_registry *reg, const char *recorded_path,
				   const uint8_t *build_id, size_t build_id_len);

/* The same, for a live process: the file is opened at open_path (for
 * example /proc/PID/root/PATH, so binaries inside containers are found) but
 * named recorded_path. A file under /proc/PID/ that cannot be opened is
 * counted (ep_binreg_proc_failures), not logged: on a busy node processes
 * exit before their maps are read all the time, and a path that fails
 * fails again at each maps re-read. */
struct ep_binary *ep_binreg_lookup_at(struct ep_binary_registry *reg, const char *recorded_path,
				      const char *open_path, const uint8_t *build_id,
				      size_t build_id_len);

/* The binary already opened from the file st describes (device, inode, size,
 * mtime), named recorded_path if it has no name yet; NULL when none is, or
 * when --binary or --symfs files take precedence (then ep_binreg_lookup_at
 * decides). Costs no system call: a live process's mapping of a known file
 * is one stat() of it. */
struct ep_binary *ep_binreg_known(struct ep_binary_registry *reg, const char *recorded_path,
				  const struct stat *st);

/* Indexes in use are 0..count-1; after ep_binreg_evict() some of them
 * may hold no binary (NULL), until a binary opened later takes one. */
size_t ep_binreg_count(const struct ep_binary_registry *reg);
struct ep_binary *ep_binreg_at(const struct ep_binary_registry *reg, size_t index);

/*
 * Forgetting binaries: a node runs thousands of short-lived programs (a
 * build machine's compilers and test binaries, deleted files), and a
 * registry that kept each one read would grow for months. The holders of
 * binary indexes (pipelines: mappings, decoders, counters) register as
 * users; an eviction asks each which binaries it still needs, evicts the
 * others that no lookup asked for since the previous eviction, and tells
 * each user which indexes to forget before their binaries are freed. A
 * binary met again later is read again (found by its file, named by its
 * build-id as before).
 */
struct ep_binreg_user {
	/* sets in_use[i] for each binary i still needed: mapped by a process
	 * it knows, or with counts not yet taken out (sent or written) */
	void (*mark)(void *ctx, uint8_t *in_use, size_t n);
	/* evicted[i] set: binary i is going, and its index may be given to
	 * another binary later: drop everything kept under it */
	void (*forget)(void *ctx, const uint8_t *evicted, size_t n);
	void *ctx;
};
/* 0, or -1 when memory runs out (then nothing is ever evicted). */
int ep_binreg_add_user(struct ep_binary_registry *reg, const struct ep_binreg_user *user);
void ep_binreg_remove_user(struct ep_binary_registry *reg, void *ctx);

/* Evicts the binaries no user needs that were not looked up since the
 * previous call (so idle for at least the time between two calls: the
 * agent calls it after each batch), and then, while the binaries held take
 * more than max_bytes (0: no bound), the least recently looked up of the
 * others no user needs. --binary files are never evicted. Returns how
 * many were evicted. */
size_t ep_binreg_evict(struct ep_binary_registry *reg, uint64_t max_bytes);

struct ep_binreg_stats {
	uint64_t opened;  /* binaries read, re-reads included */
	uint64_t evicted; /* binaries forgotten */
	/* opened again after their eviction (recent evictions only: a
	 * bounded table of their build-ids) */
	uint64_t reread;
	uint64_t held;	     /* binaries in memory now */
	uint64_t bytes_held; /* their code copies, symbols and names */
	/* binaries past ep_binreg_set_limits' bounds: read in part, or (of
	 * those) refused, and the last one's message */
	uint64_t limited, limited_refused;
	char limited_last[512];
};
void ep_binreg_stats(const struct ep_binary_registry *reg, struct ep_binreg_stats *out);

/* Dense index of the binary inside its registry (0..count-1). */
uint32_t ep_binary_index(const struct ep_binary *bin);
/* Path of the file that was opened. */
const char *ep_binary_path(const struct ep_binary *bin);
/* Path under which the recording named it (first lookup), or the file path. */
const char *ep_binary_recorded_path(const struct ep_binary *bin);
/* Raw build-id bytes; *len is 0 when the file has no build-id note. */
const uint8_t *ep_binary_build_id(const struct ep_binary *bin, size_t *len);
/* Lowercase hex of the build-id, "" when none. */
const char *ep_binary_build_id_hex(const struct ep_binary *bin);
enum ep_arch ep_binary_arch(const struct ep_binary *bin);
bool ep_binary_is_pie(const struct ep_binary *bin);

/* File offset -> ELF virtual address through the PT_LOAD segments; false
 * when the offset is in no loadable segment. */
bool ep_binary_offset_to_vaddr(const struct ep_binary *bin, uint64_t offset, uint64_t *vaddr);

/* The PT_LOAD segment holding a file offset: its file offset, virtual
 * address and file size. Lets callers translate whole ranges at once. */
bool ep_binary_load_segment(const struct ep_binary *bin, uint64_t offset, uint64_t *seg_offset,
			    uint64_t *seg_vaddr, uint64_t *seg_filesz);

struct ep_load_segment {
	uint64_t offset, vaddr, filesz;
	uint32_t flags; /* PF_R, PF_W, PF_X */
};

/* Every PT_LOAD segment, in program header order. */
const struct ep_load_segment *ep_binary_load_segments(const struct ep_binary *bin, size_t *count);

/* The executable PT_LOAD segments' bytes (valid while the registry lives). */
const struct ep_code_segment *ep_binary_code_segments(const struct ep_binary *bin, size_t *count);

struct ep_bat; /* common/elf/elf_bat.h */
/* BOLT's address translation table of the binary (a file written by
 * `llvm-bolt --enable-bat`), read at the first call from the same file
 * (device, inode, size and mtime unchanged) within the registry's tables
 * bound (--binary-symbols-max-mib): NULL when the file has none, or when it
 * is refused (past the bound, or inconsistent: said naming the file and
 * counted as limited, ep_binreg_stats; *refused set). */
const struct ep_bat *ep_binary_bat(struct ep_binary *bin, bool *refused);

/* The data inside those segments' code (AArch64's $d mapping symbols; none
 * when the binary is stripped): sorted, disjoint, valid as the segments. */
const struct ep_addr_range *ep_binary_data_in_code(const struct ep_binary *bin, size_t *count);

/* The function symbol (STT_FUNC, .symtab then .dynsym, and x86-64 PLT
 * entries) containing vaddr, or NULL. A size-0 symbol runs to the next
 * symbol or the end of its section, whichever comes first. */
const struct ep_symbol *ep_binary_symbol_at(const struct ep_binary *bin, uint64_t vaddr);

#endif
