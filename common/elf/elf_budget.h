/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What reading one ELF file may cost (issue 32): the agent reads the
 * binaries of every container on its node and the collector the files
 * anyone uploads, so nothing a file says may size an allocation unchecked.
 * Two bounds per file, both from configuration:
 *
 *   code   the executable segments' bytes copied, in all; never more than
 *          the file itself holds, however many segments cover its bytes
 *   tables what libelf allocates for the file's headers (about 270 bytes
 *          for each section header, before a byte of a section is read),
 *          the sections read through it (symbol and string tables,
 *          relocations, notes, .dynamic, .plt) and the symbols kept with
 *          their names: one budget, charged as the file is read
 *
 * Readers take sections through the budget (ep_elf_section_data,
 * ep_elf_strptr, ep_elf_rawchunk): a section past it is not read, and the
 * first one refused is named for the caller's message. Section and program
 * header counts are checked from the raw header before libelf sees the
 * file (ep_elf_check_headers): libelf sizes its own tables from them.
 */
#ifndef EP_ELF_BUDGET_H
#define EP_ELF_BUDGET_H

#include <gelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EP_ELF_DEFAULT_CODE_MIB	  128
#define EP_ELF_DEFAULT_TABLES_MIB 64

/* libelf's own memory per section header: its Elf_Scn (~200 bytes) and the
 * 64-byte header it reads in (elfutils 0.188: 1 M headers took 267 MB) */
#define EP_ELF_SECTION_COST 272
/* per program header: libelf's copy (56 bytes) and a reader's own per
 * segment (the agent's: 64) */
#define EP_ELF_PHDR_COST 120

struct ep_elf_limits {
	uint64_t code_bytes;  /* executable segments' bytes copied, in all */
	uint64_t table_bytes; /* headers, tables read and symbols kept */
	/* the options that set them, named in refusals */
	const char *code_knob;
	const char *table_knob;
};

/* Both bounds at their defaults, named as knob (e.g. "--binary-code-max-mib"). */
void ep_elf_limits_default(struct ep_elf_limits *lim, const char *code_knob,
			   const char *table_knob);

struct ep_elf_budget {
	uint64_t limit, used;
	const char *knob;
	uint8_t *charged; /* per section: not yet asked for, charged, refused */
	size_t nsections;
	uint64_t refused;	/* sections and notes not read */
	uint64_t refused_bytes; /* their sizes */
	/* symbols the readers would keep, and of those the ones left out */
	uint64_t wanted, dropped;
	/* symbols left out for a name past EP_ELF_MAX_SYMBOL_NAME (not in
	 * wanted: no budget would keep them) */
	uint64_t long_names;
	char first[96]; /* the first of them, "symbol table (section 2, 40.0 MiB)" */
};

void ep_elf_budget_init(struct ep_elf_budget *b, const struct ep_elf_limits *lim);
void ep_elf_budget_release(struct ep_elf_budget *b);

/* Whether bytes more fit; charged when they do. */
bool ep_elf_charge(struct ep_elf_budget *b, uint64_t bytes);

/* Reads len bytes at off of the file; false when it cannot (past its end). */
typedef bool (*ep_elf_read_fn)(void *ctx, uint64_t off, void *buf, size_t len);

/* Before elf_begin()/elf_memory(): the file (file_len bytes, read through
 * rd) is a 64-bit ELF file whose section and program headers fit the
 * budget, which is charged for them. 0; -1 with err "not an ELF file" or
 * "not a 64-bit ELF file"; -2 with err naming the header count, what
 * reading it would take and the bound. */
int ep_elf_check_headers(ep_elf_read_fn rd, void *ctx, uint64_t file_len, struct ep_elf_budget *b,
			 char *err, size_t errlen);

/* elf_getdata(scn), charged once per section (a section past the budget is
 * not read: NULL, counted and the first named). */
Elf_Data *ep_elf_section_data(struct ep_elf_budget *b, Elf *elf, Elf_Scn *scn);
/* elf_strptr(), its string table charged first. */
const char *ep_elf_strptr(struct ep_elf_budget *b, Elf *elf, size_t ndx, size_t off);
/* elf_getdata_rawchunk(), charged at every call (libelf reads each anew). */
Elf_Data *ep_elf_rawchunk(struct ep_elf_budget *b, Elf *elf, uint64_t off, uint64_t size,
			  Elf_Type type);

#endif
