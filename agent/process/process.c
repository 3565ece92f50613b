/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/process/process.h"

#include <stdlib.h>
#include <string.h>

#include "common/util/arch.h"
#include "common/util/clock.h"
#include "common/util/u64map.h"

/* a process whose addresses do not resolve gets its maps re-read, at most
 * this often: new libraries appear, but /proc is not free */
#define MAPS_REREAD_NS 1000000000ULL

struct exit_note {
	uint32_t pid;
	uint64_t at;
};

struct ep_process_table {
	struct ep_u64map index; /* pid -> struct ep_process *, retiring ones included */
	size_t retiring;
	struct ep_process *last;  /* the last found: samples come in runs of one process */
	struct ep_process *blank; /* zeroed, for the next new process (NULL: none yet) */
	uint64_t changes;	  /* hands out the processes' generations */
	/* the pids sampled since the last flush (their records say so too) */
	uint32_t *sampled;
	size_t nsampled;
	/* exited processes by exit time, oldest first: a ring of exits_cap */
	struct exit_note *exits;
	size_t exits_head, exits_n, exits_cap;
};

struct ep_process_table *ep_process_table_new(void)
{
	struct ep_process_table *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->sampled = malloc(EP_SAMPLED_PIDS_MAX * sizeof(*t->sampled));
	if (!t->sampled) {
		free(t);
		return NULL;
	}
	return t;
}

static struct ep_process *record_at_slot(const uint64_t *slot)
{
	return (struct ep_process *)(uintptr_t)*slot;
}

static struct ep_process *record_at(const struct ep_u64map *m, size_t i)
{
	return record_at_slot(&m->values[i]);
}

void ep_process_table_free(struct ep_process_table *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->index.capacity; i++) {
		if (!t->index.used[i])
			continue;
		ep_mappings_free(&record_at(&t->index, i)->maps);
		free(record_at(&t->index, i));
	}
	ep_u64map_free(&t->index);
	free(t->blank);
	free(t->sampled);
	free(t->exits);
	free(t);
}

/* Any record of pid, a retiring one too. */
static struct ep_process *lookup(struct ep_process_table *t, uint32_t pid)
{
	if (t->last && t->last->pid == pid)
		return t->last;
	const uint64_t *slot = ep_u64map_get(&t->index, pid);
	if (!slot)
		return NULL;
	t->last = (struct ep_process *)(uintptr_t)*slot;
	return t->last;
}

struct ep_process *ep_process_find(struct ep_process_table *t, uint32_t pid)
{
	struct ep_process *p = lookup(t, pid);
	return p && !p->retiring ? p : NULL;
}

struct ep_process *ep_process_of_counts(struct ep_process_table *t, uint32_t pid)
{
	return lookup(t, pid);
}

/* A process starts (again, for a retiring pid used again: what it has
 * pending stays, and so does its set until it is labelled anew). */
static void start(struct ep_process_table *t, struct ep_process *p)
{
	if (p->retiring) {
		p->retiring = false;
		t->retiring--;
	}
	ep_mappings_clear(&p->maps);
	p->generation = ++t->changes;
	p->maps_read_ns = p->exit_ns = p->mmap_ns = 0;
	p->rereads_left = 0;
	p->execd = false;
}

/* pid's record, made when new: one probe of the index finds it or makes
 * its slot, which takes the blank record kept ready. */
static struct ep_process *find_or_make(struct ep_process_table *t, uint32_t pid)
{
	if (!t->blank && !(t->blank = calloc(1, sizeof(*t->blank))))
		return NULL;
	bool made;
	uint64_t *slot = ep_u64map_upsert(&t->index, pid, &made);
	if (!slot)
		return NULL;
	if (made) {
		*slot = (uint64_t)(uintptr_t)t->blank;
		t->blank = NULL;
		record_at_slot(slot)->pid = pid;
		record_at_slot(slot)->generation = ++t->changes;
	}
	return t->last = record_at_slot(slot);
}

