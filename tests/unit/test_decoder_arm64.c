/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The decoder on AArch64, against aarch64-linux-gnu-objdump (binutils, a
 * decoder we did not write) on real aarch64 binaries: the workloads
 * cross-compiled here with aarch64-linux-gnu-gcc (static with glibc's
 * hand-written assembly, PIE with pointer authentication, jump tables), a
 * hand-written file of every branch form with data in its code
 * (tests/workloads/aarch64_branches.S), and Debian's own arm64 builds of
 * libzstd and glibc (libzstd1:arm64, libc6:arm64; scripts/setup-deps.sh).
 * Then the reconstruct stage on a branch stack built by hand over one of
 * them.
 */
#include "test_util.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/pipeline/pipeline.h"
#include "common/decode/decoder.h"
#include "common/elf/elf_mapsyms.h"
#include "common/profile/profile_file.h"

#define OBJDUMP	  "aarch64-linux-gnu-objdump"
#define GCC	  "aarch64-linux-gnu-gcc"
#define KIND_DATA 0xff /* an objdump line that is data ($d), not an instruction */

static char tmpdir[] = "/tmp/edgeprof-arm64-XXXXXX";
static bool have_tools;

/* Words of every branch form, hand-assembled from the Arm ARM's encodings,
 * for the forms objdump 2.40 does not know (BC.cond) and the corners of the
 * encoding groups no compiler emits. */
static void test_words(void **state)
{
	(void)state;
	static const struct {
		uint32_t w;
		uint8_t kind;
		int64_t delta;	  /* target - pc, 0 for none */
		const char *text; /* ep_arm64_branch_text, NULL when it has none */
	} cases[] = {
	    {0x54000040, EP_BRANCH_COND, 8, NULL},	     /* b.eq +8 */
	    {0x54ffffeb, EP_BRANCH_COND, -4, NULL},	     /* b.lt -4 */
	    {0x5400004e, EP_BRANCH_JUMP, 8, NULL},	     /* b.al: always */
	    {0x5400004f, EP_BRANCH_JUMP, 8, NULL},	     /* b.nv: always too */
	    {0x54000050, EP_BRANCH_COND, 8, "bc.eq 0x1008"}, /* FEAT_HBC */
	    {0x5400005e, EP_BRANCH_JUMP, 8, "bc.al 0x1008"},
	    {0x55000040, EP_BRANCH_NONE, 0, NULL},	      /* o1 = 1: unallocated, not b.cond */
	    {0xb4000040, EP_BRANCH_COND, 8, NULL},	      /* cbz x0 */
	    {0x35ffffe2, EP_BRANCH_COND, -4, NULL},	      /* cbnz w2 */
	    {0x36180041, EP_BRANCH_COND, 8, NULL},	      /* tbz w1, #3 */
	    {0xb7fffff3, EP_BRANCH_COND, -4, NULL},	      /* tbnz x19, #63 */
	    {0x16000000, EP_BRANCH_JUMP, -(1LL << 27), NULL}, /* b: the farthest back */
	    {0x95ffffff, EP_BRANCH_CALL, (1LL << 27) - 4, NULL}, /* bl: the farthest on */
	    {0xd61f0200, EP_BRANCH_JUMP_INDIRECT, 0, NULL},	 /* br x16 */
	    {0xd61f087f, EP_BRANCH_JUMP_INDIRECT, 0, "braaz x3"},
	    {0xd61f0c9f, EP_BRANCH_JUMP_INDIRECT, 0, "brabz x4"},
	    {0xd71f0822, EP_BRANCH_JUMP_INDIRECT, 0, "braa x1, x2"},
	    {0xd71f0c3f, EP_BRANCH_JUMP_INDIRECT, 0, "brab x1, sp"},
	    {0xd63f0120, EP_BRANCH_CALL_INDIRECT, 0, NULL}, /* blr x9 */
	    {0xd63f08ff, EP_BRANCH_CALL_INDIRECT, 0, "blraaz x7"},
	    {0xd63f0d5f, EP_BRANCH_CALL_INDIRECT, 0, "blrabz x10"},
	    {0xd73f08a6, EP_BRANCH_CALL_INDIRECT, 0, "blraa x5, x6"},
	    {0xd73f0d09, EP_BRANCH_CALL_INDIRECT, 0, "blrab x8, x9"},
	    {0xd65f03c0, EP_BRANCH_RETURN, 0, NULL}, /* ret */
	    {0xd65f0060, EP_BRANCH_RETURN, 0, NULL}, /* ret x3 */
	    {0xd65f0bff, EP_BRANCH_RETURN, 0, "retaa"},
	    {0xd65f0fff, EP_BRANCH_RETURN, 0, "retab"},
	    {0xd69f03e0, EP_BRANCH_OTHER, 0, NULL}, /* eret */
	    {0xd69f0bff, EP_BRANCH_OTHER, 0, "eretaa"},
	    {0xd69f0fff, EP_BRANCH_OTHER, 0, "eretab"},
	    {0xd6bf03e0, EP_BRANCH_OTHER, 0, NULL}, /* drps */
	    /* unallocated in the register-branch group: undefined, it traps */
	    {0xd61f0201, EP_BRANCH_OTHER, 0, NULL}, /* br with op4 != 0 */
	    {0xd65f0bfe, EP_BRANCH_OTHER, 0, NULL}, /* retaa with op4 != 11111 */
	    {0xd61e0200, EP_BRANCH_OTHER, 0, NULL}, /* op2 != 11111 */
	    {0xd4207d00, EP_BRANCH_OTHER, 0, NULL}, /* brk #0x3e8 */
	    {0xd4400040, EP_BRANCH_OTHER, 0, NULL}, /* hlt #2 */
	    {0xd4a00001, EP_BRANCH_OTHER, 0, NULL}, /* dcps1 */
	    {0x00000000, EP_BRANCH_OTHER, 0, NULL}, /* udf #0 */
	    {0x0000ffff, EP_BRANCH_OTHER, 0, NULL}, /* udf #0xffff */
	    {0xd4000001, EP_BRANCH_NONE, 0, NULL},  /* svc #0: resumes after */
	    {0xd4000002, EP_BRANCH_NONE, 0, NULL},  /* hvc #0 */
	    {0xd503233f, EP_BRANCH_NONE, 0, NULL},  /* paciasp */
	    {0xd503245f, EP_BRANCH_NONE, 0, NULL},  /* bti c */
	    {0xf8200420, EP_BRANCH_NONE, 0, NULL},  /* ldraa: a load, not a branch */
	    {0x58000040, EP_BRANCH_NONE, 0, NULL},  /* ldr x0, literal */
	    {0x10000040, EP_BRANCH_NONE, 0, NULL},  /* adr x0, +8 */
	};
	const uint64_t pc = 0x1000;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct ep_insn_info info;
		ep_arm64_classify_word(cases[i].w, pc, &info);
		if (info.kind != cases[i].kind)
			fail_msg("0x%08x: kind %s, want %s", cases[i].w,
				 ep_branch_kind_name(info.kind),
				 ep_branch_kind_name(cases[i].kind));
		assert_int_equal(info.len, 4);
		assert_int_equal(info.target, cases[i].delta ? pc + (uint64_t)cases[i].delta : 0);
		char text[64];
		bool has = ep_arm64_branch_text(cases[i].w, pc, text, sizeof(text));
		assert_int_equal(has, cases[i].text != NULL);
		if (has)
			assert_string_equal(text, cases[i].text);
	}
}

