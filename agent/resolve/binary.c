/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/resolve/binary.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/elf/elf_budget.h"
#include "common/elf/elf_mapsyms.h"
#include "common/elf/elf_note.h"
#include "common/util/log.h"
#include "common/util/regular_file.h"
#include "common/util/u64map.h"

#define BUILD_ID_MAX EP_ELF_BUILD_ID_MAX

struct ep_binary {
	uint32_t index;
	char *path;
	char *recorded_path;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime; /* with dev and ino: the file's identity, reused inodes included */
	uint8_t build_id[BUILD_ID_MAX];
	size_t build_id_len;
	char build_id_hex[2 * BUILD_ID_MAX + 1];
	enum ep_arch arch;
	bool pie;
	bool mismatch_warned;
	struct ep_load_segment *loads;
	size_t nloads;
	struct ep_code_segment *code;
	size_t ncode;
	/* opened without its code (ep_binreg_set_lazy_code): where the code
	 * segments lie in the file, read at the first ep_binary_code_segments() */
	uint64_t *code_offsets;
	bool code_pending;
	/* AArch64 literal pools and other data in the code ($d mapping
	 * symbols): the decoder must not read them as instructions */
	struct ep_addr_range *data;
	size_t ndata;
	struct ep_symbol *syms;
	size_t nsyms;
	char *names;	    /* every symbol name, back to back */
	char *plt_names;    /* the PLT entries' "SYM@PLT" names */
	size_t sym_bytes;   /* the symbols and their names */
	uint64_t last_used; /* the registry's epoch at its last lookup */
	bool pinned;	    /* a --binary file: never evicted */
	/* its registry, for what it holds (code read late is counted there) */
	struct ep_binary_registry *reg;
};

struct lookup_entry {
	char *key; /* recorded path + '\0' + hex build-id */
	struct ep_binary *bin;
	bool stale; /* its binary was evicted: search again */
};

/* Binaries past their limits said at once, before only the count and the
 * last go on (a container can map any number of them). A file refused is
 * tried again at each maps read of its process: said once. */
#define LIMITED_SAID 8

/* Build-ids of recent evictions, to count the binaries read again (a
 * direct-mapped table: bounded however many the node runs). */
#define EVICTED_IDS 1024

struct ep_binary_registry {
	struct ep_binary **bins;
	size_t n, cap;
	/* --binary files, in the order given (indexes into bins) */
	uint32_t *explicit_files;
	size_t nexplicit;
	char *symfs;
	bool lazy_code;
	struct ep_elf_limits limits; /* what reading one binary may cost */
	/* what every binary held may cost together (0: no bound), and what
	 * they hold now (binary_bytes of each, code read late included) */
	uint64_t held_max, held_bytes;
	/* binaries read in part (or refused) for those limits: the first few
	 * said at once, then counted (ep_binreg_stats) with the last kept */
	uint64_t limits_said;
	uint64_t limits_said_hash[LIMITED_SAID]; /* of what was said: each once */
	/* Every lookup's answer, found or not, so each mapping event costs one
	 * hash lookup and warnings are said once. */
	struct ep_u64map lookup_index; /* key hash -> index in lookups */
	struct lookup_entry *lookups;
	size_t nlookups, lookups_cap;
	struct ep_binreg_proc_failures proc_failures;
	/* identity hash -> index in bins (probing on the hash): a live
	 * process's mapping of a known file costs one stat, not a scan of every
	 * binary the machine ran */
	struct ep_u64map by_identity;
	/* eviction (ep_binreg_evict): the holders of indexes, the indexes
	 * freed for reuse, and how many evictions there were (lookups mark
	 * their binaries with it) */
	struct ep_binreg_user *users;
	size_t nusers;
	uint32_t *free_slots;
	size_t nfree, free_cap;
	uint64_t epoch;
	struct ep_binreg_stats stats;
	uint64_t evicted_ids[EVICTED_IDS];
};

void ep_build_id_to_hex(const uint8_t *id, size_t len, char *out)
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < len; i++) {
		out[2 * i] = digits[id[i] >> 4];
		out[2 * i + 1] = digits[id[i] & 15];
	}
	out[2 * len] = '\0';
}

struct ep_binary_registry *ep_binreg_new(void)
{
	if (elf_version(EV_CURRENT) == EV_NONE)
		return NULL;
	struct ep_binary_registry *reg = calloc(1, sizeof(struct ep_binary_registry));
	if (reg)
		ep_elf_limits_default(&reg->limits, "--binary-code-max-mib",
				      "--binary-symbols-max-mib");
	return reg;
}

void ep_binreg_set_held_max(struct ep_binary_registry *reg, uint64_t bytes)
{
	reg->held_max = bytes;
}

uint64_t ep_binreg_held_max(const struct ep_binary_registry *reg)
{
	return reg->held_max;
}

/* What the binaries held leave of held_max (UINT64_MAX: no bound). */
static uint64_t held_room(const struct ep_binary_registry *reg)
{
	if (!reg->held_max)
		return UINT64_MAX;
	return reg->held_bytes < reg->held_max ? reg->held_max - reg->held_bytes : 0;
}

#define HELD_KNOB "--binaries-held-max-mib (what the binaries held leave of it)"

void ep_binreg_set_limits(struct ep_binary_registry *reg, uint64_t code_bytes, uint64_t table_bytes)
{
	if (code_bytes)
		reg->limits.code_bytes = code_bytes;
	if (table_bytes)
		reg->limits.table_bytes = table_bytes;
}

static void binary_free(struct ep_binary *b)
{
	if (!b)
		return;
	for (size_t i = 0; i < b->ncode; i++)
		free((void *)b->code[i].bytes);
	free(b->code);
	free(b->code_offsets);
	free(b->loads);
	free(b->data);
	free(b->syms);
	free(b->names);
	free(b->plt_names);
	free(b->path);
	free(b->recorded_path);
	free(b);
}

void ep_binreg_free(struct ep_binary_registry *reg)
{
	if (!reg)
		return;
	for (size_t i = 0; i < reg->n; i++)
		binary_free(reg->bins[i]);
	for (size_t i = 0; i < reg->nlookups; i++)
		free(reg->lookups[i].key);
	free(reg->lookups);
	ep_u64map_free(&reg->lookup_index);
	ep_u64map_free(&reg->by_identity);
	free(reg->bins);
	free(reg->explicit_files);
	free(reg->symfs);
	free(reg->users);
	free(reg->free_slots);
	free(reg);
}

void ep_binreg_set_symfs(struct ep_binary_registry *reg, const char *dir)
{
	free(reg->symfs);
	reg->symfs = strdup(dir);
}

size_t ep_binreg_count(const struct ep_binary_registry *reg)
{
	return reg->n;
}

struct ep_binary *ep_binreg_at(const struct ep_binary_registry *reg, size_t index)
{
	return index < reg->n ? reg->bins[index] : NULL;
}

