/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/source/emulator/emu_reader.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int ep_emu_read(const char *path, const struct ep_emu_callbacks *cb, struct ep_emu_stats *stats,
		char *err, size_t errlen)
{
	memset(stats, 0, sizeof(*stats));
	FILE *f = fopen(path, "rb");
	if (!f) {
		snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
		return -1;
	}
	/* the stream is read once QEMU is done: its size is final, and a
	 * record claiming more than is left is cut off, refused before its
	 * buffer is allocated (a damaged size cost up to 256 MiB at once) */
	struct stat st;
	long size = fstat(fileno(f), &st) == 0 ? (long)st.st_size : LONG_MAX;
	char magic[8];
	int rc = -1;
	uint8_t *buf = NULL;
	size_t cap = 0;
	if (fread(magic, 1, 8, f) != 8 || memcmp(magic, EP_EMU_MAGIC, 8) != 0) {
		snprintf(err, errlen, "%s: not an edgeprof emulator stream", path);
		goto out;
	}
	for (long off = 8;; off = ftell(f)) {
		struct ep_emu_record_header h;
		size_t got = fread(&h, 1, sizeof(h), f);
		if (got == 0) {
			rc = 0;
			break;
		}
		if (got < sizeof(h)) {
			snprintf(err, errlen, "%s: byte %ld: record header cut off", path, off);
			break;
		}
		if (h.size > (256u << 20)) {
			snprintf(err, errlen, "%s: byte %ld: record of %u bytes", path, off,
				 h.size);
			break;
		}
		if ((long)h.size > size - off - (long)sizeof(h)) {
			snprintf(err, errlen, "%s: byte %ld: record cut off (the run was killed?)",
				 path, off);
			break;
		}
		if (h.size + 1 > cap) {
			uint8_t *nb = realloc(buf, h.size + 1);
			if (!nb) {
				snprintf(err, errlen, "%s: out of memory", path);
				break;
			}
			buf = nb;
			cap = h.size + 1;
		}
		if (fread(buf, 1, h.size, f) != h.size) {
			snprintf(err, errlen, "%s: byte %ld: record cut off (the run was killed?)",
				 path, off);
			break;
		}
		buf[h.size] = '\0';
		switch (h.type) {
		case EP_EMU_MAPS:
			if (cb->on_maps)
				cb->on_maps(cb->ctx, (const char *)buf, h.size);
			break;
		case EP_EMU_SAMPLE: {
			struct ep_sample_record rec;
			size_t head = offsetof(struct ep_sample_record, entries);
			if (h.size < head || h.size > sizeof(rec)) {
				snprintf(err, errlen, "%s: byte %ld: sample of %u bytes", path, off,
					 h.size);
				goto out;
			}
			memcpy(&rec, buf, h.size);
			if (rec.nr_entries > EP_MAX_BRANCH_ENTRIES ||
			    head + rec.nr_entries * sizeof(struct ep_branch_entry) != h.size) {
				snprintf(err, errlen, "%s: byte %ld: sample with a bad entry count",
					 path, off);
				goto out;
			}
			stats->samples++;
			if (cb->on_sample)
				cb->on_sample(cb->ctx, &rec);
			break;
		}
		case EP_EMU_EXACT:
			stats->exact_edges += h.size / sizeof(struct ep_emu_exact);
			if (cb->on_exact)
				cb->on_exact(cb->ctx, (const struct ep_emu_exact *)(void *)buf,
					     h.size / sizeof(struct ep_emu_exact));
			break;
		case EP_EMU_END:
			stats->ended = true;
			if (h.size >= 8)
				memcpy(&stats->branches, buf, 8);
			if (h.size >= 16)
				memcpy(&stats->instructions, buf + 8, 8);
			break;
		default:
			break; /* newer record types: skipped */
		}
	}
out:
	free(buf);
	fclose(f);
	return rc;
}
