/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The kernel side: a perf_event program run on every sampling overflow. It
 * keeps only the processes asked for, reads the branch stack into the shared
 * sample record (bpf/edgeprof_record.h) in a ring buffer, and counts every
 * reason a sample went nowhere, per CPU. With agent --cycles a second
 * program samples the IPs of a cycles event into a ring of its own.
 */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "edgeprof_record.h"

char LICENSE[] SEC("license") = "GPL";

/* set by the agent before load */
const volatile __u32 agent_tgid = 0;
const volatile bool filter_pids = false;
const volatile __u32 ncgroups = 0;
const volatile bool want_kernel = false;
/* the perf events' branch filter is calls and returns (agent --mode calls) */
const volatile bool calls_only = false;
/* agent --stacks: an IP sample carries its user call stack */
const volatile bool want_stacks = false;
/*
 * The randomized period (SPEC step 1): every overflow is a sample, one
 * interrupt per sample. The agent draws each CPU's period from
 * [P - D, P + D] and re-arms the event with it (PERF_EVENT_IOC_PERIOD,
 * which also restarts the count) at every drain, at moments unrelated to
 * the program: samples never lock onto a loop for longer than one drain,
 * and the phase is new after each. The kernel cannot change a running
 * event's period from BPF.
 */

#define EP_MAX_CGROUPS 64
#define EP_MAX_CPUS    1024

/* The period each CPU's event is armed with, written by the agent when it
 * draws one: a software event's context keeps reporting its first period
 * after PERF_EVENT_IOC_PERIOD (hardware events report the right one). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, EP_MAX_CPUS);
	__type(key, __u32);
	__type(value, __u64);
} cpu_period SEC(".maps");

/* The same for the cycles event (agent --cycles), drawn the same way. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, EP_MAX_CPUS);
	__type(key, __u32);
	__type(value, __u64);
} cycles_period SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u8);
} target_pids SEC(".maps");

/* cgroups to keep; bpf_current_task_under_cgroup() also matches their
 * descendants, so a container's whole subtree counts */
struct {
	__uint(type, BPF_MAP_TYPE_CGROUP_ARRAY);
	__uint(max_entries, EP_MAX_CGROUPS);
	__type(key, __u32);
	__type(value, __u32);
} target_cgroups SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20); /* the agent resizes it before load */
} samples SEC(".maps");

/* Process events are rare and small: a separate, small buffer, so a burst
 * of samples never crowds them out. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 << 10);
} procs SEC(".maps");

/* The cycles event's IP samples: their own rate and a 48-byte record, so a
 * ring of their own sized for them (the agent resizes it; one page when
 * --cycles is off), and a burst of branch stacks never crowds them out. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} cycles SEC(".maps");

/* where a record is put together before only its used part is copied out */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ep_sample_record);
} scratch SEC(".maps");

enum ep_bpf_counter {
	EP_BPF_SEEN,
	EP_BPF_SENT,
	EP_BPF_FILTERED,
	EP_BPF_KERNEL,
	EP_BPF_RESERVE_FAILED,
	EP_BPF_BRANCH_READ_FAILED,
	EP_BPF_PROC_RESERVE_FAILED,
	EP_BPF_MMAP_EXEC, /* executable file mappings of watched processes */
	EP_BPF_CYCLES_SEEN,
	EP_BPF_CYCLES_SENT,
	EP_BPF_CYCLES_FILTERED,
	EP_BPF_CYCLES_KERNEL,
	EP_BPF_CYCLES_RESERVE_FAILED, /* the cycles ring was full: samples lost */
	EP_BPF_FIRST_SAMPLES,	      /* new programs' first samples: each woke the agent */
	EP_BPF_STACK_FAILED,	      /* agent --stacks: bpf_get_stack() gave nothing */
	EP_BPF_COUNTERS,
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, EP_BPF_COUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline void count(__u32 which)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &which);
	if (c)
		(*c)++;
}

static __always_inline bool wanted_cgroup(void)
{
	for (__u32 i = 0; i < EP_MAX_CGROUPS && i < ncgroups; i++)
		if (bpf_current_task_under_cgroup(&target_cgroups, i) == 1)
			return true;
	return false;
}