struct ep_process *ep_process_get(struct ep_process_table *t, uint32_t pid)
{
	struct ep_process *p = t->last && t->last->pid == pid ? t->last : find_or_make(t, pid);
	if (p && p->retiring) {
		start(t, p);
		p->labelled = false;
	}
	return p;
}

void ep_process_map(struct ep_process_table *t, uint32_t pid, uint64_t start, uint64_t len,
		    uint64_t pgoff, struct ep_binary *bin, bool anon)
{
	if (len == 0 || start + len < start)
		return;
	struct ep_process *p = ep_process_get(t, pid);
	if (p && ep_mappings_add(&p->maps, start, len, pgoff, bin, anon) == 0)
		p->generation = ++t->changes;
}

struct ep_process *ep_process_fork(struct ep_process_table *t, uint32_t child_pid,
				   uint32_t parent_pid)
{
	if (child_pid == parent_pid)
		return ep_process_find(t, child_pid);
	struct ep_process *child = ep_process_get(t, child_pid);
	if (!child)
		return NULL;
	/* a reused pid starts over; a child runs in its parent's cgroup
	 * until moved */
	start(t, child);
	const struct ep_process *parent = lookup(t, parent_pid);
	child->set = parent ? parent->set : 0;
	child->labelled = parent && parent->labelled;
	child->cgroup_id = parent ? parent->cgroup_id : 0;
	if (parent && !parent->retiring) {
		ep_mappings_copy(&child->maps, &parent->maps);
		child->maps_read_ns = parent->maps_read_ns;
	}
	t->last = child;
	return child;
}

struct ep_process *ep_process_exec(struct ep_process_table *t, uint32_t pid)
{
	struct ep_process *p = ep_process_get(t, pid);
	if (p) {
		start(t, p);
		p->execd = true;
	}
	return p;
}

void ep_process_exit(struct ep_process_table *t, uint32_t pid, uint64_t at_ns)
{
	struct ep_process *p = ep_process_find(t, pid);
	if (!p)
		return;
	if (t->exits_n == t->exits_cap) {
		size_t cap = t->exits_cap ? t->exits_cap * 2 : 256;
		struct exit_note *e = malloc(cap * sizeof(*e));
		if (!e)
			return; /* kept until its pid is used again: a leak, not an error */
		for (size_t i = 0; i < t->exits_n; i++)
			e[i] = t->exits[(t->exits_head + i) % t->exits_cap];
		free(t->exits);
		t->exits = e;
		t->exits_cap = cap;
		t->exits_head = 0;
	}
	p->exit_ns = at_ns ? at_ns : 1;
	p->mmap_ns = 0; /* a process gone needs no maps */
	t->exits[(t->exits_head + t->exits_n++) % t->exits_cap] =
	    (struct exit_note){pid, p->exit_ns};
}

static void remove_record(struct ep_process_table *t, struct ep_process *p)
{
	if (t->last == p)
		t->last = NULL;
	if (p->retiring)
		t->retiring--;
	ep_u64map_remove(&t->index, p->pid);
	ep_mappings_free(&p->maps);
	free(p);
}

void ep_process_forget(struct ep_process_table *t, uint32_t pid)
{
	struct ep_process *p = ep_process_find(t, pid);
	if (!p)
		return;
	t->changes++;
	if (!p->sampled) {
		remove_record(t, p);
		return;
	}
	/* its pending counts still go to its set at the next flush */
	ep_mappings_free(&p->maps);
	p->generation = t->changes;
	p->retiring = true;
	t->retiring++;
}

size_t ep_process_forget_exited(struct ep_process_table *t, uint64_t before_ns)
{
	size_t n = 0;
	while (t->exits_n && t->exits[t->exits_head].at < before_ns) {
		struct exit_note e = t->exits[t->exits_head];
		t->exits_head = (t->exits_head + 1) % t->exits_cap;
		t->exits_n--;
		const struct ep_process *p = ep_process_find(t, e.pid);
		if (!p || p->exit_ns != e.at)
			continue; /* the pid was used again since */
		ep_process_forget(t, e.pid);
		n++;
	}
	return n;
}

