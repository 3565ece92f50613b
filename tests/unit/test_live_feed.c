/* SPDX-License-Identifier: Apache-2.0 */
/* A live process's mappings as the agent reads them: asked of the kernel
 * (PROCMAP_QUERY, Linux 6.11) or read from the maps text, the same
 * addresses resolve the same way, code of no file included; when they are
 * read. */
#include "test_util.h"

#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "agent/attribute/process_labels.h"
#include "agent/pipeline/pipeline.h"
#include "agent/process/process.h"
#include "agent/source/live/live_feed.h"
#include "bpf/edgeprof_record.h"
#include "common/profile/profile_file.h"
#include "common/util/clock.h"

static int in_this_binary(int x)
{
	return x * 3 + 1;
}

static void test_query_and_text_agree(void **state)
{
	(void)state;
	struct ep_binary_registry *reg = ep_binreg_new();
	struct ep_pipeline_config cfg;
	ep_pipeline_config_default(&cfg);
	struct ep_live_feed query, text;
	ep_live_feed_init(&query, ep_pipeline_new(&cfg, reg), NULL);
	ep_live_feed_init(&text, ep_pipeline_new(&cfg, reg), NULL);
	text.maps.text = true;
	void *jit = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(jit != MAP_FAILED);
	uint32_t pid = (uint32_t)getpid();
	ep_live_feed_read_maps(&query, pid);
	ep_live_feed_read_maps(&text, pid);
	if (query.maps.text)
		print_message("this kernel has no PROCMAP_QUERY: both read the text\n");
	const uint64_t addrs[] = {(uint64_t)(uintptr_t)in_this_binary, (uint64_t)(uintptr_t)strlen,
				  (uint64_t)(uintptr_t)mmap, (uint64_t)(uintptr_t)jit + 16};
	const enum ep_resolve_status want[] = {EP_RESOLVE_OK, EP_RESOLVE_OK, EP_RESOLVE_OK,
					       EP_RESOLVE_ANON_CODE};
	for (size_t i = 0; i < sizeof(addrs) / sizeof(addrs[0]); i++) {
		struct ep_resolved a, b;
		enum ep_resolve_status sa = ep_pipeline_resolve(query.pipeline, pid, addrs[i], &a);
		enum ep_resolve_status sb = ep_pipeline_resolve(text.pipeline, pid, addrs[i], &b);
		assert_int_equal(sa, want[i]);
		assert_int_equal(sb, want[i]);
		if (sa == EP_RESOLVE_OK) {
			assert_ptr_equal(a.bin, b.bin);
			assert_int_equal(a.vaddr, b.vaddr);
		}
	}
	assert_int_equal(query.maps_reads[EP_MAPS_AT_EXEC], 1);
	assert_int_equal(text.maps_reads[EP_MAPS_AT_EXEC], 1);
	/* a binary mapped by both is opened once: the second feed found it by
	 * its identity */
	struct ep_resolved a;
	assert_int_equal(ep_pipeline_resolve(query.pipeline, pid, addrs[0], &a), EP_RESOLVE_OK);
	size_t opened = ep_binreg_count(reg);
	ep_live_feed_read_maps(&text, pid);
	assert_int_equal(ep_binreg_count(reg), opened);
	munmap(jit, 4096);
	ep_live_feed_free(&query);
	ep_live_feed_free(&text);
	ep_binreg_free(reg);
}

/* A process that is gone is counted, not read. */
static void test_gone_process(void **state)
{
	(void)state;
	struct ep_binary_registry *reg = ep_binreg_new();
	struct ep_pipeline_config cfg;
	ep_pipeline_config_default(&cfg);
	struct ep_live_feed f;
	ep_live_feed_init(&f, ep_pipeline_new(&cfg, reg), NULL);
	ep_live_feed_read_maps(&f, 0x7ffffffe); /* above pid_max's limit */
	assert_int_equal(f.gone, 1);
	assert_int_equal(f.maps_reads[EP_MAPS_AT_EXEC], 0);
	Edgeprof__V1__Profile *prof = ep_pipeline_profile(f.pipeline);
	assert_non_null(prof);
	assert_int_equal(prof->stats->processes_gone, 1);
	ep_profile_free(prof);
	/* and forgotten like one whose exit was seen */
	assert_true(ep_process_find(f.procs, 0x7ffffffe)->exit_ns != 0);
	ep_live_feed_free(&f);
	ep_binreg_free(reg);
}

