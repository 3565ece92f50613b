/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/pipeline/pipeline.h"

#include <stdlib.h>
#include <string.h>

#include "common/profile/merge.h"
#include "common/util/log.h"
#include "common/util/u64map.h"

struct noted_build_id {
	char *path;
	uint8_t id[EP_BUILD_ID_MAX];
	uint8_t len;
};

struct ep_pipeline {
	struct ep_pipeline_config cfg;
	struct ep_binary_registry *binaries;
	struct ep_process_table *procs; /* every process's mappings, set, pending counts */
	/* one per binary, shared by reconstruct and every label set's aggregator */
	struct ep_decoder_cache *decoders;
	struct ep_reconstructor *reconstructor;
	struct ep_aggregator *aggregator; /* the unlabelled set's, sets[0] */
	bool branches_seen, lazy_code;	  /* see ep_pipeline_sample() */
	/* Label sets (containers): counts kept apart per set, each with its
	 * own aggregator; a process's record says its set (0: unlabelled). A
	 * set no process uses any more is freed once its counts were taken.
	 * Only processes sampled since the reconstructor's last flush can
	 * have pending counts, which go to the process's set of the moment
	 * they are flushed; others change sets without a flush, the common
	 * case on a busy node: a container's short processes fork and exit
	 * hundreds of times a second, and each flush walks the whole entry
	 * memo. */
	struct label_set {
		Edgeprof__V1__Labels labels;
		struct ep_aggregator *agg;
	} * sets[EP_MAX_LABEL_SETS];
	size_t nsets;				   /* slots in use, holes included */
	uint64_t retired_branches, retired_ranges; /* of freed sets */
	uint64_t unlabelled_overflow;		   /* pids left unlabelled: too many sets */
	struct ep_trace trace;
	struct ep_spans spans;
	/* the sample IPs' last mapping: most fall in the one before. Valid
	 * while the process's mappings keep the generation it was filled
	 * under (unique to one process's mappings at one time). */
	struct ip_cache {
		bool valid;
		uint32_t bin;
		uint64_t generation, start, end;
		int64_t bias;
	} ip_cache;
	struct ep_chop_stats chop_stats;
	unsigned max_entries;
	uint64_t lost;
	uint64_t gone; /* processes exited before their maps or binaries were read */
	struct ep_pipeline_cycles cycles;
	uint64_t cycles_samples, cycles_unresolved, cycles_lost;
	uint64_t ip_kernel, ip_jit, ip_unresolved; /* samples whose IP no binary holds */
	uint64_t stacks_cut;			   /* stacks cut at a caller no binary holds */
	uint64_t retired_stacks_dropped;	   /* of freed sets */
	struct ep_stack_frame frames[EP_MAX_STACK_DEPTH];
	double cycles_scale; /* as of the last build */
	struct noted_build_id *noted;
	size_t nnoted, noted_cap;
	struct ep_u64map noted_by_path; /* path hash -> noted index (probing on the hash) */
	Edgeprof__V1__Stats sent;	/* totals at the last delta */
};

/* A recording names each file's build-id once; mappings look it up by path. */
static const struct noted_build_id *find_noted(const struct ep_pipeline *p, const char *path)
{
	for (uint64_t h = ep_hash_bytes(path, strlen(path));; h++) {
		const uint64_t *i = ep_u64map_get(&p->noted_by_path, h);
		if (!i)
			return NULL;
		if (strcmp(p->noted[*i].path, path) == 0)
			return &p->noted[*i];
	}
}

static void free_set(struct label_set *set)
{
	if (!set)
		return;
	free(set->labels.container_id);
	free(set->labels.pod);
	free(set->labels.namespace_);
	free(set->labels.cgroup);
	free(set->labels.process);
	ep_aggregator_free(set->agg);
	free(set);
}

static const char *label_or_empty(const char *s)
{
	return s ? s : "";
}

static bool same_labels(const Edgeprof__V1__Labels *a, const Edgeprof__V1__Labels *b)
{
	return strcmp(label_or_empty(a->container_id), label_or_empty(b->container_id)) == 0 &&
	       strcmp(label_or_empty(a->pod), label_or_empty(b->pod)) == 0 &&
	       strcmp(label_or_empty(a->namespace_), label_or_empty(b->namespace_)) == 0 &&
	       strcmp(label_or_empty(a->cgroup), label_or_empty(b->cgroup)) == 0 &&
	       strcmp(label_or_empty(a->process), label_or_empty(b->process)) == 0;
}

static bool labels_empty(const Edgeprof__V1__Labels *l)
{
	return !*label_or_empty(l->container_id) && !*label_or_empty(l->pod) &&
	       !*label_or_empty(l->namespace_) && !*label_or_empty(l->cgroup) &&
	       !*label_or_empty(l->process);
}

/* The set for these labels, made when new; 0 (unlabelled) when the table
 * is full. */
