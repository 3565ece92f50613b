/* SPDX-License-Identifier: Apache-2.0 */
/* PLT entries as functions "SYM@PLT": each entry's GOT slot decoded from
 * its code (x86-64, AArch64), named by the relocation against that slot. */
#include <stdlib.h>
#include <string.h>

#include "common/elf/elf_symbols_internal.h"

/* A PLT entry's GOT slot and the symbol it is relocated against. */
struct got_slot {
	uint64_t slot;
	const char *name; /* NULL: no relocation names it */
	bool found;
};

static int cmp_got_slot(const void *a, const void *b)
{
	uint64_t x = ((const struct got_slot *)a)->slot, y = ((const struct got_slot *)b)->slot;
	return x < y ? -1 : x > y;
}

static struct got_slot *find_got_slot(struct got_slot *slots, size_t n, uint64_t slot)
{
	struct got_slot key = {.slot = slot};
	return n ? bsearch(&key, slots, n, sizeof(*slots), cmp_got_slot) : NULL;
}

/* Names every slot from the allocated (dynamic) RELA sections in one pass
 * over them, the first relocation of a slot in file order winning. Looking
 * each slot up by a scan of every relocation cost PLT entries x relocations:
 * seconds of the live agent's CPU for each new process mapping libclang-cpp
 * (1,800 PLT entries, 230,000 relocations). */
static void name_got_slots(Elf *elf, struct ep_elf_budget *budget, struct got_slot *slots, size_t n)
{
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA ||
		    !(sh.sh_flags & SHF_ALLOC) || sh.sh_entsize == 0)
			continue;
		Elf_Data *d = ep_elf_section_data(budget, elf, scn);
		Elf_Scn *symscn = elf_getscn(elf, sh.sh_link);
		GElf_Shdr symsh;
		Elf_Data *syms = d && symscn ? ep_elf_section_data(budget, elf, symscn) : NULL;
		if (!d || !syms || !gelf_getshdr(symscn, &symsh))
			continue;
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Rela r;
			GElf_Sym sym;
			struct got_slot *g;
			if (!gelf_getrela(d, (int)i, &r) ||
			    !(g = find_got_slot(slots, n, r.r_offset)) || g->found)
				continue;
			g->found = true;
			if (!gelf_getsym(syms, (int)GELF_R_SYM(r.r_info), &sym))
				continue;
			const char *name = ep_elf_strptr(budget, elf, symsh.sh_link, sym.st_name);
			g->name = name && *name ? name : NULL;
		}
	}
}

/* The GOT slot an x86-64 PLT entry jumps through: jmp *disp(%rip), maybe
 * after endbr64 and a bnd prefix. 0 when the entry has none (PLT0, or a
 * lazy entry of an IBT .plt whose jump is in .plt.sec). */
static uint64_t plt_entry_slot_x86(const uint8_t *e, size_t len, uint64_t vaddr)
{
	size_t i = 0;
	if (len >= 4 && e[0] == 0xf3 && e[1] == 0x0f && e[2] == 0x1e && e[3] == 0xfa)
		i = 4;
	if (i < len && e[i] == 0xf2)
		i++;
	if (i + 6 > len || e[i] != 0xff || e[i + 1] != 0x25)
		return 0;
	int32_t disp = (int32_t)((uint32_t)e[i + 2] | (uint32_t)e[i + 3] << 8 |
				 (uint32_t)e[i + 4] << 16 | (uint32_t)e[i + 5] << 24);
	return vaddr + i + 6 + (uint64_t)(int64_t)disp;
}