/* An IP sample of pid at ip, taken now. */
static struct ep_sample_record ip_sample(uint32_t pid, uint64_t ip)
{
	return (struct ep_sample_record){.pid = pid, .tid = pid, .ip = ip, .time_ns = ep_mono_ns()};
}

/* Samples of one binary in a profile. */
static uint64_t samples_of(Edgeprof__V1__Profile *prof, const char *build_id)
{
	uint64_t n = 0;
	for (size_t i = 0; i < prof->n_binaries; i++)
		if (strcmp(prof->binaries[i]->build_id, build_id) == 0)
			n += prof->binaries[i]->samples;
	return n;
}

/* An exec costs no read: a new program's maps are read at its first
 * sample. A sample taken after that read, in code mapped since (a library
 * dlopen()ed), has the maps read again at once (not a second later, when
 * a short program is gone), a bounded number of times however many
 * samples land in no mapping. */
static void test_exec_costs_no_read_and_new_code_resolves_at_once(void **state)
{
	(void)state;
	struct ep_binary_registry *reg = ep_binreg_new();
	struct ep_pipeline_config cfg;
	ep_pipeline_config_default(&cfg);
	struct ep_live_feed f;
	ep_live_feed_init(&f, ep_pipeline_new(&cfg, reg), NULL);
	uint32_t pid = (uint32_t)getpid();
	struct ep_proc_record exec = {.type = EP_PROC_EXEC, .pid = pid, .time_ns = ep_mono_ns()};
	ep_live_feed_process_event(&f, &exec);
	assert_int_equal(f.maps_reads[EP_MAPS_AT_EXEC], 0);
	struct ep_sample_record first = ip_sample(pid, (uint64_t)(uintptr_t)in_this_binary);
	ep_live_feed_sample(&f, &first);
	assert_int_equal(f.maps_reads[EP_MAPS_AT_EXEC], 1);
	assert_int_equal(f.maps_reads[EP_MAPS_AT_FIRST_SAMPLE], 0);
	uint64_t read_at = ep_process_find(f.procs, pid)->maps_read_ns;

	/* a library mapped after that read, the way ld.so maps one: its
	 * executable segment's code at its file offset */
	const char *lib = ep_test_fixture("test.binary");
	int fd = open(lib, O_RDONLY);
	assert_true(fd >= 0);
	Elf64_Ehdr eh;
	assert_int_equal(pread(fd, &eh, sizeof(eh), 0), sizeof(eh));
	uint64_t code = 0;
	for (unsigned i = 0; i < eh.e_phnum && !code; i++) {
		Elf64_Phdr ph;
		assert_int_equal(pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + i * sizeof(ph))),
				 sizeof(ph));
		if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X))
			code = ph.p_offset + ph.p_filesz / 2;
	}
	assert_true(code != 0);
	size_t len = (size_t)lseek(fd, 0, SEEK_END);
	uint8_t *map = mmap(NULL, len, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
	assert_true(map != MAP_FAILED);
	close(fd);

	/* taken before that read: no reason to read again */
	struct ep_sample_record early = ip_sample(pid, (uint64_t)(uintptr_t)(map + code));
	early.time_ns = read_at - 1;
	ep_live_feed_sample(&f, &early);
	assert_int_equal(f.maps_reads[EP_MAPS_AFTER_EXEC], 0);
	for (int i = 0; i < 10; i++) {
		struct ep_sample_record rec = ip_sample(pid, (uint64_t)(uintptr_t)(map + code));
		ep_live_feed_sample(&f, &rec);
	}
	/* one read (the once-a-second one instead when this machine took more
	 * than a second since the first read) */
	assert_int_equal(f.maps_reads[EP_MAPS_AFTER_EXEC] + f.maps_reads[EP_MAPS_UNRESOLVED], 1);
	Edgeprof__V1__Profile *prof = ep_pipeline_profile(f.pipeline);
	assert_non_null(prof);
	struct ep_binary_registry *r2 = ep_binreg_new();
	char err[256];
	assert_int_equal(ep_binreg_add_file(r2, lib, err, sizeof(err)), 0);
	const char *id = ep_binary_build_id_hex(ep_binreg_at(r2, 0));
	/* the ten taken after the read (and the early one, had the
	 * once-a-second read come for it); the first sample is in this test's
	 * own binary */
	uint64_t resolved = samples_of(prof, id);
	assert_true(resolved == 10 || resolved == 11);
	ep_profile_free(prof);

	/* an address no read finds asks for a few reads, not one per sample */
	uint64_t reads = f.maps_reads[EP_MAPS_AFTER_EXEC] + f.maps_reads[EP_MAPS_UNRESOLVED];
	for (int i = 0; i < 1000; i++) {
		struct ep_sample_record rec = ip_sample(pid, 0x1000);
		ep_live_feed_sample(&f, &rec);
	}
	uint64_t more = f.maps_reads[EP_MAPS_AFTER_EXEC] + f.maps_reads[EP_MAPS_UNRESOLVED] - reads;
	assert_true(more <= 4);
	munmap(map, len);
	ep_binreg_free(r2);
	ep_live_feed_free(&f);
	ep_binreg_free(reg);
}

