/* SPDX-License-Identifier: Apache-2.0 */
/*
 * perf.data reader. The layout (tools/perf/Documentation/perf.data-file-format.txt):
 * a header, the attrs section (perf_event_attr + the ids section of each), the
 * data section (the records), and after the data the feature sections,
 * indexed by a table of perf_file_section for each bit set in the header's
 * feature bitmap. We read the attrs and the features we need (build-ids,
 * cpuid) first, then stream the records through a sliding window.
 */
#include "agent/source/perf_data/perf_data.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/source/perf_data/perf_data_format.h"
#include "common/util/regular_file.h"
#include "common/util/u64map.h"

/* mapped pages are given back in steps this large (one madvise each) */
#define DROP_STEP (4u << 20)
#define MAX_ATTRS 256
/* what an event id costs: itself, and its entry in attr_by_id */
#define ID_COST 32
/* what a caller keeps per build-id entry beyond its bytes (the pipeline's
 * copy of the name, its id, its index entry) */
#define BUILD_ID_COST 64

static uint64_t tables_max = (uint64_t)EP_PERF_DATA_DEFAULT_TABLES_MIB << 20;

void ep_perf_data_set_tables_max(uint64_t bytes)
{
	if (bytes)
		tables_max = bytes;
}

struct attr_info {
	struct ep_perf_event_desc desc;
	uint64_t *ids;
	size_t nids;
};

struct reader {
	const char *path;
	int fd;
	uint64_t file_size;
	char *err;
	size_t errlen;
	struct ep_perf_file_header h;
	struct attr_info attrs[MAX_ATTRS];
	size_t nattrs;
	int id_pos;		     /* u64 index of PERF_SAMPLE_ID in a sample, -1 when absent */
	struct ep_u64map attr_by_id; /* sample id -> attrs index */
	char cpuid[128];
	/* The whole file, mapped read-only: records are parsed where they lie,
	 * and time ordering holds only (time, offset) keys, never copies. */
	const uint8_t *map;
	uint64_t dropped_to; /* pages below this were given back (MADV_DONTNEED) */
	uint64_t read_off;   /* the record being read */
	uint64_t hold_max_bytes;
	uint64_t tables_left; /* of tables_max: ids read, build-ids delivered */
	/* this reader's samples: every parts-th from the part-th */
	unsigned part, parts;
	uint64_t sample_no;
	struct ep_sample_record rec;
};

static int fail(struct reader *r, uint64_t offset, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct reader *r, uint64_t offset, const char *fmt, ...)
{
	int n = snprintf(r->err, r->errlen, "%s: byte %llu: ", r->path, (unsigned long long)offset);
	if (n < 0 || (size_t)n >= r->errlen)
		return -1;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->err + n, r->errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

static int read_at(struct reader *r, uint64_t offset, void *buf, size_t len)
{
	return ep_pread_full(r->fd, buf, len, offset) == len ? 0 : -1;
}

/* [offset, offset + len) of the file; NULL past EOF. */
static inline const uint8_t *window(struct reader *r, uint64_t offset, size_t len)
{
	if (offset > r->file_size || len > r->file_size - offset)
		return NULL;
	return r->map + offset;
}

/* Gives back the mapped pages in [from, to), both rounded down to pages. */
static void drop_range(struct reader *r, uint64_t from, uint64_t to)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	from = from / page * page;
	to = to / page * page;
	if (to > from)
		madvise((void *)(uintptr_t)(r->map + from), (size_t)(to - from), MADV_DONTNEED);
}

/* Gives back the mapped pages below offset: a file read once would
 * otherwise stay resident as it is mapped, and RSS grow with its size. */
static inline void drop_below(struct reader *r, uint64_t offset)
{
	if (offset < r->dropped_to + DROP_STEP)
		return;
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	uint64_t to = offset / page * page;
	madvise((void *)(uintptr_t)(r->map + r->dropped_to), (size_t)(to - r->dropped_to),
		MADV_DONTNEED);
	r->dropped_to = to;
}

static const char *hw_event_name(uint64_t config)
{
	static const char *const names[] = {"cycles",
					    "instructions",
					    "cache-references",
					    "cache-misses",
					    "branches",
					    "branch-misses",
					    "bus-cycles",
					    "stalled-cycles-frontend",
					    "stalled-cycles-backend",
					    "ref-cycles"};
	return config < sizeof(names) / sizeof(names[0]) ? names[config] : NULL;
}

/* Events that count every completed branch, taken or not: the sample IP
 * then follows the branch that overflowed the counter (SPEC step 3). Raw
 * event codes are per vendor; the vendor comes from the recording's cpuid
 * feature (GenuineIntel, AuthenticAMD, or an Arm MIDR). */
static bool counts_all_branches(const struct reader *r, uint32_t type, uint64_t config)
{
	if (type == PERF_TYPE_HARDWARE)
		return config == PERF_COUNT_HW_BRANCH_INSTRUCTIONS;
	if (type != PERF_TYPE_RAW)
		return false;
	if (strncmp(r->cpuid, "GenuineIntel", 12) == 0)
		return (config & 0xffff) == 0x00c4; /* BR_INST_RETIRED.ALL_BRANCHES */
	if (strncmp(r->cpuid, "AuthenticAMD", 12) == 0)
		return (config & 0xff) == 0xc2; /* retired branch instructions */
	if (r->cpuid[0] == '0' && r->cpuid[1] == 'x')
		return config == 0x21; /* Arm BR_RETIRED */
	return false;
}

