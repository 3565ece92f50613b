/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agent's on-disk queue of encoded batches waiting for the collector's
 * acknowledgement. A batch leaves only when acknowledged (ep_spool_remove)
 * or when the spool would grow past its bound, oldest first (counted and
 * logged): however long the collector is down, disk and memory stay
 * bounded. Files survive an agent restart and are sent by the next agent.
 * Safe to use from the sampling thread and the sender thread at once.
 */
#ifndef EP_SPOOL_H
#define EP_SPOOL_H

#include <stddef.h>
#include <stdint.h>

struct ep_spool;

struct ep_spool_counters {
	uint64_t files, bytes;		       /* held now */
	uint64_t dropped_files, dropped_bytes; /* evicted to stay under the bound */
	uint64_t write_failed;		       /* puts that could not be written (disk full...) */
	/* files not taken as batches, removed: not a regular file, empty,
	 * over EP_SPOOL_BATCH_MAX, changed or unreadable (a damaged disk, or
	 * anything else found there), and puts over the bound */
	uint64_t refused_files;
};

/* The spool's files are read back whole, so each is bounded: a batch over
 * min(max_bytes, EP_SPOOL_BATCH_MAX) is not written, and a file over it
 * found there is not read (a damaged or planted file must not take the
 * agent's memory). No collector takes more once decompressed
 * (EP_WIRE_MAX_BATCH). */
#define EP_SPOOL_BATCH_MAX (64u << 20)
/* Files held: at most one per EP_SPOOL_BYTES_PER_FILE bytes of max_bytes
 * (at least 16), the oldest dropped past it like past the byte bound: the
 * index of a spool of many tiny files stays small (16 bytes a file: 8 MiB
 * for the default 256 MiB spool at most). */
#define EP_SPOOL_BYTES_PER_FILE 512

/* Creates dir when missing; picks up the batches a previous agent left
 * (within the bounds above, oldest dropped first; files refused are
 * removed, counted and said in one line). NULL with err naming the
 * directory and the problem. */
struct ep_spool *ep_spool_open(const char *dir, uint64_t max_bytes, char *err, size_t errlen);
void ep_spool_close(struct ep_spool *s);

/* Writes one batch durably (temporary file, fsync, rename). 0, or -1 with
 * err; the batch is then lost and counted in write_failed (refused_files
 * when over the bound). */
int ep_spool_put(struct ep_spool *s, const uint8_t *data, size_t len, char *err, size_t errlen);

/* The oldest batch: its id and a malloc'd copy of its bytes. 1 when there
 * is one, 0 when the spool is empty, -1 with err when it cannot be read
 * or is no longer what was written (the file is removed and counted in
 * refused_files). */
int ep_spool_peek(struct ep_spool *s, uint64_t *id, uint8_t **data, size_t *len, char *err,
		  size_t errlen);
/* Forgets batch id (acknowledged). Removing an evicted one is harmless. */
void ep_spool_remove(struct ep_spool *s, uint64_t id);

void ep_spool_counters(struct ep_spool *s, struct ep_spool_counters *out);

#endif