/* The maps lines the kernel writes (show_map_vma): only executable ones
 * come back, files with their path (a space inside kept, " (deleted)" cut
 * and said), anonymous code and [vdso] with theirs; a last line without its
 * newline (a read cut short) is not trusted. */
static void test_maps_text_parsed_in_place(void **state)
{
	(void)state;
	char text[] = "555555554000-555555556000 r--p 00000000 fd:01 1048602                    "
		      "/usr/bin/cat\n"
		      "555555556000-55555555a000 r-xp 00002000 fd:01 1048602                    "
		      "/usr/bin/cat\n"
		      "7ffff7dd0000-7ffff7f45000 r-xp 00028000 fd:01 1050002                    "
		      "/opt/my app/lib x.so (deleted)\n"
		      "7ffff7f45000-7ffff7f60000 rwxp 00000000 00:00 0 \n"
		      "garbage line\n"
		      "7ffff7fc1000-7ffff7fc3000 r-xp 00000000 00:00 0                          "
		      "[vdso]\n"
		      "7ffff7fc3000-7ffff7fc4000 r-xp 00000000 fd:01 1050003                    "
		      "/cut/short";
	size_t pos = 0, len = strlen(text);
	struct ep_maps_entry m;
	assert_true(ep_maps_next_exec(text, len, &pos, &m));
	assert_int_equal(m.start, 0x555555556000ULL);
	assert_int_equal(m.end, 0x55555555a000ULL);
	assert_int_equal(m.offset, 0x2000);
	assert_string_equal(m.path, "/usr/bin/cat");
	assert_int_equal(m.dev, makedev(0xfd, 0x01));
	assert_int_equal(m.ino, 1048602);
	assert_false(m.deleted);
	assert_true(ep_maps_next_exec(text, len, &pos, &m));
	assert_int_equal(m.offset, 0x28000);
	assert_string_equal(m.path, "/opt/my app/lib x.so");
	assert_true(m.deleted);
	assert_true(ep_maps_next_exec(text, len, &pos, &m));
	assert_int_equal(m.start, 0x7ffff7f45000ULL);
	assert_string_equal(m.path, "");
	assert_int_equal(m.ino, 0);
	assert_true(ep_maps_next_exec(text, len, &pos, &m));
	assert_string_equal(m.path, "[vdso]");
	assert_false(ep_maps_next_exec(text, len, &pos, &m));
}

/* Our own maps, read whole, against sscanf's reading of the same text: the
 * same executable mappings, in the same order. */