static int read_attrs(struct reader *r)
{
	const struct ep_perf_file_header *h = &r->h;
	if (h->attr_size < 16 + 64 || h->attrs.size % h->attr_size != 0)
		return fail(r, 16, "attribute size %llu does not divide the attrs section (%llu)",
			    (unsigned long long)h->attr_size, (unsigned long long)h->attrs.size);
	size_t n = h->attrs.size / h->attr_size;
	if (n == 0 || n > MAX_ATTRS)
		return fail(r, h->attrs.offset, "%zu event attributes (1 to %d supported)", n,
			    MAX_ATTRS);
	uint8_t buf[512];
	if (h->attr_size > sizeof(buf))
		return fail(r, 16, "attribute size %llu too large",
			    (unsigned long long)h->attr_size);
	for (size_t i = 0; i < n; i++) {
		uint64_t off = h->attrs.offset + i * h->attr_size;
		if (read_at(r, off, buf, h->attr_size) != 0)
			return fail(r, off, "event attribute %zu cut off by the end of the file",
				    i);
		struct perf_event_attr attr;
		memset(&attr, 0, sizeof(attr));
		size_t attr_len = h->attr_size - 16;
		memcpy(&attr, buf, attr_len < sizeof(attr) ? attr_len : sizeof(attr));
		struct ep_perf_file_section ids;
		memcpy(&ids, buf + attr_len, sizeof(ids));
		struct attr_info *a = &r->attrs[i];
		struct ep_perf_event_desc *d = &a->desc;
		d->type = attr.type;
		d->config = attr.config;
		d->sample_type = attr.sample_type;
		d->branch_sample_type = attr_len >= 80 ? attr.branch_sample_type : 0;
		d->read_format = attr.read_format;
		d->sample_period = attr.sample_period;
		d->freq = attr.freq;
		d->sample_id_all = attr.sample_id_all;
		d->exclude_kernel = attr.exclude_kernel;
		d->exclude_user = attr.exclude_user;
		d->branch_hw_index = (d->branch_sample_type & PERF_SAMPLE_BRANCH_HW_INDEX) != 0;
		const char *hw =
		    attr.type == PERF_TYPE_HARDWARE ? hw_event_name(attr.config) : NULL;
		if (hw)
			snprintf(d->name, sizeof(d->name), "%s", hw);
		else
			snprintf(d->name, sizeof(d->name), "%s 0x%llx",
				 attr.type == PERF_TYPE_RAW ? "raw" : "event",
				 (unsigned long long)attr.config);
		if (ids.size % 8 != 0 || ids.size > (1u << 20))
			return fail(r, off, "event attribute %zu has a bad ids section", i);
		/* 256 attributes of 128 Ki ids each would index 32 M ids */
		if (ids.size / 8 > r->tables_left / ID_COST)
			return fail(r, off,
				    "event attribute %zu has %llu ids: past the %llu MiB "
				    "--perf-data-tables-max-mib allows the recording's tables",
				    i, (unsigned long long)(ids.size / 8),
				    (unsigned long long)(tables_max >> 20));
		r->tables_left -= ids.size / 8 * ID_COST;
		a->nids = ids.size / 8;
		if (a->nids) {
			a->ids = malloc(ids.size);
			if (!a->ids)
				return fail(r, off, "out of memory");
			r->nattrs = i + 1; /* counted now, so an error below frees it */
			if (read_at(r, ids.offset, a->ids, ids.size) != 0)
				return fail(r, ids.offset,
					    "event ids cut off by the end of the file");
		}
		for (size_t j = 0; j < a->nids; j++) {
			uint64_t *slot = ep_u64map_upsert(&r->attr_by_id, a->ids[j], NULL);
			if (!slot)
				return fail(r, off, "out of memory");
			*slot = i;
		}
		r->nattrs = i + 1;
	}
	/* perf keeps the id at the same place in every attr's samples */
	uint64_t st = r->attrs[0].desc.sample_type;
	r->id_pos = -1;
	if (st & PERF_SAMPLE_IDENTIFIER)
		r->id_pos = 0;
	else if (st & PERF_SAMPLE_ID)
		r->id_pos = !!(st & PERF_SAMPLE_IP) + !!(st & PERF_SAMPLE_TID) +
			    !!(st & PERF_SAMPLE_TIME) + !!(st & PERF_SAMPLE_ADDR);
	return 0;
}

static bool feature_set(const struct reader *r, int bit)
{
	return (r->h.features[bit / 64] >> (bit % 64)) & 1;
}

/* Where the feature section for bit is described, or -1 when absent. */
static int feature_section(struct reader *r, int bit, struct ep_perf_file_section *out)
{
	if (!feature_set(r, bit))
		return 1;
	int index = 0;
	for (int b = 0; b < bit; b++)
		index += feature_set(r, b);
	uint64_t off = r->h.data.offset + r->h.data.size + (uint64_t)index * sizeof(*out);
	/* no sum of the file's words: offset + size can wrap to a small number */
	if (read_at(r, off, out, sizeof(*out)) != 0 || out->offset > r->file_size ||
	    out->size > r->file_size - out->offset)
		return fail(r, off, "feature section table cut off by the end of the file");
	return 0;
}

