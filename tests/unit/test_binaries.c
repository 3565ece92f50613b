/* SPDX-License-Identifier: Apache-2.0 */
/* Binaries by build-id at the collector (issue 13): the ELF check and
 * reduction (common/elf), the store's images (SQLite), the collector's
 * uploads and code handles (collector/binaries), and the UI's small
 * helpers (collector/web). The store is $EDGEPROF_TEST_STORE when set
 * (test_store_clickhouse.sh), else SQLite. */
#include "test_util.h"

#include <elf.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collector/binaries/binaries.h"
#include "collector/store/store.h"
#include "collector/web/web.h"
#include "common/elf/elf_image.h"

#define PROPELLER_ID "572ac72487ae1966"

static const Edgeprof__V1__ImageSymbol *symbol_named(const Edgeprof__V1__BinaryImage *img,
						     const char *name)
{
	for (size_t i = 0; i < img->n_symbols; i++)
		if (strcmp(img->symbols[i]->name, name) == 0)
			return img->symbols[i];
	return NULL;
}

static void test_image_of_a_binary(void **state)
{
	(void)state;
	size_t len;
	uint8_t *elf = ep_test_slurp(ep_test_fixture("propeller_sample_1.bin"), &len);
	char err[256];
	Edgeprof__V1__BinaryImage *img = ep_elf_image_read(elf, len, "p1.bin", err, sizeof(err));
	assert_non_null(img);
	assert_string_equal(img->build_id, PROPELLER_ID);
	assert_string_equal(img->arch, "x86_64");
	assert_string_equal(img->path, "p1.bin");
	assert_int_equal(img->file_size, len);
	assert_true(img->n_code >= 1);
	const Edgeprof__V1__ImageSymbol *m = symbol_named(img, "main");
	assert_non_null(m);
	assert_int_equal(m->start, 0x1920);
	assert_int_equal(m->size, 354);
	assert_non_null(symbol_named(img, "compute_flag"));
	for (size_t i = 1; i < img->n_symbols; i++)
		assert_true(img->symbols[i - 1]->start <= img->symbols[i]->start);
	/* packed and unpacked: the same */
	size_t plen;
	uint8_t *packed = ep_elf_image_pack(img, &plen);
	assert_non_null(packed);
	Edgeprof__V1__BinaryImage *back = ep_elf_image_unpack(packed, plen, err, sizeof(err));
	assert_non_null(back);
	assert_string_equal(back->build_id, PROPELLER_ID);
	assert_int_equal(back->n_symbols, img->n_symbols);
	assert_int_equal(back->code[0]->bytes.len, img->code[0]->bytes.len);
	assert_memory_equal(back->code[0]->bytes.data, img->code[0]->bytes.data,
			    img->code[0]->bytes.len);
	ep_elf_image_free(back);
	free(packed);
	ep_elf_image_free(img);
	free(elf);
}

/* Each refusal says why. */
static void test_image_refusals(void **state)
{
	(void)state;
	char err[256];
	const char text[] = "#!/bin/sh\necho not an ELF file\n";
	assert_null(ep_elf_image_read((const uint8_t *)text, sizeof(text), NULL, err, sizeof(err)));
	assert_string_equal(err, "not an ELF file");
	assert_null(ep_elf_image_read(NULL, 0, NULL, err, sizeof(err)));
	assert_string_equal(err, "not an ELF file");
	size_t len;
	uint8_t *elf = ep_test_slurp(ep_test_fixture("test.binary"), &len);
	assert_null(ep_elf_image_read(elf, len, NULL, err, sizeof(err)));
	assert_non_null(strstr(err, "no GNU build-id note"));
	free(elf);
	/* cut short: the headers are there, the code is not */
	elf = ep_test_slurp(ep_test_fixture("propeller_sample_1.bin"), &len);
	assert_null(ep_elf_image_read(elf, 0x900, NULL, err, sizeof(err)));
	assert_non_null(strstr(err, "past the end of the file"));
	/* code placed so that it would end past 2^64 (a fuzzed file made the
	 * agent's decoder build a range ending before it starts) */
	Elf64_Ehdr eh;
	memcpy(&eh, elf, sizeof(eh));
	bool moved = false;
	for (size_t i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;
		uint8_t *at = elf + eh.e_phoff + i * eh.e_phentsize;
		memcpy(&ph, at, sizeof(ph));
		if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X)) {
			ph.p_vaddr = UINT64_MAX - ph.p_filesz / 2;
			memcpy(at, &ph, sizeof(ph));
			moved = true;
		}
	}
	assert_true(moved);
	assert_null(ep_elf_image_read(elf, len, NULL, err, sizeof(err)));
	assert_non_null(strstr(err, "ends past 2^64"));
	free(elf);
	elf = ep_test_slurp(ep_test_fixture("propeller_sample_1.bin"), &len);
	/* another machine */
	elf[18] = 0x28; /* e_machine = EM_ARM (and ELFCLASS64: refused as a machine) */
	elf[19] = 0;
	assert_null(ep_elf_image_read(elf, len, NULL, err, sizeof(err)));
	assert_non_null(strstr(err, "only x86_64 and aarch64"));
	free(elf);
	/* a file without program headers (an object file has none) */
	elf = ep_test_slurp(ep_test_fixture("propeller_sample_1.bin"), &len);
	memset(elf + 32, 0, 8); /* e_phoff */
	memset(elf + 56, 0, 2); /* e_phnum */
	assert_null(ep_elf_image_read(elf, len, NULL, err, sizeof(err)));
	assert_non_null(strstr(err, "no program headers"));
	free(elf);
	/* garbage where an image is stored */
	assert_null(ep_elf_image_unpack((const uint8_t *)"\xff\xff\xff", 3, err, sizeof(err)));
}

