/* SPDX-License-Identifier: Apache-2.0 */
/* Debug and test view of the decoder: every instruction of a straight line.
 * Slow (decodes each time); never on the hot path. */
#ifndef EP_DECODER_DEBUG_H
#define EP_DECODER_DEBUG_H

#include "common/decode/decoder.h"

/* Start addresses of the instructions from start to end inclusive; OK when
 * end is an instruction of the straight line from start. */
enum ep_walk_status ep_decoder_line_insns(struct ep_decoder *d, uint64_t start, uint64_t end,
					  uint64_t *addrs, size_t max, size_t *n);

#endif
