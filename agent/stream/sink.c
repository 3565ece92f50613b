/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/stream/sink.h"
#include "common/util/clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/resolve/binary.h"
#include "common/profile/profile_file.h"
#include "common/util/log.h"
#include "common/util/options.h"

void ep_sink_options_init(struct ep_sink_options *o)
{
	memset(o, 0, sizeof(*o));
	o->streamer.spool_dir = "/var/lib/edgeprof/spool";
	o->spool_mib = 256;
	o->flush_s = 10;
	o->upload_max_mib = 64;
}

/* --collector-order: spread (each node's home replica picked by its name)
 * or listed (the first URL is home: a replica in the node's own zone) */
static int set_collector_order(void *opts, const char *arg, char *err, size_t errlen)
{
	struct ep_sink_options *o = opts;
	if (strcmp(arg, "spread") != 0 && strcmp(arg, "listed") != 0) {
		snprintf(err, errlen, "'%s' is not spread or listed", arg);
		return -1;
	}
	o->streamer.collector_listed = strcmp(arg, "listed") == 0;
	return 0;
}

void ep_sink_option_table(struct ep_option out[EP_SINK_OPTION_COUNT + 1], struct ep_sink_options *o)
{
	o->collector_arg.out = &o->streamer.collector;
	const struct ep_option table[EP_SINK_OPTION_COUNT + 1] = {
	    EP_OPTION("collector", 0, EP_OPT_CALL, &o->collector_arg, .call = ep_collector_arg_add),
	    EP_OPTION("collector-order", 0, EP_OPT_CALL, o, .call = set_collector_order),
	    EP_OPTION("spool", 0, EP_OPT_DIR, &o->streamer.spool_dir),
	    EP_OPTION("spool-max-mib", 0, EP_OPT_UINT, &o->spool_mib, .min = 1, .max = 1u << 30),
	    EP_OPTION("token-file", 0, EP_OPT_FILE, &o->streamer.token_file),
	    EP_OPTION("cacert", 0, EP_OPT_FILE, &o->streamer.ca_file),
	    EP_OPTION("cert", 0, EP_OPT_FILE, &o->streamer.cert_file),
	    EP_OPTION("key", 0, EP_OPT_FILE, &o->streamer.key_file),
	    EP_OPTION("node", 0, EP_OPT_STRING, &o->streamer.node),
	    EP_OPTION("flush-timeout", 0, EP_OPT_UINT, &o->flush_s, .min = 1, .max = 1u << 30),
	    EP_OPTION("retry-max-ms", 0, EP_OPT_UINT, &o->streamer.backoff_max_ms, .min = 1,
		      .max = 1u << 30),
	    EP_OPTION("upload-max-mib", 0, EP_OPT_UINT, &o->upload_max_mib, .max = 4096),
	    EP_OPTION_END,
	};
	memcpy(out, table, sizeof(table));
}

int ep_sink_open(struct ep_sink *k, const char *output, struct ep_sink_options *o)
{
	char err[512];
	k->output = output;
	/* a long-running agent must not find out at its first write */
	if (output && ep_profile_check_target(output, err, sizeof(err)) != 0) {
		ep_error("%s", err);
		return -1;
	}
	if (!o->streamer.collector)
		return 0;
	o->streamer.spool_max_bytes = (uint64_t)o->spool_mib << 20;
	k->streamer = ep_streamer_start(&o->streamer, err, sizeof(err));
	if (k->streamer && o->upload_max_mib &&
	    !(k->uploader =
		  ep_uploader_start(&o->streamer, ep_streamer_collectors(k->streamer),
				    (uint64_t)o->upload_max_mib << 20, err, sizeof(err)))) {
		ep_error("%s", err);
		return -1;
	}
	k->totals = output ? ep_merge_new() : NULL;
	if (!k->streamer || (output && !k->totals)) {
		ep_error("%s", k->streamer ? "out of memory" : err);
		return -1;
	}
	edgeprof__v1__stats__init(&k->totals_stats);
	k->window_start_ns = ep_unix_ns();
	return 0;
}

static int set_config_strings(Edgeprof__V1__Profile *prof, const struct ep_sink *k)
{
	free(prof->config->source);
	free(prof->config->event);
	prof->config->source = strdup(k->source);
	prof->config->event = strdup(k->event);
	if (k->mode) {
		/* the pipeline cannot tell: an IP-only profile has no stacks */
		free(prof->config->mode);
		prof->config->mode = strdup(k->mode);
		if (!prof->config->mode)
			return -1;
	}
	if (k->period) {
		prof->config->period = k->period;
		prof->config->jitter = k->jitter;
	}
	return prof->config->source && prof->config->event ? 0 : -1;
}

static int write_file(const char *output, const Edgeprof__V1__Profile *prof)
{
	char err[512];
	int rc = ep_profile_write(output, prof, err, sizeof(err));
	if (rc != 0)
		ep_error("%s", err);
	return rc;
}

