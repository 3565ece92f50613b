/* SPDX-License-Identifier: Apache-2.0 */
/*
 * agent --cycles (SPEC, fine-grained CPI): an IP sample stands for its
 * period of cycles at its address. Checked exactly: the attribution on its
 * own (shares among overlapping ranges, addresses in none), then through
 * the pipeline on a hand-made x86-64 binary whose ranges and their counts
 * are known (cycles per range, count x instructions, the scale C / P, the
 * rest per address, the profile's cycles fields, the running totals' merge,
 * report --cpi's units), and the randomized period the cycles event draws
 * (the branch event's own code: within P +- D, mean P).
 */
#include "test_util.h"

#include <elf.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "agent/aggregate/cycles_attr.h"
#include "agent/pipeline/pipeline.h"
#include "agent/source/live/event_set.h"
#include "common/export/export.h"
#include "common/profile/merge.h"
#include "common/profile/profile_file.h"

static void test_attribution_shares_by_count(void **state)
{
	(void)state;
	/* unsorted on purpose; [0x10,0x20] and [0x18,0x20] overlap (a jump
	 * lands at 0x18), [0x100,0x140] and [0x120,0x130] are whole gaps
	 * ending at different branches */
	struct ep_cycles_range r[] = {
	    {0x18, 0x20, 3, 0}, {0x100, 0x140, 2, 0}, {0x10, 0x20, 1, 0}, {0x120, 0x130, 2, 0}};
	struct ep_ip_cycles ips[] = {
	    {0x135, 90},  /* past [0x120,0x130]: [0x100,0x140] alone */
	    {0x1c, 400},  /* both first ranges: 1 : 3 */
	    {0x30, 70},	  /* in no range: kept */
	    {0x12, 50},	  /* [0x10,0x20] alone */
	    {0x128, 200}, /* both gaps, 2 : 2 */
	    {0x20, 8},	  /* the closing branch itself: both first ranges */
	};
	assert_int_equal(ep_cycles_attribute(r, 4, ips, 6, 2.0), 0);
	/* [0x18,0x20]: 2 x (400 x 3/4 + 8 x 3/4); [0x10,0x20]: 2 x (400/4 + 50 + 8/4) */
	assert_true(r[0].cycles == 2 * (300 + 6));
	assert_true(r[2].cycles == 2 * (100 + 50 + 2));
	assert_true(r[1].cycles == 2 * (90 + 100));
	assert_true(r[3].cycles == 2 * 100);
	/* sorted by address; only 0x30 kept its cycles, unscaled */
	const uint64_t want_ip[] = {0x12, 0x1c, 0x20, 0x30, 0x128, 0x135};
	for (size_t j = 0; j < 6; j++) {
		assert_int_equal(ips[j].ip, want_ip[j]);
		assert_int_equal(ips[j].cycles, want_ip[j] == 0x30 ? 70 : 0);
	}
	/* no ranges at all (an IP-only profile): every address keeps its own */
	struct ep_ip_cycles alone[] = {{0x40, 5}, {0x10, 7}};
	assert_int_equal(ep_cycles_attribute(NULL, 0, alone, 2, 1.0), 0);
	assert_int_equal(alone[0].ip, 0x10);
	assert_int_equal(alone[0].cycles, 7);
	assert_int_equal(alone[1].cycles, 5);
}

/* ---- through the pipeline, on a binary built by hand ---- */

#define BASE	    0x400000ULL
#define CODE_OFFSET 0x1000ULL
#define HEAD	    (BASE + CODE_OFFSET)
/* HEAD: 4 nops, jne B          range R1 [HEAD, JNE], 5 instructions
 * FALL: 2 nops, jmp HEAD       range R2 [FALL, JMP], 3
 * B:    8 nops, jmp HEAD       range R3 [B, JMP_B], 9
 * COLD: 3 nops, jmp HEAD       never in a branch sample */
#define JNE   (HEAD + 4)
#define FALL  (JNE + 6)
#define JMP   (FALL + 2)
#define B     (JMP + 5)
#define JMP_B (B + 8)
#define COLD  (JMP_B + 5)
#define JMP_C (COLD + 3)
#define END   (JMP_C + 5)

static void put_jmp(uint8_t *code, uint64_t at, uint64_t to)
{
	int32_t rel = (int32_t)(to - (at + 5));
	code[at - HEAD] = 0xe9;
	memcpy(&code[at - HEAD + 1], &rel, 4);
}

