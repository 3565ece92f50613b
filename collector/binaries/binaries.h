/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Binaries by build-id at the collector (issue 13): the code and function
 * symbols of each profiled binary, so the UI can draw its control-flow
 * graphs and disassembly. An ELF file comes in (edgeprof upload, an agent
 * sending what it read, or debuginfod), is checked (filed under a build-id
 * its GNU build-id note must equal, of the arch it was said to be, an ELF
 * file we can decode, at most max_file bytes), reduced to its image
 * (common/elf/elf_image.h) and kept in the store.
 *
 * Trust (issue 32): a build-id note is only bytes, and an agent sends the
 * file a process it profiles mapped, so any container can have a file that
 * carries another binary's build-id and other code sent. An agent's image
 * is therefore provisional: kept and drawn (marked so) until an
 * authenticated upload (`edgeprof upload`, source=upload; the server
 * decides who may say so) or debuginfod brings that build-id's code, which
 * replaces it; a provisional image never replaces a trusted one, and of
 * equal trust the first stays. Images read back are cached (a few, least
 * recently used goes) so a page does not decode a blob per request.
 */
#ifndef EP_BINARIES_H
#define EP_BINARIES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "binaries.pb-c.h"
#include "collector/store/store.h"
#include "common/decode/decoder.h"
#include "common/elf/elf_symbols.h"

/* The largest ELF file taken, and the largest image kept of one: at most
 * about four times this is held while one is decoded and stored (the body,
 * its code, the packed image, ClickHouse's hex of it), one at a time, and
 * the UI's cache holds four images: 64 MiB keeps that within the
 * collector's 1 GiB beside everything else (docs/limits.md). */
#define EP_BINARIES_DEFAULT_MAX_FILE (64u << 20)

struct ep_binaries;

/* store is borrowed; max_file 0: EP_BINARIES_DEFAULT_MAX_FILE. */
struct ep_binaries *ep_binaries_new(struct ep_store *store, size_t max_file);
void ep_binaries_free(struct ep_binaries *b);
size_t ep_binaries_max_file(const struct ep_binaries *b);

/* Who sent an image, and so how far it is trusted (ep_image_trust): an
 * agent's is provisional, an authenticated upload's and debuginfod's are
 * trusted. */
enum ep_image_source { EP_IMAGE_FROM_AGENT, EP_IMAGE_FROM_UPLOAD, EP_IMAGE_FROM_DEBUGINFOD };

/* What an upload says of itself, checked against the file. */
struct ep_image_claim {
	const char *build_id; /* the id it is filed under: required, lowercase hex */
	const char *arch;     /* "x86_64", "aarch64"; NULL or "": not said */
	const char *path;     /* where it came from (informative) */
	enum ep_image_source source;
};

/* An uploaded ELF file elf[len], as claim says. Returns the HTTP status:
 * 201 stored (also in place of a provisional image), 200 the store kept
 * the image it had (as trusted, or this one is not more trusted), 400
 * refused (msg says why, naming what was claimed and what the file says),
 * 413 too large, 503 the store failed. msg gets a one-line answer either
 * way. Uploads are decoded one at a time: the memory one takes is bounded
 * by max_file, not multiplied by the clients. */
int ep_binaries_upload(struct ep_binaries *b, const uint8_t *elf, size_t len,
		       const struct ep_image_claim *claim, char *msg, size_t msglen);

/* What became of images sent, for the collector's /metrics. */
enum ep_image_result {
	EP_IMAGE_STORED,      /* a new build-id's */
	EP_IMAGE_REPLACED,    /* trusted, in place of a provisional one */
	EP_IMAGE_KEPT,	      /* the store kept the one it had */
	EP_IMAGE_REFUSED,     /* not what it claimed, or not an ELF file we decode */
	EP_IMAGE_TOO_LARGE,   /* over max_file */
	EP_IMAGE_FORBIDDEN,   /* claimed a source its sender may not (the server's call) */
	EP_IMAGE_STORE_ERROR, /* the store failed */
	EP_IMAGE_NRESULTS
};
/* Counts an upload the server refused before ep_binaries_upload saw it. */
void ep_binaries_count(struct ep_binaries *b, enum ep_image_result r);
/* The counters and the debuginfod cache's state, as Prometheus text. */
void ep_binaries_metrics(struct ep_binaries *b, FILE *out);

/* Binaries not uploaded, or only by agents (provisional), are fetched from
 * debuginfod servers (urls: space separated, as DEBUGINFOD_URLS; NULL or
 * "": $DEBUGINFOD_URLS, and none when that is unset too) the first time a
 * page needs their code (ep_binaries_code), checked like an upload and kept
 * as trusted. A build-id no server has is asked again after 10 minutes, not
 * at every page.
 *
 * libdebuginfod keeps what it fetched in its cache directory and answers
 * from it without asking a server, so whoever can write there chooses the
 * code: the directory ($DEBUGINFOD_CACHE_PATH, else
 * $TMPDIR/edgeprof-debuginfod-UID) must be this process's, mode 0700, and
 * is created so when missing. One that is not (another owner, a symbolic
 * link, group or other permissions) is refused with a warning naming it,
 * and a fresh private directory made for this process (mkdtemp, removed by
 * ep_binaries_free) is used instead; when none can be made, debuginfod is
 * not asked. Call before any other thread uses b. */
void ep_binaries_set_debuginfod(struct ep_binaries *b, const char *urls);
/* The cache directory debuginfod's client uses, NULL when it is not asked. */
const char *ep_binaries_debuginfod_cache(const struct ep_binaries *b);

/* The trust of build_id's image (EP_IMAGE_PROVISIONAL, EP_IMAGE_TRUSTED),
 * 0 when none is kept, -1 with err. */
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
/* False when the code is an agent's (provisional): pages say so. */
bool ep_binary_code_trusted(const struct ep_binary_code *c);
struct ep_decoder *ep_binary_code_decoder(struct ep_binary_code *c);
/* The function containing vaddr, or NULL: found as the agent finds it
 * (ep_elf_symtab_at), so the UI names it as the profiles do. */
const struct ep_symbol *ep_binary_code_symbol_at(const struct ep_binary_code *c, uint64_t vaddr);

#endif
