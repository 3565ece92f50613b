/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Data inside AArch64 code, as the ELF's mapping symbols name it (AAELF64
 * "Mapping symbols"): the assembler marks where each executable section
 * switches between instructions ($x) and data ($d: literal pools, .word in
 * hand-written code). The decoder is told so it never reads those words as
 * instructions. Only .symtab has them: a stripped binary has none, and then
 * only where walks start (branch targets the hardware recorded) keeps data
 * out.
 */
#ifndef EP_ELF_MAPSYMS_H
#define EP_ELF_MAPSYMS_H

#include <gelf.h>
#include <stddef.h>

#include "common/decode/code_segment.h"
#include "common/elf/elf_budget.h"

/* The data ranges of elf's executable sections (each $d up to the next
 * mapping symbol of its section or the section's end), sorted and merged,
 * into *ranges (malloc'd; NULL when there are none) and *n. None for a
 * machine other than aarch64 or without .symtab. The tables read and the
 * mapping symbols kept are charged to budget: past it the others are left
 * out (their data may then be decoded as code). -1 when out of memory. */
int ep_elf_data_in_code(Elf *elf, struct ep_elf_budget *budget, struct ep_addr_range **ranges,
			size_t *n);

#endif
