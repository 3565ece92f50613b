/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An ELF file's functions, named as BOLT names them, for the agent (which
 * writes them into profiles and fdata) and the collector (which shows them
 * in its UI): one reader, so both name an address alike.
 *
 *   - function symbols (STT_FUNC, STT_GNU_IFUNC) of .symtab and .dynsym,
 *     one per address (the sized one first, then a global over a local)
 *   - a local is NAME/N: the N-th local symbol called NAME, counted as
 *     BOLT 16's RewriteInstance::discoverFileObjects counts them
 *   - each PLT entry (x86-64, AArch64) is a function "SYM@PLT"
 *     (createPLTBinaryFunction), PLT0 "__BOLT_PSEUDO_.plt"
 *   - a size-0 symbol runs to the next one or to its section's end
 *
 * Every table read and every symbol kept is charged to the file's budget
 * (common/elf/elf_budget.h); past it the symbols left are not kept.
 */
#ifndef EP_ELF_SYMBOLS_H
#define EP_ELF_SYMBOLS_H

#include <gelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/elf/elf_budget.h"

/* A function whose name is longer (in bytes) is left out, counted in the
 * budget's long_names (its code is still counted, under no name): the name
 * would travel in every batch, and a collector refuses a batch holding a
 * name past common/wire's EP_WIRE_MAX_SYMBOL (64 KiB), so one crafted
 * binary could otherwise stop its node's stream. */
#define EP_ELF_MAX_SYMBOL_NAME 16384

struct ep_symbol {
	const char *name; /* a PLT entry is "SYM@PLT", as BOLT names it */
	uint64_t start;	  /* ELF virtual address */
	uint64_t size;
	/* 0 for a global function; for an STB_LOCAL one the N of the name
	 * "NAME/N" that BOLT gives it (locals of that name counted in address
	 * order, RewriteInstance::discoverFileObjects) */
	uint32_t local_index;
};

/* Sorted by start, disjoint starts; names point into names/plt_names. */
struct ep_elf_symtab {
	struct ep_symbol *syms;
	size_t n;
	char *names;	 /* the symbols' names, back to back */
	char *plt_names; /* the PLT entries' "SYM@PLT" names */
	uint64_t bytes;	 /* what the table holds: entries and names */
};

/* What a caller's own copy of each symbol kept costs besides the table
 * (the collector copies them into protobuf messages): charged with it, so
 * a bound means the same memory for every reader. */
struct ep_elf_symbol_copy {
	uint64_t per_symbol; /* bytes per symbol */
	bool names;	     /* and its name again */
};

/* The functions of elf into *out, as many as budget holds (a symbol that
 * does not fit and all after it are left out; counted in budget->wanted
 * and ->dropped). copy may be NULL. 0, or -1 when out of memory. */
int ep_elf_symtab_read(Elf *elf, struct ep_elf_budget *budget,
		       const struct ep_elf_symbol_copy *copy, struct ep_elf_symtab *out);
void ep_elf_symtab_free(struct ep_elf_symtab *t);

/* A table over functions whose names another holder keeps (the
 * collector's stored images): syms (malloc'd, n of them, any order,
 * aliases and size-0 ones as images stored before this reader have them)
 * becomes out's, sorted, one per address and sized as ep_elf_symtab_read
 * keeps them (a size-0 one up to the next: its section is not known
 * here), so ep_elf_symtab_at answers for it as for the file. */
void ep_elf_symtab_of(struct ep_symbol *syms, size_t n, struct ep_elf_symtab *out);

/* The function containing vaddr, or NULL. */
const struct ep_symbol *ep_elf_symtab_at(const struct ep_elf_symtab *t, uint64_t vaddr);

/* The name BOLT's profiles use for a function: name, or "name/N" for a
 * local (local_index N), into buf (cut to len); returns buf. */
const char *ep_symbol_name(const char *name, uint32_t local_index, char *buf, size_t len);

#endif
