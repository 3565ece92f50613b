/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one sample record every source produces: the BPF program (ring buffer),
 * the perf.data importer and the LBR emulator. It is included both by BPF C
 * (no libc, vmlinux.h types) and by the userspace agent, so it only uses
 * fixed-width types that both sides define.
 *
 * Branch entries are laid out exactly like the kernel's struct
 * perf_branch_entry (from, to, one 64-bit word of bitfields) so the BPF
 * program can hand the record's entry array straight to
 * bpf_read_branch_records() without copying.
 */
#ifndef EDGEPROF_RECORD_H
#define EDGEPROF_RECORD_H

#ifdef __BPF__
/* vmlinux.h already provides __u32/__u64 */
#else
#include <linux/types.h>
#endif

/* Arm BRBE has up to 64 entries; Intel LBR 32; AMD LbrExtV2 16. */
#define EP_MAX_BRANCH_ENTRIES 64
/* A GNU build-id as perf and the kernel carry it (BUILD_ID_SIZE_MAX). */
#define EP_BUILD_ID_MAX 20

/* Bits of ep_branch_entry.flags, same positions as perf_branch_entry's
 * bitfields on little-endian (x86-64, arm64). */
#define EP_BR_MISPRED	   (1ULL << 0)
#define EP_BR_PREDICTED	   (1ULL << 1)
#define EP_BR_IN_TX	   (1ULL << 2)
#define EP_BR_ABORT	   (1ULL << 3)
#define EP_BR_CYCLES_SHIFT 4
#define EP_BR_CYCLES_MASK  (0xffffULL << EP_BR_CYCLES_SHIFT)
#define EP_BR_TYPE_SHIFT   20
#define EP_BR_TYPE_MASK	   (0xfULL << EP_BR_TYPE_SHIFT)

struct ep_branch_entry {
	__u64 from;
	__u64 to;
	__u64 flags;
};

/* ep_sample_record.flags */
#define EP_SAMPLE_IP_KERNEL	     (1U << 0) /* sample IP is in kernel mode */
#define EP_SAMPLE_HAS_BRANCHES	     (1U << 1) /* entries[] is valid (may be 0 long) */
#define EP_SAMPLE_HAS_HW_INDEX	     (1U << 2) /* hw_index is valid */
#define EP_SAMPLE_BRANCH_READ_FAILED (1U << 3) /* source tried and failed; see branch_error */
/* The event counted every completed branch (taken or not): the sample IP is
 * the instruction after the branch that triggered the overflow, so the
 * not-taken branches between the newest entry and the IP belong to the trace
 * (SPEC step 3). */
#define EP_SAMPLE_TRIGGER_IS_BRANCH (1U << 4)
/* The branch stack was filtered to calls and returns (call-graph mode,
 * PERF_SAMPLE_BRANCH_ANY_CALL | ANY_RETURN): the code between two entries is
 * not straight-line, so no gap may be walked. Carried by the record so every
 * consumer reads it the same whatever the source. */
#define EP_SAMPLE_CALLS_ONLY (1U << 5)
/* agent --stacks, on an IP sample (no branch stack): stack[] holds the
 * user call stack the frame pointers give, nr_stack addresses, the sample
 * IP first and then return addresses, innermost first. It shares the
 * entries' space: a record carries one or the other. */
#define EP_SAMPLE_HAS_STACK (1U << 6)

/* The deepest user stack a record carries: perf's default
 * kernel.perf_event_max_stack. Deeper stacks keep their innermost part. */
#define EP_MAX_STACK_DEPTH 127

struct ep_sample_record {
	__u32 pid;
	__u32 tid;
	__u32 cpu;
	__u32 flags;
	__u64 time_ns;
	__u64 cgroup_id;
	__u64 ip;
	__u64 period;
	__u64 hw_index;
	__s32 branch_error; /* negative errno from the branch-stack read, else 0 */
	__u32 nr_entries;   /* valid entries, <= EP_MAX_BRANCH_ENTRIES */
	__u32 nr_stack;	    /* EP_SAMPLE_HAS_STACK: stack[]'s addresses */
	__u32 pad;
	union {
		/* Newest first, like the hardware and perf: entries[0] is the
		 * most recent taken branch. */
		struct ep_branch_entry entries[EP_MAX_BRANCH_ENTRIES];
		__u64 stack[EP_MAX_STACK_DEPTH];
	};
};

/* agent --cycles: one IP sample of the second, cycles-counting event (or
 * cpu-clock where the machine has none), on its own ring buffer: it comes
 * at its own rate and is 48 bytes, not a branch stack's 800 (SPEC, "Buffers
 * per record type"). flags: EP_SAMPLE_IP_KERNEL. period: the events
 * (cycles, or ns of cpu-clock) since the CPU's previous sample. */
struct ep_cycles_record {
	__u32 pid;
	__u32 tid;
	__u32 cpu;
	__u32 flags;
	__u64 time_ns;
	__u64 cgroup_id;
	__u64 ip;
	__u64 period;
};

/* Process events, on their own ring buffer: the agent keeps its view of
 * each process's mappings right (SPEC, "Buffers per record type"). */
#define EP_PROC_EXEC 1 /* pid replaced its program */
#define EP_PROC_FORK 2 /* pid is a new process, a copy of ppid */
#define EP_PROC_EXIT 3 /* the process pid ended */
/* pid is mapping a file executable (dlopen, a JIT's file): sent when the
 * mmap call starts, before the mapping exists */
#define EP_PROC_MMAP 4
/* pid (one of its threads) was moved to another cgroup, of any hierarchy:
 * the cgroups it inherited at its fork tell its labels no more */
#define EP_PROC_CGROUP 5

struct ep_proc_record {
	__u32 type;
	__u32 pid;
	__u32 ppid;
	__u32 pad;
	__u64 time_ns;
	/* the cgroup (v2) the event happened in, the exec'ing or exiting
	 * process's, the parent's at fork: the agent labels processes by it
	 * without reading /proc/PID/cgroup again for each one */
	__u64 cgroup_id;
};

#endif
