/* SPDX-License-Identifier: Apache-2.0 */
/* What reading one ELF file may cost (issue 32, common/elf/elf_budget.h):
 * files crafted here byte by byte to multiply memory, against the
 * collector's reader (common/elf/elf_image.c) and the agent's
 * (agent/resolve/binary.c). Each is read within its bounds, what was left
 * out is said (naming the bound) and counted, and what fits is still read. */
#include "test_util.h"

#include <elf.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "agent/resolve/binary.h"
#include "common/elf/elf_budget.h"
#include "common/elf/elf_image.h"

/* ---- crafting ELF files ---- */

#define TEXT_OFF 0x1000
#define MAX_PH	 2048
#define MAX_SH	 512
#define WHOLE	 UINT64_MAX /* a segment's size: the whole file */

struct craft {
	uint8_t *b;
	size_t n, cap;
	uint16_t machine;
	Elf64_Phdr ph[MAX_PH];
	unsigned nph, ph_room;
	Elf64_Shdr sh[MAX_SH];
	unsigned nsh;
	char shstr[4096];
	size_t nshstr;
	size_t text_size, text_off;
};

/* len bytes at the end, aligned; their offset (zeroed, or data's copy) */
static size_t put(struct craft *c, const void *data, size_t len, size_t align)
{
	size_t off = (c->n + align - 1) / align * align;
	if (off + len > c->cap) {
		c->cap = (off + len) * 2;
		c->b = realloc(c->b, c->cap);
		assert_non_null(c->b);
	}
	memset(c->b + c->n, 0, off - c->n);
	if (data)
		memcpy(c->b + off, data, len);
	else
		memset(c->b + off, 0, len);
	c->n = off + len;
	return off;
}

/* An x86-64 (or aarch64) ET_DYN: room for ph_room program headers, a
 * build-id note (PT_NOTE), and text_size bytes of .text at TEXT_OFF (or
 * the next page after the headers; its first instruction `jmp .`) in one
 * executable PT_LOAD. */
static void craft_begin(struct craft *c, uint16_t machine, unsigned ph_room, size_t text_size)
{
	memset(c, 0, sizeof(*c));
	c->machine = machine;
	c->ph_room = ph_room + 2;
	c->text_size = text_size;
	assert_true(c->ph_room <= MAX_PH);
	put(c, NULL, sizeof(Elf64_Ehdr) + c->ph_room * sizeof(Elf64_Phdr), 8);
	uint8_t note[12 + 4 + 20] = {4, 0, 0, 0,   20,	0,   0, 0, NT_GNU_BUILD_ID,
				     0, 0, 0, 'G', 'N', 'U', 0};
	for (int i = 0; i < 20; i++)
		note[16 + i] = (uint8_t)(0xa0 + i + machine);
	size_t noff = put(c, note, sizeof(note), 4);
	c->ph[c->nph++] = (Elf64_Phdr){.p_type = PT_NOTE,
				       .p_flags = PF_R,
				       .p_offset = noff,
				       .p_vaddr = noff,
				       .p_filesz = sizeof(note),
				       .p_memsz = sizeof(note),
				       .p_align = 4};
	/* after many program headers the text moves on */
	c->text_off = c->n <= TEXT_OFF ? TEXT_OFF : (c->n + 0xfff) / 0x1000 * 0x1000;
	put(c, NULL, c->text_off - c->n, 1);
	size_t toff = put(c, NULL, text_size, 16);
	memset(c->b + toff, 0xcc, text_size);
	c->b[toff] = 0xeb;
	c->b[toff + 1] = 0xfe;
	c->ph[c->nph++] = (Elf64_Phdr){.p_type = PT_LOAD,
				       .p_flags = PF_R | PF_X,
				       .p_offset = 0,
				       .p_vaddr = 0,
				       .p_filesz = c->text_off + text_size,
				       .p_memsz = c->text_off + text_size,
				       .p_align = 0x1000};
	c->nshstr = 1;
	c->nsh = 1; /* SHN_UNDEF */
}

static void craft_load(struct craft *c, uint64_t off, uint64_t vaddr, uint64_t size)
{
	assert_true(c->nph < c->ph_room);
	c->ph[c->nph++] = (Elf64_Phdr){.p_type = PT_LOAD,
				       .p_flags = PF_R | PF_X,
				       .p_offset = off,
				       .p_vaddr = vaddr,
				       .p_filesz = size,
				       .p_memsz = size,
				       .p_align = 0x1000};
}

