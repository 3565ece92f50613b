/* SPDX-License-Identifier: Apache-2.0 */
/*
 * BOLT's address translation table (common/elf/elf_bat.h): the tables
 * llvm-bolt 19 and 16 wrote for one input (tests/data/bat) read alike and
 * translate as BOLT's own code does; hostile tables (cut short, counts past
 * the bytes, offsets out of range, past the budget, mutated) are refused
 * cleanly, which the ASan build checks.
 */
#include "common/elf/elf_bat.h"
#include "test_util.h"

#define NOTE19 "tests/data/bat/bolt_mix.bolt19.note"
#define NOTE16 "tests/data/bat/bolt_mix.bolt16.note"

static struct ep_elf_budget budget(uint64_t limit)
{
	return (struct ep_elf_budget){.limit = limit, .knob = "--binary-symbols-max-mib"};
}

static int parse(const uint8_t *buf, size_t len, struct ep_bat *bat, char *err, size_t errlen)
{
	struct ep_elf_budget b = budget(64 << 20);
	return ep_bat_parse(buf, len, &b, bat, err, errlen);
}

static void load(const char *path, struct ep_bat *bat)
{
	size_t len;
	uint8_t *buf = ep_test_slurp(path, &len);
	char err[256] = "";
	int rc = parse(buf, len, bat, err, sizeof(err));
	if (rc != 0)
		fprintf(stderr, "%s: %s\n", path, err);
	assert_int_equal(rc, 0);
	free(buf);
}

/* Fall-throughs collected as "from>to " pairs. */
static void collect(void *ctx, uint32_t from, uint32_t to)
{
	char *s = ctx;
	snprintf(s + strlen(s), 256 - strlen(s), "%x>%x ", from, to);
}

static void test_real_tables(void **state)
{
	(void)state;
	struct ep_bat b19, b16;
	load(NOTE19, &b19);
	load(NOTE16, &b16);
	assert_int_equal(b19.bolt_version, 19);
	assert_int_equal(b16.bolt_version, 16);
	/* the same functions and cold part (main.cold.0 at 0x800200) */
	assert_int_equal(b19.nfrags, 7);
	assert_int_equal(b16.nfrags, 7);
	for (size_t i = 0; i < b19.nfrags; i++) {
		assert_int_equal(b19.frags[i].addr, b16.frags[i].addr);
		assert_int_equal(b19.frags[i].hot, b16.frags[i].hot);
		/* BOLT 19 adds the blocks it removed at the function's end */
		assert_true(b19.frags[i].n >= b16.frags[i].n);
		for (uint32_t j = 0; j < b16.frags[i].n; j++) {
			assert_int_equal(b19.entries[b19.frags[i].first + j].out,
					 b16.entries[b16.frags[i].first + j].out);
			assert_int_equal(b19.entries[b19.frags[i].first + j].in,
					 b16.entries[b16.frags[i].first + j].in);
		}
	}
	const struct ep_bat_frag *cold = ep_bat_frag_at(&b19, 0x800200);
	assert_non_null(cold);
	assert_int_equal(cold->hot, 0x800100);
	assert_null(ep_bat_frag_at(&b19, 0x800201));
	/* dispatch at 0x800042: 0>0 6>6b 8>8 f>10 18>19b 19>7d ... */
	const struct ep_bat_frag *f = ep_bat_frag_at(&b19, 0x800042);
	assert_non_null(f);
	assert_int_equal(ep_bat_translate(&b19, f, 0x19, false), 0x7d);
	assert_int_equal(ep_bat_translate(&b19, f, 0x1b, false), 0x7f);
	assert_int_equal(ep_bat_translate(&b19, f, 0x1b, true), 0x7d);
	assert_int_equal(ep_bat_translate(&b19, f, 0x18, true), 0x19); /* its own entry */
	assert_int_equal(ep_bat_translate(&b19, f, 0x7, true), 0x6);
	assert_true(ep_bat_is_block_start(&b19, f, 0x19));
	assert_false(ep_bat_is_block_start(&b19, f, 0x18)); /* a branch entry */
	assert_false(ep_bat_is_block_start(&b19, f, 0x1a));
	char s[256] = "";
	ep_bat_fallthroughs(&b19, f, 0x2, 0x19, collect, s);
	assert_string_equal(s, "0>8 8>f f>19 ");
	s[0] = '\0';
	ep_bat_fallthroughs(&b19, f, 0x19, 0x2, collect, s);
	assert_string_equal(s, "");
	ep_bat_free(&b19);
	ep_bat_free(&b16);
}

