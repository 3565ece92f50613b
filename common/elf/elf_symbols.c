/* SPDX-License-Identifier: Apache-2.0 */
#include "common/elf/elf_symbols.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/elf/elf_symbols_internal.h"

uint64_t ep_elf_sym_cost(const struct ep_elf_sym_builder *b, size_t len)
{
	return sizeof(struct ep_elf_raw_sym) + sizeof(struct ep_symbol) + len +
	       b->copy->per_symbol + (b->copy->names ? len : 0);
}

int ep_elf_sym_add_plt(struct ep_elf_sym_builder *b, const char *prefix, const char *name,
		       const char *suffix, uint64_t start, uint64_t size, uint64_t section_end)
{
	size_t len =
	    strlen(prefix) + strnlen(name, EP_ELF_MAX_SYMBOL_NAME + 1) + strlen(suffix) + 1;
	if (len - 1 > EP_ELF_MAX_SYMBOL_NAME) {
		b->budget->long_names++;
		return 0;
	}
	/* a .plt of a million entries all naming one long symbol must not
	 * copy it a million times (both arrays grow by doubling) */
	b->budget->wanted++;
	if (!ep_elf_charge(b->budget, 2 * (sizeof(*b->raw) + len) + b->copy->per_symbol +
					  (b->copy->names ? len : 0))) {
		b->budget->dropped++;
		return 0;
	}
	if (b->plt_len + len > b->plt_cap) {
		size_t nc = b->plt_cap ? b->plt_cap * 2 : 4096;
		while (nc < b->plt_len + len)
			nc *= 2;
		char *p = realloc(b->plt_names, nc);
		if (!p)
			return -1;
		b->plt_names = p;
		b->plt_cap = nc;
	}
	if (b->n == b->cap) {
		size_t nc = b->cap ? b->cap * 2 : 64;
		struct ep_elf_raw_sym *r = realloc(b->raw, nc * sizeof(*r));
		if (!r)
			return -1;
		b->raw = r;
		b->cap = nc;
	}
	snprintf(b->plt_names + b->plt_len, len, "%s%s%s", prefix, name, suffix);
	b->raw[b->n++] = (struct ep_elf_raw_sym){
	    .s = {.name = (const char *)(uintptr_t)b->plt_len, .start = start, .size = size},
	    .section_end = section_end};
	b->plt_len += len;
	return 0;
}

/* Entries that start with their struct ep_symbol (a raw one too). */
static int cmp_sym(const void *pa, const void *pb)
{
	const struct ep_symbol *a = pa, *b = pb;
	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	/* prefer the sized symbol when two share an address */
	if (a->size != b->size)
		return a->size > b->size ? -1 : 1;
	/* then a global over a local alias: BOLT registers both names, and a
	 * global's needs no numbering that could go wrong */
	return (a->local_index != 0) - (b->local_index != 0);
}

/* Sorts the n entries of stride bytes at base (each starting with its
 * struct ep_symbol) and keeps the first of each address (.symtab and
 * .dynsym name the same function); returns how many are left. */
static size_t one_per_address(void *base, size_t n, size_t stride)
{
	char *v = base;
	if (n > 1)
		qsort(v, n, stride, cmp_sym);
	size_t out = 0;
	for (size_t i = 0; i < n; i++) {
		const struct ep_symbol *s = (const struct ep_symbol *)(v + i * stride);
		if (out > 0 &&
		    ((const struct ep_symbol *)(v + (out - 1) * stride))->start == s->start)
			continue;
		if (out != i)
			memcpy(v + out * stride, s, stride);
		out++;
	}
	return out;
}

/* Hand-written assembly often has size-0 symbols: one runs to the next
 * symbol (next_start) so its code still gets a name, but never past its
 * section (UINT64_MAX: not known): _init (size 0, in .init) would
 * otherwise swallow .plt. */
static void size_unsized(struct ep_symbol *s, uint64_t next_start, uint64_t section_end)
{
	uint64_t end = next_start < section_end ? next_start : section_end;
	if (s->size == 0 && end != UINT64_MAX && end > s->start)
		s->size = end - s->start;
}

/* A local symbol in BOLT's order, for NameResolver::uniquify's counter. */
struct local_sym {
	const char *name;
	uint64_t value;
	size_t order; /* .symtab index: keeps the sort stable */
	size_t raw;   /* index of the function in the raw table, or SIZE_MAX */
	bool func;
};

static int cmp_local(const void *pa, const void *pb)
{
	const struct local_sym *a = pa, *b = pb;
	int c = strcmp(a->name, b->name);
	if (c != 0)
		return c;
	if (a->value != b->value)
		return a->value < b->value ? -1 : 1;
	if (a->func != b->func)
		return a->func ? -1 : 1;
	return a->order < b->order ? -1 : a->order > b->order;
}

