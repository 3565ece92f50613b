/* SPDX-License-Identifier: Apache-2.0 */
/*
 * edgeprof agent: live collection. The BPF program samples the machine (or
 * the pids and cgroups asked for), the samples go through the pipeline, and
 * the profile is written every interval and on exit (SIGTERM, SIGINT or the
 * end of --duration).
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/attribute/container.h"
#include "agent/attribute/k8s_pods.h"
#include "agent/pipeline/pipeline.h"
#include "agent/source/live/live_source.h"
#include "agent/source/live/pmu_event.h"
#include "agent/source/perf_data/perf_data_feed.h"
#include "agent/stream/sink.h"
#include "cli/cli_util.h"
#include "cli/commands.h"
#include "common/profile/profile_file.h"
#include "common/util/clock.h"
#include "common/util/log.h"
#include "common/util/u64map.h"

#define MAX_TARGETS 256
/* a process whose addresses do not resolve gets its maps re-read, at most
 * this often: new libraries appear, but /proc is not free */
#define MAPS_REREAD_NS 1000000000ULL
/* an exited process's mappings are dropped this long after its exit event:
 * far longer than a drain interval, so its last samples still resolve */
#define FORGET_AFTER_NS 2000000000ULL

static volatile sig_atomic_t stop_requested;
/* this node's pods from the API server; NULL outside a cluster */
static struct ep_k8s *k8s;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

struct period_stats {
	uint64_t n, min, max;
	double sum, sumsq;
};

struct agent_ctx {
	struct ep_pipeline *pipeline;
	struct period_stats periods; /* as the samples report them */
	struct ep_u64map maps_read;  /* pid -> monotonic ns of the last /proc read */
	uint64_t unresolved_pids;    /* processes gone before their maps were read */
	/* exited processes, forgotten FORGET_AFTER_NS later (their last samples
	 * may still be in the other ring buffer): FIFO of pids by exit time,
	 * and pid -> exit time to tell a reused pid from the one that exited */
	struct exit_entry {
		uint32_t pid;
		uint64_t at;
	} * exits;
	size_t exits_head, exits_n, exits_cap;
	struct ep_u64map exited;
	uint64_t forgotten;
	/* an on-demand session's context: its counts carry the session's
	 * labels, not each process's container */
	bool session;
};

/* The process's executable mappings from /proc. Each file is opened
 * through /proc/PID/map_files/START-END: the very file mapped, even when it
 * has since been deleted or replaced on disk (an upgrade under a running
 * process), and inside containers. Without the right to read map_files
 * (CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE) /proc/PID/root/PATH is the
 * fallback, and deleted files are skipped. The registry caches files by
 * identity (device, inode, size, mtime), so a library mapped by a thousand
 * processes is read once. */
static void read_maps(struct agent_ctx *c, uint32_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%u/maps", pid);
	FILE *f = fopen(path, "r");
	if (!f) {
		c->unresolved_pids++;
		return;
	}
	char line[PATH_MAX + 256];
	while (fgets(line, sizeof(line), f)) {
		unsigned long long start, end, offset;
		char perms[8];
		int at = 0;
		if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %n", &start, &end, perms, &offset,
			   &at) != 4 ||
		    perms[2] != 'x' || line[at] != '/')
			continue;
		line[strcspn(line, "\n")] = '\0';
		char *deleted = strstr(line + at, " (deleted)");
		if (deleted && deleted[10] == '\0')
			*deleted = '\0';
		char file[PATH_MAX + 64];
		snprintf(file, sizeof(file), "/proc/%u/map_files/%llx-%llx", pid, start, end);
		if (access(file, R_OK) != 0) {
			if (deleted)
				continue;
			snprintf(file, sizeof(file), "/proc/%u/root%s", pid, line + at);
		}
		ep_pipeline_mmap_at(c->pipeline, pid, start, end - start, offset, line + at, file);
	}
	fclose(f);
}

static void note_exit(struct agent_ctx *c, uint32_t pid)
{
	if (c->exits_head + c->exits_n == c->exits_cap) {
		if (c->exits_head > 0) {
			memmove(c->exits, c->exits + c->exits_head, c->exits_n * sizeof(*c->exits));
			c->exits_head = 0;
		} else {
			size_t cap = c->exits_cap ? c->exits_cap * 2 : 256;
			struct exit_entry *e = realloc(c->exits, cap * sizeof(*e));
			if (!e)
				return; /* kept until the agent exits: a leak, not an error */
			c->exits = e;
			c->exits_cap = cap;
		}
	}
	uint64_t at = ep_mono_ns();
	uint64_t *slot = ep_u64map_upsert(&c->exited, pid, NULL);
	if (!slot)
		return;
	*slot = at;
	c->exits[c->exits_head + c->exits_n++] = (struct exit_entry){pid, at};
}

/* Drops the processes that exited long enough ago: memory stays bounded by
 * the processes alive, not by all the machine ever ran. */
static void forget_exited(struct agent_ctx *c)
{
	uint64_t now = ep_mono_ns();
	while (c->exits_n && now - c->exits[c->exits_head].at >= FORGET_AFTER_NS) {
		struct exit_entry e = c->exits[c->exits_head++];
		c->exits_n--;
		const uint64_t *at = ep_u64map_get(&c->exited, e.pid);
		if (!at || *at != e.at)
			continue; /* the pid was reused since */
		ep_u64map_remove(&c->exited, e.pid);
		ep_u64map_remove(&c->maps_read, e.pid);
		ep_pipeline_forget(c->pipeline, e.pid);
		c->forgotten++;
	}
}

