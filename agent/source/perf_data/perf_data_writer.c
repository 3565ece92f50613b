/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/source/perf_data/perf_data_writer.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

#include "agent/source/perf_data/perf_data_format.h"
#include "common/util/output_file.h"

#define NAME_ALIGN     64
#define HOST_KERNEL_ID (-1)
#define BUILD_ID_FIELD 24 /* PERF_ALIGN(BUILD_ID_SIZE, sizeof(u64)) */
/* perf flushes its sort-by-time queue at each round: one every so many
 * samples keeps a reader's memory bounded, as perf record's per-mmap-pass
 * rounds do. */
#define SAMPLES_PER_ROUND 4096

#define SAMPLE_TYPE                                                                                \
	(PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU |                   \
	 PERF_SAMPLE_PERIOD | PERF_SAMPLE_BRANCH_STACK)

struct file_attr {
	struct perf_event_attr attr;
	struct ep_perf_file_section ids;
};

struct build_id_entry {
	char *path;
	uint8_t id[EP_BUILD_ID_MAX];
	uint8_t len;
};

struct ep_perf_writer {
	FILE *f;	      /* out.f */
	struct ep_output out; /* renamed over path once whole (common/util/output_file.h) */
	char *path;
	struct ep_perf_writer_event ev;
	char *name, *cpuid, *cmdline;
	struct perf_event_attr attr;
	uint64_t data_offset, data_size;
	uint64_t samples_in_round;
	struct build_id_entry *bids;
	size_t nbids, capbids;
	bool failed;
};

/* The one id of the one event: perf's files always list one per attr. */
static const uint64_t event_id = 1;

static void put(struct ep_perf_writer *w, const void *p, size_t n)
{
	if (n && fwrite(p, 1, n, w->f) != n)
		w->failed = true;
}

static void put_zeros(struct ep_perf_writer *w, size_t n)
{
	static const uint8_t zeros[NAME_ALIGN];
	while (n > 0) {
		size_t k = n < sizeof(zeros) ? n : sizeof(zeros);
		put(w, zeros, k);
		n -= k;
	}
}

static size_t align(size_t n, size_t a)
{
	return (n + a - 1) / a * a;
}

/* A data record: counted into the data section's size. */
static void put_data(struct ep_perf_writer *w, const void *p, size_t n)
{
	put(w, p, n);
	w->data_size += n;
}

/* sample_id_all's trailer after non-sample records, in sample_type's order:
 * pid/tid, time, cpu. */
static void put_sample_id(struct ep_perf_writer *w, uint32_t pid, uint32_t tid, uint64_t time)
{
	uint32_t ids[2] = {pid, tid};
	uint32_t cpu[2] = {0, 0};
	put_data(w, ids, sizeof(ids));
	put_data(w, &time, sizeof(time));
	put_data(w, cpu, sizeof(cpu));
}

static char *dup_or_empty(const char *s)
{
	return strdup(s ? s : "");
}

static void fill_attr(struct perf_event_attr *a, const struct ep_perf_writer_event *ev)
{
	memset(a, 0, sizeof(*a));
	a->type = ev->type;
	a->size = sizeof(*a);
	a->config = ev->config;
	a->sample_period = ev->period;
	a->sample_type = SAMPLE_TYPE;
	a->branch_sample_type = ev->branch_sample_type;
	/* as `perf record -b -e EVENT:u -- CMD` sets them: user space only,
	 * the command's own events, sample_id_all on the side records */
	a->disabled = 1;
	a->inherit = 1;
	a->exclude_kernel = 1;
	a->exclude_hv = 1;
	a->mmap = 1;
	a->comm = 1;
	a->enable_on_exec = 1;
	a->sample_id_all = 1;
	a->mmap2 = 1;
	a->comm_exec = 1;
}