/* BOLT 16 (RewriteInstance::discoverFileObjects) visits the symbols in
 * allocated sections, stable-sorted by address with functions first at one
 * address, and names the n-th local symbol called NAME (of any type: a
 * static variable counts) "NAME/n". Sorting the locals by name then by that
 * order gives each its n without a hash of names. */
static void number_locals(struct local_sym *l, size_t n, struct ep_elf_raw_sym *raw)
{
	qsort(l, n, sizeof(*l), cmp_local);
	uint32_t counter = 0;
	for (size_t i = 0; i < n; i++) {
		counter = (i > 0 && strcmp(l[i - 1].name, l[i].name) == 0) ? counter + 1 : 1;
		if (l[i].raw != SIZE_MAX)
			raw[l[i].raw].s.local_index = counter;
	}
}

static bool section_of(Elf *elf, size_t shndx, GElf_Shdr *sh)
{
	if (shndx == SHN_UNDEF || shndx >= SHN_LORESERVE)
		return false;
	Elf_Scn *scn = elf_getscn(elf, shndx);
	return scn && gelf_getshdr(scn, sh);
}

/* The symbol tables are read twice: the first pass charges each symbol,
 * its copy and name (and each local's, whose names are sorted) until one
 * does not fit, and counts; the second fills blocks of those sizes. That
 * one and all after it are left out, in both passes alike. */
struct sym_pass {
	Elf *elf;
	struct ep_elf_sym_builder *b;
	int pass;
	uint64_t seq, cut; /* symbols met; the first left out */
	size_t nraw, nlocal, names_len;
	struct local_sym *locals;
	char *names;
	size_t nl, noff;
};

/* Symbol i (sym) of the table sh. */
static void visit(struct sym_pass *p, const GElf_Shdr *sh, size_t i, const GElf_Sym *sym)
{
	struct ep_elf_budget *budget = p->b->budget;
	GElf_Shdr ssh;
	int type = GELF_ST_TYPE(sym->st_info);
	bool local = GELF_ST_BIND(sym->st_info) == STB_LOCAL;
	bool func = type == STT_FUNC || type == STT_GNU_IFUNC;
	bool in_memory = sym->st_value != 0 && type != STT_FILE &&
			 section_of(p->elf, sym->st_shndx, &ssh) && (ssh.sh_flags & SHF_ALLOC);
	/* only .symtab has locals; .dynsym repeats its globals */
	bool counted = sh->sh_type == SHT_SYMTAB && local && in_memory;
	bool kept = func && sym->st_shndx != SHN_UNDEF && sym->st_value != 0;
	if (!counted && !kept)
		return;
	const char *name = ep_elf_strptr(budget, p->elf, sh->sh_link, sym->st_name);
	if (!name)
		name = "";
	size_t len = strnlen(name, EP_ELF_MAX_SYMBOL_NAME + 1) + 1;
	if (len - 1 > EP_ELF_MAX_SYMBOL_NAME) {
		budget->long_names += p->pass == 0 && kept;
		return;
	}
	uint64_t at = p->seq++;
	if (p->pass == 0) {
		uint64_t cost = (kept ? ep_elf_sym_cost(p->b, len) : 0) +
				(counted ? sizeof(struct local_sym) + len : 0);
		budget->wanted += kept;
		if (p->cut == UINT64_MAX && !ep_elf_charge(budget, cost))
			p->cut = at;
	}
	if (at >= p->cut) {
		budget->dropped += p->pass == 0 && kept;
		return;
	}
	if (p->pass == 0) {
		p->nraw += kept;
		p->nlocal += counted;
		p->names_len += kept ? len : 0;
		return;
	}
	if (counted)
		p->locals[p->nl++] = (struct local_sym){.name = name,
							.value = sym->st_value,
							.order = i,
							.raw = kept ? p->b->n : SIZE_MAX,
							.func = func};
	if (!kept)
		return;
	memcpy(p->names + p->noff, name, len);
	p->b->raw[p->b->n++] = (struct ep_elf_raw_sym){
	    .s = {.name = (const char *)(uintptr_t)p->noff,
		  .start = sym->st_value,
		  .size = sym->st_size,
		  .local_index = local ? 1 : 0},
	    .section_end = in_memory ? ssh.sh_addr + ssh.sh_size : UINT64_MAX};
	p->noff += len;
}