static int read_cpuid(struct reader *r)
{
	struct ep_perf_file_section s;
	int rc = feature_section(r, EP_PERF_FEAT_CPUID, &s);
	if (rc != 0)
		return rc < 0 ? -1 : 0;
	uint32_t len;
	if (s.size < 4 || read_at(r, s.offset, &len, 4) != 0)
		return 0;
	if (len >= sizeof(r->cpuid))
		len = sizeof(r->cpuid) - 1;
	if (len > s.size - 4)
		len = (uint32_t)(s.size - 4);
	if (read_at(r, s.offset + 4, r->cpuid, len) != 0)
		return 0;
	r->cpuid[len] = '\0';
	return 0;
}

static int read_build_ids(struct reader *r, const struct ep_perf_data_callbacks *cb,
			  struct ep_perf_data_stats *stats)
{
	struct ep_perf_file_section s;
	int rc = feature_section(r, EP_PERF_FEAT_BUILD_ID, &s);
	if (rc != 0)
		return rc < 0 ? -1 : 0;
	/* an entry and the NUL put after its file name, which perf pads but
	 * a damaged file need not: an entry filling buf exactly once wrote
	 * that NUL one byte past it */
	uint8_t buf[8 + 4 + 24 + 4096 + 8 + 1];
	for (uint64_t off = s.offset; off + 8 <= s.offset + s.size;) {
		struct perf_event_header eh;
		if (read_at(r, off, &eh, sizeof(eh)) != 0)
			return fail(r, off, "build-id entry cut off");
		if (eh.size < 8 + 4 + 24 || off + eh.size > s.offset + s.size ||
		    eh.size > sizeof(buf) - 1)
			return fail(r, off, "build-id entry of bad size %u", eh.size);
		stats->build_ids++;
		/* what the callback keeps of each (the pipeline: every name, and
		 * duplicates too) is bounded by what is delivered */
		if ((uint64_t)eh.size + BUILD_ID_COST > r->tables_left) {
			r->tables_left = 0;
			stats->build_ids_dropped++;
			off += eh.size;
			continue;
		}
		r->tables_left -= (uint64_t)eh.size + BUILD_ID_COST;
		if (read_at(r, off, buf, eh.size) != 0)
			return fail(r, off, "build-id entry cut off");
		buf[eh.size] = '\0';
		struct ep_perf_build_id bid = {0};
		memcpy(&bid.pid, buf + 8, 4);
		uint8_t len = EP_BUILD_ID_MAX;
		if (eh.misc & EP_PERF_MISC_BUILD_ID_SIZE) {
			len = buf[12 + 20];
			if (len > EP_BUILD_ID_MAX)
				len = EP_BUILD_ID_MAX;
		} else {
			/* Without the size flag perf pads every id to 20 bytes with
			 * zeros. Ids shorter than 20 bytes (xxHash: 8) are only
			 * recognisable by trimming the padding; a real SHA-1 id ending
			 * in zero bytes is still matched, since build-ids compare
			 * equal up to trailing zeros. */
			while (len > 0 && buf[12 + len - 1] == 0)
				len--;
		}
		memcpy(bid.build_id, buf + 12, len);
		bid.build_id_len = len;
		uint16_t cpumode = eh.misc & PERF_RECORD_MISC_CPUMODE_MASK;
		bid.kernel =
		    cpumode == PERF_RECORD_MISC_KERNEL || cpumode == PERF_RECORD_MISC_GUEST_KERNEL;
		bid.filename = (const char *)buf + 12 + 24;
		if (cb->on_build_id) {
			int crc = cb->on_build_id(cb->ctx, &bid);
			if (crc)
				return crc;
		}
		off += eh.size;
	}
	return 0;
}

static struct attr_info *attr_for(struct reader *r, const uint64_t *u, size_t nu)
{
	if (r->nattrs == 1 || r->id_pos < 0 || (size_t)r->id_pos >= nu)
		return &r->attrs[0];
	const uint64_t *index = ep_u64map_get(&r->attr_by_id, u[r->id_pos]);
	return index ? &r->attrs[*index] : &r->attrs[0];
}

/* A sample's u64 words, read field by field in sample_type's order. */
struct sample_cursor {
	struct reader *r;
	uint64_t off;
	const struct perf_event_header *eh;
	uint64_t sample_type;
	const uint64_t *u;
	size_t nu, i;
};

static int __attribute__((noinline, cold)) sample_too_short(const struct sample_cursor *c)
{
	return fail(c->r, c->off, "sample of %u bytes too short for its sample_type 0x%llx",
		    c->eh->size, (unsigned long long)c->sample_type);
}

/* Returns from the calling step when the sample holds fewer than n more words. */
#define NEED(c, n)                                                                                 \
	do {                                                                                       \
		if ((c)->i + (n) > (c)->nu)                                                        \
			return sample_too_short(c);                                                \
	} while (0)

/* The fixed-size fields before PERF_SAMPLE_READ: the ones a record keeps,
 * and the ids it does not. */
static inline int read_fixed_fields(struct sample_cursor *c, struct ep_sample_record *rec)
{
	uint64_t st = c->sample_type;
	const uint64_t *u = c->u;
	if (st & PERF_SAMPLE_IDENTIFIER) {
		NEED(c, 1);
		c->i++;
	}
	if (st & PERF_SAMPLE_IP) {
		NEED(c, 1);
		rec->ip = u[c->i++];
	}
	if (st & PERF_SAMPLE_TID) {
		NEED(c, 1);
		rec->pid = (uint32_t)u[c->i];
		rec->tid = (uint32_t)(u[c->i] >> 32);
		c->i++;
	}
	if (st & PERF_SAMPLE_TIME) {
		NEED(c, 1);
		rec->time_ns = u[c->i++];
	}
	if (st & PERF_SAMPLE_ADDR) {
		NEED(c, 1);
		c->i++;
	}
	if (st & PERF_SAMPLE_ID) {
		NEED(c, 1);
		c->i++;
	}
	if (st & PERF_SAMPLE_STREAM_ID) {
		NEED(c, 1);
		c->i++;
	}
	if (st & PERF_SAMPLE_CPU) {
		NEED(c, 1);
		rec->cpu = (uint32_t)u[c->i++];
	}
	if (st & PERF_SAMPLE_PERIOD) {
		NEED(c, 1);
		rec->period = u[c->i++];
	}
	return 0;
}