struct ep_perf_writer *ep_perf_writer_open(const char *path, const struct ep_perf_writer_event *ev,
					   char *err, size_t errlen)
{
	struct ep_perf_writer *w = calloc(1, sizeof(*w));
	if (!w) {
		snprintf(err, errlen, "%s: out of memory", path);
		return NULL;
	}
	if (ep_output_open(&w->out, path, "wb", err, errlen) != 0) {
		free(w);
		return NULL;
	}
	w->f = w->out.f;
	w->path = strdup(path);
	w->name = dup_or_empty(ev->name);
	w->cpuid = dup_or_empty(ev->cpuid);
	w->cmdline = dup_or_empty(ev->cmdline);
	w->ev = *ev;
	fill_attr(&w->attr, ev);
	/* header (rewritten at close), the id list, the attr, then data */
	struct ep_perf_file_header h = {0};
	put(w, &h, sizeof(h));
	put(w, &event_id, sizeof(event_id));
	struct file_attr fa = {.attr = w->attr,
			       .ids = {.offset = sizeof(h), .size = sizeof(event_id)}};
	put(w, &fa, sizeof(fa));
	w->data_offset = sizeof(h) + sizeof(event_id) + sizeof(fa);
	if (!w->path || !w->name || !w->cpuid || !w->cmdline)
		w->failed = true;
	return w;
}

void ep_perf_writer_comm(struct ep_perf_writer *w, uint32_t pid, uint32_t tid, const char *comm,
			 uint64_t time)
{
	char name[16] = {0};
	snprintf(name, sizeof(name), "%s", comm);
	size_t nlen = align(strlen(name) + 1, 8);
	struct perf_event_header h = {.type = PERF_RECORD_COMM,
				      .misc = PERF_RECORD_MISC_USER | PERF_RECORD_MISC_COMM_EXEC,
				      .size = (uint16_t)(sizeof(h) + 8 + nlen + 24)};
	uint32_t ids[2] = {pid, tid};
	put_data(w, &h, sizeof(h));
	put_data(w, ids, sizeof(ids));
	put_data(w, name, nlen);
	put_sample_id(w, pid, tid, time);
}

static void note_build_id(struct ep_perf_writer *w, const char *path, const uint8_t *id, size_t len)
{
	if (!id || len == 0 || len > EP_BUILD_ID_MAX)
		return;
	for (size_t i = 0; i < w->nbids; i++)
		if (strcmp(w->bids[i].path, path) == 0)
			return;
	if (w->nbids == w->capbids) {
		size_t cap = w->capbids ? w->capbids * 2 : 16;
		struct build_id_entry *nb = realloc(w->bids, cap * sizeof(*nb));
		if (!nb) {
			w->failed = true;
			return;
		}
		w->bids = nb;
		w->capbids = cap;
	}
	struct build_id_entry *e = &w->bids[w->nbids];
	e->path = strdup(path);
	if (!e->path) {
		w->failed = true;
		return;
	}
	memcpy(e->id, id, len);
	e->len = (uint8_t)len;
	w->nbids++;
}

void ep_perf_writer_mmap2(struct ep_perf_writer *w, const struct ep_perf_writer_mmap *m,
			  uint64_t time)
{
	size_t plen = strlen(m->path);
	size_t nlen = align(plen + 1, 8);
	size_t size = sizeof(struct perf_event_header) + 8 + 3 * 8 + 4 * 4 + 8 + 8 + nlen + 24;
	if (size > UINT16_MAX) {
		w->failed = true;
		return;
	}
	struct perf_event_header h = {
	    .type = PERF_RECORD_MMAP2, .misc = PERF_RECORD_MISC_USER, .size = (uint16_t)size};
	uint32_t ids[2] = {m->pid, m->tid};
	uint64_t range[3] = {m->start, m->len, m->pgoff};
	uint32_t dev[2] = {m->maj, m->min};
	uint64_t ino[2] = {m->ino, 0};
	uint32_t prot[2] = {m->prot, m->flags};
	put_data(w, &h, sizeof(h));
	put_data(w, ids, sizeof(ids));
	put_data(w, range, sizeof(range));
	put_data(w, dev, sizeof(dev));
	put_data(w, ino, sizeof(ino));
	put_data(w, prot, sizeof(prot));
	put_data(w, m->path, plen);
	put_zeros(w, nlen - plen);
	w->data_size += nlen - plen;
	put_sample_id(w, m->pid, m->tid, time);
	note_build_id(w, m->path, m->build_id, m->build_id_len);
}

