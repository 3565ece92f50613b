/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The GNU build-id note of an ELF file, as the agent's binary registry and
 * the collector's upload check both read it: program headers first (what
 * the loader maps), then note sections.
 */
#ifndef EP_ELF_NOTE_H
#define EP_ELF_NOTE_H

#include <gelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/elf/elf_budget.h"

#define EP_ELF_BUILD_ID_MAX 64

/* The build-id of elf (nphdr program headers, file_len bytes: notes said to
 * lie past its end are skipped) into out, its length into *len; false when
 * it has none. The notes read are charged to budget (one past it is
 * skipped). */
bool ep_elf_build_id(Elf *elf, size_t nphdr, uint64_t file_len, struct ep_elf_budget *budget,
		     uint8_t out[EP_ELF_BUILD_ID_MAX], size_t *len);

/* A build-id as everything prints it: lowercase hex, 2 * len + 1 bytes. */
void ep_build_id_to_hex(const uint8_t *id, size_t len, char *out);

#endif