/* PERF_SAMPLE_READ: counter values, skipped. */
static inline int skip_read_values(struct sample_cursor *c, uint64_t read_format)
{
	uint64_t rf = read_format;
	size_t per_value = 1 + !!(rf & PERF_FORMAT_ID) + !!(rf & PERF_FORMAT_LOST);
	size_t times =
	    !!(rf & PERF_FORMAT_TOTAL_TIME_ENABLED) + !!(rf & PERF_FORMAT_TOTAL_TIME_RUNNING);
	if (rf & PERF_FORMAT_GROUP) {
		NEED(c, 1);
		uint64_t nr = c->u[c->i++];
		if (nr > 4096)
			return fail(c->r, c->off, "sample read group of %llu values",
				    (unsigned long long)nr);
		NEED(c, times + nr * per_value);
		c->i += times + nr * per_value;
	} else {
		NEED(c, per_value + times);
		c->i += per_value + times;
	}
	return 0;
}

/* PERF_SAMPLE_CALLCHAIN: skipped. */
static inline int skip_callchain(struct sample_cursor *c)
{
	NEED(c, 1);
	uint64_t nr = c->u[c->i++];
	if (nr > c->nu)
		return fail(c->r, c->off, "callchain of %llu entries in a %u-byte sample",
			    (unsigned long long)nr, c->eh->size);
	NEED(c, nr);
	c->i += nr;
	return 0;
}

/* PERF_SAMPLE_RAW: skipped. */
static inline int skip_raw(struct sample_cursor *c)
{
	NEED(c, 1);
	uint32_t size;
	memcpy(&size, &c->u[c->i], 4);
	/* u32 size + data, padded to 8 bytes */
	size_t words = (4 + (size_t)size + 7) / 8;
	NEED(c, words);
	c->i += words;
	return 0;
}

static inline int read_branch_stack(struct sample_cursor *c, bool has_hw_index, bool copy,
				    struct ep_sample_record *rec, struct ep_perf_data_stats *stats)
{
	NEED(c, 1);
	uint64_t nr = c->u[c->i++];
	if (has_hw_index) {
		NEED(c, 1);
		rec->hw_index = c->u[c->i++];
		rec->flags |= EP_SAMPLE_HAS_HW_INDEX;
	}
	if (nr > c->nu)
		return fail(c->r, c->off, "branch stack of %llu entries in a %u-byte sample",
			    (unsigned long long)nr, c->eh->size);
	NEED(c, nr * 3);
	rec->flags |= EP_SAMPLE_HAS_BRANCHES;
	uint64_t keep = nr;
	if (keep > EP_MAX_BRANCH_ENTRIES) {
		keep = EP_MAX_BRANCH_ENTRIES; /* the newest ones come first */
		stats->samples_truncated_stack++;
	}
	if (copy)
		memcpy(rec->entries, &c->u[c->i], keep * sizeof(struct ep_branch_entry));
	rec->nr_entries = (uint32_t)keep;
	c->i += nr * 3;
	stats->samples_with_branches++;
	return 0;
}
#undef NEED

static int parse_sample(struct reader *r, uint64_t off, const struct perf_event_header *eh,
			const uint8_t *p, const struct ep_perf_data_callbacks *cb,
			struct ep_perf_data_stats *stats)
{
	size_t nu = (eh->size - sizeof(*eh)) / 8;
	const uint64_t *u = (const uint64_t *)(const void *)(p + sizeof(*eh));
	struct attr_info *a = attr_for(r, u, nu);
	uint64_t st = a->desc.sample_type;
	struct sample_cursor c = {
	    .r = r, .off = off, .eh = eh, .sample_type = st, .u = u, .nu = nu, .i = 0};
	struct ep_sample_record *rec = &r->rec;
	bool mine = r->parts <= 1 || r->sample_no++ % r->parts == r->part;
	rec->flags = 0;
	rec->ip = rec->time_ns = rec->period = rec->hw_index = rec->cgroup_id = 0;
	rec->pid = rec->tid = rec->cpu = 0;
	rec->nr_entries = 0;
	rec->branch_error = 0;
	int rc = read_fixed_fields(&c, rec);
	if (rc == 0 && (st & PERF_SAMPLE_READ))
		rc = skip_read_values(&c, a->desc.read_format);
	if (rc == 0 && (st & PERF_SAMPLE_CALLCHAIN))
		rc = skip_callchain(&c);
	if (rc == 0 && (st & PERF_SAMPLE_RAW))
		rc = skip_raw(&c);
	if (rc == 0 && (st & PERF_SAMPLE_BRANCH_STACK))
		rc = read_branch_stack(&c, a->desc.branch_hw_index, mine, rec, stats);
	if (rc != 0)
		return rc;
	uint16_t cpumode = eh->misc & PERF_RECORD_MISC_CPUMODE_MASK;
	if (cpumode == PERF_RECORD_MISC_KERNEL || cpumode == PERF_RECORD_MISC_GUEST_KERNEL)
		rec->flags |= EP_SAMPLE_IP_KERNEL;
	if (a->desc.counts_all_branches)
		rec->flags |= EP_SAMPLE_TRIGGER_IS_BRANCH;
	stats->samples++;
	if (!mine)
		return cb->on_other_sample ? cb->on_other_sample(cb->ctx, rec) : 0;
	return cb->on_sample ? cb->on_sample(cb->ctx, rec) : 0;
}