/* Which container the process runs in, from /proc/PID/cgroup: its counts
 * are kept apart and labelled with the container's id and cgroup, and its
 * pod's name and namespace when the API server lists it. Host processes
 * stay unlabelled (a set per systemd service would cost memory for
 * little). */
/* The kubelet reports a container's id to the API server only once the
 * container runs, after its first exec: processes of containers not listed
 * yet are labelled again at each interval until they are, for a while. */
#define POD_PENDING_MAX 256
#define POD_PENDING_NS	(120ULL * 1000000000ULL)
static struct pod_pending {
	uint32_t pid;
	uint64_t since;
} pod_pending[POD_PENDING_MAX];
static size_t npod_pending;

/* true when the process is labelled for good (or gone), false when its
 * container's pod is not known yet */
static bool label_process_once(struct agent_ctx *c, uint32_t pid)
{
	char path[64], text[4096], cgroup[PATH_MAX];
	snprintf(path, sizeof(path), "/proc/%u/cgroup", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return true;
	size_t n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	struct ep_container_ref ref;
	if (!ep_cgroup_from_proc(text, cgroup, sizeof(cgroup)) ||
	    !ep_container_from_cgroup(cgroup, &ref) || ref.monitor) {
		ep_pipeline_label_pid(c->pipeline, pid, NULL);
		return true;
	}
	Edgeprof__V1__Labels labels = EDGEPROF__V1__LABELS__INIT;
	labels.container_id = ref.id;
	labels.cgroup = cgroup;
	const struct ep_k8s_pod *pod = k8s ? ep_k8s_pod_of(k8s, ref.id, NULL) : NULL;
	if (pod) {
		labels.pod = (char *)pod->name;
		labels.namespace_ = (char *)pod->ns;
	}
	ep_pipeline_label_pid(c->pipeline, pid, &labels);
	return pod || !k8s;
}

static void label_process(struct agent_ctx *c, uint32_t pid)
{
	if (c->session || label_process_once(c, pid))
		return;
	for (size_t i = 0; i < npod_pending; i++)
		if (pod_pending[i].pid == pid)
			return;
	if (npod_pending < POD_PENDING_MAX)
		pod_pending[npod_pending++] = (struct pod_pending){pid, ep_mono_ns()};
}

/* At each interval: the processes whose pods were not known yet. */
static void label_pending(struct agent_ctx *c)
{
	uint64_t now = ep_mono_ns();
	for (size_t i = 0; i < npod_pending;) {
		if (now - pod_pending[i].since > POD_PENDING_NS ||
		    label_process_once(c, pod_pending[i].pid))
			pod_pending[i] = pod_pending[--npod_pending];
		else
			i++;
	}
}

/* exec, fork and exit as they happen: a forked child starts with its
 * parent's mappings, an exec'd process gets its new ones read at once (a
 * short-lived program may be gone by its first sample's turn). */
static void on_process_event(void *ctx, const struct ep_proc_record *rec)
{
	struct agent_ctx *c = ctx;
	uint64_t *last;
	switch (rec->type) {
	case EP_PROC_FORK:
		ep_u64map_remove(&c->exited, rec->pid); /* a reused pid is a new process */
		ep_pipeline_fork(c->pipeline, rec->pid, rec->ppid);
		last = ep_u64map_upsert(&c->maps_read, rec->pid, NULL);
		if (last)
			*last = ep_mono_ns();
		break;
	case EP_PROC_EXEC:
		ep_pipeline_exec(c->pipeline, rec->pid);
		/* runtimes move a container's first process into its cgroup
		 * between fork and exec: look again */
		label_process(c, rec->pid);
		read_maps(c, rec->pid);
		last = ep_u64map_upsert(&c->maps_read, rec->pid, NULL);
		if (last)
			*last = ep_mono_ns();
		break;
	case EP_PROC_EXIT:
		ep_pipeline_exit(c->pipeline, rec->pid);
		note_exit(c, rec->pid);
		break;
	case EP_PROC_MMAP:
		/* new code mapped (dlopen), handed on at the process's next
		 * sample: read its maps again. A process not seen yet gets them
		 * read whole at its first sample anyway. */
		last = ep_u64map_get(&c->maps_read, rec->pid);
		if (!last)
			break;
		read_maps(c, rec->pid);
		*last = ep_mono_ns();
		ep_debug("pid %u mapped executable code: its maps read again", rec->pid);
		break;
	default:
		break;
	}
}

static void on_sample(void *ctx, const struct ep_sample_record *rec)
{
	struct agent_ctx *c = ctx;
	struct period_stats *ps = &c->periods;
	/* a CPU's first sample has no previous one to measure from */
	if (rec->period > 0) {
		if (ps->n == 0 || rec->period < ps->min)
			ps->min = rec->period;
		if (rec->period > ps->max)
			ps->max = rec->period;
		ps->n++;
		ps->sum += (double)rec->period;
		ps->sumsq += (double)rec->period * (double)rec->period;
	}
	bool inserted = false;
	uint64_t *last = ep_u64map_upsert(&c->maps_read, rec->pid, &inserted);
	if (inserted) {
		label_process(c, rec->pid);
		read_maps(c, rec->pid);
		if (last)
			*last = ep_mono_ns();
	} else if (last && !(rec->flags & EP_SAMPLE_IP_KERNEL)) {
		struct ep_resolved r;
		if (ep_pipeline_resolve(c->pipeline, rec->pid, rec->ip, &r) != EP_RESOLVE_OK &&
		    ep_mono_ns() - *last > MAPS_REREAD_NS) {
			read_maps(c, rec->pid);
			*last = ep_mono_ns();
		}
	}
	ep_pipeline_sample(c->pipeline, rec);
}

struct replay_ctx {
	struct ep_sink *sink;
	struct ep_pipeline *pipeline;
	uint64_t samples, batch_samples;
	int rc;
};

static void replay_after_sample(void *ctx)
{
	struct replay_ctx *r = ctx;
	if (++r->samples % r->batch_samples == 0 && ep_sink_emit(r->sink, r->pipeline) != 0)
		r->rc = 1;
}

/* A recording through the same path as live samples: the same pipeline,
 * the same batches, so old recordings join the fleet's store. */
static int run_replay(const char *path, struct ep_binary_registry *reg, struct ep_sink *sink,
		      unsigned batch_samples)
{
	struct ep_pipeline_config pcfg;
	ep_pipeline_config_default(&pcfg);
	struct ep_pipeline *p = ep_pipeline_new(&pcfg, reg);
	if (!p) {
		ep_error("out of memory");
		return 1;
	}
	snprintf(sink->source, sizeof(sink->source), "perf.data:%s", path);
	struct replay_ctx rc = {.sink = sink, .pipeline = p, .batch_samples = batch_samples};
	struct ep_perf_data_feed_info info = {0};
	sink->event = info.event; /* the feed fills it in from the header */
	char err[512];
	int feed =
	    ep_feed_perf_data_hooked(path, p, &info, replay_after_sample, &rc, err, sizeof(err));
	if (feed != 0) {
		ep_error("%s", err);
		rc.rc = 1; /* what was read before the damage is still sent */
	}
	if (!info.event[0])
		sink->event = "unknown";
	if (ep_sink_emit(sink, p) != 0)
		rc.rc = 1;
	ep_info("%s: %llu samples replayed", path, (unsigned long long)rc.samples);
	ep_pipeline_free(p);
	return rc.rc;
}

/* The context's memory (the pipeline, the process tables). */
static void ctx_free(struct agent_ctx *c)
{
	ep_u64map_free(&c->maps_read);
	ep_u64map_free(&c->exited);
	free(c->exits);
	ep_pipeline_free(c->pipeline);
}

/*
 * On-demand sessions (collector/sessions): the collector hands one over in
 * an ingest answer; the agent resolves its target to a cgroup or a pid and
 * samples it at the session's rate with a second BPF program on its own
 * perf events, on top of the continuous profile, which goes on unchanged.
 * Its counts go through their own pipeline and travel with
 * Labels.session_id; how it stands travels as SessionReports. An agent that
 * stops mid-session sends what it has and leaves the session running: its
 * successor on the node is handed the rest (same deadline).
 */
#define MAX_SESSIONS 8
#define FINISHED_IDS 64

struct agent_session {
	Edgeprof__V1__ProfileSession *req;
	struct ep_live *live;
	struct agent_ctx ctx;
	struct ep_sink sink;
	Edgeprof__V1__Labels labels;
	char cgroup[PATH_MAX], cgroup_label[PATH_MAX], target[PATH_MAX + 128];
	char container_id[sizeof(((struct ep_container_ref *)0)->id)];
	char pod_ns[64], pod_name[254]; /* a pod session's */
	uint32_t pid;
	uint64_t started_ns, deadline_ns; /* unix time */
	uint64_t lost_added;
};

struct agent_sessions {
	struct ep_sink *main_sink; /* its streamer carries the sessions' batches too */
	const struct ep_live_config *main_cfg;
	struct ep_binary_registry *reg;
	struct agent_session *active[MAX_SESSIONS];
	size_t nactive;
	/* sessions ended here, so one handed over again is not run twice */
	char finished[FINISHED_IDS][40];
	size_t nfinished;
};

static void session_report(struct agent_sessions *as, const char *id,
			   Edgeprof__V1__SessionState state, const char *message,
			   bool target_absent, uint64_t started_ns, uint64_t ended_ns,
			   uint64_t samples)
{
	Edgeprof__V1__SessionReport r = EDGEPROF__V1__SESSION_REPORT__INIT;
	r.session_id = (char *)id;
	r.state = state;
	r.message = (char *)message;
	r.target_absent = target_absent;
	r.started_ns = started_ns;
	r.ended_ns = ended_ns;
	r.samples = samples;
	if (ep_streamer_report_session(as->main_sink->streamer, &r) != 0)
		ep_error("session %s: out of memory queueing its report", id);
}

static bool session_known(const struct agent_sessions *as, const char *id)
{
	for (size_t i = 0; i < as->nactive; i++)
		if (strcmp(as->active[i]->req->session_id, id) == 0)
			return true;
	for (size_t i = 0; i < as->nfinished; i++)
		if (strcmp(as->finished[i], id) == 0)
			return true;
	return false;
}

/* A pod's cgroup: the kubelet's pod directory, which holds its containers,
 * else (another layout) the cgroup of its first container found here. 0,
 * -1 not here (why says so), -2 cannot tell (no API access). */
static int session_resolve_pod(struct agent_session *x, const char *root, char *why, size_t whylen)
{
	const char *q = x->req->pod, *slash = strchr(q, '/');
	if (!slash || slash == q || !slash[1] || strchr(slash + 1, '/') ||
	    (size_t)(slash - q) >= sizeof(x->pod_ns) || strlen(slash + 1) >= sizeof(x->pod_name)) {
		snprintf(why, whylen, "pod '%s': expected NAMESPACE/NAME", q);
		return -2;
	}
	snprintf(x->pod_ns, sizeof(x->pod_ns), "%.*s", (int)(slash - q), q);
	snprintf(x->pod_name, sizeof(x->pod_name), "%s", slash + 1);
	if (!k8s) {
		snprintf(why, whylen,
			 "pod %s: pod names need API access: this agent has no Kubernetes API "
			 "(no KUBERNETES_SERVICE_HOST, no --k8s-api)",
			 q);
		return -2;
	}
	const struct ep_k8s_pod *pod;
	const char *ids[16];
	size_t nids = 0;
	char err[600];
	int found =
	    ep_k8s_find_pod(k8s, x->pod_ns, x->pod_name, &pod, ids, 16, &nids, err, sizeof(err));
	if (found < 0) {
		snprintf(why, whylen, "pod %s: pod names need API access: %s", q, err);
		return -2;
	}
	if (!found) {
		snprintf(why, whylen, "pod %s: not on this node", q);
		return -1;
	}
	if (ep_pod_find_cgroup(root, pod->uid, x->cgroup, sizeof(x->cgroup)) == 0)
		return 0;
	for (size_t i = 0; i < nids; i++)
		if (ep_container_find_cgroup(root, ids[i], x->cgroup, sizeof(x->cgroup), err,
					     sizeof(err)) == 0)
			return 0;
	snprintf(why, whylen,
		 "pod %s (uid %s): no cgroup of it or of its %zu containers on this node", q,
		 pod->uid, nids);
	return -1;
}

/* The target's cgroup v2 directory (or pid) on this node; why it is not
 * here otherwise: -1 the target is not on this node, -2 this agent cannot
 * tell. */
static int session_resolve(struct agent_session *x, char *why, size_t whylen)
{
	const Edgeprof__V1__ProfileSession *q = x->req;
	char root[PATH_MAX];
	if (q->pid) {
		char proc[64];
		snprintf(proc, sizeof(proc), "/proc/%u", q->pid);
		if (access(proc, F_OK) != 0) {
			snprintf(why, whylen, "pid %u: no such process on this node", q->pid);
			return -1;
		}
		x->pid = q->pid;
		snprintf(x->target, sizeof(x->target), "pid %u", q->pid);
		return 0;
	}
	if (ep_cgroup2_root(root, sizeof(root)) != 0) {
		snprintf(why, whylen, "no cgroup v2 mount on this node");
		return -1;
	}
	if (q->pod[0]) {
		int rc = session_resolve_pod(x, root, why, whylen);
		if (rc != 0)
			return rc;
	} else if (q->container_id[0]) {
		char err[512];
		if (ep_container_find_cgroup(root, q->container_id, x->cgroup, sizeof(x->cgroup),
					     err, sizeof(err)) != 0) {
			snprintf(why, whylen, "%s", err);
			return -1;
		}
	} else {
		/* a path under the cgroup v2 root, given with or without it */
		size_t rl = strlen(root);
		bool rooted =
		    strncmp(q->cgroup, root, rl) == 0 && (q->cgroup[rl] == '/' || !q->cgroup[rl]);
		int len = snprintf(x->cgroup, sizeof(x->cgroup), "%s%s%s", rooted ? "" : root,
				   rooted || q->cgroup[0] == '/' ? "" : "/", q->cgroup);
		struct stat st;
		if (len >= (int)sizeof(x->cgroup) || stat(x->cgroup, &st) != 0 ||
		    !S_ISDIR(st.st_mode)) {
			snprintf(why, whylen, "cgroup %s: no such cgroup on this node", q->cgroup);
			return -1;
		}
	}
	const char *rel = x->cgroup + strlen(root);
	snprintf(x->cgroup_label, sizeof(x->cgroup_label), "%s", rel[0] ? rel : "/");
	struct ep_container_ref ref;
	if (q->pod[0])
		snprintf(x->target, sizeof(x->target), "pod %s, cgroup %s", q->pod,
			 x->cgroup_label);
	else if (ep_container_from_cgroup(x->cgroup_label, &ref) && !ref.monitor)
		snprintf(x->target, sizeof(x->target), "container %.64s, cgroup %s", ref.id,
			 x->cgroup_label);
	else
		snprintf(x->target, sizeof(x->target), "cgroup %s", x->cgroup_label);
	return 0;
}

static void session_free(struct agent_session *x)
{
	if (!x)
		return;
	ep_live_close(x->live);
	ctx_free(&x->ctx);
	edgeprof__v1__profile_session__free_unpacked(x->req, NULL);
	free(x);
}

/* Takes req (freed here one way or another). */
static void session_start(struct agent_sessions *as, Edgeprof__V1__ProfileSession *req)
{
	if (session_known(as, req->session_id)) {
		edgeprof__v1__profile_session__free_unpacked(req, NULL);
		return;
	}
	uint64_t now = ep_unix_ns();
	char why[PATH_MAX + 600];
	struct agent_session *x = calloc(1, sizeof(*x));
	if (!x) {
		session_report(as, req->session_id, EDGEPROF__V1__SESSION_STATE__SESSION_FAILED,
			       "agent out of memory", false, now, now, 0);
		edgeprof__v1__profile_session__free_unpacked(req, NULL);
		return;
	}
	x->req = req;
	x->started_ns = now;
	x->deadline_ns = req->deadline_ns ? req->deadline_ns : now + req->duration_ms * 1000000ULL;
	bool absent = false;
	int rc = 0;
	if (as->nactive == MAX_SESSIONS) {
		snprintf(why, sizeof(why), "this agent already runs %d sessions", MAX_SESSIONS);
		rc = -1;
	} else if (x->deadline_ns <= now) {
		snprintf(why, sizeof(why), "the session ended before this agent could resume it");
		rc = -1;
	} else if ((rc = session_resolve(x, why, sizeof(why))) != 0) {
		absent = rc == -1;
		rc = -1;
	}
	struct ep_live_config cfg = *as->main_cfg;
	const char *cgroups[1] = {x->cgroup};
	if (rc == 0) {
		/* the target only, sampled more often than the continuous profile */
		cfg.pids = x->pid ? &x->pid : NULL;
		cfg.npids = x->pid ? 1 : 0;
		cfg.cgroups = x->pid ? NULL : cgroups;
		cfg.ncgroups = x->pid ? 0 : 1;
		cfg.period = req->period ? req->period : (cfg.period / 4 ? cfg.period / 4 : 1);
		cfg.jitter = cfg.period / 16;
		cfg.ip_hz = cfg.ip_hz * 4 > 10000 ? 10000 : cfg.ip_hz * 4;
		cfg.calls_only = strcmp(req->mode, "calls") == 0;
		char err[512];
		x->live = ep_live_open(&cfg, err, sizeof(err));
		if (!x->live) {
			snprintf(why, sizeof(why), "%s", err);
			rc = -1;
		}
	}
	if (rc == 0 && !req->deadline_ns) {
		/* loading the program takes a while (BTF): the session's time
		 * starts when its sampling does */
		x->started_ns = ep_unix_ns();
		x->deadline_ns = x->started_ns + req->duration_ms * 1000000ULL;
	}
	if (rc == 0) {
		struct ep_pipeline_config pcfg;
		ep_pipeline_config_default(&pcfg);
		pcfg.append_trigger = ep_live_counts_all_branches(x->live);
		pcfg.calls_only = cfg.calls_only && ep_live_has_branch_stacks(x->live);
		x->ctx.pipeline = ep_pipeline_new(&pcfg, as->reg);
		x->ctx.session = true;
		if (!x->ctx.pipeline) {
			snprintf(why, sizeof(why), "agent out of memory");
			rc = -1;
		}
	}
	if (rc != 0) {
		ep_warn("session %s: %s", req->session_id, why);
		session_report(as, req->session_id, EDGEPROF__V1__SESSION_STATE__SESSION_FAILED,
			       why, absent, now, now, 0);
		if (as->nfinished < FINISHED_IDS)
			snprintf(as->finished[as->nfinished++], sizeof(as->finished[0]), "%s",
				 req->session_id);
		session_free(x);
		return;
	}
	ep_live_on_process_events(x->live, on_process_event, &x->ctx);
	edgeprof__v1__labels__init(&x->labels);
	x->labels.session_id = req->session_id;
	x->labels.cgroup = x->cgroup_label;
	struct ep_container_ref ref;
	if (x->cgroup_label[0] && ep_container_from_cgroup(x->cgroup_label, &ref) && !ref.monitor) {
		snprintf(x->container_id, sizeof(x->container_id), "%s", ref.id);
		x->labels.container_id = x->container_id;
	}
	if (x->pod_name[0]) {
		x->labels.pod = x->pod_name;
		x->labels.namespace_ = x->pod_ns;
	}
	x->sink = (struct ep_sink){.streamer = as->main_sink->streamer,
				   .event = ep_live_event(x->live),
				   .mode = cfg.calls_only ? "calls" : "edges",
				   .labels = &x->labels,
				   .window_start_ns = now};
	snprintf(x->sink.source, sizeof(x->sink.source), "bpf");
	ep_live_period(x->live, &x->sink.period, &x->sink.jitter);
	as->active[as->nactive++] = x;
	ep_info("session %s: sampling %s for %llu s (%s)", req->session_id, x->target,
		(unsigned long long)((x->deadline_ns - now) / 1000000000ULL),
		ep_live_mode(x->live));
	session_report(as, req->session_id, EDGEPROF__V1__SESSION_STATE__SESSION_RUNNING, x->target,
		       false, now, x->deadline_ns, 0);
}

static uint64_t session_samples(struct agent_session *x)
{
	struct ep_live_counters lc;
	ep_live_counters(x->live, &lc);
	return lc.received;
}

static void session_emit(struct agent_session *x)
{
	struct ep_live_counters lc;
	ep_live_counters(x->live, &lc);
	ep_pipeline_add_lost(x->ctx.pipeline, lc.reserve_failed - x->lost_added);
	x->lost_added = lc.reserve_failed;
	ep_sink_emit(&x->sink, x->ctx.pipeline);
}

/* Stops the session's sampling and sends the rest of its counts. done: it
 * reached its end (DONE travels with its last counts); otherwise the agent
 * is stopping and the session stays running for the next agent. */
static void session_end(struct agent_sessions *as, size_t i, bool done)
{
	struct agent_session *x = as->active[i];
	ep_live_stop(x->live);
	ep_live_poll(x->live, 0, on_sample, &x->ctx);
	uint64_t samples = session_samples(x);
	session_report(as, x->req->session_id,
		       done ? EDGEPROF__V1__SESSION_STATE__SESSION_DONE
			    : EDGEPROF__V1__SESSION_STATE__SESSION_RUNNING,
		       x->target, false, x->started_ns, done ? ep_unix_ns() : x->deadline_ns,
		       samples);
	session_emit(x);
	ep_info("session %s: %s, %llu samples of %s", x->req->session_id,
		done ? "done" : "left running for the next agent (this one is stopping)",
		(unsigned long long)samples, x->target);
	if (done && as->nfinished < FINISHED_IDS)
		snprintf(as->finished[as->nfinished++], sizeof(as->finished[0]), "%s",
			 x->req->session_id);
	session_free(x);
	as->active[i] = as->active[--as->nactive];
}

/* One turn of the main loop: new sessions from the collector, samples,
 * counts every interval, sessions that reached their end. */
static void sessions_turn(struct agent_sessions *as, bool emit)
{
	Edgeprof__V1__ProfileSession **got = NULL;
	size_t n = ep_streamer_take_sessions(as->main_sink->streamer, &got);
	for (size_t i = 0; i < n; i++)
		session_start(as, got[i]);
	free(got);
	uint64_t now = ep_unix_ns();
	for (size_t i = 0; i < as->nactive;) {
		struct agent_session *x = as->active[i];
		ep_live_poll(x->live, 0, on_sample, &x->ctx);
		forget_exited(&x->ctx);
		if (now >= x->deadline_ns) {
			session_end(as, i, true);
			continue;
		}
		if (emit) {
			session_emit(x);
			session_report(as, x->req->session_id,
				       EDGEPROF__V1__SESSION_STATE__SESSION_RUNNING, x->target,
				       false, x->started_ns, x->deadline_ns, session_samples(x));
		}
		i++;
	}
}

static int run_live(struct ep_live_config *cfg, bool jitter_set, struct ep_binary_registry *reg,
		    struct ep_sink *sink, unsigned duration, unsigned interval)
{
	if (!jitter_set)
		cfg->jitter = cfg->period / 16; /* SPEC's example: D = P/16 */
	if (cfg->jitter >= cfg->period) {
		ep_error("--jitter must be smaller than --period");
		return 2;
	}
	char err[512];
	struct ep_live *live = ep_live_open(cfg, err, sizeof(err));
	if (!live) {
		ep_error("%s", err);
		return 1;
	}
	if (ep_live_has_branch_stacks(live))
		ep_info("%s", ep_live_mode(live));
	else
		ep_warn("%s", ep_live_mode(live));
	sink->event = ep_live_event(live);

	struct ep_pipeline_config pcfg;
	ep_pipeline_config_default(&pcfg);
	/* only an event that counts every branch ends its trace at the sample IP */
	pcfg.append_trigger = ep_live_counts_all_branches(live);
	pcfg.calls_only = cfg->calls_only && ep_live_has_branch_stacks(live);
	struct agent_ctx ctx = {.pipeline = ep_pipeline_new(&pcfg, reg)};
	struct agent_sessions sessions = {.main_sink = sink, .main_cfg = cfg, .reg = reg};
	int rc = 0;
	if (!ctx.pipeline) {
		ep_error("out of memory");
		rc = 1;
		goto out;
	}
	ep_live_on_process_events(live, on_process_event, &ctx);
	uint64_t start = ep_mono_ns(), last_write = start, lost_added = 0;
	struct ep_live_counters lc;
	while (!stop_requested) {
		if (ep_live_poll(live, (int)cfg->drain_ms, on_sample, &ctx) < 0) {
			ep_error("reading the ring buffer failed: %s", strerror(errno));
			rc = 1;
			break;
		}
		forget_exited(&ctx);
		uint64_t now = ep_mono_ns();
		if (duration && now - start >= (uint64_t)duration * 1000000000ULL)
			break;
		bool emit = now - last_write >= (uint64_t)interval * 1000000000ULL;
		if (emit) {
			label_pending(&ctx);
			ep_live_counters(live, &lc);
			ep_pipeline_add_lost(ctx.pipeline, lc.reserve_failed - lost_added);
			lost_added = lc.reserve_failed;
			ep_sink_emit(sink, ctx.pipeline);
			last_write = now;
		}
		if (sink->streamer)
			sessions_turn(&sessions, emit);
	}
	while (sessions.nactive)
		session_end(&sessions, sessions.nactive - 1, false);
	/* stop sampling, drain what the kernel still holds, then the final
	 * profile and the counters, which now agree */
	ep_live_stop(live);
	ep_live_poll(live, 0, on_sample, &ctx);
	ep_live_counters(live, &lc);
	ep_pipeline_add_lost(ctx.pipeline, lc.reserve_failed - lost_added);
	if (ep_sink_emit(sink, ctx.pipeline) != 0)
		rc = 1;
	ep_info("%s: %llu samples received (%llu filtered out, %llu kernel, %llu dropped: ring "
		"buffer full), %llu process events (%llu lost), %llu processes gone before their "
		"maps were read, %zu processes tracked, %llu forgotten after their exit",
		sink->output ? sink->output : "agent", (unsigned long long)lc.received,
		(unsigned long long)lc.filtered, (unsigned long long)lc.kernel,
		(unsigned long long)lc.reserve_failed, (unsigned long long)lc.proc_events,
		(unsigned long long)lc.proc_reserve_failed, (unsigned long long)ctx.unresolved_pids,
		ep_pipeline_processes(ctx.pipeline), (unsigned long long)ctx.forgotten);
	if (ctx.periods.n > 1) {
		const struct period_stats *ps = &ctx.periods;
		double mean = ps->sum / (double)ps->n;
		double var = ps->sumsq / (double)ps->n - mean * mean;
		ep_info("sampling periods: n=%llu mean=%.0f min=%llu max=%llu stddev=%.0f",
			(unsigned long long)ps->n, mean, (unsigned long long)ps->min,
			(unsigned long long)ps->max, var > 0 ? sqrt(var) : 0.0);
	}
	if (lc.reserve_failed)
		ep_warn("%llu samples dropped because the ring buffer was full",
			(unsigned long long)lc.reserve_failed);
out:
	ctx_free(&ctx);
	ep_live_close(live);
	return rc;
}

int ep_cmd_agent(int argc, char **argv)
{
	enum { O_K8S_API = 1400, O_K8S_TOKEN, O_K8S_CA };
	static const struct option opts[] = {
	    {"pid", required_argument, NULL, 'p'},
	    {"cgroup", required_argument, NULL, 'g'},
	    {"duration", required_argument, NULL, 'd'},
	    {"interval", required_argument, NULL, 'i'},
	    {"period", required_argument, NULL, 'P'},
	    {"ip-hz", required_argument, NULL, 'f'},
	    {"jitter", required_argument, NULL, 'j'},
	    {"steps", required_argument, NULL, 's'},
	    {"ring-kib", required_argument, NULL, 'r'},
	    {"kernel", no_argument, NULL, 'k'},
	    {"output", required_argument, NULL, 'o'},
	    {"log-level", required_argument, NULL, 'l'},
	    {"event", required_argument, NULL, 'e'},
	    {"mode", required_argument, NULL, 'm'},
	    {"watch-mmaps", no_argument, NULL, 'W'},
	    {"container", required_argument, NULL, 'c'},
	    {"replay", required_argument, NULL, 'R'},
	    {"binary", required_argument, NULL, 'b'},
	    {"symfs", required_argument, NULL, 'y'},
	    {"batch-samples", required_argument, NULL, 'B'},
	    {"k8s-api", required_argument, NULL, O_K8S_API},
	    {"k8s-token-file", required_argument, NULL, O_K8S_TOKEN},
	    {"k8s-ca", required_argument, NULL, O_K8S_CA},
	    EP_SINK_OPTIONS,
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	uint32_t pids[MAX_TARGETS];
	const char *cgroups[MAX_TARGETS];
	static char container_dirs[64][PATH_MAX];
	struct ep_live_config cfg = {
	    .pids = pids, .cgroups = cgroups, .period = 20011, .ip_hz = 997, .drain_ms = 100};
	unsigned duration = 0, interval = 10, batch_samples = 10000;
	bool jitter_set = false;
	const char *output = NULL, *replay = NULL;
	struct ep_k8s_config kc = {0};
	struct ep_sink_options so;
	ep_sink_options_init(&so);
	struct ep_binary_registry *reg = ep_binreg_new();
	if (!reg) {
		ep_error("out of memory");
		return 1;
	}
	/* binaries met before the first sample (exec events come first) keep
	 * their code on disk until it is decoded: without a branch-stack PMU it
	 * never is; the first branch stack makes later opens read it at once */
	ep_binreg_set_lazy_code(reg, true);
	struct ep_sink sink = {.event = "cpu-clock"};
	snprintf(sink.source, sizeof(sink.source), "bpf");
	int rc = 0;
	optind = 1;
	int ch;
	while ((ch = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		unsigned v;
		/* --symfs is 'y' here: 's' is --steps */
		char berr[512];
		int bo = 0;
		if (ch == 'b')
			bo = ep_binreg_add_file(reg, optarg, berr, sizeof(berr)) == 0 ? 1 : -1;
		else if (ch == 'y')
			bo = (ep_binreg_set_symfs(reg, optarg), 1);
		if (bo < 0)
			ep_error("%s", berr);
		if (bo == 0)
			bo = ep_sink_option(&so, ch, optarg);
		if (bo != 0) {
			if (bo < 0) {
				rc = 2;
				goto out;
			}
			continue;
		}
		switch (ch) {
		case 'R':
			replay = optarg;
			break;
		case O_K8S_API:
			kc.api = optarg;
			break;
		case O_K8S_TOKEN:
			kc.token_file = optarg;
			break;
		case O_K8S_CA:
			kc.ca_file = optarg;
			break;
		case 'c': {
			/* a container by id (or a 12+ digit prefix): its cgroup v2 directory */
			char root[PATH_MAX], err[512];
			if (cfg.ncgroups == 64 || ep_cgroup2_root(root, sizeof(root)) != 0) {
				ep_error("--container %s: %s", optarg,
					 cfg.ncgroups == 64 ? "at most 64 cgroups and containers"
							    : "no cgroup v2 mount on this host");
				rc = 2;
				goto out;
			}
			if (ep_container_find_cgroup(root, optarg, container_dirs[cfg.ncgroups],
						     sizeof(container_dirs[0]), err,
						     sizeof(err)) != 0) {
				ep_error("%s", err);
				rc = 2;
				goto out;
			}
			cgroups[cfg.ncgroups] = container_dirs[cfg.ncgroups];
			cfg.ncgroups++;
			break;
		}
		case 'e': {
			struct ep_branch_event ev;
			char err[256];
			if (ep_pmu_branch_event(ep_pmu_vendor_detect(), optarg, &ev, err,
						sizeof(err)) != 0) {
				ep_error("%s", err);
				rc = 2;
				goto out;
			}
			cfg.event = optarg;
			break;
		}
		case 'W':
			cfg.watch_mmaps = true;
			break;
		case 'm':
			if (strcmp(optarg, "edges") != 0 && strcmp(optarg, "calls") != 0) {
				ep_error("--mode: '%s' is not edges or calls", optarg);
				rc = 2;
				goto out;
			}
			cfg.calls_only = strcmp(optarg, "calls") == 0;
			/* said by the profile even when IP-only sampling cannot honour it */
			sink.mode = cfg.calls_only ? "calls" : "edges";
			break;
		case 'B':
			if (ep_parse_uint(optarg, 1, 1u << 30, &batch_samples) != 0) {
				ep_error("--batch-samples: '%s' is not a positive number", optarg);
				rc = 2;
				goto out;
			}
			break;
		case 'p':
			if (cfg.npids == MAX_TARGETS ||
			    ep_parse_uint(optarg, 1, INT_MAX, &v) != 0) {
				ep_error("--pid: '%s' is not a process id (at most %d)", optarg,
					 MAX_TARGETS);
				rc = 2;
				goto out;
			}
			pids[cfg.npids++] = v;
			break;
		case 'g':
			if (cfg.ncgroups == 64) {
				ep_error("--cgroup: at most 64");
				rc = 2;
				goto out;
			}
			cgroups[cfg.ncgroups++] = optarg;
			break;
		case 'j':
			if (ep_parse_uint(optarg, 0, UINT_MAX - 1, &v) != 0) {
				ep_error("--jitter: '%s' is not a number", optarg);
				rc = 2;
				goto out;
			}
			cfg.jitter = v;
			jitter_set = true;
			break;
		case 'd':
		case 'i':
		case 'P':
		case 'f':
		case 'r':
		case 's':
			if (ep_parse_uint(optarg, 1, UINT_MAX - 1, &v) != 0) {
				ep_error("'%s' is not a positive number", optarg);
				rc = 2;
				goto out;
			}
			if (ch == 'd')
				duration = v;
			else if (ch == 'i')
				interval = v;
			else if (ch == 'P')
				cfg.period = v;
			else if (ch == 's')
				cfg.steps = v;
			else if (ch == 'r')
				cfg.ring_kib = v;
			else
				cfg.ip_hz = v;
			break;
		case 'k':
			cfg.want_kernel = true;
			break;
		case 'o':
			output = optarg;
			break;
		case 'l': {
			int level = ep_log_parse_level(optarg);
			if (level < 0) {
				ep_error("--log-level: '%s' is not error|warn|info|debug", optarg);
				rc = 2;
				goto out;
			}
			ep_log_set_level((enum ep_log_level)level);
			break;
		}
		case 'h':
			printf(
			    "usage: edgeprof agent [--pid P]... [--cgroup DIR]... [--container "
			    "ID]...\n"
			    "         [--duration S]\n"
			    "         [--interval S] [--event branches|taken|rHEX] [--period P]\n"
			    "         [--mode edges|calls] (calls: call-graph mode, the branch\n"
			    "          stack keeps calls and returns only)\n"
			    "         [--ip-hz HZ] [--kernel] [--watch-mmaps] (libraries mapped "
			    "later\n"
			    "          found at once, by a probe on every system call)\n"
			    "         [-o PROFILE] [--collector URL [--spool DIR] [--spool-max-mib "
			    "N]\n"
			    "          [--token-file F] [--cacert F] [--cert F --key F] [--node "
			    "NAME]\n"
			    "          [--flush-timeout S] [--retry-max-ms MS]]\n"
			    "         [--k8s-api URL] [--k8s-token-file F] [--k8s-ca F] (pod "
			    "names\n"
			    "          of this node's containers; in a cluster by default)\n"
			    "       edgeprof agent --replay PERF.DATA [--binary F]... [--symfs "
			    "DIR]\n"
			    "         [--batch-samples N] (-o PROFILE | --collector URL ...)\n");
			goto out;
		default:
			rc = 2;
			goto out;
		}
	}
	if ((!output && !so.streamer.collector) || optind != argc) {
		ep_error("agent needs -o PROFILE and/or --collector URL (and no other arguments)");
		rc = 2;
		goto out;
	}
	/* a live agent runs the collector's on-demand sessions, a replay cannot */
	so.streamer.sessions = !replay;
	kc.node = so.streamer.node;
	if (!replay) {
		char err[512];
		if (ep_k8s_open(&kc, &k8s, err, sizeof(err)) != 0) {
			/* asked for on the command line: a mistake to stop at; only
			 * found in the environment: the agent still profiles */
			if (kc.api) {
				ep_error("%s", err);
				rc = 2;
				goto out;
			}
			ep_warn("%s; labelling with container ids only", err);
		}
	}
	if (ep_sink_open(&sink, output, &so) != 0) {
		rc = 1;
		goto out;
	}
	/* watching one cgroup (a container): every batch is labelled with it */
	Edgeprof__V1__Labels labels = EDGEPROF__V1__LABELS__INIT;
	struct ep_container_ref container;
	char cgroup_label[PATH_MAX], root[PATH_MAX];
	if (cfg.ncgroups == 1 && !replay) {
		const char *path = cgroups[0];
		size_t rl = ep_cgroup2_root(root, sizeof(root)) == 0 ? strlen(root) : 0;
		if (rl && strncmp(path, root, rl) == 0 && (path[rl] == '/' || !path[rl]))
			path += rl;
		snprintf(cgroup_label, sizeof(cgroup_label), "%s", path[0] ? path : "/");
		labels.cgroup = cgroup_label;
		if (ep_container_from_cgroup(cgroup_label, &container) && !container.monitor)
			labels.container_id = container.id;
		sink.labels = &labels;
	}
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (replay)
		rc = run_replay(replay, reg, &sink, batch_samples);
	else
		rc = run_live(&cfg, jitter_set, reg, &sink, duration, interval);
	if (ep_sink_finish(&sink, so.flush_s) != 0 && replay)
		rc = 1;
out:
	ep_k8s_close(k8s);
	k8s = NULL;
	ep_sink_free(&sink);
	ep_binreg_free(reg);
	return rc;
}