/* Lengths and data: a word cut by the segment's end and a misaligned
 * address are not instructions; data named by ep_decoder_set_data is no
 * code to any walk, even where its words read as branches. */
static void test_alignment_and_data(void **state)
{
	(void)state;
	/* 0x2000 nop | 0x2004 b.eq 0x2000 | 0x2008 nop | 0x200c [data: ret] |
	 * 0x2010 [data: b 0x2000] | 0x2014 nop | 0x2018 ret | 0x201c half a word */
	static const uint32_t words[] = {0xd503201f, 0x54ffffe0, 0xd503201f, 0xd65f03c0,
					 0x17fffffc, 0xd503201f, 0xd65f03c0};
	uint8_t bytes[sizeof(words) + 2];
	memcpy(bytes, words, sizeof(words));
	bytes[sizeof(words)] = bytes[sizeof(words) + 1] = 0;
	struct ep_code_segment seg = {.vaddr = 0x2000, .bytes = bytes, .size = sizeof(bytes)};
	static const struct ep_addr_range data[] = {{0x200c, 0x2014}};
	struct ep_decoder *d = ep_decoder_new(EP_ARCH_AARCH64, &seg, 1);
	assert_non_null(d);
	ep_decoder_set_data(d, data, 1);
	struct ep_walk_step steps[8], closing;
	size_t n;
	struct ep_insn_info info;
	/* the straight line ends where the data starts, its ret unread */
	assert_int_equal(ep_decoder_walk_to_ip(d, 0x2000, 0x2008, EP_NO_SITE, steps, 8, &n),
			 EP_WALK_OK);
	assert_int_equal(n, 1);
	assert_int_equal(ep_decoder_walk_to_ip(d, 0x2000, 0x200c, EP_NO_SITE, steps, 8, &n),
			 EP_WALK_NO_CODE);
	assert_int_equal(
	    ep_decoder_walk_to_branch(d, 0x2000, 0x200c, EP_NO_SITE, steps, 8, &n, &closing),
	    EP_WALK_NO_CODE);
	assert_int_equal(ep_decoder_site_at(d, 0x200c), EP_NO_SITE);
	assert_int_equal(ep_decoder_site_at(d, 0x2010), EP_NO_SITE);
	assert_false(ep_decoder_insn(d, 0x2010, &info));
	assert_int_equal(ep_decoder_walk_to_ip(d, 0x2010, 0x2010, EP_NO_SITE, steps, 8, &n),
			 EP_WALK_NO_CODE);
	/* code again after the data */
	assert_int_equal(
	    ep_decoder_walk_to_branch(d, 0x2014, 0x2018, EP_NO_SITE, steps, 8, &n, &closing),
	    EP_WALK_OK);
	assert_int_equal(ep_decoder_site(d, closing.site)->kind, EP_BRANCH_RETURN);
	/* inside a word, and the half word at the end */
	assert_int_equal(ep_decoder_walk_to_ip(d, 0x2000, 0x2006, EP_NO_SITE, steps, 8, &n),
			 EP_WALK_OVERRUN);
	assert_int_equal(ep_decoder_walk_to_ip(d, 0x2002, 0x2002, EP_NO_SITE, steps, 8, &n),
			 EP_WALK_OK); /* the start itself is taken as given... */
	assert_int_equal(ep_decoder_walk_to_ip(d, 0x2002, 0x2006, EP_NO_SITE, steps, 8, &n),
			 EP_WALK_BAD_INSN); /* ...but nothing decodes there */
	assert_false(ep_decoder_insn(d, 0x201c, &info));
	char text[64];
	assert_true(ep_decoder_insn_text(d, 0x2004, &info, text, sizeof(text)));
	assert_int_equal(info.kind, EP_BRANCH_COND);
	assert_int_equal(info.target, 0x2000);
	ep_decoder_free(d);

	/* without the data ranges (a stripped binary) the same bytes read as
	 * code: the return in the data closes the line */
	d = ep_decoder_new(EP_ARCH_AARCH64, &seg, 1);
	assert_int_equal(
	    ep_decoder_walk_to_branch(d, 0x2000, 0x200c, EP_NO_SITE, steps, 8, &n, &closing),
	    EP_WALK_OK);
	ep_decoder_free(d);
}