static size_t set_for(struct ep_pipeline *p, const Edgeprof__V1__Labels *l)
{
	if (!l || labels_empty(l))
		return 0;
	size_t hole = 0;
	for (size_t i = 1; i < p->nsets; i++) {
		if (!p->sets[i]) {
			if (!hole)
				hole = i;
		} else if (same_labels(&p->sets[i]->labels, l)) {
			return i;
		}
	}
	size_t i = hole ? hole : p->nsets;
	if (i >= EP_MAX_LABEL_SETS)
		return 0;
	struct label_set *set = calloc(1, sizeof(*set));
	if (!set)
		return 0;
	edgeprof__v1__labels__init(&set->labels);
	set->labels.container_id = strdup(label_or_empty(l->container_id));
	set->labels.pod = strdup(label_or_empty(l->pod));
	set->labels.namespace_ = strdup(label_or_empty(l->namespace_));
	set->labels.cgroup = strdup(label_or_empty(l->cgroup));
	set->labels.process = strdup(label_or_empty(l->process));
	set->agg = ep_aggregator_new(p->decoders, p->binaries, p->cfg.range_mode);
	if (set->agg && p->cfg.max_stacks)
		ep_aggregator_set_max_stacks(set->agg, p->cfg.max_stacks);
	if (!set->agg || !set->labels.container_id || !set->labels.pod || !set->labels.namespace_ ||
	    !set->labels.cgroup || !set->labels.process) {
		free_set(set);
		return 0;
	}
	p->sets[i] = set;
	if (i == p->nsets)
		p->nsets++;
	return i;
}

static size_t set_of_pid(const struct ep_pipeline *p, uint32_t pid)
{
	if (p->nsets == 1)
		return 0;
	const struct ep_process *pr = ep_process_of_counts(p->procs, pid);
	return pr ? pr->set : 0;
}

/* Hands the reconstructor's pending counts to the sets of their processes,
 * then lets the gone ones go (each was kept for that: sampled since the
 * last flush). */
static void flush_counts(struct ep_pipeline *p)
{
	ep_reconstructor_flush(p->reconstructor);
	ep_process_flushed(p->procs);
}

/* pr's counts go to set from now on: what it counted so far belongs to
 * its old set. */
static void assign(struct ep_pipeline *p, struct ep_process *pr, size_t set)
{
	if (pr->set == set)
		return;
	if (pr->sampled)
		flush_counts(p);
	pr->set = (uint32_t)set;
}

/* The set for labels, counted when there is none to be had. */
static size_t labels_set(struct ep_pipeline *p, const Edgeprof__V1__Labels *labels)
{
	size_t set = set_for(p, labels);
	if (set == 0 && labels && !labels_empty(labels))
		p->unlabelled_overflow++;
	return set;
}

void ep_pipeline_label(struct ep_pipeline *p, struct ep_process *pr,
		       const Edgeprof__V1__Labels *labels)
{
	assign(p, pr, labels_set(p, labels));
}

void ep_pipeline_label_pid(struct ep_pipeline *p, uint32_t pid, const Edgeprof__V1__Labels *labels)
{
	size_t set = labels_set(p, labels);
	struct ep_process *pr =
	    set ? ep_process_get(p->procs, pid) : ep_process_find(p->procs, pid);
	if (pr)
		assign(p, pr, set);
}

size_t ep_pipeline_label_sets(const struct ep_pipeline *p)
{
	size_t n = 0;
	for (size_t i = 1; i < p->nsets; i++)
		n += p->sets[i] != NULL;
	return n;
}

/* The registry's eviction asks: the binaries this pipeline's processes map,
 * and those with counts not yet taken (a file-only agent's totals are
 * never taken: its counted binaries stay). */
static void mark_binaries(void *ctx, uint8_t *in_use, size_t n)
{
	struct ep_pipeline *p = ctx;
	flush_counts(p);
	ep_process_mark_binaries(p->procs, in_use, n);
	for (size_t i = 0; i < p->nsets; i++)
		if (p->sets[i])
			ep_aggregator_mark_binaries(p->sets[i]->agg, in_use, n);
}

static void forget_binaries(void *ctx, const uint8_t *evicted, size_t n)
{
	struct ep_pipeline *p = ctx;
	ep_reconstructor_forget_binaries(p->reconstructor, evicted, n);
	for (size_t i = 0; i < p->nsets; i++)
		if (p->sets[i])
			ep_aggregator_forget_binaries(p->sets[i]->agg, evicted, n);
	ep_decoder_cache_forget(p->decoders, evicted, n);
	p->ip_cache.valid = false;
}

/* Entries the reconstructor counted whole, in bulk. */
static void count_spans(void *ctx, uint32_t pid, const struct ep_span *span, uint64_t times,
			uint64_t mispredicted)
{
	struct ep_pipeline *p = ctx;
	ep_aggregate_span_times(p->sets[set_of_pid(p, pid)]->agg, span, times, mispredicted);
}

void ep_pipeline_config_default(struct ep_pipeline_config *cfg)
{
	cfg->chop = EP_CHOP_AUTO;
	cfg->chop_taken = false;
	cfg->range_mode = EP_RANGES_SPLIT;
	cfg->append_trigger = true;
	cfg->calls_only = false;
	cfg->max_stacks = EP_STACKS_MAX;
}

