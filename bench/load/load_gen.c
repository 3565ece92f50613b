/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Load generator (issue 12, part 2): plays N agents posting real batches to
 * one collector over HTTP, the way edgeprof agents do, and checks that the
 * store then holds exactly what was acknowledged.
 *
 *   load_gen --collector URL [--token-file F] [--agents N] [--seconds S]
 *            [--interval-ms MS] [--binaries-per-batch B] [--builds K]
 *            [--collector-pid PID] [--store-pid PID] [--prefix NAME] TEMPLATE_DIR...
 *
 * TEMPLATE_DIR: an agent's spool (edgeprof agent --replay PERF.DATA ... --spool
 * DIR with no collector): real batches of a real recording. Each directory is
 * one pool; agent i draws from pool i % pools. Agent i is node "load-node-i"
 * (its own agent id, its own loopback source address 127.1.x.y), its batches
 * hold B binaries taken in turn from its pool, each given a build-id of its
 * own (the template's with a variant number: K variants) and a container of
 * the agent's own (4 per agent). An agent posts a batch, waits for the
 * answer, then --interval-ms (jittered +-50%) before the next; a batch that
 * is not acknowledged (HTTP error, 503, connection lost) is resent unchanged
 * (same sequence) after 250 ms, as the agent's spool would.
 *
 * After S seconds no new batch starts; every one under way is finished. The
 * store's totals are then read back: per build-id, the samples, edge, range
 * and IP counts from /v1/profile?format=proto, and the samples of every
 * binary in /v1/binaries, and compared with the sums of the acknowledged
 * batches: they must be equal exactly.
 *
 * Prints "PREFIX_name: value" lines: batches/s and edges/s acknowledged, p50/p99
 * answer time, errors, lost/doubled batches, the collector's RSS (start,
 * middle, end, every 10 s) and CPU, the compressed bytes posted, the rows
 * received and written (its /metrics), and the CPU of the store's server
 * (--store-pid: clickhouse-server) while the agents post. Exits 1 when a
 * total differs or a batch stayed unacknowledged, 2 on bad usage or input.
 */
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/wire/wire.h"
#include "profile.pb-c.h"

#define MAX_POOLS	8
#define RETRY_MS	250
#define CONTAINERS	4 /* per agent */
#define RSS_EVERY_S	10.0
#define MAX_RSS_SAMPLES 4096

struct pool {
	const char *dir;
	Edgeprof__V1__Batch **batches; /* decoded templates (kept for their parts) */
	size_t nbatches;
	const Edgeprof__V1__BinaryDelta **deltas; /* every binary of every template */
	size_t *orig;				  /* deltas[i]'s build-id index in origs */
	size_t n;
	Edgeprof__V1__SamplingConfig *config;
};

/* what one build-id (template build-id x variant) received */
struct totals {
	uint64_t samples, edges, ranges, ips;
};

struct agent {
	unsigned index;
	CURL *h;
	struct curl_slist *headers;
	char agent_id[48], node[32], iface[32];
	char containers[CONTAINERS][40];
	struct pool *pool;
	uint64_t seq;
	bool inflight, resend;
	double next_at, sent_at;
	uint8_t *body;
	size_t len;
	/* the batch's binaries, to add to the totals once acknowledged */
	size_t nkeys;
	size_t *keys;
	struct totals *parts;
	uint64_t edges_in_batch;
	char answer[4096];
	size_t answer_len;
};

struct opts {
	const char *collector, *token_file, *prefix;
	unsigned agents, seconds, interval_ms, per_batch, builds;
	long collector_pid, store_pid;
};

static struct pool pools[MAX_POOLS];
static size_t npools;
static char **origs; /* distinct template build-ids */
static size_t norigs;
static struct totals *sent; /* [norigs * builds] acknowledged */
static char token[512];
static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint64_t next_random(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);
	if (!p) {
		fprintf(stderr, "load_gen: out of memory\n");
		exit(2);
	}
	return p;
}

static int read_file(const char *path, uint8_t **out, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -1;
	size_t cap = 1 << 16, n = 0;
	uint8_t *buf = xcalloc(cap, 1);
	size_t r;
	while ((r = fread(buf + n, 1, cap - n, f)) > 0) {
		n += r;
		if (n == cap) {
			cap *= 2;
			uint8_t *b = realloc(buf, cap);
			if (!b) {
				free(buf);
				fclose(f);
				return -1;
			}
			buf = b;
		}
	}
	int bad = ferror(f);
	fclose(f);
	if (bad) {
		free(buf);
		return -1;
	}
	*out = buf;
	*len = n;
	return 0;
}