static void write_binary(const char *path)
{
	uint8_t code[END - HEAD];
	memset(code, 0x90, sizeof(code));
	int32_t rel = (int32_t)(B - (JNE + 6));
	code[JNE - HEAD] = 0x0f;
	code[JNE - HEAD + 1] = 0x85;
	memcpy(&code[JNE - HEAD + 2], &rel, 4);
	put_jmp(code, JMP, HEAD);
	put_jmp(code, JMP_B, HEAD);
	put_jmp(code, JMP_C, HEAD);
	Elf64_Ehdr eh = {.e_type = ET_EXEC,
			 .e_machine = EM_X86_64,
			 .e_version = EV_CURRENT,
			 .e_entry = HEAD,
			 .e_phoff = sizeof(Elf64_Ehdr),
			 .e_ehsize = sizeof(Elf64_Ehdr),
			 .e_phentsize = sizeof(Elf64_Phdr),
			 .e_phnum = 1,
			 .e_shentsize = sizeof(Elf64_Shdr)};
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_ident[EI_VERSION] = EV_CURRENT;
	Elf64_Phdr ph = {.p_type = PT_LOAD,
			 .p_flags = PF_R | PF_X,
			 .p_vaddr = BASE,
			 .p_paddr = BASE,
			 .p_filesz = CODE_OFFSET + sizeof(code),
			 .p_memsz = CODE_OFFSET + sizeof(code),
			 .p_align = 0x1000};
	static uint8_t zeros[CODE_OFFSET];
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(&eh, sizeof(eh), 1, f), 1);
	assert_int_equal(fwrite(&ph, sizeof(ph), 1, f), 1);
	assert_int_equal(fwrite(zeros, CODE_OFFSET - sizeof(eh) - sizeof(ph), 1, f), 1);
	assert_int_equal(fwrite(code, sizeof(code), 1, f), 1);
	assert_int_equal(fclose(f), 0);
}

/* A branch sample of pid 42 whose two entries (older first, as run) end
 * the trace; with --chop 2 it counts the range ending at the newer one. */
static void branch_sample(struct ep_pipeline *p, uint64_t from0, uint64_t to0, uint64_t from1,
			  uint64_t to1)
{
	struct ep_sample_record rec;
	memset(&rec, 0, sizeof(rec));
	rec.pid = rec.tid = 42;
	rec.ip = to1;
	rec.flags = EP_SAMPLE_HAS_BRANCHES;
	rec.nr_entries = 2;
	rec.entries[0] = (struct ep_branch_entry){.from = from1, .to = to1};
	rec.entries[1] = (struct ep_branch_entry){.from = from0, .to = to0};
	ep_pipeline_sample(p, &rec);
}

static void cycles_sample(struct ep_pipeline *p, uint64_t ip, uint64_t period, uint32_t flags)
{
	struct ep_cycles_record rec = {
	    .pid = 42, .tid = 42, .flags = flags, .ip = ip, .period = period};
	ep_pipeline_cycles_sample(p, &rec);
}

static const Edgeprof__V1__Range *range_at(const Edgeprof__V1__BinaryProfile *bp, uint64_t start,
					   uint64_t end)
{
	for (size_t i = 0; i < bp->n_ranges; i++)
		if (bp->ranges[i]->start == start && bp->ranges[i]->end == end)
			return bp->ranges[i];
	fail_msg("no range 0x%llx-0x%llx", (unsigned long long)start, (unsigned long long)end);
	return NULL;
}

static uint64_t ip_cycles_at(const Edgeprof__V1__BinaryProfile *bp, uint64_t ip)
{
	for (size_t i = 0; i < bp->n_ips; i++)
		if (bp->ips[i]->ip == ip)
			return bp->ips[i]->cycles;
	return 0;
}

static struct ep_pipeline *new_pipeline(struct ep_binary_registry *reg, const char *elf)
{
	struct ep_pipeline_config cfg;
	ep_pipeline_config_default(&cfg);
	cfg.chop = 2;
	cfg.append_trigger = false;
	struct ep_pipeline *p = ep_pipeline_new(&cfg, reg);
	assert_non_null(p);
	ep_pipeline_mmap(p, 42, BASE, 0x2000, 0, elf, NULL, 0);
	return p;
}

/* Counts R1 3 times, R2 twice, R3 once; cycles samples in R1, R3, COLD,
 * the kernel and no mapping. */
static void feed(struct ep_pipeline *p)
{
	for (int i = 0; i < 3; i++)
		branch_sample(p, JMP_B, HEAD, JNE, B); /* ... HEAD..JNE taken: R1 */
	branch_sample(p, JNE, B, JMP_B, HEAD);	       /* B..JMP_B: R3 */
	for (int i = 0; i < 2; i++)
		branch_sample(p, JMP_B, HEAD, JMP, HEAD); /* JNE not taken, FALL..JMP: R2 */
	cycles_sample(p, HEAD + 1, 600000, 0);
	cycles_sample(p, JNE, 400000, 0);
	cycles_sample(p, B + 3, 3000000, 0);
	cycles_sample(p, COLD + 1, 500000, 0);
	cycles_sample(p, 0xffffffff81000000ULL, 9000000, EP_SAMPLE_IP_KERNEL);
	cycles_sample(p, 0x7000000, 9000000, 0);
}

