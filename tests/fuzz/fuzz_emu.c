/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target over the emulator stream reader (ep_emu_read,
 * agent/source/emulator/emu_reader.h): what the QEMU plugin writes (magic,
 * then records of type, size, payload), read as `edgeprof record --emulate`
 * reads it. Invariants: maps text is terminated at its length, a sample
 * holds at most EP_MAX_BRANCH_ENTRIES entries, exact edges are readable
 * whole, the counts in the stats match what was delivered, and a stream
 * refused says why.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/source/emulator/emu_reader.h"
#include "tests/fuzz/fuzz_util.h"

#define FAIL(...) EP_FUZZ_FAIL("fuzz_emu", __VA_ARGS__)

struct seen {
	uint64_t samples, exact;
};

static void on_maps(void *ctx, const char *text, size_t len)
{
	(void)ctx;
	ep_fuzz_touch(text, len);
	if (text[len] != '\0')
		FAIL("maps text of %zu bytes not terminated", len);
}

static void on_sample(void *ctx, const struct ep_sample_record *rec)
{
	struct seen *s = ctx;
	s->samples++;
	if (rec->nr_entries > EP_MAX_BRANCH_ENTRIES)
		FAIL("sample with %u entries", rec->nr_entries);
	ep_fuzz_touch(rec->entries, rec->nr_entries * sizeof(rec->entries[0]));
}

static void on_exact(void *ctx, const struct ep_emu_exact *edges, size_t n)
{
	struct seen *s = ctx;
	s->exact += n;
	ep_fuzz_touch(edges, n * sizeof(*edges));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct seen seen = {0};
	struct ep_emu_callbacks cb = {
	    .ctx = &seen, .on_maps = on_maps, .on_sample = on_sample, .on_exact = on_exact};
	struct ep_emu_stats stats;
	char err[512] = "";
	int rc = ep_emu_read(ep_fuzz_file(data, size), &cb, &stats, err, sizeof(err));
	if (rc != 0 && !err[0])
		FAIL("refused without a reason");
	if (stats.samples != seen.samples || stats.exact_edges != seen.exact)
		FAIL("stats say %llu samples, %llu exact edges; %llu and %llu delivered",
		     (unsigned long long)stats.samples, (unsigned long long)stats.exact_edges,
		     (unsigned long long)seen.samples, (unsigned long long)seen.exact);
	return 0;
}
