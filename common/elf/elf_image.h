/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An ELF file held in memory, checked and reduced to what the collector
 * needs to draw a binary's code (proto/binaries.proto BinaryImage): its
 * build-id (GNU note), arch, executable PT_LOAD segments' bytes and
 * functions, named as the agent names them (common/elf/elf_symbols.h:
 * NAME/N locals, SYM@PLT). Files come from outside (uploads), so every
 * offset and size is checked against the file before it is read.
 */
#ifndef EP_ELF_IMAGE_H
#define EP_ELF_IMAGE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "binaries.pb-c.h"
#include "common/elf/elf_budget.h"

/* The image of the ELF file elf[len], named path (may be NULL), or NULL with
 * err saying why it is refused: not ELF, not 64-bit, no program headers, no
 * GNU build-id note, an arch we cannot decode, no executable code, a
 * segment or the symbol table past the end of the file, more section or
 * program headers than lim->table_bytes allows reading, executable
 * segments holding more bytes than the file (overlapping: each would be
 * another copy of it) or than lim->code_bytes. Symbols past what
 * lim->table_bytes holds are not kept: the image is returned, and note (""
 * otherwise) says what was left out and the bound. uploaded_s and source
 * are left for the caller. Free with ep_elf_image_free(). */
Edgeprof__V1__BinaryImage *ep_elf_image_read_limited(const uint8_t *elf, size_t len,
						     const char *path,
						     const struct ep_elf_limits *lim, char *note,
						     size_t notelen, char *err, size_t errlen);
/* The same with the bounds ep_elf_image_set_limits() set (by default:
 * code no more than the file, tables EP_ELF_DEFAULT_TABLES_MIB), saying
 * what was left out as a warning naming path. */
Edgeprof__V1__BinaryImage *ep_elf_image_read(const uint8_t *elf, size_t len, const char *path,
					     char *err, size_t errlen);
/* The collector's --max-binary-mib and --max-image-symbols-mib (0: the
 * default kept), for ep_elf_image_read(); called once at start, before
 * any thread reads. */
void ep_elf_image_set_limits(uint64_t code_bytes, uint64_t table_bytes);

/* Files ep_elf_image_read_limited() met a bound in, since the start:
 * refused for their header counts, refused for their code, read with
 * symbols (or tables) left out. For the collector's /metrics. */
struct ep_elf_image_counters {
	uint64_t headers, code, symbols;
};
void ep_elf_image_counters(struct ep_elf_image_counters *out);
/* Those counters in Prometheus' text format (edgeprof_images_limited_total). */
void ep_elf_image_metrics(FILE *out);
void ep_elf_image_free(Edgeprof__V1__BinaryImage *img);

/* Serialised size and bytes (malloc'd) of an image; NULL when out of memory. */
uint8_t *ep_elf_image_pack(const Edgeprof__V1__BinaryImage *img, size_t *len);
/* NULL with err when the bytes are no image or an unusable one. */
Edgeprof__V1__BinaryImage *ep_elf_image_unpack(const uint8_t *buf, size_t len, char *err,
					       size_t errlen);

#endif
