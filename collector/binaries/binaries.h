/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Binaries by build-id at the collector (issue 13): the code and function
 * symbols of each profiled binary, so the UI can draw its control-flow
 * graphs and disassembly. An ELF file comes in (edgeprof upload, or an
 * agent sending what it read), is checked (an ELF we can decode, its GNU
 * build-id note equal to the build-id it was sent for, at most max_file
 * bytes), reduced to its image (common/elf/elf_image.h) and kept in the
 * store: the first image of a build-id stays, later ones are answered
 * "already here". Images read back are cached (a few, least recently used
 * goes) so a page does not decode a blob per request.
 */
#ifndef EP_BINARIES_H
#define EP_BINARIES_H

#include <stddef.h>
#include <stdint.h>

#include "binaries.pb-c.h"
#include "collector/store/store.h"
#include "common/decode/decoder.h"

#define EP_BINARIES_DEFAULT_MAX_FILE (256u << 20)

struct ep_binaries;

/* store is borrowed; max_file 0: EP_BINARIES_DEFAULT_MAX_FILE. */
struct ep_binaries *ep_binaries_new(struct ep_store *store, size_t max_file);
void ep_binaries_free(struct ep_binaries *b);
size_t ep_binaries_max_file(const struct ep_binaries *b);

/* An uploaded ELF file elf[len]. claimed_build_id (NULL or "": none) must
 * equal its note's; path and source ("upload", "agent") are kept with it.
 * Returns the HTTP status: 201 stored, 200 the store had this build-id
 * already, 400 refused (msg says why), 413 too large, 503 the store failed.
 * msg gets a one-line answer either way. */
int ep_binaries_upload(struct ep_binaries *b, const uint8_t *elf, size_t len,
		       const char *claimed_build_id, const char *path, const char *source,
		       char *msg, size_t msglen);

/* Binaries not uploaded are fetched from debuginfod servers (urls: space
 * separated, as DEBUGINFOD_URLS; NULL or "": $DEBUGINFOD_URLS, and none
 * when that is unset too) the first time a page needs their code
 * (ep_binaries_code), checked like an upload and kept. A build-id no server
 * has is asked again after 10 minutes, not at every page. Call before any
 * other thread uses b. */
void ep_binaries_set_debuginfod(struct ep_binaries *b, const char *urls);

/* 1 when build_id's image is kept, 0 when not, -1 with err. */
int ep_binaries_has(struct ep_binaries *b, const char *build_id, char *err, size_t errlen);

/* One binary's code for drawing: the image (shared, read-only) and a
 * decoder of its own (not thread-safe: one handle per request). */
struct ep_binary_code;

/* NULL with err "" when no image of build_id is kept, NULL with err saying
 * why on failure. Release every handle. */
struct ep_binary_code *ep_binaries_code(struct ep_binaries *b, const char *build_id, char *err,
					size_t errlen);
void ep_binary_code_release(struct ep_binary_code *c);
const Edgeprof__V1__BinaryImage *ep_binary_code_image(const struct ep_binary_code *c);
struct ep_decoder *ep_binary_code_decoder(struct ep_binary_code *c);
/* The function symbol containing vaddr (a size-0 symbol: at vaddr only),
 * or NULL. */
const Edgeprof__V1__ImageSymbol *ep_binary_code_symbol_at(const struct ep_binary_code *c,
							  uint64_t vaddr);

#endif
