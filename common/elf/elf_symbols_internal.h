/* SPDX-License-Identifier: Apache-2.0 */
/* Between the symbol reader (elf_symbols.c) and the PLT decoder
 * (elf_plt.c): the functions found, before they are sorted and sized. */
#ifndef EP_ELF_SYMBOLS_INTERNAL_H
#define EP_ELF_SYMBOLS_INTERNAL_H

#include "common/elf/elf_symbols.h"

/* A function while the tables are read: where its section ends bounds how
 * far a size-0 symbol may run. Until the tables are read its name is an
 * offset into its names block (names or plt_names). */
struct ep_elf_raw_sym {
	struct ep_symbol s;
	uint64_t section_end;
};

struct ep_elf_sym_builder {
	struct ep_elf_budget *budget;
	const struct ep_elf_symbol_copy *copy; /* never NULL */
	struct ep_elf_raw_sym *raw;
	size_t n, cap;
	char *plt_names; /* grown as PLT functions are added */
	size_t plt_len, plt_cap;
};

/* What keeping one function of a name of len bytes (its '\0' included)
 * costs: its raw entry, its table entry, its name, the caller's copy. */
uint64_t ep_elf_sym_cost(const struct ep_elf_sym_builder *b, size_t len);

/* Appends a PLT function named prefix + name + suffix at [start, start +
 * size) in a section ending at section_end, if the budget holds it (else
 * counted as dropped). 0, or -1 when out of memory. */
int ep_elf_sym_add_plt(struct ep_elf_sym_builder *b, const char *prefix, const char *name,
		       const char *suffix, uint64_t start, uint64_t size, uint64_t section_end);

/* BOLT makes each PLT entry a function "SYM@PLT" (createPLTBinaryFunction),
 * so calls into libraries are profile of that name rather than of whatever
 * symbol precedes .plt; PLT0, the lazy resolver's stub that a first call
 * goes through, is its pseudo function "__BOLT_PSEUDO_.plt". x86-64 and
 * AArch64 (others: none). 0, or -1 when out of memory. */
int ep_elf_read_plt(Elf *elf, struct ep_elf_sym_builder *b);

#endif
