/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/source/emulator/emu_feed.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/perf_event.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/decode/decoder_cache.h"
#include "agent/source/perf_data/perf_data_writer.h"
#include "common/profile/model.h"
#include "common/profile/profile_file.h"
#include "common/util/log.h"
#include "common/util/regular_file.h"

/* A mapping already written to perf.data: each maps snapshot (one per
 * dlopen) repeats the earlier ones. */
struct written_map {
	uint64_t start, len, pgoff;
};

struct emu_feed {
	struct ep_pipeline *pipeline;
	bool aarch64; /* the guest's instruction set: aarch64, else x86_64 */
	uint32_t pid;
	struct ep_emu_result *out;
	struct ep_perf_writer *perf; /* --perf-data, else NULL */
	struct written_map *maps;
	size_t nmaps, capmaps;
	uint64_t last_time; /* of the last sample: later mappings sort after it */
};

/* The emulated event as perf_event_attr names it on Intel, where LBR is:
 * branches is the generic branch-instructions event, taken is raw
 * BR_INST_RETIRED.NEAR_TAKEN (event 0xc4, umask 0x20). An aarch64 guest's
 * recording is an Arm machine's with BRBE: perf's cpuid there is the MIDR
 * (here Neoverse V3's, implementer 0x41 part 0xd84, a BRBE core), branches
 * is BR_RETIRED and the entries carry their branch type
 * (PERF_SAMPLE_BRANCH_TYPE_SAVE). Arm has no taken-branches event: a taken
 * recording is written as Intel's, whose name the importer knows. */
static void perf_event_of(const struct ep_emu_config *cfg, bool aarch64,
			  struct ep_perf_writer_event *ev)
{
	memset(ev, 0, sizeof(*ev));
	ev->period = cfg->period;
	ev->cpuid = aarch64 ? "0x00000000410fd840" : "GenuineIntel,6,85,4";
	ev->arch = aarch64 ? "aarch64" : "x86_64";
	ev->nr_cpus = 1;
	ev->branch_sample_type =
	    PERF_SAMPLE_BRANCH_USER |
	    (cfg->calls_only ? PERF_SAMPLE_BRANCH_ANY_CALL | PERF_SAMPLE_BRANCH_ANY_RETURN
			     : PERF_SAMPLE_BRANCH_ANY) |
	    (aarch64 ? PERF_SAMPLE_BRANCH_TYPE_SAVE : 0);
	if (strcmp(cfg->event, "taken") == 0) {
		ev->type = PERF_TYPE_RAW;
		ev->config = 0x20c4;
		ev->name = "r20c4:u";
	} else if (strcmp(cfg->event, "instructions") == 0) {
		ev->type = PERF_TYPE_HARDWARE;
		ev->config = PERF_COUNT_HW_INSTRUCTIONS;
		ev->name = "instructions:u";
	} else {
		ev->type = PERF_TYPE_HARDWARE;
		ev->config = PERF_COUNT_HW_BRANCH_INSTRUCTIONS;
		ev->name = "branches:u";
	}
}

static bool written_before(struct emu_feed *f, uint64_t start, uint64_t len, uint64_t pgoff)
{
	for (size_t i = 0; i < f->nmaps; i++)
		if (f->maps[i].start == start && f->maps[i].len == len && f->maps[i].pgoff == pgoff)
			return true;
	if (f->nmaps == f->capmaps) {
		size_t cap = f->capmaps ? f->capmaps * 2 : 32;
		struct written_map *nm = realloc(f->maps, cap * sizeof(*nm));
		if (!nm)
			return true;
		f->maps = nm;
		f->capmaps = cap;
	}
	f->maps[f->nmaps++] = (struct written_map){start, len, pgoff};
	return false;
}

/* The guest's executable mappings to perf.data, with their build-ids: one
 * MMAP2 per executable PT_LOAD segment (page-aligned), as the kernel maps
 * them and perf records them. QEMU shows a binary as one mapping from
 * offset 0 over all its segments, without PROT_EXEC; written as it is,
 * llvm-profgen finds no text segment at that offset ("File offset not
 * found") and the file's read-only parts would pass for code. */
