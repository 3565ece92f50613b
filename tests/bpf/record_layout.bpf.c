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
/* process events (exec, fork, exit, mmap) share one 32-byte record: the
 * agent reads them by this layout whatever their type */
_Static_assert(sizeof(struct ep_proc_record) == 32, "ep_proc_record is 32 bytes");
_Static_assert(__builtin_offsetof(struct ep_proc_record, cgroup_id) == 24, "cgroup_id");
_Static_assert(__builtin_offsetof(struct ep_proc_record, time_ns) == 16, "time_ns");
_Static_assert(EP_PROC_MMAP != EP_PROC_EXEC && EP_PROC_MMAP != EP_PROC_FORK &&
		   EP_PROC_MMAP != EP_PROC_EXIT,
	       "process event types are distinct");

/* the cycles event's IP samples: the agent sizes their ring by this */
_Static_assert(sizeof(struct ep_cycles_record) == 48, "ep_cycles_record is 48 bytes");
_Static_assert(__builtin_offsetof(struct ep_cycles_record, period) == 40, "period");

/* Something for the object to hold, so the layout is really compiled. */
struct ep_sample_record layout_probe;
struct ep_proc_record proc_layout_probe;
struct ep_cycles_record cycles_layout_probe;
