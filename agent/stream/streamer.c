/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/stream/streamer.h"
#include "common/util/clock.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "agent/stream/batch_split.h"
#include "common/profile/pb_copy.h"
#include "common/util/collector_list.h"
#include "common/util/http_client.h"
#include "common/util/log.h"
#include "common/util/secret.h"
#include "common/util/u64map.h"
#include "common/wire/wire.h"

#ifndef EDGEPROF_VERSION
#define EDGEPROF_VERSION "0.1.0"
#endif

#define BACKOFF_START_MS 200

struct ep_streamer {
	struct ep_streamer_config cfg;
	struct ep_collector_list *collectors;
	char **ingest_urls; /* each collector's /v1/ingest, by its index in collectors */
	char agent_id[33];
	char node[256];
	char token[512];
	struct ep_http_config http; /* token: NULL without a token file */
	struct ep_spool *spool;
	uint64_t next_sequence;

	pthread_t sender;
	bool sender_running;
	pthread_mutex_t lock;
	pthread_cond_t wake;  /* new batch, or stopping */
	pthread_cond_t acked; /* a batch left the spool */
	bool stopping;	      /* no more submits; send what there is */
	bool abandon;	      /* give up now, keep the rest spooled */
	struct ep_stream_counters counters;
	bool collector_down; /* every collector failed: logged once per outage */
	size_t last_ok;	     /* the collector that acknowledged the last batch */
	uint64_t rng;
	/* session reports waiting for the next batch, and instructions
	 * received for the main thread */
	Edgeprof__V1__SessionReport **reports;
	size_t nreports;
	Edgeprof__V1__ProfileSession **sessions;
	size_t nsessions;
};

/* the collector's instructions, kept for ep_streamer_take_sessions() */
static void keep_instructions(struct ep_streamer *s, const Edgeprof__V1__IngestResponse *resp)
{
	for (size_t i = 0; i < resp->n_instructions; i++) {
		const Edgeprof__V1__Instruction *in = resp->instructions[i];
		if (in->kind_case != EDGEPROF__V1__INSTRUCTION__KIND_PROFILE_SESSION) {
			ep_debug("collector sent an instruction this agent does not know (%d)",
				 (int)in->kind_case);
			continue;
		}
		Edgeprof__V1__ProfileSession *copy =
		    ep_pb_copy(&in->profile_session->base,
			       (ep_pb_unpack_fn)edgeprof__v1__profile_session__unpack);
		pthread_mutex_lock(&s->lock);
		Edgeprof__V1__ProfileSession **grown =
		    copy ? realloc(s->sessions, (s->nsessions + 1) * sizeof(*grown)) : NULL;
		if (grown) {
			s->sessions = grown;
			s->sessions[s->nsessions++] = copy;
		}
		pthread_mutex_unlock(&s->lock);
		if (!grown) {
			edgeprof__v1__profile_session__free_unpacked(copy, NULL);
			ep_error("out of memory keeping the collector's session %s",
				 in->profile_session->session_id);
		}
	}
}