/* The test binary written to ELF (a mkstemp template) and a pipeline over it */
static struct ep_pipeline *open_fixture(char *elf, struct ep_binary_registry **reg)
{
	int fd = mkstemp(elf);
	assert_true(fd >= 0);
	close(fd);
	write_binary(elf);
	*reg = ep_binreg_new();
	return new_pipeline(*reg, elf);
}

static void close_fixture(struct ep_pipeline *p, struct ep_binary_registry *reg, const char *elf)
{
	ep_pipeline_free(p);
	ep_binreg_free(reg);
	unlink(elf);
}

static void test_pipeline_cycles_per_range(void **state)
{
	(void)state;
	char elf[] = "/tmp/edgeprof-cycles-XXXXXX";
	struct ep_binary_registry *reg;
	struct ep_pipeline *p = open_fixture(elf, &reg);
	/* branch period 1000, chop 2: each branch counted with chance 2/1000 */
	struct ep_pipeline_cycles pc = {.source = "cycles_event",
					.unit = "cycles",
					.period = 2000003,
					.jitter = 125000,
					.branch_period = 1000};
	ep_pipeline_set_cycles(p, &pc);
	feed(p);
	Edgeprof__V1__Profile *prof = ep_pipeline_profile(p);
	assert_non_null(prof);
	assert_int_equal(prof->n_binaries, 1);
	const Edgeprof__V1__BinaryProfile *bp = prof->binaries[0];
	const Edgeprof__V1__Range *r1 = range_at(bp, HEAD, JNE), *r2 = range_at(bp, FALL, JMP),
				  *r3 = range_at(bp, B, JMP_B);
	assert_int_equal(r1->count, 3);
	assert_int_equal(r2->count, 2);
	assert_int_equal(r3->count, 1);
	/* (600,000 + 400,000) x 2/1000; 3,000,000 x 2/1000 */
	assert_int_equal(r1->cycles, 2000);
	assert_int_equal(r3->cycles, 6000);
	assert_int_equal(r2->cycles, 0);
	/* every counted range ran count x its instructions, sampled or not */
	assert_int_equal(r1->cycled_instructions, 3 * 5);
	assert_int_equal(r2->cycled_instructions, 2 * 3);
	assert_int_equal(r3->cycled_instructions, 1 * 9);
	/* COLD is in no counted range: its cycles stay at its address, scaled */
	assert_int_equal(ip_cycles_at(bp, COLD + 1), 1000);
	assert_int_equal(ip_cycles_at(bp, HEAD + 1), 0);
	assert_string_equal(prof->config->cycles_source, "cycles_event");
	assert_string_equal(prof->config->cycles_unit, "cycles");
	assert_int_equal(prof->config->cycles_period, 2000003);
	assert_int_equal(prof->config->cycles_jitter, 125000);
	assert_true(fabs(prof->config->cycles_scale - 0.002) < 1e-12);
	assert_int_equal(prof->stats->cycles_samples, 6);
	assert_int_equal(prof->stats->cycles_samples_unresolved, 2);

	/* report --cpi: R3 has the most cycles, CPI 6000 / 9 */
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);
	assert_int_equal(ep_report_cpi(prof, 3, out), 0);
	fclose(out);
	assert_non_null(strstr(text, "from the cycles event's IP samples"));
	char want[128];
	snprintf(want, sizeof(want), "blocks by cycles:\n  %-21s %12s", "block", "cycles");
	assert_non_null(strstr(text, want));
	char block[48];
	snprintf(block, sizeof(block), "0x%llx-0x%llx", (unsigned long long)B,
		 (unsigned long long)JMP_B);
	/* 6000 of the ranges' 8000 cycles */
	snprintf(want, sizeof(want), "%-21s %12d %6.2f%% %14d %7.3f", block, 6000, 75.0, 9,
		 6000 / 9.0);
	assert_non_null(strstr(text, want));
	assert_non_null(strstr(text, "1000 cycles at sampled addresses in no counted block"));
	free(text);

	/* the running totals (a file beside --collector): cycles summed */
	struct ep_merge *m = ep_merge_new();
	assert_int_equal(ep_merge_add(m, 0, bp, NULL), 0);
	assert_int_equal(ep_merge_add(m, 0, bp, NULL), 0);
	struct ep_merged merged;
	assert_int_equal(ep_merge_build(m, &merged), 0);
	assert_int_equal(merged.n, 1);
	const Edgeprof__V1__BinaryProfile *sum = merged.slices[0].delta->profile;
	assert_int_equal(range_at(sum, B, JMP_B)->cycles, 12000);
	assert_int_equal(range_at(sum, HEAD, JNE)->cycled_instructions, 30);
	assert_int_equal(ip_cycles_at(sum, COLD + 1), 2000);
	ep_merged_free(&merged);
	ep_merge_free(m);
	ep_profile_free(prof);

	/* a delta holds the cycles since the last one, then they are gone */
	cycles_sample(p, B + 1, 1000000, 0);
	prof = ep_pipeline_take_delta(p);
	assert_int_equal(range_at(prof->binaries[0], B, JMP_B)->cycles, 8000);
	ep_profile_free(prof);
	prof = ep_pipeline_take_delta(p);
	for (size_t i = 0; i < prof->n_binaries; i++)
		for (size_t j = 0; j < prof->binaries[i]->n_ranges; j++)
			assert_int_equal(prof->binaries[i]->ranges[j]->cycles, 0);
	ep_profile_free(prof);
	close_fixture(p, reg, elf);
}

