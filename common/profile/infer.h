/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Profile inference (issue 34): block and edge counts of a function that
 * obey flow (what enters a block leaves it; what enters the function from
 * outside leaves it), kept as close as flow allows to the sampled counts.
 *
 * Sampled counts disagree with flow: each block and branch is seen by a
 * different draw of samples, and a block run a few times may be seen by no
 * sample while the branches around it are. BOLT reads such a block as never
 * run and splits it off as cold. The counts here are a minimum-cost flow: a
 * count raised above or lowered below its sample costs per unit (lowering
 * more than raising, raising a zero a little more than raising a count), so
 * flow is moved where the samples say least, and a block on the only way
 * between sampled blocks gets what passes through it.

 */
#ifndef EP_PROFILE_INFER_H
#define EP_PROFILE_INFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/decode/decoder.h"
#include "profile.pb-c.h"

/* An edge's end outside the function: where it is entered from (calls,
 * tail calls, landing pads) and left to (returns, tail calls). */
#define EP_INFER_OUTSIDE UINT32_MAX

struct ep_infer_edge {
	uint32_t src, dst; /* block indices, or EP_INFER_OUTSIDE */
	uint64_t count;	   /* sampled */
	bool known;	   /* false: no sample speaks for it (its count is not evidence) */
	uint64_t flow;	   /* out */
};

struct ep_infer_block {
	uint64_t count; /* sampled */
	bool known;
	uint64_t flow; /* out */
};

/* Bounds on what one function may cost (docs/limits.md): a function past
 * them keeps its sampled counts and is counted. */
struct ep_infer_limits {
	size_t max_blocks;  /* --infer-max-blocks: blocks (and, times 4, edges) */
	uint64_t max_work;  /* arcs the solver may scan, for one function */
	uint64_t max_count; /* a count past it (or their sum) is refused: no overflow */
	/* blocks left at zero within this many edges of a block that ran
	 * (0: none) get a unit of flow from an entry to an exit through them
	 * (ep_infer_spread) */
	uint32_t spread_depth;
	uint64_t scale; /* ep_infer_profile: counts times this, so a unit is small */
};

#define EP_INFER_MAX_BLOCKS_DEFAULT   65536
#define EP_INFER_MAX_WORK_DEFAULT     (UINT64_C(1) << 32)
#define EP_INFER_MAX_COUNT	      (UINT64_C(1) << 48)
#define EP_INFER_SPREAD_DEPTH_DEFAULT UINT32_MAX /* any block with a way in and out */
#define EP_INFER_SCALE_DEFAULT	      16

void ep_infer_limits_default(struct ep_infer_limits *l);

enum ep_infer_status {
	EP_INFER_OK = 0,
	EP_INFER_TOO_BIG,   /* more blocks or edges than max_blocks allows */
	EP_INFER_TOO_SLOW,  /* past max_work */
	EP_INFER_TOO_MANY,  /* a count, or their sum, past max_count */
	EP_INFER_NO_MEMORY, /* allocation failed */
	EP_INFER_BAD_GRAPH, /* an edge names a block that is not there */
};

const char *ep_infer_status_name(enum ep_infer_status s);

/* Fills every block's and edge's flow; on anything but OK the flows are the
 * sampled counts. */
enum ep_infer_status ep_infer_solve(struct ep_infer_block *blocks, size_t nblocks,
				    struct ep_infer_edge *edges, size_t nedges,
				    const struct ep_infer_limits *limits);

/*
 * After ep_infer_solve(): each block still at zero that lies within
 * limits->spread_depth edges of a block with flow, and on some way from an
 * entry to an exit, gets one unit of flow along the shortest such way (and
 * so does the way): a block no sample saw next to code that ran may have
 * run, and BOLT splits off as cold only what it thinks never ran. Returns
 * the blocks given flow; flows stay conserved.
 */
enum ep_infer_status ep_infer_spread(struct ep_infer_block *blocks, size_t nblocks,
				     struct ep_infer_edge *edges, size_t nedges,
				     const struct ep_infer_limits *limits, size_t *spread);

struct ep_infer_stats {
	uint64_t functions;	    /* whose counts were inferred */
	uint64_t functions_refused; /* past a limit: sampled counts kept */
	uint64_t blocks, blocks_zero_sampled, blocks_zero_inferred, blocks_spread;
	enum ep_infer_status last_refusal;
	char last_refused[128]; /* the last refused function's name */
};

/*
 * bp's profile with the counts of each sampled function's branches inferred
 * on its control-flow graph, read from dec (bp's code). What replaces the
 * sampled edges: each conditional branch's taken and not-taken edges, direct
 * jumps, the fall-throughs between blocks no branch joins (kind
 * BRANCH_FALLTHROUGH, as the agent writes them), returns and indirect jumps
 * (their sampled targets, scaled to the inferred count). Calls, ranges, IPs
 * and functions are kept; every count is multiplied by limits->scale. *out
 * is a new message (free with edgeprof__v1__binary_profile__free_unpacked(
 * *out, NULL)); -1 when memory runs out, 1 (stats->last_refusal) when a
 * count times the scale passes max_count.
 */
int ep_infer_profile(const Edgeprof__V1__BinaryProfile *bp, struct ep_decoder *dec,
		     const struct ep_infer_limits *limits, Edgeprof__V1__BinaryProfile **out,
		     struct ep_infer_stats *stats);

#endif
