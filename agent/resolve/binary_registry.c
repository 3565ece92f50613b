/* SPDX-License-Identifier: Apache-2.0 */
/* The binaries' registry: the file behind a mapping (--binary files,
 * --symfs, the recorded path), each file read once (found by its identity),
 * and what the binaries held may take together. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/resolve/binary_internal.h"
#include "common/util/log.h"

struct ep_binary_registry *ep_binreg_new(void)
{
	if (elf_version(EV_CURRENT) == EV_NONE)
		return NULL;
	struct ep_binary_registry *reg = calloc(1, sizeof(struct ep_binary_registry));
	if (reg)
		ep_elf_limits_default(&reg->limits, "--binary-code-max-mib",
				      "--binary-symbols-max-mib");
	return reg;
}

void ep_binreg_set_held_max(struct ep_binary_registry *reg, uint64_t bytes)
{
	reg->held_max = bytes;
}

uint64_t ep_binreg_held_max(const struct ep_binary_registry *reg)
{
	return reg->held_max;
}

uint64_t ep_binreg_room(const struct ep_binary_registry *reg)
{
	if (!reg->held_max)
		return UINT64_MAX;
	return reg->held_bytes < reg->held_max ? reg->held_max - reg->held_bytes : 0;
}

void ep_binreg_set_limits(struct ep_binary_registry *reg, uint64_t code_bytes, uint64_t table_bytes)
{
	if (code_bytes)
		reg->limits.code_bytes = code_bytes;
	if (table_bytes)
		reg->limits.table_bytes = table_bytes;
}

void ep_binreg_free(struct ep_binary_registry *reg)
{
	if (!reg)
		return;
	for (size_t i = 0; i < reg->n; i++)
		ep_binary_free(reg->bins[i]);
	for (size_t i = 0; i < reg->nlookups; i++)
		free(reg->lookups[i].key);
	free(reg->lookups);
	ep_u64map_free(&reg->lookup_index);
	ep_u64map_free(&reg->by_identity);
	free(reg->bins);
	free(reg->explicit_files);
	free(reg->symfs);
	free(reg->users);
	free(reg->free_slots);
	free(reg);
}

void ep_binreg_set_symfs(struct ep_binary_registry *reg, const char *dir)
{
	free(reg->symfs);
	reg->symfs = strdup(dir);
}

size_t ep_binreg_count(const struct ep_binary_registry *reg)
{
	return reg->n;
}

struct ep_binary *ep_binreg_at(const struct ep_binary_registry *reg, size_t index)
{
	return index < reg->n ? reg->bins[index] : NULL;
}

struct ep_binary_registry *ep_binreg_clone(const struct ep_binary_registry *reg, char *err,
					   size_t errlen)
{
	struct ep_binary_registry *c = ep_binreg_new();
	if (!c || (reg->symfs && !(c->symfs = strdup(reg->symfs)))) {
		snprintf(err, errlen, "out of memory");
		ep_binreg_free(c);
		return NULL;
	}
	c->lazy_code = reg->lazy_code;
	c->limits = reg->limits;
	c->held_max = reg->held_max;
	for (size_t i = 0; i < reg->nexplicit; i++) {
		if (ep_binreg_add_file(c, reg->bins[reg->explicit_files[i]]->path, err, errlen) !=
		    0) {
			ep_binreg_free(c);
			return NULL;
		}
	}
	return c;
}

void ep_binreg_set_lazy_code(struct ep_binary_registry *reg, bool lazy)
{
	reg->lazy_code = lazy;
}

/* reg's limits for one binary, no more than what the binaries held leave
 * (room) if that is less */
static struct ep_elf_limits limits_within(const struct ep_binary_registry *reg, uint64_t room)
{
	struct ep_elf_limits lim = reg->limits;
	if (room < lim.code_bytes) {
		lim.code_bytes = room;
		lim.code_knob = HELD_KNOB;
	}
	if (room < lim.table_bytes) {
		lim.table_bytes = room;
		lim.table_knob = HELD_KNOB;
	}
	return lim;
}

static uint64_t identity_hash(dev_t dev, ino_t ino, off_t size, const struct timespec *mtime)
{
	uint64_t h = ep_hash_u64((uint64_t)dev ^ ep_hash_u64((uint64_t)ino));
	h = ep_hash_u64(h ^ (uint64_t)size);
	return ep_hash_u64(h ^ (uint64_t)mtime->tv_sec ^ ((uint64_t)mtime->tv_nsec << 34));
}

static bool same_identity(const struct ep_binary *b, const struct stat *st)
{
	return b->dev == st->st_dev && b->ino == st->st_ino && b->size == st->st_size &&
	       b->mtime.tv_sec == st->st_mtim.tv_sec && b->mtime.tv_nsec == st->st_mtim.tv_nsec;
}

