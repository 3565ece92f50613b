/* SPDX-License-Identifier: Apache-2.0 */
/*
 * BOLT's address translation table (BAT): what `llvm-bolt --enable-bat`
 * writes into the binary it lays out (the note section .note.bolt_bat), so
 * that a profile taken on the BOLTed binary can be given back in the input
 * binary's terms, for the next llvm-bolt run on the input.
 *
 * For each function fragment BOLT laid out (a function's hot part at its
 * output address; each cold part elsewhere, naming its hot part), a sorted
 * list of (output offset -> input offset) entries: one per output basic
 * block that came from an input block, and one per branch or call
 * instruction ("branch entries"). Two encodings are read, each only when
 * it parses whole and exactly: BOLT 16's (fixed-width fields) and BOLT 19's
 * (LEB128 deltas with function and block hashes). Anything else is refused.
 *
 * The table comes from any container's file: every count is checked
 * against the bytes left before anything is sized from it, and what is kept
 * is charged to the file's tables budget (common/elf/elf_budget.h).
 */
#ifndef EP_ELF_BAT_H
#define EP_ELF_BAT_H

#include <gelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/elf/elf_budget.h"

#define EP_BAT_SECTION ".note.bolt_bat"

/* One fragment: its entries are entries[first .. first + n). */
struct ep_bat_frag {
	uint64_t addr; /* output address of the fragment's start */
	uint64_t hot;  /* output address of its function's hot part (addr for a hot one) */
	uint32_t first, n;
};

struct ep_bat_entry {
	uint32_t out; /* offset in the output fragment */
	uint32_t in;  /* offset in the input function << 1, | 1 for a branch entry */
};

/* A local function's name as perf2bolt writes it for a BAT binary,
 * "NAME/FILE/N" (FILE its STT_FILE symbol, N its rank among the locals of
 * that name and file, by address): unlike "NAME/N" it does not change when
 * BOLT reorders functions, so it names the same function in the input. */
struct ep_bat_local {
	uint64_t addr;
	const char *name; /* into names */
};

struct ep_bat {
	struct ep_bat_frag *frags; /* sorted by addr, distinct */
	size_t nfrags;
	struct ep_bat_entry *entries; /* per fragment sorted by out, distinct */
	size_t nentries;
	struct ep_bat_local *locals; /* sorted by addr; ep_elf_bat_read's */
	size_t nlocals;
	char *names;
	int bolt_version; /* the encoding read: 16 or 19 */
	uint64_t bytes;	  /* memory held */
};

/* The note (its header, name and descriptor: the section's bytes, len of
 * them) into *out. What is kept is charged to budget; past it, or on any
 * inconsistency, -1 with err saying what (the caller names the file). */
int ep_bat_parse(const uint8_t *note, size_t len, struct ep_elf_budget *budget, struct ep_bat *out,
		 char *err, size_t errlen);

/* The table of elf, and its local functions' names (struct ep_bat_local),
 * read through budget: 1 when read, 0 when the file has none, -1 (err)
 * when refused. */
int ep_elf_bat_read(Elf *elf, struct ep_elf_budget *budget, struct ep_bat *out, char *err,
		    size_t errlen);

void ep_bat_free(struct ep_bat *bat);

/* The fragment starting at output address addr, or NULL. */
const struct ep_bat_frag *ep_bat_frag_at(const struct ep_bat *bat, uint64_t addr);

/* The "NAME/FILE/N" name of the local function at addr, or NULL. */
const char *ep_bat_local_name(const struct ep_bat *bat, uint64_t addr);

/* Output offset off of fragment f in the input function, as BOLT's
 * translate() gives it: the last entry at or before off gives the input
 * offset of its block (a branch source: of that entry itself, so a branch
 * is named by its block's or its own input offset), plus off's distance
 * from it otherwise. Before the first entry off stays as it is. */
uint64_t ep_bat_translate(const struct ep_bat *bat, const struct ep_bat_frag *f, uint64_t off,
			  bool branch_src);

/* Whether output offset off of f starts a basic block that came from the
 * input binary. */
bool ep_bat_is_block_start(const struct ep_bat *bat, const struct ep_bat_frag *f, uint64_t off);

/* The fall-throughs between basic blocks that straight-line code from
 * output offset from to to (a trace: from a branch target to the next
 * branch) runs through, as output offset pairs (block start, next block
 * start), BOLT's getFallthroughsInTrace(): each given to fn. */
void ep_bat_fallthroughs(const struct ep_bat *bat, const struct ep_bat_frag *f, uint64_t from,
			 uint64_t to, void (*fn)(void *ctx, uint32_t from, uint32_t to), void *ctx);

#endif