static uint64_t next_random(struct ep_streamer *s)
{
	/* splitmix64: only backoff jitter, no need for more */
	uint64_t z = (s->rng += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

enum send_result { SENT, RETRY, REJECTED };

/* lets ep_streamer_finish() cut a transfer short instead of waiting out
 * curl's timeout against a collector that does not answer */
static int on_progress(void *clientp, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	(void)dltotal;
	(void)dlnow;
	(void)ultotal;
	(void)ulnow;
	const struct ep_streamer *s = clientp;
	return __atomic_load_n(&s->abandon, __ATOMIC_RELAXED) ? 1 : 0;
}

/* The longest Retry-After honoured: a collector asking for more is waited
 * for this long, so a wrong header cannot stall a node's stream for hours. */
#define RETRY_AFTER_MAX_S 300

/* *retry_after_s: what a 429 or 503 asked the agent to wait (0: nothing) */
static enum send_result post_batch(struct ep_streamer *s, CURL *curl, const char *url,
				   const uint8_t *data, size_t len, unsigned *retry_after_s,
				   char *why, size_t whylen)
{
	*retry_after_s = 0;
	static const char *const headers[] = {"Content-Type: application/x-protobuf",
					      "Content-Encoding: zstd", NULL};
	struct ep_http_body body;
	long status;
	curl_easy_setopt(curl, CURLOPT_POSTFIELDS, (const char *)data);
	curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	CURLcode cc = ep_http_perform(curl, &s->http, url, headers, &body, &status, why, whylen);
	enum send_result result = RETRY; /* why says it when cc is not CURLE_OK */
	if (cc == CURLE_OK && status == 200) {
		Edgeprof__V1__IngestResponse *resp =
		    edgeprof__v1__ingest_response__unpack(NULL, body.len, (uint8_t *)body.data);
		if (!resp) {
			snprintf(why, whylen, "answer is not an IngestResponse (%zu bytes)",
				 body.len);
		} else {
			pthread_mutex_lock(&s->lock);
			if (resp->status == EDGEPROF__V1__INGEST_RESPONSE__STATUS__DUPLICATE)
				s->counters.batches_duplicate++;
			s->counters.bytes_sent += len;
			pthread_mutex_unlock(&s->lock);
			keep_instructions(s, resp);
			edgeprof__v1__ingest_response__free_unpacked(resp, NULL);
			result = SENT;
		}
	} else if (cc == CURLE_OK) {
		const char *text = body.data ? body.data : "";
		snprintf(why, whylen, "HTTP %ld: %.200s", status, text);
		why[strcspn(why, "\n")] = '\0';
		/* a batch the collector cannot read will never become readable
		 * (another replica reads it the same way); anything else (auth,
		 * overload, restart) may pass later, or at another replica */
		if (status == 400 || status == 413 || status == 415)
			result = REJECTED;
		curl_off_t after = 0;
		if ((status == 429 || status == 503) &&
		    curl_easy_getinfo(curl, CURLINFO_RETRY_AFTER, &after) == CURLE_OK && after > 0)
			*retry_after_s =
			    after > RETRY_AFTER_MAX_S ? RETRY_AFTER_MAX_S : (unsigned)after;
	}
	free(body.data);
	return result;
}

static void wait_ms(struct ep_streamer *s, unsigned ms)
{
	struct timespec ts = ep_realtime_after((uint64_t)ms * 1000000ULL);
	pthread_mutex_lock(&s->lock);
	while (!s->abandon && pthread_cond_timedwait(&s->wake, &s->lock, &ts) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&s->lock);
}

/* After a failed send to collector at: moves to the next replica and says
 * so; true when every replica failed in a row, so the sender backs off
 * before the next round instead of retrying at once. */
static bool failed_over(struct ep_streamer *s, size_t at, unsigned *fails_in_row, const char *err)
{
	size_t n = ep_collector_list_count(s->collectors);
	size_t next = ep_collector_list_failed(s->collectors, at);
	const char *url = ep_collector_list_url(s->collectors, at);
	pthread_mutex_lock(&s->lock);
	s->counters.send_failures++;
	/* losing the collector that took the last batch is news; a retry of
	 * one already known down (the first replica tried again after the
	 * failback time) is not */
	bool lost_working = at == s->last_ok;
	if (lost_working)
		s->last_ok = SIZE_MAX;
	bool round_failed = ++*fails_in_row % n == 0;
	bool first = round_failed && !s->collector_down;
	if (round_failed)
		s->collector_down = true;
	pthread_mutex_unlock(&s->lock);
	if (n > 1 && lost_working)
		ep_warn("collector %s: %s; sending to %s", url, err,
			ep_collector_list_url(s->collectors, next));
	else if (n > 1)
		ep_debug("collector %s: %s; sending to %s", url, err,
			 ep_collector_list_url(s->collectors, next));
	if (first)
		ep_warn("%s %s: %s; batches stay in the spool and are retried",
			n > 1 ? "every collector failed, the last" : "collector", url, err);
	else if (round_failed)
		ep_debug("collector %s: %s", url, err);
	return round_failed;
}

static void *sender_main(void *arg)
{
	struct ep_streamer *s = arg;
	CURL *curl = ep_http_open(&s->http);
	if (!curl) {
		ep_error("cannot start the HTTP client for the collector");
		return NULL;
	}
	curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(curl, CURLOPT_XFERINFODATA, s);
	unsigned backoff = BACKOFF_START_MS;
	unsigned backoff_max = s->cfg.backoff_max_ms ? s->cfg.backoff_max_ms : 30000;
	unsigned fails_in_row = 0;
	for (;;) {
		pthread_mutex_lock(&s->lock);
		bool abandon = s->abandon;
		pthread_mutex_unlock(&s->lock);
		if (abandon)
			break;
		uint64_t id;
		uint8_t *data;
		size_t len;
		char err[512];
		int have = ep_spool_peek(s->spool, &id, &data, &len, err, sizeof(err));
		if (have < 0) {
			ep_warn("%s", err);
			continue;
		}
		if (have == 0) {
			pthread_mutex_lock(&s->lock);
			pthread_cond_broadcast(&s->acked);
			if (s->stopping) {
				pthread_mutex_unlock(&s->lock);
				break;
			}
			pthread_cond_wait(&s->wake, &s->lock);
			pthread_mutex_unlock(&s->lock);
			continue;
		}
		/* any replica may take any batch, a retry too: they share one
		 * store, which counts a batch once by its (agent id, sequence) */
		size_t at = ep_collector_list_pick(s->collectors);
		const char *url = ep_collector_list_url(s->collectors, at);
		unsigned retry_after_s;
		enum send_result r = post_batch(s, curl, s->ingest_urls[at], data, len,
						&retry_after_s, err, sizeof(err));
		free(data);
		if (r == SENT || r == REJECTED) {
			ep_spool_remove(s->spool, id);
			pthread_mutex_lock(&s->lock);
			if (r == SENT)
				s->counters.batches_acked++;
			else
				s->counters.batches_rejected++;
			bool was_down = s->collector_down;
			s->collector_down = false;
			s->last_ok = at;
			pthread_cond_broadcast(&s->acked);
			pthread_mutex_unlock(&s->lock);
			if (r == REJECTED)
				ep_error("collector %s refused a batch, dropped: %s", url, err);
			else if (was_down)
				ep_info(
				    "collector %s: reachable again, sending the spooled batches",
				    url);
			backoff = BACKOFF_START_MS;
			fails_in_row = 0;
			continue;
		}
		if (!failed_over(s, at, &fails_in_row, err))
			continue; /* the next replica, at once */
		/* full jitter: agents that lost the collector together do not
		 * come back together */
		unsigned ms = backoff / 2 + (unsigned)(next_random(s) % (backoff / 2 + 1));
		/* an overloaded collector says when to come back (body room,
		 * connections per address): sooner would only be refused again */
		if (retry_after_s && retry_after_s * 1000u > ms) {
			ms = retry_after_s * 1000u;
			pthread_mutex_lock(&s->lock);
			s->counters.retry_after_waits++;
			pthread_mutex_unlock(&s->lock);
		}
		wait_ms(s, ms);
		backoff = backoff * 2 > backoff_max ? backoff_max : backoff * 2;
	}
	curl_easy_cleanup(curl);
	pthread_mutex_lock(&s->lock);
	pthread_cond_broadcast(&s->acked);
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

static void free_urls(struct ep_streamer *s)
{
	size_t n = s->collectors ? ep_collector_list_count(s->collectors) : 0;
	for (size_t i = 0; s->ingest_urls && i < n; i++)
		free(s->ingest_urls[i]);
	free(s->ingest_urls);
	ep_collector_list_free(s->collectors);
}

struct ep_streamer *ep_streamer_start(const struct ep_streamer_config *cfg, char *err,
				      size_t errlen)
{
	struct ep_streamer *s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	s->cfg = *cfg;
	s->last_ok = SIZE_MAX;
	/* a collector that stops answering mid-request (link cut) is given up
	 * on after 10 s of silence; the batch is resent, stored once. An
	 * ingest answer is small; anything more is not ours. */
	s->http = (struct ep_http_config){.ca_file = cfg->ca_file,
					  .cert_file = cfg->cert_file,
					  .key_file = cfg->key_file,
					  .connect_timeout_ms = 3000,
					  .timeout_ms = 60000,
					  .stall_s = 10,
					  .max_answer = 1u << 20};
	s->collectors = ep_collector_list_parse(cfg->collector, err, errlen);
	if (!s->collectors) {
		free(s);
		return NULL;
	}
	size_t n = ep_collector_list_count(s->collectors);
	s->ingest_urls = calloc(n, sizeof(*s->ingest_urls));
	for (size_t i = 0; s->ingest_urls && i < n; i++)
		if (asprintf(&s->ingest_urls[i], "%s/v1/ingest",
			     ep_collector_list_url(s->collectors, i)) < 0)
			s->ingest_urls[i] = NULL;
	for (size_t i = 0; i < n; i++)
		if (!s->ingest_urls || !s->ingest_urls[i]) {
			snprintf(err, errlen, "out of memory");
			goto fail;
		}
	if (cfg->token_file) {
		if (ep_read_token_file(cfg->token_file, s->token, sizeof(s->token), err, errlen) !=
		    0)
			goto fail;
		s->http.token = s->token;
	}
	uint8_t raw[16];
	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw)) {
		snprintf(err, errlen, "getrandom: %s", strerror(errno));
		goto fail;
	}
	for (int i = 0; i < 16; i++)
		snprintf(s->agent_id + 2 * i, 3, "%02x", raw[i]);
	memcpy(&s->rng, raw, sizeof(s->rng));
	if (cfg->node && strlen(cfg->node) >= sizeof(s->node)) {
		/* cut, two nodes' names could become one */
		snprintf(err, errlen, "--node: a name of %zu bytes; at most %zu", strlen(cfg->node),
			 sizeof(s->node) - 1);
		goto fail;
	}
	if (cfg->node)
		snprintf(s->node, sizeof(s->node), "%s", cfg->node);
	else if (gethostname(s->node, sizeof(s->node)) != 0)
		snprintf(s->node, sizeof(s->node), "unknown");
	/* by the node's name: a fleet given one list of replicas spreads over
	 * them, and a restarted agent returns to the same one */
	if (!cfg->collector_listed)
		ep_collector_list_set_home(s->collectors, ep_hash_bytes(s->node, strlen(s->node)));
	s->spool = ep_spool_open(cfg->spool_dir, cfg->spool_max_bytes, err, errlen);
	if (!s->spool)
		goto fail;
	s->next_sequence = 1;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->wake, NULL);
	pthread_cond_init(&s->acked, NULL);
	if (pthread_create(&s->sender, NULL, sender_main, s) != 0) {
		snprintf(err, errlen, "cannot start the sender thread");
		pthread_mutex_destroy(&s->lock);
		pthread_cond_destroy(&s->wake);
		pthread_cond_destroy(&s->acked);
		goto fail;
	}
	s->sender_running = true;
	char others[64] = "";
	if (ep_collector_list_count(s->collectors) > 1)
		snprintf(others, sizeof(others), ", %zu others if it fails",
			 ep_collector_list_count(s->collectors) - 1);
	ep_info("streaming to %s%s as agent %s on node %s (spool %s, at most %" PRIu64 " bytes)",
		ep_collector_list_url(s->collectors, ep_collector_list_home(s->collectors)), others,
		s->agent_id, s->node, cfg->spool_dir, cfg->spool_max_bytes);
	return s;
fail:
	ep_spool_close(s->spool);
	free_urls(s);
	free(s);
	return NULL;
}