/* the current process is one the agent samples (pid and cgroup filters) */
static __always_inline bool wanted(__u32 tgid)
{
	return tgid != 0 && tgid != agent_tgid &&
	       (!filter_pids || bpf_map_lookup_elem(&target_pids, &tgid)) &&
	       (!ncgroups || wanted_cgroup());
}

/* The period this CPU's event was armed with (periods: cpu_period or
 * cycles_period), else what the event reports. */
static __always_inline __u64 armed_period(void *periods, __u32 cpu, __u64 reported)
{
	__u64 *armed = bpf_map_lookup_elem(periods, &cpu);
	return armed && *armed ? *armed : reported;
}

/* No wake-up per record: the agent drains on its own timer. Only a ring
 * past half full wakes it at once, so a burst is not dropped. */
static __always_inline __u64 wake_flag(void *ring, __u64 size)
{
	if (bpf_ringbuf_query(ring, BPF_RB_AVAIL_DATA) + size >
	    bpf_ringbuf_query(ring, BPF_RB_RING_SIZE) / 2)
		return BPF_RB_FORCE_WAKEUP;
	return BPF_RB_NO_WAKEUP;
}

/* Processes that exec'd and have not been sampled since. The agent reads
 * a program's maps at its first sample, not at its exec: most programs a
 * node starts are never sampled, and an exec then costs the agent nothing
 * (no wake-up, no read). A short-lived one may be gone by the next drain,
 * so its first sample wakes the agent at once, and its maps are read while
 * it lives (by then ld.so has mapped its libraries too). LRU: a program
 * never sampled ages out. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, __u8);
} unsampled SEC(".maps");

/* wake_flag, and at once for a new program's first sample. */
static __always_inline __u64 sample_wake_flag(void *ring, __u64 size, __u32 tgid)
{
	if (bpf_map_delete_elem(&unsampled, &tgid) == 0) {
		count(EP_BPF_FIRST_SAMPLES);
		return BPF_RB_FORCE_WAKEUP;
	}
	return wake_flag(ring, size);
}

/* The user stack by its frame pointers (the kernel's perf unwinder, as
 * perf record -g takes it): an IP sample then tells who called the code.
 * A binary built without frame pointers gives a wrong or short stack; the
 * agent flags those. */
static __always_inline void take_stack(struct bpf_perf_event_data *ctx,
				       struct ep_sample_record *rec)
{
	long got = bpf_get_stack(ctx, rec->stack, sizeof(rec->stack), BPF_F_USER_STACK);
	if (got <= 0) {
		count(EP_BPF_STACK_FAILED);
		return;
	}
	rec->nr_stack = (__u32)((__u64)got / sizeof(__u64));
	if (rec->nr_stack > EP_MAX_STACK_DEPTH)
		rec->nr_stack = EP_MAX_STACK_DEPTH;
	rec->flags |= EP_SAMPLE_HAS_STACK;
}