/* One line of objdump's listing: an instruction or a data word. */
struct line {
	uint64_t addr;
	uint64_t target; /* direct branch target, else 0 */
	uint8_t kind;	 /* what objdump's mnemonic says, or KIND_DATA */
	char mnem[16];
};

struct listing {
	struct line *v;
	size_t n;
	uint64_t *starts; /* function starts: objdump's <symbol> labels */
	char (*names)[64];
	size_t nstarts;
};

static uint8_t expected_kind(const char *m)
{
	static const char *const other[] = {"eret", "eretaa", "eretab", "drps",	 "brk",
					    "hlt",  "udf",    "dcps1",	"dcps2", "dcps3"};
	for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++)
		if (!strcmp(m, other[i]))
			return EP_BRANCH_OTHER;
	if (!strcmp(m, "b") || !strcmp(m, "b.al") || !strcmp(m, "b.nv"))
		return EP_BRANCH_JUMP;
	if (!strncmp(m, "b.", 2) || !strcmp(m, "cbz") || !strcmp(m, "cbnz") || !strcmp(m, "tbz") ||
	    !strcmp(m, "tbnz"))
		return EP_BRANCH_COND;
	if (!strcmp(m, "bl"))
		return EP_BRANCH_CALL;
	if (!strcmp(m, "br") || !strcmp(m, "braa") || !strcmp(m, "brab") || !strcmp(m, "braaz") ||
	    !strcmp(m, "brabz"))
		return EP_BRANCH_JUMP_INDIRECT;
	if (!strcmp(m, "blr") || !strcmp(m, "blraa") || !strcmp(m, "blrab") ||
	    !strcmp(m, "blraaz") || !strcmp(m, "blrabz"))
		return EP_BRANCH_CALL_INDIRECT;
	if (!strcmp(m, "ret") || !strcmp(m, "retaa") || !strcmp(m, "retab"))
		return EP_BRANCH_RETURN;
	return EP_BRANCH_NONE;
}

/* A direct branch's target: its last operand, "4001f8 <into_data>". */
static uint64_t direct_target(char *ops)
{
	if (!ops)
		return 0;
	char *cut = strstr(ops, " <");
	if (cut)
		*cut = '\0';
	char *last = strrchr(ops, ' ');
	last = last ? last + 1 : ops;
	unsigned long long t;
	return sscanf(last, "%llx", &t) == 1 ? t : 0;
}

static void add_line(struct listing *l, size_t *cap, const struct line *ln)
{
	if (l->n == *cap) {
		*cap = *cap ? 2 * *cap : 4096;
		l->v = realloc(l->v, *cap * sizeof(*l->v));
		assert_non_null(l->v);
	}
	l->v[l->n++] = *ln;
}

