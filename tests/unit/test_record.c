/* SPDX-License-Identifier: Apache-2.0 */
/* The shared record's flag bits sit where the kernel's perf_branch_entry
 * bitfields are, so entries copied from the kernel read right; and a record
 * written to perf.data (the emulator's --perf-data) reads back the same. */
#include "test_util.h"

#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/source/perf_data/perf_data.h"
#include "agent/source/perf_data/perf_data_writer.h"
#include "bpf/edgeprof_record.h"

static void test_branch_entry_bits_match_the_kernel(void **state)
{
	(void)state;
	assert_int_equal(sizeof(struct ep_branch_entry), sizeof(struct perf_branch_entry));
	struct perf_branch_entry k = {0};
	k.from = 0x1234;
	k.to = 0x5678;
	k.mispred = 1;
	k.in_tx = 1;
	k.cycles = 0xbeef;
	k.type = 0x9;
	struct ep_branch_entry e;
	memcpy(&e, &k, sizeof(e));
	assert_int_equal(e.from, 0x1234);
	assert_int_equal(e.to, 0x5678);
	assert_true(e.flags & EP_BR_MISPRED);
	assert_false(e.flags & EP_BR_PREDICTED);
	assert_true(e.flags & EP_BR_IN_TX);
	assert_false(e.flags & EP_BR_ABORT);
	assert_int_equal((e.flags & EP_BR_CYCLES_MASK) >> EP_BR_CYCLES_SHIFT, 0xbeef);
	assert_int_equal((e.flags & EP_BR_TYPE_MASK) >> EP_BR_TYPE_SHIFT, 0x9);
}

/* What the reader delivered from the written file. */
struct read_back {
	struct ep_perf_event_desc desc;
	int descs, comms, mmaps, build_ids;
	char comm[32];
	struct ep_mmap_event mmap;
	char mmap_path[64];
	struct ep_perf_build_id bid;
	char bid_path[64];
	struct ep_sample_record samples[3];
	int nsamples;
};

static int rb_desc(void *ctx, const struct ep_perf_event_desc *d)
{
	struct read_back *rb = ctx;
	rb->desc = *d;
	rb->descs++;
	return 0;
}

static int rb_comm(void *ctx, uint32_t pid, uint32_t tid, const char *comm, bool exec)
{
	struct read_back *rb = ctx;
	assert_int_equal(pid, 42);
	assert_int_equal(tid, 42);
	assert_true(exec);
	snprintf(rb->comm, sizeof(rb->comm), "%s", comm);
	rb->comms++;
	return 0;
}

static int rb_mmap(void *ctx, const struct ep_mmap_event *ev)
{
	struct read_back *rb = ctx;
	rb->mmap = *ev;
	snprintf(rb->mmap_path, sizeof(rb->mmap_path), "%s", ev->filename);
	rb->mmaps++;
	return 0;
}

static int rb_build_id(void *ctx, const struct ep_perf_build_id *bid)
{
	struct read_back *rb = ctx;
	rb->bid = *bid;
	snprintf(rb->bid_path, sizeof(rb->bid_path), "%s", bid->filename);
	rb->build_ids++;
	return 0;
}

static int rb_sample(void *ctx, const struct ep_sample_record *rec)
{
	struct read_back *rb = ctx;
	if (rb->nsamples < 3)
		rb->samples[rb->nsamples] = *rec;
	rb->nsamples++;
	return 0;
}

static struct ep_sample_record sample_of(uint64_t time, uint32_t nr)
{
	struct ep_sample_record r = {.pid = 42, .tid = 43, .cpu = 0, .time_ns = time};
	r.ip = 0x401000 + time;
	r.period = 1009;
	r.nr_entries = nr;
	for (uint32_t i = 0; i < nr; i++)
		r.entries[i] = (struct ep_branch_entry){.from = 0x401100 + i, .to = 0x401200 + i};
	return r;
}

/* Every field the emulator hands the writer comes back from perf.data, in
 * order, with the event's attr as perf record -b -e branches:u sets it;
 * entries that say neither mispredicted nor predicted come back predicted
 * (Intel's LBR always says one), a mispredicted one stays mispredicted. */
