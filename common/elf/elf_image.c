/* SPDX-License-Identifier: Apache-2.0 */
#include "common/elf/elf_image.h"

#include <gelf.h>
#include <libelf.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/elf/elf_note.h"
#include "common/elf/elf_symbols.h"
#include "common/util/arch.h"
#include "common/util/log.h"

/* Built with malloc in the layout protobuf-c's free_unpacked frees (the
 * system allocator), so one free serves read and unpacked images alike. */
void ep_elf_image_free(Edgeprof__V1__BinaryImage *img)
{
	if (img)
		edgeprof__v1__binary_image__free_unpacked(img, NULL);
}

/* Files that met a bound since the start (ep_elf_image_counters). */
static _Atomic uint64_t limited_headers, limited_code, limited_symbols;

void ep_elf_image_counters(struct ep_elf_image_counters *out)
{
	out->headers = atomic_load(&limited_headers);
	out->code = atomic_load(&limited_code);
	out->symbols = atomic_load(&limited_symbols);
}

void ep_elf_image_metrics(FILE *out)
{
	struct ep_elf_image_counters c;
	ep_elf_image_counters(&c);
	fprintf(out,
		"# HELP edgeprof_images_limited_total ELF files sent for their code (uploads, "
		"debuginfod) that met a read bound: headers = more section or program headers "
		"than --max-image-symbols-mib allows reading, refused; code = executable "
		"segments holding more bytes than the file (overlapping) or than "
		"--max-binary-mib, refused; symbols = tables or symbols past "
		"--max-image-symbols-mib left out, the rest kept.\n"
		"# TYPE edgeprof_images_limited_total counter\n"
		"edgeprof_images_limited_total{limit=\"headers\"} %llu\n"
		"edgeprof_images_limited_total{limit=\"code\"} %llu\n"
		"edgeprof_images_limited_total{limit=\"symbols\"} %llu\n",
		(unsigned long long)c.headers, (unsigned long long)c.code,
		(unsigned long long)c.symbols);
}

/* ep_elf_image_read's bounds: set once at start, before any thread reads */
static struct ep_elf_limits read_limits = {
    .code_bytes = UINT64_MAX, /* no more than the file, which the caller bounds */
    .table_bytes = (uint64_t)EP_ELF_DEFAULT_TABLES_MIB << 20,
    .code_knob = "--max-binary-mib",
    .table_knob = "--max-image-symbols-mib"};

void ep_elf_image_set_limits(uint64_t code_bytes, uint64_t table_bytes)
{
	if (code_bytes)
		read_limits.code_bytes = code_bytes;
	if (table_bytes)
		read_limits.table_bytes = table_bytes;
}

static double mib(uint64_t bytes)
{
	return (double)bytes / (1 << 20);
}

/* The build-id note's bytes as lowercase hex, or false without one. */
static bool read_build_id(Elf *elf, size_t nphdr, size_t len, struct ep_elf_budget *budget,
			  char *hex)
{
	uint8_t id[EP_ELF_BUILD_ID_MAX];
	size_t n;
	if (!ep_elf_build_id(elf, nphdr, len, budget, id, &n))
		return false;
	ep_build_id_to_hex(id, n, hex);
	return true;
}

/* Every executable segment's bytes, refused whole when they are more than
 * the file holds (segments covering the same bytes again: no linker makes
 * them, and each would be one more copy of the file) or than the bound. */