SEC("perf_event")
int on_overflow(struct bpf_perf_event_data *ctx)
{
	count(EP_BPF_SEEN);
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	if (!wanted(tgid)) {
		count(EP_BPF_FILTERED);
		return 0;
	}
	__u64 ip = PT_REGS_IP(&ctx->regs);
	bool kernel = ip >> 63;
	if (kernel && !want_kernel) {
		count(EP_BPF_KERNEL);
		return 0;
	}
	__u32 zero = 0;
	struct ep_sample_record *rec = bpf_map_lookup_elem(&scratch, &zero);
	if (!rec)
		return 0;
	rec->pid = tgid;
	rec->tid = (__u32)id;
	rec->cpu = bpf_get_smp_processor_id();
	rec->time_ns = bpf_ktime_get_ns();
	rec->cgroup_id = bpf_get_current_cgroup_id();
	rec->ip = ip;
	/* events since this CPU's previous sample (the period the event is
	 * armed with now: re-arming restarts the count) */
	rec->period = armed_period(&cpu_period, rec->cpu, ctx->sample_period);
	rec->hw_index = 0;
	rec->nr_stack = 0;
	rec->pad = 0;
	rec->flags = kernel ? EP_SAMPLE_IP_KERNEL : 0;
	long n = bpf_read_branch_records(ctx, rec->entries, sizeof(rec->entries), 0);
	if (n < 0) {
		/* no branch stack (no PMU for it, or not requested): an IP sample */
		rec->branch_error = (__s32)n;
		rec->nr_entries = 0;
		rec->flags |= EP_SAMPLE_BRANCH_READ_FAILED;
		count(EP_BPF_BRANCH_READ_FAILED);
		if (want_stacks && !kernel)
			take_stack(ctx, rec);
	} else {
		rec->branch_error = 0;
		rec->nr_entries = (__u32)(n / sizeof(struct ep_branch_entry));
		rec->flags |= EP_SAMPLE_HAS_BRANCHES | (calls_only ? EP_SAMPLE_CALLS_ONLY : 0);
	}
	/* only the entries there are: an IP-only sample is 80 bytes, not 1.6 KB */
	__u64 size = __builtin_offsetof(struct ep_sample_record, entries) +
		     (__u64)rec->nr_entries * sizeof(struct ep_branch_entry) +
		     (__u64)rec->nr_stack * sizeof(__u64);
	if (size > sizeof(*rec))
		size = sizeof(*rec);
	if (bpf_ringbuf_output(&samples, rec, size, sample_wake_flag(&samples, size, tgid)) != 0) {
		count(EP_BPF_RESERVE_FAILED);
		return 0;
	}
	count(EP_BPF_SENT);
	return 0;
}

/*
 * agent --cycles: an overflow of the cycles event (cpu-clock without one),
 * one IP sample standing for its period of cycles at its address (SPEC,
 * fine-grained CPI). Every overflow is a sample: the agent draws each CPU's
 * period from [P - D, P + D] and re-arms it at every drain, as it does the
 * branch event's. The same filters as the branch samples.
 */
SEC("perf_event")
int on_cycles(struct bpf_perf_event_data *ctx)
{
	count(EP_BPF_CYCLES_SEEN);
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	if (!wanted(tgid)) {
		count(EP_BPF_CYCLES_FILTERED);
		return 0;
	}
	__u64 ip = PT_REGS_IP(&ctx->regs);
	bool kernel = ip >> 63;
	if (kernel && !want_kernel) {
		count(EP_BPF_CYCLES_KERNEL);
		return 0;
	}
	__u64 wake = sample_wake_flag(&cycles, sizeof(struct ep_cycles_record), tgid);
	struct ep_cycles_record *r = bpf_ringbuf_reserve(&cycles, sizeof(*r), 0);
	if (!r) {
		count(EP_BPF_CYCLES_RESERVE_FAILED);
		return 0;
	}
	r->pid = tgid;
	r->tid = (__u32)id;
	r->cpu = bpf_get_smp_processor_id();
	r->flags = kernel ? EP_SAMPLE_IP_KERNEL : 0;
	r->time_ns = bpf_ktime_get_ns();
	r->cgroup_id = bpf_get_current_cgroup_id();
	r->ip = ip;
	r->period = armed_period(&cycles_period, r->cpu, ctx->sample_period);
	bpf_ringbuf_submit(r, wake);
	count(EP_BPF_CYCLES_SENT);
	return 0;
}

/* Process events wait for the drain (a new program's first sample wakes
 * the agent: sample_wake_flag), unless their ring is past half full. */