static struct ep_binary *find_identity(const struct ep_binary_registry *reg, const struct stat *st)
{
	for (uint64_t h = identity_hash(st->st_dev, st->st_ino, st->st_size, &st->st_mtim);; h++) {
		const uint64_t *i = ep_u64map_get(&reg->by_identity, h);
		if (!i)
			return NULL;
		if (same_identity(reg->bins[*i], st))
			return reg->bins[*i];
	}
}

static void index_identity(struct ep_binary_registry *reg, const struct ep_binary *b)
{
	uint64_t h = identity_hash(b->dev, b->ino, b->size, &b->mtime);
	while (ep_u64map_get(&reg->by_identity, h))
		h++;
	uint64_t *slot = ep_u64map_upsert(&reg->by_identity, h, NULL);
	if (slot)
		*slot = b->index; /* else found by a new open: a copy, not a wrong file */
}

/* Keeps the colliding entries that were probed past b findable. */
void ep_binreg_unindex(struct ep_binary_registry *reg, const struct ep_binary *b)
{
	uint64_t h = identity_hash(b->dev, b->ino, b->size, &b->mtime);
	for (;; h++) {
		const uint64_t *i = ep_u64map_get(&reg->by_identity, h);
		if (!i)
			return; /* never indexed (out of memory then) */
		if (*i == b->index)
			break;
	}
	ep_u64map_remove(&reg->by_identity, h);
	for (uint64_t k = h + 1;; k++) {
		const uint64_t *i = ep_u64map_get(&reg->by_identity, k);
		if (!i)
			break;
		uint64_t index = *i;
		ep_u64map_remove(&reg->by_identity, k);
		index_identity(reg, reg->bins[index]);
	}
}

static struct ep_binary *find_loaded(struct ep_binary_registry *reg, const char *path)
{
	struct stat st;
	if (stat(path, &st) != 0)
		return NULL;
	return find_identity(reg, &st);
}

void ep_binreg_note_limited(struct ep_binary_registry *reg, const char *msg, bool refused)
{
	reg->stats.limited++;
	reg->stats.limited_refused += refused;
	snprintf(reg->stats.limited_last, sizeof(reg->stats.limited_last), "%s", msg);
	uint64_t h = ep_hash_bytes(msg, strlen(msg));
	for (size_t i = 0; i < LIMITED_SAID && i < reg->limits_said; i++) {
		if (reg->limits_said_hash[i] == h) {
			ep_debug("%s", msg);
			return;
		}
	}
	if (reg->limits_said < LIMITED_SAID) {
		reg->limits_said_hash[reg->limits_said++] = h;
		ep_warn("%s%s", msg,
			reg->limits_said == LIMITED_SAID ? " (further ones counted)" : "");
	} else {
		ep_debug("%s", msg);
	}
}

/* The binary of the file at path, named (in what is said of its limits)
 * as the process or recording names it. */
static struct ep_binary *open_registered(struct ep_binary_registry *reg, const char *path,
					 const char *name, char *err, size_t errlen)
{
	struct ep_binary *b = find_loaded(reg, path);
	if (b)
		return b;
	char limited[640];
	uint64_t room = ep_binreg_room(reg);
	if (room == 0) {
		/* the binaries held take all there is: evictions make room */
		snprintf(err, errlen,
			 "%s: not read: the binaries held take %.1f MiB, all the %llu MiB "
			 "--binaries-held-max-mib allows",
			 path, (double)reg->held_bytes / (1 << 20),
			 (unsigned long long)(reg->held_max >> 20));
		if (snprintf(limited, sizeof(limited), "%s%s", strcmp(name, path) ? name : "",
			     err + (strcmp(name, path) ? strlen(path) : 0)) < 0)
			limited[0] = '\0';
		ep_binreg_note_limited(reg, limited, true);
		return NULL;
	}
	struct ep_elf_limits lim = limits_within(reg, room);
	b = ep_binary_open(path, name, &lim, reg->lazy_code, room, limited, sizeof(limited), err,
			   errlen);
	if (limited[0])
		ep_binreg_note_limited(reg, limited, !b);
	if (!b)
		return NULL;
	b->reg = reg;
	reg->held_bytes += ep_binary_bytes(b);
	if (reg->nfree) {
		/* an evicted binary's index: every user forgot it */
		b->index = reg->free_slots[--reg->nfree];
	} else {
		if (reg->n == reg->cap) {
			size_t cap = reg->cap ? reg->cap * 2 : 16;
			struct ep_binary **bins = realloc(reg->bins, cap * sizeof(*bins));
			if (!bins) {
				ep_binary_free(b);
				snprintf(err, errlen, "%s: out of memory", path);
				return NULL;
			}
			reg->bins = bins;
			reg->cap = cap;
		}
		b->index = (uint32_t)reg->n++;
	}
	reg->bins[b->index] = b;
	b->last_used = reg->epoch;
	index_identity(reg, b);
	reg->stats.opened++;
	if (b->build_id_len) {
		uint64_t h = ep_hash_bytes(b->build_id, b->build_id_len) | 1;
		uint64_t *seen = &reg->evicted_ids[h % EVICTED_IDS];
		if (*seen == h) {
			reg->stats.reread++;
			*seen = 0;
		}
	}
	return b;
}