static void test_maps_of_this_process(void **state)
{
	(void)state;
	static char text[1 << 20], copy[1 << 20];
	FILE *f = fopen("/proc/self/maps", "r");
	assert_non_null(f);
	size_t len = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	memcpy(copy, text, len);
	copy[len] = '\0';
	size_t pos = 0, n = 0;
	struct ep_maps_entry m;
	char *save = NULL, *line = strtok_r(copy, "\n", &save);
	while (ep_maps_next_exec(text, len, &pos, &m)) {
		unsigned long long start, end, offset, ino;
		unsigned major, minor;
		char perms[8];
		int at = 0;
		for (; line; line = strtok_r(NULL, "\n", &save))
			if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu %n", &start, &end, perms,
				   &offset, &major, &minor, &ino, &at) == 7 &&
			    perms[2] == 'x')
				break;
		assert_non_null(line);
		assert_int_equal(m.start, start);
		assert_int_equal(m.end, end);
		assert_int_equal(m.offset, offset);
		assert_int_equal(m.dev, makedev(major, minor));
		assert_int_equal(m.ino, ino);
		assert_string_equal(m.path, line + at);
		line = strtok_r(NULL, "\n", &save);
		n++;
	}
	assert_true(n >= 2); /* this program and libc at least */
}

/* A new program takes its parent's labels while it stays where it was
 * forked: the parent is labelled at its fork (one read of
 * /proc/PID/cgroup), and its children's first samples read none. A child
 * seen moved (a cgroup move, or another cgroup (v2) at its exec) is
 * labelled on its own, and so is every one where moves are not seen. */
static void test_children_take_their_parents_labels_until_moved(void **state)
{
	(void)state;
	struct ep_binary_registry *reg = ep_binreg_new();
	struct ep_pipeline_config cfg;
	ep_pipeline_config_default(&cfg);
	struct ep_process_labeller l;
	struct ep_live_feed f;
	ep_live_feed_init(&f, ep_pipeline_new(&cfg, reg), &l);
	ep_process_labeller_init(&l, NULL);
	f.sees_cgroup_moves = true;
	uint32_t parent = (uint32_t)getppid(), child = (uint32_t)getpid();
	/* program: the events of one fork and exec (cgroup ids made up: none
	 * is remembered, each label is a read), then a sample */
	struct {
		uint32_t type;
		uint64_t cgroup;
	} runs[][3] = {
	    {{EP_PROC_FORK, 77}, {EP_PROC_EXEC, 77}, {0, 77}},		    /* stays */
	    {{EP_PROC_FORK, 77}, {EP_PROC_CGROUP, 77}, {EP_PROC_EXEC, 77}}, /* moved */
	    {{EP_PROC_FORK, 77}, {EP_PROC_EXEC, 78}, {0, 78}},		    /* made elsewhere */
	};
	const uint64_t reads[] = {1, 2, 3};
	for (size_t r = 0; r < 3; r++) {
		for (size_t e = 0; e < 3 && runs[r][e].type; e++) {
			struct ep_proc_record rec = {.type = runs[r][e].type,
						     .pid = child,
						     .ppid = parent,
						     .time_ns = ep_mono_ns(),
						     .cgroup_id = runs[r][e].cgroup};
			ep_live_feed_process_event(&f, &rec);
		}
		struct ep_sample_record s = ip_sample(child, (uint64_t)(uintptr_t)in_this_binary);
		s.cgroup_id = runs[r][2].type ? runs[r][2].cgroup : runs[r][1].cgroup;
		ep_live_feed_sample(&f, &s);
		assert_int_equal(l.cgroup_reads, reads[r]);
		assert_true(ep_process_find(f.procs, child)->labelled);
		ep_process_forget(f.procs, child);
	}
	/* without moves seen, every new program is labelled on its own */
	f.sees_cgroup_moves = false;
	struct ep_proc_record fork = {
	    .type = EP_PROC_FORK, .pid = child, .ppid = parent, .cgroup_id = 77};
	ep_live_feed_process_event(&f, &fork);
	struct ep_sample_record s = ip_sample(child, (uint64_t)(uintptr_t)in_this_binary);
	s.cgroup_id = 77;
	ep_live_feed_sample(&f, &s);
	assert_int_equal(l.cgroup_reads, 4);
	ep_live_feed_free(&f);
	ep_process_labeller_free(&l);
	ep_binreg_free(reg);
}

/* A mapped file's stat() is taken once a second at most, by the (device,
 * inode) the kernel names it by: a second read of the same program's maps
 * within the second takes none, one later takes it again. */