/* objdump -d -z (zeros listed, not elided) of every executable section. */
static void listing_read(const char *path, struct listing *l)
{
	char cmd[4200];
	snprintf(cmd, sizeof(cmd), OBJDUMP " -d -z --no-show-raw-insn %s", path);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	memset(l, 0, sizeof(*l));
	size_t cap = 0, scap = 0;
	char buf[1024];
	while (fgets(buf, sizeof(buf), p)) {
		unsigned long long addr;
		char name[64];
		if (sscanf(buf, "%llx <%63[^>]>:", &addr, name) == 2 && strstr(buf, ">:")) {
			if (l->nstarts == scap) {
				scap = scap ? 2 * scap : 1024;
				l->starts = realloc(l->starts, scap * sizeof(*l->starts));
				l->names = realloc(l->names, scap * sizeof(*l->names));
				assert_non_null(l->starts);
				assert_non_null(l->names);
			}
			snprintf(l->names[l->nstarts], sizeof(l->names[0]), "%s", name);
			l->starts[l->nstarts++] = addr;
			continue;
		}
		char *tab = strchr(buf, '\t');
		if (!tab || sscanf(buf, " %llx:", &addr) != 1)
			continue;
		char *save = NULL, *mnem = strtok_r(tab + 1, " \t\n", &save);
		if (!mnem)
			continue;
		char *ops = strtok_r(NULL, "\n", &save);
		struct line ln = {.addr = addr};
		snprintf(ln.mnem, sizeof(ln.mnem), "%s", mnem);
		if (!strcmp(mnem, ".word") || !strcmp(mnem, ".short") || !strcmp(mnem, ".byte")) {
			ln.kind = KIND_DATA;
		} else {
			ln.kind = expected_kind(mnem);
			if (ln.kind != EP_BRANCH_NONE && ln.kind != EP_BRANCH_OTHER &&
			    ln.kind != EP_BRANCH_RETURN && ln.kind != EP_BRANCH_JUMP_INDIRECT &&
			    ln.kind != EP_BRANCH_CALL_INDIRECT)
				ln.target = direct_target(ops);
		}
		add_line(l, &cap, &ln);
	}
	pclose(p);
}

static void listing_free(struct listing *l)
{
	free(l->v);
	free(l->starts);
	free(l->names);
}

static uint64_t label(const struct listing *l, const char *name)
{
	for (size_t i = 0; i < l->nstarts; i++)
		if (!strcmp(l->names[i], name))
			return l->starts[i];
	fail_msg("no <%s> in objdump's listing", name);
	return 0;
}

/* Index of the line at addr, or l->n. */
static size_t line_at(const struct listing *l, uint64_t addr)
{
	size_t lo = 0, hi = l->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (l->v[mid].addr < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < l->n && l->v[lo].addr == addr ? lo : l->n;
}

/* The binary's executable PT_LOADs (what the agent gives the decoder) and
 * its data in code, read by the product's reader. */
struct image {
	struct ep_code_segment segs[8];
	size_t nsegs;
	struct ep_addr_range *data;
	size_t ndata;
};

static void image_read(const char *path, struct image *im)
{
	assert_int_not_equal(elf_version(EV_CURRENT), EV_NONE);
	memset(im, 0, sizeof(*im));
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	assert_non_null(e);
	size_t phnum;
	assert_int_equal(elf_getphdrnum(e, &phnum), 0);
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;
		assert_non_null(gelf_getphdr(e, (int)i, &ph));
		if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X))
			continue;
		assert_true(im->nsegs < 8);
		uint8_t *bytes = malloc(ph.p_filesz);
		assert_non_null(bytes);
		assert_int_equal(pread(fd, bytes, ph.p_filesz, (off_t)ph.p_offset),
				 (ssize_t)ph.p_filesz);
		im->segs[im->nsegs++] = (struct ep_code_segment){
		    .vaddr = ph.p_vaddr, .bytes = bytes, .size = ph.p_filesz};
	}
	struct ep_elf_limits lim;
	struct ep_elf_budget budget;
	ep_elf_limits_default(&lim, NULL, NULL);
	ep_elf_budget_init(&budget, &lim);
	assert_int_equal(ep_elf_data_in_code(e, &budget, &im->data, &im->ndata), 0);
	ep_elf_budget_release(&budget);
	elf_end(e);
	close(fd);
}

static void image_free(struct image *im)
{
	for (size_t i = 0; i < im->nsegs; i++)
		free((void *)im->segs[i].bytes);
	free(im->data);
}

static uint32_t word_at(const struct image *im, uint64_t addr)
{
	for (size_t i = 0; i < im->nsegs; i++) {
		const struct ep_code_segment *s = &im->segs[i];
		if (addr >= s->vaddr && addr - s->vaddr + 4 <= s->size) {
			const uint8_t *b = s->bytes + (addr - s->vaddr);
			return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
			       (uint32_t)b[3] << 24;
		}
	}
	fail_msg("0x%llx is in no code segment", (unsigned long long)addr);
	return 0;
}

/*
 * Capstone 4 (which writes the decoder's text) and binutils 2.40 name some
 * encodings differently: the Arm ARM's preferred aliases changed between
 * them. These are the same instructions; anything else must match.
 */
static bool same_mnemonic(const char *ours, const char *objdump, uint32_t w)
{
	static const char *const pairs[][2] = {
	    {"movz", "mov"},   {"movn", "mov"},	    {"orr", "mov"},	 {"ins", "mov"},
	    {"umov", "mov"},   {"b.hs", "b.cs"},    {"b.lo", "b.cc"},	 {"ushll", "uxtl"},
	    {"sshll", "sxtl"}, {"ushll2", "uxtl2"}, {"sshll2", "sxtl2"}, {"sys", "dc"},
	    {"sys", "ic"},     {"sys", "at"},	    {"sys", "tlbi"},
	};
	if (!strcmp(ours, objdump))
		return true;
	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++)
		if (!strcmp(ours, pairs[i][0]) && !strcmp(objdump, pairs[i][1]))
			return true;
	/* bti, paciasp, autiasp, xpaclri... live in the hint space, which
	 * capstone 4 prints as "hint #n": the encoding must be a hint */
	return !strcmp(ours, "hint") && (w & 0xfffff01f) == 0xd503201f;
}