/* A fresh store: $EDGEPROF_TEST_STORE (clickhouse:URL, a database of its
 * own each time) or a SQLite file; spec is what reopens it. */
static struct ep_store *temp_store(char *path, size_t len, char *spec, size_t speclen)
{
	static int n;
	const char *env = getenv("EDGEPROF_TEST_STORE");
	snprintf(path, len, "/tmp/ep-test-binaries-%d-%d.db", (int)getpid(), ++n);
	unlink(path);
	if (env && strncmp(env, "clickhouse:", 11) == 0) {
		char db[64];
		snprintf(db, sizeof(db), "edgeprof_images_%d_%d", (int)getpid(), n);
		ep_test_clickhouse_spec(spec, speclen, env, db);
	} else
		snprintf(spec, speclen, "sqlite:%s", path);
	char err[512];
	struct ep_store *s = ep_store_open(spec, err, sizeof(err));
	if (!s)
		fprintf(stderr, "%s\n", err);
	assert_non_null(s);
	return s;
}

static void remove_store(const char *path)
{
	char p[4200];
	unlink(path);
	snprintf(p, sizeof(p), "%s-wal", path);
	unlink(p);
	snprintf(p, sizeof(p), "%s-shm", path);
	unlink(p);
}

/* The store's images as the binaries use them (test_store.c checks the
 * rules on both backends): a trusted image replaces a provisional one. */
static void test_store_images(void **state)
{
	(void)state;
	char path[4096], err[512], spec[4200];
	struct ep_store *s = temp_store(path, sizeof(path), spec, sizeof(spec));
	assert_int_equal(ep_store_image_get(s, "abcd", NULL, NULL, err, sizeof(err)), 0);
	assert_int_equal(ep_store_image_put(s, "abcd", 100, EP_IMAGE_PROVISIONAL,
					    (const uint8_t *)"first", 5, err, sizeof(err)),
			 1);
	assert_int_equal(ep_store_image_put(s, "abcd", 200, EP_IMAGE_TRUSTED,
					    (const uint8_t *)"second", 6, err, sizeof(err)),
			 2);
	ep_store_close(s);
	s = ep_store_open(spec, err, sizeof(err));
	assert_non_null(s);
	uint8_t *got = NULL;
	size_t len = 0;
	assert_int_equal(ep_store_image_get(s, "abcd", &got, &len, err, sizeof(err)),
			 EP_IMAGE_TRUSTED);
	assert_int_equal(len, 6);
	assert_memory_equal(got, "second", 6);
	free(got);
	assert_int_equal(ep_store_image_get(s, "ef01", NULL, NULL, err, sizeof(err)), 0);
	ep_store_close(s);
	remove_store(path);
}

/* The fixture with other code under its build-id note: main's first bytes
 * made int3 (what a container can have its agent send, issue 32 item 7). */