/* Every cut of the note, and of its descriptor with the size said to
 * match, is refused. */
static void test_cut_short(void **state)
{
	(void)state;
	const char *notes[] = {NOTE19, NOTE16};
	for (int k = 0; k < 2; k++) {
		size_t len;
		uint8_t *buf = ep_test_slurp(notes[k], &len);
		uint32_t descsz;
		memcpy(&descsz, buf + 4, 4);
		/* the section pads the note to 4 bytes: the cuts past it hold it whole */
		for (size_t n = 0; n < 20 + (size_t)descsz; n++) {
			uint8_t *cut = malloc(n ? n : 1);
			memcpy(cut, buf, n);
			struct ep_bat bat;
			char err[256];
			assert_int_equal(parse(cut, n, &bat, err, sizeof(err)), -1);
			free(cut);
		}
		for (uint32_t d = 0; d < descsz; d++) {
			uint8_t *cut = malloc(20 + d);
			memcpy(cut, buf, 20 + d);
			memcpy(cut + 4, &d, 4);
			struct ep_bat bat;
			char err[256];
			assert_int_equal(parse(cut, 20 + d, &bat, err, sizeof(err)), -1);
			assert_non_null(strstr(err, "no BAT table"));
			free(cut);
		}
		free(buf);
	}
}

/* A note around desc (d bytes). */
static size_t note(uint8_t *out, const uint8_t *desc, uint32_t d)
{
	uint32_t hdr[3] = {5, d, 1};
	memcpy(out, hdr, 12);
	memcpy(out + 12, "BOLT\0\0\0\0", 8);
	memcpy(out + 20, desc, d);
	return 20 + d;
}

static void refused(const uint8_t *desc, uint32_t d, const char *why)
{
	uint8_t buf[256];
	size_t n = note(buf, desc, d);
	struct ep_bat bat;
	char err[512] = "";
	int rc = parse(buf, n, &bat, err, sizeof(err));
	if (rc == 0)
		fprintf(stderr, "accepted, expected \"%s\"\n", why);
	assert_int_equal(rc, -1);
	if (!strstr(err, why))
		fprintf(stderr, "expected \"%s\" in: %s\n", why, err);
	assert_non_null(strstr(err, why));
}

