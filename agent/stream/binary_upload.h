/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Binaries' code to the collector (issue 13), so its UI can draw their
 * control-flow graphs and disassembly: the ELF file of a build-id is sent
 * once (POST /v1/images), after asking whether the collector has it
 * already (GET /v1/images/ID: another agent, or `edgeprof upload`, may have
 * sent it), and only when it is at most max_bytes. The collector checks it
 * (collector/binaries). `edgeprof upload` sends files one by one
 * (ep_upload_file); the agent offers each binary its batches name to a
 * background uploader, which never holds up sampling or batches.
 */
#ifndef EP_BINARY_UPLOAD_H
#define EP_BINARY_UPLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "agent/stream/streamer.h"
#include "common/util/collector_list.h"

enum ep_upload_result {
	EP_UPLOAD_SENT,	      /* the collector stored it */
	EP_UPLOAD_HAD,	      /* the collector had this build-id already */
	EP_UPLOAD_REFUSED,    /* the collector refused it (bad ELF, build-id mismatch) */
	EP_UPLOAD_TOO_LARGE,  /* over max_bytes here or over the collector's limit */
	EP_UPLOAD_UNREADABLE, /* the file cannot be read here */
	EP_UPLOAD_FAILED,     /* no answer, or the collector failed: worth trying later */
};

/* Where to: the collectors (one, or replicas tried in turn: borrowed), TLS
 * files and the token (not its file: read once by the caller). */
struct ep_upload_target {
	struct ep_collector_list *collectors;
	const char *token; /* NULL: none */
	const char *ca_file, *cert_file, *key_file;
};

/* Sends path (an ELF file) for build_id (lowercase hex, the id the
 * collector files it under and checks against its note) of arch (NULL: not
 * said), source "upload" or "agent". An agent's code is provisional at the
 * collector: an upload sends its file when the collector has only that
 * (GET /v1/images/ID says "provisional"), and is refused when the collector
 * wants its upload token for source=upload. msg gets one line saying what
 * happened. */
enum ep_upload_result ep_upload_file(const struct ep_upload_target *t, const char *path,
				     const char *build_id, const char *arch, const char *source,
				     uint64_t max_bytes, char *msg, size_t msglen);

struct ep_upload_counters {
	uint64_t sent, had, refused, too_large, unreadable, failed;
	/* build-ids forgotten from the "offered already" list, which keeps the
	 * latest EP_UPLOADER_REMEMBERED (a node that runs more binaries than
	 * that asks the collector again for the older ones) */
	uint64_t forgotten;
};

#define EP_UPLOADER_REMEMBERED 1024

struct ep_uploader;

/* Reads cfg's token file; starts the thread, which sends to collectors
 * (borrowed: the streamer's, so both move to the replica that answers).
 * NULL with err. */
struct ep_uploader *ep_uploader_start(const struct ep_streamer_config *cfg,
				      struct ep_collector_list *collectors, uint64_t max_bytes,
				      char *err, size_t errlen);
/* Queues build_id's file at path (of arch: NULL, not said) unless
 * build_id was offered before (a failed attempt is offered again after a
 * minute). Never blocks on the network. */
void ep_uploader_offer(struct ep_uploader *u, const char *build_id, const char *arch,
		       const char *path);
/* Waits up to timeout_ms for the queue to empty, then stops the thread. */
void ep_uploader_finish(struct ep_uploader *u, unsigned timeout_ms);
void ep_uploader_free(struct ep_uploader *u);
void ep_uploader_counters(struct ep_uploader *u, struct ep_upload_counters *out);

#endif