static uint8_t *planted_copy(size_t *len)
{
	uint8_t *elf = ep_test_slurp(ep_test_fixture("propeller_sample_1.bin"), len);
	Elf64_Ehdr eh;
	memcpy(&eh, elf, sizeof(eh));
	for (size_t i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;
		memcpy(&ph, elf + eh.e_phoff + i * eh.e_phentsize, sizeof(ph));
		if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X) && ph.p_vaddr <= 0x1920 &&
		    0x1920 + 16 <= ph.p_vaddr + ph.p_filesz) {
			memset(elf + ph.p_offset + (0x1920 - ph.p_vaddr), 0xcc, 16);
			return elf;
		}
	}
	fail_msg("no executable segment holds main");
	return NULL;
}

/* The fixture with every symbol named by one string of name_len bytes,
 * appended: a file of ~30 KB whose image holds each name, so it is many
 * times the file. */
static uint8_t *long_names_copy(size_t *len, size_t name_len)
{
	size_t n;
	uint8_t *elf = ep_test_slurp(ep_test_fixture("propeller_sample_1.bin"), &n);
	uint8_t *out = malloc(n + name_len + 2);
	assert_non_null(out);
	memcpy(out, elf, n);
	free(elf);
	out[n] = 0;
	memset(out + n + 1, 'f', name_len);
	out[n + 1 + name_len] = 0;
	Elf64_Ehdr eh;
	memcpy(&eh, out, sizeof(eh));
	bool renamed = false;
	for (size_t i = 0; i < eh.e_shnum; i++) {
		Elf64_Shdr sh;
		memcpy(&sh, out + eh.e_shoff + i * eh.e_shentsize, sizeof(sh));
		if (sh.sh_type != SHT_SYMTAB)
			continue;
		Elf64_Shdr str;
		uint8_t *str_at = out + eh.e_shoff + sh.sh_link * eh.e_shentsize;
		memcpy(&str, str_at, sizeof(str));
		str.sh_offset = n;
		str.sh_size = name_len + 2;
		memcpy(str_at, &str, sizeof(str));
		for (size_t k = 1; k < sh.sh_size / sizeof(Elf64_Sym); k++) {
			Elf64_Sym sym;
			memcpy(&sym, out + sh.sh_offset + k * sizeof(sym), sizeof(sym));
			sym.st_name = 1;
			memcpy(out + sh.sh_offset + k * sizeof(sym), &sym, sizeof(sym));
		}
		renamed = true;
	}
	assert_true(renamed);
	*len = n + name_len + 2;
	return out;
}

/* main's first instruction as the collector would draw it. */
static void assert_main_starts(struct ep_binaries *b, const char *want, const char *source)
{
	char err[256], text[96];
	struct ep_binary_code *c = ep_binaries_code(b, PROPELLER_ID, err, sizeof(err));
	if (!c)
		fail_msg("%s", err);
	struct ep_insn_info info;
	assert_true(
	    ep_decoder_insn_text(ep_binary_code_decoder(c), 0x1920, &info, text, sizeof(text)));
	assert_string_equal(text, want);
	assert_string_equal(ep_binary_code_image(c)->source, source);
	ep_binary_code_release(c);
}

static int upload(struct ep_binaries *b, const uint8_t *elf, size_t len, const char *id,
		  const char *arch, enum ep_image_source source, char *msg, size_t msglen)
{
	struct ep_image_claim claim = {
	    .build_id = id, .arch = arch, .path = "p.bin", .source = source};
	return ep_binaries_upload(b, elf, len, &claim, msg, msglen);
}