/* A section header over [off, off + size) of the file; its index. */
static unsigned craft_section_at(struct craft *c, const char *name, uint32_t type, uint64_t flags,
				 uint64_t addr, uint64_t off, uint64_t size, uint32_t link,
				 uint32_t info, uint64_t entsize)
{
	assert_true(c->nsh < MAX_SH);
	size_t len = strlen(name) + 1;
	assert_true(c->nshstr + len <= sizeof(c->shstr));
	memcpy(c->shstr + c->nshstr, name, len);
	c->sh[c->nsh] = (Elf64_Shdr){.sh_name = (uint32_t)c->nshstr,
				     .sh_type = type,
				     .sh_flags = flags,
				     .sh_addr = addr,
				     .sh_offset = off,
				     .sh_size = size,
				     .sh_link = link,
				     .sh_info = info,
				     .sh_addralign = 8,
				     .sh_entsize = entsize};
	c->nshstr += len;
	return c->nsh++;
}

/* The same with data (NULL: zeros) placed at the end of the file. */
static unsigned craft_section(struct craft *c, const char *name, uint32_t type, uint64_t flags,
			      uint64_t addr, const void *data, size_t size, uint32_t link,
			      uint32_t info, uint64_t entsize)
{
	size_t off = put(c, data, size, 8);
	return craft_section_at(c, name, type, flags, addr, off, size, link, info, entsize);
}

/* .text as a section (index returned), for symbols to live in. */
static unsigned craft_text(struct craft *c)
{
	return craft_section_at(c, ".text", SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, c->text_off,
				c->text_off, c->text_size, 0, 0, 0);
}

/* The file, its length in *len; shnum_claim (0: the real count) is what
 * section 0 says there are, with e_shnum 0 as for more than 0xff00. */
static uint8_t *craft_end(struct craft *c, size_t *len, uint64_t shnum_claim)
{
	size_t stroff = put(c, c->shstr, c->nshstr, 1);
	unsigned shstrndx = c->nsh;
	c->sh[c->nsh++] = (Elf64_Shdr){.sh_name = 0,
				       .sh_type = SHT_STRTAB,
				       .sh_offset = stroff,
				       .sh_size = c->nshstr,
				       .sh_addralign = 1};
	if (shnum_claim)
		c->sh[0].sh_size = shnum_claim;
	size_t shoff = put(c, c->sh, c->nsh * sizeof(Elf64_Shdr), 8);
	for (unsigned i = 0; i < c->nph; i++)
		if (c->ph[i].p_filesz == WHOLE)
			c->ph[i].p_filesz = c->ph[i].p_memsz = c->n;
	Elf64_Ehdr eh = {
	    .e_ident = {ELFMAG0, ELFMAG1, ELFMAG2, ELFMAG3, ELFCLASS64, ELFDATA2LSB, EV_CURRENT},
	    .e_type = ET_DYN,
	    .e_machine = c->machine,
	    .e_version = EV_CURRENT,
	    .e_entry = TEXT_OFF,
	    .e_phoff = sizeof(Elf64_Ehdr),
	    .e_shoff = shoff,
	    .e_ehsize = sizeof(Elf64_Ehdr),
	    .e_phentsize = sizeof(Elf64_Phdr),
	    .e_phnum = (uint16_t)c->nph,
	    .e_shentsize = sizeof(Elf64_Shdr),
	    .e_shnum = shnum_claim ? 0 : (uint16_t)c->nsh,
	    .e_shstrndx = (uint16_t)shstrndx};
	memcpy(c->b, &eh, sizeof(eh));
	memcpy(c->b + sizeof(eh), c->ph, c->nph * sizeof(Elf64_Phdr));
	*len = c->n;
	return c->b;
}

/* nsym function symbols in .text (section text), all named by one string
 * of name_len bytes; adds .symtab and .strtab. */
static void craft_symbols(struct craft *c, unsigned text, unsigned nsym, size_t name_len,
			  uint8_t bind)
{
	char *strtab = malloc(name_len + 2);
	assert_non_null(strtab);
	strtab[0] = '\0';
	memset(strtab + 1, 'f', name_len);
	strtab[name_len + 1] = '\0';
	Elf64_Sym *syms = calloc(nsym + 1, sizeof(*syms));
	assert_non_null(syms);
	for (unsigned i = 1; i <= nsym; i++)
		syms[i] = (Elf64_Sym){.st_name = 1,
				      .st_info = ELF64_ST_INFO(bind, STT_FUNC),
				      .st_shndx = (uint16_t)text,
				      .st_value = c->text_off + i % c->text_size,
				      .st_size = 1};
	unsigned str = craft_section(c, ".strtab", SHT_STRTAB, 0, 0, strtab, name_len + 2, 0, 0, 0);
	craft_section(c, ".symtab", SHT_SYMTAB, 0, 0, syms, (nsym + 1) * sizeof(*syms), str, 1,
		      sizeof(Elf64_Sym));
	free(strtab);
	free(syms);
}