struct ep_pipeline *ep_pipeline_new(const struct ep_pipeline_config *cfg,
				    struct ep_binary_registry *binaries)
{
	struct ep_pipeline *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->cfg = *cfg;
	p->binaries = binaries;
	edgeprof__v1__stats__init(&p->sent);
	p->procs = ep_process_table_new();
	p->decoders = ep_decoder_cache_new(binaries);
	p->reconstructor = p->procs && p->decoders ? ep_reconstructor_new(p->decoders) : NULL;
	p->aggregator =
	    p->reconstructor ? ep_aggregator_new(p->decoders, binaries, cfg->range_mode) : NULL;
	if (p->aggregator && cfg->max_stacks)
		ep_aggregator_set_max_stacks(p->aggregator, cfg->max_stacks);
	p->sets[0] = p->aggregator ? calloc(1, sizeof(*p->sets[0])) : NULL;
	struct ep_binreg_user user = {.mark = mark_binaries, .forget = forget_binaries, .ctx = p};
	if (!p->sets[0] || ep_binreg_add_user(binaries, &user) != 0) {
		ep_pipeline_free(p);
		return NULL;
	}
	edgeprof__v1__labels__init(&p->sets[0]->labels);
	p->sets[0]->agg = p->aggregator;
	p->nsets = 1;
	ep_reconstructor_set_span_sink(p->reconstructor, count_spans, p);
	ep_reconstructor_set_append_trigger(p->reconstructor, cfg->append_trigger);
	ep_reconstructor_set_calls_only(p->reconstructor, cfg->calls_only);
	return p;
}

void ep_pipeline_free(struct ep_pipeline *p)
{
	if (!p)
		return;
	ep_binreg_remove_user(p->binaries, p);
	for (size_t i = 1; i < p->nsets; i++)
		free_set(p->sets[i]);
	free(p->sets[0]);
	ep_aggregator_free(p->aggregator);
	ep_reconstructor_free(p->reconstructor);
	ep_decoder_cache_free(p->decoders);
	ep_process_table_free(p->procs);
	ep_trace_free(&p->trace);
	for (size_t i = 0; i < p->nnoted; i++)
		free(p->noted[i].path);
	free(p->noted);
	ep_u64map_free(&p->noted_by_path);
	free(p);
}

void ep_pipeline_note_build_id(struct ep_pipeline *p, const char *path, const uint8_t *build_id,
			       size_t len)
{
	if (len > EP_BUILD_ID_MAX)
		len = EP_BUILD_ID_MAX;
	/* the first entry of a path is the one looked up: another of it is
	 * kept for nothing, and made each insert probe past all the others
	 * (40,000 entries of one path took 2.2 s, 400,000 minutes) */
	if (find_noted(p, path))
		return;
	if (p->nnoted == p->noted_cap) {
		size_t cap = p->noted_cap ? p->noted_cap * 2 : 8;
		struct noted_build_id *n = realloc(p->noted, cap * sizeof(*n));
		if (!n)
			return;
		p->noted = n;
		p->noted_cap = cap;
	}
	struct noted_build_id *n = &p->noted[p->nnoted];
	n->path = strdup(path);
	if (!n->path)
		return;
	memcpy(n->id, build_id, len);
	n->len = (uint8_t)len;
	uint64_t h = ep_hash_bytes(path, strlen(path));
	while (ep_u64map_get(&p->noted_by_path, h))
		h++;
	uint64_t *slot = ep_u64map_upsert(&p->noted_by_path, h, NULL);
	if (!slot) {
		free(n->path);
		return;
	}
	*slot = p->nnoted++;
}

void ep_pipeline_mmap(struct ep_pipeline *p, uint32_t pid, uint64_t start, uint64_t len,
		      uint64_t pgoff, const char *path, const uint8_t *build_id,
		      size_t build_id_len)
{
	if (!build_id || build_id_len == 0) {
		const struct noted_build_id *n = find_noted(p, path);
		if (n) {
			build_id = n->id;
			build_id_len = n->len;
		}
	}
	struct ep_binary *bin = ep_binreg_lookup(p->binaries, path, build_id, build_id_len);
	ep_process_map(p->procs, pid, start, len, pgoff, bin, false);
}

void ep_pipeline_mmap_at(struct ep_pipeline *p, uint32_t pid, uint64_t start, uint64_t len,
			 uint64_t pgoff, const char *path, const char *open_path)
{
	struct ep_binary *bin = ep_binreg_lookup_at(p->binaries, path, open_path, NULL, 0);
	ep_process_map(p->procs, pid, start, len, pgoff, bin, false);
}

bool ep_pipeline_mmap_known(struct ep_pipeline *p, uint32_t pid, uint64_t start, uint64_t len,
			    uint64_t pgoff, const char *path, const struct stat *st)
{
	struct ep_binary *bin = ep_binreg_known(p->binaries, path, st);
	if (bin)
		ep_process_map(p->procs, pid, start, len, pgoff, bin, false);
	return bin != NULL;
}