static uint32_t le32_at(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The GOT slot an AArch64 PLT entry loads its target from (binutils'
 * entry: adrp x16, PAGE; ldr x17, [x16, #OFF]; add x16, x16, #OFF; br
 * x17, maybe after bti c). 0 when the entry is not one (PLT0). */
static uint64_t plt_entry_slot_arm64(const uint8_t *e, size_t len, uint64_t vaddr)
{
	size_t i = 0;
	if (len >= 4 && le32_at(e) == 0xd503245f) /* bti c */
		i = 4;
	if (i + 8 > len)
		return 0;
	uint32_t adrp = le32_at(e + i), ldr = le32_at(e + i + 4);
	/* adrp x16; ldr x17, [x16, #imm12 * 8] (64-bit, unsigned offset) */
	if ((adrp & 0x9f00001fu) != 0x90000010u || (ldr & 0xffc003ffu) != 0xf9400211u)
		return 0;
	uint64_t imm = ((uint64_t)((adrp >> 5) & 0x7ffff) << 2) | ((adrp >> 29) & 3);
	int64_t pages = (int64_t)(imm << 43) >> 43; /* 21 bits, signed */
	uint64_t page = ((vaddr + i) & ~0xfffULL) + (uint64_t)(pages * 4096);
	return page + (uint64_t)((ldr >> 10) & 0xfff) * 8;
}

/* A PLT entry's GOT slot, x86-64's or AArch64's. */
static uint64_t plt_slot(bool arm64, const uint8_t *e, size_t len, uint64_t vaddr)
{
	return arm64 ? plt_entry_slot_arm64(e, len, vaddr) : plt_entry_slot_x86(e, len, vaddr);
}

/* PLT0's size: one entry on x86-64, two on AArch64 (its lazy resolver's
 * stub is 32 bytes, the entries 16). */
static uint64_t plt0_size(bool arm64, uint64_t entsize)
{
	return arm64 ? 32 : entsize;
}

/* The PLT sections, in file order, with their entry size. */
static Elf_Scn *next_plt_section(Elf *elf, struct ep_elf_budget *budget, size_t shstrndx,
				 Elf_Scn *scn, GElf_Shdr *sh, Elf_Data **d, const char **sname)
{
	while ((scn = elf_nextscn(elf, scn))) {
		if (!gelf_getshdr(scn, sh) || sh->sh_type != SHT_PROGBITS ||
		    !(sh->sh_flags & SHF_EXECINSTR))
			continue;
		*sname = ep_elf_strptr(budget, elf, shstrndx, sh->sh_name);
		if (!*sname || (strcmp(*sname, ".plt") != 0 && strcmp(*sname, ".plt.sec") != 0 &&
				strcmp(*sname, ".plt.got") != 0))
			continue;
		*d = ep_elf_section_data(budget, elf, scn);
		if (!*d || !(*d)->d_buf || (*d)->d_size < sh->sh_size)
			continue;
		return scn;
	}
	return NULL;
}

/* Whether [off, off + len) lies in a section of size bytes, with no sum
 * that can wrap: len is the file's sh_entsize, any 64-bit value. */
static bool entry_fits(uint64_t off, uint64_t len, uint64_t size)
{
	return off <= size && len <= size - off;
}

/* The GOT slot of every PLT entry, sorted, each once; *n of them. */
static struct got_slot *plt_slots(Elf *elf, struct ep_elf_budget *budget, size_t shstrndx,
				  bool arm64, size_t *n)
{
	struct got_slot *slots = NULL;
	size_t cap = 0;
	*n = 0;
	GElf_Shdr sh;
	Elf_Data *d;
	const char *sname;
	for (Elf_Scn *scn = NULL;
	     (scn = next_plt_section(elf, budget, shstrndx, scn, &sh, &d, &sname));) {
		uint64_t entsize = sh.sh_entsize ? sh.sh_entsize : 16;
		for (uint64_t off = 0; entry_fits(off, entsize, sh.sh_size); off += entsize) {
			uint64_t slot = plt_slot(arm64, (const uint8_t *)d->d_buf + off,
						 (size_t)entsize, sh.sh_addr + off);
			if (!slot)
				continue;
			budget->wanted++;
			if (!ep_elf_charge(budget, sizeof(*slots))) {
				budget->dropped++;
				continue;
			}
			if (*n == cap) {
				cap = cap ? cap * 2 : 256;
				struct got_slot *g = realloc(slots, cap * sizeof(*g));
				if (!g) {
					free(slots);
					return NULL;
				}
				slots = g;
			}
			slots[(*n)++] = (struct got_slot){.slot = slot};
		}
	}
	if (*n)
		qsort(slots, *n, sizeof(*slots), cmp_got_slot);
	size_t u = 0;
	for (size_t i = 0; i < *n; i++)
		if (u == 0 || slots[u - 1].slot != slots[i].slot)
			slots[u++] = slots[i];
	*n = u;
	return slots;
}

int ep_elf_read_plt(Elf *elf, struct ep_elf_sym_builder *b)
{
	GElf_Ehdr eh;
	size_t shstrndx;
	if (!gelf_getehdr(elf, &eh) || (eh.e_machine != EM_X86_64 && eh.e_machine != EM_AARCH64) ||
	    elf_getshdrstrndx(elf, &shstrndx) != 0)
		return 0;
	bool arm64 = eh.e_machine == EM_AARCH64;
	size_t nslots;
	struct got_slot *slots = plt_slots(elf, b->budget, shstrndx, arm64, &nslots);
	if (!slots && nslots)
		return -1;
	name_got_slots(elf, b->budget, slots, nslots);
	GElf_Shdr sh;
	Elf_Data *d;
	const char *sname;
	int rc = 0;
	for (Elf_Scn *scn = NULL;
	     rc == 0 && (scn = next_plt_section(elf, b->budget, shstrndx, scn, &sh, &d, &sname));) {
		uint64_t entsize = sh.sh_entsize ? sh.sh_entsize : 16;
		uint64_t end = sh.sh_addr + sh.sh_size;
		uint64_t first = 0;
		if (strcmp(sname, ".plt") == 0) {
			first = plt0_size(arm64, entsize);
			if (first > sh.sh_size)
				first = sh.sh_size;
			rc = ep_elf_sym_add_plt(b, "__BOLT_PSEUDO_", sname, "", sh.sh_addr, first,
						end);
		}
		for (uint64_t off = first; rc == 0 && entry_fits(off, entsize, sh.sh_size);
		     off += entsize) {
			uint64_t slot = plt_slot(arm64, (const uint8_t *)d->d_buf + off,
						 (size_t)entsize, sh.sh_addr + off);
			const struct got_slot *g = slot ? find_got_slot(slots, nslots, slot) : NULL;
			if (g && g->name)
				rc = ep_elf_sym_add_plt(b, "", g->name, "@PLT", sh.sh_addr + off,
							entsize, end);
		}
	}
	free(slots);
	return rc;
}