/* One part of a delta (ep_batch_split) as the next batch, spooled. stats
 * NULL in the parts after the first (interval_samples says the samples
 * instead); reports: the session reports go with the last part. 0, or -1
 * (logged). */
static int submit_part(struct ep_streamer *s, const Edgeprof__V1__Profile *delta,
		       const Edgeprof__V1__Labels *labels, const struct ep_batch_piece *pieces,
		       size_t n, bool first, bool last, uint64_t samples, uint64_t window_start_ns,
		       uint64_t window_end_ns)
{
	/* the batch borrows the delta's messages: only the wrappers are ours */
	Edgeprof__V1__AgentIdentity agent = EDGEPROF__V1__AGENT_IDENTITY__INIT;
	agent.node = s->node;
	agent.agent_id = s->agent_id;
	agent.version = (char *)EDGEPROF_VERSION;
	Edgeprof__V1__Batch batch = EDGEPROF__V1__BATCH__INIT;
	batch.wire_version = EP_WIRE_VERSION;
	batch.agent = &agent;
	batch.window_start_ns = window_start_ns;
	batch.window_end_ns = window_end_ns;
	batch.config = delta->config;
	batch.stats = first ? delta->stats : NULL;
	batch.interval_samples = first ? 0 : samples;
	char *capabilities[] = {(char *)"profile-session"};
	if (s->cfg.sessions) {
		batch.capabilities = capabilities;
		batch.n_capabilities = 1;
	}
	Edgeprof__V1__BinaryDelta *deltas = calloc(n + 1, sizeof(*deltas));
	Edgeprof__V1__BinaryDelta **ptrs = calloc(n + 1, sizeof(*ptrs));
	int rc = -1;
	uint8_t *bytes = NULL;
	size_t len = 0;
	char err[512] = "out of memory";
	if (deltas && ptrs) {
		/* a binary's own labels (its container) win over the agent's; they
		 * travel in the BinaryDelta, not twice */
		for (size_t i = 0; i < n; i++) {
			edgeprof__v1__binary_delta__init(&deltas[i]);
			deltas[i].profile = pieces[i].profile;
			deltas[i].labels =
			    (Edgeprof__V1__Labels *)(pieces[i].labels ? pieces[i].labels : labels);
			ptrs[i] = &deltas[i];
		}
		batch.binaries = ptrs;
		batch.n_binaries = n;
		/* the lock stays held so no report is queued between the encoding
		 * and the clearing of what the batch took */
		pthread_mutex_lock(&s->lock);
		batch.sequence = s->next_sequence;
		if (last) {
			batch.sessions = s->reports;
			batch.n_sessions = s->nreports;
		}
		if (ep_wire_encode(&batch, &bytes, &len) == 0)
			rc = ep_spool_put(s->spool, bytes, len, err, sizeof(err));
		if (rc == 0 && last) {
			for (size_t i = 0; i < s->nreports; i++)
				edgeprof__v1__session_report__free_unpacked(s->reports[i], NULL);
			s->nreports = 0;
		}
		pthread_mutex_unlock(&s->lock);
	}
	free(bytes);
	free(deltas);
	free(ptrs);
	pthread_mutex_lock(&s->lock);
	if (rc == 0) {
		/* a sequence number is used once even when the put failed: the
		 * collector only needs them unique, and a gap shows the loss */
		s->counters.batches_spooled++;
		pthread_cond_signal(&s->wake);
	} else {
		s->counters.batches_lost++;
	}
	for (size_t i = 0; i < n; i++)
		*(rc == 0 ? &s->counters.samples_spooled : &s->counters.samples_lost) +=
		    pieces[i].profile->samples;
	s->next_sequence++;
	pthread_mutex_unlock(&s->lock);
	if (rc != 0)
		ep_error("batch %" PRIu64 " lost: %s", batch.sequence, err);
	return rc;
}

