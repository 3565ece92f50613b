/* SPDX-License-Identifier: Apache-2.0 */
#include "common/elf/elf_budget.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ep_elf_limits_default(struct ep_elf_limits *lim, const char *code_knob, const char *table_knob)
{
	*lim = (struct ep_elf_limits){.code_bytes = (uint64_t)EP_ELF_DEFAULT_CODE_MIB << 20,
				      .table_bytes = (uint64_t)EP_ELF_DEFAULT_TABLES_MIB << 20,
				      .code_knob = code_knob,
				      .table_knob = table_knob};
}

void ep_elf_budget_init(struct ep_elf_budget *b, const struct ep_elf_limits *lim)
{
	*b = (struct ep_elf_budget){.limit = lim->table_bytes, .knob = lim->table_knob};
}

void ep_elf_budget_release(struct ep_elf_budget *b)
{
	free(b->charged);
	b->charged = NULL;
	b->nsections = 0;
}

bool ep_elf_charge(struct ep_elf_budget *b, uint64_t bytes)
{
	if (bytes > b->limit - b->used)
		return false;
	b->used += bytes;
	return true;
}

static uint64_t get_n(const uint8_t *p, int n, bool msb)
{
	uint64_t v = 0;
	for (int i = 0; i < n; i++)
		v |= (uint64_t)p[msb ? n - 1 - i : i] << (8 * i);
	return v;
}

static double mib(uint64_t bytes)
{
	return (double)bytes / (1 << 20);
}

int ep_elf_check_headers(ep_elf_read_fn rd, void *ctx, uint64_t file_len, struct ep_elf_budget *b,
			 char *err, size_t errlen)
{
	uint8_t eh[64];
	size_t n = file_len < sizeof(eh) ? (size_t)file_len : sizeof(eh);
	if (n < EI_NIDENT || !rd(ctx, 0, eh, n) || memcmp(eh, ELFMAG, SELFMAG) != 0) {
		snprintf(err, errlen, "not an ELF file");
		return -1;
	}
	if (eh[EI_CLASS] != ELFCLASS64) {
		snprintf(err, errlen, "not a 64-bit ELF file");
		return -1;
	}
	if (n < sizeof(eh) || (eh[EI_DATA] != ELFDATA2LSB && eh[EI_DATA] != ELFDATA2MSB)) {
		snprintf(err, errlen, "not an ELF file");
		return -1;
	}
	bool msb = eh[EI_DATA] == ELFDATA2MSB;
	uint64_t phnum = get_n(eh + 56, 2, msb), shoff = get_n(eh + 40, 8, msb),
		 shnum = get_n(eh + 60, 2, msb);
	/* past 0xff00 sections or 0xffff segments the counts are in section
	 * 0's header (sh_size, sh_info), as libelf reads them */
	uint8_t sh0[64];
	bool have_sh0 = shoff != 0 && shoff <= file_len && file_len - shoff >= sizeof(sh0) &&
			rd(ctx, shoff, sh0, sizeof(sh0));
	if (shnum == 0 && have_sh0)
		shnum = get_n(sh0 + 32, 8, msb);
	if (phnum == PN_XNUM && have_sh0)
		phnum = get_n(sh0 + 44, 4, msb);
	/* no multiplication that can wrap: each count is checked first */
	uint64_t left = b->limit - b->used;
	if (shnum > left / EP_ELF_SECTION_COST ||
	    phnum > (left - shnum * EP_ELF_SECTION_COST) / EP_ELF_PHDR_COST) {
		bool sections = shnum > left / EP_ELF_SECTION_COST;
		uint64_t count = sections ? shnum : phnum;
		uint64_t cost = count > UINT64_MAX / EP_ELF_SECTION_COST
				    ? UINT64_MAX
				    : count * (sections ? EP_ELF_SECTION_COST : EP_ELF_PHDR_COST);
		snprintf(err, errlen,
			 "%llu %s headers: reading them would take %.0f MiB, more than the %.0f "
			 "MiB %s allows one binary's tables",
			 (unsigned long long)count, sections ? "section" : "program", mib(cost),
			 mib(b->limit), b->knob ? b->knob : "the limit");
		return -2;
	}
	b->used += shnum * EP_ELF_SECTION_COST + phnum * EP_ELF_PHDR_COST;
	return 0;
}

static const char *section_kind(uint32_t type)
{
	switch (type) {
	case SHT_SYMTAB:
		return "symbol table";
	case SHT_DYNSYM:
		return "dynamic symbol table";
	case SHT_STRTAB:
		return "string table";
	case SHT_RELA:
	case SHT_REL:
		return "relocation section";
	case SHT_NOTE:
		return "note section";
	case SHT_DYNAMIC:
		return "dynamic section";
	default:
		return "section";
	}
}

/* Whether section ndx of elf (header sh) may be read; charged the first
 * time (and refused the same way every time: readers that walk the tables
 * twice see the same sections). */
static bool charge_section(struct ep_elf_budget *b, Elf *elf, size_t ndx, const GElf_Shdr *sh)
{
	enum { UNSEEN, CHARGED, REFUSED };
	if (!b->charged) {
		size_t n;
		/* the count is bounded: ep_elf_check_headers charged for it */
		if (elf_getshdrnum(elf, &n) != 0 || !(b->charged = calloc(n ? n : 1, 1)))
			return false;
		b->nsections = n;
	}
	if (ndx >= b->nsections)
		return false;
	if (b->charged[ndx] != UNSEEN)
		return b->charged[ndx] == CHARGED;
	uint64_t size = sh->sh_type == SHT_NOBITS ? 0 : sh->sh_size;
	if (!ep_elf_charge(b, size)) {
		if (!b->refused++)
			snprintf(b->first, sizeof(b->first), "%s (section %zu, %.1f MiB)",
				 section_kind(sh->sh_type), ndx, mib(size));
		b->refused_bytes += size;
		b->charged[ndx] = REFUSED;
		return false;
	}
	b->charged[ndx] = CHARGED;
	return true;
}

Elf_Data *ep_elf_section_data(struct ep_elf_budget *b, Elf *elf, Elf_Scn *scn)
{
	GElf_Shdr sh;
	if (!scn || !gelf_getshdr(scn, &sh) || !charge_section(b, elf, elf_ndxscn(scn), &sh))
		return NULL;
	return elf_getdata(scn, NULL);
}

const char *ep_elf_strptr(struct ep_elf_budget *b, Elf *elf, size_t ndx, size_t off)
{
	Elf_Scn *scn = elf_getscn(elf, ndx);
	GElf_Shdr sh;
	if (!scn || !gelf_getshdr(scn, &sh) || !charge_section(b, elf, ndx, &sh))
		return NULL;
	return elf_strptr(elf, ndx, off);
}

Elf_Data *ep_elf_rawchunk(struct ep_elf_budget *b, Elf *elf, uint64_t off, uint64_t size,
			  Elf_Type type)
{
	if (!ep_elf_charge(b, size)) {
		if (!b->refused++)
			snprintf(b->first, sizeof(b->first), "note segment (%.1f MiB)", mib(size));
		b->refused_bytes += size;
		return NULL;
	}
	if (off > INT64_MAX)
		return NULL;
	return elf_getdata_rawchunk(elf, (int64_t)off, size, type);
}