static int read_code(Elf *elf, size_t nphdr, const uint8_t *file, size_t len,
		     const struct ep_elf_limits *lim, Edgeprof__V1__BinaryImage *img, char *err,
		     size_t errlen)
{
	uint64_t total = 0;
	size_t ncode = 0;
	for (size_t i = 0; i < nphdr; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD ||
		    !(ph.p_flags & PF_X) || ph.p_filesz == 0)
			continue;
		if (ph.p_offset > len || ph.p_filesz > len - ph.p_offset) {
			snprintf(
			    err, errlen,
			    "executable segment at file offset 0x%llx (0x%llx bytes) runs past "
			    "the end of the file (%zu bytes): truncated?",
			    (unsigned long long)ph.p_offset, (unsigned long long)ph.p_filesz, len);
			return -1;
		}
		if (ph.p_filesz > UINT64_MAX - ph.p_vaddr) {
			/* the decoder's [start, end) would end before it starts */
			snprintf(err, errlen,
				 "executable segment at 0x%llx (0x%llx bytes) ends past 2^64",
				 (unsigned long long)ph.p_vaddr, (unsigned long long)ph.p_filesz);
			return -1;
		}
		/* each segment is at most the file: no sum of them wraps */
		total += ph.p_filesz;
		ncode++;
	}
	if (ncode == 0) {
		snprintf(err, errlen, "no executable segment: nothing to disassemble");
		return -1;
	}
	if (total > len || total > lim->code_bytes) {
		atomic_fetch_add(&limited_code, 1);
		if (total > len)
			snprintf(err, errlen,
				 "executable segments hold %llu bytes in all (%zu segments), more "
				 "than the file's %zu bytes: they overlap (the same bytes copied "
				 "again)",
				 (unsigned long long)total, ncode, len);
		else
			snprintf(err, errlen,
				 "executable segments hold %llu bytes in all, more than the %.0f "
				 "MiB %s allows",
				 (unsigned long long)total, mib(lim->code_bytes),
				 lim->code_knob ? lim->code_knob : "the limit");
		return -1;
	}
	img->code = calloc(ncode, sizeof(*img->code));
	if (!img->code)
		goto oom;
	for (size_t i = 0; i < nphdr && img->n_code < ncode; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD ||
		    !(ph.p_flags & PF_X) || ph.p_filesz == 0)
			continue;
		Edgeprof__V1__CodeBytes *cb = malloc(sizeof(*cb));
		uint8_t *bytes = malloc(ph.p_filesz);
		if (!cb || !bytes) {
			free(cb);
			free(bytes);
			goto oom;
		}
		edgeprof__v1__code_bytes__init(cb);
		memcpy(bytes, file + ph.p_offset, ph.p_filesz);
		cb->vaddr = ph.p_vaddr;
		cb->bytes.data = bytes;
		cb->bytes.len = ph.p_filesz;
		img->code[img->n_code++] = cb;
	}
	return 0;
oom:
	snprintf(err, errlen, "out of memory");
	return -1;
}

/* The functions (common/elf/elf_symbols.h: named as the agent names
 * them), as many as the budget holds, the image's copy of each charged
 * with them. */
static int read_symbols(Elf *elf, struct ep_elf_budget *budget, Edgeprof__V1__BinaryImage *img)
{
	static const struct ep_elf_symbol_copy copy = {
	    .per_symbol = sizeof(Edgeprof__V1__ImageSymbol) + sizeof(Edgeprof__V1__ImageSymbol *),
	    .names = true};
	struct ep_elf_symtab t;
	if (ep_elf_symtab_read(elf, budget, &copy, &t) != 0)
		return -1;
	int rc = -1;
	img->symbols = calloc(t.n ? t.n : 1, sizeof(*img->symbols));
	if (!img->symbols)
		goto out;
	for (size_t i = 0; i < t.n; i++) {
		Edgeprof__V1__ImageSymbol *s = malloc(sizeof(*s));
		char *name = strdup(t.syms[i].name);
		if (!s || !name) {
			free(s);
			free(name);
			goto out;
		}
		edgeprof__v1__image_symbol__init(s);
		s->name = name;
		s->start = t.syms[i].start;
		s->size = t.syms[i].size;
		s->local_index = t.syms[i].local_index;
		img->symbols[img->n_symbols++] = s;
	}
	rc = 0;
out:
	ep_elf_symtab_free(&t);
	return rc;
}

/* What of the file's tables the budget left out, for the note. */
static void say_limited(const struct ep_elf_budget *budget, char *note, size_t notelen)
{
	int n = 0;
	if (budget->refused)
		n = snprintf(note, notelen, "%llu tables not read (the first: %s)",
			     (unsigned long long)budget->refused, budget->first);
	if (budget->dropped && n >= 0 && (size_t)n < notelen)
		snprintf(note + n, notelen - (size_t)n, "%s%llu of %llu function symbols not kept",
			 n ? ", " : "", (unsigned long long)budget->dropped,
			 (unsigned long long)budget->wanted);
	size_t used = strlen(note);
	if (budget->refused || budget->dropped)
		snprintf(note + used, notelen - used,
			 ": past the %.0f MiB %s allows one binary's tables", mib(budget->limit),
			 budget->knob ? budget->knob : "the limit");
	used = strlen(note);
	if (budget->long_names)
		snprintf(note + used, notelen - used,
			 "%s%llu function symbols not kept for a name of more than %d bytes",
			 used ? "; " : "", (unsigned long long)budget->long_names,
			 EP_ELF_MAX_SYMBOL_NAME);
}

struct mem_file {
	const uint8_t *bytes;
	size_t len;
};

static bool mem_read(void *ctx, uint64_t off, void *buf, size_t len)
{
	const struct mem_file *f = ctx;
	if (off > f->len || len > f->len - off)
		return false;
	memcpy(buf, f->bytes + off, len);
	return true;
}

