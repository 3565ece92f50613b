/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The collector's HTTP front (libmicrohttpd):
 *   POST /v1/ingest     a Batch (proto/ingest.proto), answered with an
 *                       IngestResponse once stored; 400 with the reason for
 *                       what can never be stored, 413 too large, 503 store down
 *   GET  /v1/binaries   JSON list        (see collector/api)
 *   GET  /v1/profile    ?build_id=&format=json|fdata|preagg|afdo|profgen|proto
 *                       &from=&to= (unix s) &container_id=&pod=&namespace=
 *                       &cgroup=&process=
 *   POST /v1/sessions   ?container_id=|cgroup=|pid= &duration_s= [&node=]
 *                       [&period=] [&mode=edges|calls]: an on-demand session
 *                       (collector/sessions); 201 with it as JSON (or
 *                       &format=proto), 400/409 with the reason
 *   GET  /v1/sessions/ID  how it stands (JSON, or ?format=proto)
 *   GET  /v1/nodes      the agents' nodes: last batch, version, sessions
 *   POST /v1/images     ?build_id=&arch=&path=&source=agent|upload, an ELF
 *                       file as body: its code kept by build-id
 *                       (collector/binaries); 201 stored, 200 already kept,
 *                       400 refused with why, 403 source=upload without the
 *                       upload token (upload_token_file), 413 too large
 *   GET  /v1/images/ID  200 "ID: kept, trusted|provisional" when that
 *                       build-id's code is kept, else 404
 *   GET  /, /binary, /function, /fleet, /ui/...: the web UI (collector/web);
 *        GET/POST /signin, /signout: its sign-in with the token (a cookie)
 *   GET  /metrics       Prometheus text; /healthz; /readyz (store answers)
 * A bearer token guards /v1/ (not the probes and metrics, which hold no
 * profile data); TLS with an optional client CA makes it mTLS: a client
 * without a certificate signed by that CA gets nothing but 403.
 */
#ifndef EP_SERVER_H
#define EP_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include "collector/api/api.h"
#include "collector/binaries/binaries.h"
#include "collector/ingest/ingest.h"
#include "collector/sessions/sessions.h"
#include "collector/store/store.h"

struct ep_server_config {
	const char *listen;	/* HOST:PORT, [V6]:PORT or :PORT; port 0 picks one */
	const char *token_file; /* NULL: no token */
	/* NULL: none. With one, only requests bearing it may send images as
	 * source=upload (trusted, collector/binaries), and it opens nothing
	 * but /v1/images; without one, the token_file's holders may. */
	const char *upload_token_file;
	const char *tls_cert, *tls_key; /* PEM files; both or neither */
	const char *client_ca;		/* PEM: require client certificates it signed */
	size_t max_body;		/* request body limit; 0: 16 MiB */
	struct ep_api_limits api;	/* what a list's page may hold */
	/* Connections that have not shown the bearer token (every one when
	 * there is none) must send a complete request header within
	 * header_timeout_s of connecting or of their previous answer (0: 10),
	 * one address may hold at most max_client_conns of them (0: 32), and
	 * with a token they hold at most 3/4 of the 512 connections; past
	 * either bound the oldest (of the address, or of all) is closed, so a
	 * new connection always gets in: slow clients cannot keep /healthz or
	 * an agent out. */
	unsigned header_timeout_s;
	unsigned max_client_conns;
	/* Connections that showed it are closed after idle_timeout_s between
	 * requests (0: 15; an agent's batches come every 10 s by default, so
	 * it keeps its connection), one address may hold at most
	 * max_token_conns of them (0: 16; past it that address's longest idle
	 * one is closed, or the new request gets 429), and when the open
	 * connections come within 8 of the 512 the longest idle one of the
	 * address holding the most is closed: no token holder can take the
	 * slots that /healthz and new agents need. */
	unsigned idle_timeout_s;
	unsigned max_token_conns;
	/* Request bodies: all connections together hold at most max_bodies
	 * bytes of them (0: 256 MiB). Past it, a body that has fallen behind
	 * body_min_rate bytes/s (0: 64 KiB/s) is closed to make room, stalest
	 * first; when every body is keeping up, the new one gets 503 with
	 * Retry-After. A body that falls body_timeout_s behind that rate (0:
	 * 30) is closed whatever the room: a held body cannot hold memory, a
	 * thread and a slot for ever. */
	size_t max_bodies;
	unsigned body_timeout_s;
	unsigned body_min_rate;
	/* binaries' code by build-id (collector/binaries; borrowed): uploads
	 * on /v1/images and the UI's CFG and disassembly views; NULL: none */
	struct ep_binaries *binaries;
	/* Serves every connection from the one polling thread rather than a
	 * thread each. `edgeprof collector` never does: a slow store write
	 * would hold up every other client. The HTTP fuzz target does, for
	 * speed: under ASan a thread's start and end cost ~3 ms (its shadow
	 * and allocator cache mapped and unmapped), 90% of each input's time,
	 * while requests are parsed and answered by the same code either way. */
	bool one_thread;
};

struct ep_server;

/* store, ingest and sessions are borrowed */
struct ep_server *ep_server_start(const struct ep_server_config *cfg, struct ep_store *store,
				  struct ep_ingest *ingest, struct ep_sessions *sessions, char *err,
				  size_t errlen);
unsigned ep_server_port(const struct ep_server *s);
void ep_server_stop(struct ep_server *s);

#endif