static __always_inline void proc_event(__u32 type, __u32 pid, __u32 ppid)
{
	struct ep_proc_record *r = bpf_ringbuf_reserve(&procs, sizeof(*r), 0);
	if (!r) {
		count(EP_BPF_PROC_RESERVE_FAILED);
		return;
	}
	r->type = type;
	r->pid = pid;
	r->ppid = ppid;
	r->pad = 0;
	r->time_ns = bpf_ktime_get_ns();
	r->cgroup_id = bpf_get_current_cgroup_id();
	bpf_ringbuf_submit(r, wake_flag(&procs, sizeof(*r)));
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	/* an agent filtered to pids or cgroups (an on-demand session's too)
	 * reads the maps of the processes it samples, not of every exec on
	 * the node */
	__u32 tgid = BPF_CORE_READ(p, tgid);
	if (!wanted(tgid))
		return 0;
	__u8 one = 1;
	bpf_map_update_elem(&unsampled, &tgid, &one, BPF_ANY);
	proc_event(EP_PROC_EXEC, tgid, 0);
	return 0;
}

/* A process moved between cgroups (cgroup.procs or tasks written, of any
 * hierarchy: on a hybrid host a v1 one tells containers apart). Until
 * then a process is where its parent was at the fork, and a new program
 * takes its parent's labels without a read of /proc/PID/cgroup. */
SEC("tp_btf/cgroup_attach_task")
int BPF_PROG(on_cgroup_move, struct cgroup *dst, const char *path, struct task_struct *task,
	     bool threadgroup)
{
	__u32 tgid = BPF_CORE_READ(task, tgid);
	if (tgid != 0 && tgid != agent_tgid &&
	    (!filter_pids || bpf_map_lookup_elem(&target_pids, &tgid)))
		proc_event(EP_PROC_CGROUP, tgid, 0);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 tgid = BPF_CORE_READ(child, tgid);
	/* a new thread shares its process's mappings: only processes matter */
	if (tgid != BPF_CORE_READ(parent, tgid) && wanted(tgid))
		proc_event(EP_PROC_FORK, tgid, BPF_CORE_READ(parent, tgid));
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *p)
{
	if (BPF_CORE_READ(p, pid) == BPF_CORE_READ(p, tgid))
		proc_event(EP_PROC_EXIT, BPF_CORE_READ(p, tgid), 0);
	return 0;
}

#define EP_PROT_EXEC	 0x4
#define EP_MAP_ANONYMOUS 0x20
#if defined(__TARGET_ARCH_arm64)
#define EP_NR_MMAP 222
#else
#define EP_NR_MMAP 9 /* x86-64 */
#endif

/*
 * Executable file mappings after a process's start (dlopen): the agent
 * re-reads that process's maps. The raw sys_enter tracepoint through
 * tp_btf, keeping mmap(PROT_EXEC) of a file: the syscall's arguments are a
 * stable ABI on every kernel, and tp_btf needs no tracefs (a DaemonSet
 * rarely mounts it; the syscalls/sys_enter_mmap event does need it, and is
 * itself a filter on this same tracepoint, so it would cost the system
 * calls no less). Tried and not taken: fexit of vm_mmap_pgoff() (loading
 * it fails with EPERM on this project's CI VMs, as any fentry there); the
 * mmap:vma_store tracepoint (from 6.1, absent from 6.18's BTF); kprobes on
 * do_mmap or mmap_region (signatures changed within 6.x). Its cost: every system call
 * of the machine runs these few instructions. It fires before the mapping
 * exists, so the agent re-reads at the process's next sample, and a burst
 * of mappings (500 libraries at start) costs one read.
 * mprotect(PROT_EXEC) of a file mapping is not seen: ld.so and dlopen map
 * code segments with mmap.
 */
SEC("tp_btf/sys_enter")
int BPF_PROG(on_mmap, struct pt_regs *regs, long id)
{
	if (id != EP_NR_MMAP)
		return 0;
	unsigned long prot = PT_REGS_PARM3_CORE_SYSCALL(regs);
	unsigned long flags = PT_REGS_PARM4_CORE_SYSCALL(regs);
	long fd = (long)PT_REGS_PARM5_CORE_SYSCALL(regs);
	if (!(prot & EP_PROT_EXEC) || (flags & EP_MAP_ANONYMOUS) || fd < 0)
		return 0;
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	if (!wanted(tgid))
		return 0;
	count(EP_BPF_MMAP_EXEC);
	proc_event(EP_PROC_MMAP, tgid, 0);
	return 0;
}
