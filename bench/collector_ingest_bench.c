/* SPDX-License-Identifier: Apache-2.0 */
/*
 * collector_ingest_edges_per_sec: edge updates per second from many
 * concurrent agents through the collector's ingest (wire decode, dedup,
 * pre-aggregation, group commit) into a store, without HTTP. The peer in
 * the same run is the plain way: each batch written in its own store write,
 * no merging across batches. Also the agent's side: CPU per batch to encode
 * a delta (protobuf + zstd).
 *   EDGEPROF_BENCH_STORE=clickhouse:URL  also measure that store
 *   EDGEPROF_BENCH_AGENTS (8), _BATCHES (40 per agent), _EDGES (20000 per batch)
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "collector/ingest/ingest.h"
#include "collector/store/store.h"
#include "common/wire/wire.h"

struct agent_job {
	struct ep_ingest *ingest;
	uint8_t **batches;
	size_t *lens;
	unsigned n;
	unsigned failed;
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static unsigned env_uint(const char *name, unsigned dflt)
{
	const char *v = getenv(name);
	return v && atoi(v) > 0 ? (unsigned)atoi(v) : dflt;
}

/* One agent's batch: `edges` edges of one binary. Every agent counts the
 * same code (the same keys, as a fleet running one build does). */
static void encode_batch(const char *agent, uint64_t seq, unsigned edges, uint8_t **out,
			 size_t *len)
{
	Edgeprof__V1__Edge *e = calloc(edges, sizeof(*e));
	Edgeprof__V1__Edge **ep = calloc(edges, sizeof(*ep));
	for (unsigned i = 0; i < edges; i++) {
		edgeprof__v1__edge__init(&e[i]);
		e[i].from = 0x400000 + 16ull * i;
		e[i].to = 0x400000 + 16ull * ((i * 7919u) % edges);
		e[i].taken = i % 3 != 0;
		e[i].count = 1 + (seq + i) % 50;
		e[i].kind = EDGEPROF__V1__BRANCH_KIND__BRANCH_CONDITIONAL;
		ep[i] = &e[i];
	}
	Edgeprof__V1__BinaryProfile bp = EDGEPROF__V1__BINARY_PROFILE__INIT;
	bp.build_id = "0123456789abcdef0123456789abcdef01234567";
	bp.arch = "x86_64";
	bp.samples = edges / 16;
	bp.edges = ep;
	bp.n_edges = edges;
	Edgeprof__V1__BinaryDelta d = EDGEPROF__V1__BINARY_DELTA__INIT, *dp = &d;
	d.profile = &bp;
	Edgeprof__V1__AgentIdentity id = EDGEPROF__V1__AGENT_IDENTITY__INIT;
	id.agent_id = (char *)agent;
	id.node = "bench";
	Edgeprof__V1__Batch b = EDGEPROF__V1__BATCH__INIT;
	b.wire_version = EP_WIRE_VERSION;
	b.agent = &id;
	b.sequence = seq;
	b.window_end_ns = 1700000000ull * 1000000000ull;
	b.binaries = &dp;
	b.n_binaries = 1;
	if (ep_wire_encode(&b, out, len) != 0)
		abort();
	free(e);
	free(ep);
}

static void *agent_main(void *arg)
{
	struct agent_job *j = arg;
	for (unsigned i = 0; i < j->n; i++) {
		uint64_t seq;
		char why[256];
		enum ep_ingest_result r = ep_ingest_batch(j->ingest, j->batches[i], j->lens[i],
							  true, &seq, why, sizeof(why), NULL);
		if (r != EP_INGEST_STORED)
			j->failed++;
	}
	return NULL;
}

/* Edge updates per second for all agents' batches into spec. merged=false
 * is the peer: one store write per batch, no merging. */
