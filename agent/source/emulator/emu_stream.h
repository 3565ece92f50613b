/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the LBR emulator (a QEMU plugin) writes and the agent reads: after
 * the magic, records of (u32 type, u32 payload size, payload). Written with
 * one write(2) each, so a guest that crashes leaves every record before the
 * crash intact.
 */
#ifndef EP_EMU_STREAM_H
#define EP_EMU_STREAM_H

#include <stdint.h>

#include "bpf/edgeprof_record.h"

/* 002: a sample's head (struct ep_sample_record up to its entries) is 72
 * bytes, nr_stack and its padding added; a 001 stream is refused whole */
#define EP_EMU_MAGIC "EPEMU002"

enum ep_emu_record_type {
	EP_EMU_MAPS = 1,   /* text of /proc/self/maps: the guest's mappings */
	EP_EMU_SAMPLE = 2, /* struct ep_sample_record, cut after its entries */
	EP_EMU_EXACT = 3,  /* struct ep_emu_exact[]: every edge's exact count */
	EP_EMU_END = 4,	   /* the run ended; payload: u64 branches, u64 instructions run */
};

struct ep_emu_record_header {
	uint32_t type;
	uint32_t size;
};

struct ep_emu_exact {
	uint64_t from; /* runtime address of the branch */
	uint64_t to;   /* where it went: target, or the next instruction when not taken */
	uint64_t count;
	uint32_t taken;
	uint32_t kind; /* enum ep_branch_kind */
};

#endif
