/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target over `edgeprof import` below its options: a recording
 * (the input) fed through the whole pipeline (ep_feed_perf_data: read,
 * resolve, reconstruct, chop, aggregate) against real binaries given as
 * --binary (tests/data/lbr's propeller sample program, which the propeller
 * seed recorded, and the elf corpus's tiny_static, which the tiny seeds
 * recorded), then its profile built and exported. fuzz_perf_data covers
 * the reader alone at a higher rate; this one lets fuzzed branch stacks,
 * mappings and sample IPs reach the decoder's walks and the counters. The
 * input's last byte picks the mode, as import's options would: chop auto,
 * whole stacks with gap ranges (--chop 0 --ranges gap), chop 1, no trigger.
 * Each binary's profile also goes through profile inference (export's
 * default for fdata) on that binary's code.
 * Invariants: no sanitizer report; a damaged recording says where; under
 * a chop no more branches are counted than samples x chop, and no edge
 * more often than that, nor mispredicted more often than taken (inferred
 * edges neither).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/pipeline/pipeline.h"
#include "agent/resolve/binary.h"
#include "agent/source/perf_data/perf_data_feed.h"
#include "common/export/export.h"
#include "common/profile/infer.h"
#include "common/profile/profile_file.h"
#include "common/util/log.h"
#include "tests/fuzz/fuzz_util.h"

#define FAIL(...) EP_FUZZ_FAIL("fuzz_import", __VA_ARGS__)

static const char *const binaries[] = {
    EP_SOURCE_DIR "/tests/data/lbr/propeller_sample_1.bin",
    EP_SOURCE_DIR "/tests/fuzz/corpus/elf/tiny_static",
};
static FILE *devnull;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	ep_log_set_level(EP_LOG_ERROR);
	devnull = fopen("/dev/null", "w");
	return devnull ? 0 : -1;
}

static void config_of(uint8_t mode, struct ep_pipeline_config *cfg)
{
	ep_pipeline_config_default(cfg);
	switch (mode % 4) {
	case 1:
		cfg->chop = 0;
		cfg->range_mode = EP_RANGES_GAP;
		break;
	case 2:
		cfg->chop = 1;
		break;
	case 3:
		cfg->append_trigger = false;
		break;
	default:
		break;
	}
}

/* SPEC step 4: under a chop C a sample counts at most C branches, so no
 * count can pass samples x C; a mispredicted count never passes its edge's. */
static void check_counts(const Edgeprof__V1__Profile *pr, unsigned chop)
{
	const Edgeprof__V1__Stats *st = pr->stats;
	if (!st)
		return;
	unsigned __int128 most = (unsigned __int128)st->samples_with_branches * chop;
	if (chop && st->branches_counted > most)
		FAIL("%llu branches counted from %llu samples under chop %u",
		     (unsigned long long)st->branches_counted,
		     (unsigned long long)st->samples_with_branches, chop);
	for (size_t i = 0; i < pr->n_binaries; i++)
		for (size_t j = 0; j < pr->binaries[i]->n_edges; j++) {
			const Edgeprof__V1__Edge *e = pr->binaries[i]->edges[j];
			if (e->mispredicted > e->count)
				FAIL("edge %llx->%llx mispredicted %llu of %llu",
				     (unsigned long long)e->from, (unsigned long long)e->to,
				     (unsigned long long)e->mispredicted,
				     (unsigned long long)e->count);
			if (chop && e->count > st->branches_counted)
				FAIL("edge %llx->%llx counted %llu of %llu branches",
				     (unsigned long long)e->from, (unsigned long long)e->to,
				     (unsigned long long)e->count,
				     (unsigned long long)st->branches_counted);
		}
}

/* Inference on each binary of the registry the profile has counts of. */
static void infer_all(const Edgeprof__V1__Profile *pr, struct ep_binary_registry *reg)
{
	struct ep_infer_limits limits;
	ep_infer_limits_default(&limits);
	for (size_t i = 0; i < ep_binreg_count(reg); i++) {
		const struct ep_binary *bin = ep_binreg_at(reg, i);
		const Edgeprof__V1__BinaryProfile *bp = NULL;
		for (size_t k = 0; k < pr->n_binaries; k++)
			if (strcmp(pr->binaries[k]->build_id, ep_binary_build_id_hex(bin)) == 0)
				bp = pr->binaries[k];
		size_t nseg = 0;
		const struct ep_code_segment *segs = ep_binary_code_segments(bin, &nseg);
		struct ep_decoder *dec =
		    bp ? ep_decoder_new(ep_binary_arch(bin), segs, nseg) : NULL;
		Edgeprof__V1__BinaryProfile *out = NULL;
		struct ep_infer_stats stats;
		if (dec && ep_infer_profile(bp, dec, &limits, &out, &stats) == 0) {
			for (size_t j = 0; j < out->n_edges; j++)
				if (out->edges[j]->mispredicted > out->edges[j]->count)
					FAIL("inferred edge %llx->%llx mispredicted %llu of %llu",
					     (unsigned long long)out->edges[j]->from,
					     (unsigned long long)out->edges[j]->to,
					     (unsigned long long)out->edges[j]->mispredicted,
					     (unsigned long long)out->edges[j]->count);
			edgeprof__v1__binary_profile__free_unpacked(out, NULL);
		}
		ep_decoder_free(dec);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = ep_fuzz_file(data, size);
	char err[512] = "";
	struct ep_binary_registry *reg = ep_binreg_new();
	for (size_t i = 0; reg && i < sizeof(binaries) / sizeof(binaries[0]); i++)
		if (ep_binreg_add_file(reg, binaries[i], err, sizeof(err)) != 0)
			FAIL("%s", err);
	struct ep_pipeline_config cfg;
	config_of(size ? data[size - 1] : 0, &cfg);
	struct ep_pipeline *p = reg ? ep_pipeline_new(&cfg, reg) : NULL;
	if (!p) {
		ep_binreg_free(reg);
		return 0;
	}
	struct ep_perf_data_feed_info info;
	if (ep_feed_perf_data(path, p, &info, err, sizeof(err)) != 0 &&
	    strncmp(err, path, strlen(path)) != 0)
		FAIL("refused without naming the file: '%s'", err);
	Edgeprof__V1__Profile *profile = ep_pipeline_profile(p);
	if (profile)
		check_counts(profile, cfg.chop ? ep_pipeline_chop_used(p) : 0);
	if (profile) {
		ep_export(profile, EP_EXPORT_JSON, NULL, devnull, err, sizeof(err));
		ep_export(profile, EP_EXPORT_FDATA, NULL, devnull, err, sizeof(err));
		infer_all(profile, reg);
		ep_profile_free(profile);
	}
	ep_pipeline_free(p);
	ep_binreg_free(reg);
	return 0;
}
