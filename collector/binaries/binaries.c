/* SPDX-License-Identifier: Apache-2.0 */
#include "collector/binaries/binaries.h"

#include <elfutils/debuginfod.h>
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/elf/elf_image.h"
#include "common/elf/elf_symbols.h"
#include "common/util/arch.h"
#include "common/util/log.h"
#include "common/util/regular_file.h"

#define CACHE_SLOTS 4
#define MISSES	    64	/* build-ids debuginfod did not have, remembered */
#define MISS_S	    600 /* ... for this long */
#define RECHECK_S   60	/* a cached provisional image: asked again after */

/* One image read back; shared by the handles that use it. */
struct cached {
	char build_id[129];
	Edgeprof__V1__BinaryImage *img;
	struct ep_code_segment *segs;
	struct ep_elf_symtab syms; /* over img's symbols, as the agent's */
	unsigned refs;
	bool cached; /* in a slot (else freed at its last release) */
	uint64_t used;
	int trust;	   /* ep_image_trust */
	int64_t checked_s; /* when the store last said how far it is trusted */
};

struct ep_binaries {
	struct ep_store *store;
	size_t max_file;
	pthread_mutex_t lock;
	/* one image decoded at a time, sent or read back: its code copied,
	 * packed, and (ClickHouse) written or read as hex are each up to
	 * max_file, and the clients must not multiply that */
	pthread_mutex_t image_lock;
	atomic_uint_fast64_t results[EP_IMAGE_NRESULTS];
	char *cache_dir;  /* debuginfod's client's, NULL: not asked */
	bool cache_fresh; /* made by us (the configured one was refused): removed at the end */
	bool cache_refused;
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
	pthread_mutex_init(&b->image_lock, NULL);
	return b;
}

static void entry_free(struct cached *e)
{
	if (!e)
		return;
	ep_elf_image_free(e->img);
	free(e->segs);
	ep_elf_symtab_free(&e->syms);
	free(e);
}

static int remove_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (type == FTW_DP)
		rmdir(path);
	else
		unlink(path);
	return 0;
}

