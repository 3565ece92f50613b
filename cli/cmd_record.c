/* SPDX-License-Identifier: Apache-2.0 */
/*
 * edgeprof record --emulate: runs a program under user-mode QEMU with the
 * LBR emulator plugin, which samples branch stacks the way the hardware and
 * the BPF program do, and feeds them through the same pipeline. This is
 * also how a machine without a branch-stack PMU profiles a test run.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/aggregate/aggregate.h"
#include "agent/pipeline/pipeline.h"
#include "agent/source/emulator/emu_reader.h"
#include "agent/stream/sink.h"
#include "cli/cli_util.h"
#include "cli/commands.h"
#include "common/export/export.h"
#include "common/profile/model.h"
#include "common/profile/profile_file.h"
#include "common/util/log.h"

struct record_opts {
	bool emulate;
	const char *event;
	unsigned period, jitter, lbr, seed;
	int chop;
	bool calls_only; /* --mode calls */
	const char *output, *exact_out;
};

struct record_ctx {
	struct ep_pipeline *pipeline;
	struct ep_binary_registry *binaries;
	uint32_t pid;
	Edgeprof__V1__Profile *exact;
	uint64_t exact_unresolved;
};

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: edgeprof record --emulate [options] -o PROFILE -- CMD [ARGS]\n"
	    "  --emulate          run CMD under QEMU with the LBR emulator (no PMU needed)\n"
	    "  --event E          branches (default) | taken | instructions\n"
	    "  --period P         mean sampling period in events (default 10007)\n"
	    "  --jitter D         period drawn from [P-D, P+D] (default P/16; 0 = fixed)\n"
	    "  --lbr N            branch-stack entries, 1-64 (default 32)\n"
	    "  --chop C           branches counted per sample (default N; 0 = whole stack)\n"
	    "  --seed S           random seed: the same seed gives the same profile\n"
	    "  --exact-out F      also write every edge's exact count (JSON export schema)\n"
	    "  --mode M           edges (default): every taken branch; calls: the record keeps\n"
	    "                     calls and returns only (call-graph mode)\n"
	    "  -o PROFILE         the profile to write\n"
	    "  --collector URL    also stream it to a collector (and the agent's --spool,\n"
	    "                     --token-file, --cacert, --cert, --key, --node options)\n");
}

/* A file whose first bytes are an ELF header: only those can be code. */
static bool is_elf(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	char magic[4];
	bool elf = read(fd, magic, 4) == 4 && memcmp(magic, "\177ELF", 4) == 0;
	close(fd);
	return elf;
}

/* The guest's mappings, as /proc/self/maps lines: guest addresses are host
 * addresses in user-mode QEMU, and every file-backed ELF mapping may hold
 * code (QEMU maps guest code without execute permission). */
static void on_maps(void *ctx, const char *text, size_t len)
{
	struct record_ctx *c = ctx;
	const char *end = text + len;
	for (const char *line = text; line < end;) {
		const char *nl = memchr(line, '\n', (size_t)(end - line));
		size_t n = nl ? (size_t)(nl - line) : (size_t)(end - line);
		char buf[PATH_MAX + 256];
		if (n < sizeof(buf)) {
			memcpy(buf, line, n);
			buf[n] = '\0';
			unsigned long long start, stop, offset;
			int path_at = 0;
			if (sscanf(buf, "%llx-%llx %*s %llx %*s %*s %n", &start, &stop, &offset,
				   &path_at) == 3 &&
			    path_at > 0 && buf[path_at] == '/' && !strstr(buf, " (deleted)") &&
			    is_elf(buf + path_at))
				ep_pipeline_mmap(c->pipeline, c->pid, start, stop - start, offset,
						 buf + path_at, NULL, 0);
		}
		line = nl ? nl + 1 : end;
	}
}

static void on_sample(void *ctx, const struct ep_sample_record *rec)
{
	struct record_ctx *c = ctx;
	ep_pipeline_sample(c->pipeline, rec);
}