uint32_t ep_binary_index(const struct ep_binary *bin)
{
	return bin->index;
}
const char *ep_binary_path(const struct ep_binary *bin)
{
	return bin->path;
}
const char *ep_binary_recorded_path(const struct ep_binary *bin)
{
	return bin->recorded_path ? bin->recorded_path : bin->path;
}
const uint8_t *ep_binary_build_id(const struct ep_binary *bin, size_t *len)
{
	*len = bin->build_id_len;
	return bin->build_id;
}
const char *ep_binary_build_id_hex(const struct ep_binary *bin)
{
	return bin->build_id_hex;
}
enum ep_arch ep_binary_arch(const struct ep_binary *bin)
{
	return bin->arch;
}
bool ep_binary_is_pie(const struct ep_binary *bin)
{
	return bin->pie;
}

struct ep_binary_registry *ep_binreg_clone(const struct ep_binary_registry *reg, char *err,
					   size_t errlen)
{
	struct ep_binary_registry *c = ep_binreg_new();
	if (!c || (reg->symfs && !(c->symfs = strdup(reg->symfs)))) {
		snprintf(err, errlen, "out of memory");
		ep_binreg_free(c);
		return NULL;
	}
	c->lazy_code = reg->lazy_code;
	c->limits = reg->limits;
	c->held_max = reg->held_max;
	for (size_t i = 0; i < reg->nexplicit; i++) {
		if (ep_binreg_add_file(c, reg->bins[reg->explicit_files[i]]->path, err, errlen) !=
		    0) {
			ep_binreg_free(c);
			return NULL;
		}
	}
	return c;
}

void ep_binreg_set_lazy_code(struct ep_binary_registry *reg, bool lazy)
{
	reg->lazy_code = lazy;
}

static int read_at(int fd, const char *path, uint8_t *buf, size_t n, uint64_t offset, char *err,
		   size_t errlen);

/* The code of a binary opened lazily, read now from the same file: the
 * one opened then (device, inode, size and mtime unchanged), or none. */
static void note_limited(struct ep_binary_registry *reg, const char *msg, bool refused);
static uint64_t binary_bytes(const struct ep_binary *b);

/* The code segments of b cut to what the binaries held leave: *cut gets
 * the bytes left out. */
static void fit_code_to_room(struct ep_binary *b, uint64_t *cut)
{
	uint64_t room = held_room(b->reg), total = 0;
	*cut = 0;
	for (size_t i = 0; i < b->ncode; i++) {
		uint64_t keep = b->code[i].size < room - total ? b->code[i].size : room - total;
		*cut += b->code[i].size - keep;
		b->code[i].size = keep;
		total += keep;
	}
	while (b->ncode && b->code[b->ncode - 1].size == 0)
		b->ncode--;
}

static void load_code(struct ep_binary *b)
{
	b->code_pending = false;
	uint64_t cut;
	fit_code_to_room(b, &cut);
	if (cut) {
		char msg[PATH_MAX + 256];
		if (snprintf(msg, sizeof(msg),
			     "%s: %.1f MiB of its executable segments not read: past the %.1f MiB "
			     "%s",
			     ep_binary_recorded_path(b), (double)cut / (1 << 20),
			     (double)held_room(b->reg) / (1 << 20), HELD_KNOB) < 0)
			msg[0] = '\0';
		note_limited(b->reg, msg, false);
	}
	char why[128];
	int fd = ep_open_regular(b->path, why, sizeof(why));
	struct stat st;
	bool same = fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == b->dev && st.st_ino == b->ino &&
		    st.st_size == b->size && st.st_mtim.tv_sec == b->mtime.tv_sec &&
		    st.st_mtim.tv_nsec == b->mtime.tv_nsec;
	size_t ok = 0;
	char err[256];
	for (size_t i = 0; same && i < b->ncode; i++, ok++) {
		uint8_t *bytes = malloc(b->code[i].size);
		if (!bytes || read_at(fd, b->path, bytes, b->code[i].size, b->code_offsets[i], err,
				      sizeof(err)) != 0) {
			free(bytes);
			break;
		}
		b->code[i].bytes = bytes;
	}
	if (fd >= 0)
		close(fd);
	if (ok == b->ncode)
		for (size_t i = 0; i < b->ncode; i++)
			b->reg->held_bytes += b->code[i].size;
	if (ok < b->ncode) {
		/* gone or changed since: its branches go unresolved, counted */
		for (size_t i = 0; i < ok; i++)
			free((void *)b->code[i].bytes);
		for (size_t i = 0; i < b->ncode; i++)
			b->code[i].bytes = NULL;
		b->ncode = 0;
		ep_warn("%s: its code cannot be read any more (%s): its branches are skipped",
			b->path, same ? err : "file gone or changed");
	}
}

const struct ep_addr_range *ep_binary_data_in_code(const struct ep_binary *bin, size_t *count)
{
	*count = bin->ndata;
	return bin->data;
}

const struct ep_code_segment *ep_binary_code_segments(const struct ep_binary *bin, size_t *count)
{
	/* reading the code on first use changes nothing a caller sees but the
	 * bytes' arrival: the registry owns the binary */
	if (bin->code_pending)
		load_code((struct ep_binary *)bin);
	*count = bin->ncode;
	return bin->code;
}

const struct ep_load_segment *ep_binary_load_segments(const struct ep_binary *bin, size_t *count)
{
	*count = bin->nloads;
	return bin->loads;
}

bool ep_binary_load_segment(const struct ep_binary *bin, uint64_t offset, uint64_t *seg_offset,
			    uint64_t *seg_vaddr, uint64_t *seg_filesz)
{
	for (size_t i = 0; i < bin->nloads; i++) {
		const struct ep_load_segment *l = &bin->loads[i];
		if (offset >= l->offset && offset - l->offset < l->filesz) {
			*seg_offset = l->offset;
			*seg_vaddr = l->vaddr;
			*seg_filesz = l->filesz;
			return true;
		}
	}
	return false;
}

bool ep_binary_offset_to_vaddr(const struct ep_binary *bin, uint64_t offset, uint64_t *vaddr)
{
	uint64_t so, sv, sz;
	if (!ep_binary_load_segment(bin, offset, &so, &sv, &sz))
		return false;
	*vaddr = offset - so + sv;
	return true;
}

const struct ep_symbol *ep_binary_symbol_at(const struct ep_binary *bin, uint64_t vaddr)
{
	size_t lo = 0, hi = bin->nsyms;
	while (lo < hi) { /* first symbol starting after vaddr */
		size_t mid = lo + (hi - lo) / 2;
		if (bin->syms[mid].start <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	const struct ep_symbol *s = &bin->syms[lo - 1];
	return vaddr - s->start < s->size ? s : NULL;
}

/* ---- reading one ELF file ---- */

static bool is_pie_dynamic(Elf *elf, struct ep_elf_budget *budget, bool has_interp)
{
	bool soname = false;
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNAMIC || sh.sh_entsize == 0)
			continue;
		Elf_Data *d = ep_elf_section_data(budget, elf, scn);
		for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Dyn dyn;
			if (!gelf_getdyn(d, (int)i, &dyn))
				break;
			if (dyn.d_tag == DT_FLAGS_1 && (dyn.d_un.d_val & DF_1_PIE))
				return true;
			if (dyn.d_tag == DT_SONAME)
				soname = true;
		}
	}
	return has_interp && !soname;
}

/* A function symbol while the table is read: where its section ends bounds
 * how far a size-0 symbol may run. */
struct raw_sym {
	struct ep_symbol s;
	uint64_t section_end;
};