/* NUL-terminated string at p within [p, end), or NULL. */
static const char *string_in(const uint8_t *p, const uint8_t *end)
{
	const uint8_t *nul = memchr(p, '\0', (size_t)(end - p));
	return nul ? (const char *)p : NULL;
}

static int parse_record(struct reader *r, uint64_t off, const uint8_t *p,
			const struct ep_perf_data_callbacks *cb, struct ep_perf_data_stats *stats)
{
	struct perf_event_header eh;
	memcpy(&eh, p, sizeof(eh));
	const uint8_t *end = p + eh.size;
	const uint8_t *body = p + sizeof(eh);
	uint32_t w[4];
	uint64_t q[4];
	uint16_t cpumode = eh.misc & PERF_RECORD_MISC_CPUMODE_MASK;
	bool kernel =
	    cpumode == PERF_RECORD_MISC_KERNEL || cpumode == PERF_RECORD_MISC_GUEST_KERNEL;
	switch (eh.type) {
	case PERF_RECORD_SAMPLE:
		return parse_sample(r, off, &eh, p, cb, stats);
	case PERF_RECORD_MMAP:
	case PERF_RECORD_MMAP2: {
		bool two = eh.type == PERF_RECORD_MMAP2;
		size_t fixed = 8 + 24 + (two ? 24 + 8 : 0);
		if (eh.size < sizeof(eh) + fixed + 1)
			return fail(r, off, "mmap record of %u bytes too short", eh.size);
		struct ep_mmap_event ev = {0};
		memcpy(w, body, 8);
		memcpy(q, body + 8, 24);
		ev.pid = w[0];
		ev.tid = w[1];
		ev.start = q[0];
		ev.len = q[1];
		ev.pgoff = q[2];
		ev.is_mmap2 = two;
		ev.kernel = kernel;
		if (two) {
			const uint8_t *x = body + 32;
			if (eh.misc & PERF_RECORD_MISC_MMAP_BUILD_ID) {
				ev.build_id_len = x[0] > EP_BUILD_ID_MAX ? EP_BUILD_ID_MAX : x[0];
				memcpy(ev.build_id, x + 4, ev.build_id_len);
			} else {
				memcpy(&ev.maj, x, 4);
				memcpy(&ev.min, x + 4, 4);
				memcpy(&ev.ino, x + 8, 8);
			}
			memcpy(&ev.prot, x + 24, 4);
			memcpy(&ev.flags, x + 28, 4);
			ev.executable = (ev.prot & PROT_EXEC) != 0;
		} else {
			ev.executable = !(eh.misc & PERF_RECORD_MISC_MMAP_DATA);
		}
		ev.filename = string_in(body + fixed, end);
		if (!ev.filename)
			return fail(r, off, "mmap record without a file name");
		stats->mmaps++;
		return cb->on_mmap ? cb->on_mmap(cb->ctx, &ev) : 0;
	}
	case PERF_RECORD_COMM: {
		if (eh.size < sizeof(eh) + 9)
			return fail(r, off, "comm record of %u bytes too short", eh.size);
		memcpy(w, body, 8);
		const char *comm = string_in(body + 8, end);
		if (!comm)
			return fail(r, off, "comm record without a name");
		stats->comms++;
		return cb->on_comm ? cb->on_comm(cb->ctx, w[0], w[1], comm,
						 (eh.misc & PERF_RECORD_MISC_COMM_EXEC) != 0)
				   : 0;
	}
	case PERF_RECORD_FORK:
	case PERF_RECORD_EXIT:
		if (eh.size < sizeof(eh) + 16)
			return fail(r, off, "fork/exit record of %u bytes too short", eh.size);
		memcpy(w, body, 16);
		if (eh.type == PERF_RECORD_FORK) {
			stats->forks++;
			return cb->on_fork ? cb->on_fork(cb->ctx, w[0], w[1], w[2], w[3]) : 0;
		}
		stats->exits++;
		return cb->on_exit ? cb->on_exit(cb->ctx, w[0], w[1], w[2], w[3]) : 0;
	case PERF_RECORD_LOST:
		if (eh.size < sizeof(eh) + 16)
			return fail(r, off, "lost record of %u bytes too short", eh.size);
		memcpy(q, body, 16);
		stats->lost_records += q[1];
		return 0;
	default:
		stats->other_records++;
		return 0;
	}
}

/* ---- time order ----
 * perf writes each CPU's buffer in turn, so a process's MMAP can follow its
 * first samples in the file. Like perf, records are put back in time order:
 * they are held until a FINISHED_ROUND marker, then every held record older
 * than the previous marker's newest time is delivered, sorted by (time, file
 * position). Everything left is delivered, sorted, at the end. A record is
 * held as its (time, offset) key only: its bytes stay in the mapped file,
 * and the pages behind the reader are given back even while records on them
 * are held (delivering one faults its page in again from the page cache).
 * Without round markers everything would be held: past hold_max_bytes of
 * held records (or HOLD_MAX_KEYS of them) what is held is ordered and
 * delivered, as before records were held as keys, so profiles stay the same. */