void ep_pipeline_mmap_anon(struct ep_pipeline *p, uint32_t pid, uint64_t start, uint64_t len)
{
	ep_process_map(p->procs, pid, start, len, 0, NULL, true);
}

void ep_pipeline_fork(struct ep_pipeline *p, uint32_t child_pid, uint32_t parent_pid)
{
	/* a reused pid's pending counts go to its old set (the child takes
	 * its parent's) */
	const struct ep_process *was = ep_process_of_counts(p->procs, child_pid);
	if (was && was->sampled && child_pid != parent_pid && was->set != set_of_pid(p, parent_pid))
		flush_counts(p);
	ep_process_fork(p->procs, child_pid, parent_pid);
}

void ep_pipeline_exec(struct ep_pipeline *p, uint32_t pid)
{
	ep_process_exec(p->procs, pid);
}

void ep_pipeline_exit(struct ep_pipeline *p, uint32_t pid)
{
	/* kept: samples taken before the exit can still be on their way (a
	 * recording's time order, another ring buffer); ep_pipeline_forget()
	 * drops a process once that cannot happen any more */
	(void)p;
	(void)pid;
}

void ep_pipeline_forget(struct ep_pipeline *p, uint32_t pid)
{
	ep_process_forget(p->procs, pid);
}

size_t ep_pipeline_processes(const struct ep_pipeline *p)
{
	return ep_process_count(p->procs);
}

struct ep_process_table *ep_pipeline_process_table(struct ep_pipeline *p)
{
	return p->procs;
}

enum ep_resolve_status ep_pipeline_resolve(struct ep_pipeline *p, uint32_t pid, uint64_t addr,
					   struct ep_resolved *out)
{
	return ep_process_resolve(p->procs, pid, addr, out);
}

void ep_pipeline_add_gone(struct ep_pipeline *p, uint64_t gone)
{
	p->gone += gone;
}

void ep_pipeline_add_lost(struct ep_pipeline *p, uint64_t lost)
{
	p->lost += lost;
}

struct ep_reconstructor *ep_pipeline_reconstructor(struct ep_pipeline *p)
{
	return p->reconstructor;
}

struct ep_decoder_cache *ep_pipeline_decoders(struct ep_pipeline *p)
{
	return p->decoders;
}

unsigned ep_pipeline_chop_used(const struct ep_pipeline *p)
{
	if (p->cfg.chop != EP_CHOP_AUTO)
		return (unsigned)p->cfg.chop;
	return p->cfg.chop_taken && p->max_entries ? p->max_entries - 1 : p->max_entries;
}

/* What later samples depend on: the stack size seen (--chop auto), and
 * whether any stack was. */
static void note_stack(struct ep_pipeline *p, const struct ep_sample_record *rec)
{
	if (rec->nr_entries > p->max_entries)
		p->max_entries = rec->nr_entries > EP_MAX_BRANCH_ENTRIES ? EP_MAX_BRANCH_ENTRIES
									 : rec->nr_entries;
	/* Samples without branch stacks (no PMU for them) never need a
	 * binary's code: read it only if it is asked for. The first stack
	 * seen makes every later binary read whole at once again, so code is
	 * there even if its process is gone by the time it is decoded. */
	if (rec->flags & EP_SAMPLE_HAS_BRANCHES) {
		if (!p->branches_seen) {
			p->branches_seen = true;
			ep_binreg_set_lazy_code(p->binaries, false);
		}
	} else if (!p->branches_seen && !p->lazy_code) {
		p->lazy_code = true;
		ep_binreg_set_lazy_code(p->binaries, true);
	}
}

void ep_pipeline_skip_sample(struct ep_pipeline *p, const struct ep_sample_record *rec)
{
	note_stack(p, rec);
}

/* A user-mode IP resolved: its binary and address there when status is
 * EP_RESOLVE_OK. Returned in registers. */
struct ip_at {
	enum ep_resolve_status status;
	uint32_t bin;
	uint64_t vaddr;
};

/* A user-mode IP of pr (NULL: not known), through the last mapping
 * resolved (most IPs fall in it). */
static struct ip_at resolve_ip(struct ep_pipeline *p, struct ep_process *pr, uint64_t ip)
{
	struct ip_cache *c = &p->ip_cache;
	if (!pr)
		return (struct ip_at){.status = EP_RESOLVE_NO_PROCESS};
	if (c->valid && c->generation == pr->generation && ip >= c->start && ip < c->end)
		return (struct ip_at){.status = EP_RESOLVE_OK,
				      .bin = c->bin,
				      .vaddr = (uint64_t)((int64_t)ip + c->bias)};
	struct ep_resolved res;
	enum ep_resolve_status st = ep_mappings_resolve(&pr->maps, ip, &res);
	if (st != EP_RESOLVE_OK)
		return (struct ip_at){.status = st};
	*c = (struct ip_cache){.valid = res.map_end > res.map_start,
			       .generation = pr->generation,
			       .start = res.map_start,
			       .end = res.map_end,
			       .bias = res.vaddr_bias,
			       .bin = ep_binary_index(res.bin)};
	return (struct ip_at){.status = EP_RESOLVE_OK, .bin = c->bin, .vaddr = res.vaddr};
}

