/* SPDX-License-Identifier: Apache-2.0 */
/* Per-instruction-set classification behind the decoder (internal). */
#ifndef EP_DECODER_ARCH_H
#define EP_DECODER_ARCH_H

#include <capstone.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent/decode/decoder.h"

struct ep_insn_info {
	uint8_t kind; /* enum ep_branch_kind, EP_BRANCH_NONE for other instructions */
	uint8_t len;
	uint64_t target; /* direct target, else 0 */
};

/* Each classifies one decoded instruction (capstone detail mode on). */
void ep_x86_classify(const cs_insn *insn, struct ep_insn_info *out);
void ep_arm64_classify(const cs_insn *insn, struct ep_insn_info *out);

#endif