int ep_streamer_submit(struct ep_streamer *s, const Edgeprof__V1__Profile *delta,
		       const Edgeprof__V1__Labels *labels, uint64_t window_start_ns,
		       uint64_t window_end_ns)
{
	/* an interval past what one batch may hold goes in parts, each within
	 * the collector's bounds (agent/stream/batch_split.h) */
	struct ep_batch_parts parts;
	if (ep_batch_split(delta, NULL, &parts) != 0) {
		pthread_mutex_lock(&s->lock);
		s->counters.batches_lost++;
		for (size_t i = 0; i < delta->n_binaries; i++)
			s->counters.samples_lost += delta->binaries[i]->samples;
		s->next_sequence++;
		pthread_mutex_unlock(&s->lock);
		ep_error("batch lost: out of memory cutting it in parts");
		return -1;
	}
	uint64_t samples = delta->stats ? delta->stats->samples : 0;
	for (size_t i = 0; !delta->stats && i < delta->n_binaries; i++)
		if (delta->binaries[i]->samples > samples)
			samples = delta->binaries[i]->samples;
	if (parts.nparts > 1)
		ep_info("an interval of %zu binaries went in %zu batches (each within the "
			"collector's bounds: %u rows, %u binaries)",
			delta->n_binaries, parts.nparts, EP_WIRE_BATCH_ROWS,
			EP_WIRE_BATCH_BINARIES);
	int rc = 0;
	for (size_t k = 0, from = 0; k < parts.nparts; from = parts.end[k++])
		if (submit_part(s, delta, labels, parts.pieces + from, parts.end[k] - from, k == 0,
				k + 1 == parts.nparts, samples, window_start_ns,
				window_end_ns) != 0)
			rc = -1;
	ep_batch_parts_free(&parts);
	return rc;
}