static void perf_mapping(struct emu_feed *f, const struct ep_perf_writer_mmap *m)
{
	struct ep_resolved r;
	if (ep_pipeline_resolve(f->pipeline, f->pid, m->start, &r) != EP_RESOLVE_OK)
		return;
	const uint64_t page = 4096;
	size_t n;
	const struct ep_load_segment *seg = ep_binary_load_segments(r.bin, &n);
	for (size_t i = 0; i < n; i++) {
		uint64_t lo = seg[i].offset & ~(page - 1);
		uint64_t hi = (seg[i].offset + seg[i].filesz + page - 1) & ~(page - 1);
		if (lo < m->pgoff)
			lo = m->pgoff;
		if (hi > m->pgoff + m->len)
			hi = m->pgoff + m->len;
		if (!(seg[i].flags & PF_X) || lo >= hi)
			continue;
		struct ep_perf_writer_mmap w = *m;
		w.start = m->start + (lo - m->pgoff);
		w.len = hi - lo;
		w.pgoff = lo;
		if (written_before(f, w.start, w.len, w.pgoff))
			continue;
		w.build_id = ep_binary_build_id(r.bin, &w.build_id_len);
		ep_perf_writer_mmap2(f->perf, &w, f->last_time);
	}
}

/* A file whose first bytes are an ELF header: only those can be code. */
static bool is_elf(const char *path)
{
	/* the program may have put anything at the path since (a FIFO would
	 * block the open for ever) */
	char why[256];
	int fd = ep_open_regular(path, why, sizeof(why));
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
	struct emu_feed *f = ctx;
	const char *end = text + len;
	for (const char *line = text; line < end;) {
		const char *nl = memchr(line, '\n', (size_t)(end - line));
		size_t n = nl ? (size_t)(nl - line) : (size_t)(end - line);
		char buf[PATH_MAX + 256];
		if (n < sizeof(buf)) {
			memcpy(buf, line, n);
			buf[n] = '\0';
			unsigned long long start, stop, offset, inode;
			unsigned maj, min;
			int path_at = 0;
			if (sscanf(buf, "%llx-%llx %*s %llx %x:%x %llu %n", &start, &stop, &offset,
				   &maj, &min, &inode, &path_at) == 6 &&
			    path_at > 0 && buf[path_at] == '/' && !strstr(buf, " (deleted)") &&
			    is_elf(buf + path_at)) {
				ep_pipeline_mmap(f->pipeline, f->pid, start, stop - start, offset,
						 buf + path_at, NULL, 0);
				struct ep_perf_writer_mmap m = {.pid = f->pid,
								.tid = f->pid,
								.start = start,
								.len = stop - start,
								.pgoff = offset,
								.maj = maj,
								.min = min,
								.ino = inode,
								.prot = PROT_READ | PROT_EXEC,
								.flags = MAP_PRIVATE,
								.path = buf + path_at};
				if (f->perf)
					perf_mapping(f, &m);
			}
		}
		line = nl ? nl + 1 : end;
	}
}

static void on_sample(void *ctx, const struct ep_sample_record *rec)
{
	struct emu_feed *f = ctx;
	ep_pipeline_sample(f->pipeline, rec);
	if (f->perf) {
		ep_perf_writer_sample(f->perf, rec);
		f->last_time = rec->time_ns;
	}
}

/* The exact profile's BinaryProfile of bin, added on its first edge. */
static Edgeprof__V1__BinaryProfile *exact_binary(Edgeprof__V1__Profile *p, struct ep_binary *bin)
{
	const char *path = ep_binary_recorded_path(bin);
	for (size_t i = 0; i < p->n_binaries; i++)
		if (strcmp(p->binaries[i]->paths[0], path) == 0)
			return p->binaries[i];
	Edgeprof__V1__BinaryProfile *bp = malloc(sizeof(*bp));
	if (!bp)
		return NULL;
	edgeprof__v1__binary_profile__init(bp);
	bp->build_id = strdup(ep_binary_build_id_hex(bin));
	bp->arch = strdup(ep_arch_name(ep_binary_arch(bin)));
	char *copy = strdup(path);
	/* the lookup above reads paths[0]: a BinaryProfile without it is not kept */
	if (!copy || EP_PB_APPEND(bp->paths, bp->n_paths, copy) != 0 ||
	    EP_PB_APPEND(p->binaries, p->n_binaries, bp) != 0) {
		if (!bp->n_paths)
			free(copy);
		edgeprof__v1__binary_profile__free_unpacked(bp, NULL);
		return NULL;
	}
	return bp;
}