struct held {
	uint64_t time;
	uint64_t offset; /* in the file: where to parse it, and the tie-break */
};

struct hold {
	struct held *recs, *tmp; /* tmp: the merge sort's other half */
	size_t n, cap;
	uint64_t bytes;	      /* of the records held */
	uint64_t max_time;    /* newest time held so far */
	uint64_t flush_limit; /* newest time when the last round ended */
};

/* The default bound on the bytes of records held (what they were when held
 * records were copies), and on their number: 2 Mi keys are 64 MiB with the
 * sort's buffer. */
#define HOLD_MAX_BYTES (256u << 20)
#define HOLD_MAX_KEYS  (2u << 20)
/* At most this much of the file behind the reader stays mapped in. */
#define RESIDENT_BEHIND (32u << 20)

/* The record's time, from the sample itself or the sample_id trailer that
 * sample_id_all puts after other records; false when it has none. */
static bool record_time(const struct reader *r, const uint8_t *p, uint64_t *time)
{
	struct perf_event_header eh;
	memcpy(&eh, p, sizeof(eh));
	const struct ep_perf_event_desc *d = &r->attrs[0].desc;
	uint64_t st = d->sample_type;
	if (!(st & PERF_SAMPLE_TIME))
		return false;
	size_t pos;
	if (eh.type == PERF_RECORD_SAMPLE) {
		pos = sizeof(eh) + 8 * (!!(st & PERF_SAMPLE_IDENTIFIER) + !!(st & PERF_SAMPLE_IP) +
					!!(st & PERF_SAMPLE_TID));
	} else if (eh.type < PERF_RECORD_MAX && d->sample_id_all) {
		size_t trailer = 8 * (!!(st & PERF_SAMPLE_TID) + 1 + !!(st & PERF_SAMPLE_ID) +
				      !!(st & PERF_SAMPLE_STREAM_ID) + !!(st & PERF_SAMPLE_CPU) +
				      !!(st & PERF_SAMPLE_IDENTIFIER));
		if (trailer > eh.size - sizeof(eh))
			return false;
		pos = eh.size - trailer + 8 * !!(st & PERF_SAMPLE_TID);
	} else {
		return false;
	}
	if (pos + 8 > eh.size)
		return false;
	memcpy(time, p + pos, 8);
	return true;
}

static inline bool held_before(const struct held *a, const struct held *b)
{
	return a->time < b->time || (a->time == b->time && a->offset < b->offset);
}

static inline bool offset_before(const struct held *a, const struct held *b)
{
	return a->offset < b->offset;
}

/* A round is a few runs already in order (one per CPU buffer written):
 * insertion-sorted blocks merged bottom-up, a merge skipped when its halves
 * are already in order, sorts it in little more than one pass, without
 * qsort's call per comparison. Keys are unique (offsets), so the order is
 * the one qsort gave. */
#define DEFINE_SORT(name, before)                                                                  \
	static void name(struct held *a, size_t n, struct held *tmp)                               \
	{                                                                                          \
		enum { BLOCK = 16 };                                                               \
		for (size_t lo = 0; lo < n; lo += BLOCK) {                                         \
			size_t hi = lo + BLOCK < n ? lo + BLOCK : n;                               \
			for (size_t i = lo + 1; i < hi; i++) {                                     \
				struct held x = a[i];                                              \
				size_t j = i;                                                      \
				for (; j > lo && before(&x, &a[j - 1]); j--)                       \
					a[j] = a[j - 1];                                           \
				a[j] = x;                                                          \
			}                                                                          \
		}                                                                                  \
		for (size_t w = BLOCK; w < n; w *= 2) {                                            \
			for (size_t lo = 0; lo + w < n; lo += 2 * w) {                             \
				size_t mid = lo + w, hi = lo + 2 * w < n ? lo + 2 * w : n;         \
				if (!before(&a[mid], &a[mid - 1]))                                 \
					continue;                                                  \
				memcpy(tmp, a + lo, (mid - lo) * sizeof(*a));                      \
				size_t i = 0, j = mid, k = lo, ni = mid - lo;                      \
				while (i < ni && j < hi)                                           \
					a[k++] = before(&a[j], &tmp[i]) ? a[j++] : tmp[i++];       \
				while (i < ni)                                                     \
					a[k++] = tmp[i++];                                         \
			}                                                                          \
		}                                                                                  \
	}
DEFINE_SORT(sort_by_time, held_before)
DEFINE_SORT(sort_by_offset, offset_before)
#undef DEFINE_SORT

/* Delivers the first count held records in time order (they are sorted). */
static int deliver(struct reader *r, struct hold *h, size_t count,
		   const struct ep_perf_data_callbacks *cb, struct ep_perf_data_stats *stats)
{
	uint64_t lowest = r->read_off, since_drop = 0;
	for (size_t i = 0; i < h->n; i++)
		lowest = h->recs[i].offset < lowest ? h->recs[i].offset : lowest;
	size_t done = 0;
	int rc = 0;
	while (done < count && rc == 0) {
		const struct held *x = &h->recs[done++];
		const uint8_t *p = r->map + x->offset;
		rc = parse_record(r, x->offset, p, cb, stats);
		/* a long delivery faults the held records' pages in again: give
		 * them back as it goes, or they would all end up resident */
		since_drop += ((const struct perf_event_header *)(const void *)p)->size;
		if (since_drop > RESIDENT_BEHIND) {
			since_drop = 0;
			drop_range(r, lowest, r->read_off);
		}
	}
	/* the rest go back to file order: recs[0] is then the lowest offset
	 * still needed, and new records append in order */
	size_t keep = h->n - done;
	memmove(h->recs, h->recs + done, keep * sizeof(*h->recs));
	sort_by_offset(h->recs, keep, h->tmp);
	h->n = keep;
	h->bytes = 0;
	for (size_t i = 0; i < keep; i++) {
		uint16_t size;
		memcpy(&size, r->map + h->recs[i].offset + 6, 2);
		h->bytes += size;
	}
	return rc;
}