static void write_file(const char *path, const uint8_t *b, size_t len)
{
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(b, 1, len, f), len);
	fclose(f);
}

static struct ep_elf_limits limits_mib(uint64_t code_mib, uint64_t tables_mib)
{
	struct ep_elf_limits lim;
	ep_elf_limits_default(&lim, "--code-knob", "--tables-knob");
	lim.code_bytes = code_mib << 20;
	lim.table_bytes = tables_mib << 20;
	return lim;
}

/* ---- the collector's reader ---- */

/* Item 1: 1,000 executable segments, each the whole file. */
static void test_image_overlapping_segments(void **state)
{
	(void)state;
	struct craft c;
	craft_begin(&c, EM_X86_64, 1000, 1 << 20);
	for (unsigned i = 0; i < 1000; i++)
		craft_load(&c, 0, (uint64_t)(i + 1) << 24, WHOLE);
	size_t len;
	uint8_t *elf = craft_end(&c, &len, 0);
	struct ep_elf_image_counters before, after;
	ep_elf_image_counters(&before);
	struct ep_elf_limits lim = limits_mib(256, 64);
	char note[256], err[256];
	assert_null(
	    ep_elf_image_read_limited(elf, len, "x", &lim, note, sizeof(note), err, sizeof(err)));
	assert_non_null(strstr(err, "(1001 segments), more than the file's"));
	assert_non_null(strstr(err, "overlap"));
	ep_elf_image_counters(&after);
	assert_int_equal(after.code, before.code + 1);
	free(elf);
	/* each segment within the file, but past the configured bound */
	craft_begin(&c, EM_X86_64, 1, 3 << 20);
	elf = craft_end(&c, &len, 0);
	lim = limits_mib(2, 64);
	assert_null(
	    ep_elf_image_read_limited(elf, len, "x", &lim, note, sizeof(note), err, sizeof(err)));
	assert_non_null(strstr(err, "more than the 2 MiB --code-knob allows"));
	lim = limits_mib(4, 64);
	Edgeprof__V1__BinaryImage *img =
	    ep_elf_image_read_limited(elf, len, "x", &lim, note, sizeof(note), err, sizeof(err));
	assert_non_null(img);
	assert_string_equal(note, "");
	assert_int_equal(img->n_code, 1);
	ep_elf_image_free(img);
	free(elf);
}

/* Item 2: 60,000 symbols all naming one 16 KB string (the reported file's
 * were 20 KB: past EP_ELF_MAX_SYMBOL_NAME now, test_long_symbol_names). */
static void test_image_symbols_bounded(void **state)
{
	(void)state;
	struct craft c;
	craft_begin(&c, EM_X86_64, 0, 0x10000);
	craft_symbols(&c, craft_text(&c), 60000, 16000, STB_GLOBAL);
	size_t len;
	uint8_t *elf = craft_end(&c, &len, 0);
	struct ep_elf_image_counters before, after;
	ep_elf_image_counters(&before);
	struct ep_elf_limits lim = limits_mib(256, 16);
	char note[256], err[256];
	Edgeprof__V1__BinaryImage *img =
	    ep_elf_image_read_limited(elf, len, "x", &lim, note, sizeof(note), err, sizeof(err));
	assert_non_null(img);
	assert_true(img->n_symbols > 100 && img->n_symbols < 16 * 1024 * 1024 / 16000);
	uint64_t names = 0;
	for (size_t i = 0; i < img->n_symbols; i++)
		names += strlen(img->symbols[i]->name) + 1;
	assert_true(names < 16u << 20);
	assert_non_null(strstr(note, " of 60000 function symbols not kept"));
	assert_non_null(strstr(note, "past the 16 MiB --tables-knob allows"));
	ep_elf_image_counters(&after);
	assert_int_equal(after.symbols, before.symbols + 1);
	ep_elf_image_free(img);
	free(elf);
	/* within the bound (each name is held twice while the image is made:
	 * the reader's table and the image's copy): every one, and no note */
	craft_begin(&c, EM_X86_64, 0, 0x10000);
	craft_symbols(&c, craft_text(&c), 300, 16000, STB_GLOBAL);
	elf = craft_end(&c, &len, 0);
	img = ep_elf_image_read_limited(elf, len, "x", &lim, note, sizeof(note), err, sizeof(err));
	assert_non_null(img);
	assert_int_equal(img->n_symbols, 300);
	assert_string_equal(note, "");
	ep_elf_image_free(img);
	free(elf);
}