static size_t orig_index(const char *build_id)
{
	for (size_t i = 0; i < norigs; i++)
		if (strcmp(origs[i], build_id) == 0)
			return i;
	char **o = realloc(origs, (norigs + 1) * sizeof(*o));
	if (!o || !(o[norigs] = strdup(build_id))) {
		fprintf(stderr, "load_gen: out of memory\n");
		exit(2);
	}
	origs = o;
	return norigs++;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Reads every batch of a spool directory, in name (= spool) order. */
static int load_pool(struct pool *p, const char *dir)
{
	p->dir = dir;
	DIR *d = opendir(dir);
	if (!d) {
		fprintf(stderr, "load_gen: %s: %s\n", dir, strerror(errno));
		return -1;
	}
	char **names = NULL;
	size_t nnames = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name);
		if (l < 6 || strcmp(e->d_name + l - 6, ".batch") != 0)
			continue;
		names = realloc(names, (nnames + 1) * sizeof(*names));
		if (!names || !(names[nnames] = strdup(e->d_name))) {
			fprintf(stderr, "load_gen: out of memory\n");
			exit(2);
		}
		nnames++;
	}
	closedir(d);
	qsort(names, nnames, sizeof(*names), cmp_names);
	p->batches = xcalloc(nnames, sizeof(*p->batches));
	int rc = 0;
	for (size_t i = 0; i < nnames && rc == 0; i++) {
		char path[4096], err[512];
		uint8_t *data;
		size_t len;
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		if (read_file(path, &data, &len) != 0) {
			fprintf(stderr, "load_gen: %s: %s\n", path, strerror(errno));
			rc = -1;
			break;
		}
		Edgeprof__V1__Batch *b =
		    ep_wire_decode(data, len, true, EP_WIRE_MAX_BATCH, err, sizeof(err));
		free(data);
		if (!b || ep_wire_check_batch(b, err, sizeof(err)) != 0) {
			fprintf(stderr, "load_gen: %s: not a batch the collector takes: %s\n", path,
				err);
			ep_wire_free(b);
			rc = -1;
			break;
		}
		p->batches[p->nbatches++] = b;
		if (!p->config)
			p->config = b->config;
		for (size_t j = 0; j < b->n_binaries; j++) {
			const Edgeprof__V1__BinaryDelta *bd = b->binaries[j];
			/* a binary without a build-id (test.binary has none) is named
			 * by its path's hash: the generator renames it anyway */
			char named[32];
			const char *bid = bd->profile->build_id;
			if (!bid || !bid[0]) {
				if (!bd->profile->n_paths)
					continue;
				uint64_t h = 0xcbf29ce484222325ULL;
				for (const char *c = bd->profile->paths[0]; *c; c++)
					h = (h ^ (uint8_t)*c) * 0x100000001b3ULL;
				snprintf(named, sizeof(named), "%016" PRIx64, h);
				bid = named;
			}
			p->deltas = realloc(p->deltas, (p->n + 1) * sizeof(*p->deltas));
			p->orig = realloc(p->orig, (p->n + 1) * sizeof(*p->orig));
			if (!p->deltas || !p->orig) {
				fprintf(stderr, "load_gen: out of memory\n");
				exit(2);
			}
			p->deltas[p->n] = bd;
			p->orig[p->n] = orig_index(bid);
			p->n++;
		}
	}
	for (size_t i = 0; i < nnames; i++)
		free(names[i]);
	free(names);
	if (rc == 0 && p->n == 0) {
		fprintf(stderr, "load_gen: %s: no batch with a binary\n", dir);
		rc = -1;
	}
	return rc;
}

static void build_id_of(size_t key, unsigned builds, char *out, size_t len)
{
	const char *o = origs[key / builds];
	size_t keep = strlen(o) > 32 ? 32 : strlen(o);
	snprintf(out, len, "%.*s%08zx", (int)keep, o, key % builds);
}

static void sum_profile(const Edgeprof__V1__BinaryProfile *bp, struct totals *t)
{
	t->samples += bp->samples;
	for (size_t i = 0; i < bp->n_edges; i++)
		if (bp->edges[i]->kind != EDGEPROF__V1__BRANCH_KIND__BRANCH_FALLTHROUGH)
			t->edges += bp->edges[i]->count;
	for (size_t i = 0; i < bp->n_ranges; i++)
		t->ranges += bp->ranges[i]->count;
	for (size_t i = 0; i < bp->n_ips; i++)
		t->ips += bp->ips[i]->count;
}