/* Delivers held records with time <= limit (all with limit UINT64_MAX). */
static int flush_held(struct reader *r, struct hold *h, uint64_t limit,
		      const struct ep_perf_data_callbacks *cb, struct ep_perf_data_stats *stats)
{
	if (h->n == 0)
		return 0; /* h->recs may be NULL: memmove and memcpy must not see it */
	sort_by_time(h->recs, h->n, h->tmp);
	size_t count = 0;
	while (count < h->n && h->recs[count].time <= limit)
		count++;
	return deliver(r, h, count, cb, stats);
}

static int hold_record(struct hold *h, uint64_t time, uint64_t offset, uint16_t size)
{
	if (h->n == h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 4096;
		struct held *recs = realloc(h->recs, cap * sizeof(*recs));
		if (!recs)
			return -1;
		h->recs = recs;
		struct held *tmp = realloc(h->tmp, cap * sizeof(*tmp));
		if (!tmp)
			return -1;
		h->tmp = tmp;
		h->cap = cap;
	}
	h->recs[h->n++] = (struct held){.time = time, .offset = offset};
	h->bytes += size;
	if (time > h->max_time)
		h->max_time = time;
	return 0;
}

static int read_records(struct reader *r, const struct ep_perf_data_callbacks *cb,
			struct ep_perf_data_stats *stats, struct hold *h)
{
	uint64_t off = r->h.data.offset;
	/* a size running past 2^64 would wrap the end below the start and read
	 * nothing: read to the end of the file, which names the damage */
	uint64_t end = r->h.data.size > UINT64_MAX - off ? UINT64_MAX : off + r->h.data.size;
	bool ordered = (r->attrs[0].desc.sample_type & PERF_SAMPLE_TIME) != 0;
	uint64_t last_time = 0;
	while (off < end) {
		r->read_off = off;
		const uint8_t *p = window(r, off, sizeof(struct perf_event_header));
		if (!p)
			return fail(r, off,
				    "record header cut off by the end of the file "
				    "(truncated file?)");
		struct perf_event_header eh;
		memcpy(&eh, p, sizeof(eh));
		if (eh.size < sizeof(eh) || eh.size % 8 != 0)
			return fail(r, off, "record of impossible size %u (corrupt file)", eh.size);
		if (off + eh.size > end)
			return fail(r, off,
				    "record of %u bytes runs past the end of the data section",
				    eh.size);
		p = window(r, off, eh.size);
		if (!p)
			return fail(r, off,
				    "record of %u bytes cut off by the end of the file "
				    "(truncated file?)",
				    eh.size);
		int rc = 0;
		if (!ordered) {
			rc = parse_record(r, off, p, cb, stats);
			drop_below(r, off);
		} else if (eh.type == EP_PERF_RECORD_FINISHED_ROUND) {
			rc = flush_held(r, h, h->flush_limit, cb, stats);
			h->flush_limit = h->max_time;
		} else {
			uint64_t time;
			if (!record_time(r, p, &time))
				time = last_time; /* keeps its place after its predecessor */
			last_time = time;
			if (hold_record(h, time, off, eh.size) != 0)
				return fail(r, off,
					    "out of memory holding records for time ordering");
			if (h->bytes > stats->hold_bytes_peak)
				stats->hold_bytes_peak = h->bytes;
			/* rounds this long: order what we have */
			if (h->bytes > r->hold_max_bytes || h->n >= HOLD_MAX_KEYS)
				rc = flush_held(r, h, UINT64_MAX, cb, stats);
			uint64_t keep = h->n ? h->recs[0].offset : off;
			if (off - keep > RESIDENT_BEHIND)
				keep = off - RESIDENT_BEHIND;
			drop_below(r, keep);
		}
		if (rc)
			return rc;
		stats->records++;
		off += eh.size;
		stats->bytes_read = off;
	}
	return ordered ? flush_held(r, h, UINT64_MAX, cb, stats) : 0;
}

int ep_perf_data_read(const char *path, const struct ep_perf_data_callbacks *cb,
		      struct ep_perf_data_stats *stats, char *err, size_t errlen)
{
	return ep_perf_data_read_capped(path, cb, HOLD_MAX_BYTES, stats, err, errlen);
}

