/* SPDX-License-Identifier: Apache-2.0 */
/* Which instruction set a binary holds. Only the decoder interprets it;
 * everything else passes it along. */
#ifndef EP_ARCH_H
#define EP_ARCH_H

#include <stdint.h>
#include <string.h>

enum ep_arch { EP_ARCH_UNKNOWN = 0, EP_ARCH_X86_64, EP_ARCH_AARCH64 };

static inline const char *ep_arch_name(enum ep_arch arch)
{
	switch (arch) {
	case EP_ARCH_X86_64:
		return "x86_64";
	case EP_ARCH_AARCH64:
		return "aarch64";
	default:
		return "unknown";
	}
}

static inline enum ep_arch ep_arch_from_name(const char *name)
{
	if (strcmp(name, "x86_64") == 0)
		return EP_ARCH_X86_64;
	if (strcmp(name, "aarch64") == 0)
		return EP_ARCH_AARCH64;
	return EP_ARCH_UNKNOWN;
}

/* Both 64-bit Linux ports we support put the kernel in the upper half of the
 * address space, so the top bit tells user from kernel addresses. */
static inline int ep_addr_is_kernel(uint64_t addr)
{
	return (int)(addr >> 63);
}

#endif
