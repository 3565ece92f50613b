/* SPDX-License-Identifier: GPL-2.0 */
/* Compiled for the BPF target against this kernel's BTF (vmlinux.h): the
 * shared sample record must build there and its branch entries must be laid
 * out exactly like the kernel's perf_branch_entry, since
 * bpf_read_branch_records() writes straight into them. */
#include "vmlinux.h"

#include "bpf/edgeprof_record.h"

_Static_assert(sizeof(struct ep_branch_entry) == sizeof(struct perf_branch_entry),
	       "ep_branch_entry must match perf_branch_entry");
_Static_assert(__builtin_offsetof(struct ep_branch_entry, from) ==
		   __builtin_offsetof(struct perf_branch_entry, from),
	       "from");
_Static_assert(__builtin_offsetof(struct ep_branch_entry, to) ==
		   __builtin_offsetof(struct perf_branch_entry, to),
	       "to");
_Static_assert(sizeof(struct ep_sample_record) % 8 == 0, "records stay 8-byte aligned");

/* Something for the object to hold, so the layout is really compiled. */
struct ep_sample_record layout_probe;
