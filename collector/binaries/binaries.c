/* SPDX-License-Identifier: Apache-2.0 */
#include "collector/binaries/binaries.h"

#include <elfutils/debuginfod.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/elf/elf_image.h"
#include "common/util/arch.h"
#include "common/util/log.h"

#define CACHE_SLOTS 4
#define MISSES	    64	/* build-ids debuginfod did not have, remembered */
#define MISS_S	    600 /* ... for this long */

/* One image read back; shared by the handles that use it. */
struct cached {
	char build_id[129];
	Edgeprof__V1__BinaryImage *img;
	struct ep_code_segment *segs;
	unsigned refs;
	bool cached; /* in a slot (else freed at its last release) */
	uint64_t used;
};

struct ep_binaries {
	struct ep_store *store;
	size_t max_file;
	pthread_mutex_t lock;
	struct cached *slots[CACHE_SLOTS];
	uint64_t clock;
	bool debuginfod; /* servers to ask (DEBUGINFOD_URLS) */
	struct {
		char build_id[129];
		int64_t at;
	} misses[MISSES];
	size_t next_miss;
};

struct ep_binary_code {
	struct ep_binaries *owner;
	struct cached *entry;
	struct ep_decoder *decoder;
};

struct ep_binaries *ep_binaries_new(struct ep_store *store, size_t max_file)
{
	struct ep_binaries *b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	b->store = store;
	b->max_file = max_file ? max_file : EP_BINARIES_DEFAULT_MAX_FILE;
	pthread_mutex_init(&b->lock, NULL);
	return b;
}

static void entry_free(struct cached *e)
{
	if (!e)
		return;
	ep_elf_image_free(e->img);
	free(e->segs);
	free(e);
}

void ep_binaries_free(struct ep_binaries *b)
{
	if (!b)
		return;
	for (int i = 0; i < CACHE_SLOTS; i++)
		entry_free(b->slots[i]); /* every handle is released by now */
	pthread_mutex_destroy(&b->lock);
	free(b);
}

size_t ep_binaries_max_file(const struct ep_binaries *b)
{
	return b->max_file;
}

static bool hex_id(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 128 || n % 2)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

int ep_binaries_upload(struct ep_binaries *b, const uint8_t *elf, size_t len,
		       const char *claimed_build_id, const char *path, const char *source,
		       char *msg, size_t msglen)
{
	if (len > b->max_file) {
		snprintf(msg, msglen, "%zu bytes: larger than this collector's limit of %zu bytes",
			 len, b->max_file);
		return 413;
	}
	char why[256];
	Edgeprof__V1__BinaryImage *img = ep_elf_image_read(elf, len, path, why, sizeof(why));
	if (!img) {
		snprintf(msg, msglen, "refused: %s", why);
		return 400;
	}
	if (claimed_build_id && *claimed_build_id && strcmp(claimed_build_id, img->build_id)) {
		snprintf(msg, msglen,
			 "refused: sent as build-id %.128s but its build-id note says %s",
			 claimed_build_id, img->build_id);
		ep_elf_image_free(img);
		return 400;
	}
	/* ep_elf_image_read leaves source at protobuf-c's shared empty string */
	img->source = strdup(source && *source ? source : "upload");
	img->uploaded_s = (int64_t)time(NULL);
	size_t packed_len = 0;
	uint8_t *packed = img->source ? ep_elf_image_pack(img, &packed_len) : NULL;
	int status;
	if (!packed) {
		snprintf(msg, msglen, "out of memory");
		status = 503;
	} else {
		char err[256];
		/* an agent sends what a process it profiles mapped (store.h) */
		enum ep_image_trust trust =
		    strcmp(img->source, "agent") == 0 ? EP_IMAGE_PROVISIONAL : EP_IMAGE_TRUSTED;
		int r = ep_store_image_put(b->store, img->build_id, img->uploaded_s, trust, packed,
					   packed_len, err, sizeof(err));
		if (r < 0) {
			snprintf(msg, msglen, "store: %s", err);
			status = 503;
		} else {
			snprintf(msg, msglen, "%s %s: %s (%zu bytes of code and %zu symbols)",
				 img->build_id, img->arch,
				 r == 2	 ? "stored in place of an agent's provisional image"
				 : r > 0 ? "stored"
					 : "already here, kept the one stored",
				 packed_len, img->n_symbols);
			status = r ? 201 : 200;
		}
	}
	free(packed);
	ep_elf_image_free(img);
	return status;
}