/* Encodes agent a's next batch into a->body. */
static void make_batch(struct agent *a, const struct opts *o)
{
	struct pool *p = a->pool;
	unsigned nb = o->per_batch;
	Edgeprof__V1__BinaryDelta *deltas = xcalloc(nb, sizeof(*deltas));
	Edgeprof__V1__BinaryDelta **dp = xcalloc(nb, sizeof(*dp));
	Edgeprof__V1__BinaryProfile *profiles = xcalloc(nb, sizeof(*profiles));
	Edgeprof__V1__Labels *labels = xcalloc(nb, sizeof(*labels));
	char(*ids)[64] = xcalloc(nb, sizeof(*ids));
	a->nkeys = nb;
	a->edges_in_batch = 0;
	for (unsigned k = 0; k < nb; k++) {
		size_t t = (a->seq * nb + k + a->index * 7) % p->n;
		const Edgeprof__V1__BinaryDelta *src = p->deltas[t];
		/* the agent's containers run their own builds: variant by container */
		unsigned c = k % CONTAINERS;
		size_t variant = ((size_t)a->index * CONTAINERS + c) % o->builds;
		size_t key = p->orig[t] * o->builds + variant;
		a->keys[k] = key;
		build_id_of(key, o->builds, ids[k], sizeof(ids[k]));
		profiles[k] = *src->profile;
		profiles[k].build_id = ids[k];
		profiles[k].labels = NULL;
		edgeprof__v1__labels__init(&labels[k]);
		labels[k].container_id = a->containers[c];
		labels[k].process = "load";
		edgeprof__v1__binary_delta__init(&deltas[k]);
		deltas[k].profile = &profiles[k];
		deltas[k].labels = &labels[k];
		dp[k] = &deltas[k];
		memset(&a->parts[k], 0, sizeof(a->parts[k]));
		sum_profile(&profiles[k], &a->parts[k]);
		a->edges_in_batch += profiles[k].n_edges;
	}
	Edgeprof__V1__AgentIdentity id = EDGEPROF__V1__AGENT_IDENTITY__INIT;
	id.node = a->node;
	id.agent_id = a->agent_id;
	id.version = "load_gen";
	Edgeprof__V1__Batch b = EDGEPROF__V1__BATCH__INIT;
	b.wire_version = EP_WIRE_VERSION;
	b.agent = &id;
	b.sequence = a->seq;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t ns = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
	b.window_start_ns = ns - 1000000000ULL;
	b.window_end_ns = ns;
	b.config = p->config;
	b.n_binaries = nb;
	b.binaries = dp;
	free(a->body);
	a->body = NULL;
	if (ep_wire_encode(&b, &a->body, &a->len) != 0) {
		fprintf(stderr, "load_gen: cannot encode a batch\n");
		exit(2);
	}
	free(deltas);
	free(dp);
	free(profiles);
	free(labels);
	free(ids);
}

static size_t on_answer(char *data, size_t size, size_t n, void *ctx)
{
	struct agent *a = ctx;
	size_t len = size * n, room = sizeof(a->answer) - 1 - a->answer_len;
	size_t take = len < room ? len : room;
	memcpy(a->answer + a->answer_len, data, take);
	a->answer_len += take;
	return len;
}

static void start_post(struct agent *a, CURLM *multi, double now)
{
	a->answer_len = 0;
	curl_easy_setopt(a->h, CURLOPT_POSTFIELDS, (const char *)a->body);
	curl_easy_setopt(a->h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)a->len);
	curl_multi_add_handle(multi, a->h);
	a->inflight = true;
	a->sent_at = now;
}

/* growable array of answer times */
static double *lat;
static size_t nlat, caplat;

