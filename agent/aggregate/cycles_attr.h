/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Cycles from IP samples onto ranges (SPEC, fine-grained CPI; agent
 * --cycles): an IP sample stands for its period of cycles at its address.
 * Those cycles go to the counted straight-line ranges holding the address,
 * not to a bucket per function or address, because report --cpi divides a
 * range's cycles by the instructions its count ran: only cycles landing on
 * the very ranges whose instructions are counted make that a CPI. An
 * address lies in several ranges when jumps land inside a straight line (or
 * whole gaps overlap); every execution of it is inside one execution of one
 * of them, so its cycles are shared among them in proportion to their
 * counts. An address no counted range holds (code no branch sample saw;
 * every address of an IP-only profile) keeps its cycles for itself.
 * Run when a profile is built, never per sample.
 */
#ifndef EP_CYCLES_ATTR_H
#define EP_CYCLES_ATTR_H

#include <stddef.h>
#include <stdint.h>

/* One counted range: [start, end], end the address of its closing branch. */
struct ep_cycles_range {
	uint64_t start, end;
	uint64_t count;
	double cycles; /* out: added to, scaled */
};

/* The IP samples at one address: their periods summed. */
struct ep_ip_cycles {
	uint64_t ip;
	uint64_t cycles; /* out: what no range took (0 when ranges did), unscaled */
};

/* Shares each address's cycles x scale among the ranges holding it, in
 * proportion to their counts. ips is sorted by address on return. 0, or -1
 * when memory runs out (nothing changed then). */
int ep_cycles_attribute(struct ep_cycles_range *ranges, size_t nranges, struct ep_ip_cycles *ips,
			size_t nips, double scale);

#endif