static void test_uploads(void **state)
{
	(void)state;
	char path[4096], msg[512], err[256], spec[4200];
	struct ep_store *s = temp_store(path, sizeof(path), spec, sizeof(spec));
	size_t len;
	uint8_t *elf = ep_test_slurp(ep_test_fixture("propeller_sample_1.bin"), &len);
	struct ep_binaries *b = ep_binaries_new(s, 0);
	assert_non_null(b);
	assert_int_equal(ep_binaries_has(b, PROPELLER_ID, err, sizeof(err)), 0);
	/* sent as another build-id: refused, naming both */
	assert_int_equal(
	    upload(b, elf, len, "00112233", NULL, EP_IMAGE_FROM_UPLOAD, msg, sizeof(msg)), 400);
	assert_non_null(strstr(msg, "00112233"));
	assert_non_null(strstr(msg, PROPELLER_ID));
	/* filed under no build-id, or one that is not hex */
	assert_int_equal(upload(b, elf, len, NULL, NULL, EP_IMAGE_FROM_AGENT, msg, sizeof(msg)),
			 400);
	assert_non_null(strstr(msg, "no build_id="));
	assert_int_equal(upload(b, elf, len, "../etc", NULL, EP_IMAGE_FROM_AGENT, msg, sizeof(msg)),
			 400);
	assert_non_null(strstr(msg, "not 2 to 128 lowercase hex"));
	/* said to be of another arch: refused, naming both */
	assert_int_equal(
	    upload(b, elf, len, PROPELLER_ID, "aarch64", EP_IMAGE_FROM_UPLOAD, msg, sizeof(msg)),
	    400);
	assert_non_null(strstr(msg, "sent as arch aarch64 but the ELF file is x86_64"));
	assert_int_equal(
	    upload(b, elf, len, PROPELLER_ID, "sparc", EP_IMAGE_FROM_UPLOAD, msg, sizeof(msg)),
	    400);
	assert_non_null(strstr(msg, "'sparc'"));
	assert_int_equal(upload(b, (const uint8_t *)"nope", 4, PROPELLER_ID, NULL,
				EP_IMAGE_FROM_UPLOAD, msg, sizeof(msg)),
			 400);
	assert_non_null(strstr(msg, "not an ELF file"));
	assert_int_equal(ep_binaries_has(b, PROPELLER_ID, err, sizeof(err)), 0);
	assert_int_equal(
	    upload(b, elf, len, PROPELLER_ID, "x86_64", EP_IMAGE_FROM_AGENT, msg, sizeof(msg)),
	    201);
	assert_non_null(strstr(msg, "provisional"));
	assert_int_equal(
	    upload(b, elf, len, PROPELLER_ID, NULL, EP_IMAGE_FROM_AGENT, msg, sizeof(msg)), 200);
	assert_int_equal(ep_binaries_has(b, PROPELLER_ID, err, sizeof(err)), EP_IMAGE_PROVISIONAL);
	assert_int_equal(ep_binaries_has(b, "../etc", err, sizeof(err)), 0);
	/* too large for a smaller limit: refused naming the size and the bound */
	struct ep_binaries *small = ep_binaries_new(s, 1024);
	assert_int_equal(
	    upload(small, elf, len, PROPELLER_ID, NULL, EP_IMAGE_FROM_UPLOAD, msg, sizeof(msg)),
	    413);
	char want[128];
	snprintf(want, sizeof(want), "%zu bytes, over this collector's limit of 1024 bytes", len);
	assert_non_null(strstr(msg, want));
	char *metrics = NULL;
	size_t mlen = 0;
	FILE *m = open_memstream(&metrics, &mlen);
	ep_binaries_metrics(small, m);
	fclose(m);
	assert_non_null(strstr(metrics, "edgeprof_images_total{result=\"too_large\"} 1\n"));
	free(metrics);
	ep_binaries_free(small);
	/* a file within the limit whose image is not: every symbol named by one
	 * 16,000-byte string (the image holds each name). Refused naming the
	 * image's size and the bound, so the store and the UI's cache hold no
	 * more than the limit of any one upload */
	size_t llen;
	uint8_t *named = long_names_copy(&llen, 16000);
	small = ep_binaries_new(s, 64 << 10);
	assert_true(llen < 64 << 10);
	assert_int_equal(
	    upload(small, named, llen, PROPELLER_ID, NULL, EP_IMAGE_FROM_AGENT, msg, sizeof(msg)),
	    413);
	assert_non_null(strstr(msg, "its image (code and symbols) is"));
	assert_non_null(strstr(msg, "over this collector's limit of 65536 bytes"));
	assert_int_equal(ep_binaries_has(small, PROPELLER_ID, err, sizeof(err)),
			 EP_IMAGE_PROVISIONAL);
	ep_binaries_free(small);
	free(named);
	/* the code, decoded by the shared decoder; handles share the image */
	struct ep_binary_code *c = ep_binaries_code(b, PROPELLER_ID, err, sizeof(err));
	struct ep_binary_code *c2 = ep_binaries_code(b, PROPELLER_ID, err, sizeof(err));
	assert_non_null(c);
	assert_non_null(c2);
	assert_ptr_equal(ep_binary_code_image(c), ep_binary_code_image(c2));
	assert_string_equal(ep_binary_code_image(c)->source, "agent");
	const struct ep_symbol *sym = ep_binary_code_symbol_at(c, 0x1921);
	assert_non_null(sym);
	assert_string_equal(sym->name, "main");
	assert_null(ep_binary_code_symbol_at(c, 0x10));
	struct ep_insn_info info;
	char text[96];
	assert_true(
	    ep_decoder_insn_text(ep_binary_code_decoder(c), 0x1920, &info, text, sizeof(text)));
	assert_string_equal(text, "push rbp");
	ep_binary_code_release(c2);
	ep_binary_code_release(c);
	assert_null(ep_binaries_code(b, "ffff", err, sizeof(err)));
	assert_string_equal(err, "");
	ep_binaries_free(b);
	free(elf);
	ep_store_close(s);
	remove_store(path);
}