static Edgeprof__V1__BinaryProfile *exact_binary(struct record_ctx *c, struct ep_binary *bin)
{
	Edgeprof__V1__Profile *p = c->exact;
	const char *hex = ep_binary_build_id_hex(bin);
	const char *path = ep_binary_recorded_path(bin);
	for (size_t i = 0; i < p->n_binaries; i++)
		if (strcmp(p->binaries[i]->paths[0], path) == 0)
			return p->binaries[i];
	Edgeprof__V1__BinaryProfile **bins =
	    realloc(p->binaries, (p->n_binaries + 1) * sizeof(*bins));
	Edgeprof__V1__BinaryProfile *bp = malloc(sizeof(*bp));
	if (bins)
		p->binaries = bins;
	if (!bins || !bp) {
		free(bp);
		return NULL;
	}
	edgeprof__v1__binary_profile__init(bp);
	bp->build_id = strdup(hex);
	bp->arch = strdup(ep_arch_name(ep_binary_arch(bin)));
	bp->paths = malloc(sizeof(*bp->paths));
	if (bp->paths) {
		bp->paths[0] = strdup(path);
		bp->n_paths = 1;
	}
	p->binaries[p->n_binaries++] = bp;
	return bp;
}

/* Ground truth: every edge of the run, resolved like the samples. */
static void on_exact(void *ctx, const struct ep_emu_exact *edges, size_t n)
{
	struct record_ctx *c = ctx;
	for (size_t i = 0; i < n; i++) {
		struct ep_resolved from, to;
		if (ep_pipeline_resolve(c->pipeline, c->pid, edges[i].from, &from) !=
		    EP_RESOLVE_OK) {
			c->exact_unresolved++;
			continue;
		}
		bool to_ok =
		    ep_pipeline_resolve(c->pipeline, c->pid, edges[i].to, &to) == EP_RESOLVE_OK &&
		    to.bin == from.bin;
		Edgeprof__V1__BinaryProfile *bp = exact_binary(c, from.bin);
		if (!bp)
			continue;
		Edgeprof__V1__Edge **es = realloc(bp->edges, (bp->n_edges + 1) * sizeof(*es));
		Edgeprof__V1__Edge *e = malloc(sizeof(*e));
		if (es)
			bp->edges = es;
		if (!es || !e) {
			free(e);
			continue;
		}
		edgeprof__v1__edge__init(e);
		e->from = from.vaddr;
		e->to = to_ok ? to.vaddr : 0;
		e->to_external = !to_ok;
		e->taken = edges[i].taken != 0;
		e->count = edges[i].count;
		e->kind = ep_proto_branch_kind((uint8_t)edges[i].kind);
		bp->edges[bp->n_edges++] = e;
	}
}

/* The program to run, found like the shell finds it; NULL when missing. */
static char *find_program(const char *name)
{
	if (strchr(name, '/'))
		return access(name, X_OK) == 0 ? strdup(name) : NULL;
	const char *path = getenv("PATH");
	if (!path)
		path = "/usr/bin:/bin";
	char buf[PATH_MAX];
	for (const char *p = path; *p;) {
		const char *colon = strchr(p, ':');
		size_t n = colon ? (size_t)(colon - p) : strlen(p);
		if (snprintf(buf, sizeof(buf), "%.*s/%s", (int)n, p, name) < (int)sizeof(buf) &&
		    access(buf, X_OK) == 0)
			return strdup(buf);
		p += n + (colon ? 1 : 0);
		if (!colon)
			break;
	}
	return NULL;
}

/* The plugin beside this edgeprof binary, or $EDGEPROF_LBR_PLUGIN. */
static char *find_plugin(void)
{
	const char *env = getenv("EDGEPROF_LBR_PLUGIN");
	if (env)
		return strdup(env);
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 32);
	if (n <= 0)
		return NULL;
	self[n] = '\0';
	char *slash = strrchr(self, '/');
	if (!slash)
		return NULL;
	strcpy(slash + 1, "edgeprof-lbr.so");
	return access(self, R_OK) == 0 ? strdup(self) : NULL;
}

static int run_emulated(const struct record_opts *o, char **cmd, const char *stream,
			pid_t *child_out, int *status)
{
	char *qemu = find_program("qemu-x86_64");
	char *plugin = find_plugin();
	int rc = -1;
	if (!qemu) {
		ep_error("qemu-x86_64 not found: install Debian's qemu-user (make deps does)");
		goto out;
	}
	if (!plugin) {
		ep_error("edgeprof-lbr.so not found beside edgeprof (or $EDGEPROF_LBR_PLUGIN)");
		goto out;
	}
	char plugin_arg[PATH_MAX * 2 + 200];
	snprintf(plugin_arg, sizeof(plugin_arg),
		 "%s,out=%s,event=%s,period=%u,jitter=%u,lbr=%u,seed=%u,filter=%s", plugin, stream,
		 o->event, o->period, o->jitter, o->lbr, o->seed, o->calls_only ? "calls" : "any");
	size_t nargs = 0;
	while (cmd[nargs])
		nargs++;
	char **argv = calloc(nargs + 4, sizeof(*argv));
	if (!argv)
		goto out;
	argv[0] = qemu;
	argv[1] = "-plugin";
	argv[2] = plugin_arg;
	for (size_t i = 0; i < nargs; i++)
		argv[3 + i] = cmd[i];
	pid_t pid = fork();
	if (pid < 0) {
		ep_error("cannot start %s: %s", cmd[0], strerror(errno));
		free(argv);
		goto out;
	}
	if (pid == 0) {
		execv(qemu, argv);
		fprintf(stderr, "edgeprof: error: cannot run %s: %s\n", qemu, strerror(errno));
		_exit(127);
	}
	free(argv);
	*child_out = pid;
	while (waitpid(pid, status, 0) < 0) {
		if (errno != EINTR) {
			ep_error("waiting for %s: %s", cmd[0], strerror(errno));
			goto out;
		}
	}
	rc = 0;
out:
	free(qemu);
	free(plugin);
	return rc;
}