static int cmp_sym(const void *pa, const void *pb)
{
	const struct raw_sym *a = pa, *b = pb;
	if (a->s.start != b->s.start)
		return a->s.start < b->s.start ? -1 : 1;
	/* prefer the sized symbol when two share an address */
	if (a->s.size != b->s.size)
		return a->s.size > b->s.size ? -1 : 1;
	/* then a global over a local alias: BOLT registers both names, and a
	 * global's needs no numbering that could go wrong */
	return (a->s.local_index != 0) - (b->s.local_index != 0);
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
static void number_locals(struct local_sym *l, size_t n, struct raw_sym *raw)
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
static uint64_t plt_entry_slot(const uint8_t *e, size_t len, uint64_t vaddr)
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
	return arm64 ? plt_entry_slot_arm64(e, len, vaddr) : plt_entry_slot(e, len, vaddr);
}

/* PLT0's size: one entry on x86-64, two on AArch64 (its lazy resolver's
 * stub is 32 bytes, the entries 16). */
static uint64_t plt0_size(bool arm64, uint64_t entsize)
{
	return arm64 ? 32 : entsize;
}

static bool elf_is_arm64(Elf *elf)
{
	GElf_Ehdr eh;
	return gelf_getehdr(elf, &eh) && eh.e_machine == EM_AARCH64;
}

/* Appends a PLT function named NAME (printf-style, one %s of arg) at
 * [start, start + size) in a section ending at section_end. */
struct plt_names {
	char **text;
	size_t len, cap;
};

static int add_plt_function(struct ep_elf_budget *budget, struct raw_sym **raw, size_t *n,
			    size_t *cap, struct plt_names *pn, const char *fmt, const char *arg,
			    uint64_t start, uint64_t size, uint64_t section_end)
{
	size_t len = (size_t)snprintf(NULL, 0, fmt, arg) + 1;
	/* a .plt of a million entries all naming one long symbol must not
	 * copy it a million times (both arrays grow by doubling) */
	budget->wanted++;
	if (!ep_elf_charge(budget, 2 * (sizeof(**raw) + len))) {
		budget->dropped++;
		return 0;
	}
	if (pn->len + len > pn->cap) {
		size_t nc = pn->cap ? pn->cap * 2 : 4096;
		while (nc < pn->len + len)
			nc *= 2;
		char *p = realloc(*pn->text, nc);
		if (!p)
			return -1;
		*pn->text = p;
		pn->cap = nc;
	}
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 64;
		struct raw_sym *r = realloc(*raw, nc * sizeof(*r));
		if (!r)
			return -1;
		*raw = r;
		*cap = nc;
	}
	snprintf(*pn->text + pn->len, len, fmt, arg);
	(*raw)[(*n)++] = (struct raw_sym){
	    .s = {.name = (const char *)(uintptr_t)pn->len, .start = start, .size = size},
	    .section_end = section_end};
	pn->len += len;
	return 0;
}

/* BOLT makes each PLT entry a function "SYM@PLT" (createPLTBinaryFunction),
 * so calls into libraries are profile of that name rather than of whatever
 * symbol precedes .plt; PLT0, the lazy resolver's stub that a first call
 * goes through, is its pseudo function "__BOLT_PSEUDO_.plt". Appends them to
 * raw (grown as needed); their names go to *plt_names. */
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

/* BOLT makes each PLT entry a function "SYM@PLT" (createPLTBinaryFunction),
 * so calls into libraries are profile of that name rather than of whatever
 * symbol precedes .plt; PLT0, the lazy resolver's stub that a first call
 * goes through, is its pseudo function "__BOLT_PSEUDO_.plt". Appends them to
 * raw (grown as needed); their names go to *plt_names. */
static int read_plt(Elf *elf, struct ep_elf_budget *budget, struct raw_sym **raw, size_t *n,
		    size_t *cap, char **plt_names)
{
	size_t shstrndx;
	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return 0;
	size_t nslots;
	bool arm64 = elf_is_arm64(elf);
	struct got_slot *slots = plt_slots(elf, budget, shstrndx, arm64, &nslots);
	if (!slots && nslots)
		return -1;
	name_got_slots(elf, budget, slots, nslots);
	struct plt_names pn = {.text = plt_names};
	GElf_Shdr sh;
	Elf_Data *d;
	const char *sname;
	int rc = 0;
	for (Elf_Scn *scn = NULL;
	     rc == 0 && (scn = next_plt_section(elf, budget, shstrndx, scn, &sh, &d, &sname));) {
		uint64_t entsize = sh.sh_entsize ? sh.sh_entsize : 16;
		uint64_t end = sh.sh_addr + sh.sh_size;
		uint64_t first = 0;
		if (strcmp(sname, ".plt") == 0) {
			first = plt0_size(arm64, entsize);
			if (first > sh.sh_size)
				first = sh.sh_size;
			rc = add_plt_function(budget, raw, n, cap, &pn, "__BOLT_PSEUDO_%s", sname,
					      sh.sh_addr, first, end);
		}
		for (uint64_t off = first; rc == 0 && entry_fits(off, entsize, sh.sh_size);
		     off += entsize) {
			uint64_t slot = plt_slot(arm64, (const uint8_t *)d->d_buf + off,
						 (size_t)entsize, sh.sh_addr + off);
			const struct got_slot *g = slot ? find_got_slot(slots, nslots, slot) : NULL;
			if (g && g->name)
				rc = add_plt_function(budget, raw, n, cap, &pn, "%s@PLT", g->name,
						      sh.sh_addr + off, entsize, end);
		}
	}
	free(slots);
	return rc;
}

/* The functions read (raw, n) into b's table: sorted by address, one per
 * address, size-0 ones sized. 0, or -1 when out of memory. */
static int keep_symbols(struct ep_binary *b, struct raw_sym *raw, size_t n)
{
	qsort(raw, n, sizeof(*raw), cmp_sym);
	size_t out = 0;
	for (size_t i = 0; i < n; i++) {
		if (out > 0 && raw[out - 1].s.start == raw[i].s.start)
			continue; /* .symtab and .dynsym name the same function */
		raw[out++] = raw[i];
	}
	/* Hand-written assembly often has size-0 symbols: let them run to the
	 * next symbol so their code still gets a name, but never past their
	 * section: _init (size 0, in .init) would otherwise swallow .plt. */
	for (size_t i = 0; i < out; i++) {
		if (raw[i].s.size != 0)
			continue;
		uint64_t end = raw[i].section_end;
		if (i + 1 < out && raw[i + 1].s.start < end)
			end = raw[i + 1].s.start;
		if (end != UINT64_MAX && end > raw[i].s.start)
			raw[i].s.size = end - raw[i].s.start;
	}
	b->syms = calloc(out ? out : 1, sizeof(*b->syms));
	if (!b->syms)
		return -1;
	for (size_t i = 0; i < out; i++)
		b->syms[i] = raw[i].s;
	b->nsyms = out;
	return 0;
}

/* The function symbols (and PLT entries) of elf into b, as many as the
 * budget holds: the first pass charges each symbol, its copy and name
 * (and each local's, whose names are sorted), until one does not fit; that
 * one and all after it are left out, in both passes alike. */