int ep_binreg_add_file(struct ep_binary_registry *reg, const char *path, char *err, size_t errlen)
{
	struct ep_binary *b = open_registered(reg, path, path, err, errlen);
	if (!b)
		return -1;
	for (size_t i = 0; i < reg->nexplicit; i++)
		if (reg->explicit_files[i] == b->index)
			return 0;
	uint32_t *e = realloc(reg->explicit_files, (reg->nexplicit + 1) * sizeof(*e));
	if (!e) {
		snprintf(err, errlen, "%s: out of memory", path);
		return -1;
	}
	b->pinned = true;
	reg->explicit_files = e;
	reg->explicit_files[reg->nexplicit++] = b->index;
	return 0;
}

/* perf pads build-ids to 20 bytes with zeros; an id equal to another
 * followed only by zero bytes names the same file. */
static bool build_ids_equal(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
	size_t n = alen < blen ? alen : blen;
	if (n == 0 || memcmp(a, b, n) != 0)
		return false;
	const uint8_t *rest = alen > blen ? a : b;
	for (size_t i = n; i < (alen > blen ? alen : blen); i++)
		if (rest[i] != 0)
			return false;
	return true;
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

static bool is_pseudo_path(const char *path)
{
	return path[0] == '[' || strncmp(path, "//anon", 6) == 0 ||
	       strncmp(path, "/memfd:", 7) == 0 || strncmp(path, "anon_inode:", 11) == 0 ||
	       path[0] == '\0';
}

void ep_binreg_proc_failures(const struct ep_binary_registry *reg,
			     struct ep_binreg_proc_failures *out)
{
	*out = reg->proc_failures;
}

/* A live process's file that would not open: counted, the caller logs a
 * summary. Its process had exited when /proc/PID/exe is gone too. */
static void note_proc_failure(struct ep_binary_registry *reg, const char *open_path,
			      const char *err)
{
	struct ep_binreg_proc_failures *f = &reg->proc_failures;
	unsigned pid;
	char exe[64], target[8];
	f->failed++;
	if (sscanf(open_path, "/proc/%u/", &pid) == 1) {
		snprintf(exe, sizeof(exe), "/proc/%u/exe", pid);
		if (readlink(exe, target, sizeof(target)) < 0 && errno == ENOENT)
			f->gone++;
	}
	snprintf(f->last, sizeof(f->last), "%s", err);
}

static struct ep_binary *search(struct ep_binary_registry *reg, const char *recorded,
				const char *open_path, const uint8_t *id, size_t idlen)
{
	char err[512];
	if (idlen > 0) {
		for (size_t i = 0; i < reg->nexplicit; i++) {
			struct ep_binary *b = reg->bins[reg->explicit_files[i]];
			if (build_ids_equal(b->build_id, b->build_id_len, id, idlen))
				return b;
		}
	}
	for (size_t i = 0; i < reg->nexplicit; i++) {
		struct ep_binary *b = reg->bins[reg->explicit_files[i]];
		if (strcmp(b->path, recorded) == 0 ||
		    strcmp(base_name(b->path), base_name(recorded)) == 0)
			return b;
	}
	if (is_pseudo_path(recorded))
		return NULL;
	if (reg->symfs) {
		char path[PATH_MAX];
		if (snprintf(path, sizeof(path), "%s/%s", reg->symfs, recorded) <
		    (int)sizeof(path)) {
			if (access(path, R_OK) == 0) {
				struct ep_binary *b =
				    open_registered(reg, path, recorded, err, sizeof(err));
				if (b)
					return b;
				ep_warn("%s", err);
			}
		}
	}
	if (access(open_path, R_OK) == 0) {
		struct ep_binary *b = open_registered(reg, open_path, recorded, err, sizeof(err));
		if (b)
			return b;
		if (strncmp(open_path, "/proc/", 6) == 0)
			note_proc_failure(reg, open_path, err);
		else
			ep_warn("%s", err);
	}
	return NULL;
}

struct ep_binary *ep_binreg_known(struct ep_binary_registry *reg, const char *recorded_path,
				  const struct stat *st)
{
	/* --binary and --symfs files come first in a lookup: the slow path
	 * decides between them */
	if (reg->nexplicit || reg->symfs)
		return NULL;
	struct ep_binary *b = find_identity(reg, st);
	if (b)
		b->last_used = reg->epoch;
	if (b && !b->recorded_path && !is_pseudo_path(recorded_path))
		b->recorded_path = strdup(recorded_path);
	return b;
}

struct ep_binary *ep_binreg_lookup(struct ep_binary_registry *reg, const char *recorded_path,
				   const uint8_t *build_id, size_t build_id_len)
{
	return ep_binreg_lookup_at(reg, recorded_path, recorded_path, build_id, build_id_len);
}

struct ep_binary *ep_binreg_lookup_at(struct ep_binary_registry *reg, const char *recorded_path,
				      const char *open_path, const uint8_t *build_id,
				      size_t build_id_len)
{
	if (!build_id)
		build_id_len = 0;
	if (build_id_len > BUILD_ID_MAX)
		build_id_len = BUILD_ID_MAX;
	char hex[2 * BUILD_ID_MAX + 1];
	ep_build_id_to_hex(build_id, build_id_len, hex);
	/* The live agent's /proc/PID/... names are new for every process: a
	 * cache by name would grow with every process the machine ever ran.
	 * Files are found by identity instead (open_registered). */
	if (strncmp(open_path, "/proc/", 6) == 0 && strcmp(recorded_path, open_path) != 0) {
		struct ep_binary *b = search(reg, recorded_path, open_path, build_id, build_id_len);
		if (b)
			b->last_used = reg->epoch;
		if (b && !b->recorded_path && !is_pseudo_path(recorded_path))
			b->recorded_path = strdup(recorded_path);
		if (!b && !is_pseudo_path(recorded_path))
			ep_debug("no file for %s (%s)", recorded_path, open_path);
		return b;
	}
	/* the key is what names the file: where it is opened, and its build-id */
	size_t plen = strlen(open_path), hlen = strlen(hex);
	char *key = malloc(plen + hlen + 2);
	if (!key)
		return NULL;
	memcpy(key, open_path, plen + 1);
	memcpy(key + plen + 1, hex, hlen + 1);
	size_t klen = plen + hlen + 1;

	uint64_t h = ep_hash_bytes(key, klen);
	/* linear probing on the hash itself keeps colliding keys apart */
	for (;;) {
		uint64_t *slot = ep_u64map_get(&reg->lookup_index, h);
		if (!slot)
			break;
		struct lookup_entry *e = &reg->lookups[*slot];
		if (memcmp(e->key, key, klen) == 0) {
			free(key);
			if (e->stale) {
				e->bin =
				    search(reg, recorded_path, open_path, build_id, build_id_len);
				e->stale = false;
			}
			if (e->bin)
				e->bin->last_used = reg->epoch;
			return e->bin;
		}
		h++;
	}

	struct ep_binary *b = search(reg, recorded_path, open_path, build_id, build_id_len);
	if (b) {
		b->last_used = reg->epoch;
		if (!b->recorded_path && !is_pseudo_path(recorded_path))
			b->recorded_path = strdup(recorded_path);
		if (build_id_len > 0 && b->build_id_len > 0 &&
		    !build_ids_equal(b->build_id, b->build_id_len, build_id, build_id_len) &&
		    !b->mismatch_warned) {
			b->mismatch_warned = true;
			ep_warn("build-id of %s is %s, the recording expects %s for %s: its "
				"addresses may not match",
				b->path, b->build_id_hex, hex, recorded_path);
		}
	} else if (!is_pseudo_path(recorded_path)) {
		ep_warn("no file for %s%s%s: its code is counted as unresolved (pass --binary "
			"or --symfs)",
			recorded_path, hlen ? " build-id " : "", hex);
	}

	if (reg->nlookups == reg->lookups_cap) {
		size_t cap = reg->lookups_cap ? reg->lookups_cap * 2 : 32;
		struct lookup_entry *l = realloc(reg->lookups, cap * sizeof(*l));
		if (!l) {
			free(key);
			return b;
		}
		reg->lookups = l;
		reg->lookups_cap = cap;
	}
	uint64_t *slot = ep_u64map_upsert(&reg->lookup_index, h, NULL);
	if (!slot) {
		free(key);
		return b;
	}
	*slot = reg->nlookups;
	reg->lookups[reg->nlookups++] = (struct lookup_entry){.key = key, .bin = b};
	return b;
}

void ep_binreg_stats(const struct ep_binary_registry *reg, struct ep_binreg_stats *out)
{
	*out = reg->stats;
	out->held = 0;
	out->bytes_held = 0;
	for (size_t i = 0; i < reg->n; i++) {
		if (reg->bins[i]) {
			out->held++;
			out->bytes_held += ep_binary_bytes(reg->bins[i]);
		}
	}
}