/* 1 M section headers or program headers (counts past 0xff00 are in
 * section 0's header): libelf would keep ~270 bytes of its own for each. */
static void test_image_header_counts(void **state)
{
	(void)state;
	struct craft c;
	craft_begin(&c, EM_X86_64, 0, 0x1000);
	size_t len;
	uint8_t *elf = craft_end(&c, &len, 1 << 20);
	struct ep_elf_image_counters before, after;
	ep_elf_image_counters(&before);
	struct ep_elf_limits lim = limits_mib(256, 64);
	char note[256], err[256];
	assert_null(
	    ep_elf_image_read_limited(elf, len, "x", &lim, note, sizeof(note), err, sizeof(err)));
	assert_string_equal(err, "1048576 section headers: reading them would take 272 MiB, more "
				 "than the 64 MiB --tables-knob allows one binary's tables");
	/* program headers: e_phnum PN_XNUM, the count in section 0's sh_info */
	Elf64_Ehdr eh;
	memcpy(&eh, elf, sizeof(eh));
	eh.e_phnum = PN_XNUM;
	memcpy(elf, &eh, sizeof(eh));
	Elf64_Shdr sh0;
	memcpy(&sh0, elf + eh.e_shoff, sizeof(sh0));
	sh0.sh_size = 4;
	sh0.sh_info = 4000000;
	memcpy(elf + eh.e_shoff, &sh0, sizeof(sh0));
	assert_null(
	    ep_elf_image_read_limited(elf, len, "x", &lim, note, sizeof(note), err, sizeof(err)));
	assert_non_null(strstr(err, "4000000 program headers: reading them would take"));
	ep_elf_image_counters(&after);
	assert_int_equal(after.headers, before.headers + 2);
	/* a 32-bit file and a short one: said as before */
	elf[EI_CLASS] = ELFCLASS32;
	assert_null(
	    ep_elf_image_read_limited(elf, len, "x", &lim, note, sizeof(note), err, sizeof(err)));
	assert_string_equal(err, "not a 64-bit ELF file");
	assert_null(
	    ep_elf_image_read_limited(elf, 10, "x", &lim, note, sizeof(note), err, sizeof(err)));
	assert_string_equal(err, "not an ELF file");
	free(elf);
}

/* The same symbol table said 300 times over: each section header is a
 * table libelf reads anew (a copy each when it converts). */
static void test_image_repeated_tables(void **state)
{
	(void)state;
	struct craft c;
	craft_begin(&c, EM_X86_64, 0, 0x1000);
	unsigned text = craft_text(&c);
	craft_symbols(&c, text, 40000, 8, STB_GLOBAL); /* ~1 MiB of table */
	Elf64_Shdr symtab = c.sh[c.nsh - 1];
	for (int i = 0; i < 300; i++)
		craft_section_at(&c, ".note.x", SHT_NOTE, 0, 0, symtab.sh_offset, symtab.sh_size, 0,
				 0, 0);
	size_t len;
	uint8_t *elf = craft_end(&c, &len, 0);
	/* the build-id is in the PT_NOTE: found before any note section */
	struct ep_elf_limits lim = limits_mib(256, 16);
	char note[256], err[256];
	Edgeprof__V1__BinaryImage *img =
	    ep_elf_image_read_limited(elf, len, "x", &lim, note, sizeof(note), err, sizeof(err));
	assert_non_null(img);
	/* one function per address, as the agent keeps them: 40,000 symbols
	 * over the 4 KiB of .text */
	assert_int_equal(img->n_symbols, 0x1000);
	ep_elf_image_free(img);
	/* without it, the note sections are looked through, up to the bound */
	Elf64_Ehdr eh;
	memcpy(&eh, elf, sizeof(eh));
	Elf64_Phdr ph;
	memcpy(&ph, elf + eh.e_phoff, sizeof(ph));
	ph.p_type = PT_NULL;
	memcpy(elf + eh.e_phoff, &ph, sizeof(ph));
	assert_null(
	    ep_elf_image_read_limited(elf, len, "x", &lim, note, sizeof(note), err, sizeof(err)));
	assert_non_null(strstr(err, "no GNU build-id note"));
	free(elf);
}