struct totals {
	size_t insns, branches, walks, walked, unknown_to_capstone, data_words, into_data;
	size_t authenticated; /* branches with pointer authentication */
};

/* Every line: branch sites exactly where objdump shows branches, with its
 * kind and target; the text's mnemonic is objdump's; data is no code. */
static void check_lines(struct ep_decoder *d, const struct image *im, const struct listing *l,
			const char *name, struct totals *t)
{
	for (size_t i = 0; i < l->n; i++) {
		const struct line *ln = &l->v[i];
		struct ep_insn_info info;
		char text[128];
		if (ln->kind == KIND_DATA) {
			assert_false(ep_decoder_insn(d, ln->addr, &info));
			assert_int_equal(ep_decoder_site_at(d, ln->addr), EP_NO_SITE);
			t->data_words++;
			continue;
		}
		t->insns++;
		if (!ep_decoder_insn_text(d, ln->addr, &info, text, sizeof(text)))
			fail_msg("%s: 0x%llx (%s) does not decode", name,
				 (unsigned long long)ln->addr, ln->mnem);
		assert_int_equal(info.len, 4);
		if (info.kind != ln->kind || info.target != ln->target)
			fail_msg("%s: 0x%llx %s: kind %s target 0x%llx, objdump says %s 0x%llx",
				 name, (unsigned long long)ln->addr, text,
				 ep_branch_kind_name(info.kind), (unsigned long long)info.target,
				 ep_branch_kind_name(ln->kind), (unsigned long long)ln->target);
		char *mnem = strtok(text, " ");
		if (!strcmp(mnem, ".inst")) {
			/* a word capstone 4 does not know (SVE, MTE, LSE...):
			 * its kind was still checked above */
			t->unknown_to_capstone++;
		} else if (!same_mnemonic(mnem, ln->mnem, word_at(im, ln->addr))) {
			fail_msg("%s: 0x%llx: mnemonic %s, objdump says %s", name,
				 (unsigned long long)ln->addr, mnem, ln->mnem);
		}
		uint32_t site = ep_decoder_site_at(d, ln->addr);
		if (ln->kind == EP_BRANCH_NONE) {
			assert_int_equal(site, EP_NO_SITE);
			continue;
		}
		assert_int_not_equal(site, EP_NO_SITE);
		const struct ep_site *s = ep_decoder_site(d, site);
		assert_int_equal(s->addr, ln->addr);
		assert_int_equal(s->kind, ln->kind);
		assert_int_equal(s->target, ln->target);
		assert_int_equal(s->len, 4);
		assert_int_equal(s->fallthrough, ln->addr + 4);
		t->branches++;
		t->authenticated += !strncmp(ln->mnem, "reta", 4) || !strncmp(ln->mnem, "bra", 3) ||
				    !strncmp(ln->mnem, "blra", 4) || !strncmp(ln->mnem, "ereta", 5);
	}
}

/* The range closing at line j of a walk from line lo: it starts after the
 * last conditional passed (or at the walk's start) and holds objdump's
 * instructions up to j. */
static void check_range(struct ep_decoder *d, const struct listing *l, size_t lo, size_t j,
			uint64_t last_cond, uint32_t range)
{
	assert_true(range < ep_decoder_range_count(d));
	const struct ep_range_def *r = ep_decoder_range(d, range);
	uint64_t start = last_cond ? last_cond + 4 : l->v[lo].addr;
	assert_int_equal(r->start, start);
	assert_int_equal(r->end, l->v[j].addr);
	assert_int_equal(r->insns, j - line_at(l, start) + 1);
}

/*
 * From line lo (a function start or a direct target), along objdump's
 * listing as reconstruction walks a gap: each instruction is on the
 * straight line with exactly the conditionals objdump shows before it
 * passed, nothing starts inside one (4 bytes long), each branch closes a
 * walk with its site and range, and the line ends at the first
 * unconditional transfer or at data, where the decoder stops too.
 */