int ep_binaries_has(struct ep_binaries *b, const char *build_id, char *err, size_t errlen)
{
	if (!hex_id(build_id))
		return 0;
	return ep_store_image_get(b->store, build_id, NULL, NULL, err, errlen);
}

void ep_binaries_set_debuginfod(struct ep_binaries *b, const char *urls)
{
	if (urls && *urls)
		setenv("DEBUGINFOD_URLS", urls, 1);
	const char *env = getenv("DEBUGINFOD_URLS");
	b->debuginfod = env && *env;
	/* the client keeps what it fetched in a cache directory; $HOME may be
	 * read-only where a collector runs */
	if (b->debuginfod && !getenv("DEBUGINFOD_CACHE_PATH")) {
		char dir[4096];
		const char *tmp = getenv("TMPDIR");
		snprintf(dir, sizeof(dir), "%s/edgeprof-debuginfod-%d", tmp && *tmp ? tmp : "/tmp",
			 (int)getuid());
		setenv("DEBUGINFOD_CACHE_PATH", dir, 1);
	}
}

/* Under the lock: asked recently, and no server had it. */
static bool missed(struct ep_binaries *b, const char *build_id)
{
	int64_t now = (int64_t)time(NULL);
	for (size_t i = 0; i < MISSES; i++)
		if (b->misses[i].at && now - b->misses[i].at < MISS_S &&
		    strcmp(b->misses[i].build_id, build_id) == 0)
			return true;
	return false;
}

/* build_id's executable from the debuginfod servers, checked and kept like
 * an upload; 0 when it is kept now, -1 when no server has it (remembered). */
static int from_debuginfod(struct ep_binaries *b, const char *build_id)
{
	pthread_mutex_lock(&b->lock);
	bool skip = !b->debuginfod || missed(b, build_id);
	pthread_mutex_unlock(&b->lock);
	if (skip)
		return -1;
	debuginfod_client *client = debuginfod_begin();
	char *path = NULL;
	int fd = client
		     ? debuginfod_find_executable(client, (const unsigned char *)build_id, 0, &path)
		     : -ENOMEM;
	int rc = -1;
	char msg[512] = "";
	struct stat st;
	if (fd >= 0 && fstat(fd, &st) == 0 && (uint64_t)st.st_size <= b->max_file) {
		uint8_t *bytes = malloc(st.st_size ? (size_t)st.st_size : 1);
		ssize_t got = bytes ? pread(fd, bytes, (size_t)st.st_size, 0) : -1;
		if (got == st.st_size) {
			int status = ep_binaries_upload(b, bytes, (size_t)got, build_id, path,
							"debuginfod", msg, sizeof(msg));
			rc = status == 201 || status == 200 ? 0 : -1;
		}
		free(bytes);
	}
	if (fd >= 0)
		close(fd);
	if (rc == 0)
		ep_info("binary %s: code from debuginfod (%s)", build_id, msg);
	else
		ep_debug("binary %s: not from debuginfod: %s", build_id,
			 fd < 0 ? strerror(-fd)
			 : *msg ? msg
				: "unreadable or too large");
	free(path);
	if (client)
		debuginfod_end(client);
	if (rc != 0) {
		pthread_mutex_lock(&b->lock);
		snprintf(b->misses[b->next_miss].build_id, sizeof(b->misses[0].build_id), "%s",
			 build_id);
		b->misses[b->next_miss].at = (int64_t)time(NULL);
		b->next_miss = (b->next_miss + 1) % MISSES;
		pthread_mutex_unlock(&b->lock);
	}
	return rc;
}