static int read_symbols(Elf *elf, struct ep_elf_budget *budget, struct ep_binary *b)
{
	size_t nraw = 0, raw_cap = 0, nlocal = 0, names_len = 0;
	struct raw_sym *raw = NULL;
	struct local_sym *locals = NULL;
	uint64_t cut = UINT64_MAX; /* the first symbol left out */
	int rc = -1;
	for (int pass = 0; pass < 2; pass++) {
		Elf_Scn *scn = NULL;
		size_t k = 0, nl = 0, noff = 0;
		uint64_t seq = 0;
		while ((scn = elf_nextscn(elf, scn))) {
			GElf_Shdr sh;
			if (!gelf_getshdr(scn, &sh) ||
			    (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) ||
			    sh.sh_entsize == 0)
				continue;
			Elf_Data *d = ep_elf_section_data(budget, elf, scn);
			if (!d)
				continue;
			size_t count = d->d_size / sh.sh_entsize;
			for (size_t i = 0; i < count; i++) {
				GElf_Sym sym;
				GElf_Shdr ssh;
				if (!gelf_getsym(d, (int)i, &sym))
					continue;
				int type = GELF_ST_TYPE(sym.st_info);
				bool local = GELF_ST_BIND(sym.st_info) == STB_LOCAL;
				bool func = type == STT_FUNC || type == STT_GNU_IFUNC;
				bool in_memory = sym.st_value != 0 && type != STT_FILE &&
						 section_of(elf, sym.st_shndx, &ssh) &&
						 (ssh.sh_flags & SHF_ALLOC);
				/* only .symtab has locals; .dynsym repeats its globals */
				bool counted = sh.sh_type == SHT_SYMTAB && local && in_memory;
				bool kept = func && sym.st_shndx != SHN_UNDEF && sym.st_value != 0;
				if (!counted && !kept)
					continue;
				const char *name =
				    ep_elf_strptr(budget, elf, sh.sh_link, sym.st_name);
				if (!name)
					name = "";
				size_t len = strlen(name) + 1;
				uint64_t at = seq++;
				if (pass == 0) {
					uint64_t cost =
					    (kept ? sizeof(struct raw_sym) +
							sizeof(struct ep_symbol) + len
						  : 0) +
					    (counted ? sizeof(struct local_sym) + len : 0);
					budget->wanted += kept;
					if (cut == UINT64_MAX && !ep_elf_charge(budget, cost))
						cut = at;
				}
				if (at >= cut) {
					budget->dropped += pass == 0 && kept;
					continue;
				}
				if (pass == 0) {
					nraw += kept;
					nlocal += counted;
					names_len += kept ? len : 0;
					continue;
				}
				if (counted)
					locals[nl++] =
					    (struct local_sym){.name = name,
							       .value = sym.st_value,
							       .order = i,
							       .raw = kept ? k : SIZE_MAX,
							       .func = func};
				if (!kept)
					continue;
				memcpy(b->names + noff, name, len);
				raw[k++] = (struct raw_sym){
				    .s = {.name = (const char *)(uintptr_t)noff,
					  .start = sym.st_value,
					  .size = sym.st_size,
					  .local_index = local ? 1 : 0},
				    .section_end =
					in_memory ? ssh.sh_addr + ssh.sh_size : UINT64_MAX};
				noff += len;
			}
		}
		if (pass == 0) {
			raw_cap = nraw ? nraw : 1;
			raw = calloc(raw_cap, sizeof(*raw));
			locals = calloc(nlocal ? nlocal : 1, sizeof(*locals));
			b->names = malloc(names_len ? names_len : 1);
			if (!raw || !locals || !b->names)
				goto out;
		} else {
			nraw = k;
			number_locals(locals, nl, raw);
		}
	}
	/* names were stored as offsets while the blocks were being filled */
	for (size_t i = 0; i < nraw; i++)
		raw[i].s.name = b->names + (uintptr_t)raw[i].s.name;
	size_t nsym = nraw;
	if ((b->arch == EP_ARCH_X86_64 || b->arch == EP_ARCH_AARCH64) &&
	    read_plt(elf, budget, &raw, &nraw, &raw_cap, &b->plt_names) != 0)
		goto out;
	for (size_t i = nsym; i < nraw; i++)
		raw[i].s.name = b->plt_names + (uintptr_t)raw[i].s.name;
	rc = keep_symbols(b, raw, nraw);
out:
	free(raw);
	free(locals);
	return rc;
}

/* Reads exactly n bytes at offset, or fails saying why. */
static int read_at(int fd, const char *path, uint8_t *buf, size_t n, uint64_t offset, char *err,
		   size_t errlen)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = pread(fd, buf + got, n - got, (off_t)(offset + got));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			snprintf(err, errlen, "%s: read failed at byte %llu: %s", path,
				 (unsigned long long)(offset + got),
				 r < 0 ? strerror(errno) : "file shrank while reading");
			return -1;
		}
		got += (size_t)r;
	}
	return 0;
}

struct fd_file {
	int fd;
};

static bool fd_read(void *ctx, uint64_t off, void *buf, size_t len)
{
	const struct fd_file *f = ctx;
	size_t got = 0;
	while (got < len) {
		ssize_t r = pread(f->fd, (uint8_t *)buf + got, len - got, (off_t)(off + got));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return false;
		got += (size_t)r;
	}
	return true;
}

static double mib(uint64_t bytes)
{
	return (double)bytes / (1 << 20);
}

/* What of a binary its limits left out, into msg ("" when nothing). */
static void say_limited(const char *path, uint64_t code_total, uint64_t code_cut,
			const struct ep_elf_limits *lim, const struct ep_elf_budget *budget,
			char *msg, size_t len)
{
	msg[0] = '\0';
	if (!code_cut && !budget->refused && !budget->dropped)
		return;
	int n = snprintf(msg, len, "%s:", path);
	if (code_cut && n >= 0 && (size_t)n < len)
		n += snprintf(msg + n, len - (size_t)n,
			      " %.1f MiB of its %.1f MiB of executable segments not read (more "
			      "than the file holds, or than the %.0f MiB %s allows);",
			      mib(code_cut), mib(code_total + code_cut), mib(lim->code_bytes),
			      lim->code_knob);
	if (budget->refused && n >= 0 && (size_t)n < len)
		n += snprintf(
		    msg + n, len - (size_t)n, " %llu tables (%.1f MiB) not read, the first a %s;",
		    (unsigned long long)budget->refused, mib(budget->refused_bytes), budget->first);
	if (budget->dropped && n >= 0 && (size_t)n < len)
		n += snprintf(msg + n, len - (size_t)n, " %llu of %llu symbols not kept;",
			      (unsigned long long)budget->dropped,
			      (unsigned long long)budget->wanted);
	if ((budget->refused || budget->dropped) && n >= 0 && (size_t)n < len)
		snprintf(msg + n, len - (size_t)n,
			 " past the %.0f MiB %s allows one binary's tables and symbols",
			 mib(budget->limit), budget->knob);
	else if (n > 0 && (size_t)n < len)
		msg[n - 1] = '\0'; /* the last ';' */
}