static double run(const char *spec, bool merged, unsigned agents, unsigned per_agent,
		  unsigned edges, double *cpu_per_mupd)
{
	char err[512];
	struct ep_store *store = ep_store_open(spec, err, sizeof(err));
	if (!store) {
		fprintf(stderr, "bench: note: %s\n", err);
		return -1;
	}
	struct agent_job *jobs = calloc(agents, sizeof(*jobs));
	for (unsigned a = 0; a < agents; a++) {
		char name[32];
		snprintf(name, sizeof(name), "agent-%u", a);
		jobs[a].n = per_agent;
		jobs[a].batches = calloc(per_agent, sizeof(uint8_t *));
		jobs[a].lens = calloc(per_agent, sizeof(size_t));
		for (unsigned i = 0; i < per_agent; i++)
			encode_batch(name, i + 1, edges, &jobs[a].batches[i], &jobs[a].lens[i]);
	}
	double t0 = now_s(), c0 = cpu_s();
	if (merged) {
		struct ep_ingest_config cfg = {0};
		struct ep_ingest *in = ep_ingest_new(store, &cfg, err, sizeof(err));
		pthread_t *th = calloc(agents, sizeof(*th));
		for (unsigned a = 0; a < agents; a++) {
			jobs[a].ingest = in;
			pthread_create(&th[a], NULL, agent_main, &jobs[a]);
		}
		for (unsigned a = 0; a < agents; a++)
			pthread_join(th[a], NULL);
		ep_ingest_free(in);
		free(th);
	} else {
		/* the peer: decode and write each batch by itself, in arrival order */
		for (unsigned i = 0; i < per_agent; i++) {
			for (unsigned a = 0; a < agents; a++) {
				Edgeprof__V1__Batch *b =
				    ep_wire_decode(jobs[a].batches[i], jobs[a].lens[i], true,
						   EP_WIRE_MAX_BATCH, err, sizeof(err));
				struct ep_store_batch_id id = {b->agent->agent_id, b->sequence,
							       b->agent->node, 0};
				struct ep_store_slice sl = {.bucket_s =
								1700000000 - 1700000000 % 60,
							    .delta = b->binaries[0]};
				struct ep_store_commit c = {&id, 1, &sl, 1};
				if (ep_store_write(store, &c, err, sizeof(err)) != 0)
					jobs[a].failed++;
				ep_wire_free(b);
			}
		}
	}
	double wall = now_s() - t0, cpu = cpu_s() - c0;
	unsigned failed = 0;
	for (unsigned a = 0; a < agents; a++) {
		failed += jobs[a].failed;
		for (unsigned i = 0; i < per_agent; i++)
			free(jobs[a].batches[i]);
		free(jobs[a].batches);
		free(jobs[a].lens);
	}
	free(jobs);
	ep_store_close(store);
	if (failed) {
		fprintf(stderr, "bench: note: %u batches failed\n", failed);
		return -1;
	}
	double updates = (double)agents * per_agent * edges;
	*cpu_per_mupd = cpu / (updates / 1e6);
	return updates / wall;
}

int main(void)
{
	unsigned agents = env_uint("EDGEPROF_BENCH_AGENTS", 8);
	unsigned per_agent = env_uint("EDGEPROF_BENCH_BATCHES", 40);
	unsigned edges = env_uint("EDGEPROF_BENCH_EDGES", 20000);
	char dir[] = "/tmp/edgeprof-ingest-bench-XXXXXX";
	if (!mkdtemp(dir))
		return 1;
	char spec[128], peer_spec[128];
	snprintf(spec, sizeof(spec), "sqlite:%s/merged.db", dir);
	snprintf(peer_spec, sizeof(peer_spec), "sqlite:%s/plain.db", dir);
	fprintf(stderr,
		"bench: note: ingest: %u agents x %u batches x %u edges (the same code on every "
		"agent)\n",
		agents, per_agent, edges);
	double cpu_m, cpu_p;
	double merged = run(spec, true, agents, per_agent, edges, &cpu_m);
	double plain = run(peer_spec, false, agents, per_agent, edges, &cpu_p);
	if (merged > 0)
		printf("collector_ingest_edges_per_sec_sqlite: %.0f\n", merged);
	if (plain > 0)
		printf("collector_ingest_edges_per_sec_sqlite_per_batch_peer: %.0f\n", plain);
	if (merged > 0 && plain > 0) {
		printf("collector_ingest_speedup_vs_per_batch: %.1f\n", merged / plain);
		printf("collector_ingest_cpu_seconds_per_million_updates_sqlite: %.3f\n", cpu_m);
	}
	const char *ch = getenv("EDGEPROF_BENCH_STORE");
	if (ch && strncmp(ch, "clickhouse:", 11) == 0) {
		double c = run(ch, true, agents, per_agent, edges, &cpu_m);
		if (c > 0)
			printf("collector_ingest_edges_per_sec_clickhouse: %.0f\n", c);
	}
	/* the agent's side: one batch of `edges` edges, encoded */
	uint8_t *bytes;
	size_t len;
	double c0 = cpu_s();
	for (unsigned i = 0; i < 20; i++) {
		encode_batch("agent", i + 1, edges, &bytes, &len);
		free(bytes);
	}
	printf("agent_batch_encode_ms_per_%u_edges: %.2f\n", edges, (cpu_s() - c0) / 20 * 1e3);
	printf("agent_batch_bytes_per_edge: %.2f\n", (double)len / edges);
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : 1;
}