/* The label set a process's counts go to now. */
static inline struct ep_aggregator *aggregator_of(const struct ep_pipeline *p,
						  const struct ep_process *pr)
{
	return p->sets[pr && p->nsets > 1 ? pr->set : 0]->agg;
}

void ep_pipeline_cycles_sample(struct ep_pipeline *p, const struct ep_cycles_record *rec)
{
	p->cycles_samples++;
	struct ep_process *pr = ep_process_find(p->procs, rec->pid);
	struct ip_at at = {.status = EP_RESOLVE_KERNEL};
	if (!(rec->flags & EP_SAMPLE_IP_KERNEL))
		at = resolve_ip(p, pr, rec->ip);
	if (at.status == EP_RESOLVE_OK)
		ep_aggregate_cycles_ip(aggregator_of(p, pr), at.bin, at.vaddr, rec->period);
	else
		p->cycles_unresolved++;
}

void ep_pipeline_add_cycles_lost(struct ep_pipeline *p, uint64_t lost)
{
	p->cycles_lost += lost;
}

void ep_pipeline_set_cycles(struct ep_pipeline *p, const struct ep_pipeline_cycles *c)
{
	p->cycles = *c;
}

/* agent --stacks: the sample's call stack, its leaf (the IP) resolved to
 * ip_bin and ip_vaddr. Callers are named by their call site (return
 * address - 1): the call's line, even where a call to a function that
 * does not return ends its caller. A caller no binary holds cuts the stack
 * there: what lies beyond it came through a frame pointer we cannot trust. */
static void count_stack(struct ep_pipeline *p, struct ep_aggregator *agg, struct ep_process *pr,
			const struct ep_sample_record *rec, uint32_t ip_bin, uint64_t ip_vaddr)
{
	size_t n = rec->nr_stack < EP_MAX_STACK_DEPTH ? rec->nr_stack : EP_MAX_STACK_DEPTH;
	p->frames[0] = (struct ep_stack_frame){ip_bin, ip_vaddr};
	size_t used = 1;
	/* stack[0] is the sample IP itself */
	for (size_t i = 1; i < n; i++) {
		uint64_t ret = rec->stack[i];
		struct ip_at at = ret > 1 && !(ret >> 63)
				      ? resolve_ip(p, pr, ret - 1)
				      : (struct ip_at){.status = EP_RESOLVE_KERNEL};
		if (at.status != EP_RESOLVE_OK) {
			p->stacks_cut++;
			break;
		}
		p->frames[used++] = (struct ep_stack_frame){at.bin, at.vaddr};
	}
	ep_aggregate_stack(agg, p->frames, used);
}

/* A sample down the stages, its process pr (NULL: none) and its IP
 * resolved (ip_status; where to, when EP_RESOLVE_OK: ip_bin, ip_vaddr):
 * scalars, which both ways in pass on in registers. */
static void take_sample(struct ep_pipeline *p, const struct ep_sample_record *rec,
			struct ep_process *pr, enum ep_resolve_status ip_status, uint32_t ip_bin,
			uint64_t ip_vaddr)
{
	note_stack(p, rec);
	/* pending counts come from branch entries only */
	if (pr && rec->nr_entries && !ep_process_mark_sampled(p->procs, pr)) {
		flush_counts(p);
		ep_process_mark_sampled(p->procs, pr);
	}
	struct ep_aggregator *agg = aggregator_of(p, pr);
	if (rec->flags & EP_SAMPLE_IP_KERNEL)
		p->ip_kernel++;
	else if (ip_status == EP_RESOLVE_OK) {
		ep_aggregate_sample_ip(agg, ip_bin, ip_vaddr);
		if (rec->flags & EP_SAMPLE_HAS_STACK)
			count_stack(p, agg, pr, rec, ip_bin, ip_vaddr);
	} else if (ip_status == EP_RESOLVE_ANON_CODE)
		p->ip_jit++;
	else
		p->ip_unresolved++;
	unsigned chop = ep_pipeline_chop_used(p);
	if (p->cfg.chop_taken && chop) {
		/* the one-pass counting chops in branches: the trace is built whole */
		ep_reconstruct(p->reconstructor, rec, pr, &p->trace);
		size_t first = ep_chop_taken(&p->trace, chop, &p->chop_stats);
		ep_aggregate_trace(agg, &p->trace, first, true);
		return;
	}
	if (ep_reconstruct_counted(p->reconstructor, rec, pr, chop, &p->spans)) {
		/* ep_chop()'s stats for what it would have kept */
		size_t kept = p->spans.branches;
		p->chop_stats.branches_kept += kept;
		if (chop && kept > 0 && kept < chop)
			p->chop_stats.branches_short += chop - kept;
		ep_aggregate_spans(agg, &p->spans, chop == 0);
		return;
	}
	ep_reconstruct(p->reconstructor, rec, pr, &p->trace);
	size_t first = ep_chop(&p->trace, chop, &p->chop_stats);
	ep_aggregate_trace(agg, &p->trace, first, chop == 0);
}

