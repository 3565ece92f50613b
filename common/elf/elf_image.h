/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An ELF file held in memory, checked and reduced to what the collector
 * needs to draw a binary's code (proto/binaries.proto BinaryImage): its
 * build-id (GNU note), arch, executable PT_LOAD segments' bytes and function
 * symbols (.symtab, else .dynsym). Files come from outside (uploads), so
 * every offset and size is checked against the file before it is read.
 */
#ifndef EP_ELF_IMAGE_H
#define EP_ELF_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "binaries.pb-c.h"

/* The image of the ELF file elf[len], named path (may be NULL), or NULL with
 * err saying why it is refused: not ELF, not 64-bit, no program headers, no
 * GNU build-id note, an arch we cannot decode, no executable code, a
 * segment or the symbol table past the end of the file. uploaded_s and
 * source are left for the caller. Free with ep_elf_image_free(). */
Edgeprof__V1__BinaryImage *ep_elf_image_read(const uint8_t *elf, size_t len, const char *path,
					     char *err, size_t errlen);
void ep_elf_image_free(Edgeprof__V1__BinaryImage *img);

/* Serialised size and bytes (malloc'd) of an image; NULL when out of memory. */
uint8_t *ep_elf_image_pack(const Edgeprof__V1__BinaryImage *img, size_t *len);
/* NULL with err when the bytes are no image or an unusable one. */
Edgeprof__V1__BinaryImage *ep_elf_image_unpack(const uint8_t *buf, size_t len, char *err,
					       size_t errlen);

#endif