size_t ep_streamer_finish(struct ep_streamer *s, unsigned timeout_ms)
{
	if (!s->sender_running)
		return 0;
	struct timespec deadline = ep_realtime_after((uint64_t)timeout_ms * 1000000ULL);
	pthread_mutex_lock(&s->lock);
	s->stopping = true;
	pthread_cond_broadcast(&s->wake);
	for (;;) {
		struct ep_spool_counters sc;
		ep_spool_counters(s->spool, &sc);
		if (sc.files == 0)
			break;
		if (pthread_cond_timedwait(&s->acked, &s->lock, &deadline) == ETIMEDOUT)
			break;
	}
	__atomic_store_n(&s->abandon, true, __ATOMIC_RELAXED);
	pthread_cond_broadcast(&s->wake);
	pthread_mutex_unlock(&s->lock);
	pthread_join(s->sender, NULL);
	s->sender_running = false;
	struct ep_spool_counters sc;
	ep_spool_counters(s->spool, &sc);
	return (size_t)sc.files;
}

int ep_streamer_report_session(struct ep_streamer *s, const Edgeprof__V1__SessionReport *r)
{
	Edgeprof__V1__SessionReport *copy =
	    ep_pb_copy(&r->base, (ep_pb_unpack_fn)edgeprof__v1__session_report__unpack);
	if (!copy)
		return -1;
	pthread_mutex_lock(&s->lock);
	size_t i = 0;
	while (i < s->nreports && strcmp(s->reports[i]->session_id, r->session_id) != 0)
		i++;
	int rc = 0;
	if (i < s->nreports) {
		edgeprof__v1__session_report__free_unpacked(s->reports[i], NULL);
		s->reports[i] = copy;
	} else {
		Edgeprof__V1__SessionReport **grown =
		    realloc(s->reports, (s->nreports + 1) * sizeof(*grown));
		if (grown) {
			s->reports = grown;
			s->reports[s->nreports++] = copy;
		} else {
			edgeprof__v1__session_report__free_unpacked(copy, NULL);
			rc = -1;
		}
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

size_t ep_streamer_take_sessions(struct ep_streamer *s, Edgeprof__V1__ProfileSession ***out)
{
	pthread_mutex_lock(&s->lock);
	*out = s->sessions;
	size_t n = s->nsessions;
	s->sessions = NULL;
	s->nsessions = 0;
	pthread_mutex_unlock(&s->lock);
	return n;
}

void ep_streamer_free(struct ep_streamer *s)
{
	if (!s)
		return;
	ep_streamer_finish(s, 0);
	for (size_t i = 0; i < s->nreports; i++)
		edgeprof__v1__session_report__free_unpacked(s->reports[i], NULL);
	free(s->reports);
	for (size_t i = 0; i < s->nsessions; i++)
		edgeprof__v1__profile_session__free_unpacked(s->sessions[i], NULL);
	free(s->sessions);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->wake);
	pthread_cond_destroy(&s->acked);
	ep_spool_close(s->spool);
	free_urls(s);
	free(s);
}

void ep_streamer_counters(struct ep_streamer *s, struct ep_stream_counters *out)
{
	pthread_mutex_lock(&s->lock);
	*out = s->counters;
	pthread_mutex_unlock(&s->lock);
	ep_spool_counters(s->spool, &out->spool);
}

struct ep_collector_list *ep_streamer_collectors(struct ep_streamer *s)
{
	return s->collectors;
}
