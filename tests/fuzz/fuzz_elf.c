/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target over the binary reader and the decoder set-up
 * (agent/resolve/binary.h, common/decode/decoder.h): the input is a file
 * given as --binary would be (ep_binreg_add_file), read eagerly or lazily
 * (the input's size decides), then asked what the pipeline asks of a
 * binary: build-id, segments, offsets to addresses, symbols, and its
 * decoder from the cache, which sweeps the first instructions of each
 * code segment, looks up every branch site met and walks the straight
 * lines between them. Invariants: a site found is at the address asked,
 * a symbol found starts at or before the address asked, every string and
 * byte range handed out is readable whole. The same bytes go to the
 * collector's reader of uploads (common/elf/elf_image.h), which reads
 * functions with the same code: refused with a reason, or its functions
 * one per address in address order.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/decode/decoder_cache.h"
#include "agent/resolve/binary.h"
#include "common/decode/decoder.h"
#include "common/elf/elf_image.h"
#include "common/util/log.h"
#include "tests/fuzz/fuzz_util.h"

#define FAIL(...) EP_FUZZ_FAIL("fuzz_elf", __VA_ARGS__)
/* instructions swept per code segment: enough to meet many branches,
 * few enough for thousands of inputs a second */
#define SWEEP	  512
#define MAX_STEPS 64

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	ep_log_set_level(EP_LOG_ERROR); /* a warning per damaged input is noise */
	return 0;
}

static void check_symbol(const struct ep_binary *bin, uint64_t vaddr)
{
	const struct ep_symbol *s = ep_binary_symbol_at(bin, vaddr);
	if (!s)
		return;
	ep_fuzz_str(s->name);
	if (s->start > vaddr)
		FAIL("symbol %s at %llx asked for %llx", s->name, (unsigned long long)s->start,
		     (unsigned long long)vaddr);
}

static void check_walks(struct ep_decoder *d, uint64_t from, uint64_t branch)
{
	struct ep_walk_step steps[MAX_STEPS], closing;
	size_t n = 0;
	enum ep_walk_status st =
	    ep_decoder_walk_to_branch(d, from, branch, EP_NO_SITE, steps, MAX_STEPS, &n, &closing);
	if (st == EP_WALK_OK && n > MAX_STEPS)
		FAIL("walk of %zu steps into %d", n, MAX_STEPS);
	for (size_t i = 0; st == EP_WALK_OK && i < n; i++)
		if (steps[i].site >= ep_decoder_site_count(d) ||
		    steps[i].range >= ep_decoder_range_count(d))
			FAIL("walk step %zu: site %u range %u out of the tables", i, steps[i].site,
			     steps[i].range);
	const struct ep_walk_step *looked;
	ep_decoder_walk_lookup(d, from, branch, EP_NO_SITE, MAX_STEPS, &looked, &n, &closing);
	ep_decoder_walk_to_ip(d, from, branch, EP_NO_SITE, steps, MAX_STEPS, &n);
}

static void sweep(struct ep_decoder *d, const struct ep_binary *bin,
		  const struct ep_code_segment *seg)
{
	uint64_t addr = seg->vaddr, line = seg->vaddr;
	for (int i = 0; i < SWEEP && addr - seg->vaddr < seg->size; i++) {
		struct ep_insn_info info;
		if (!ep_decoder_insn(d, addr, &info)) {
			addr++;
			line = addr;
			continue;
		}
		if (info.len == 0)
			FAIL("instruction of length 0 at %llx", (unsigned long long)addr);
		if (info.kind != EP_BRANCH_NONE) {
			uint32_t site = ep_decoder_site_at(d, addr);
			if (site == EP_NO_SITE || ep_decoder_site(d, site)->addr != addr)
				FAIL("branch at %llx has no site", (unsigned long long)addr);
			check_walks(d, line, addr);
			if (info.target)
				check_symbol(bin, info.target);
			line = addr + info.len;
		}
		addr += info.len;
	}
	for (uint32_t r = 0; r < ep_decoder_range_count(d); r++)
		if (ep_decoder_range(d, r)->start > ep_decoder_range(d, r)->end)
			FAIL("range %u ends before it starts", r);
}

static void check_binary(struct ep_binary_registry *reg, struct ep_binary *bin)
{
	size_t idlen, n;
	const uint8_t *id = ep_binary_build_id(bin, &idlen);
	if (idlen > 64 /* binary.c keeps up to 64 bytes */ ||
	    strlen(ep_binary_build_id_hex(bin)) != 2 * idlen)
		FAIL("build-id of %zu bytes, hex %s", idlen, ep_binary_build_id_hex(bin));
	ep_fuzz_touch(id, idlen);
	ep_fuzz_str(ep_binary_path(bin));
	ep_fuzz_str(ep_binary_recorded_path(bin));
	const struct ep_load_segment *loads = ep_binary_load_segments(bin, &n);
	for (size_t i = 0; i < n; i++) {
		uint64_t vaddr, so, sv, sz;
		if (ep_binary_offset_to_vaddr(bin, loads[i].offset, &vaddr))
			check_symbol(bin, vaddr);
		ep_binary_load_segment(bin, loads[i].offset, &so, &sv, &sz);
	}
	const struct ep_code_segment *code = ep_binary_code_segments(bin, &n);
	for (size_t i = 0; i < n; i++) {
		ep_fuzz_touch(code[i].bytes, code[i].size);
		check_symbol(bin, code[i].vaddr);
		check_symbol(bin, code[i].vaddr + code[i].size / 2);
	}
	struct ep_decoder_cache *dc = ep_decoder_cache_new(reg);
	struct ep_decoder *d = dc ? ep_decoder_cache_get(dc, ep_binary_index(bin)) : NULL;
	for (size_t i = 0; d && i < n; i++)
		sweep(d, bin, &code[i]);
	ep_decoder_cache_free(dc);
}

static void check_image(const uint8_t *data, size_t size)
{
	struct ep_elf_limits lim;
	ep_elf_limits_default(&lim, "--max-binary-mib", "--max-image-symbols-mib");
	char note[384], err[512] = "";
	Edgeprof__V1__BinaryImage *img = ep_elf_image_read_limited(data, size, "fuzz", &lim, note,
								   sizeof(note), err, sizeof(err));
	if (!img) {
		if (!err[0])
			FAIL("image refused without a reason");
		return;
	}
	for (size_t i = 1; i < img->n_symbols; i++)
		if (img->symbols[i - 1]->start >= img->symbols[i]->start)
			FAIL("image functions %zu and %zu out of order", i - 1, i);
	ep_elf_image_free(img);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_image(data, size);
	const char *path = ep_fuzz_file(data, size);
	struct ep_binary_registry *reg = ep_binreg_new();
	if (!reg)
		return 0;
	ep_binreg_set_lazy_code(reg, size & 1);
	char err[512];
	if (ep_binreg_add_file(reg, path, err, sizeof(err)) == 0) {
		if (ep_binreg_count(reg) != 1)
			FAIL("one file added, %zu binaries", ep_binreg_count(reg));
		check_binary(reg, ep_binreg_at(reg, 0));
	} else if (!err[0]) {
		FAIL("refused without a reason");
	}
	ep_binreg_free(reg);
	return 0;
}