/* Without branch stacks (no PMU: cpu-clock stands in) nothing is counted
 * in ranges: every sample's time stays at its address, unscaled, in ns. */
static void test_ip_only_cycles_stay_at_their_addresses(void **state)
{
	(void)state;
	char elf[] = "/tmp/edgeprof-cycles-XXXXXX";
	struct ep_binary_registry *reg;
	struct ep_pipeline *p = open_fixture(elf, &reg);
	struct ep_pipeline_cycles pc = {
	    .source = "cpu_clock", .unit = "ns", .period = 770000, .branch_period = 1000000};
	ep_pipeline_set_cycles(p, &pc);
	struct ep_sample_record rec = {.pid = 42, .tid = 42, .ip = B + 2};
	ep_pipeline_sample(p, &rec);
	cycles_sample(p, B + 2, 770001, 0);
	cycles_sample(p, B + 2, 769999, 0);
	cycles_sample(p, HEAD, 770000, 0);
	Edgeprof__V1__Profile *prof = ep_pipeline_profile(p);
	const Edgeprof__V1__BinaryProfile *bp = prof->binaries[0];
	assert_int_equal(bp->n_ranges, 0);
	assert_int_equal(ip_cycles_at(bp, B + 2), 1540000);
	assert_int_equal(ip_cycles_at(bp, HEAD), 770000);
	assert_true(prof->config->cycles_scale == 1.0);
	assert_string_equal(prof->config->cycles_unit, "ns");
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);
	assert_int_equal(ep_report_cpi(prof, 3, out), 0);
	fclose(out);
	assert_non_null(strstr(text, "nanoseconds per instruction from cpu-clock"));
	assert_non_null(strstr(text, "functions by ns:"));
	char want[96];
	snprintf(want, sizeof(want), "  0x%-19llx %12d %6.2f%%", (unsigned long long)(B + 2),
		 1540000, 200.0 / 3);
	assert_non_null(strstr(text, want));
	free(text);
	ep_profile_free(prof);
	close_fixture(p, reg, elf);
}

/* Both events draw their periods with this code: P +- D, uniform, mean P. */
static void test_period_draws_within_p_plus_minus_d(void **state)
{
	(void)state;
	struct ep_period_plan plan;
	ep_period_plan_make(&plan, 2000003, 125000);
	uint64_t rng = 0x9e3779b97f4a7c15ULL, lo = UINT64_MAX, hi = 0;
	double sum = 0, sumsq = 0;
	const int n = 200000;
	for (int i = 0; i < n; i++) {
		uint64_t v = ep_period_draw(&plan, &rng);
		lo = v < lo ? v : lo;
		hi = v > hi ? v : hi;
		sum += (double)v;
		sumsq += (double)v * (double)v;
	}
	double mean = sum / n, sd = sqrt(sumsq / n - mean * mean), want_sd = 125000 / sqrt(3);
	assert_true(lo >= 2000003 - 125000 && hi <= 2000003 + 125000);
	/* a uniform draw: its mean within 5 standard errors, its spread D / sqrt 3 */
	assert_true(fabs(mean - 2000003) < 5 * want_sd / sqrt(n));
	assert_true(fabs(sd - want_sd) < 0.01 * want_sd);
	assert_true(hi - lo > 2 * 125000 * 0.99);
	assert_int_equal(plan.period, 2000003);
	assert_int_equal(plan.jitter, 125000);
	/* D = 0: the period itself */
	ep_period_plan_make(&plan, 1000, 0);
	assert_int_equal(ep_period_draw(&plan, &rng), 1000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_attribution_shares_by_count),
	    cmocka_unit_test(test_pipeline_cycles_per_range),
	    cmocka_unit_test(test_ip_only_cycles_stay_at_their_addresses),
	    cmocka_unit_test(test_period_draws_within_p_plus_minus_d),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