void ep_binaries_free(struct ep_binaries *b)
{
	if (!b)
		return;
	for (int i = 0; i < CACHE_SLOTS; i++)
		entry_free(b->slots[i]); /* every handle is released by now */
	/* only a directory made for this process: a configured one is the
	 * operator's to keep */
	if (b->cache_fresh)
		nftw(b->cache_dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
	free(b->cache_dir);
	pthread_mutex_destroy(&b->image_lock);
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

static const char *const source_names[] = {"agent", "upload", "debuginfod"};

static enum ep_image_trust trust_of(enum ep_image_source source)
{
	return source == EP_IMAGE_FROM_AGENT ? EP_IMAGE_PROVISIONAL : EP_IMAGE_TRUSTED;
}

void ep_binaries_count(struct ep_binaries *b, enum ep_image_result r)
{
	if (r < EP_IMAGE_NRESULTS)
		atomic_fetch_add(&b->results[r], 1);
}

/* Under the lock: the cached image of build_id leaves its slot (a more
 * trusted one was stored); handles using it keep it to their release. */
static void forget(struct ep_binaries *b, const char *build_id)
{
	for (int i = 0; i < CACHE_SLOTS; i++) {
		struct cached *e = b->slots[i];
		if (e && strcmp(e->build_id, build_id) == 0) {
			b->slots[i] = NULL;
			e->cached = false;
			if (e->refs == 0)
				entry_free(e);
		}
	}
}

/* The claim checked against the file's image: 0, or 400 with msg. */
static int check_claim(const struct ep_image_claim *claim, const Edgeprof__V1__BinaryImage *img,
		       char *msg, size_t msglen)
{
	if (strcmp(claim->build_id, img->build_id) != 0) {
		snprintf(msg, msglen,
			 "refused: sent as build-id %.128s but its build-id note says %s",
			 claim->build_id, img->build_id);
		return 400;
	}
	if (claim->arch && *claim->arch && strcmp(claim->arch, img->arch) != 0) {
		snprintf(msg, msglen,
			 "refused: build-id %s sent as arch %.32s but the ELF file is %s (its "
			 "e_machine)",
			 img->build_id, claim->arch, img->arch);
		return 400;
	}
	return 0;
}

/* ep_binaries_upload once the claim's form is checked, under image_lock. */
static int upload_checked(struct ep_binaries *b, const uint8_t *elf, size_t len,
			  const struct ep_image_claim *claim, char *msg, size_t msglen,
			  enum ep_image_result *result)
{
	char why[256];
	*result = EP_IMAGE_REFUSED;
	Edgeprof__V1__BinaryImage *img = ep_elf_image_read(elf, len, claim->path, why, sizeof(why));
	if (!img) {
		snprintf(msg, msglen, "refused: build-id %.128s: %s", claim->build_id, why);
		return 400;
	}
	int status = check_claim(claim, img, msg, msglen);
	if (status) {
		ep_elf_image_free(img);
		return status;
	}
	/* ep_elf_image_read leaves source at protobuf-c's shared empty string */
	enum ep_image_trust trust = trust_of(claim->source);
	img->source = strdup(source_names[claim->source]);
	img->uploaded_s = (int64_t)time(NULL);
	/* what the store, its copies and the UI's cache hold of it is bounded
	 * like the file: code and symbols are the file's bytes, so only a
	 * file that names them many times over (overlapping segments, one
	 * string for many symbols) makes more */
	size_t packed_len = edgeprof__v1__binary_image__get_packed_size(img);
	if (packed_len > b->max_file) {
		snprintf(msg, msglen,
			 "build-id %s: its image (code and symbols) is %zu bytes, over this "
			 "collector's limit of %zu bytes (--max-binary-mib)",
			 img->build_id, packed_len, b->max_file);
		ep_elf_image_free(img);
		*result = EP_IMAGE_TOO_LARGE;
		return 413;
	}
	char id[129], arch[16];
	snprintf(id, sizeof(id), "%s", img->build_id);
	snprintf(arch, sizeof(arch), "%s", img->arch);
	size_t nsym = img->n_symbols;
	int64_t uploaded_s = img->uploaded_s;
	uint8_t *packed = img->source ? ep_elf_image_pack(img, &packed_len) : NULL;
	ep_elf_image_free(img); /* before the store makes its copies */
	*result = EP_IMAGE_STORE_ERROR;
	if (!packed) {
		snprintf(msg, msglen, "out of memory");
		return 503;
	}
	char err[256];
	int r = ep_store_image_put(b->store, id, uploaded_s, trust, packed, packed_len, err,
				   sizeof(err));
	free(packed);
	if (r < 0) {
		snprintf(msg, msglen, "store: %s", err);
		return 503;
	}
	if (r == 2) {
		pthread_mutex_lock(&b->lock);
		forget(b, id);
		pthread_mutex_unlock(&b->lock);
	}
	*result = r == 2 ? EP_IMAGE_REPLACED : r ? EP_IMAGE_STORED : EP_IMAGE_KEPT;
	snprintf(msg, msglen, "%s %s: %s (%s; an image of %zu bytes, %zu symbols)", id, arch,
		 r == 2	 ? "stored, trusted, in place of an agent's provisional image"
		 : r > 0 ? (trust == EP_IMAGE_TRUSTED ? "stored, trusted" : "stored, provisional")
			 : "already here, kept the one stored",
		 source_names[claim->source], packed_len, nsym);
	return r ? 201 : 200;
}

int ep_binaries_upload(struct ep_binaries *b, const uint8_t *elf, size_t len,
		       const struct ep_image_claim *claim, char *msg, size_t msglen)
{
	const char *id = claim->build_id ? claim->build_id : "";
	enum ep_image_result result = EP_IMAGE_REFUSED;
	int status = 400;
	if (len > b->max_file) {
		snprintf(msg, msglen,
			 "build-id %.128s: %zu bytes, over this collector's limit of %zu bytes "
			 "(--max-binary-mib)",
			 id, len, b->max_file);
		result = EP_IMAGE_TOO_LARGE;
		status = 413;
	} else if (!*id) {
		snprintf(msg, msglen,
			 "refused: no build_id= given: an image is filed under the build-id it "
			 "is sent for");
	} else if (!hex_id(id)) {
		snprintf(msg, msglen,
			 "refused: build-id '%.128s' is not 2 to 128 lowercase hex digits", id);
	} else if (claim->arch && *claim->arch &&
		   ep_arch_from_name(claim->arch) == EP_ARCH_UNKNOWN) {
		snprintf(msg, msglen,
			 "refused: build-id %s: arch '%.32s': expected x86_64 or aarch64", id,
			 claim->arch);
	} else if ((unsigned)claim->source >= sizeof(source_names) / sizeof(source_names[0])) {
		snprintf(msg, msglen, "refused: build-id %s: no such source", id);
	} else {
		pthread_mutex_lock(&b->image_lock);
		status = upload_checked(b, elf, len, claim, msg, msglen, &result);
		pthread_mutex_unlock(&b->image_lock);
	}
	ep_binaries_count(b, result);
	return status;
}

void ep_binaries_metrics(struct ep_binaries *b, FILE *out)
{
	static const char *const names[EP_IMAGE_NRESULTS] = {
	    "stored", "replaced", "kept", "refused", "too_large", "forbidden", "store_error"};
	fputs("# HELP edgeprof_images_total Binaries' images sent (POST /v1/images, "
	      "debuginfod), by outcome: replaced = trusted code in place of an agent's "
	      "provisional image; too_large = over --max-binary-mib.\n"
	      "# TYPE edgeprof_images_total counter\n",
	      out);
	for (int i = 0; i < EP_IMAGE_NRESULTS; i++)
		fprintf(out, "edgeprof_images_total{result=\"%s\"} %" PRIu64 "\n", names[i],
			(uint64_t)atomic_load(&b->results[i]));
	fprintf(out,
		"# HELP edgeprof_debuginfod_cache_refused 1 when the configured debuginfod "
		"cache directory was refused (not ours, or not mode 0700) and a fresh private "
		"one is used.\n"
		"# TYPE edgeprof_debuginfod_cache_refused gauge\n"
		"edgeprof_debuginfod_cache_refused %d\n",
		b->cache_refused ? 1 : 0);
}

int ep_binaries_has(struct ep_binaries *b, const char *build_id, char *err, size_t errlen)
{
	if (!hex_id(build_id))
		return 0;
	return ep_store_image_get(b->store, build_id, NULL, NULL, err, errlen);
}

/* 0 when dir is a directory of this process's user that no one else may
 * use (mode 0700 or narrower), made so when it does not exist; -1 with why.
 * lstat, so a symbolic link planted at the name is refused rather than
 * followed. */
static int private_dir(const char *dir, char *why, size_t whylen)
{
	struct stat st;
	if (lstat(dir, &st) != 0) {
		if (errno != ENOENT) {
			snprintf(why, whylen, "%s", strerror(errno));
			return -1;
		}
		/* someone else may make it first: looked at again either way */
		if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
			snprintf(why, whylen, "cannot create it: %s", strerror(errno));
			return -1;
		}
		if (lstat(dir, &st) != 0) {
			snprintf(why, whylen, "%s", strerror(errno));
			return -1;
		}
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(why, whylen, "not a directory%s", S_ISLNK(st.st_mode) ? " (a link)" : "");
		return -1;
	}
	if (st.st_uid != geteuid()) {
		snprintf(why, whylen, "owned by uid %u, not this collector's %u",
			 (unsigned)st.st_uid, (unsigned)geteuid());
		return -1;
	}
	if (st.st_mode & 077) {
		snprintf(why, whylen, "mode %04o: others may write or read it (0700 expected)",
			 (unsigned)(st.st_mode & 07777));
		return -1;
	}
	return 0;
}

void ep_binaries_set_debuginfod(struct ep_binaries *b, const char *urls)
{
	if (urls && *urls)
		setenv("DEBUGINFOD_URLS", urls, 1);
	const char *env = getenv("DEBUGINFOD_URLS");
	b->debuginfod = env && *env;
	if (!b->debuginfod)
		return;
	/* the client keeps what it fetched in a cache directory; $HOME may be
	 * read-only where a collector runs */
	const char *tmp = getenv("TMPDIR");
	if (!tmp || !*tmp)
		tmp = "/tmp";
	char dir[4096], why[256];
	const char *configured = getenv("DEBUGINFOD_CACHE_PATH");
	if (configured && *configured)
		snprintf(dir, sizeof(dir), "%s", configured);
	else
		snprintf(dir, sizeof(dir), "%s/edgeprof-debuginfod-%u", tmp, (unsigned)geteuid());
	if (private_dir(dir, why, sizeof(why)) != 0) {
		/* a fresh name no one can have planted, rather than no cache:
		 * libdebuginfod needs one, and without it every page would
		 * fetch the whole executable again */
		char fresh[4096];
		snprintf(fresh, sizeof(fresh), "%s/edgeprof-debuginfod-%u-XXXXXX", tmp,
			 (unsigned)geteuid());
		b->cache_refused = true;
		if (!mkdtemp(fresh)) {
			ep_warn(
			    "debuginfod cache %s refused (%s), and no private one could be made "
			    "in %s (%s): debuginfod is not asked",
			    dir, why, tmp, strerror(errno));
			b->debuginfod = false;
			return;
		}
		ep_warn("debuginfod cache %s refused (%s): using a fresh private directory %s", dir,
			why, fresh);
		snprintf(dir, sizeof(dir), "%s", fresh);
		b->cache_fresh = true;
	}
	b->cache_dir = strdup(dir);
	setenv("DEBUGINFOD_CACHE_PATH", dir, 1);
}

const char *ep_binaries_debuginfod_cache(const struct ep_binaries *b)
{
	return b->debuginfod ? b->cache_dir : NULL;
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
	if (fd >= 0 && fstat(fd, &st) == 0 && (uint64_t)st.st_size > b->max_file) {
		ep_binaries_count(b, EP_IMAGE_TOO_LARGE);
		snprintf(msg, sizeof(msg),
			 "%lld bytes, over this collector's limit of %zu bytes (--max-binary-mib)",
			 (long long)st.st_size, b->max_file);
	} else if (fd >= 0 && S_ISREG(st.st_mode)) {
		uint8_t *bytes = malloc(st.st_size ? (size_t)st.st_size : 1);
		size_t got = bytes ? ep_pread_full(fd, bytes, (size_t)st.st_size, 0) : 0;
		if (bytes && got == (size_t)st.st_size) {
			struct ep_image_claim claim = {
			    .build_id = build_id, .path = path, .source = EP_IMAGE_FROM_DEBUGINFOD};
			int status = ep_binaries_upload(b, bytes, got, &claim, msg, sizeof(msg));
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
				: "unreadable");
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
	/* what is kept, first without its bytes: an agent's provisional image
	 * is replaced by debuginfod's copy when a server has one */
	int r = ep_store_image_get(b->store, build_id, NULL, NULL, err, errlen);
	if (r >= 0 && r != EP_IMAGE_TRUSTED)
		from_debuginfod(b, build_id);
	struct cached *e = r >= 0 ? calloc(1, sizeof(*e)) : NULL;
	if (r >= 0 && !e) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (e) {
		pthread_mutex_lock(&b->image_lock);
		r = ep_store_image_get(b->store, build_id, &blob, &len, err, errlen);
		e->img = r > 0 ? ep_elf_image_unpack(blob, len, err, errlen) : NULL;
		free(blob);
		pthread_mutex_unlock(&b->image_lock);
	}
	if (r <= 0 || !e->img) {
		if (r == 0 && errlen)
			err[0] = '\0';
		free(e);
		return NULL;
	}
	e->segs = calloc(e->img->n_code, sizeof(*e->segs));
	struct ep_symbol *syms = malloc((e->img->n_symbols + 1) * sizeof(*syms));
	if (!e->segs || !syms) {
		free(syms);
		entry_free(e);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	for (size_t i = 0; i < e->img->n_symbols; i++) {
		const Edgeprof__V1__ImageSymbol *s = e->img->symbols[i];
		syms[i] = (struct ep_symbol){.name = s->name,
					     .start = s->start,
					     .size = s->size,
					     .local_index = s->local_index};
	}
	ep_elf_symtab_of(syms, e->img->n_symbols, &e->syms);
	for (size_t i = 0; i < e->img->n_code; i++)
		e->segs[i] = (struct ep_code_segment){.vaddr = e->img->code[i]->vaddr,
						      .bytes = e->img->code[i]->bytes.data,
						      .size = e->img->code[i]->bytes.len};
	snprintf(e->build_id, sizeof(e->build_id), "%s", build_id);
	e->trust = r;
	e->checked_s = (int64_t)time(NULL);
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
	int64_t now = (int64_t)time(NULL);
	pthread_mutex_lock(&b->lock);
	c->entry = lookup(b, build_id);
	bool recheck = c->entry && c->entry->trust != EP_IMAGE_TRUSTED &&
		       now - c->entry->checked_s >= RECHECK_S;
	if (recheck)
		c->entry->checked_s = now;
	pthread_mutex_unlock(&b->lock);
	if (recheck) {
		/* a provisional image is asked after now and then: a collector
		 * sharing the store may have trusted code for it by now, or a
		 * debuginfod server */
		char ignored[256];
		int t =
		    ep_store_image_get(b->store, build_id, NULL, NULL, ignored, sizeof(ignored));
		if (t == EP_IMAGE_PROVISIONAL && from_debuginfod(b, build_id) == 0)
			t = EP_IMAGE_TRUSTED;
		if (t == EP_IMAGE_TRUSTED) {
			pthread_mutex_lock(&b->lock);
			forget(b, build_id);
			bool last = --c->entry->refs == 0;
			pthread_mutex_unlock(&b->lock);
			if (last)
				entry_free(c->entry);
			c->entry = NULL;
		}
	}
	if (!c->entry) {
		/* read outside the lock; two requests may both read it, the
		 * second one's copy then stays uncached */
		struct cached *e = load(b, build_id, err, errlen);
		if (!e) {
			free(c);
			return NULL;
		}
		pthread_mutex_lock(&b->lock);
		struct cached *found = lookup(b, build_id);
		struct cached *dropped = NULL;
		if (found && found->trust >= e->trust) {
			dropped = e;
			c->entry = found;
		} else {
			if (found) {
				/* cached before a trusted image came */
				forget(b, build_id);
				if (--found->refs == 0)
					dropped = found;
			}
			e->refs = 1;
			e->used = ++b->clock;
			keep(b, e);
			c->entry = e;
		}
		pthread_mutex_unlock(&b->lock);
		entry_free(dropped);
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

bool ep_binary_code_trusted(const struct ep_binary_code *c)
{
	return c->entry->trust == EP_IMAGE_TRUSTED;
}

struct ep_decoder *ep_binary_code_decoder(struct ep_binary_code *c)
{
	return c->decoder;
}

const struct ep_symbol *ep_binary_code_symbol_at(const struct ep_binary_code *c, uint64_t vaddr)
{
	return ep_elf_symtab_at(&c->entry->syms, vaddr);
}