static void test_a_known_file_costs_no_stat_for_a_second(void **state)
{
	(void)state;
	struct ep_binary_registry *reg = ep_binreg_new();
	struct ep_pipeline_config cfg;
	ep_pipeline_config_default(&cfg);
	struct ep_live_feed f;
	ep_live_feed_init(&f, ep_pipeline_new(&cfg, reg), NULL);
	struct stat exe;
	assert_int_equal(stat("/proc/self/exe", &exe), 0);
	uint32_t pid = (uint32_t)getpid();
	ep_live_feed_read_maps(&f, pid);
	assert_non_null(f.stats);
	const struct ep_stat_memo *memo = NULL;
	for (size_t i = 0; i < EP_STAT_MEMOS && !memo; i++)
		if (f.stats[i].ino && f.stats[i].st.st_ino == exe.st_ino &&
		    f.stats[i].st.st_dev == exe.st_dev)
			memo = &f.stats[i];
	assert_non_null(memo);
	uint64_t at = memo->at;
	ep_live_feed_read_maps(&f, pid);
	assert_int_equal(memo->at, at);
	((struct ep_stat_memo *)memo)->at -= 2000000000ULL;
	ep_live_feed_read_maps(&f, pid);
	assert_true(memo->at > at);
	struct ep_resolved r;
	assert_int_equal(
	    ep_pipeline_resolve(f.pipeline, pid, (uint64_t)(uintptr_t)in_this_binary, &r),
	    EP_RESOLVE_OK);
	ep_live_feed_free(&f);
	ep_binreg_free(reg);
}

/* --watch-mmaps: an executable mmap is noted in its process's record and
 * its maps read again at its first sample taken after it, once; one of a
 * process whose maps were never read waits for its first read. */
static void test_an_executable_mmap_is_read_at_the_next_sample(void **state)
{
	(void)state;
	struct ep_binary_registry *reg = ep_binreg_new();
	struct ep_pipeline_config cfg;
	ep_pipeline_config_default(&cfg);
	struct ep_live_feed f;
	ep_live_feed_init(&f, ep_pipeline_new(&cfg, reg), NULL);
	uint32_t pid = (uint32_t)getpid();
	struct ep_proc_record mmap_ev = {.type = EP_PROC_MMAP, .pid = pid, .time_ns = ep_mono_ns()};
	ep_live_feed_process_event(&f, &mmap_ev);
	assert_int_equal(ep_live_feed_mmaps_pending(&f), 0);
	struct ep_sample_record s = ip_sample(pid, (uint64_t)(uintptr_t)in_this_binary);
	ep_live_feed_sample(&f, &s);
	assert_int_equal(f.maps_reads[EP_MAPS_AT_FIRST_SAMPLE], 1);
	mmap_ev.time_ns = ep_mono_ns();
	ep_live_feed_process_event(&f, &mmap_ev);
	assert_int_equal(ep_live_feed_mmaps_pending(&f), 1);
	s.time_ns = mmap_ev.time_ns - 1; /* taken before it */
	ep_live_feed_sample(&f, &s);
	assert_int_equal(f.maps_reads[EP_MAPS_AT_MMAP], 0);
	for (int i = 0; i < 3; i++) {
		s = ip_sample(pid, (uint64_t)(uintptr_t)in_this_binary);
		ep_live_feed_sample(&f, &s);
	}
	assert_int_equal(f.maps_reads[EP_MAPS_AT_MMAP], 1);
	assert_int_equal(ep_live_feed_mmaps_pending(&f), 0);
	ep_live_feed_free(&f);
	ep_binreg_free(reg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_query_and_text_agree),
	    cmocka_unit_test(test_gone_process),
	    cmocka_unit_test(test_exec_costs_no_read_and_new_code_resolves_at_once),
	    cmocka_unit_test(test_children_take_their_parents_labels_until_moved),
	    cmocka_unit_test(test_a_known_file_costs_no_stat_for_a_second),
	    cmocka_unit_test(test_an_executable_mmap_is_read_at_the_next_sample),
	    cmocka_unit_test(test_maps_text_parsed_in_place),
	    cmocka_unit_test(test_maps_of_this_process),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