Edgeprof__V1__BinaryImage *ep_elf_image_read(const uint8_t *file, size_t len, const char *path,
					     char *err, size_t errlen)
{
	char note[384];
	Edgeprof__V1__BinaryImage *img = ep_elf_image_read_limited(file, len, path, &read_limits,
								   note, sizeof(note), err, errlen);
	if (img && note[0])
		ep_warn("binary %s (build-id %s): %s", path && *path ? path : "(no path)",
			img->build_id, note);
	return img;
}

Edgeprof__V1__BinaryImage *ep_elf_image_read_limited(const uint8_t *file, size_t len,
						     const char *path,
						     const struct ep_elf_limits *lim, char *note,
						     size_t notelen, char *err, size_t errlen)
{
	if (notelen)
		note[0] = '\0';
	if (elf_version(EV_CURRENT) == EV_NONE) {
		snprintf(err, errlen, "libelf: %s", elf_errmsg(-1));
		return NULL;
	}
	/* libelf sizes its own tables from the header counts: checked first */
	struct ep_elf_budget budget;
	ep_elf_budget_init(&budget, lim);
	struct mem_file mf = {file, len};
	int checked = ep_elf_check_headers(mem_read, &mf, len, &budget, err, errlen);
	if (checked != 0) {
		if (checked == -2)
			atomic_fetch_add(&limited_headers, 1);
		return NULL;
	}
	Edgeprof__V1__BinaryImage *img = malloc(sizeof(*img));
	if (!img) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	edgeprof__v1__binary_image__init(img);
	/* libelf wants a writable image; it does not write it */
	Elf *elf = elf_memory((char *)(uintptr_t)file, len);
	GElf_Ehdr eh;
	char hex[2 * EP_ELF_BUILD_ID_MAX + 1] = "";
	size_t nphdr = 0;
	if (!elf || elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh)) {
		snprintf(err, errlen, "not an ELF file");
		goto fail;
	}
	if (gelf_getclass(elf) != ELFCLASS64) {
		snprintf(err, errlen, "not a 64-bit ELF file");
		goto fail;
	}
	enum ep_arch arch = eh.e_machine == EM_X86_64	 ? EP_ARCH_X86_64
			    : eh.e_machine == EM_AARCH64 ? EP_ARCH_AARCH64
							 : EP_ARCH_UNKNOWN;
	if (arch == EP_ARCH_UNKNOWN) {
		snprintf(err, errlen, "ELF machine %u: only x86_64 and aarch64 are decoded",
			 (unsigned)eh.e_machine);
		goto fail;
	}
	if (elf_getphdrnum(elf, &nphdr) != 0 || nphdr == 0) {
		snprintf(err, errlen,
			 "no program headers (not an executable or shared library: an object "
			 "file?)");
		goto fail;
	}
	if (!read_build_id(elf, nphdr, len, &budget, hex)) {
		snprintf(err, errlen, "no GNU build-id note (link with -Wl,--build-id)");
		goto fail;
	}
	img->build_id = strdup(hex);
	img->arch = strdup(ep_arch_name(arch));
	img->path = strdup(path ? path : "");
	if (!img->build_id || !img->arch || !img->path) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	img->file_size = len;
	if (read_code(elf, nphdr, file, len, lim, img, err, errlen) != 0)
		goto fail;
	if (read_symbols(elf, &budget, img) != 0) {
		snprintf(err, errlen, "out of memory reading symbols");
		goto fail;
	}
	if (budget.refused || budget.dropped || budget.long_names) {
		atomic_fetch_add(&limited_symbols, 1);
		say_limited(&budget, note, notelen);
	}
	elf_end(elf);
	ep_elf_budget_release(&budget);
	return img;
fail:
	if (elf)
		elf_end(elf);
	ep_elf_budget_release(&budget);
	ep_elf_image_free(img);
	return NULL;
}

uint8_t *ep_elf_image_pack(const Edgeprof__V1__BinaryImage *img, size_t *len)
{
	*len = edgeprof__v1__binary_image__get_packed_size(img);
	uint8_t *buf = malloc(*len ? *len : 1);
	if (buf)
		edgeprof__v1__binary_image__pack(img, buf);
	return buf;
}

Edgeprof__V1__BinaryImage *ep_elf_image_unpack(const uint8_t *buf, size_t len, char *err,
					       size_t errlen)
{
	Edgeprof__V1__BinaryImage *img = edgeprof__v1__binary_image__unpack(NULL, len, buf);
	if (!img) {
		snprintf(err, errlen, "stored image does not decode");
		return NULL;
	}
	if (ep_arch_from_name(img->arch) == EP_ARCH_UNKNOWN || img->n_code == 0) {
		snprintf(err, errlen, "stored image has arch '%s' and %zu code segments", img->arch,
			 img->n_code);
		ep_elf_image_free(img);
		return NULL;
	}
	return img;
}