/* Where a branch of the exact run landed: a range starts there. */
struct landing {
	struct ep_binary *bin;
	uint64_t start, count;
};

static int landing_cmp(const void *pa, const void *pb)
{
	const struct landing *a = pa, *b = pb;
	uint32_t x = ep_binary_index(a->bin), y = ep_binary_index(b->bin);
	if (x != y)
		return x < y ? -1 : 1;
	return (a->start > b->start) - (a->start < b->start);
}

/* The address of the first branch instruction at or after start (the end
 * of the range starting there), or false when the code ends first. */
static bool range_end(struct ep_decoder *d, uint64_t start, uint64_t *end)
{
	struct ep_insn_info info;
	for (uint64_t a = start; a - start < (1u << 20); a += info.len) {
		if (!ep_decoder_insn(d, a, &info) || info.len == 0)
			return false;
		if (info.kind != EP_BRANCH_NONE) {
			*end = a;
			return true;
		}
	}
	return false;
}

/* The function holding addr into bp's functions, once: reports name the
 * exact profile's code as they name a sampled one's. */
static void exact_function(Edgeprof__V1__BinaryProfile *bp, const struct ep_binary *bin,
			   uint64_t addr)
{
	const struct ep_symbol *sym = ep_binary_symbol_at(bin, addr);
	if (!sym)
		return;
	for (size_t i = bp->n_functions; i-- > 0;)
		if (bp->functions[i]->start == sym->start)
			return;
	Edgeprof__V1__Function *fn = malloc(sizeof(*fn));
	if (!fn)
		return;
	edgeprof__v1__function__init(fn);
	fn->start = sym->start;
	fn->size = sym->size;
	fn->local_index = sym->local_index;
	fn->name = strdup(sym->name);
	if (!fn->name || EP_PB_APPEND(bp->functions, bp->n_functions, fn) != 0) {
		free(fn->name);
		free(fn);
	}
}

/* The exact ranges: every straight line the run executed starts where a
 * branch landed (taken or not, from this binary or another) and ends at the
 * next branch instruction, so each landing's count is its range's. Code
 * entered without a branch (the program's entry, a return from the kernel
 * into a signal handler) is not counted: a handful of instructions. */
static void exact_ranges(struct emu_feed *f, struct landing *l, size_t n)
{
	qsort(l, n, sizeof(*l), landing_cmp);
	struct ep_decoder_cache *dc = ep_pipeline_decoders(f->pipeline);
	for (size_t i = 0; i < n;) {
		size_t j = i + 1;
		uint64_t count = l[i].count;
		for (; j < n && l[j].bin == l[i].bin && l[j].start == l[i].start; j++)
			count += l[j].count;
		struct ep_decoder *d = ep_decoder_cache_get(dc, ep_binary_index(l[i].bin));
		uint64_t end;
		Edgeprof__V1__BinaryProfile *bp = exact_binary(f->out->exact, l[i].bin);
		Edgeprof__V1__Range *r =
		    d && bp && range_end(d, l[i].start, &end) ? malloc(sizeof(*r)) : NULL;
		if (r) {
			edgeprof__v1__range__init(r);
			r->start = l[i].start;
			r->end = end;
			r->count = count;
			if (EP_PB_APPEND(bp->ranges, bp->n_ranges, r) != 0)
				free(r);
			exact_function(bp, l[i].bin, l[i].start);
		}
		i = j;
	}
}