/* ---- the agent's reader ---- */

struct agent_file {
	char dir[64], path[128];
};

static struct ep_binary_registry *open_crafted(struct agent_file *f, const uint8_t *elf, size_t len,
					       bool lazy, uint64_t code_mib, uint64_t tables_mib,
					       struct ep_binary **bin)
{
	snprintf(f->dir, sizeof(f->dir), "/tmp/ep-test-elflim-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->path, sizeof(f->path), "%s/crafted.elf", f->dir);
	write_file(f->path, elf, len);
	struct ep_binary_registry *reg = ep_binreg_new();
	assert_non_null(reg);
	ep_binreg_set_lazy_code(reg, lazy);
	ep_binreg_set_limits(reg, code_mib << 20, tables_mib << 20);
	*bin = ep_binreg_lookup(reg, f->path, NULL, 0);
	return reg;
}

static void close_crafted(struct agent_file *f, struct ep_binary_registry *reg)
{
	ep_binreg_free(reg);
	unlink(f->path);
	rmdir(f->dir);
}

static uint64_t code_bytes(struct ep_binary *b)
{
	size_t n;
	const struct ep_code_segment *seg = ep_binary_code_segments(b, &n);
	uint64_t total = 0;
	for (size_t i = 0; i < n; i++)
		total += seg[i].bytes ? seg[i].size : 0;
	return total;
}

/* Item 1 at the agent: the file's bytes are copied at most once over,
 * however many segments cover them; and never past the bound. */
static void test_agent_code_bounded(void **state)
{
	(void)state;
	struct craft c;
	craft_begin(&c, EM_X86_64, 1000, 1 << 20);
	for (unsigned i = 0; i < 1000; i++)
		craft_load(&c, 0, (uint64_t)(i + 1) << 24, WHOLE);
	size_t len;
	uint8_t *elf = craft_end(&c, &len, 0);
	for (int lazy = 0; lazy < 2; lazy++) {
		struct agent_file f;
		struct ep_binary *b;
		struct ep_binary_registry *reg = open_crafted(&f, elf, len, lazy, 64, 64, &b);
		assert_non_null(b);
		assert_int_equal(code_bytes(b), len); /* one copy of the file, no more */
		struct ep_binreg_stats st;
		ep_binreg_stats(reg, &st);
		assert_int_equal(st.limited, 1);
		assert_int_equal(st.limited_refused, 0);
		assert_non_null(strstr(st.limited_last, "crafted.elf:"));
		assert_non_null(strstr(st.limited_last,
				       "of executable segments not read (more than "
				       "the file holds, or than the 64 MiB "
				       "--binary-code-max-mib allows)"));
		/* the function at the start of the code is still there */
		uint64_t vaddr;
		assert_true(ep_binary_offset_to_vaddr(b, TEXT_OFF, &vaddr));
		close_crafted(&f, reg);
	}
	free(elf);
	/* one segment of 3 MiB with a bound of 2: cut short, not dropped */
	craft_begin(&c, EM_X86_64, 0, 3 << 20);
	elf = craft_end(&c, &len, 0);
	struct agent_file f;
	struct ep_binary *b;
	struct ep_binary_registry *reg = open_crafted(&f, elf, len, false, 2, 64, &b);
	assert_non_null(b);
	assert_int_equal(code_bytes(b), 2 << 20);
	close_crafted(&f, reg);
	free(elf);
}

/* Item 2 at the agent: 60,000 symbols of one 16 KB name, in IP-only
 * (lazy) mode too: as many kept as the bound holds, the rest said. */
static void test_agent_symbols_bounded(void **state)
{
	(void)state;
	struct craft c;
	craft_begin(&c, EM_X86_64, 0, 0x10000);
	craft_symbols(&c, craft_text(&c), 60000, 16000, STB_GLOBAL);
	size_t len;
	uint8_t *elf = craft_end(&c, &len, 0);
	struct agent_file f;
	struct ep_binary *b;
	struct ep_binary_registry *reg = open_crafted(&f, elf, len, true, 64, 8, &b);
	assert_non_null(b);
	struct ep_binreg_stats st;
	ep_binreg_stats(reg, &st);
	assert_int_equal(st.limited, 1);
	assert_true(st.bytes_held < 9u << 20);
	assert_non_null(strstr(st.limited_last, " of 60000 symbols not kept; past the 8 MiB "
						"--binary-symbols-max-mib allows"));
	/* the symbols kept are found */
	const struct ep_symbol *s = ep_binary_symbol_at(b, TEXT_OFF + 1);
	assert_non_null(s);
	assert_int_equal(strlen(s->name), 16000);
	close_crafted(&f, reg);
	free(elf);
	/* locals are numbered by sorting their names: bounded the same way */
	craft_begin(&c, EM_X86_64, 0, 0x10000);
	craft_symbols(&c, craft_text(&c), 60000, 16000, STB_LOCAL);
	elf = craft_end(&c, &len, 0);
	reg = open_crafted(&f, elf, len, true, 64, 8, &b);
	assert_non_null(b);
	ep_binreg_stats(reg, &st);
	assert_int_equal(st.limited, 1);
	assert_true(st.bytes_held < 9u << 20);
	close_crafted(&f, reg);
	free(elf);
}

/* A name past EP_ELF_MAX_SYMBOL_NAME would travel in every batch and make
 * the collector refuse them all (wire.h EP_WIRE_MAX_SYMBOL): such a symbol
 * is left out by both readers, said and counted; one at the bound is kept. */
static void test_long_symbol_names(void **state)
{
	(void)state;
	for (size_t extra = 0; extra < 2; extra++) {
		struct craft c;
		craft_begin(&c, EM_X86_64, 0, 0x10000);
		craft_symbols(&c, craft_text(&c), 10, EP_ELF_MAX_SYMBOL_NAME + extra, STB_GLOBAL);
		size_t len;
		uint8_t *elf = craft_end(&c, &len, 0);
		struct agent_file f;
		struct ep_binary *b;
		struct ep_binary_registry *reg = open_crafted(&f, elf, len, true, 64, 64, &b);
		assert_non_null(b);
		struct ep_binreg_stats st;
		ep_binreg_stats(reg, &st);
		const struct ep_symbol *s = ep_binary_symbol_at(b, TEXT_OFF + 1);
		if (!extra) {
			assert_non_null(s);
			assert_int_equal(strlen(s->name), EP_ELF_MAX_SYMBOL_NAME);
			assert_int_equal(st.limited, 0);
		} else {
			assert_null(s);
			assert_int_equal(st.limited, 1);
			assert_non_null(strstr(st.limited_last,
					       " 10 symbols not kept for a name of "
					       "more than 16384 bytes"));
		}
		close_crafted(&f, reg);
		struct ep_elf_limits lim = limits_mib(256, 64);
		char note[256], err[256];
		Edgeprof__V1__BinaryImage *img = ep_elf_image_read_limited(
		    elf, len, "x", &lim, note, sizeof(note), err, sizeof(err));
		assert_non_null(img);
		if (!extra) {
			assert_int_equal(img->n_symbols, 10);
			assert_string_equal(note, "");
		} else {
			assert_int_equal(img->n_symbols, 0);
			assert_string_equal(note, "10 function symbols not kept for a name of more "
						  "than 16384 bytes");
		}
		ep_elf_image_free(img);
		free(elf);
	}
}

/* A file whose header counts alone are past the bound is not opened. */
static void test_agent_header_counts(void **state)
{
	(void)state;
	struct craft c;
	craft_begin(&c, EM_X86_64, 0, 0x1000);
	size_t len;
	uint8_t *elf = craft_end(&c, &len, 1 << 20);
	struct agent_file f;
	struct ep_binary *b;
	struct ep_binary_registry *reg = open_crafted(&f, elf, len, true, 64, 64, &b);
	assert_null(b);
	struct ep_binreg_stats st;
	ep_binreg_stats(reg, &st);
	assert_int_equal(st.limited, 1);
	assert_int_equal(st.limited_refused, 1);
	assert_non_null(strstr(st.limited_last, "crafted.elf: 1048576 section headers: reading "
						"them would take 272 MiB, more than the 64 MiB "
						"--binary-symbols-max-mib allows"));
	close_crafted(&f, reg);
	free(elf);
}

/* 300 symbol tables over the same 1 MiB: each one is read anew. */
static void test_agent_repeated_tables(void **state)
{
	(void)state;
	struct craft c;
	craft_begin(&c, EM_X86_64, 0, 0x1000);
	unsigned text = craft_text(&c);
	craft_symbols(&c, text, 40000, 8, STB_GLOBAL);
	Elf64_Shdr symtab = c.sh[c.nsh - 1];
	for (int i = 0; i < 300; i++)
		craft_section_at(&c, ".symtab", SHT_SYMTAB, 0, 0, symtab.sh_offset, symtab.sh_size,
				 symtab.sh_link, 1, sizeof(Elf64_Sym));
	size_t len;
	uint8_t *elf = craft_end(&c, &len, 0);
	struct agent_file f;
	struct ep_binary *b;
	struct ep_binary_registry *reg = open_crafted(&f, elf, len, true, 64, 16, &b);
	assert_non_null(b);
	struct ep_binreg_stats st;
	ep_binreg_stats(reg, &st);
	assert_int_equal(st.limited, 1);
	assert_non_null(strstr(st.limited_last, "tables ("));
	assert_non_null(strstr(st.limited_last, "not read, the first a symbol table (section "));
	assert_non_null(ep_binary_symbol_at(b, TEXT_OFF + 1));
	close_crafted(&f, reg);
	free(elf);
}

/* A .plt of 16,384 entries all jumping through one GOT slot whose symbol
 * has a 16 KB name: each entry is a function "NAME@PLT". */
static void test_agent_plt_bounded(void **state)
{
	(void)state;
	const unsigned nent = 16384;
	const uint64_t plt_addr = 0x100000, got = 0x200000;
	struct craft c;
	craft_begin(&c, EM_X86_64, 0, 0x1000);
	char *dynstr = calloc(1, 16002);
	assert_non_null(dynstr);
	memset(dynstr + 1, 'p', 16000);
	unsigned str =
	    craft_section(&c, ".dynstr", SHT_STRTAB, SHF_ALLOC, 0, dynstr, 16002, 0, 0, 0);
	Elf64_Sym dsyms[2] = {{0}, {.st_name = 1, .st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC)}};
	unsigned dynsym = craft_section(&c, ".dynsym", SHT_DYNSYM, SHF_ALLOC, 0, dsyms,
					sizeof(dsyms), str, 1, sizeof(Elf64_Sym));
	Elf64_Rela rela = {.r_offset = got, .r_info = ELF64_R_INFO(1, R_X86_64_JUMP_SLOT)};
	craft_section(&c, ".rela.plt", SHT_RELA, SHF_ALLOC, 0, &rela, sizeof(rela), dynsym, 0,
		      sizeof(rela));
	uint8_t *plt = calloc(nent, 16);
	assert_non_null(plt);
	for (unsigned i = 0; i < nent; i++) {
		uint8_t *e = plt + 16 * i;
		uint64_t next = plt_addr + 16 * i + 6;
		int32_t disp = (int32_t)(got - next);
		e[0] = 0xff;
		e[1] = 0x25;
		memcpy(e + 2, &disp, 4);
	}
	craft_section(&c, ".plt", SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, plt_addr, plt,
		      (size_t)nent * 16, 0, 0, 16);
	size_t len;
	uint8_t *elf = craft_end(&c, &len, 0);
	struct agent_file f;
	struct ep_binary *b;
	struct ep_binary_registry *reg = open_crafted(&f, elf, len, true, 64, 8, &b);
	assert_non_null(b);
	struct ep_binreg_stats st;
	ep_binreg_stats(reg, &st);
	assert_int_equal(st.limited, 1);
	assert_true(st.bytes_held < 9u << 20);
	assert_non_null(strstr(st.limited_last, "symbols not kept"));
	/* the entries kept are named as BOLT names them */
	const struct ep_symbol *s = ep_binary_symbol_at(b, plt_addr + 16 + 3);
	assert_non_null(s);
	assert_int_equal(strlen(s->name), 16000 + 4);
	assert_string_equal(s->name + 16000, "@PLT");
	close_crafted(&f, reg);
	free(elf);
	free(plt);
	free(dynstr);
}

