/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target over the /proc/PID/maps parser the live agent runs on
 * the processes whose maps it reads (ep_maps_next_exec,
 * agent/source/live/proc_maps.h).
 * The input is the text as read, without a terminating NUL (the agent's
 * buffer has none past what read() returned), so a read past its end is an
 * ASan report. Invariants: every entry is a non-empty range, its path lies
 * inside the text, and the position only moves forward.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/source/live/proc_maps.h"
#include "tests/fuzz/fuzz_util.h"

#define FAIL(...) EP_FUZZ_FAIL("fuzz_proc_maps", __VA_ARGS__)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size ? size : 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	size_t pos = 0, prev = 0;
	struct ep_maps_entry e;
	while (ep_maps_next_exec(text, size, &pos, &e)) {
		if (pos <= prev || pos > size)
			FAIL("position went from %zu to %zu (text of %zu bytes)", prev, pos, size);
		prev = pos;
		if (e.end <= e.start)
			FAIL("empty or reversed range %llx-%llx", (unsigned long long)e.start,
			     (unsigned long long)e.end);
		if (!e.path || e.path < text || e.path >= text + pos)
			FAIL("path outside the line just parsed");
		size_t n = ep_fuzz_str(e.path);
		if (e.path + n >= text + pos)
			FAIL("path runs past its line");
	}
	free(text);
	return 0;
}
