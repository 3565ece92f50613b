/* SPDX-License-Identifier: Apache-2.0 */
/* One ELF file as the agent reads it: its segments, its code (now or at
 * first use), build-id and functions (common/elf), within its limits. */
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

#include "agent/resolve/binary_internal.h"
#include "common/elf/elf_mapsyms.h"
#include "common/util/log.h"
#include "common/util/regular_file.h"

void ep_binary_free(struct ep_binary *b)
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
	if (b->bat)
		ep_bat_free(b->bat);
	free(b->bat);
	free(b->path);
	free(b->recorded_path);
	free(b);
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

/* Reads exactly n bytes at offset, or fails saying why. */
static int read_at(int fd, const char *path, uint8_t *buf, size_t n, uint64_t offset, char *err,
		   size_t errlen)
{
	size_t got = ep_pread_full(fd, buf, n, offset);
	if (got == n)
		return 0;
	snprintf(err, errlen, "%s: read failed at byte %llu: %s", path,
		 (unsigned long long)(offset + got),
		 errno ? strerror(errno) : "file shrank while reading");
	return -1;
}

/* The code segments of b cut to what the binaries held leave: *cut gets
 * the bytes left out. */
static void fit_code_to_room(struct ep_binary *b, uint64_t *cut)
{
	uint64_t room = ep_binreg_room(b->reg), total = 0;
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

/* The code of a binary opened lazily, read now from the same file: the
 * one opened then (device, inode, size and mtime unchanged), or none. */
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
			     (double)ep_binreg_room(b->reg) / (1 << 20), HELD_KNOB) < 0)
			msg[0] = '\0';
		ep_binreg_note_limited(b->reg, msg, false);
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

/* ep_elf_read_fn over a descriptor (ctx: the int) */
static bool fd_read(void *ctx, uint64_t off, void *buf, size_t len)
{
	return ep_pread_full(*(const int *)ctx, buf, len, off) == len;
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
	if (!code_cut && !budget->refused && !budget->dropped && !budget->long_names)
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
	if (budget->long_names && n >= 0 && (size_t)n < len)
		n += snprintf(msg + n, len - (size_t)n,
			      " %llu symbols not kept for a name of more than %d bytes;",
			      (unsigned long long)budget->long_names, EP_ELF_MAX_SYMBOL_NAME);
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
struct ep_binary *ep_binary_open(const char *path, const char *name,
				 const struct ep_elf_limits *lim, bool lazy_code, uint64_t room,
				 char *limited, size_t limitedlen, char *err, size_t errlen)
{
	/* what is said of limits names the file as its process does too */
	char shown[PATH_MAX + 64];
	if (strcmp(name, path) != 0)
		snprintf(shown, sizeof(shown), "%s (%s)", name, path);
	else
		snprintf(shown, sizeof(shown), "%s", path);
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
	int checked = ep_elf_check_headers(fd_read, &fd, size, &budget, why, sizeof(why));
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
	b->code_offsets = lazy_code ? calloc(nphdr, sizeof(*b->code_offsets)) : NULL;
	b->code_pending = lazy_code;
	if (!b->path || !b->loads || !b->code || (lazy_code && !b->code_offsets)) {
		snprintf(err, errlen, "%s: out of memory", path);
		goto out;
	}
	bool has_interp = false;
	if (read_loads(fd, elf, nphdr, code_max, lazy_code, b, &has_interp, &code_total, &code_cut,
		       err, errlen) != 0)
		goto out;
	/* the code read leaves less for the tables */
	if (!lazy_code && room - code_total < budget.limit) {
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
		ep_binary_free(b);
		return NULL;
	}
	return b;
}

uint64_t ep_binary_bytes(const struct ep_binary *b)
{
	uint64_t n = sizeof(*b) + b->sym_bytes + (b->bat ? b->bat->bytes : 0) +
		     b->nloads * sizeof(*b->loads) + b->nloads * sizeof(*b->code);
	for (size_t i = 0; i < b->ncode; i++)
		n += b->code[i].bytes ? b->code[i].size : 0;
	return n;
}