static void walk_tables(struct sym_pass *p)
{
	Elf_Scn *scn = NULL;
	p->seq = 0;
	while ((scn = elf_nextscn(p->elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) ||
		    (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) || sh.sh_entsize == 0)
			continue;
		Elf_Data *d = ep_elf_section_data(p->b->budget, p->elf, scn);
		if (!d)
			continue;
		size_t count = d->d_size / sh.sh_entsize;
		for (size_t i = 0; i < count; i++) {
			GElf_Sym sym;
			if (gelf_getsym(d, (int)i, &sym))
				visit(p, &sh, i, &sym);
		}
	}
}

/* The functions found (b) into t: sorted by address, one per address,
 * size-0 ones sized. 0, or -1 when out of memory. */
static int keep(struct ep_elf_sym_builder *b, struct ep_elf_symtab *t)
{
	struct ep_elf_raw_sym *raw = b->raw;
	size_t out = one_per_address(raw, b->n, sizeof(*raw));
	for (size_t i = 0; i < out; i++)
		size_unsized(&raw[i].s, i + 1 < out ? raw[i + 1].s.start : UINT64_MAX,
			     raw[i].section_end);
	t->syms = calloc(out ? out : 1, sizeof(*t->syms));
	if (!t->syms)
		return -1;
	t->bytes = out * sizeof(*t->syms);
	for (size_t i = 0; i < out; i++) {
		t->syms[i] = raw[i].s;
		t->bytes += strlen(raw[i].s.name) + 1;
	}
	t->n = out;
	return 0;
}

int ep_elf_symtab_read(Elf *elf, struct ep_elf_budget *budget,
		       const struct ep_elf_symbol_copy *copy, struct ep_elf_symtab *out)
{
	static const struct ep_elf_symbol_copy no_copy;
	*out = (struct ep_elf_symtab){0};
	struct ep_elf_sym_builder b = {.budget = budget, .copy = copy ? copy : &no_copy};
	struct sym_pass p = {.elf = elf, .b = &b, .cut = UINT64_MAX};
	int rc = -1;
	walk_tables(&p);
	b.cap = p.nraw ? p.nraw : 1;
	b.raw = calloc(b.cap, sizeof(*b.raw));
	p.locals = calloc(p.nlocal ? p.nlocal : 1, sizeof(*p.locals));
	p.names = malloc(p.names_len ? p.names_len : 1);
	if (!b.raw || !p.locals || !p.names)
		goto out;
	p.pass = 1;
	walk_tables(&p);
	number_locals(p.locals, p.nl, b.raw);
	/* names were stored as offsets while the blocks were being filled */
	for (size_t i = 0; i < b.n; i++)
		b.raw[i].s.name = p.names + (uintptr_t)b.raw[i].s.name;
	size_t nsym = b.n;
	if (ep_elf_read_plt(elf, &b) != 0)
		goto out;
	for (size_t i = nsym; i < b.n; i++)
		b.raw[i].s.name = b.plt_names + (uintptr_t)b.raw[i].s.name;
	if (keep(&b, out) != 0)
		goto out;
	out->names = p.names;
	out->plt_names = b.plt_names;
	p.names = b.plt_names = NULL;
	rc = 0;
out:
	free(b.raw);
	free(b.plt_names);
	free(p.locals);
	free(p.names);
	if (rc != 0)
		ep_elf_symtab_free(out);
	return rc;
}

void ep_elf_symtab_of(struct ep_symbol *syms, size_t n, struct ep_elf_symtab *out)
{
	n = one_per_address(syms, n, sizeof(*syms));
	*out = (struct ep_elf_symtab){.syms = syms, .n = n, .bytes = n * sizeof(*syms)};
	for (size_t i = 0; i < n; i++) {
		size_unsized(&syms[i], i + 1 < n ? syms[i + 1].start : UINT64_MAX, UINT64_MAX);
		out->bytes += strlen(syms[i].name) + 1;
	}
}

void ep_elf_symtab_free(struct ep_elf_symtab *t)
{
	free(t->syms);
	free(t->names);
	free(t->plt_names);
	*t = (struct ep_elf_symtab){0};
}

const struct ep_symbol *ep_elf_symtab_at(const struct ep_elf_symtab *t, uint64_t vaddr)
{
	size_t lo = 0, hi = t->n;
	while (lo < hi) { /* first symbol starting after vaddr */
		size_t mid = lo + (hi - lo) / 2;
		if (t->syms[mid].start <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	const struct ep_symbol *s = &t->syms[lo - 1];
	return vaddr - s->start < s->size ? s : NULL;
}

const char *ep_symbol_name(const char *name, uint32_t local_index, char *buf, size_t len)
{
	if (local_index)
		snprintf(buf, len, "%s/%" PRIu32, name, local_index);
	else
		snprintf(buf, len, "%s", name);
	return buf;
}