/* The PT_LOAD segments of elf (nphdr program headers) into b, and the
 * executable ones' code (or, lazy, where it lies) up to code_max bytes in
 * all: past it a segment is cut short, its branches unresolved as in code
 * that could not be read. *code_total and *code_cut count the bytes kept
 * and not. 0, or -1 with err. */
static int read_loads(int fd, Elf *elf, size_t nphdr, uint64_t code_max, bool lazy_code,
		      struct ep_binary *b, bool *has_interp, uint64_t *code_total,
		      uint64_t *code_cut, char *err, size_t errlen)
{
	uint64_t size = (uint64_t)b->size;
	for (size_t i = 0; i < nphdr; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(elf, (int)i, &ph))
			continue;
		if (ph.p_type == PT_INTERP)
			*has_interp = true;
		if (ph.p_type != PT_LOAD)
			continue;
		uint64_t filesz = ph.p_filesz;
		if (ph.p_offset > size)
			filesz = 0;
		else if (filesz > size - ph.p_offset)
			filesz = size - ph.p_offset; /* truncated file: keep what exists */
		/* ending past 2^64, it cannot be mapped (the kernel refuses it),
		 * and every [start, end) of its code would end before it starts */
		if (filesz > UINT64_MAX - ph.p_vaddr)
			continue;
		b->loads[b->nloads++] = (struct ep_load_segment){.offset = ph.p_offset,
								 .vaddr = ph.p_vaddr,
								 .filesz = filesz,
								 .flags = ph.p_flags};
		if (!(ph.p_flags & PF_X) || filesz == 0)
			continue;
		uint64_t room = code_max - *code_total, keep = filesz < room ? filesz : room;
		*code_cut += filesz - keep;
		*code_total += keep;
		if (keep == 0)
			continue;
		if (lazy_code) {
			b->code_offsets[b->ncode] = ph.p_offset;
			b->code[b->ncode++] =
			    (struct ep_code_segment){.vaddr = ph.p_vaddr, .size = keep};
			continue;
		}
		uint8_t *bytes = malloc(keep);
		if (!bytes) {
			snprintf(err, errlen, "%s: out of memory", b->path);
			return -1;
		}
		if (read_at(fd, b->path, bytes, keep, ph.p_offset, err, errlen) != 0) {
			free(bytes);
			return -1;
		}
		b->code[b->ncode++] =
		    (struct ep_code_segment){.vaddr = ph.p_vaddr, .bytes = bytes, .size = keep};
	}
	return 0;
}

/* reg's limits for one binary, no more than what the binaries held leave
 * (room) if that is less */
static struct ep_elf_limits limits_within(const struct ep_binary_registry *reg, uint64_t room)
{
	struct ep_elf_limits lim = reg->limits;
	if (room < lim.code_bytes) {
		lim.code_bytes = room;
		lim.code_knob = HELD_KNOB;
	}
	if (room < lim.table_bytes) {
		lim.table_bytes = room;
		lim.table_knob = HELD_KNOB;
	}
	return lim;
}

/* Reads what we keep and nothing else: libelf on the descriptor
 * (ELF_C_READ) fetches headers, notes, .dynamic and the symbol tables as
 * they are asked for, and the executable segments are read straight into
 * their copies. The whole file in memory would cost its size at every
 * open (debug info included: often several times the code), and mapping it
 * would SIGBUS the agent when the binary is truncated on disk meanwhile.
 * What the file says sizes nothing unchecked (reg->limits): the header
 * counts are read before libelf sizes its tables from them, every table is
 * taken through the budget, and code is copied up to its bound. *limited
 * says what was left out ("" when nothing). */
static struct ep_binary *binary_open(const struct ep_binary_registry *reg, const char *path,
				     const char *name, uint64_t room, char *limited,
				     size_t limitedlen, char *err, size_t errlen)
{
	/* what is said of limits names the file as its process does too */
	char shown[PATH_MAX + 64];
	if (strcmp(name, path) != 0)
		snprintf(shown, sizeof(shown), "%s (%s)", name, path);
	else
		snprintf(shown, sizeof(shown), "%s", path);
	struct ep_elf_limits held_lim = limits_within(reg, room);
	const struct ep_elf_limits *lim = &held_lim;
	struct stat st;
	char why[256];
	limited[0] = '\0';
	int fd = ep_open_regular(path, why, sizeof(why));
	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", path, why);
		return NULL;
	}
	if (fstat(fd, &st) != 0) {
		snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
		close(fd);
		return NULL;
	}
	uint64_t size = (uint64_t)st.st_size;
	struct ep_elf_budget budget;
	ep_elf_budget_init(&budget, lim);
	struct fd_file ff = {fd};
	int checked = ep_elf_check_headers(fd_read, &ff, size, &budget, why, sizeof(why));
	if (checked != 0) {
		snprintf(err, errlen, "%s: %s", path, why);
		/* a message cut short still names the file first */
		if (checked == -2 && snprintf(limited, limitedlen, "%s: %s", shown, why) < 0)
			limited[0] = '\0';
		close(fd);
		return NULL;
	}
	struct ep_binary *b = calloc(1, sizeof(*b));
	Elf *elf = b ? elf_begin(fd, ELF_C_READ, NULL) : NULL;
	GElf_Ehdr eh;
	int rc = -1;
	uint64_t code_total = 0, code_cut = 0;
	/* however many segments cover them, the file's bytes are copied at
	 * most once over */
	uint64_t code_max = size < lim->code_bytes ? size : lim->code_bytes;
	if (!b) {
		snprintf(err, errlen, "%s: out of memory", path);
		goto out;
	}
	if (!elf || elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh)) {
		snprintf(err, errlen, "%s: not an ELF file", path);
		goto out;
	}
	if (gelf_getclass(elf) != ELFCLASS64) {
		snprintf(err, errlen, "%s: not a 64-bit ELF file", path);
		goto out;
	}
	b->path = strdup(path);
	b->dev = st.st_dev;
	b->ino = st.st_ino;
	b->size = st.st_size;
	b->mtime = st.st_mtim;
	b->arch = eh.e_machine == EM_X86_64    ? EP_ARCH_X86_64
		  : eh.e_machine == EM_AARCH64 ? EP_ARCH_AARCH64
					       : EP_ARCH_UNKNOWN;
	size_t nphdr = 0;
	if (elf_getphdrnum(elf, &nphdr) != 0 || nphdr == 0) {
		snprintf(err, errlen,
			 "%s: ELF file without program headers (not an executable "
			 "or shared library)",
			 path);
		goto out;
	}
	/* nphdr was charged to the budget (ep_elf_check_headers) */
	b->loads = calloc(nphdr, sizeof(*b->loads));
	b->code = calloc(nphdr, sizeof(*b->code));
	b->code_offsets = reg->lazy_code ? calloc(nphdr, sizeof(*b->code_offsets)) : NULL;
	b->code_pending = reg->lazy_code;
	if (!b->path || !b->loads || !b->code || (reg->lazy_code && !b->code_offsets)) {
		snprintf(err, errlen, "%s: out of memory", path);
		goto out;
	}
	bool has_interp = false;
	if (read_loads(fd, elf, nphdr, code_max, reg->lazy_code, b, &has_interp, &code_total,
		       &code_cut, err, errlen) != 0)
		goto out;
	/* the code read leaves less for the tables */
	if (!reg->lazy_code && room - code_total < budget.limit) {
		budget.limit = budget.used > room - code_total ? budget.used : room - code_total;
		budget.knob = HELD_KNOB;
	}
	/* ET_DYN covers PIE executables and shared libraries. DF_1_PIE says so
	 * outright; older linkers do not set it, so an interpreter without a
	 * soname also counts (libc.so.6 has an interpreter, and a soname). */
	b->pie = eh.e_type == ET_DYN && is_pie_dynamic(elf, &budget, has_interp);
	/* without one the length stays 0 */
	(void)ep_elf_build_id(elf, nphdr, size, &budget, b->build_id, &b->build_id_len);
	ep_build_id_to_hex(b->build_id, b->build_id_len, b->build_id_hex);
	if (read_symbols(elf, &budget, b) != 0 ||
	    ep_elf_data_in_code(elf, &budget, &b->data, &b->ndata) != 0) {
		snprintf(err, errlen, "%s: out of memory reading symbols", path);
		goto out;
	}
	b->sym_bytes = b->nsyms * sizeof(*b->syms) + b->ndata * sizeof(*b->data);
	for (size_t i = 0; i < b->nsyms; i++)
		b->sym_bytes += strlen(b->syms[i].name) + 1;
	say_limited(shown, code_total, code_cut, lim, &budget, limited, limitedlen);
	rc = 0;