void ep_pipeline_sample_of(struct ep_pipeline *p, const struct ep_sample_record *rec,
			   struct ep_process *pr, const struct ep_sample_ip *ip)
{
	take_sample(p, rec, pr, ip->status, ip->bin, ip->vaddr);
}

void ep_pipeline_sample(struct ep_pipeline *p, const struct ep_sample_record *rec)
{
	/* a sample with branch entries may leave counts pending: its process
	 * is made if new, to note that */
	struct ep_process *pr = rec->nr_entries ? ep_process_get(p->procs, rec->pid)
						: ep_process_find(p->procs, rec->pid);
	struct ip_at at = {.status = EP_RESOLVE_KERNEL};
	if (!(rec->flags & EP_SAMPLE_IP_KERNEL))
		at = resolve_ip(p, pr, rec->ip);
	take_sample(p, rec, pr, at.status, at.bin, at.vaddr);
}

static Edgeprof__V1__Labels *copy_labels(const Edgeprof__V1__Labels *l)
{
	Edgeprof__V1__Labels *c = malloc(sizeof(*c));
	if (!c)
		return NULL;
	edgeprof__v1__labels__init(c);
	c->container_id = strdup(l->container_id);
	c->pod = strdup(l->pod);
	c->namespace_ = strdup(l->namespace_);
	c->cgroup = strdup(l->cgroup);
	c->process = strdup(l->process);
	if (!c->container_id || !c->pod || !c->namespace_ || !c->cgroup || !c->process) {
		protobuf_c_message_free_unpacked(&c->base, NULL);
		return NULL;
	}
	return c;
}

/* Moves src's binaries to the end of dst's. */
static int append_binaries(Edgeprof__V1__Profile *dst, Edgeprof__V1__Profile *src)
{
	void *grown = realloc(dst->binaries,
			      (dst->n_binaries + src->n_binaries + 1) * sizeof(*dst->binaries));
	if (!grown)
		return -1;
	dst->binaries = grown;
	for (size_t i = 0; i < src->n_binaries; i++)
		dst->binaries[dst->n_binaries++] = src->binaries[i];
	src->n_binaries = 0;
	return 0;
}

/* Every set's counts in one profile: one BinaryProfile per binary and set,
 * labelled (the streamer's view), or merged over the sets (a file's). */
static Edgeprof__V1__Profile *build_sets(struct ep_pipeline *p, bool labelled)
{
	Edgeprof__V1__Profile *prof = ep_aggregator_build(p->aggregator);
	if (!prof)
		return NULL;
	bool merged_any = false;
	for (size_t i = 1; i < p->nsets; i++) {
		if (!p->sets[i])
			continue;
		Edgeprof__V1__Profile *part = ep_aggregator_build(p->sets[i]->agg);
		int rc = part ? 0 : -1;
		for (size_t j = 0; rc == 0 && j < part->n_binaries; j++)
			if (!(part->binaries[j]->labels = copy_labels(&p->sets[i]->labels)))
				rc = -1;
		if (rc == 0)
			rc = append_binaries(prof, part);
		if (part)
			protobuf_c_message_free_unpacked(&part->base, NULL);
		if (rc != 0) {
			protobuf_c_message_free_unpacked(&prof->base, NULL);
			return NULL;
		}
		merged_any = true;
	}
	if (labelled || !merged_any)
		return prof;
	/* a file holds one profile per binary: sum the sets */
	struct ep_merge *m = ep_merge_new();
	struct ep_merged out = {0};
	int rc = m ? 0 : -1;
	for (size_t i = 0; rc == 0 && i < prof->n_binaries; i++)
		rc = ep_merge_add(m, 0, prof->binaries[i], NULL);
	if (rc == 0)
		rc = ep_merge_build(m, &out);
	ep_merge_free(m);
	for (size_t i = 0; i < prof->n_binaries; i++)
		protobuf_c_message_free_unpacked(&prof->binaries[i]->base, NULL);
	prof->n_binaries = 0;
	if (rc == 0 && out.n) {
		void *grown = realloc(prof->binaries, out.n * sizeof(*prof->binaries));
		if (!grown) {
			rc = -1;
		} else {
			prof->binaries = grown;
			for (size_t i = 0; i < out.n; i++) {
				prof->binaries[prof->n_binaries++] = out.slices[i].delta->profile;
				out.slices[i].delta->profile = NULL;
			}
		}
	}
	ep_merged_free(&out);
	if (rc != 0) {
		protobuf_c_message_free_unpacked(&prof->base, NULL);
		return NULL;
	}
	return prof;
}

static uint64_t total_branches(const struct ep_pipeline *p)
{
	uint64_t n = p->retired_branches;
	for (size_t i = 0; i < p->nsets; i++)
		if (p->sets[i])
			n += ep_aggregator_branches(p->sets[i]->agg);
	return n;
}