/* The header, checked: 0, or -1 with the reader's err set. */
static int read_header(struct reader *r)
{
	if (r->file_size < 8 || read_at(r, 0, r->h.magic, 8) != 0) {
		snprintf(r->err, r->errlen,
			 "%s: byte 0: file too short for a perf.data header (%llu bytes)", r->path,
			 (unsigned long long)r->file_size);
		return -1;
	}
	if (memcmp(r->h.magic, "PERFILE2", 8) != 0) {
		snprintf(r->err, r->errlen, "%s: not a perf.data file", r->path);
		return -1;
	}
	if (r->file_size < sizeof(r->h) || read_at(r, 0, &r->h, sizeof(r->h)) != 0) {
		uint64_t size = 0;
		if (r->file_size >= 16)
			read_at(r, 8, &size, 8);
		if (size == 16)
			snprintf(r->err, r->errlen,
				 "%s: a pipe-mode perf.data (perf record -o -): record "
				 "to a file instead",
				 r->path);
		else
			fail(r, 0, "file too short for a perf.data header (%llu bytes)",
			     (unsigned long long)r->file_size);
		return -1;
	}
	if (r->h.size != sizeof(r->h)) {
		fail(r, 8, "unexpected header size %llu", (unsigned long long)r->h.size);
		return -1;
	}
	/* records are parsed in place as u64 words, and their sizes are
	 * multiples of 8: perf starts the data section 8-byte aligned (it
	 * writes whole u64s before it), so an odd start is damage, and read
	 * on it every record would be a misaligned access (UBSan, fuzz_perf_data) */
	if (r->h.data.offset % 8 != 0) {
		fail(r, 40, "data section at byte %llu is not 8-byte aligned (corrupt file)",
		     (unsigned long long)r->h.data.offset);
		return -1;
	}
	/* perf killed before it finished writing leaves the data size at 0 */
	if (r->h.data.size == 0 && r->file_size > r->h.data.offset)
		r->h.data.size = r->file_size - r->h.data.offset;
	return 0;
}

static int read_file(const char *path, const struct ep_perf_data_callbacks *cb,
		     uint64_t hold_max_bytes, unsigned part, unsigned parts,
		     struct ep_perf_data_stats *stats, char *err, size_t errlen);

int ep_perf_data_read_capped(const char *path, const struct ep_perf_data_callbacks *cb,
			     uint64_t hold_max_bytes, struct ep_perf_data_stats *stats, char *err,
			     size_t errlen)
{
	return read_file(path, cb, hold_max_bytes, 0, 1, stats, err, errlen);
}

int ep_perf_data_read_part(const char *path, const struct ep_perf_data_callbacks *cb, unsigned part,
			   unsigned parts, struct ep_perf_data_stats *stats, char *err,
			   size_t errlen)
{
	return read_file(path, cb, HOLD_MAX_BYTES, part, parts, stats, err, errlen);
}

static int read_file(const char *path, const struct ep_perf_data_callbacks *cb,
		     uint64_t hold_max_bytes, unsigned part, unsigned parts,
		     struct ep_perf_data_stats *stats, char *err, size_t errlen)
{
	memset(stats, 0, sizeof(*stats));
	struct reader *r = calloc(1, sizeof(*r));
	if (!r) {
		snprintf(err, errlen, "%s: out of memory", path);
		return -1;
	}
	r->path = path;
	r->hold_max_bytes = hold_max_bytes;
	r->tables_left = stats->tables_max = tables_max;
	r->part = part;
	r->parts = parts;
	r->err = err;
	r->errlen = errlen;
	char why[128];
	r->fd = ep_open_regular(path, why, sizeof(why));
	int rc = -1;
	if (r->fd < 0) {
		snprintf(err, errlen, "%s: %s", path, why);
		free(r);
		return -1;
	}
	struct stat st;
	if (fstat(r->fd, &st) != 0) {
		snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
		goto out;
	}
	r->file_size = stats->file_size = (uint64_t)st.st_size;
	if (read_header(r) != 0)
		goto out;
	void *map = mmap(NULL, (size_t)r->file_size, PROT_READ, MAP_PRIVATE, r->fd, 0);
	if (map == MAP_FAILED) {
		snprintf(err, errlen, "%s: cannot map: %s", path, strerror(errno));
		goto out;
	}
	r->map = map;
	madvise(map, (size_t)r->file_size, MADV_SEQUENTIAL);
	if (read_attrs(r) != 0)
		goto out;
	/* Feature sections follow the data: in a truncated file they are gone.
	 * Keep going without them and report the damage after the records. */
	char feature_err[512] = "";
	r->err = feature_err;
	r->errlen = sizeof(feature_err);
	int frc = read_cpuid(r);
	r->err = err;
	r->errlen = errlen;
	for (size_t i = 0; i < r->nattrs; i++) {
		struct ep_perf_event_desc *d = &r->attrs[i].desc;
		d->counts_all_branches = counts_all_branches(r, d->type, d->config);
		if (cb->on_event_desc && (rc = cb->on_event_desc(cb->ctx, d)) != 0)
			goto out;
	}
	if (frc == 0) {
		r->err = feature_err;
		r->errlen = sizeof(feature_err);
		frc = read_build_ids(r, cb, stats);
		r->err = err;
		r->errlen = errlen;
		if (frc > 0) {
			rc = frc;
			goto out;
		}
	}
	struct hold hold = {0};
	rc = read_records(r, cb, stats, &hold);
	if (rc != 0 && hold.n > 0) {
		/* deliver what was read before the damage, then report it */
		char saved[512];
		snprintf(saved, sizeof(saved), "%s", err);
		if (flush_held(r, &hold, UINT64_MAX, cb, stats) == 0)
			snprintf(err, errlen, "%s", saved);
	}
	free(hold.recs);
	free(hold.tmp);
	if (rc == 0 && frc != 0) {
		snprintf(err, errlen, "%s", feature_err);
		rc = -1;
	}
out:
	for (size_t i = 0; i < r->nattrs; i++)
		free(r->attrs[i].ids);
	ep_u64map_free(&r->attr_by_id);
	if (r->map)
		munmap((void *)(uintptr_t)r->map, (size_t)r->file_size);
	close(r->fd);
	free(r);
	return rc;
}
