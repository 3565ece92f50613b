/* SPDX-License-Identifier: Apache-2.0 */
#include "common/elf/elf_mapsyms.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct mapsym {
	uint64_t addr;
	size_t shndx;
	size_t order; /* symbol index: of two at one address the later wins */
	bool data;
};

static int cmp_mapsym(const void *pa, const void *pb)
{
	const struct mapsym *a = pa, *b = pb;
	if (a->shndx != b->shndx)
		return a->shndx < b->shndx ? -1 : 1;
	if (a->addr != b->addr)
		return a->addr < b->addr ? -1 : 1;
	return (a->order > b->order) - (a->order < b->order);
}

/* "$d" or "$x", alone or with a ".suffix" (AAELF64 allows both). */
static int mapping_kind(const char *name)
{
	if (!name || name[0] != '$' || (name[1] != 'd' && name[1] != 'x') ||
	    (name[2] != '\0' && name[2] != '.'))
		return 0;
	return name[1];
}

static bool code_section(Elf *elf, size_t shndx, GElf_Shdr *sh)
{
	Elf_Scn *scn = elf_getscn(elf, shndx);
	return scn && gelf_getshdr(scn, sh) && sh->sh_type == SHT_PROGBITS &&
	       (sh->sh_flags & (SHF_ALLOC | SHF_EXECINSTR)) == (SHF_ALLOC | SHF_EXECINSTR);
}

/* The mapping symbols of executable sections, unsorted: as many as the
 * budget holds (with a range each), the others left out. */
static int collect(Elf *elf, struct ep_elf_budget *budget, struct mapsym **out, size_t *nout)
{
	size_t n = 0, cap = 0;
	struct mapsym *v = NULL;
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB || !sh.sh_entsize ||
		    !(d = ep_elf_section_data(budget, elf, scn)))
			continue;
		/* what libelf read, not what the header claims */
		size_t count = d->d_size / sh.sh_entsize;
		for (size_t i = 0; i < count; i++) {
			GElf_Sym sym;
			GElf_Shdr code;
			if (!gelf_getsym(d, (int)i, &sym) ||
			    GELF_ST_BIND(sym.st_info) != STB_LOCAL ||
			    GELF_ST_TYPE(sym.st_info) != STT_NOTYPE)
				continue;
			int kind =
			    mapping_kind(ep_elf_strptr(budget, elf, sh.sh_link, sym.st_name));
			/* a symbol outside its section is not believed */
			if (!kind || !code_section(elf, sym.st_shndx, &code) ||
			    sym.st_value < code.sh_addr ||
			    sym.st_value - code.sh_addr >= code.sh_size)
				continue;
			/* the symbol, and the range it may make */
			budget->wanted++;
			if (!ep_elf_charge(budget, sizeof(*v) + sizeof(struct ep_addr_range))) {
				budget->dropped++;
				continue;
			}
			if (n == cap) {
				cap = cap ? 2 * cap : 256;
				struct mapsym *nv = realloc(v, cap * sizeof(*v));
				if (!nv) {
					free(v);
					return -1;
				}
				v = nv;
			}
			v[n++] = (struct mapsym){.addr = sym.st_value,
						 .shndx = sym.st_shndx,
						 .order = i,
						 .data = kind == 'd'};
		}
	}
	*out = v;
	*nout = n;
	return 0;
}

static int cmp_range(const void *pa, const void *pb)
{
	const struct ep_addr_range *a = pa, *b = pb;
	return (a->start > b->start) - (a->start < b->start);
}

/* Sorts and merges v[0..n): sections need not lie in address order, and a
 * crafted file's may overlap. Returns the new count. */
static size_t sort_merge(struct ep_addr_range *v, size_t n)
{
	if (n > 1)
		qsort(v, n, sizeof(*v), cmp_range);
	size_t out = 0;
	for (size_t i = 0; i < n; i++) {
		if (out && v[out - 1].end >= v[i].start) {
			if (v[i].end > v[out - 1].end)
				v[out - 1].end = v[i].end;
			continue;
		}
		v[out++] = v[i];
	}
	return out;
}

int ep_elf_data_in_code(Elf *elf, struct ep_elf_budget *budget, struct ep_addr_range **ranges,
			size_t *n)
{
	*ranges = NULL;
	*n = 0;
	GElf_Ehdr eh;
	if (!gelf_getehdr(elf, &eh) || eh.e_machine != EM_AARCH64)
		return 0;
	struct mapsym *v;
	size_t nv;
	if (collect(elf, budget, &v, &nv) != 0)
		return -1;
	if (nv > 1)
		qsort(v, nv, sizeof(*v), cmp_mapsym);
	/* at most one range per symbol */
	struct ep_addr_range *out = malloc((nv ? nv : 1) * sizeof(*out));
	if (!out) {
		free(v);
		return -1;
	}
	size_t nout = 0;
	for (size_t i = 0; i < nv; i++) {
		bool next_here = i + 1 < nv && v[i + 1].shndx == v[i].shndx;
		/* of several at one address, the last decides */
		if (!v[i].data || (next_here && v[i + 1].addr == v[i].addr))
			continue;
		uint64_t end;
		GElf_Shdr sh;
		if (next_here)
			end = v[i + 1].addr;
		else if (code_section(elf, v[i].shndx, &sh))
			end = sh.sh_addr + sh.sh_size;
		else
			continue;
		if (end <= v[i].addr) /* a section said to wrap around */
			continue;
		out[nout++] = (struct ep_addr_range){.start = v[i].addr, .end = end};
	}
	free(v);
	nout = sort_merge(out, nout);
	if (!nout) {
		free(out);
		out = NULL;
	}
	*ranges = out;
	*n = nout;
	return 0;
}