static void walk_from(struct ep_decoder *d, const struct listing *l, size_t lo, struct totals *t)
{
	uint64_t start = l->v[lo].addr;
	uint64_t conds[256];
	size_t nconds = 0;
	struct ep_walk_step steps[256], closing;
	size_t n;
	for (size_t j = lo; j < l->n; j++) {
		const struct line *ln = &l->v[j];
		if (ln->kind == KIND_DATA) {
			/* the decoder stops where objdump's data starts */
			assert_int_equal(
			    ep_decoder_walk_to_ip(d, start, ln->addr, EP_NO_SITE, steps, 256, &n),
			    EP_WALK_NO_CODE);
			t->into_data++;
			return;
		}
		if (j > lo && ln->addr != l->v[j - 1].addr + 4)
			return; /* a gap between sections: objdump lists no bytes */
		assert_int_equal(
		    ep_decoder_walk_to_ip(d, start, ln->addr, EP_NO_SITE, steps, 256, &n),
		    EP_WALK_OK);
		assert_int_equal(n, nconds);
		for (size_t k = 0; k < n; k++)
			assert_int_equal(ep_decoder_site(d, steps[k].site)->addr, conds[k]);
		for (uint64_t off = 1; off < 4; off++)
			assert_int_equal(ep_decoder_walk_to_ip(d, start, ln->addr + off, EP_NO_SITE,
							       steps, 256, &n),
					 EP_WALK_OVERRUN);
		t->walked++;
		enum ep_walk_status ws = ep_decoder_walk_to_branch(d, start, ln->addr, EP_NO_SITE,
								   steps, 256, &n, &closing);
		if (ln->kind == EP_BRANCH_NONE) {
			assert_int_equal(ws, EP_WALK_OVERRUN);
			continue;
		}
		assert_int_equal(ws, EP_WALK_OK);
		assert_int_equal(n, nconds);
		assert_true(closing.site < ep_decoder_site_count(d));
		assert_int_equal(ep_decoder_site(d, closing.site)->addr, ln->addr);
		check_range(d, l, lo, j, nconds ? conds[nconds - 1] : 0, closing.range);
		for (size_t k = 0; k < n; k++)
			check_range(d, l, lo, line_at(l, conds[k]), k ? conds[k - 1] : 0,
				    steps[k].range);
		t->walks++;
		if (ln->kind != EP_BRANCH_COND) {
			/* the decoder's line ends here too */
			assert_int_equal(ep_decoder_walk_to_ip(d, start, ln->addr + 4, EP_NO_SITE,
							       steps, 256, &n),
					 EP_WALK_BLOCKED);
			return;
		}
		if (nconds == 200)
			return;
		conds[nconds++] = ln->addr;
	}
}

/* objdump's data, the product's data ranges: the same words. Only an
 * unstripped binary has mapping symbols, so only it has either. */
static void check_data_ranges(const struct image *im, const struct listing *l)
{
	for (size_t i = 0; i < l->n; i++) {
		bool in = false;
		for (size_t k = 0; k < im->ndata && !in; k++)
			in = l->v[i].addr >= im->data[k].start && l->v[i].addr < im->data[k].end;
		assert_int_equal(in, l->v[i].kind == KIND_DATA);
	}
}

static int cmp_u64(const void *pa, const void *pb)
{
	uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
	return (a > b) - (a < b);
}

static void check_binary(const char *path, size_t min_insns, struct totals *t)
{
	struct listing l;
	struct image im;
	listing_read(path, &l);
	image_read(path, &im);
	assert_true(l.n >= min_insns);
	check_data_ranges(&im, &l);
	struct ep_decoder *d = ep_decoder_new(EP_ARCH_AARCH64, im.segs, im.nsegs);
	assert_non_null(d);
	ep_decoder_set_data(d, im.data, im.ndata);
	check_lines(d, &im, &l, path, t);
	/* walks start where code is entered: function starts and the direct
	 * targets objdump shows, each once */
	uint64_t *starts = malloc((l.nstarts + l.n) * sizeof(*starts));
	assert_non_null(starts);
	size_t nstarts = 0;
	for (size_t i = 0; i < l.nstarts; i++)
		starts[nstarts++] = l.starts[i];
	for (size_t i = 0; i < l.n; i++)
		if (l.v[i].target)
			starts[nstarts++] = l.v[i].target;
	qsort(starts, nstarts, sizeof(*starts), cmp_u64);
	for (size_t i = 0; i < nstarts; i++) {
		size_t lo = line_at(&l, starts[i]);
		if ((i == 0 || starts[i] != starts[i - 1]) && lo < l.n)
			walk_from(d, &l, lo, t);
	}
	free(starts);
	/* dense ids: every site is a branch objdump lists */
	for (uint32_t s = 0; s < ep_decoder_site_count(d); s++) {
		size_t i = line_at(&l, ep_decoder_site(d, s)->addr);
		assert_true(i < l.n);
		assert_int_equal(ep_decoder_site(d, s)->kind, l.v[i].kind);
	}
	printf("# %s: %zu lines, %u sites, %u ranges\n", path, l.n, ep_decoder_site_count(d),
	       ep_decoder_range_count(d));
	ep_decoder_free(d);
	image_free(&im);
	listing_free(&l);
}

/* The cross-compiled binaries, built once for the group. */
static int build_binaries(void **state)
{
	(void)state;
	have_tools =
	    system("command -v " GCC " >/dev/null && command -v " OBJDUMP " >/dev/null") == 0;
	if (!have_tools)
		return 0;
	assert_non_null(mkdtemp(tmpdir));
	static const char *const builds[] = {
	    "-nostdlib -static -o %s/branches tests/workloads/aarch64_branches.S",
	    "-O2 -static -o %s/interp tests/workloads/interp.c",
	    "-O2 -march=armv8.3-a -mbranch-protection=standard -o %s/state_machine "
	    "tests/workloads/state_machine.c",
	    "-O2 -o %s/big_switch tests/workloads/big_switch.c",
	};
	for (size_t i = 0; i < sizeof(builds) / sizeof(builds[0]); i++) {
		char args[512], cmd[1024];
		snprintf(args, sizeof(args), builds[i], tmpdir);
		snprintf(cmd, sizeof(cmd), GCC " %s", args);
		if (system(cmd) != 0) {
			fprintf(stderr, "failed: %s\n", cmd);
			return -1;
		}
	}
	return 0;
}

