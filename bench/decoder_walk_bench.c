/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Decoder walk speed after warm-up: from every direct branch target of
 * test.binary to the next branch instruction, the walk reconstruction does
 * for each gap between two taken branches. Prints
 *   decoder_walks_per_sec: N           (from_site given: the per-site cache)
 *   decoder_walks_by_address_per_sec: N (from_site unknown: the hash lookup)
 */
#include <capstone.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/decode/decoder.h"

struct walk {
	uint64_t start, end;
	uint32_t from;
};

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The executable PT_LOAD (what the decoder reads) and .text inside it (what
 * the sweep looks at: the segment also holds headers and read-only data). */
static uint8_t *read_code(const char *path, struct ep_code_segment *seg, uint64_t *text,
			  uint64_t *text_size)
{
	if (elf_version(EV_CURRENT) == EV_NONE)
		return NULL;
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return NULL;
	uint8_t *bytes = NULL;
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	size_t phnum;
	if (e && elf_getphdrnum(e, &phnum) == 0) {
		for (size_t i = 0; i < phnum && !bytes; i++) {
			GElf_Phdr ph;
			if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD ||
			    !(ph.p_flags & PF_X))
				continue;
			bytes = malloc(ph.p_filesz);
			if (bytes && pread(fd, bytes, ph.p_filesz, (off_t)ph.p_offset) !=
					 (ssize_t)ph.p_filesz) {
				free(bytes);
				bytes = NULL;
				break;
			}
			*seg = (struct ep_code_segment){
			    .vaddr = ph.p_vaddr, .bytes = bytes, .size = ph.p_filesz};
		}
	}
	size_t shstrndx;
	Elf_Scn *scn = NULL;
	*text = *text_size = 0;
	if (e && elf_getshdrstrndx(e, &shstrndx) == 0)
		while ((scn = elf_nextscn(e, scn))) {
			GElf_Shdr sh;
			const char *name;
			if (gelf_getshdr(scn, &sh) &&
			    (name = elf_strptr(e, shstrndx, sh.sh_name)) &&
			    strcmp(name, ".text") == 0) {
				*text = sh.sh_addr;
				*text_size = sh.sh_size;
			}
		}
	if (e)
		elf_end(e);
	close(fd);
	return bytes;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* Runs every walk reps times; returns walks per second. */
static double run(struct ep_decoder *d, const struct walk *w, size_t n, int reps, bool by_site,
		  uint64_t *checksum)
{
	struct ep_walk_step steps[256], closing;
	size_t nsteps;
	double t0 = now();
	for (int r = 0; r < reps; r++)
		for (size_t i = 0; i < n; i++) {
			enum ep_walk_status s = ep_decoder_walk_to_branch(
			    d, w[i].start, w[i].end, by_site ? w[i].from : EP_NO_SITE, steps, 256,
			    &nsteps, &closing);
			/* keeps the compiler from dropping the walks */
			*checksum += s + nsteps + closing.range;
		}
	return (double)n * reps / (now() - t0);
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "tests/data/lbr/test.binary";
	struct ep_code_segment seg;
	uint64_t text, text_size;
	uint8_t *bytes = read_code(path, &seg, &text, &text_size);
	if (!bytes || text < seg.vaddr || text + text_size > seg.vaddr + seg.size) {
		fprintf(stderr, "decoder_walk_bench: cannot read code of %s\n", path);
		free(bytes);
		return 1;
	}
	struct ep_decoder *d = ep_decoder_new(EP_ARCH_X86_64, &seg, 1);
	csh cs;
	if (!d || cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK) {
		fprintf(stderr, "decoder_walk_bench: no decoder\n");
		ep_decoder_free(d);
		free(bytes);
		return 1;
	}
	/* a linear sweep finds the instructions; the decoder says which branch */
	size_t cap = text_size / 2 + 1, nbranches = 0;
	uint64_t *branches = malloc(cap * sizeof(*branches));
	cs_insn *insn = cs_malloc(cs);
	const uint8_t *code = seg.bytes + (text - seg.vaddr);
	size_t left = text_size;
	uint64_t addr = text;
	while (left && branches) {
		if (!cs_disasm_iter(cs, &code, &left, &addr, insn)) {
			code++, left--, addr++;
			continue;
		}
		if (ep_decoder_site_at(d, insn->address) != EP_NO_SITE && nbranches < cap)
			branches[nbranches++] = insn->address;
	}
	cs_free(insn, 1);
	cs_close(&cs);
	qsort(branches, nbranches, sizeof(*branches), cmp_u64);

	struct walk *walks = malloc((8 * nbranches + 1) * sizeof(*walks));
	size_t nwalks = 0;
	for (size_t i = 0; i < nbranches && walks; i++) {
		uint32_t site = ep_decoder_site_at(d, branches[i]);
		const struct ep_site *s = ep_decoder_site(d, site);
		if (!s->target || s->target < text || s->target >= text + text_size)
			continue;
		size_t lo = 0, hi = nbranches;
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;
			if (branches[mid] < s->target)
				lo = mid + 1;
			else
				hi = mid;
		}
		/* a taken branch may be any of the branches down the line, not
		 * only the first */
		for (size_t j = lo; j < nbranches && j < lo + 8; j++) {
			walks[nwalks++] = (struct walk){s->target, branches[j], site};
			const struct ep_site *b =
			    ep_decoder_site(d, ep_decoder_site_at(d, branches[j]));
			if (b->kind != EP_BRANCH_COND)
				break;
		}
	}

	/* warm-up: every run built once; the rest never decodes */
	struct ep_walk_step steps[256], closing;
	size_t nsteps, ok = 0, total_steps = 0, by_status[EP_WALK_TOO_LONG + 1] = {0};
	double t0 = now();
	for (size_t i = 0; i < nwalks; i++) {
		enum ep_walk_status st = ep_decoder_walk_to_branch(
		    d, walks[i].start, walks[i].end, walks[i].from, steps, 256, &nsteps, &closing);
		by_status[st]++;
		if (st == EP_WALK_OK) {
			ok++;
			total_steps += nsteps;
		}
	}
	for (int st = 0; st <= EP_WALK_TOO_LONG; st++)
		if (by_status[st])
			fprintf(stderr, "decoder_walk_bench: %zu walks %s\n", by_status[st],
				ep_walk_status_name((enum ep_walk_status)st));
	double cold = now() - t0;

	uint64_t checksum = 0;
	/* about 2e7 walks a measurement: long enough to drown timer noise */
	int reps = (int)(2e7 / (double)(nwalks + 1)) + 1;
	double by_site = run(d, walks, nwalks, reps, true, &checksum);
	double by_addr = run(d, walks, nwalks, reps, false, &checksum);
	fprintf(stderr,
		"decoder_walk_bench: %zu walks (%zu ok, %.2f conditionals passed on average), "
		"%u sites, %u ranges, first pass %.3f s, x%d (checksum %llu)\n",
		nwalks, ok, ok ? (double)total_steps / (double)ok : 0.0, ep_decoder_site_count(d),
		ep_decoder_range_count(d), cold, reps, (unsigned long long)checksum);
	printf("decoder_walks_per_sec: %.0f\n", by_site);
	printf("decoder_walks_by_address_per_sec: %.0f\n", by_addr);
	free(walks);
	free(branches);
	ep_decoder_free(d);
	free(bytes);
	return 0;
}