/* The running totals as a profile: the merge's messages are moved into it. */
static int write_totals(struct ep_sink *k, Edgeprof__V1__Profile *delta)
{
	for (size_t i = 0; i < delta->n_binaries; i++)
		if (ep_merge_add(k->totals, 0, delta->binaries[i], NULL) != 0)
			return -1;
	ep_stats_add(&k->totals_stats, delta->stats);
	struct ep_merged merged;
	if (ep_merge_build(k->totals, &merged) != 0)
		return -1;
	Edgeprof__V1__Profile prof = EDGEPROF__V1__PROFILE__INIT;
	prof.format_version = delta->format_version;
	prof.config = delta->config;
	prof.stats = &k->totals_stats;
	prof.binaries = calloc(merged.n + 1, sizeof(*prof.binaries));
	int rc = -1;
	if (prof.binaries) {
		for (size_t i = 0; i < merged.n; i++)
			prof.binaries[prof.n_binaries++] = merged.slices[i].delta->profile;
		rc = write_file(k->output, &prof);
	}
	free(prof.binaries);
	ep_merged_free(&merged);
	return rc;
}

/* Each binary the batch names, to the uploader (which sends each build-id
 * once): the file the pipeline opened for it. */
static void offer_binaries(struct ep_sink *k, struct ep_pipeline *p,
			   const Edgeprof__V1__Profile *delta)
{
	if (!k->uploader)
		return;
	struct ep_binary_registry *reg = ep_pipeline_binaries(p);
	size_t n = ep_binreg_count(reg);
	for (size_t i = 0; i < delta->n_binaries; i++) {
		const char *id = delta->binaries[i]->build_id;
		const char *prev = i ? delta->binaries[i - 1]->build_id : NULL;
		if (!id || !*id || (prev && strcmp(id, prev) == 0))
			continue;
		for (size_t j = 0; j < n; j++) {
			/* an evicted binary leaves its index empty */
			struct ep_binary *bin = ep_binreg_at(reg, j);
			if (bin && strcmp(ep_binary_build_id_hex(bin), id) == 0) {
				ep_uploader_offer(k->uploader, id, delta->binaries[i]->arch,
						  ep_binary_path(bin));
				break;
			}
		}
	}
}

int ep_sink_emit(struct ep_sink *k, struct ep_pipeline *p)
{
	if (!k->streamer) {
		Edgeprof__V1__Profile *prof = ep_pipeline_profile(p);
		int rc =
		    prof && set_config_strings(prof, k) == 0 ? write_file(k->output, prof) : -1;
		ep_profile_free(prof);
		return rc;
	}
	Edgeprof__V1__Profile *delta = ep_pipeline_take_delta(p);
	if (!delta || set_config_strings(delta, k) != 0) {
		ep_error("out of memory building a batch");
		ep_profile_free(delta);
		return -1;
	}
	uint64_t now = ep_unix_ns();
	int rc = ep_streamer_submit(k->streamer, delta, k->labels, k->window_start_ns, now);
	offer_binaries(k, p, delta);
	k->window_start_ns = now;
	if (k->output && write_totals(k, delta) != 0)
		rc = -1;
	ep_profile_free(delta);
	return rc;
}

/* Waits for the collector to acknowledge what is spooled; says what is left. */
int ep_sink_finish(struct ep_sink *k, unsigned flush_s)
{
	if (!k->streamer)
		return 0;
	size_t left = ep_streamer_finish(k->streamer, flush_s * 1000u);
	if (k->uploader) {
		ep_uploader_finish(k->uploader, flush_s * 1000u);
		struct ep_upload_counters uc;
		ep_uploader_counters(k->uploader, &uc);
		if (uc.sent || uc.had || uc.refused || uc.too_large || uc.unreadable || uc.failed)
			ep_info("binaries for the collector's UI: %llu sent, %llu it had, %llu "
				"refused, %llu too large, %llu unreadable, %llu attempts failed, "
				"%llu build-ids forgotten (over %d)",
				(unsigned long long)uc.sent, (unsigned long long)uc.had,
				(unsigned long long)uc.refused, (unsigned long long)uc.too_large,
				(unsigned long long)uc.unreadable, (unsigned long long)uc.failed,
				(unsigned long long)uc.forgotten, EP_UPLOADER_REMEMBERED);
	}
	struct ep_stream_counters sc;
	ep_streamer_counters(k->streamer, &sc);
	ep_info(
	    "streamed %llu batches (%llu samples): %llu acknowledged (%llu already stored), "
	    "%llu refused, "
	    "%llu send attempts failed (%llu then waited as the collector's Retry-After asked), "
	    "%llu dropped from a full spool, %llu lost unspooled "
	    "(%llu samples), %llu bytes sent, %llu spool files refused (no batch, or over "
	    "its bound)",
	    (unsigned long long)sc.batches_spooled, (unsigned long long)sc.samples_spooled,
	    (unsigned long long)sc.batches_acked, (unsigned long long)sc.batches_duplicate,
	    (unsigned long long)sc.batches_rejected, (unsigned long long)sc.send_failures,
	    (unsigned long long)sc.retry_after_waits, (unsigned long long)sc.spool.dropped_files,
	    (unsigned long long)sc.batches_lost, (unsigned long long)sc.samples_lost,
	    (unsigned long long)sc.bytes_sent, (unsigned long long)sc.spool.refused_files);
	if (left) {
		ep_warn("%zu batches not acknowledged by the collector; they stay in the spool for "
			"the next agent",
			left);
		return 1;
	}
	return 0;
}

void ep_sink_free(struct ep_sink *k)
{
	ep_uploader_free(k->uploader);
	ep_streamer_free(k->streamer);
	ep_merge_free(k->totals);
}