static int remove_binaries(void **state)
{
	(void)state;
	if (have_tools) {
		char cmd[256];
		snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
		return system(cmd) != 0;
	}
	return 0;
}

static void need_tools(void)
{
	if (!have_tools) {
		printf("# SKIP: no " GCC " or " OBJDUMP " (make deps installs them)\n");
		skip();
	}
}

static void test_cross_compiled_agree_with_objdump(void **state)
{
	(void)state;
	need_tools();
	static const struct {
		const char *name;
		size_t min;
	} bins[] = {
	    {"branches", 60}, {"interp", 50000}, {"state_machine", 100}, {"big_switch", 1000}};
	for (size_t i = 0; i < sizeof(bins) / sizeof(bins[0]); i++) {
		char path[256];
		struct totals t = {0};
		snprintf(path, sizeof(path), "%s/%s", tmpdir, bins[i].name);
		check_binary(path, bins[i].min, &t);
		printf("# %s: %zu instructions (%zu unknown to capstone 4), %zu branches, %zu "
		       "data words; %zu walks over %zu instructions agree with objdump\n",
		       bins[i].name, t.insns, t.unknown_to_capstone, t.branches, t.data_words,
		       t.walks, t.walked);
		assert_true(t.walks > 0);
		/* the compiler's returns with -mbranch-protection on v8.3 */
		if (!strcmp(bins[i].name, "state_machine"))
			assert_true(t.authenticated > 0);
		if (!strcmp(bins[i].name, "branches")) {
			assert_int_equal(t.authenticated, 12);
			/* the pool, the table, the word in into_data; and the
			 * walks from into_data and from the table's label */
			assert_true(t.data_words >= 8);
			assert_true(t.into_data >= 2);
		}
	}
}

static void test_debian_arm64_agree_with_objdump(void **state)
{
	(void)state;
	need_tools();
	static const char *const libs[] = {"/usr/lib/aarch64-linux-gnu/libzstd.so.1",
					   "/lib/aarch64-linux-gnu/libc.so.6"};
	for (size_t i = 0; i < sizeof(libs) / sizeof(libs[0]); i++) {
		struct stat st;
		if (stat(libs[i], &st) != 0) {
			printf("# SKIP: %s missing (make deps installs libzstd1:arm64)\n", libs[i]);
			skip();
		}
		struct totals t = {0};
		check_binary(libs[i], 100000, &t);
		printf("# %s: %zu instructions (%zu unknown to capstone 4), %zu branches; %zu "
		       "walks over %zu instructions agree with objdump\n",
		       libs[i], t.insns, t.unknown_to_capstone, t.branches, t.walks, t.walked);
		assert_true(t.walks > 10000);
	}
}

/* A gap to reconstruct in l: A (a direct branch) lands on B; from B the
 * straight line meets X, a B.cond, first, then C, a direct branch with
 * target D. false when l has none. */
struct gap {
	uint64_t a, b, x, c, d;
};

static bool find_gap(const struct listing *l, struct gap *g)
{
	for (size_t i = 0; i < l->n; i++) {
		if (!l->v[i].target || l->v[i].kind == KIND_DATA)
			continue;
		size_t j = line_at(l, l->v[i].target);
		size_t x = l->n;
		for (; j < l->n && j + 1 < l->n && l->v[j + 1].addr == l->v[j].addr + 4; j++) {
			const struct line *ln = &l->v[j];
			if (ln->kind == EP_BRANCH_NONE)
				continue;
			if (x == l->n && ln->kind == EP_BRANCH_COND &&
			    !strncmp(ln->mnem, "b.", 2)) {
				x = j;
				continue;
			}
			if (x != l->n && ln->target && ln->kind != KIND_DATA) {
				*g = (struct gap){.a = l->v[i].addr,
						  .b = l->v[i].target,
						  .x = l->v[x].addr,
						  .c = ln->addr,
						  .d = ln->target};
				return true;
			}
			break;
		}
	}
	return false;
}

/* The profile of one sample with the branch stack {c_from -> D, A -> B}
 * (entry 0 the newest) of path mapped at 0x400000, read the agent's way
 * (the binary registry, the decoder cache). */
static Edgeprof__V1__Profile *profile_one(const char *path, const struct gap *g, uint64_t c_from)
{
	struct ep_binary_registry *reg = ep_binreg_new();
	assert_non_null(reg);
	struct ep_pipeline_config cfg;
	ep_pipeline_config_default(&cfg);
	cfg.chop = 0;
	struct ep_pipeline *p = ep_pipeline_new(&cfg, reg);
	assert_non_null(p);
	ep_pipeline_mmap(p, 42, 0x400000, 0x100000, 0, path, NULL, 0);
	struct ep_sample_record rec;
	memset(&rec, 0, sizeof(rec));
	rec.pid = rec.tid = 42;
	rec.ip = g->d;
	rec.flags = EP_SAMPLE_HAS_BRANCHES;
	rec.nr_entries = 2;
	rec.entries[0] = (struct ep_branch_entry){.from = c_from, .to = g->d};
	rec.entries[1] = (struct ep_branch_entry){.from = g->a, .to = g->b};
	ep_pipeline_sample(p, &rec);
	Edgeprof__V1__Profile *prof = ep_pipeline_profile(p);
	assert_non_null(prof);
	ep_pipeline_free(p);
	ep_binreg_free(reg);
	return prof;
}