out:
	if (elf)
		elf_end(elf);
	close(fd);
	ep_elf_budget_release(&budget);
	if (rc != 0) {
		binary_free(b);
		return NULL;
	}
	return b;
}

static uint64_t identity_hash(dev_t dev, ino_t ino, off_t size, const struct timespec *mtime)
{
	uint64_t h = ep_hash_u64((uint64_t)dev ^ ep_hash_u64((uint64_t)ino));
	h = ep_hash_u64(h ^ (uint64_t)size);
	return ep_hash_u64(h ^ (uint64_t)mtime->tv_sec ^ ((uint64_t)mtime->tv_nsec << 34));
}

static bool same_identity(const struct ep_binary *b, const struct stat *st)
{
	return b->dev == st->st_dev && b->ino == st->st_ino && b->size == st->st_size &&
	       b->mtime.tv_sec == st->st_mtim.tv_sec && b->mtime.tv_nsec == st->st_mtim.tv_nsec;
}

static struct ep_binary *find_identity(const struct ep_binary_registry *reg, const struct stat *st)
{
	for (uint64_t h = identity_hash(st->st_dev, st->st_ino, st->st_size, &st->st_mtim);; h++) {
		const uint64_t *i = ep_u64map_get(&reg->by_identity, h);
		if (!i)
			return NULL;
		if (same_identity(reg->bins[*i], st))
			return reg->bins[*i];
	}
}

static void index_identity(struct ep_binary_registry *reg, const struct ep_binary *b)
{
	uint64_t h = identity_hash(b->dev, b->ino, b->size, &b->mtime);
	while (ep_u64map_get(&reg->by_identity, h))
		h++;
	uint64_t *slot = ep_u64map_upsert(&reg->by_identity, h, NULL);
	if (slot)
		*slot = b->index; /* else found by a new open: a copy, not a wrong file */
}

static struct ep_binary *find_loaded(struct ep_binary_registry *reg, const char *path)
{
	struct stat st;
	if (stat(path, &st) != 0)
		return NULL;
	return find_identity(reg, &st);
}

static void note_limited(struct ep_binary_registry *reg, const char *msg, bool refused)
{
	reg->stats.limited++;
	reg->stats.limited_refused += refused;
	snprintf(reg->stats.limited_last, sizeof(reg->stats.limited_last), "%s", msg);
	uint64_t h = ep_hash_bytes(msg, strlen(msg));
	for (size_t i = 0; i < LIMITED_SAID && i < reg->limits_said; i++) {
		if (reg->limits_said_hash[i] == h) {
			ep_debug("%s", msg);
			return;
		}
	}
	if (reg->limits_said < LIMITED_SAID) {
		reg->limits_said_hash[reg->limits_said++] = h;
		ep_warn("%s%s", msg,
			reg->limits_said == LIMITED_SAID ? " (further ones counted)" : "");
	} else {
		ep_debug("%s", msg);
	}
}

/* The binary of the file at path, named (in what is said of its limits)
 * as the process or recording names it. */
static struct ep_binary *open_registered(struct ep_binary_registry *reg, const char *path,
					 const char *name, char *err, size_t errlen)
{
	struct ep_binary *b = find_loaded(reg, path);
	if (b)
		return b;
	char limited[640];
	uint64_t room = held_room(reg);
	if (room == 0) {
		/* the binaries held take all there is: evictions make room */
		snprintf(err, errlen,
			 "%s: not read: the binaries held take %.1f MiB, all the %llu MiB "
			 "--binaries-held-max-mib allows",
			 path, (double)reg->held_bytes / (1 << 20),
			 (unsigned long long)(reg->held_max >> 20));
		if (snprintf(limited, sizeof(limited), "%s%s", strcmp(name, path) ? name : "",
			     err + (strcmp(name, path) ? strlen(path) : 0)) < 0)
			limited[0] = '\0';
		note_limited(reg, limited, true);
		return NULL;
	}
	b = binary_open(reg, path, name, room, limited, sizeof(limited), err, errlen);
	if (limited[0])
		note_limited(reg, limited, !b);
	if (!b)
		return NULL;
	b->reg = reg;
	reg->held_bytes += binary_bytes(b);
	if (reg->nfree) {
		/* an evicted binary's index: every user forgot it */
		b->index = reg->free_slots[--reg->nfree];
	} else {
		if (reg->n == reg->cap) {
			size_t cap = reg->cap ? reg->cap * 2 : 16;
			struct ep_binary **bins = realloc(reg->bins, cap * sizeof(*bins));
			if (!bins) {
				binary_free(b);
				snprintf(err, errlen, "%s: out of memory", path);
				return NULL;
			}
			reg->bins = bins;
			reg->cap = cap;
		}
		b->index = (uint32_t)reg->n++;
	}
	reg->bins[b->index] = b;
	b->last_used = reg->epoch;
	index_identity(reg, b);
	reg->stats.opened++;
	if (b->build_id_len) {
		uint64_t h = ep_hash_bytes(b->build_id, b->build_id_len) | 1;
		uint64_t *seen = &reg->evicted_ids[h % EVICTED_IDS];
		if (*seen == h) {
			reg->stats.reread++;
			*seen = 0;
		}
	}
	return b;
}

int ep_binreg_add_file(struct ep_binary_registry *reg, const char *path, char *err, size_t errlen)
{
	struct ep_binary *b = open_registered(reg, path, path, err, errlen);
	if (!b)
		return -1;
	for (size_t i = 0; i < reg->nexplicit; i++)
		if (reg->explicit_files[i] == b->index)
			return 0;
	uint32_t *e = realloc(reg->explicit_files, (reg->nexplicit + 1) * sizeof(*e));
	if (!e) {
		snprintf(err, errlen, "%s: out of memory", path);
		return -1;
	}
	b->pinned = true;
	reg->explicit_files = e;
	reg->explicit_files[reg->nexplicit++] = b->index;
	return 0;
}