static void test_hostile(void **state)
{
	(void)state;
	/* BOLT 16: 0xffffffff functions in 8 bytes */
	const uint8_t many16[] = {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0};
	refused(many16, sizeof(many16), "more functions than bytes");
	/* BOLT 16: one function with 0x10000000 entries (and bytes no BOLT 19
	 * table ends with) */
	const uint8_t entries16[] = {1,	   0,	 0,    0,    0,	   0,	 0x80, 0,    0,	   0,
				     0,	   0,	 0,    0,    0,	   0x10, 0xff, 0xff, 0xff, 0xff,
				     0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
	refused(entries16, sizeof(entries16), "more entries than bytes");
	/* BOLT 16: entries going backwards */
	const uint8_t back16[] = {1, 0, 0, 0, 0, 0, 0x80, 0, 0, 0, 0, 0, 2, 0, 0, 0, 8, 0,
				  0, 0, 8, 0, 0, 0, 4,	  0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0};
	refused(back16, sizeof(back16), "out of order");
	/* BOLT 16: a cold part whose hot function is not in the table */
	const uint8_t cold16[] = {1, 0, 0, 0, 0,    0, 0x80, 0, 0, 0, 0, 0, 0,	  0, 0, 0, 1, 0,
				  0, 0, 0, 1, 0x80, 0, 0,    0, 0, 0, 0, 2, 0x80, 0, 0, 0, 0, 0};
	refused(cold16, sizeof(cold16), "hot function is not in the table");
	/* BOLT 19: 2^63 functions */
	const uint8_t many19[] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01};
	refused(many19, sizeof(many19), "more functions than bytes");
	/* BOLT 19: a LEB128 past 64 bits */
	const uint8_t leb19[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0};
	refused(leb19, sizeof(leb19), "past 64 bits");
	/* BOLT 19: one hot function at 0x400000, 1 entry at offset 2^32 */
	const uint8_t far19[] = {1,    0x80, 0x80, 0x80, 0x02, 1, 2, 3, 4, 5, 6, 7, 8, 1, 0, 1, 0,
				 0x80, 0x80, 0x80, 0x80, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
	refused(far19, sizeof(far19), "past 4 GiB");
	/* BOLT 19: an input offset below 0 (SLEB -1 from 0) */
	const uint8_t neg19[] = {1, 0x80, 0x80, 0x80, 0x02, 1, 2, 3, 4, 5, 6, 7, 8, 1, 0,
				 1, 0,	  0,	0x7f, 0,    0, 0, 0, 0, 0, 0, 0, 0, 0};
	refused(neg19, sizeof(neg19), "past 4 GiB");
	/* BOLT 19: a cold part naming hot function 5 of 1 */
	const uint8_t cold19[] = {1, 0x80, 0x80, 0x80, 0x02, 1, 2, 3, 4, 5, 6, 7, 8,	1, 0, 1, 0,
				  0, 0,	   0,	 0,    0,    0, 0, 0, 0, 0, 0, 1, 0x10, 5, 0, 0, 0};
	refused(cold19, sizeof(cold19), "hot function the table lacks");
}

/* A table past the budget is refused naming the bound; one that fits is
 * charged what it keeps. */
static void test_budget(void **state)
{
	(void)state;
	size_t len;
	uint8_t *buf = ep_test_slurp(NOTE19, &len);
	struct ep_elf_budget b = budget(512);
	struct ep_bat bat;
	char err[512];
	assert_int_equal(ep_bat_parse(buf, len, &b, &bat, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "--binary-symbols-max-mib"));
	assert_non_null(strstr(err, "7 functions"));
	b = budget(64 << 20);
	assert_int_equal(ep_bat_parse(buf, len, &b, &bat, err, sizeof(err)), 0);
	assert_int_equal(b.used, bat.bytes);
	assert_true(bat.bytes >= 80 * sizeof(struct ep_bat_entry));
	ep_bat_free(&bat);
	free(buf);
}

/* Mutated tables: refused, or kept with every invariant the lookups rely
 * on (ASan checks the reads). */
static void test_mutated(void **state)
{
	(void)state;
	const char *notes[] = {NOTE19, NOTE16};
	uint64_t seed = 12345;
	for (int k = 0; k < 2; k++) {
		size_t len;
		uint8_t *orig = ep_test_slurp(notes[k], &len);
		uint8_t *buf = malloc(len);
		for (int round = 0; round < 3000; round++) {
			memcpy(buf, orig, len);
			for (int m = 0; m < 1 + round % 4; m++) {
				seed = seed * 6364136223846793005ull + 1442695040888963407ull;
				buf[20 + (seed >> 33) % (len - 20)] ^=
				    (uint8_t)(1 + (seed >> 20) % 255);
			}
			struct ep_bat bat;
			char err[512];
			if (parse(buf, len, &bat, err, sizeof(err)) != 0)
				continue;
			for (size_t i = 0; i < bat.nfrags; i++) {
				const struct ep_bat_frag *f = &bat.frags[i];
				assert_true(i == 0 || f->addr > bat.frags[i - 1].addr);
				assert_true((uint64_t)f->first + f->n <= bat.nentries);
				for (uint32_t j = 1; j < f->n; j++)
					assert_true(bat.entries[f->first + j].out >
						    bat.entries[f->first + j - 1].out);
				char s[256] = "";
				ep_bat_fallthroughs(&bat, f, 0, 64, collect, s);
				(void)ep_bat_translate(&bat, f, 40, true);
			}
			ep_bat_free(&bat);
		}
		free(buf);
		free(orig);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_real_tables), cmocka_unit_test(test_cut_short),
	    cmocka_unit_test(test_hostile),	cmocka_unit_test(test_budget),
	    cmocka_unit_test(test_mutated),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