static void add_latency(double s)
{
	if (nlat == caplat) {
		caplat = caplat ? caplat * 2 : 1 << 16;
		double *l = realloc(lat, caplat * sizeof(*l));
		if (!l) {
			fprintf(stderr, "load_gen: out of memory\n");
			exit(2);
		}
		lat = l;
	}
	lat[nlat++] = s;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double percentile(double p)
{
	if (!nlat)
		return 0;
	size_t i = (size_t)ceil(p * (double)nlat);
	return lat[i ? i - 1 : 0];
}

/* VmRSS in KiB and CPU seconds of pid; 0 when unreadable */
static long rss_kib(long pid)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%ld/status", pid);
	FILE *f = fopen(path, "r");
	long kib = 0;
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

static double cpu_seconds(long pid)
{
	char path[64], buf[2048];
	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	unsigned long ut = 0, st = 0;
	if (!p ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
		return 0;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

struct fetched {
	char *data;
	size_t len;
};

static size_t on_fetch(char *data, size_t size, size_t n, void *ctx)
{
	struct fetched *f = ctx;
	char *d = realloc(f->data, f->len + size * n + 1);
	if (!d)
		return 0;
	f->data = d;
	memcpy(f->data + f->len, data, size * n);
	f->len += size * n;
	f->data[f->len] = '\0';
	return size * n;
}

/* GET collector + path; the body (malloc'd) and its HTTP status */
static long http_get(const struct opts *o, const char *path, struct fetched *out)
{
	char url[1024], auth[600];
	snprintf(url, sizeof(url), "%s%s", o->collector, path);
	CURL *h = curl_easy_init();
	struct curl_slist *headers = NULL;
	if (token[0]) {
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
		headers = curl_slist_append(headers, auth);
	}
	out->data = NULL;
	out->len = 0;
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_fetch);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
	curl_easy_setopt(h, CURLOPT_TIMEOUT, 600L);
	long status = 0;
	if (curl_easy_perform(h) == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(headers);
	curl_easy_cleanup(h);
	return status;
}

static double metric_double(const struct opts *o, const char *name)
{
	struct fetched f;
	double v = 0;
	if (http_get(o, "/metrics", &f) == 200 && f.data) {
		size_t l = strlen(name);
		for (char *line = f.data; line && *line;) {
			char *nl = strchr(line, '\n');
			if (strncmp(line, name, l) == 0 && line[l] == ' ')
				v = strtod(line + l + 1, NULL);
			line = nl ? nl + 1 : NULL;
		}
	}
	free(f.data);
	return v;
}

static uint64_t metric_value(const struct opts *o, const char *name)
{
	struct fetched f;
	uint64_t v = 0;
	if (http_get(o, "/metrics", &f) == 200 && f.data) {
		size_t l = strlen(name);
		for (char *line = f.data; line && *line;) {
			char *nl = strchr(line, '\n');
			if (strncmp(line, name, l) == 0 && line[l] == ' ')
				v = strtoull(line + l + 1, NULL, 10);
			line = nl ? nl + 1 : NULL;
		}
	}
	free(f.data);
	return v;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: load_gen --collector URL [--token-file F] [--agents N] [--seconds "
		"S] [--interval-ms MS] [--binaries-per-batch B] [--builds K] "
		"[--collector-pid PID] [--store-pid PID] [--prefix NAME] TEMPLATE_DIR...\n");
	exit(2);
}

static unsigned parse_uint(const char *opt, const char *v, unsigned min)
{
	char *end;
	errno = 0;
	unsigned long n = strtoul(v, &end, 10);
	if (errno || *end || end == v || n < min || n > 1000000) {
		fprintf(stderr, "load_gen: %s '%s': expected a number from %u to 1000000\n", opt, v,
			min);
		exit(2);
	}
	return (unsigned)n;
}

/* The options into o; the index of the first template directory. */
static int parse_args(int argc, char **argv, struct opts *o)
{
	int i = 1;
	for (; i < argc && argv[i][0] == '-'; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v)
			usage();
		if (strcmp(a, "--collector") == 0)
			o->collector = v;
		else if (strcmp(a, "--token-file") == 0)
			o->token_file = v;
		else if (strcmp(a, "--agents") == 0)
			o->agents = parse_uint(a, v, 1);
		else if (strcmp(a, "--seconds") == 0)
			o->seconds = parse_uint(a, v, 1);
		else if (strcmp(a, "--interval-ms") == 0)
			o->interval_ms = parse_uint(a, v, 0);
		else if (strcmp(a, "--binaries-per-batch") == 0)
			o->per_batch = parse_uint(a, v, 1);
		else if (strcmp(a, "--builds") == 0)
			o->builds = parse_uint(a, v, 1);
		else if (strcmp(a, "--collector-pid") == 0)
			o->collector_pid = (long)parse_uint(a, v, 1);
		else if (strcmp(a, "--store-pid") == 0)
			o->store_pid = (long)parse_uint(a, v, 1);
		else if (strcmp(a, "--prefix") == 0)
			o->prefix = v;
		else
			usage();
		i++;
	}
	if (!o->collector || i == argc)
		usage();
	if (o->token_file) {
		FILE *f = fopen(o->token_file, "r");
		if (!f || !fgets(token, sizeof(token), f)) {
			fprintf(stderr, "load_gen: --token-file %s: cannot read it\n",
				o->token_file);
			exit(2);
		}
		fclose(f);
		token[strcspn(token, "\r\n")] = '\0';
	}
	return i;
}

/* Agent k: its names, its handle to url, its first batch. */
static void start_agent(struct agent *a, unsigned k, const struct opts *o, uint64_t run_id,
			const char *url, double t0)
{
	char auth[600];
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
	a->index = k;
	a->pool = &pools[k % npools];
	a->seq = 1;
	snprintf(a->agent_id, sizeof(a->agent_id), "load-%016" PRIx64 "-%u", run_id, k);
	snprintf(a->node, sizeof(a->node), "load-node-%u", k);
	/* a node of its own: its own source address on loopback */
	snprintf(a->iface, sizeof(a->iface), "host!127.1.%u.%u", (k / 250) % 250, k % 250 + 1);
	for (unsigned c = 0; c < CONTAINERS; c++)
		snprintf(a->containers[c], sizeof(a->containers[c]), "%016" PRIx64 "%08x", run_id,
			 k * CONTAINERS + c);
	a->keys = xcalloc(o->per_batch, sizeof(*a->keys));
	a->parts = xcalloc(o->per_batch, sizeof(*a->parts));
	a->h = curl_easy_init();
	a->headers = curl_slist_append(NULL, "Content-Type: application/x-protobuf");
	a->headers = curl_slist_append(a->headers, "Content-Encoding: zstd");
	if (token[0])
		a->headers = curl_slist_append(a->headers, auth);
	curl_easy_setopt(a->h, CURLOPT_URL, url);
	curl_easy_setopt(a->h, CURLOPT_HTTPHEADER, a->headers);
	curl_easy_setopt(a->h, CURLOPT_INTERFACE, a->iface);
	curl_easy_setopt(a->h, CURLOPT_WRITEFUNCTION, on_answer);
	curl_easy_setopt(a->h, CURLOPT_WRITEDATA, a);
	curl_easy_setopt(a->h, CURLOPT_PRIVATE, a);
	curl_easy_setopt(a->h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(a->h, CURLOPT_TIMEOUT_MS, 120000L);
	curl_easy_setopt(a->h, CURLOPT_TCP_KEEPALIVE, 1L);
	/* the fleet does not start in step */
	a->next_at = t0 + (double)(next_random() % (o->interval_ms + 1)) / 1000.0;
	make_batch(a, o);
}

/* What the agents' run counted, and the collector's RSS along it. */
struct run {
	double t0, last_ack;
	bool stopping;
	unsigned inflight;
	uint64_t acked, acked_dup, edges_acked, http_errors, answer_503, transport_errors, unacked,
	    bytes_posted, bytes_acked;
	long rss[MAX_RSS_SAMPLES];
	double rss_at[MAX_RSS_SAMPLES]; /* seconds from t0 */
	size_t nrss;
};

static void sample_rss(const struct opts *o, struct run *r, double now)
{
	if (!o->collector_pid || r->nrss == MAX_RSS_SAMPLES)
		return;
	r->rss[r->nrss] = rss_kib(o->collector_pid);
	r->rss_at[r->nrss++] = now - r->t0;
}

/* The collector's counters (/metrics) an ingest run moves. */
struct collector_counts {
	uint64_t stored, commits, rows_in[3], rows_written;
	double commit_s;
};

static const char *const row_kinds[] = {"edges", "ranges", "ips"};

static void read_counts(const struct opts *o, struct collector_counts *c)
{
	char name[80];
	c->stored = metric_value(o, "edgeprof_ingest_batches_total{result=\"stored\"}");
	c->commits = metric_value(o, "edgeprof_store_commits_total");
	/* rows in, rows out: what the capacity model (bench/capacity) scales from */
	for (size_t k = 0; k < 3; k++) {
		snprintf(name, sizeof(name), "edgeprof_ingest_rows_total{kind=\"%s\"}",
			 row_kinds[k]);
		c->rows_in[k] = metric_value(o, name);
	}
	c->rows_written = metric_value(o, "edgeprof_store_rows_written_total");
	c->commit_s = metric_double(o, "edgeprof_store_commit_seconds_total");
}

/* a's batch answered (or not): counted, and its next batch planned */
static void on_done(struct agent *a, CURLcode cc, const struct opts *o, struct run *r)
{
	double done = now_s();
	long status = 0;
	curl_easy_getinfo(a->h, CURLINFO_RESPONSE_CODE, &status);
	Edgeprof__V1__IngestResponse *resp =
	    cc == CURLE_OK && status == 200
		? edgeprof__v1__ingest_response__unpack(NULL, a->answer_len, (uint8_t *)a->answer)
		: NULL;
	if (!resp) {
		if (cc != CURLE_OK)
			r->transport_errors++;
		else if (status == 503)
			r->answer_503++;
		else
			r->http_errors++;
		if ((cc != CURLE_OK ? 0 : status) / 100 == 4) {
			/* refused for good: the generator is wrong */
			a->answer[a->answer_len] = '\0';
			fprintf(stderr, "load_gen: agent %u: HTTP %ld: %s\n", a->index, status,
				a->answer);
			r->unacked++;
			a->resend = false;
			a->next_at = 1e300;
			return;
		}
		a->resend = true;
		a->next_at = done + RETRY_MS / 1000.0;
		return;
	}
	add_latency(done - a->sent_at);
	if (resp->status == EDGEPROF__V1__INGEST_RESPONSE__STATUS__DUPLICATE)
		r->acked_dup++;
	else
		r->acked++;
	edgeprof__v1__ingest_response__free_unpacked(resp, NULL);
	for (size_t k = 0; k < a->nkeys; k++) {
		struct totals *t = &sent[a->keys[k]];
		t->samples += a->parts[k].samples;
		t->edges += a->parts[k].edges;
		t->ranges += a->parts[k].ranges;
		t->ips += a->parts[k].ips;
	}
	r->edges_acked += a->edges_in_batch;
	r->bytes_acked += a->len;
	r->last_ack = done;
	a->resend = false;
	a->seq++;
	double pause = (double)o->interval_ms / 1000.0;
	a->next_at = done + pause * (0.5 + (double)(next_random() % 1001) / 1000.0);
	if (!r->stopping)
		make_batch(a, o);
}

/* Posts every batch that is due; the earliest time one falls due after,
 * at most 50 ms from now. False once stopping and nothing is left. */
static bool post_due(struct agent *agents, const struct opts *o, CURLM *multi, struct run *r,
		     double now, double *wake)
{
	*wake = now + 0.05;
	unsigned resends = 0;
	for (unsigned k = 0; k < o->agents; k++) {
		struct agent *a = &agents[k];
		if (a->inflight || (!a->resend && r->stopping))
			continue;
		if (now >= a->next_at) {
			start_post(a, multi, now);
			r->bytes_posted += a->len;
			r->inflight++;
		} else if (a->next_at < *wake) {
			*wake = a->next_at;
		}
		resends += a->resend && !a->inflight;
	}
	return !(r->stopping && r->inflight == 0 && resends == 0);
}

/* The agents post for o->seconds, then finish what is under way. */
static void run_agents(struct agent *agents, const struct opts *o, CURLM *multi, struct run *r)
{
	double next_rss = r->t0 + RSS_EVERY_S, end = r->t0 + o->seconds, wake;
	for (;;) {
		double now = now_s();
		if (!r->stopping && now >= end)
			r->stopping = true;
		if (now >= next_rss) {
			sample_rss(o, r, now);
			next_rss += RSS_EVERY_S;
		}
		if (!post_due(agents, o, multi, r, now, &wake))
			break;
		int running, left;
		curl_multi_perform(multi, &running);
		CURLMsg *msg;
		while ((msg = curl_multi_info_read(multi, &left))) {
			if (msg->msg != CURLMSG_DONE)
				continue;
			struct agent *a;
			curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&a);
			CURLcode cc = msg->data.result;
			curl_multi_remove_handle(multi, a->h);
			a->inflight = false;
			r->inflight--;
			on_done(a, cc, o, r);
		}
		double timeout = wake - now_s();
		int ms = timeout <= 0 ? 0 : (int)(timeout * 1000.0) + 1;
		curl_multi_poll(multi, NULL, 0, ms > 50 ? 50 : ms, NULL);
	}
}

/* The store read back against what was acknowledged. */
struct check {
	struct totals want, got;
	size_t mismatched, builds_seen, listed;
	uint64_t listed_samples;
};

static void add_totals(struct totals *to, const struct totals *t)
{
	to->samples += t->samples;
	to->edges += t->edges;
	to->ranges += t->ranges;
	to->ips += t->ips;
}

/* Each build-id's profile against its acknowledged sums. */
static void compare_profiles(const struct opts *o, struct check *c)
{
	for (size_t key = 0; key < norigs * o->builds; key++) {
		struct totals *w = &sent[key];
		if (!w->samples && !w->edges && !w->ranges && !w->ips)
			continue;
		c->builds_seen++;
		char id[64], path[256];
		build_id_of(key, o->builds, id, sizeof(id));
		snprintf(path, sizeof(path), "/v1/profile?build_id=%s&format=proto", id);
		struct fetched f;
		long status = http_get(o, path, &f);
		struct totals g = {0};
		Edgeprof__V1__Profile *p =
		    status == 200 ? edgeprof__v1__profile__unpack(NULL, f.len, (uint8_t *)f.data)
				  : NULL;
		if (p) {
			for (size_t b = 0; b < p->n_binaries; b++)
				sum_profile(p->binaries[b], &g);
			edgeprof__v1__profile__free_unpacked(p, NULL);
		} else {
			fprintf(stderr, "load_gen: %s: HTTP %ld\n", path, status);
		}
		free(f.data);
		if (memcmp(&g, w, sizeof(g)) != 0) {
			c->mismatched++;
			fprintf(stderr,
				"load_gen: build-id %s: stored samples %" PRIu64 " edges %" PRIu64
				" ranges %" PRIu64 " ips %" PRIu64 ", sent %" PRIu64 " / %" PRIu64
				" / %" PRIu64 " / %" PRIu64 "\n",
				id, g.samples, g.edges, g.ranges, g.ips, w->samples, w->edges,
				w->ranges, w->ips);
		}
		add_totals(&c->want, w);
		add_totals(&c->got, &g);
	}
}

/* /v1/binaries: no binary the agents did not send, no samples beside
 * theirs. A page at a time (the collector bounds each answer), "next" its
 * last build-id (hex: nothing to escape). */
static void list_binaries(const struct opts *o, struct check *c)
{
	struct fetched f;
	char path[256] = "/v1/binaries?limit=1000";
	for (bool more = true; more && http_get(o, path, &f) == 200 && f.data;) {
		json_object *root = json_tokener_parse(f.data), *arr, *next;
		more = false;
		if (root && json_object_object_get_ex(root, "binaries", &arr)) {
			size_t n = json_object_array_length(arr);
			c->listed += n;
			for (size_t k = 0; k < n; k++) {
				json_object *s, *b = json_object_array_get_idx(arr, k);
				if (json_object_object_get_ex(b, "samples", &s))
					c->listed_samples += (uint64_t)json_object_get_int64(s);
			}
		}
		if (root && json_object_object_get_ex(root, "next", &next) &&
		    json_object_is_type(next, json_type_string)) {
			snprintf(path, sizeof(path), "/v1/binaries?limit=1000&cursor=%.200s",
				 json_object_get_string(next));
			more = true;
		}
		json_object_put(root);
		free(f.data);
		f.data = NULL;
	}
	free(f.data);
}

/* The run's rates, answers and the collector's counts (d: moved by it). */
static void print_run(const struct opts *o, const struct run *r, const struct collector_counts *d)
{
	const char *px = o->prefix;
	double wall = r->last_ack - r->t0;
	uint64_t acks = r->acked + r->acked_dup;
	uint64_t rows = d->rows_in[0] + d->rows_in[1] + d->rows_in[2];
	printf("%s_agents: %u\n", px, o->agents);
	printf("%s_seconds: %.1f\n", px, wall);
	printf("%s_batches_acked: %" PRIu64 "\n", px, acks);
	printf("%s_batches_per_s: %.1f\n", px, wall > 0 ? (double)acks / wall : 0);
	printf("%s_edges_per_s: %.0f\n", px, wall > 0 ? (double)r->edges_acked / wall : 0);
	/* the compressed bodies as posted, retries included: bytes on the wire */
	printf("%s_bytes_posted: %" PRIu64 "\n", px, r->bytes_posted);
	printf("%s_bytes_per_batch: %.0f\n", px, acks ? (double)r->bytes_acked / (double)acks : 0);
	printf("%s_rows_received: %" PRIu64 " (edges %" PRIu64 ", ranges %" PRIu64 ", ips %" PRIu64
	       ")\n",
	       px, rows, d->rows_in[0], d->rows_in[1], d->rows_in[2]);
	printf("%s_rows_written: %" PRIu64 "\n", px, d->rows_written);
	printf("%s_answer_p50_ms: %.1f\n", px, percentile(0.50) * 1000.0);
	printf("%s_answer_p99_ms: %.1f\n", px, percentile(0.99) * 1000.0);
	printf("%s_answer_max_ms: %.1f\n", px, nlat ? lat[nlat - 1] * 1000.0 : 0);
	printf("%s_answers_503: %" PRIu64 "\n", px, r->answer_503);
	printf("%s_store_commits: %" PRIu64 "\n", px, d->commits);
	printf("%s_store_commit_ms_mean: %.1f\n", px,
	       d->commits ? d->commit_s * 1000.0 / (double)d->commits : 0);
	printf("%s_batches_per_commit: %.1f\n", px,
	       d->commits ? (double)d->stored / (double)d->commits : 0);
	printf("%s_errors: %" PRIu64 "\n", px, r->http_errors + r->transport_errors + r->unacked);
	printf("%s_duplicates_acked: %" PRIu64 "\n", px, r->acked_dup);
	/* every acknowledged batch stored once: the collector's own count of new
	 * batches against the acknowledgements (a duplicate answer is a resend
	 * of one already counted) */
	printf("%s_batches_lost: %" PRIu64 "\n", px,
	       r->acked > d->stored ? r->acked - d->stored : 0);
	printf("%s_batches_doubled: %" PRIu64 "\n", px,
	       d->stored > r->acked ? d->stored - r->acked : 0);
}

/* The collector's RSS along the run and the CPU it and the store took. */
static void print_resources(const struct opts *o, const struct run *r, double cpu, double store_cpu)
{
	const char *px = o->prefix;
	if (o->collector_pid && r->nrss) {
		printf("%s_collector_rss_kib_start: %ld\n", px, r->rss[0]);
		printf("%s_collector_rss_kib_middle: %ld\n", px, r->rss[r->nrss / 2]);
		printf("%s_collector_rss_kib_end: %ld\n", px, r->rss[r->nrss - 1]);
		long max = 0;
		/* least squares over the second half (after warm-up) */
		double sx = 0, sy = 0, sxx = 0, sxy = 0, nn = 0;
		for (size_t k = 0; k < r->nrss; k++) {
			if (r->rss[k] > max)
				max = r->rss[k];
			if (k < r->nrss / 2)
				continue;
			sx += r->rss_at[k];
			sy += (double)r->rss[k];
			sxx += r->rss_at[k] * r->rss_at[k];
			sxy += r->rss_at[k] * (double)r->rss[k];
			nn++;
		}
		double den = nn * sxx - sx * sx;
		uint64_t acks = r->acked + r->acked_dup;
		printf("%s_collector_rss_kib_max: %ld\n", px, max);
		printf("%s_collector_rss_kib_per_min_second_half: %.1f\n", px,
		       den > 0 ? (nn * sxy - sx * sy) / den * 60.0 : 0.0);
		printf("%s_collector_cpu_s: %.3f\n", px, cpu);
		printf("%s_collector_cpu_s_per_1k_batches: %.3f\n", px,
		       acks ? cpu * 1000.0 / (double)acks : 0);
	}
	if (o->store_pid)
		printf("%s_store_server_cpu_s: %.3f\n", px, store_cpu);
}

static void free_all(struct agent *agents, const struct opts *o, CURLM *multi)
{
	for (unsigned k = 0; k < o->agents; k++) {
		curl_slist_free_all(agents[k].headers);
		curl_easy_cleanup(agents[k].h);
		free(agents[k].body);
		free(agents[k].keys);
		free(agents[k].parts);
	}
	free(agents);
	curl_multi_cleanup(multi);
	curl_global_cleanup();
	for (size_t p = 0; p < npools; p++) {
		for (size_t b = 0; b < pools[p].nbatches; b++)
			ep_wire_free(pools[p].batches[b]);
		free(pools[p].batches);
		free(pools[p].deltas);
		free(pools[p].orig);
	}
	for (size_t k = 0; k < norigs; k++)
		free(origs[k]);
	free(origs);
	free(sent);
	free(lat);
}

int main(int argc, char **argv)
{
	struct opts o = {.agents = 500,
			 .seconds = 180,
			 .interval_ms = 1000,
			 .per_batch = 8,
			 .builds = 64,
			 .prefix = "load"};
	for (int i = parse_args(argc, argv, &o); i < argc; i++) {
		if (npools == MAX_POOLS) {
			fprintf(stderr, "load_gen: at most %d template directories\n", MAX_POOLS);
			exit(2);
		}
		if (load_pool(&pools[npools++], argv[i]) != 0)
			exit(2);
	}
	sent = xcalloc(norigs * o.builds, sizeof(*sent));
	curl_global_init(CURL_GLOBAL_DEFAULT);
	CURLM *multi = curl_multi_init();
	curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, (long)o.agents + 16);
	char url[1024];
	snprintf(url, sizeof(url), "%s/v1/ingest", o.collector);
	struct agent *agents = xcalloc(o.agents, sizeof(*agents));
	uint64_t run_id = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	struct run *r = xcalloc(1, sizeof(*r));
	r->t0 = r->last_ack = now_s();
	for (unsigned k = 0; k < o.agents; k++)
		start_agent(&agents[k], k, &o, run_id, url, r->t0);

	struct collector_counts before, after;
	read_counts(&o, &before);
	double cpu0 = o.collector_pid ? cpu_seconds(o.collector_pid) : 0;
	double store_cpu0 = o.store_pid ? cpu_seconds(o.store_pid) : 0;
	sample_rss(&o, r, r->t0);
	run_agents(agents, &o, multi, r);
	sample_rss(&o, r, now_s());
	double cpu = o.collector_pid ? cpu_seconds(o.collector_pid) - cpu0 : 0;
	/* before the read-back below, whose queries are not ingest's cost */
	double store_cpu = o.store_pid ? cpu_seconds(o.store_pid) - store_cpu0 : 0;

	read_counts(&o, &after);
	struct collector_counts moved = {
	    .stored = after.stored - before.stored,
	    .commits = after.commits - before.commits,
	    .rows_written = after.rows_written - before.rows_written,
	    .commit_s = after.commit_s - before.commit_s,
	};
	for (size_t k = 0; k < 3; k++)
		moved.rows_in[k] = after.rows_in[k] - before.rows_in[k];
	struct check c = {0};
	compare_profiles(&o, &c);
	list_binaries(&o, &c);

	qsort(lat, nlat, sizeof(*lat), cmp_double);
	print_run(&o, r, &moved);
	const char *px = o.prefix;
	bool match = c.mismatched == 0 && memcmp(&c.want, &c.got, sizeof(c.want)) == 0 &&
		     c.listed == c.builds_seen && c.listed_samples == c.want.samples;
	printf("%s_build_ids: %zu (listed %zu)\n", px, c.builds_seen, c.listed);
	printf("%s_samples_sent: %" PRIu64 "\n", px, c.want.samples);
	printf("%s_samples_stored: %" PRIu64 "\n", px, c.got.samples);
	printf("%s_edge_count_sent: %" PRIu64 "\n", px, c.want.edges);
	printf("%s_edge_count_stored: %" PRIu64 "\n", px, c.got.edges);
	printf("%s_totals_match: %d\n", px, match ? 1 : 0);
	print_resources(&o, r, cpu, store_cpu);
	bool ok = match && r->unacked == 0 && moved.stored == r->acked;
	free(r);
	free_all(agents, &o, multi);
	return ok ? 0 : 1;
}
