/* SPDX-License-Identifier: Apache-2.0 */
/* Executable bytes of a binary at their ELF virtual addresses: what the
 * decoder reads. The agent gets them from the files it opens
 * (agent/resolve), the collector from the binaries uploaded to it. */
#ifndef EP_CODE_SEGMENT_H
#define EP_CODE_SEGMENT_H

#include <stddef.h>
#include <stdint.h>

struct ep_code_segment {
	uint64_t vaddr;
	const uint8_t *bytes;
	size_t size;
};

/* [start, end) of ELF virtual addresses: the parts of code segments that
 * hold data (ep_elf_data_in_code, ep_decoder_set_data) */
struct ep_addr_range {
	uint64_t start, end;
};

#endif