static uint64_t total_stacks_dropped(const struct ep_pipeline *p)
{
	uint64_t n = p->retired_stacks_dropped;
	for (size_t i = 0; i < p->nsets; i++)
		if (p->sets[i])
			n += ep_aggregator_stacks_dropped(p->sets[i]->agg);
	return n;
}

static uint64_t total_ranges(const struct ep_pipeline *p)
{
	uint64_t n = p->retired_ranges;
	for (size_t i = 0; i < p->nsets; i++)
		if (p->sets[i])
			n += ep_aggregator_ranges(p->sets[i]->agg);
	return n;
}

/* Whether the profile's cycles are IP samples' (agent --cycles). */
static bool ip_cycles(const struct ep_pipeline *p)
{
	return p->cycles.source && strcmp(p->cycles.source, "branch_records") != 0;
}

/* SamplingConfig.cycles_scale: C / P, the chance the branch sampling gave
 * each executed branch (and range) to be counted (SPEC step 4), so an IP
 * sample's period x it is on the counts' scale; with whole stacks counted
 * (--chop 0) C is the branches counted per stack. 1 without branch
 * stacks: no counts to match, the event's own totals. */
static double cycles_scale(const struct ep_pipeline *p)
{
	if (!p->branches_seen || !p->cycles.branch_period)
		return 1.0;
	double c = ep_pipeline_chop_used(p);
	if (c == 0) {
		const struct ep_reconstruct_stats *rs = ep_reconstructor_stats(p->reconstructor);
		c = rs->samples_with_branches
			? (double)total_branches(p) / (double)rs->samples_with_branches
			: 0;
	}
	return c > 0 ? c / (double)p->cycles.branch_period : 1.0;
}

/* Every set's aggregator told how to build its cycles, before a build. */
static void set_cycles_mode(struct ep_pipeline *p)
{
	p->cycles_scale = ip_cycles(p) ? cycles_scale(p) : 0;
	for (size_t i = 0; i < p->nsets; i++)
		if (p->sets[i])
			ep_aggregator_set_ip_cycles(p->sets[i]->agg, ip_cycles(p), p->cycles_scale);
}

static bool any_range_cycles(const Edgeprof__V1__Profile *prof)
{
	for (size_t i = 0; i < prof->n_binaries; i++)
		for (size_t j = 0; j < prof->binaries[i]->n_ranges; j++)
			if (prof->binaries[i]->ranges[j]->cycles)
				return true;
	return false;
}

/* SamplingConfig's cycles fields: the source the live agent said, else
 * the branch records' when the ranges hold cycles (every source keeps
 * them: perf.data, the BPF record). 0, or -1 when memory runs out. */
static int cycles_config(Edgeprof__V1__SamplingConfig *cfg, const struct ep_pipeline *p,
			 const Edgeprof__V1__Profile *prof)
{
	const char *source = p->cycles.source, *unit = p->cycles.unit;
	if (!source && any_range_cycles(prof)) {
		source = "branch_records";
		unit = "cycles";
	}
	cfg->cycles_source = strdup(source ? source : "");
	cfg->cycles_unit = strdup(unit && source ? unit : "");
	if (ip_cycles(p)) {
		cfg->cycles_period = p->cycles.period;
		cfg->cycles_jitter = p->cycles.jitter;
		cfg->cycles_scale = p->cycles_scale;
	}
	return cfg->cycles_source && cfg->cycles_unit ? 0 : -1;
}

/* Stats and config of prof: ps[0..n) are one recording's readers, their
 * counters summed. */