/* AArch64's mapping symbols ($d: data in code) are kept up to the bound. */
static void test_agent_mapping_symbols_bounded(void **state)
{
	(void)state;
	const unsigned nsym = 200000;
	struct craft c;
	craft_begin(&c, EM_AARCH64, 0, 0x100000);
	unsigned text = craft_text(&c);
	const char strtab[] = "\0$d\0$x";
	unsigned str =
	    craft_section(&c, ".strtab", SHT_STRTAB, 0, 0, strtab, sizeof(strtab), 0, 0, 0);
	Elf64_Sym *syms = calloc(nsym + 1, sizeof(*syms));
	assert_non_null(syms);
	for (unsigned i = 1; i <= nsym; i++)
		syms[i] = (Elf64_Sym){.st_name = i % 2 ? 1 : 4,
				      .st_info = ELF64_ST_INFO(STB_LOCAL, STT_NOTYPE),
				      .st_shndx = (uint16_t)text,
				      .st_value = TEXT_OFF + 4 * (i / 2)};
	craft_section(&c, ".symtab", SHT_SYMTAB, 0, 0, syms, (nsym + 1) * sizeof(*syms), str,
		      nsym + 1, sizeof(Elf64_Sym));
	size_t len;
	uint8_t *elf = craft_end(&c, &len, 0);
	struct agent_file f;
	struct ep_binary *b;
	struct ep_binary_registry *reg = open_crafted(&f, elf, len, true, 64, 16, &b);
	assert_non_null(b);
	struct ep_binreg_stats st;
	ep_binreg_stats(reg, &st);
	assert_int_equal(st.limited, 1);
	assert_true(st.bytes_held < 17u << 20);
	size_t ndata;
	ep_binary_data_in_code(b, &ndata);
	assert_true(ndata > 0);
	close_crafted(&f, reg);
	free(elf);
	free(syms);
}

