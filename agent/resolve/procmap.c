/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/resolve/procmap.h"

#include <stdlib.h>
#include <string.h>

#include "common/util/u64map.h"

struct mapping {
	uint64_t start, end, pgoff;
	struct ep_binary *bin;
	bool anon; /* code of no file */
};

struct process {
	uint32_t pid;
	struct mapping *maps; /* sorted, non-overlapping */
	size_t n, cap;
	size_t last_hit;
	/* from the map's counter, at this process's last change: unique
	 * across processes and over time, so a reused pid never meets its
	 * predecessor's cached resolutions */
	uint64_t generation;
};

struct ep_procmap {
	struct ep_u64map index; /* pid -> index in procs */
	struct process *procs;
	size_t nprocs, cap;
	bool last_valid;
	uint32_t last_pid;
	size_t last_proc;
	uint64_t changes; /* hands out the processes' generations */
};

struct ep_procmap *ep_procmap_new(void)
{
	return calloc(1, sizeof(struct ep_procmap));
}

void ep_procmap_free(struct ep_procmap *pm)
{
	if (!pm)
		return;
	for (size_t i = 0; i < pm->nprocs; i++)
		free(pm->procs[i].maps);
	free(pm->procs);
	ep_u64map_free(&pm->index);
	free(pm);
}

static struct process *find_process(struct ep_procmap *pm, uint32_t pid)
{
	if (pm->last_valid && pm->last_pid == pid)
		return &pm->procs[pm->last_proc];
	uint64_t *slot = ep_u64map_get(&pm->index, pid);
	if (!slot)
		return NULL;
	pm->last_valid = true;
	pm->last_pid = pid;
	pm->last_proc = *slot;
	return &pm->procs[*slot];
}

static struct process *get_process(struct ep_procmap *pm, uint32_t pid)
{
	struct process *p = find_process(pm, pid);
	if (p)
		return p;
	if (pm->nprocs == pm->cap) {
		size_t cap = pm->cap ? pm->cap * 2 : 64;
		struct process *procs = realloc(pm->procs, cap * sizeof(*procs));
		if (!procs)
			return NULL;
		pm->procs = procs;
		pm->cap = cap;
	}
	uint64_t *slot = ep_u64map_upsert(&pm->index, pid, NULL);
	if (!slot)
		return NULL;
	*slot = pm->nprocs;
	pm->procs[pm->nprocs] = (struct process){.pid = pid, .generation = ++pm->changes};
	pm->last_valid = false;
	return &pm->procs[pm->nprocs++];
}

static int reserve(struct process *p, size_t n)
{
	if (n <= p->cap)
		return 0;
	size_t cap = p->cap ? p->cap : 16;
	while (cap < n)
		cap *= 2;
	struct mapping *maps = realloc(p->maps, cap * sizeof(*maps));
	if (!maps)
		return -1;
	p->maps = maps;
	p->cap = cap;
	return 0;
}

static void add_mapping(struct ep_procmap *pm, uint32_t pid, uint64_t start, uint64_t len,
			uint64_t pgoff, struct ep_binary *bin, bool anon)
{
	if (len == 0 || start + len < start)
		return;
	uint64_t end = start + len;
	struct process *p = get_process(pm, pid);
	/* an overlapped mapping can split in two: room for one more, plus ours */
	if (!p || reserve(p, p->n + 2) != 0)
		return;
	p->generation = ++pm->changes;
	size_t out = 0, insert_at = 0;
	struct mapping right = {0};
	bool have_right = false;
	for (size_t i = 0; i < p->n; i++) {
		struct mapping m = p->maps[i];
		if (m.end <= start || m.start >= end) {
			p->maps[out++] = m;
			if (m.end <= start)
				insert_at = out;
			continue;
		}
		if (m.start < start) {
			struct mapping left = m;
			left.end = start;
			p->maps[out++] = left;
			insert_at = out;
		}
		if (m.end > end) {
			right = m;
			right.pgoff += end - m.start;
			right.start = end;
			have_right = true;
		}
	}
	p->n = out;
	memmove(&p->maps[insert_at + 1], &p->maps[insert_at],
		(p->n - insert_at) * sizeof(*p->maps));
	p->maps[insert_at] =
	    (struct mapping){.start = start, .end = end, .pgoff = pgoff, .bin = bin, .anon = anon};
	p->n++;
	if (have_right) {
		size_t at = insert_at + 1;
		memmove(&p->maps[at + 1], &p->maps[at], (p->n - at) * sizeof(*p->maps));
		p->maps[at] = right;
		p->n++;
	}
	p->last_hit = insert_at;
}