/* perf pads build-ids to 20 bytes with zeros; an id equal to another
 * followed only by zero bytes names the same file. */
static bool build_ids_equal(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
	size_t n = alen < blen ? alen : blen;
	if (n == 0 || memcmp(a, b, n) != 0)
		return false;
	const uint8_t *rest = alen > blen ? a : b;
	for (size_t i = n; i < (alen > blen ? alen : blen); i++)
		if (rest[i] != 0)
			return false;
	return true;
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

static bool is_pseudo_path(const char *path)
{
	return path[0] == '[' || strncmp(path, "//anon", 6) == 0 ||
	       strncmp(path, "/memfd:", 7) == 0 || strncmp(path, "anon_inode:", 11) == 0 ||
	       path[0] == '\0';
}

void ep_binreg_proc_failures(const struct ep_binary_registry *reg,
			     struct ep_binreg_proc_failures *out)
{
	*out = reg->proc_failures;
}

/* A live process's file that would not open: counted, the caller logs a
 * summary. Its process had exited when /proc/PID/exe is gone too. */
static void note_proc_failure(struct ep_binary_registry *reg, const char *open_path,
			      const char *err)
{
	struct ep_binreg_proc_failures *f = &reg->proc_failures;
	unsigned pid;
	char exe[64], target[8];
	f->failed++;
	if (sscanf(open_path, "/proc/%u/", &pid) == 1) {
		snprintf(exe, sizeof(exe), "/proc/%u/exe", pid);
		if (readlink(exe, target, sizeof(target)) < 0 && errno == ENOENT)
			f->gone++;
	}
	snprintf(f->last, sizeof(f->last), "%s", err);
}

static struct ep_binary *search(struct ep_binary_registry *reg, const char *recorded,
				const char *open_path, const uint8_t *id, size_t idlen)
{
	char err[512];
	if (idlen > 0) {
		for (size_t i = 0; i < reg->nexplicit; i++) {
			struct ep_binary *b = reg->bins[reg->explicit_files[i]];
			if (build_ids_equal(b->build_id, b->build_id_len, id, idlen))
				return b;
		}
	}
	for (size_t i = 0; i < reg->nexplicit; i++) {
		struct ep_binary *b = reg->bins[reg->explicit_files[i]];
		if (strcmp(b->path, recorded) == 0 ||
		    strcmp(base_name(b->path), base_name(recorded)) == 0)
			return b;
	}
	if (is_pseudo_path(recorded))
		return NULL;
	if (reg->symfs) {
		char path[PATH_MAX];
		if (snprintf(path, sizeof(path), "%s/%s", reg->symfs, recorded) <
		    (int)sizeof(path)) {
			if (access(path, R_OK) == 0) {
				struct ep_binary *b =
				    open_registered(reg, path, recorded, err, sizeof(err));
				if (b)
					return b;
				ep_warn("%s", err);
			}
		}
	}
	if (access(open_path, R_OK) == 0) {
		struct ep_binary *b = open_registered(reg, open_path, recorded, err, sizeof(err));
		if (b)
			return b;
		if (strncmp(open_path, "/proc/", 6) == 0)
			note_proc_failure(reg, open_path, err);
		else
			ep_warn("%s", err);
	}
	return NULL;
}

struct ep_binary *ep_binreg_known(struct ep_binary_registry *reg, const char *recorded_path,
				  const struct stat *st)
{
	/* --binary and --symfs files come first in a lookup: the slow path
	 * decides between them */
	if (reg->nexplicit || reg->symfs)
		return NULL;
	struct ep_binary *b = find_identity(reg, st);
	if (b)
		b->last_used = reg->epoch;
	if (b && !b->recorded_path && !is_pseudo_path(recorded_path))
		b->recorded_path = strdup(recorded_path);
	return b;
}

struct ep_binary *ep_binreg_lookup(struct ep_binary_registry *reg, const char *recorded_path,
				   const uint8_t *build_id, size_t build_id_len)
{
	return ep_binreg_lookup_at(reg, recorded_path, recorded_path, build_id, build_id_len);
}

struct ep_binary *ep_binreg_lookup_at(struct ep_binary_registry *reg, const char *recorded_path,
				      const char *open_path, const uint8_t *build_id,
				      size_t build_id_len)
{
	if (!build_id)
		build_id_len = 0;
	if (build_id_len > BUILD_ID_MAX)
		build_id_len = BUILD_ID_MAX;
	char hex[2 * BUILD_ID_MAX + 1];
	ep_build_id_to_hex(build_id, build_id_len, hex);
	/* The live agent's /proc/PID/... names are new for every process: a
	 * cache by name would grow with every process the machine ever ran.
	 * Files are found by identity instead (open_registered). */
	if (strncmp(open_path, "/proc/", 6) == 0 && strcmp(recorded_path, open_path) != 0) {
		struct ep_binary *b = search(reg, recorded_path, open_path, build_id, build_id_len);
		if (b)
			b->last_used = reg->epoch;
		if (b && !b->recorded_path && !is_pseudo_path(recorded_path))
			b->recorded_path = strdup(recorded_path);
		if (!b && !is_pseudo_path(recorded_path))
			ep_debug("no file for %s (%s)", recorded_path, open_path);
		return b;
	}
	/* the key is what names the file: where it is opened, and its build-id */
	size_t plen = strlen(open_path), hlen = strlen(hex);
	char *key = malloc(plen + hlen + 2);
	if (!key)
		return NULL;
	memcpy(key, open_path, plen + 1);
	memcpy(key + plen + 1, hex, hlen + 1);
	size_t klen = plen + hlen + 1;

	uint64_t h = ep_hash_bytes(key, klen);
	/* linear probing on the hash itself keeps colliding keys apart */
	for (;;) {
		uint64_t *slot = ep_u64map_get(&reg->lookup_index, h);
		if (!slot)
			break;
		struct lookup_entry *e = &reg->lookups[*slot];
		if (memcmp(e->key, key, klen) == 0) {
			free(key);
			if (e->stale) {
				e->bin =
				    search(reg, recorded_path, open_path, build_id, build_id_len);
				e->stale = false;
			}
			if (e->bin)
				e->bin->last_used = reg->epoch;
			return e->bin;
		}
		h++;
	}

	struct ep_binary *b = search(reg, recorded_path, open_path, build_id, build_id_len);
	if (b) {
		b->last_used = reg->epoch;
		if (!b->recorded_path && !is_pseudo_path(recorded_path))
			b->recorded_path = strdup(recorded_path);
		if (build_id_len > 0 && b->build_id_len > 0 &&
		    !build_ids_equal(b->build_id, b->build_id_len, build_id, build_id_len) &&
		    !b->mismatch_warned) {
			b->mismatch_warned = true;
			ep_warn("build-id of %s is %s, the recording expects %s for %s: its "
				"addresses may not match",
				b->path, b->build_id_hex, hex, recorded_path);
		}
	} else if (!is_pseudo_path(recorded_path)) {
		ep_warn("no file for %s%s%s: its code is counted as unresolved (pass --binary "
			"or --symfs)",
			recorded_path, hlen ? " build-id " : "", hex);
	}

	if (reg->nlookups == reg->lookups_cap) {
		size_t cap = reg->lookups_cap ? reg->lookups_cap * 2 : 32;
		struct lookup_entry *l = realloc(reg->lookups, cap * sizeof(*l));
		if (!l) {
			free(key);
			return b;
		}
		reg->lookups = l;
		reg->lookups_cap = cap;
	}
	uint64_t *slot = ep_u64map_upsert(&reg->lookup_index, h, NULL);
	if (!slot) {
		free(key);
		return b;
	}
	*slot = reg->nlookups;
	reg->lookups[reg->nlookups++] = (struct lookup_entry){.key = key, .bin = b};
	return b;
}

/* ---- forgetting binaries ---- */

int ep_binreg_add_user(struct ep_binary_registry *reg, const struct ep_binreg_user *user)
{
	struct ep_binreg_user *u = realloc(reg->users, (reg->nusers + 1) * sizeof(*u));
	if (!u)
		return -1;
	reg->users = u;
	reg->users[reg->nusers++] = *user;
	return 0;
}

void ep_binreg_remove_user(struct ep_binary_registry *reg, void *ctx)
{
	for (size_t i = 0; i < reg->nusers; i++) {
		if (reg->users[i].ctx == ctx) {
			reg->users[i] = reg->users[--reg->nusers];
			return;
		}
	}
}

/* What a binary holds in memory. */
static uint64_t binary_bytes(const struct ep_binary *b)
{
	uint64_t n = sizeof(*b) + b->sym_bytes + b->nloads * sizeof(*b->loads) +
		     b->nloads * sizeof(*b->code);
	for (size_t i = 0; i < b->ncode; i++)
		n += b->code[i].bytes ? b->code[i].size : 0;
	return n;
}

/* Takes b out of the identity index, keeping the colliding entries that
 * were probed past it findable. */
static void unindex_identity(struct ep_binary_registry *reg, const struct ep_binary *b)
{
	uint64_t h = identity_hash(b->dev, b->ino, b->size, &b->mtime);
	for (;; h++) {
		const uint64_t *i = ep_u64map_get(&reg->by_identity, h);
		if (!i)
			return; /* never indexed (out of memory then) */
		if (*i == b->index)
			break;
	}
	ep_u64map_remove(&reg->by_identity, h);
	for (uint64_t k = h + 1;; k++) {
		const uint64_t *i = ep_u64map_get(&reg->by_identity, k);
		if (!i)
			break;
		uint64_t index = *i;
		ep_u64map_remove(&reg->by_identity, k);
		index_identity(reg, reg->bins[index]);
	}
}

struct lru_candidate {
	uint64_t last_used;
	uint32_t index;
};

static int cmp_lru(const void *pa, const void *pb)
{
	const struct lru_candidate *a = pa, *b = pb;
	if (a->last_used != b->last_used)
		return a->last_used < b->last_used ? -1 : 1;
	return a->index < b->index ? -1 : a->index > b->index;
}

/* Past the idle ones: the least recently looked up of the binaries no user
 * needs (state[i] 0) go too, while *bytes is above max_bytes. */
static size_t evict_to_cap(struct ep_binary_registry *reg, uint8_t *state, uint64_t *bytes,
			   uint64_t max_bytes)
{
	size_t n = 0, evicted = 0;
	struct lru_candidate *c = malloc(reg->n * sizeof(*c));
	if (!c)
		return 0;
	for (size_t i = 0; i < reg->n; i++)
		if (reg->bins[i] && state[i] == 0)
			c[n++] = (struct lru_candidate){reg->bins[i]->last_used, (uint32_t)i};
	qsort(c, n, sizeof(*c), cmp_lru);
	for (size_t i = 0; i<n && * bytes> max_bytes; i++) {
		state[c[i].index] = 2;
		*bytes -= binary_bytes(reg->bins[c[i].index]);
		evicted++;
	}
	free(c);
	return evicted;
}

/* Frees the binaries whose evicted[i] is set; every user forgot them. */
static void free_evicted(struct ep_binary_registry *reg, const uint8_t *evicted)
{
	for (size_t i = 0; i < reg->nlookups; i++) {
		struct lookup_entry *e = &reg->lookups[i];
		if (e->bin && evicted[e->bin->index]) {
			e->bin = NULL;
			e->stale = true;
		}
	}
	for (size_t i = 0; i < reg->n; i++)
		if (evicted[i])
			unindex_identity(reg, reg->bins[i]);
	for (size_t i = 0; i < reg->n; i++) {
		if (!evicted[i])
			continue;
		struct ep_binary *b = reg->bins[i];
		if (b->build_id_len) {
			uint64_t h = ep_hash_bytes(b->build_id, b->build_id_len) | 1;
			reg->evicted_ids[h % EVICTED_IDS] = h;
		}
		ep_debug("binary %s (build-id %s) evicted: no process maps it and its counts "
			 "were taken",
			 ep_binary_recorded_path(b), b->build_id_hex);
		reg->held_bytes -= binary_bytes(b);
		binary_free(b);
		reg->bins[i] = NULL;
		if (reg->nfree == reg->free_cap) {
			size_t cap = reg->free_cap ? reg->free_cap * 2 : 64;
			uint32_t *f = realloc(reg->free_slots, cap * sizeof(*f));
			if (!f)
				continue; /* the index stays unused: a hole, not a fault */
			reg->free_slots = f;
			reg->free_cap = cap;
		}
		reg->free_slots[reg->nfree++] = (uint32_t)i;
	}
}

size_t ep_binreg_evict(struct ep_binary_registry *reg, uint64_t max_bytes)
{
	size_t n = reg->n, evicted = 0;
	/* 0: no user needs it; 1: kept; 2: evicted */
	uint8_t *state = n ? calloc(n, 1) : NULL;
	if (!state) {
		reg->epoch++;
		return 0;
	}
	for (size_t u = 0; u < reg->nusers; u++)
		reg->users[u].mark(reg->users[u].ctx, state, n);
	uint64_t bytes = 0;
	for (size_t i = 0; i < n; i++) {
		struct ep_binary *b = reg->bins[i];
		if (!b)
			continue;
		if (b->pinned)
			state[i] = 1;
		if (state[i] == 0 && b->last_used < reg->epoch) {
			state[i] = 2;
			evicted++;
		} else {
			bytes += binary_bytes(b);
		}
	}
	if (max_bytes && bytes > max_bytes)
		evicted += evict_to_cap(reg, state, &bytes, max_bytes);
	if (evicted) {
		for (size_t i = 0; i < n; i++)
			state[i] = state[i] == 2;
		for (size_t u = 0; u < reg->nusers; u++)
			reg->users[u].forget(reg->users[u].ctx, state, n);
		free_evicted(reg, state);
		reg->stats.evicted += evicted;
	}
	free(state);
	reg->epoch++;
	return evicted;
}

void ep_binreg_stats(const struct ep_binary_registry *reg, struct ep_binreg_stats *out)
{
	*out = reg->stats;
	out->held = 0;
	out->bytes_held = 0;
	for (size_t i = 0; i < reg->n; i++) {
		if (reg->bins[i]) {
			out->held++;
			out->bytes_held += binary_bytes(reg->bins[i]);
		}
	}
}
