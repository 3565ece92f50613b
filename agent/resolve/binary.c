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
#include "common/elf/elf_symbols.h"
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
	struct ep_elf_symtab symtab;
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
	ep_elf_symtab_free(&b->symtab);
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
	return ep_elf_symtab_at(&bin->symtab, vaddr);
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
	if (ep_elf_symtab_read(elf, &budget, NULL, &b->symtab) != 0 ||
	    ep_elf_data_in_code(elf, &budget, &b->data, &b->ndata) != 0) {
		snprintf(err, errlen, "%s: out of memory reading symbols", path);
		goto out;
	}
	b->sym_bytes = b->symtab.bytes + b->ndata * sizeof(*b->data);
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