/* Issue 32 item 7: a file carrying the binary's build-id and other code,
 * sent first through an agent, was kept for ever and `edgeprof upload` of
 * the real one was answered "already there". Now the agent's is
 * provisional: drawn (said so) until the upload replaces it, also for a
 * page that holds the planted code at that moment; the agent's copy never
 * comes back. */
static void test_upload_replaces_planted_code(void **state)
{
	(void)state;
	char path[4096], msg[512], err[256], spec[4200];
	struct ep_store *s = temp_store(path, sizeof(path), spec, sizeof(spec));
	size_t len, plen;
	uint8_t *elf = ep_test_slurp(ep_test_fixture("propeller_sample_1.bin"), &len);
	uint8_t *planted = planted_copy(&plen);
	struct ep_binaries *b = ep_binaries_new(s, 0);
	assert_int_equal(
	    upload(b, planted, plen, PROPELLER_ID, "x86_64", EP_IMAGE_FROM_AGENT, msg, sizeof(msg)),
	    201);
	assert_main_starts(b, "int3", "agent");
	struct ep_binary_code *held = ep_binaries_code(b, PROPELLER_ID, err, sizeof(err));
	assert_non_null(held);
	assert_int_equal(
	    upload(b, elf, len, PROPELLER_ID, "x86_64", EP_IMAGE_FROM_UPLOAD, msg, sizeof(msg)),
	    201);
	assert_non_null(strstr(msg, "in place of an agent's provisional image"));
	assert_int_equal(ep_binaries_has(b, PROPELLER_ID, err, sizeof(err)), EP_IMAGE_TRUSTED);
	assert_main_starts(b, "push rbp", "upload");
	/* the page that held the planted code keeps it to its end */
	assert_string_equal(ep_binary_code_image(held)->source, "agent");
	ep_binary_code_release(held);
	assert_int_equal(
	    upload(b, planted, plen, PROPELLER_ID, "x86_64", EP_IMAGE_FROM_AGENT, msg, sizeof(msg)),
	    200);
	assert_int_equal(
	    upload(b, elf, len, PROPELLER_ID, "x86_64", EP_IMAGE_FROM_UPLOAD, msg, sizeof(msg)),
	    200);
	assert_main_starts(b, "push rbp", "upload");
	char *metrics = NULL;
	size_t mlen = 0;
	FILE *m = open_memstream(&metrics, &mlen);
	ep_binaries_metrics(b, m);
	fclose(m);
	assert_non_null(strstr(metrics, "edgeprof_images_total{result=\"stored\"} 1\n"));
	assert_non_null(strstr(metrics, "edgeprof_images_total{result=\"replaced\"} 1\n"));
	assert_non_null(strstr(metrics, "edgeprof_images_total{result=\"kept\"} 2\n"));
	free(metrics);
	ep_binaries_free(b);
	free(planted);
	free(elf);
	ep_store_close(s);
	remove_store(path);
}

