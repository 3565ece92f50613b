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
 * Invariants: no sanitizer report; a damaged recording says where; under
 * a chop no more branches are counted than samples x chop, and no edge
 * more often than that, nor mispredicted more often than taken.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/pipeline/pipeline.h"
#include "agent/source/perf_data/perf_data_feed.h"
#include "common/export/export.h"
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
		ep_profile_free(profile);
	}
	ep_pipeline_free(p);
	ep_binreg_free(reg);
	return 0;
}
