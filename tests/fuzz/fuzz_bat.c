/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target over BOLT's address translation table reader
 * (common/elf/elf_bat.h): the input is the .note.bolt_bat section of any
 * container's binary. It is refused with a reason, or kept within its
 * budget, consistent (fragments sorted and distinct, each one's entries in
 * the table, sorted by output offset and distinct, a cold part naming a
 * hot one that is there), and every query of it stays inside it:
 * translating offsets, block starts and the fall-throughs of traces, at
 * and around each entry.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/elf/elf_bat.h"
#include "common/elf/elf_budget.h"
#include "common/util/log.h"
#include "tests/fuzz/fuzz_util.h"

#define FAIL(...) EP_FUZZ_FAIL("fuzz_bat", __VA_ARGS__)
/* the tables budget of one file: small, so inputs reach past it */
#define BUDGET (1u << 20)
/* queries per fragment: enough to meet every kind of entry */
#define QUERIES 64

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	ep_log_set_level(EP_LOG_ERROR);
	return 0;
}

static void on_fallthrough(void *ctx, uint32_t from, uint32_t to)
{
	/* from a block start (the first may be before the trace's start) to
	 * the next, never past the trace's end */
	const uint32_t *bound = ctx;
	if (from >= to || to > bound[1])
		FAIL("fall-through %u -> %u in the trace %u..%u", from, to, bound[0], bound[1]);
}

static void check_frag(const struct ep_bat *bat, const struct ep_bat_frag *f)
{
	if ((uint64_t)f->first + f->n > bat->nentries)
		FAIL("fragment at %llx: entries %u+%u past the table's %zu",
		     (unsigned long long)f->addr, f->first, f->n, bat->nentries);
	if (f->hot != f->addr && !ep_bat_frag_at(bat, f->hot))
		FAIL("cold fragment at %llx names a hot part at %llx that is not there",
		     (unsigned long long)f->addr, (unsigned long long)f->hot);
	const struct ep_bat_entry *e = bat->entries + f->first;
	for (uint32_t i = 1; i < f->n; i++)
		if (e[i].out <= e[i - 1].out)
			FAIL("fragment at %llx: entries not sorted by offset (%u after %u)",
			     (unsigned long long)f->addr, e[i].out, e[i - 1].out);
	uint32_t last = f->n ? e[f->n - 1].out : 0;
	for (uint32_t q = 0; q < QUERIES && q <= f->n; q++) {
		uint32_t off = q < f->n ? e[q].out : last + 1;
		for (int d = -1; d <= 1; d++) {
			uint64_t at = (uint64_t)off + (uint64_t)(int64_t)d;
			ep_bat_translate(bat, f, at, d == 0);
			ep_bat_is_block_start(bat, f, at);
		}
		uint32_t trace[2] = {off, off + 64 < off ? off : off + 64};
		ep_bat_fallthroughs(bat, f, trace[0], trace[1], on_fallthrough, trace);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ep_elf_limits lim;
	ep_elf_limits_default(&lim, "--code", "--tables");
	lim.table_bytes = BUDGET;
	struct ep_elf_budget budget;
	ep_elf_budget_init(&budget, &lim);
	struct ep_bat bat;
	memset(&bat, 0, sizeof(bat));
	char err[256];
	if (ep_bat_parse(data, size, &budget, &bat, err, sizeof(err)) != 0) {
		if (!err[0])
			FAIL("refused without a reason");
		ep_elf_budget_release(&budget);
		return 0;
	}
	if (bat.bolt_version != 16 && bat.bolt_version != 19)
		FAIL("accepted as BOLT %d's encoding", bat.bolt_version);
	if (budget.used > BUDGET)
		FAIL("kept %llu bytes within a budget of %u", (unsigned long long)budget.used,
		     BUDGET);
	for (size_t i = 0; i < bat.nfrags; i++) {
		if (i && bat.frags[i].addr <= bat.frags[i - 1].addr)
			FAIL("fragments not sorted and distinct at %zu", i);
		check_frag(&bat, &bat.frags[i]);
	}
	ep_bat_free(&bat);
	ep_elf_budget_release(&budget);
	return 0;
}