/* Ground truth: every edge of the run, resolved like the samples. */
static void on_exact(void *ctx, const struct ep_emu_exact *edges, size_t n)
{
	struct emu_feed *f = ctx;
	struct landing *land = malloc((n ? n : 1) * sizeof(*land));
	size_t nland = 0;
	for (size_t i = 0; i < n; i++) {
		struct ep_resolved from, to;
		if (ep_pipeline_resolve(f->pipeline, f->pid, edges[i].from, &from) !=
		    EP_RESOLVE_OK) {
			f->out->exact_unresolved++;
			continue;
		}
		bool to_known =
		    ep_pipeline_resolve(f->pipeline, f->pid, edges[i].to, &to) == EP_RESOLVE_OK;
		bool to_ok = to_known && to.bin == from.bin;
		if (to_known && land)
			land[nland++] = (struct landing){to.bin, to.vaddr, edges[i].count};
		Edgeprof__V1__BinaryProfile *bp = exact_binary(f->out->exact, from.bin);
		Edgeprof__V1__Edge *e = bp ? malloc(sizeof(*e)) : NULL;
		if (!e)
			continue;
		edgeprof__v1__edge__init(e);
		e->from = from.vaddr;
		e->to = to_ok ? to.vaddr : 0;
		e->to_external = !to_ok;
		e->taken = edges[i].taken != 0;
		e->count = edges[i].count;
		e->kind = ep_proto_branch_kind((uint8_t)edges[i].kind);
		if (EP_PB_APPEND(bp->edges, bp->n_edges, e) != 0)
			free(e);
	}
	if (land)
		exact_ranges(f, land, nland);
	free(land);
}

char *ep_emu_find_program(const char *name)
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

/* Which QEMU runs the program: its ELF header's machine. 0 with *aarch64
 * set, or -1 (logged) for a machine the emulator does not run. A file that
 * is no ELF is left to qemu-x86_64, which says why it cannot run it. */
static int guest_of(const char *name, bool *aarch64)
{
	*aarch64 = false;
	char *path = ep_emu_find_program(name);
	if (!path) {
		ep_error("%s: command not found", name);
		return -1;
	}
	/* QEMU would block opening a FIFO for ever, as this would */
	char why[256];
	struct stat st;
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
		ep_error("%s: is %s, not a regular file", path, ep_file_kind(st.st_mode));
		free(path);
		return -1;
	}
	int fd = ep_open_regular(path, why, sizeof(why));
	Elf64_Ehdr eh;
	ssize_t n = fd >= 0 ? read(fd, &eh, sizeof(eh)) : -1;
	if (fd >= 0)
		close(fd);
	int rc = 0;
	if (n >= (ssize_t)offsetof(Elf64_Ehdr, e_version) &&
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0) {
		if (eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_machine == EM_AARCH64) {
			*aarch64 = true;
		} else if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_machine != EM_X86_64) {
			ep_error("%s: ELF class %u, machine %u: the emulator runs 64-bit x86_64 "
				 "and aarch64 programs",
				 path, eh.e_ident[EI_CLASS], eh.e_machine);
			rc = -1;
		}
	}
	free(path);
	return rc;
}

/* Where an aarch64 guest's dynamic loader and libraries are: $QEMU_LD_PREFIX
 * as qemu reads it, else Debian's cross libc (libc6-dev-arm64-cross), else
 * none (a static program needs none). */
static const char *aarch64_prefix(void)
{
	static const char debian[] = "/usr/aarch64-linux-gnu";
	if (getenv("QEMU_LD_PREFIX"))
		return NULL;
	return access(debian, R_OK | X_OK) == 0 ? debian : NULL;
}

/* Starts qemu with the plugin writing to stream and waits for it; 0, or -1
 * (logged). */