void ep_process_seen_in(struct ep_process *p, uint64_t id)
{
	if (p->cgroup_id != id) {
		p->cgroup_id = id;
		p->labelled = false;
	}
}

struct ep_process *ep_process_sampled(struct ep_process_table *t, const struct ep_process_sample *s,
				      enum ep_maps_read *due, struct ep_sample_ip *ip)
{
	*due = EP_MAPS_NOT_DUE;
	*ip = (struct ep_sample_ip){
	    .addr = s->ip, .kernel = s->kernel, .status = EP_RESOLVE_NO_PROCESS};
	struct ep_process *p = ep_process_get(t, s->pid);
	if (!p)
		return NULL;
	if (!p->maps_read_ns) {
		/* Labelled where it runs now (runtimes move a container's first
		 * process into its cgroup between fork and exec), unless it is
		 * where its parent was when labelled: no move of it was seen,
		 * and it is in the same cgroup (v2). As ep_process_seen_in. */
		if (p->cgroup_id != s->cgroup_id) {
			p->cgroup_id = s->cgroup_id;
			p->labelled = false;
		}
		*due = p->execd ? EP_MAPS_AT_EXEC : EP_MAPS_AT_FIRST_SAMPLE;
		return p;
	}
	if (p->mmap_ns && s->time_ns >= p->mmap_ns) {
		*due = EP_MAPS_AT_MMAP;
		return p;
	}
	if (s->kernel)
		return p;
	/* code of no file (JIT output) resolves as such: a re-read would find
	 * nothing new, and a JIT's maps are long */
	ep_mappings_resolve_ip(&p->maps, ip);
	bool unresolved = ip->status != EP_RESOLVE_OK && ip->status != EP_RESOLVE_ANON_CODE;
	if (unresolved && ep_mono_ns() - p->maps_read_ns > MAPS_REREAD_NS) {
		*due = EP_MAPS_UNRESOLVED;
	} else if (ip->status == EP_RESOLVE_NO_MAPPING && s->time_ns > p->maps_read_ns &&
		   p->rereads_left) {
		p->rereads_left--;
		*due = EP_MAPS_AFTER_EXEC;
	}
	return p;
}

enum ep_resolve_status ep_process_resolve(struct ep_process_table *t, uint32_t pid, uint64_t addr,
					  struct ep_resolved *out)
{
	struct ep_process *p = ep_process_find(t, pid);
	if (!p)
		return ep_addr_is_kernel(addr) ? EP_RESOLVE_KERNEL : EP_RESOLVE_NO_PROCESS;
	return ep_mappings_resolve(&p->maps, addr, out);
}

bool ep_process_mark_sampled(struct ep_process_table *t, struct ep_process *p)
{
	if (p->sampled)
		return true;
	if (t->nsampled == EP_SAMPLED_PIDS_MAX)
		return false;
	t->sampled[t->nsampled++] = p->pid;
	p->sampled = true;
	return true;
}

void ep_process_flushed(struct ep_process_table *t)
{
	for (size_t i = 0; i < t->nsampled; i++) {
		struct ep_process *p = lookup(t, t->sampled[i]);
		if (!p)
			continue;
		p->sampled = false;
		if (p->retiring)
			remove_record(t, p);
	}
	t->nsampled = 0;
}

size_t ep_process_count(const struct ep_process_table *t)
{
	return t->index.count - t->retiring;
}

void ep_process_each(struct ep_process_table *t, void (*fn)(void *ctx, struct ep_process *p),
		     void *ctx)
{
	for (size_t i = 0; i < t->index.capacity; i++)
		if (t->index.used[i])
			fn(ctx, record_at(&t->index, i));
}

void ep_process_mark_binaries(struct ep_process_table *t, uint8_t *in_use, size_t n)
{
	for (size_t i = 0; i < t->index.capacity; i++)
		if (t->index.used[i])
			ep_mappings_mark_binaries(&record_at(&t->index, i)->maps, in_use, n);
}