/* The directory set up for debuginfod's client, its refusal counted. */
static const char *cache_of(struct ep_binaries *b, bool refused)
{
	ep_binaries_set_debuginfod(b, "http://127.0.0.1:1");
	const char *dir = ep_binaries_debuginfod_cache(b);
	assert_non_null(dir);
	assert_string_equal(getenv("DEBUGINFOD_CACHE_PATH"), dir);
	struct stat st;
	assert_int_equal(lstat(dir, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_uid, geteuid());
	assert_int_equal(st.st_mode & 07777, 0700);
	char *metrics = NULL;
	size_t mlen = 0;
	FILE *m = open_memstream(&metrics, &mlen);
	ep_binaries_metrics(b, m);
	fclose(m);
	assert_non_null(strstr(metrics, refused ? "edgeprof_debuginfod_cache_refused 1\n"
						: "edgeprof_debuginfod_cache_refused 0\n"));
	free(metrics);
	return dir;
}

/* Issue 32 item 8: the default cache $TMPDIR/edgeprof-debuginfod-UID was
 * used whoever owned it, and libdebuginfod answers from its cache without
 * asking a server: a file planted there was stored as the binary's code.
 * Now it must be ours and 0700 (made so when missing); one with group or
 * other permissions, another owner (nobody, when the test runs as root)
 * or a symbolic link is refused, and a fresh private directory is used
 * and removed at the end. */
static void test_debuginfod_cache_is_private(void **state)
{
	(void)state;
	char path[4096], spec[4200], tmp[64], dir[128], target[128];
	struct ep_store *s = temp_store(path, sizeof(path), spec, sizeof(spec));
	snprintf(tmp, sizeof(tmp), "/tmp/ep-test-tmpdir-XXXXXX");
	assert_non_null(mkdtemp(tmp));
	setenv("TMPDIR", tmp, 1);
	snprintf(dir, sizeof(dir), "%s/edgeprof-debuginfod-%u", tmp, (unsigned)geteuid());
	/* missing: made, 0700, and kept at the end (the cache is worth keeping) */
	unsetenv("DEBUGINFOD_CACHE_PATH");
	struct ep_binaries *b = ep_binaries_new(s, 0);
	assert_string_equal(cache_of(b, false), dir);
	ep_binaries_free(b);
	struct stat st;
	assert_int_equal(lstat(dir, &st), 0);
	/* planted open to all, or of another owner: refused for a fresh one */
	for (int planted = 0; planted < 2; planted++) {
		if (planted == 0) {
			assert_int_equal(chmod(dir, 0777), 0);
		} else {
			if (geteuid() != 0) {
				print_message("not root: no directory of another owner\n");
				continue;
			}
			assert_int_equal(chmod(dir, 0700), 0);
			assert_int_equal(chown(dir, 65534, 65534), 0); /* nobody */
		}
		unsetenv("DEBUGINFOD_CACHE_PATH");
		b = ep_binaries_new(s, 0);
		char fresh[256];
		snprintf(fresh, sizeof(fresh), "%s", cache_of(b, true));
		assert_string_not_equal(fresh, dir);
		assert_int_equal(strncmp(fresh, dir, strlen(dir)), 0);
		ep_binaries_free(b);
		assert_int_equal(lstat(fresh, &st), -1);
	}
	/* $DEBUGINFOD_CACHE_PATH is held to the same rule; a link is refused
	 * rather than followed, even to a directory of ours */
	assert_int_equal(rmdir(dir), 0);
	snprintf(target, sizeof(target), "%s/target", tmp);
	assert_int_equal(mkdir(target, 0700), 0);
	assert_int_equal(symlink(target, dir), 0);
	setenv("DEBUGINFOD_CACHE_PATH", dir, 1);
	b = ep_binaries_new(s, 0);
	assert_string_not_equal(cache_of(b, true), dir);
	ep_binaries_free(b);
	unlink(dir);
	rmdir(target);
	rmdir(tmp);
	unsetenv("DEBUGINFOD_CACHE_PATH");
	unsetenv("DEBUGINFOD_URLS");
	unsetenv("TMPDIR");
	ep_store_close(s);
	remove_store(path);
}

static void test_form_values(void **state)
{
	(void)state;
	char out[64];
	const char *body = "a=1&token=s3cr%2Bt+x%21&b=";
	assert_true(ep_web_form_value(body, strlen(body), "token", out, sizeof(out)));
	assert_string_equal(out, "s3cr+t x!");
	assert_true(ep_web_form_value(body, strlen(body), "b", out, sizeof(out)));
	assert_string_equal(out, "");
	assert_false(ep_web_form_value(body, strlen(body), "tok", out, sizeof(out)));
	assert_false(ep_web_form_value(body, strlen(body), "token", out, 4));
	/* a % at the end is kept as it is */
	assert_true(ep_web_form_value("token=ab%2", 10, "token", out, sizeof(out)));
	assert_string_equal(out, "ab%2");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_image_of_a_binary),
	    cmocka_unit_test(test_image_refusals),
	    cmocka_unit_test(test_store_images),
	    cmocka_unit_test(test_uploads),
	    cmocka_unit_test(test_upload_replaces_planted_code),
	    cmocka_unit_test(test_debuginfod_cache_is_private),
	    cmocka_unit_test(test_form_values),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
