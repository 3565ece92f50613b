/* SPDX-License-Identifier: Apache-2.0 */
#include "pipeline.h"

#include <stdlib.h>
#include <string.h>

#include "../source/perf_data.h"
#include "../util/log.h"
#include "../util/u64map.h"

struct noted_build_id {
	char *path;
	uint8_t id[EP_BUILD_ID_MAX];
	uint8_t len;
};

struct ep_pipeline {
	struct ep_pipeline_config cfg;
	struct ep_binary_registry *binaries;
	struct ep_procmap *procmap;
	struct ep_reconstructor *reconstructor;
	struct ep_aggregator *aggregator;
	struct ep_trace trace;
	struct ep_chop_stats chop_stats;
	unsigned max_entries;
	uint64_t lost;
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

void ep_pipeline_config_default(struct ep_pipeline_config *cfg)
{
	cfg->chop = EP_CHOP_AUTO;
	cfg->range_mode = EP_RANGES_SPLIT;
	cfg->append_trigger = true;
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
	p->procmap = ep_procmap_new();
	p->reconstructor = p->procmap ? ep_reconstructor_new(p->procmap, binaries) : NULL;
	p->aggregator = p->reconstructor
			    ? ep_aggregator_new(p->reconstructor, binaries, cfg->range_mode)
			    : NULL;
	if (!p->aggregator) {
		ep_pipeline_free(p);
		return NULL;
	}
	ep_reconstructor_set_append_trigger(p->reconstructor, cfg->append_trigger);
	return p;
}

void ep_pipeline_free(struct ep_pipeline *p)
{
	if (!p)
		return;
	ep_aggregator_free(p->aggregator);
	ep_reconstructor_free(p->reconstructor);
	ep_procmap_free(p->procmap);
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
	ep_procmap_add(p->procmap, pid, start, len, pgoff, bin);
}

void ep_pipeline_mmap_at(struct ep_pipeline *p, uint32_t pid, uint64_t start, uint64_t len,
			 uint64_t pgoff, const char *path, const char *open_path)
{
	struct ep_binary *bin = ep_binreg_lookup_at(p->binaries, path, open_path, NULL, 0);
	ep_procmap_add(p->procmap, pid, start, len, pgoff, bin);
}

void ep_pipeline_fork(struct ep_pipeline *p, uint32_t child_pid, uint32_t parent_pid)
{
	ep_procmap_fork(p->procmap, child_pid, parent_pid);
}

void ep_pipeline_exec(struct ep_pipeline *p, uint32_t pid)
{
	ep_procmap_exec(p->procmap, pid);
}

void ep_pipeline_exit(struct ep_pipeline *p, uint32_t pid)
{
	ep_procmap_exit(p->procmap, pid);
}

void ep_pipeline_forget(struct ep_pipeline *p, uint32_t pid)
{
	ep_procmap_forget(p->procmap, pid);
}

size_t ep_pipeline_processes(const struct ep_pipeline *p)
{
	return ep_procmap_processes(p->procmap);
}

enum ep_resolve_status ep_pipeline_resolve(struct ep_pipeline *p, uint32_t pid, uint64_t addr,
					   struct ep_resolved *out)
{
	return ep_procmap_resolve(p->procmap, pid, addr, out);
}

void ep_pipeline_add_lost(struct ep_pipeline *p, uint64_t lost)
{
	p->lost += lost;
}

struct ep_reconstructor *ep_pipeline_reconstructor(struct ep_pipeline *p)
{
	return p->reconstructor;
}

unsigned ep_pipeline_chop_used(const struct ep_pipeline *p)
{
	return p->cfg.chop == EP_CHOP_AUTO ? p->max_entries : (unsigned)p->cfg.chop;
}

void ep_pipeline_sample(struct ep_pipeline *p, const struct ep_sample_record *rec)
{
	if (rec->nr_entries > p->max_entries)
		p->max_entries = rec->nr_entries > EP_MAX_BRANCH_ENTRIES ? EP_MAX_BRANCH_ENTRIES
									 : rec->nr_entries;
	if (!(rec->flags & EP_SAMPLE_IP_KERNEL)) {
		struct ep_resolved res;
		if (ep_procmap_resolve(p->procmap, rec->pid, rec->ip, &res) == EP_RESOLVE_OK)
			ep_aggregate_sample_ip(p->aggregator, ep_binary_index(res.bin), res.vaddr);
	}
	ep_reconstruct(p->reconstructor, rec, &p->trace);
	unsigned chop = ep_pipeline_chop_used(p);
	size_t first = ep_chop(&p->trace, chop, &p->chop_stats);
	ep_aggregate_trace(p->aggregator, &p->trace, first, chop == 0);
}

Edgeprof__V1__Profile *ep_pipeline_profile(struct ep_pipeline *p)
{
	Edgeprof__V1__Profile *prof = ep_aggregator_build(p->aggregator);
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
	const struct ep_reconstruct_stats *rs = ep_reconstructor_stats(p->reconstructor);
	st->samples = rs->samples;
	st->samples_with_branches = rs->samples_with_branches;
	st->branch_entries = rs->branch_entries;
	st->branch_entries_user = rs->branch_entries_user;
	st->branch_entries_kernel = rs->branch_entries_kernel;
	st->branch_entries_unresolved = rs->branch_entries_unresolved;
	st->gaps = rs->gaps;
	st->gaps_inconsistent = rs->gaps_inconsistent;
	st->gaps_unknown_code = rs->gaps_unknown_code;
	st->gaps_backwards = rs->gaps_backwards;
	st->trigger_appended = rs->trigger_appended;
	st->trigger_inconsistent = rs->trigger_inconsistent;
	st->entries_mismatched = rs->entries_mismatched;
	st->entries_duplicate = rs->entries_duplicate;
	st->branches_counted = ep_aggregator_branches(p->aggregator);
	st->branches_short = p->chop_stats.branches_short;
	st->ranges_counted = ep_aggregator_ranges(p->aggregator);
	st->lost_records = p->lost;
	prof->stats = st;

	cfg->entries = p->max_entries;
	cfg->chop = ep_pipeline_chop_used(p);
	cfg->trigger_appended = p->cfg.append_trigger;
	cfg->range_mode = strdup(p->cfg.range_mode == EP_RANGES_GAP ? "gap" : "split");
	cfg->source = strdup("");
	cfg->event = strdup("");
	prof->config = cfg;
	if (!cfg->range_mode || !cfg->source || !cfg->event) {
		protobuf_c_message_free_unpacked(&prof->base, NULL);
		return NULL;
	}
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

Edgeprof__V1__Profile *ep_pipeline_take_delta(struct ep_pipeline *p)
{
	Edgeprof__V1__Profile *prof = ep_pipeline_profile(p);
	if (!prof)
		return NULL;
	stats_delta(prof->stats, &p->sent);
	ep_aggregator_reset(p->aggregator);
	return prof;
}