static Edgeprof__V1__Profile *with_stats(Edgeprof__V1__Profile *prof, struct ep_pipeline *const *ps,
					 size_t n)
{
	if (!prof)
		return NULL;
	Edgeprof__V1__Stats *st = malloc(sizeof(*st));
	Edgeprof__V1__SamplingConfig *cfg = malloc(sizeof(*cfg));
	if (!st || !cfg) {
		free(st);
		free(cfg);
		protobuf_c_message_free_unpacked(&prof->base, NULL);
		return NULL;
	}
	edgeprof__v1__stats__init(st);
	edgeprof__v1__sampling_config__init(cfg);
	for (size_t i = 0; i < n; i++) {
		struct ep_pipeline *p = ps[i];
		const struct ep_reconstruct_stats *rs = ep_reconstructor_stats(p->reconstructor);
		st->samples += rs->samples;
		st->samples_with_branches += rs->samples_with_branches;
		st->branch_entries += rs->branch_entries;
		st->branch_entries_user += rs->branch_entries_user;
		st->branch_entries_kernel += rs->branch_entries_kernel;
		st->branch_entries_unresolved += rs->branch_entries_unresolved;
		st->gaps += rs->gaps;
		st->gaps_inconsistent += rs->gaps_inconsistent;
		st->gaps_unknown_code += rs->gaps_unknown_code;
		st->gaps_backwards += rs->gaps_backwards;
		st->trigger_appended += rs->trigger_appended;
		st->trigger_inconsistent += rs->trigger_inconsistent;
		st->entries_mismatched += rs->entries_mismatched;
		st->entries_duplicate += rs->entries_duplicate;
		st->branches_counted += total_branches(p);
		st->branches_short += p->chop_stats.branches_short;
		st->ranges_counted += total_ranges(p);
		st->lost_records += p->lost;
		st->processes_gone += p->gone;
		st->cycles_samples += p->cycles_samples;
		st->cycles_samples_unresolved += p->cycles_unresolved;
		st->cycles_lost_records += p->cycles_lost;
		st->samples_ip_kernel += p->ip_kernel;
		st->samples_ip_jit += p->ip_jit;
		st->samples_ip_unresolved += p->ip_unresolved;
		st->stacks_cut_unresolved += p->stacks_cut;
		st->stacks_dropped += total_stacks_dropped(p);
	}
	prof->stats = st;

	/* every reader saw every sample's stack size */
	const struct ep_pipeline *p = ps[0];
	cfg->entries = p->max_entries;
	cfg->chop = ep_pipeline_chop_used(p);
	cfg->trigger_appended = p->cfg.append_trigger && !p->cfg.calls_only;
	cfg->range_mode = strdup(p->cfg.range_mode == EP_RANGES_GAP ? "gap" : "split");
	cfg->mode = strdup(p->cfg.calls_only ? "calls" : "edges");
	cfg->chop_unit = strdup(p->cfg.chop_taken ? "taken" : "branches");
	cfg->source = strdup("");
	cfg->event = strdup("");
	prof->config = cfg;
	if (!cfg->range_mode || !cfg->mode || !cfg->chop_unit || !cfg->source || !cfg->event ||
	    cycles_config(cfg, p, prof) != 0) {
		protobuf_c_message_free_unpacked(&prof->base, NULL);
		return NULL;
	}
	return prof;
}

static Edgeprof__V1__Profile *profile_of(struct ep_pipeline *p, bool labelled)
{
	flush_counts(p);
	set_cycles_mode(p);
	return with_stats(build_sets(p, labelled), &p, 1);
}

Edgeprof__V1__Profile *ep_pipeline_profile(struct ep_pipeline *p)
{
	return profile_of(p, false);
}

Edgeprof__V1__Profile *ep_pipeline_profile_merged(struct ep_pipeline *const *ps, size_t n)
{
	if (n == 1)
		return ep_pipeline_profile(ps[0]);
	struct ep_aggregator **aggs = calloc(n, sizeof(*aggs));
	if (!aggs)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		flush_counts(ps[i]);
		set_cycles_mode(ps[i]);
		aggs[i] = ps[i]->aggregator;
	}
	Edgeprof__V1__Profile *prof = with_stats(ep_aggregator_build_merged(aggs, n), ps, n);
	free(aggs);
	return prof;
}

/* Stats is all uint64 counters: subtract field by field through the
 * descriptor, so a counter added to the proto is streamed as a delta too. */
static void stats_delta(Edgeprof__V1__Stats *now, Edgeprof__V1__Stats *sent)
{
	const ProtobufCMessageDescriptor *d = &edgeprof__v1__stats__descriptor;
	for (unsigned i = 0; i < d->n_fields; i++) {
		if (d->fields[i].type != PROTOBUF_C_TYPE_UINT64)
			continue;
		uint64_t *n = (uint64_t *)((char *)now + d->fields[i].offset);
		uint64_t *s = (uint64_t *)((char *)sent + d->fields[i].offset);
		uint64_t total = *n;
		*n = total - *s;
		*s = total;
	}
}

static void mark_set(void *ctx, struct ep_process *pr)
{
	((uint8_t *)ctx)[pr->set] = 1;
}

Edgeprof__V1__Profile *ep_pipeline_take_delta(struct ep_pipeline *p)
{
	Edgeprof__V1__Profile *prof = profile_of(p, true);
	if (!prof)
		return NULL;
	stats_delta(prof->stats, &p->sent);
	ep_aggregator_reset(p->aggregator);
	uint8_t used[EP_MAX_LABEL_SETS] = {0};
	ep_process_each(p->procs, mark_set, used);
	for (size_t i = 1; i < p->nsets; i++) {
		struct label_set *set = p->sets[i];
		if (!set)
			continue;
		ep_aggregator_reset(set->agg);
		if (!used[i]) {
			/* its counts were just taken and no process runs there */
			p->retired_branches += ep_aggregator_branches(set->agg);
			p->retired_ranges += ep_aggregator_ranges(set->agg);
			p->retired_stacks_dropped += ep_aggregator_stacks_dropped(set->agg);
			free_set(set);
			p->sets[i] = NULL;
		}
	}
	while (p->nsets > 1 && !p->sets[p->nsets - 1])
		p->nsets--;
	return prof;
}

struct ep_binary_registry *ep_pipeline_binaries(const struct ep_pipeline *p)
{
	return p->binaries;
}