static int run_emulated(const struct ep_emu_config *cfg, bool aarch64, char *const *cmd,
			const char *stream, pid_t *child_out, int *status)
{
	const char *qemu_name = aarch64 ? "qemu-aarch64" : "qemu-x86_64";
	char *qemu = ep_emu_find_program(qemu_name);
	char *plugin = find_plugin();
	int rc = -1;
	if (!qemu) {
		ep_error("%s not found: install Debian's qemu-user (make deps does)", qemu_name);
		goto out;
	}
	if (!plugin) {
		ep_error("edgeprof-lbr.so not found beside edgeprof (or $EDGEPROF_LBR_PLUGIN)");
		goto out;
	}
	char plugin_arg[PATH_MAX * 2 + 200];
	snprintf(plugin_arg, sizeof(plugin_arg),
		 "%s,out=%s,event=%s,period=%u,jitter=%u,lbr=%u,seed=%u,filter=%s", plugin, stream,
		 cfg->event, cfg->period, cfg->jitter, cfg->lbr, cfg->seed,
		 cfg->calls_only ? "calls" : "any");
	size_t nargs = 0;
	while (cmd[nargs])
		nargs++;
	char **argv = calloc(nargs + 6, sizeof(*argv));
	if (!argv)
		goto out;
	size_t at = 0;
	argv[at++] = qemu;
	const char *prefix = aarch64 ? aarch64_prefix() : NULL;
	if (prefix) {
		argv[at++] = "-L";
		argv[at++] = (char *)prefix;
	}
	argv[at++] = "-plugin";
	argv[at++] = plugin_arg;
	for (size_t i = 0; i < nargs; i++)
		argv[at++] = cmd[i];
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

/* --perf-data: the file, opened before the program runs so that a path that
 * cannot be written costs no run. */
static int open_perf_data(const struct ep_emu_config *cfg, char *const *cmd, struct emu_feed *f)
{
	struct ep_perf_writer_event ev;
	perf_event_of(cfg, f->aarch64, &ev);
	char cmdline[1024] = "edgeprof record --emulate --";
	for (size_t i = 0; cmd[i]; i++) {
		size_t used = strlen(cmdline);
		snprintf(cmdline + used, sizeof(cmdline) - used, " %s", cmd[i]);
	}
	ev.cmdline = cmdline;
	char err[512];
	f->perf = ep_perf_writer_open(cfg->perf_data, &ev, err, sizeof(err));
	if (!f->perf) {
		ep_error("%s", err);
		return -1;
	}
	return 0;
}

int ep_feed_emulated(const struct ep_emu_config *cfg, char *const *cmd,
		     struct ep_pipeline *pipeline, struct ep_emu_result *out)
{
	memset(out, 0, sizeof(*out));
	out->exact = malloc(sizeof(*out->exact));
	if (!out->exact) {
		ep_error("out of memory");
		return -1;
	}
	edgeprof__v1__profile__init(out->exact);
	out->exact->format_version = 1;

	/* the plugin writes the whole run to a file, read once QEMU is done */
	char stream[] = "/tmp/edgeprof-emu-XXXXXX";
	int fd = mkstemp(stream);
	if (fd < 0) {
		ep_error("cannot create a temporary file: %s", strerror(errno));
		return -1;
	}
	close(fd);
	pid_t child = 0;
	char err[512];
	struct emu_feed f = {.pipeline = pipeline, .out = out};
	int rc = guest_of(cmd[0], &f.aarch64);
	if (rc == 0 && cfg->perf_data)
		rc = open_perf_data(cfg, cmd, &f);
	if (rc == 0)
		rc = run_emulated(cfg, f.aarch64, cmd, stream, &child, &out->status);
	if (rc == 0) {
		f.pid = (uint32_t)child;
		/* perf record's order: the name, then the mappings, then samples */
		const char *slash = strrchr(cmd[0], '/');
		if (f.perf)
			ep_perf_writer_comm(f.perf, f.pid, f.pid, slash ? slash + 1 : cmd[0], 0);
		struct ep_emu_callbacks cb = {
		    .ctx = &f, .on_maps = on_maps, .on_sample = on_sample, .on_exact = on_exact};
		if (ep_emu_read(stream, &cb, &out->stats, err, sizeof(err)) != 0)
			ep_error("%s", err);
		for (size_t i = 0; i < out->exact->n_binaries; i++)
			ep_binary_profile_sort(out->exact->binaries[i]);
	}
	if (f.perf && ep_perf_writer_close(f.perf, err, sizeof(err)) != 0) {
		ep_error("%s", err);
		rc = -1;
	}
	free(f.maps);
	unlink(stream);
	return rc;
}

void ep_emu_result_free(struct ep_emu_result *r)
{
	if (r->exact)
		ep_profile_free(r->exact);
	r->exact = NULL;
}