void ep_procmap_add(struct ep_procmap *pm, uint32_t pid, uint64_t start, uint64_t len,
		    uint64_t pgoff, struct ep_binary *bin)
{
	add_mapping(pm, pid, start, len, pgoff, bin, false);
}

void ep_procmap_add_anon(struct ep_procmap *pm, uint32_t pid, uint64_t start, uint64_t len)
{
	add_mapping(pm, pid, start, len, 0, NULL, true);
}

void ep_procmap_fork(struct ep_procmap *pm, uint32_t child_pid, uint32_t parent_pid)
{
	if (child_pid == parent_pid)
		return;
	struct process *parent = find_process(pm, parent_pid);
	size_t n = parent ? parent->n : 0;
	size_t parent_index = parent ? (size_t)(parent - pm->procs) : 0;
	struct process *child = get_process(pm, child_pid);
	if (!child)
		return;
	child->n = 0; /* a reused pid starts over */
	child->generation = ++pm->changes;
	if (n == 0 || reserve(child, n) != 0)
		return;
	parent = &pm->procs[parent_index]; /* get_process() may have moved it */
	memcpy(child->maps, parent->maps, n * sizeof(*child->maps));
	child->n = n;
	child->last_hit = 0;
}

void ep_procmap_exec(struct ep_procmap *pm, uint32_t pid)
{
	struct process *p = find_process(pm, pid);
	if (p) {
		p->n = 0;
		p->last_hit = 0;
		p->generation = ++pm->changes;
	}
}

void ep_procmap_exit(struct ep_procmap *pm, uint32_t pid)
{
	/* kept: samples taken before the exit can still be on their way (a
	 * recording's time order, another ring buffer); ep_procmap_forget()
	 * drops a process once that cannot happen any more */
	(void)pm;
	(void)pid;
}

void ep_procmap_forget(struct ep_procmap *pm, uint32_t pid)
{
	uint64_t *slot = ep_u64map_get(&pm->index, pid);
	if (!slot)
		return;
	size_t i = *slot;
	pm->changes++;
	pm->last_valid = false;
	free(pm->procs[i].maps);
	ep_u64map_remove(&pm->index, pid);
	size_t last = pm->nprocs - 1;
	if (i != last) {
		pm->procs[i] = pm->procs[last];
		uint64_t *moved = ep_u64map_get(&pm->index, pm->procs[i].pid);
		if (moved)
			*moved = i;
	}
	pm->nprocs--;
}

size_t ep_procmap_processes(const struct ep_procmap *pm)
{
	return pm->nprocs;
}

void ep_procmap_mark_binaries(const struct ep_procmap *pm, uint8_t *in_use, size_t n)
{
	for (size_t i = 0; i < pm->nprocs; i++) {
		const struct process *p = &pm->procs[i];
		for (size_t k = 0; k < p->n; k++) {
			uint32_t index =
			    p->maps[k].bin ? ep_binary_index(p->maps[k].bin) : UINT32_MAX;
			if (index < n)
				in_use[index] = 1;
		}
	}
}

uint64_t ep_procmap_generation(struct ep_procmap *pm, uint32_t pid)
{
	const struct process *p = find_process(pm, pid);
	return p ? p->generation : 0;
}

const uint64_t *ep_procmap_changes(const struct ep_procmap *pm)
{
	return &pm->changes;
}