static void test_perf_data_writer_round_trip(void **state)
{
	(void)state;
	char path[] = "/tmp/test_record_XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	struct ep_perf_writer_event ev = {.type = PERF_TYPE_HARDWARE,
					  .config = PERF_COUNT_HW_BRANCH_INSTRUCTIONS,
					  .period = 1009,
					  .branch_sample_type =
					      PERF_SAMPLE_BRANCH_USER | PERF_SAMPLE_BRANCH_ANY,
					  .name = "branches:u",
					  .cpuid = "GenuineIntel,6,85,4",
					  .nr_cpus = 1};
	char err[256];
	struct ep_perf_writer *w = ep_perf_writer_open(path, &ev, err, sizeof(err));
	assert_non_null(w);
	ep_perf_writer_comm(w, 42, 42, "a-very-long-program-name", 0);
	const uint8_t id[20] = {0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
	struct ep_perf_writer_mmap m = {.pid = 42,
					.tid = 42,
					.start = 0x401000,
					.len = 0x2000,
					.pgoff = 0x1000,
					.maj = 254,
					.min = 1,
					.ino = 77,
					.prot = 5,
					.flags = 2,
					.path = "/bin/prog",
					.build_id = id,
					.build_id_len = 16};
	ep_perf_writer_mmap2(w, &m, 0);
	struct ep_sample_record s[3] = {sample_of(10, 3), sample_of(20, 0),
					sample_of(30, EP_MAX_BRANCH_ENTRIES)};
	s[0].entries[1].flags = EP_BR_MISPRED | (3ULL << EP_BR_TYPE_SHIFT);
	for (int i = 0; i < 3; i++)
		ep_perf_writer_sample(w, &s[i]);
	assert_int_equal(ep_perf_writer_close(w, err, sizeof(err)), 0);

	struct read_back rb = {0};
	struct ep_perf_data_callbacks cb = {.ctx = &rb,
					    .on_event_desc = rb_desc,
					    .on_comm = rb_comm,
					    .on_mmap = rb_mmap,
					    .on_build_id = rb_build_id,
					    .on_sample = rb_sample};
	struct ep_perf_data_stats stats;
	int rc = ep_perf_data_read(path, &cb, &stats, err, sizeof(err));
	unlink(path);
	assert_int_equal(rc, 0);
	assert_int_equal(rb.descs, 1);
	assert_int_equal(rb.desc.type, PERF_TYPE_HARDWARE);
	assert_int_equal(rb.desc.config, PERF_COUNT_HW_BRANCH_INSTRUCTIONS);
	assert_int_equal(rb.desc.sample_type, PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
						  PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD |
						  PERF_SAMPLE_BRANCH_STACK);
	assert_int_equal(rb.desc.branch_sample_type,
			 PERF_SAMPLE_BRANCH_USER | PERF_SAMPLE_BRANCH_ANY);
	assert_int_equal(rb.desc.sample_period, 1009);
	assert_true(rb.desc.sample_id_all);
	assert_true(rb.desc.exclude_kernel);
	assert_true(rb.desc.counts_all_branches);
	assert_int_equal(rb.comms, 1);
	assert_string_equal(rb.comm, "a-very-long-pro"); /* TASK_COMM_LEN */
	assert_int_equal(rb.mmaps, 1);
	assert_true(rb.mmap.is_mmap2 && rb.mmap.executable);
	assert_int_equal(rb.mmap.start, 0x401000);
	assert_int_equal(rb.mmap.len, 0x2000);
	assert_int_equal(rb.mmap.pgoff, 0x1000);
	assert_int_equal(rb.mmap.ino, 77);
	assert_string_equal(rb.mmap_path, "/bin/prog");
	assert_int_equal(rb.build_ids, 1);
	assert_int_equal(rb.bid.build_id_len, 16);
	assert_memory_equal(rb.bid.build_id, id, 16);
	assert_string_equal(rb.bid_path, "/bin/prog");
	assert_int_equal(rb.nsamples, 3);
	for (int i = 0; i < 3; i++) {
		const struct ep_sample_record *a = &s[i], *b = &rb.samples[i];
		assert_int_equal(b->pid, 42);
		assert_int_equal(b->tid, 43);
		assert_int_equal(b->time_ns, a->time_ns);
		assert_int_equal(b->ip, a->ip);
		assert_int_equal(b->period, 1009);
		assert_int_equal(b->nr_entries, a->nr_entries);
		for (uint32_t k = 0; k < a->nr_entries; k++) {
			assert_int_equal(b->entries[k].from, a->entries[k].from);
			assert_int_equal(b->entries[k].to, a->entries[k].to);
			uint64_t want = a->entries[k].flags;
			if (!(want & EP_BR_MISPRED))
				want |= EP_BR_PREDICTED;
			assert_int_equal(b->entries[k].flags, want);
		}
	}
	assert_true(rb.samples[0].entries[1].flags & EP_BR_MISPRED);
	assert_false(rb.samples[0].entries[1].flags & EP_BR_PREDICTED);
}

/* A path that cannot be created is refused at open, with the reason. */
static void test_perf_data_writer_bad_path(void **state)
{
	(void)state;
	struct ep_perf_writer_event ev = {.name = "branches:u"};
	char err[256];
	assert_null(ep_perf_writer_open("/nonexistent/dir/x.data", &ev, err, sizeof(err)));
	assert_non_null(strstr(err, "/nonexistent/dir/x.data: cannot create"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_branch_entry_bits_match_the_kernel),
	    cmocka_unit_test(test_perf_data_writer_round_trip),
	    cmocka_unit_test(test_perf_data_writer_bad_path),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
