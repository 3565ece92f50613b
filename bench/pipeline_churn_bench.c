/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the pipeline pays for a short process, inside a container or not:
 * replays a real recording (test.lbr, mapped at 0x400000) as one busy
 * process and, after each of its samples, starts and ends CHILDREN short
 * processes (fork, exit, forget), labelled with a container when the mode
 * is "container". Counts instructions, not time: bench/run.sh runs it under
 * cachegrind with 0 and with CHILDREN children, and the difference over the
 * children is the cost of one process's events. On a node whose containers
 * start hundreds of processes a second, that cost is the agent's.
 *
 *   pipeline_churn_bench LBR BINARY plain|container CHILDREN
 *
 * Prints the samples replayed and the reconstructor's flushes, which is
 * where a container's processes cost more when they cost more.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/pipeline/pipeline.h"
#include "agent/reconstruct/reconstruct.h"
#include "agent/resolve/binary.h"
#include "agent/source/perf_data/perf_data.h"
#include "common/profile/profile_file.h"

struct samples {
	struct ep_sample_record *recs;
	size_t n, cap;
};

static int keep_sample(void *ctx, const struct ep_sample_record *rec)
{
	struct samples *s = ctx;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 1024;
		struct ep_sample_record *grown = realloc(s->recs, cap * sizeof(*grown));
		if (!grown)
			return -1;
		s->recs = grown;
		s->cap = cap;
	}
	s->recs[s->n++] = *rec;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 5 || (strcmp(argv[3], "plain") != 0 && strcmp(argv[3], "container") != 0)) {
		fprintf(stderr, "usage: %s LBR BINARY plain|container CHILDREN\n", argv[0]);
		return 2;
	}
	const char *lbr = argv[1], *binary = argv[2];
	bool container = strcmp(argv[3], "container") == 0;
	unsigned children = (unsigned)strtoul(argv[4], NULL, 10);
	struct samples s = {0};
	struct ep_perf_data_callbacks cb = {.ctx = &s, .on_sample = keep_sample};
	struct ep_perf_data_stats st;
	char err[256];
	if (ep_perf_data_read(lbr, &cb, &st, err, sizeof(err)) != 0 || s.n == 0) {
		fprintf(stderr, "%s: %s\n", lbr, s.n ? err : "no samples");
		return 1;
	}
	struct ep_binary_registry *reg = ep_binreg_new();
	struct ep_pipeline_config cfg;
	ep_pipeline_config_default(&cfg);
	struct ep_pipeline *p = reg ? ep_pipeline_new(&cfg, reg) : NULL;
	if (!p) {
		fprintf(stderr, "out of memory\n");
		return 1;
	}
	const uint32_t busy = 100;
	ep_pipeline_mmap(p, busy, 0x400000, 0x100000, 0, binary, NULL, 0);
	Edgeprof__V1__Labels labels = EDGEPROF__V1__LABELS__INIT;
	labels.container_id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	if (container)
		ep_pipeline_label_pid(p, busy, &labels);
	uint32_t next_pid = 1000;
	for (size_t i = 0; i < s.n; i++) {
		struct ep_sample_record rec = s.recs[i];
		rec.pid = busy;
		ep_pipeline_sample(p, &rec);
		for (unsigned c = 0; c < children; c++) {
			uint32_t child = next_pid++;
			if (next_pid > 4000000)
				next_pid = 1000;
			ep_pipeline_fork(p, child, busy);
			ep_pipeline_exec(p, child);
			ep_pipeline_exit(p, child);
			ep_pipeline_forget(p, child);
		}
	}
	Edgeprof__V1__Profile *prof = ep_pipeline_take_delta(p);
	if (!prof) {
		fprintf(stderr, "out of memory\n");
		return 1;
	}
	printf("samples: %zu\n", s.n);
	printf("flushes: %llu\n",
	       (unsigned long long)ep_reconstructor_stats(ep_pipeline_reconstructor(p))->flushes);
	ep_profile_free(prof);
	ep_pipeline_free(p);
	ep_binreg_free(reg);
	free(s.recs);
	return 0;
}
