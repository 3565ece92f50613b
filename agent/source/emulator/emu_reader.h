/* SPDX-License-Identifier: Apache-2.0 */
/* Source stage for the LBR emulator: reads what the QEMU plugin wrote
 * (emu_stream.h) and hands it on through callbacks. */
#ifndef EP_EMU_READER_H
#define EP_EMU_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/source/emulator/emu_stream.h"

struct ep_emu_callbacks {
	void *ctx;
	void (*on_maps)(void *ctx, const char *text, size_t len);
	void (*on_sample)(void *ctx, const struct ep_sample_record *rec);
	void (*on_exact)(void *ctx, const struct ep_emu_exact *edges, size_t n);
};

struct ep_emu_stats {
	uint64_t samples;
	uint64_t exact_edges;
	bool ended;	       /* the run finished (exit), so the exact counts are complete */
	uint64_t branches;     /* executed in the whole run */
	uint64_t instructions; /* executed in the whole run */
};

/* 0, or -1 with err naming the file, the offset and the problem; records
 * before a damaged one are delivered either way. */
int ep_emu_read(const char *path, const struct ep_emu_callbacks *cb, struct ep_emu_stats *stats,
		char *err, size_t errlen);

#endif