static void finish_round(struct ep_perf_writer *w)
{
	struct perf_event_header h = {.type = EP_PERF_RECORD_FINISHED_ROUND, .size = sizeof(h)};
	put_data(w, &h, sizeof(h));
	w->samples_in_round = 0;
}

void ep_perf_writer_sample(struct ep_perf_writer *w, const struct ep_sample_record *rec)
{
	uint64_t nr = rec->nr_entries;
	size_t size = sizeof(struct perf_event_header) + 6 * 8 + nr * 24;
	struct perf_event_header h = {.type = PERF_RECORD_SAMPLE,
				      .misc = (rec->flags & EP_SAMPLE_IP_KERNEL)
						  ? PERF_RECORD_MISC_KERNEL
						  : PERF_RECORD_MISC_USER,
				      .size = (uint16_t)size};
	uint32_t ids[2] = {rec->pid, rec->tid};
	uint32_t cpu[2] = {rec->cpu, 0};
	put_data(w, &h, sizeof(h));
	put_data(w, &rec->ip, 8);
	put_data(w, ids, sizeof(ids));
	put_data(w, &rec->time_ns, 8);
	put_data(w, cpu, sizeof(cpu));
	put_data(w, &rec->period, 8);
	put_data(w, &nr, 8);
	/* ep_branch_entry is perf_branch_entry's layout. Intel's LBR marks
	 * every entry mispredicted or predicted (perf sets predicted =
	 * !mispred); an entry that says neither (the emulator models no
	 * predictor) is written as predicted, as that hardware would, so the
	 * peers' tools see the bits they expect. */
	for (uint64_t i = 0; i < nr; i++) {
		struct ep_branch_entry e = rec->entries[i];
		if (!(e.flags & (EP_BR_MISPRED | EP_BR_PREDICTED)))
			e.flags |= EP_BR_PREDICTED;
		put_data(w, &e, sizeof(e));
	}
	if (++w->samples_in_round == SAMPLES_PER_ROUND)
		finish_round(w);
}

/* perf's do_write_string: u32 length (padded), the string, zeros. */
static void put_string(struct ep_perf_writer *w, const char *s)
{
	size_t n = strlen(s) + 1;
	uint32_t len = (uint32_t)align(n, NAME_ALIGN);
	put(w, &len, sizeof(len));
	put(w, s, n - 1);
	put_zeros(w, len - (n - 1));
}

static void put_build_ids(struct ep_perf_writer *w)
{
	for (size_t i = 0; i < w->nbids; i++) {
		const struct build_id_entry *e = &w->bids[i];
		size_t plen = strlen(e->path);
		size_t nlen = align(plen + 1, NAME_ALIGN);
		struct perf_event_header h = {
		    .misc = PERF_RECORD_MISC_USER | EP_PERF_MISC_BUILD_ID_SIZE,
		    .size = (uint16_t)(sizeof(h) + 4 + BUILD_ID_FIELD + nlen)};
		int32_t pid = HOST_KERNEL_ID;
		uint8_t id[BUILD_ID_FIELD] = {0};
		memcpy(id, e->id, e->len);
		id[EP_BUILD_ID_MAX] = e->len; /* where EP_PERF_MISC_BUILD_ID_SIZE says it is */
		put(w, &h, sizeof(h));
		put(w, &pid, sizeof(pid));
		put(w, id, sizeof(id));
		put(w, e->path, plen);
		put_zeros(w, nlen - plen);
	}
}

static void put_event_desc(struct ep_perf_writer *w)
{
	uint32_t head[2] = {1, sizeof(w->attr)};
	uint32_t nr_ids = 1;
	put(w, head, sizeof(head));
	put(w, &w->attr, sizeof(w->attr));
	put(w, &nr_ids, sizeof(nr_ids));
	put_string(w, w->name);
	put(w, &event_id, sizeof(event_id));
}