static struct cached *load(struct ep_binaries *b, const char *build_id, char *err, size_t errlen)
{
	uint8_t *blob = NULL;
	size_t len = 0;
	int r = ep_store_image_get(b->store, build_id, &blob, &len, err, errlen);
	if (r == 0 && from_debuginfod(b, build_id) == 0)
		r = ep_store_image_get(b->store, build_id, &blob, &len, err, errlen);
	if (r <= 0) {
		if (r == 0 && errlen)
			err[0] = '\0';
		return NULL;
	}
	struct cached *e = calloc(1, sizeof(*e));
	if (!e) {
		free(blob);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	e->img = ep_elf_image_unpack(blob, len, err, errlen);
	free(blob);
	if (!e->img) {
		free(e);
		return NULL;
	}
	e->segs = calloc(e->img->n_code, sizeof(*e->segs));
	if (!e->segs) {
		entry_free(e);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	for (size_t i = 0; i < e->img->n_code; i++)
		e->segs[i] = (struct ep_code_segment){.vaddr = e->img->code[i]->vaddr,
						      .bytes = e->img->code[i]->bytes.data,
						      .size = e->img->code[i]->bytes.len};
	snprintf(e->build_id, sizeof(e->build_id), "%s", build_id);
	return e;
}

/* Under the lock: a cached entry for build_id, with a reference taken. */
static struct cached *lookup(struct ep_binaries *b, const char *build_id)
{
	for (int i = 0; i < CACHE_SLOTS; i++) {
		struct cached *e = b->slots[i];
		if (e && strcmp(e->build_id, build_id) == 0) {
			e->refs++;
			e->used = ++b->clock;
			return e;
		}
	}
	return NULL;
}

/* Under the lock: keeps e in a free slot or the least recently used idle
 * one's; when every slot is in use, e stays uncached. */
static void keep(struct ep_binaries *b, struct cached *e)
{
	int victim = -1;
	for (int i = 0; i < CACHE_SLOTS; i++) {
		if (!b->slots[i]) {
			victim = i;
			break;
		}
		if (b->slots[i]->refs == 0 &&
		    (victim < 0 || b->slots[i]->used < b->slots[victim]->used))
			victim = i;
	}
	if (victim < 0)
		return;
	entry_free(b->slots[victim]);
	b->slots[victim] = e;
	e->cached = true;
}

struct ep_binary_code *ep_binaries_code(struct ep_binaries *b, const char *build_id, char *err,
					size_t errlen)
{
	if (!hex_id(build_id)) {
		if (errlen)
			err[0] = '\0';
		return NULL;
	}
	struct ep_binary_code *c = calloc(1, sizeof(*c));
	if (!c) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	c->owner = b;
	pthread_mutex_lock(&b->lock);
	c->entry = lookup(b, build_id);
	pthread_mutex_unlock(&b->lock);
	if (!c->entry) {
		/* read outside the lock; two requests may both read it, the
		 * second one's copy then stays uncached */
		struct cached *e = load(b, build_id, err, errlen);
		if (!e) {
			free(c);
			return NULL;
		}
		pthread_mutex_lock(&b->lock);
		c->entry = lookup(b, build_id);
		if (c->entry) {
			entry_free(e);
		} else {
			e->refs = 1;
			e->used = ++b->clock;
			keep(b, e);
			c->entry = e;
		}
		pthread_mutex_unlock(&b->lock);
	}
	c->decoder = ep_decoder_new(ep_arch_from_name(c->entry->img->arch), c->entry->segs,
				    c->entry->img->n_code);
	if (!c->decoder) {
		snprintf(err, errlen, "no decoder for arch %s", c->entry->img->arch);
		ep_binary_code_release(c);
		return NULL;
	}
	return c;
}

void ep_binary_code_release(struct ep_binary_code *c)
{
	if (!c)
		return;
	ep_decoder_free(c->decoder);
	struct ep_binaries *b = c->owner;
	pthread_mutex_lock(&b->lock);
	bool last = --c->entry->refs == 0 && !c->entry->cached;
	pthread_mutex_unlock(&b->lock);
	if (last)
		entry_free(c->entry);
	free(c);
}

const Edgeprof__V1__BinaryImage *ep_binary_code_image(const struct ep_binary_code *c)
{
	return c->entry->img;
}

struct ep_decoder *ep_binary_code_decoder(struct ep_binary_code *c)
{
	return c->decoder;
}

const Edgeprof__V1__ImageSymbol *ep_binary_code_symbol_at(const struct ep_binary_code *c,
							  uint64_t vaddr)
{
	const Edgeprof__V1__BinaryImage *img = c->entry->img;
	size_t lo = 0, hi = img->n_symbols; /* first symbol starting after vaddr */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (img->symbols[mid]->start <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	/* aliases share a start: any of them may carry the size */
	uint64_t start = img->symbols[lo - 1]->start;
	for (size_t i = lo; i > 0 && img->symbols[i - 1]->start == start; i--) {
		const Edgeprof__V1__ImageSymbol *s = img->symbols[i - 1];
		if (vaddr - s->start < s->size || (s->size == 0 && vaddr == s->start))
			return s;
	}
	return NULL;
}
