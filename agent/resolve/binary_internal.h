/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Between the three parts of the binaries the agent holds: one ELF file as
 * the agent reads it (binary.c), the registry that finds the file behind a
 * mapping and counts what they hold (binary_registry.c), and its evictions
 * (binary_evict.c). Only agent/resolve includes this.
 */
#ifndef EP_BINARY_INTERNAL_H
#define EP_BINARY_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "agent/resolve/binary.h"
#include "common/elf/elf_bat.h"
#include "common/elf/elf_budget.h"
#include "common/elf/elf_note.h"
#include "common/elf/elf_symbols.h"
#include "common/util/u64map.h"

#define BUILD_ID_MAX EP_ELF_BUILD_ID_MAX

/* The bound named when what the binaries held leave is less than a
 * binary's own limits. */
#define HELD_KNOB "--binaries-held-max-mib (what the binaries held leave of it)"

struct ep_binary {
	uint32_t index;
	char *path;
	char *recorded_path;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime; /* with dev and ino: the file's identity, reused inodes included */
	uint8_t build_id[BUILD_ID_MAX];
	size_t build_id_len;
	char build_id_hex[2 * BUILD_ID_MAX + 1];
	enum ep_arch arch;
	bool pie;
	bool mismatch_warned;
	struct ep_load_segment *loads;
	size_t nloads;
	struct ep_code_segment *code;
	size_t ncode;
	/* opened without its code (ep_binreg_set_lazy_code): where the code
	 * segments lie in the file, read at the first ep_binary_code_segments() */
	uint64_t *code_offsets;
	bool code_pending;
	/* AArch64 literal pools and other data in the code ($d mapping
	 * symbols): the decoder must not read them as instructions */
	struct ep_addr_range *data;
	size_t ndata;
	struct ep_elf_symtab symtab;
	size_t sym_bytes; /* the symbols and their names */
	/* BOLT's address translation table, read at the first ep_binary_bat()
	 * (binary_bat.c): NULL when none or refused */
	struct ep_bat *bat;
	bool bat_read, bat_refused;
	/* the registry's: */
	uint64_t last_used; /* its epoch at the binary's last lookup */
	bool pinned;	    /* a --binary file: never evicted */
	/* its registry, for what it holds (code read late is counted there) */
	struct ep_binary_registry *reg;
};

struct lookup_entry {
	char *key; /* recorded path + '\0' + hex build-id */
	struct ep_binary *bin;
	bool stale; /* its binary was evicted: search again */
};

/* Binaries past their limits said at once, before only the count and the
 * last go on (a container can map any number of them). A file refused is
 * tried again at each maps read of its process: said once. */
#define LIMITED_SAID 8

/* Build-ids of recent evictions, to count the binaries read again (a
 * direct-mapped table: bounded however many the node runs). */
#define EVICTED_IDS 1024

struct ep_binary_registry {
	struct ep_binary **bins;
	size_t n, cap;
	/* --binary files, in the order given (indexes into bins) */
	uint32_t *explicit_files;
	size_t nexplicit;
	char *symfs;
	bool lazy_code;
	struct ep_elf_limits limits; /* what reading one binary may cost */
	/* what every binary held may cost together (0: no bound), and what
	 * they hold now (binary_bytes of each, code read late included) */
	uint64_t held_max, held_bytes;
	/* binaries read in part (or refused) for those limits: the first few
	 * said at once, then counted (ep_binreg_stats) with the last kept */
	uint64_t limits_said;
	uint64_t limits_said_hash[LIMITED_SAID]; /* of what was said: each once */
	/* Every lookup's answer, found or not, so each mapping event costs one
	 * hash lookup and warnings are said once. */
	struct ep_u64map lookup_index; /* key hash -> index in lookups */
	struct lookup_entry *lookups;
	size_t nlookups, lookups_cap;
	struct ep_binreg_proc_failures proc_failures;
	/* identity hash -> index in bins (probing on the hash): a live
	 * process's mapping of a known file costs one stat, not a scan of every
	 * binary the machine ran */
	struct ep_u64map by_identity;
	/* eviction (ep_binreg_evict): the holders of indexes, the indexes
	 * freed for reuse, and how many evictions there were (lookups mark
	 * their binaries with it) */
	struct ep_binreg_user *users;
	size_t nusers;
	uint32_t *free_slots;
	size_t nfree, free_cap;
	uint64_t epoch;
	struct ep_binreg_stats stats;
	uint64_t evicted_ids[EVICTED_IDS];
};

/* binary.c: the file at path (named name in what is said of its limits),
 * read within lim, and within room for the tables once its code is read
 * (UINT64_MAX: no bound); its code only where it lies when lazy_code.
 * *limited says what its limits left out ("" when nothing); NULL with
 * err when it cannot be read. */
struct ep_binary *ep_binary_open(const char *path, const char *name,
				 const struct ep_elf_limits *lim, bool lazy_code, uint64_t room,
				 char *limited, size_t limitedlen, char *err, size_t errlen);
void ep_binary_free(struct ep_binary *b);
/* What a binary holds in memory. */
uint64_t ep_binary_bytes(const struct ep_binary *b);

/* binary_registry.c: what the binaries held leave of held_max
 * (UINT64_MAX: no bound); a binary past its limits, said (the first few)
 * and counted; b out of the identity index. */
uint64_t ep_binreg_room(const struct ep_binary_registry *reg);
void ep_binreg_note_limited(struct ep_binary_registry *reg, const char *msg, bool refused);
void ep_binreg_unindex(struct ep_binary_registry *reg, const struct ep_binary *b);

#endif
