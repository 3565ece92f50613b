/* SPDX-License-Identifier: Apache-2.0 */
#include "common/elf/elf_image.h"

#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/elf/elf_note.h"
#include "common/util/arch.h"

/* Built with malloc in the layout protobuf-c's free_unpacked frees (the
 * system allocator), so one free serves read and unpacked images alike. */
void ep_elf_image_free(Edgeprof__V1__BinaryImage *img)
{
	if (img)
		edgeprof__v1__binary_image__free_unpacked(img, NULL);
}

/* The build-id note's bytes as lowercase hex, or false without one. */
static bool read_build_id(Elf *elf, size_t nphdr, size_t len, char *hex)
{
	uint8_t id[EP_ELF_BUILD_ID_MAX];
	size_t n;
	if (!ep_elf_build_id(elf, nphdr, len, id, &n))
		return false;
	for (size_t i = 0; i < n; i++)
		snprintf(hex + 2 * i, 3, "%02x", id[i]);
	return true;
}

static int read_code(Elf *elf, size_t nphdr, const uint8_t *file, size_t len,
		     Edgeprof__V1__BinaryImage *img, char *err, size_t errlen)
{
	img->code = calloc(nphdr, sizeof(*img->code));
	if (!img->code)
		goto oom;
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
	if (img->n_code == 0) {
		snprintf(err, errlen, "no executable segment: nothing to disassemble");
		return -1;
	}
	return 0;
oom:
	snprintf(err, errlen, "out of memory");
	return -1;
}

static int cmp_sym(const void *a, const void *b)
{
	const Edgeprof__V1__ImageSymbol *x = *(Edgeprof__V1__ImageSymbol *const *)a;
	const Edgeprof__V1__ImageSymbol *y = *(Edgeprof__V1__ImageSymbol *const *)b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* Function symbols of the first table of type (SHT_SYMTAB, SHT_DYNSYM) */
static int read_symbols(Elf *elf, unsigned type, Edgeprof__V1__BinaryImage *img)
{
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != type || sh.sh_entsize == 0)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		if (!d)
			continue;
		size_t count = d->d_size / sh.sh_entsize;
		free(img->symbols); /* an empty .symtab's, before .dynsym */
		img->symbols = calloc(count ? count : 1, sizeof(*img->symbols));
		if (!img->symbols)
			return -1;
		for (size_t i = 0; i < count; i++) {
			GElf_Sym sym;
			if (!gelf_getsym(d, (int)i, &sym))
				continue;
			int t = GELF_ST_TYPE(sym.st_info);
			if ((t != STT_FUNC && t != STT_GNU_IFUNC) || sym.st_shndx == SHN_UNDEF ||
			    sym.st_value == 0)
				continue;
			const char *name = elf_strptr(elf, sh.sh_link, sym.st_name);
			Edgeprof__V1__ImageSymbol *s = malloc(sizeof(*s));
			char *copy = strdup(name ? name : "");
			if (!s || !copy) {
				free(s);
				free(copy);
				return -1;
			}
			edgeprof__v1__image_symbol__init(s);
			s->name = copy;
			s->start = sym.st_value;
			s->size = sym.st_size;
			img->symbols[img->n_symbols++] = s;
		}
		qsort(img->symbols, img->n_symbols, sizeof(*img->symbols), cmp_sym);
		return 0;
	}
	return 0;
}

Edgeprof__V1__BinaryImage *ep_elf_image_read(const uint8_t *file, size_t len, const char *path,
					     char *err, size_t errlen)
{
	if (elf_version(EV_CURRENT) == EV_NONE) {
		snprintf(err, errlen, "libelf: %s", elf_errmsg(-1));
		return NULL;
	}
	Edgeprof__V1__BinaryImage *img = malloc(sizeof(*img));
	if (!img) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	edgeprof__v1__binary_image__init(img);
	/* libelf wants a writable image; it does not write it */
	Elf *elf = len >= EI_NIDENT ? elf_memory((char *)(uintptr_t)file, len) : NULL;
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
	if (!read_build_id(elf, nphdr, len, hex)) {
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
	if (read_code(elf, nphdr, file, len, img, err, errlen) != 0)
		goto fail;
	if (read_symbols(elf, SHT_SYMTAB, img) != 0 ||
	    (img->n_symbols == 0 && read_symbols(elf, SHT_DYNSYM, img) != 0)) {
		snprintf(err, errlen, "out of memory reading symbols");
		goto fail;
	}
	elf_end(elf);
	return img;
fail:
	if (elf)
		elf_end(elf);
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
