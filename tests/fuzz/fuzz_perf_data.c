/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target over the perf.data reader (agent/source/perf_data/
 * perf_data.h): the input is a recording, read the way `edgeprof import`
 * reads it. The input's last byte picks the entry point, so one corpus
 * covers all three: ep_perf_data_read (records held for time ordering up
 * to 256 MiB), ep_perf_data_read_capped with 4 KiB held at most (the
 * ordering flushed early), and ep_perf_data_read_part as the second of two
 * readers (samples shared out). Invariants: every string handed out is
 * terminated and readable, a build-id and a branch stack fit their arrays,
 * counts in the stats match what was delivered, and a refused file says
 * where and why ("PATH: byte N: ..." or "PATH: ...").
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/source/perf_data/perf_data.h"
#include "tests/fuzz/fuzz_util.h"

#define FAIL(...) EP_FUZZ_FAIL("fuzz_perf_data", __VA_ARGS__)

struct seen {
	uint64_t samples, mmaps, comms;
};

static int on_event_desc(void *ctx, const struct ep_perf_event_desc *d)
{
	(void)ctx;
	if (!memchr(d->name, '\0', sizeof(d->name)))
		FAIL("event name not terminated");
	return 0;
}

static int on_build_id(void *ctx, const struct ep_perf_build_id *b)
{
	(void)ctx;
	if (b->build_id_len > EP_BUILD_ID_MAX)
		FAIL("build-id of %u bytes", b->build_id_len);
	ep_fuzz_str(b->filename);
	return 0;
}

static int on_mmap(void *ctx, const struct ep_mmap_event *ev)
{
	struct seen *s = ctx;
	s->mmaps++;
	if (ev->build_id_len > EP_BUILD_ID_MAX)
		FAIL("mmap build-id of %u bytes", ev->build_id_len);
	if (!ev->filename)
		FAIL("mmap without a file name");
	ep_fuzz_str(ev->filename);
	return 0;
}

static int on_comm(void *ctx, uint32_t pid, uint32_t tid, const char *comm, bool exec)
{
	struct seen *s = ctx;
	(void)pid, (void)tid, (void)exec;
	s->comms++;
	ep_fuzz_str(comm);
	return 0;
}

static void check_sample(const struct ep_sample_record *rec)
{
	if (rec->nr_entries > EP_MAX_BRANCH_ENTRIES)
		FAIL("sample with %u entries", rec->nr_entries);
	ep_fuzz_touch(rec->entries, rec->nr_entries * sizeof(rec->entries[0]));
}

static int on_sample(void *ctx, const struct ep_sample_record *rec)
{
	struct seen *s = ctx;
	s->samples++;
	check_sample(rec);
	return 0;
}

static int on_other_sample(void *ctx, const struct ep_sample_record *rec)
{
	struct seen *s = ctx;
	s->samples++;
	(void)rec->ip; /* only the header is read for another reader's samples */
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = ep_fuzz_file(data, size);
	struct seen seen = {0};
	struct ep_perf_data_callbacks cb = {.ctx = &seen,
					    .on_event_desc = on_event_desc,
					    .on_build_id = on_build_id,
					    .on_mmap = on_mmap,
					    .on_comm = on_comm,
					    .on_sample = on_sample,
					    .on_other_sample = on_other_sample};
	struct ep_perf_data_stats stats;
	char err[512] = "";
	int rc;
	switch (size ? data[size - 1] % 3 : 0) {
	case 0:
		rc = ep_perf_data_read(path, &cb, &stats, err, sizeof(err));
		break;
	case 1:
		rc = ep_perf_data_read_capped(path, &cb, 4096, &stats, err, sizeof(err));
		break;
	default:
		rc = ep_perf_data_read_part(path, &cb, 1, 2, &stats, err, sizeof(err));
		break;
	}
	if (rc != 0 && strncmp(err, path, strlen(path)) != 0)
		FAIL("refused without naming the file: '%s'", err);
	if (stats.mmaps != seen.mmaps || stats.comms != seen.comms)
		FAIL("stats say %llu mmaps, %llu comms; %llu and %llu delivered",
		     (unsigned long long)stats.mmaps, (unsigned long long)stats.comms,
		     (unsigned long long)seen.mmaps, (unsigned long long)seen.comms);
	if (stats.bytes_read > stats.file_size)
		FAIL("read %llu bytes of a %llu-byte file", (unsigned long long)stats.bytes_read,
		     (unsigned long long)stats.file_size);
	return 0;
}