int ep_cmd_record(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"emulate", no_argument, NULL, 'E'},
	    {"event", required_argument, NULL, 'e'},
	    {"period", required_argument, NULL, 'p'},
	    {"jitter", required_argument, NULL, 'j'},
	    {"lbr", required_argument, NULL, 'n'},
	    {"chop", required_argument, NULL, 'c'},
	    {"seed", required_argument, NULL, 's'},
	    {"exact-out", required_argument, NULL, 'x'},
	    {"mode", required_argument, NULL, 'm'},
	    {"output", required_argument, NULL, 'o'},
	    {"help", no_argument, NULL, 'h'},
	    EP_SINK_OPTIONS,
	    {0},
	};
	struct ep_sink_options so;
	ep_sink_options_init(&so);
	struct record_opts o = {.event = "branches",
				.period = 10007,
				.jitter = UINT_MAX,
				.lbr = 32,
				.seed = 1,
				.chop = EP_CHOP_AUTO};
	optind = 1;
	int ch;
	/* '+': options end at the program to run */
	while ((ch = getopt_long(argc, argv, "+o:h", opts, NULL)) != -1) {
		unsigned v;
		int so_rc = ep_sink_option(&so, ch, optarg);
		if (so_rc < 0)
			return 2;
		if (so_rc > 0)
			continue;
		switch (ch) {
		case 'E':
			o.emulate = true;
			break;
		case 'e':
			if (strcmp(optarg, "branches") && strcmp(optarg, "taken") &&
			    strcmp(optarg, "instructions")) {
				ep_error("--event: '%s' is not branches, taken or instructions",
					 optarg);
				return 2;
			}
			o.event = optarg;
			break;
		case 'p':
		case 'j':
		case 'n':
		case 's':
		case 'c':
			if (ep_parse_uint(optarg, 0, UINT_MAX - 1, &v) != 0) {
				ep_error("--%s: '%s' is not a number",
					 ch == 'p'   ? "period"
					 : ch == 'j' ? "jitter"
					 : ch == 'n' ? "lbr"
					 : ch == 's' ? "seed"
						     : "chop",
					 optarg);
				return 2;
			}
			if (ch == 'p')
				o.period = v;
			else if (ch == 'j')
				o.jitter = v;
			else if (ch == 'n')
				o.lbr = v;
			else if (ch == 's')
				o.seed = v;
			else
				o.chop = (int)v;
			break;
		case 'x':
			o.exact_out = optarg;
			break;
		case 'm':
			if (strcmp(optarg, "edges") != 0 && strcmp(optarg, "calls") != 0) {
				ep_error("--mode: '%s' is not edges or calls", optarg);
				return 2;
			}
			o.calls_only = strcmp(optarg, "calls") == 0;
			break;
		case 'o':
			o.output = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!o.emulate) {
		ep_error("record samples a program through the LBR emulator: pass --emulate (live "
			 "sampling of a machine is the agent's job)");
		return 2;
	}
	if (o.jitter == UINT_MAX)
		o.jitter = o.period / 16;
	if (o.period == 0 || o.jitter >= o.period || o.lbr < 1 || o.lbr > EP_MAX_BRANCH_ENTRIES) {
		ep_error("need --period > --jitter >= 0 and --lbr between 1 and %d",
			 EP_MAX_BRANCH_ENTRIES);
		return 2;
	}
	if ((!o.output && !so.streamer.collector) || optind >= argc) {
		ep_error("record needs -o PROFILE and/or --collector URL, and a program to run "
			 "after --");
		usage(stderr);
		return 2;
	}
	char **cmd = argv + optind;
	char *program = find_program(cmd[0]);
	if (!program) {
		ep_error("%s: command not found", cmd[0]);
		return 2;
	}
	free(program);

	char stream[] = "/tmp/edgeprof-emu-XXXXXX";
	int fd = mkstemp(stream);
	if (fd < 0) {
		ep_error("cannot create a temporary file: %s", strerror(errno));
		return 1;
	}
	close(fd);
	pid_t child = 0;
	int status = 0;
	int rc = 1;
	struct ep_binary_registry *reg = ep_binreg_new();
	struct ep_pipeline *pipeline = NULL;
	Edgeprof__V1__Profile *profile = NULL;
	struct record_ctx ctx = {0};
	if (!reg || run_emulated(&o, cmd, stream, &child, &status) != 0)
		goto out;

	struct ep_pipeline_config cfg;
	ep_pipeline_config_default(&cfg);
	cfg.chop = o.chop == EP_CHOP_AUTO ? (int)o.lbr : o.chop;
	cfg.calls_only = o.calls_only;
	pipeline = ep_pipeline_new(&cfg, reg);
	ctx.exact = malloc(sizeof(*ctx.exact));
	if (!pipeline || !ctx.exact)
		goto out;
	edgeprof__v1__profile__init(ctx.exact);
	ctx.exact->format_version = 1;
	ctx.pipeline = pipeline;
	ctx.binaries = reg;
	ctx.pid = (uint32_t)child;
	struct ep_emu_callbacks cb = {
	    .ctx = &ctx, .on_maps = on_maps, .on_sample = on_sample, .on_exact = on_exact};
	struct ep_emu_stats es;
	char err[512];
	if (ep_emu_read(stream, &cb, &es, err, sizeof(err)) != 0)
		ep_error("%s", err);

	rc = 0;
	if (WIFSIGNALED(status)) {
		ep_error("%s was killed by signal %d (%s): profile of what ran written", cmd[0],
			 WTERMSIG(status), strsignal(WTERMSIG(status)));
		rc = 1;
	} else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
		ep_warn("%s exited with status %d: profile of what ran written", cmd[0],
			WEXITSTATUS(status));
		rc = 1;
	}
	if (!es.ended)
		ep_warn("%s: the run did not end normally: exact counts are not available", cmd[0]);

	profile = ep_pipeline_profile(pipeline);
	if (!profile) {
		rc = 1;
		goto out;
	}
	free(profile->config->source);
	free(profile->config->event);
	profile->config->source = strdup("emulator");
	profile->config->event = strdup(o.event);
	profile->config->period = o.period;
	profile->config->jitter = o.jitter;
	profile->config->entries = o.lbr;
	if (o.output && ep_profile_write(o.output, profile, err, sizeof(err)) != 0) {
		ep_error("%s", err);
		rc = 1;
	}
	if (so.streamer.collector) {
		/* the whole run as one batch, through the agent's streaming path */
		struct ep_sink sink = {.event = o.event, .period = o.period, .jitter = o.jitter};
		snprintf(sink.source, sizeof(sink.source), "emulator");
		if (ep_sink_open(&sink, NULL, &so) != 0 || ep_sink_emit(&sink, pipeline) != 0 ||
		    ep_sink_finish(&sink, so.flush_s) != 0)
			rc = 1;
		ep_sink_free(&sink);
	}
	ep_info("%s: %llu samples, %llu branches counted", o.output ? o.output : "collector",
		(unsigned long long)profile->stats->samples,
		(unsigned long long)profile->stats->branches_counted);
	if (es.ended)
		ep_info("%s ran %llu branches, %llu instructions", cmd[0],
			(unsigned long long)es.branches, (unsigned long long)es.instructions);
	if (o.exact_out && es.ended) {
		for (size_t i = 0; i < ctx.exact->n_binaries; i++) {
			Edgeprof__V1__BinaryProfile *bp = ctx.exact->binaries[i];
			qsort(bp->edges, bp->n_edges, sizeof(*bp->edges), ep_edge_cmp);
		}
		FILE *out = fopen(o.exact_out, "w");
		if (!out ||
		    ep_export(ctx.exact, EP_EXPORT_JSON, NULL, out, err, sizeof(err)) != 0 ||
		    fclose(out) != 0) {
			ep_error("%s: cannot write the exact counts: %s", o.exact_out,
				 out ? err : strerror(errno));
			rc = 1;
		}
	}
out:
	unlink(stream);
	if (ctx.exact)
		ep_profile_free(ctx.exact);
	if (profile)
		ep_profile_free(profile);
	ep_pipeline_free(pipeline);
	ep_binreg_free(reg);
	return rc;
}