/* One feature's contents at the file's current end. */
static void put_feature(struct ep_perf_writer *w, int bit)
{
	struct utsname u;
	if (uname(&u) != 0)
		memset(&u, 0, sizeof(u));
	switch (bit) {
	case EP_PERF_FEAT_BUILD_ID:
		put_build_ids(w);
		break;
	case EP_PERF_FEAT_HOSTNAME:
		put_string(w, u.nodename);
		break;
	case EP_PERF_FEAT_OSRELEASE:
		put_string(w, u.release);
		break;
	case EP_PERF_FEAT_VERSION:
		put_string(w, "edgeprof emulator");
		break;
	case EP_PERF_FEAT_ARCH:
		put_string(w, w->ev.arch ? w->ev.arch : "x86_64");
		break;
	case EP_PERF_FEAT_NRCPUS: {
		uint32_t n[2] = {w->ev.nr_cpus, w->ev.nr_cpus};
		put(w, n, sizeof(n));
		break;
	}
	case EP_PERF_FEAT_CPUID:
		put_string(w, w->cpuid);
		break;
	case EP_PERF_FEAT_CMDLINE: {
		uint32_t n = 1;
		put(w, &n, sizeof(n));
		put_string(w, w->cmdline);
		break;
	}
	case EP_PERF_FEAT_EVENT_DESC:
		put_event_desc(w);
		break;
	default:
		break;
	}
}

static const int features[] = {
    EP_PERF_FEAT_BUILD_ID,   EP_PERF_FEAT_HOSTNAME,    EP_PERF_FEAT_OSRELEASE, EP_PERF_FEAT_VERSION,
    EP_PERF_FEAT_ARCH,	     EP_PERF_FEAT_NRCPUS,      EP_PERF_FEAT_CPUID,     EP_PERF_FEAT_CMDLINE,
    EP_PERF_FEAT_EVENT_DESC, EP_PERF_FEAT_BRANCH_STACK};
#define NFEATURES (sizeof(features) / sizeof(features[0]))

/* The feature sections after the data: perf's table of (offset, size), one
 * per feature bit set in bit order, then their contents. */
static void put_features(struct ep_perf_writer *w, struct ep_perf_file_header *h)
{
	struct ep_perf_file_section table[NFEATURES];
	uint64_t table_at = w->data_offset + w->data_size;
	uint64_t at = table_at + sizeof(table);
	if (fseek(w->f, (long)at, SEEK_SET) != 0)
		w->failed = true;
	for (size_t i = 0; i < NFEATURES; i++) {
		put_feature(w, features[i]);
		long end = ftell(w->f);
		table[i] = (struct ep_perf_file_section){.offset = at, .size = (uint64_t)end - at};
		at = (uint64_t)end;
		h->features[features[i] / 64] |= 1ULL << (features[i] % 64);
	}
	if (fseek(w->f, (long)table_at, SEEK_SET) != 0)
		w->failed = true;
	put(w, table, sizeof(table));
}

static void free_writer(struct ep_perf_writer *w)
{
	for (size_t i = 0; i < w->nbids; i++)
		free(w->bids[i].path);
	free(w->bids);
	free(w->path);
	free(w->name);
	free(w->cpuid);
	free(w->cmdline);
	free(w);
}

int ep_perf_writer_close(struct ep_perf_writer *w, char *err, size_t errlen)
{
	if (w->samples_in_round)
		finish_round(w);
	struct ep_perf_file_header h = {.size = sizeof(h), .attr_size = sizeof(struct file_attr)};
	memcpy(h.magic, EP_PERF_MAGIC2, 8);
	h.attrs = (struct ep_perf_file_section){.offset = sizeof(h) + sizeof(event_id),
						.size = sizeof(struct file_attr)};
	h.data = (struct ep_perf_file_section){.offset = w->data_offset, .size = w->data_size};
	put_features(w, &h);
	if (fseek(w->f, 0, SEEK_SET) != 0)
		w->failed = true;
	put(w, &h, sizeof(h));
	int saved = errno;
	int rc = 0;
	if (w->failed) {
		snprintf(err, errlen, "%s: cannot write: %s", w->path,
			 strerror(errno ? errno : saved));
		ep_output_discard(&w->out);
		rc = -1;
	} else if (ep_output_commit(&w->out, err, errlen) != 0) {
		rc = -1;
	}
	free_writer(w);
	return rc;
}