/* Files made to cost each binary's bounds, mapped by several processes:
 * all the binaries held stay within ep_binreg_set_held_max's bound, and
 * evictions make room again. */
static void test_agent_held_bounded(void **state)
{
	(void)state;
	struct craft c;
	craft_begin(&c, EM_X86_64, 0, 0x10000);
	craft_symbols(&c, craft_text(&c), 1300, 16000, STB_GLOBAL);
	size_t len;
	uint8_t *elf = craft_end(&c, &len, 0);
	char dir[] = "/tmp/ep-test-held-XXXXXX", path[4][64];
	assert_non_null(mkdtemp(dir));
	struct ep_binary_registry *reg = ep_binreg_new();
	ep_binreg_set_lazy_code(reg, true);
	ep_binreg_set_limits(reg, 64 << 20, 16 << 20);
	ep_binreg_set_held_max(reg, 24 << 20);
	struct ep_binary *b[4];
	struct ep_binreg_stats st;
	for (int i = 0; i < 3; i++) {
		snprintf(path[i], sizeof(path[i]), "%s/f%d.elf", dir, i);
		write_file(path[i], elf, len);
		b[i] = ep_binreg_lookup(reg, path[i], NULL, 0);
		ep_binreg_stats(reg, &st);
		assert_true(st.bytes_held <= 24u << 20);
	}
	assert_non_null(b[0]);
	assert_non_null(b[1]);
	assert_int_equal(st.limited, 3);
	assert_non_null(strstr(st.limited_last, "f2.elf"));
	assert_non_null(strstr(st.limited_last, "--binaries-held-max-mib"));
	assert_true(st.bytes_held > 23u << 20);
	/* no user needs them: the next evictions take them, and make room */
	ep_binreg_evict(reg, 0);
	ep_binreg_evict(reg, 0);
	ep_binreg_stats(reg, &st);
	assert_int_equal(st.held, 0);
	assert_int_equal(st.bytes_held, 0);
	snprintf(path[3], sizeof(path[3]), "%s/f3.elf", dir);
	write_file(path[3], elf, len);
	b[3] = ep_binreg_lookup(reg, path[3], NULL, 0);
	assert_non_null(b[3]);
	ep_binreg_stats(reg, &st);
	assert_true(st.bytes_held > 15u << 20 && st.bytes_held <= 16u << 20);
	ep_binreg_free(reg);
	for (int i = 0; i < 4; i++)
		unlink(path[i]);
	rmdir(dir);
	free(elf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_image_overlapping_segments),
	    cmocka_unit_test(test_image_symbols_bounded),
	    cmocka_unit_test(test_image_header_counts),
	    cmocka_unit_test(test_image_repeated_tables),
	    cmocka_unit_test(test_agent_code_bounded),
	    cmocka_unit_test(test_agent_symbols_bounded),
	    cmocka_unit_test(test_agent_header_counts),
	    cmocka_unit_test(test_agent_repeated_tables),
	    cmocka_unit_test(test_agent_plt_bounded),
	    cmocka_unit_test(test_agent_mapping_symbols_bounded),
	    cmocka_unit_test(test_agent_held_bounded),
	    cmocka_unit_test(test_long_symbol_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