enum ep_resolve_status ep_procmap_resolve(struct ep_procmap *pm, uint32_t pid, uint64_t addr,
					  struct ep_resolved *out)
{
	if (ep_addr_is_kernel(addr))
		return EP_RESOLVE_KERNEL;
	struct process *p = find_process(pm, pid);
	if (!p)
		return EP_RESOLVE_NO_PROCESS;
	const struct mapping *m = NULL;
	if (p->last_hit < p->n && addr >= p->maps[p->last_hit].start &&
	    addr < p->maps[p->last_hit].end) {
		m = &p->maps[p->last_hit];
	} else {
		size_t lo = 0, hi = p->n;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (p->maps[mid].start <= addr)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo == 0 || addr >= p->maps[lo - 1].end)
			return EP_RESOLVE_NO_MAPPING;
		p->last_hit = lo - 1;
		m = &p->maps[lo - 1];
	}
	if (!m->bin)
		return m->anon ? EP_RESOLVE_ANON_CODE : EP_RESOLVE_UNKNOWN_BINARY;
	uint64_t offset = addr - m->start + m->pgoff;
	uint64_t seg_offset, seg_vaddr, seg_filesz;
	if (!ep_binary_load_segment(m->bin, offset, &seg_offset, &seg_vaddr, &seg_filesz))
		return EP_RESOLVE_NOT_LOADED;
	out->bin = m->bin;
	out->vaddr_bias = (int64_t)(seg_vaddr - seg_offset + m->pgoff - m->start);
	out->vaddr = (uint64_t)((int64_t)addr + out->vaddr_bias);
	/* the part of the mapping that this one segment covers: inside it the
	 * same bias holds */
	uint64_t seg_rt_start = m->start + (seg_offset - m->pgoff);
	if (seg_offset < m->pgoff)
		seg_rt_start = m->start - (m->pgoff - seg_offset);
	uint64_t seg_rt_end = seg_rt_start + seg_filesz;
	out->map_start = seg_rt_start > m->start ? seg_rt_start : m->start;
	out->map_end = seg_rt_end < m->end ? seg_rt_end : m->end;
	return EP_RESOLVE_OK;
}

static bool parse_hex(const char *s, const char *end, const char **after, uint64_t *out)
{
	uint64_t v = 0;
	const char *p = s;
	for (; p < end; p++) {
		unsigned d;
		if (*p >= '0' && *p <= '9')
			d = (unsigned)(*p - '0');
		else if (*p >= 'a' && *p <= 'f')
			d = (unsigned)(*p - 'a' + 10);
		else
			break;
		if (v >> 60)
			return false;
		v = v << 4 | d;
	}
	*after = p;
	*out = v;
	return p > s;
}

/* Past one field and the blanks after it. */
static const char *skip_field(const char *p, const char *end)
{
	while (p < end && *p != ' ')
		p++;
	while (p < end && *p == ' ')
		p++;
	return p;
}

/* "START-END PERMS OFFSET DEV INODE   PATH": parsed by hand, since the
 * live agent reads the maps of every process the machine starts (sscanf
 * over stdio cost it more than the kernel's writing of them). */
bool ep_maps_next_exec(char *text, size_t len, size_t *pos, struct ep_maps_entry *out)
{
	static const char deleted[] = " (deleted)";
	const size_t dlen = sizeof(deleted) - 1;
	while (*pos < len) {
		char *line = text + *pos, *end = memchr(line, '\n', len - *pos);
		if (!end)
			break; /* a last line cut short: its path may be too */
		*pos = (size_t)(end - text) + 1;
		const char *p = line;
		uint64_t start, stop, offset;
		if (!parse_hex(p, end, &p, &start) || p >= end || *p++ != '-' ||
		    !parse_hex(p, end, &p, &stop) || p >= end || *p++ != ' ' || end - p < 5 ||
		    p[2] != 'x' || stop <= start)
			continue;
		p = skip_field(p, end);
		if (!parse_hex(p, end, &p, &offset))
			continue;
		while (p < end && *p == ' ')
			p++;
		p = skip_field(skip_field(p, end), end); /* device, inode */
		*end = '\0';
		out->start = start;
		out->end = stop;
		out->offset = offset;
		out->deleted = false;
		if ((size_t)(end - p) > dlen && memcmp(end - dlen, deleted, dlen) == 0 &&
		    *p == '/') {
			end[-(ptrdiff_t)dlen] = '\0';
			out->deleted = true;
		}
		out->path = p;
		return true;
	}
	return false;
}