/*
 * SPEC step 3 on aarch64, over interp (static, at its link address): two
 * taken branches with a straight line between them that passes a B.cond
 * not taken. The stage finds that not-taken edge and the ranges either
 * side of it; with the newer entry's source moved off the line, the gap is
 * cut and no not-taken edge is invented.
 */
static void test_reconstruct_not_taken(void **state)
{
	(void)state;
	need_tools();
	char path[256];
	snprintf(path, sizeof(path), "%s/interp", tmpdir);
	struct listing l;
	listing_read(path, &l);
	struct gap g = {0};
	assert_true(find_gap(&l, &g));
	printf("# A 0x%llx -> B 0x%llx, b.cond X 0x%llx not taken, C 0x%llx -> D 0x%llx\n",
	       (unsigned long long)g.a, (unsigned long long)g.b, (unsigned long long)g.x,
	       (unsigned long long)g.c, (unsigned long long)g.d);

	Edgeprof__V1__Profile *prof = profile_one(path, &g, g.c);
	assert_int_equal(prof->n_binaries, 1);
	const Edgeprof__V1__BinaryProfile *bp = prof->binaries[0];
	assert_int_equal(prof->stats->gaps_inconsistent, 0);
	size_t not_taken = 0, taken = 0;
	for (size_t i = 0; i < bp->n_edges; i++) {
		const Edgeprof__V1__Edge *e = bp->edges[i];
		if (e->kind == EDGEPROF__V1__BRANCH_KIND__BRANCH_CONDITIONAL && !e->taken) {
			assert_int_equal(e->from, g.x);
			assert_int_equal(e->to, g.x + 4);
			assert_int_equal(e->count, 1);
			not_taken++;
		} else if (e->taken) {
			assert_true((e->from == g.a && e->to == g.b) ||
				    (e->from == g.c && e->to == g.d));
			taken++;
		}
	}
	assert_int_equal(not_taken, 1);
	assert_int_equal(taken, 2);
	size_t ranges = 0;
	for (size_t i = 0; i < bp->n_ranges; i++) {
		const Edgeprof__V1__Range *r = bp->ranges[i];
		assert_true((r->start == g.b && r->end == g.x) ||
			    (r->start == g.x + 4 && r->end == g.c));
		ranges++;
	}
	assert_int_equal(ranges, 2);
	ep_profile_free(prof);

	/* C one instruction further than the line goes: no straight line */
	prof = profile_one(path, &g, g.c + 4);
	bp = prof->binaries[0];
	assert_int_equal(prof->stats->gaps_inconsistent, 1);
	for (size_t i = 0; i < bp->n_edges; i++)
		assert_true(bp->edges[i]->taken);
	ep_profile_free(prof);
	listing_free(&l);
}

/*
 * The agent's own path keeps data out: the binary registry reads the $d
 * mapping symbols and the decoder cache hands them to the decoder. In
 * aarch64_branches.S, into_data's line runs into a word that reads as ret;
 * a stack claiming that word returned is no straight line, so the b.ne
 * before it gets no not-taken edge (without the mapping symbols it would).
 */
static void test_agent_keeps_data_out(void **state)
{
	(void)state;
	need_tools();
	char path[256];
	snprintf(path, sizeof(path), "%s/branches", tmpdir);
	struct listing l;
	listing_read(path, &l);
	uint64_t s = label(&l, "into_data");
	size_t i = line_at(&l, s);
	while (i < l.n && l.v[i].kind != KIND_DATA)
		i++;
	assert_true(i < l.n);
	/* b.ne into_data (a real taken branch) lands on it, then "the ret" */
	struct gap g = {.a = s + 4, .b = s, .d = s};
	Edgeprof__V1__Profile *prof = profile_one(path, &g, l.v[i].addr);
	const Edgeprof__V1__BinaryProfile *bp = prof->binaries[0];
	/* a walk that meets data finds no code, as in a binary not read */
	assert_int_equal(prof->stats->gaps, 1);
	assert_int_equal(prof->stats->gaps_unknown_code, 1);
	for (size_t k = 0; k < bp->n_edges; k++)
		assert_true(bp->edges[k]->taken);
	ep_profile_free(prof);
	listing_free(&l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_words),
	    cmocka_unit_test(test_alignment_and_data),
	    cmocka_unit_test(test_cross_compiled_agree_with_objdump),
	    cmocka_unit_test(test_debian_arm64_agree_with_objdump),
	    cmocka_unit_test(test_reconstruct_not_taken),
	    cmocka_unit_test(test_agent_keeps_data_out),
	};
	return cmocka_run_group_tests(tests, build_binaries, remove_binaries);
}
