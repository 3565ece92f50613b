/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"

#ifndef EDGEPROF_VERSION
#define EDGEPROF_VERSION "0.1.0"
#endif

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: edgeprof COMMAND [ARGS]\n"
	    "\n"
	    "commands:\n"
	    "  import PERF.DATA [--binary FILE]... [--symfs DIR] [--chop C] [-o PROFILE]\n"
	    "                         turn a perf.data recording into an edge profile\n"
	    "  record --emulate [--event E] [--period P] [--jitter D] [--lbr N] [--chop C]\n"
	    "         [--seed S] [--exact-out F.json] -o PROFILE -- CMD [ARGS]\n"
	    "                         profile a program under the LBR emulator (no PMU needed)\n"
	    "  report PROFILE [--top N]\n"
	    "                         print the hottest edges and functions\n"
	    "  export PROFILE --format json|fdata|preagg|afdo|profgen|pprof [--build-id ID] [-o "
	    "OUT]\n"
	    "                         write the profile for BOLT, AutoFDO or tools\n"
	    "  agent [--pid P]... [--cgroup DIR]... [-o PROFILE] [--collector URL]\n"
	    "        [--replay PERF.DATA [--binary FILE]...]\n"
	    "                         sample this machine with BPF (or replay a recording)\n"
	    "                         and write a profile and/or stream it to a collector\n"
	    "  collector --store sqlite:PATH|clickhouse:URL [--listen HOST:PORT]\n"
	    "                         receive agents' batches, store them, serve profiles\n"
	    "  profile (--container ID | --cgroup PATH | --pid PID) --duration S\n"
	    "          --collector URL [-o OUT]\n"
	    "                         profile one target on demand, through the collector\n"
	    "  upload BINARY... --collector URL\n"
	    "                         send binaries' code to the collector for its web UI\n"
	    "  dump PERF.DATA         print the samples' branch stacks like perf script\n"
	    "  trace PERF.DATA [--binary FILE]...\n"
	    "                         print every gap as reconstructed, with its instructions\n"
	    "  version                print the version\n"
	    "\n"
	    "Run 'edgeprof COMMAND --help' for a command's options.\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	const char *cmd = argv[1];
	if (strcmp(cmd, "import") == 0)
		return ep_cmd_import(argc - 1, argv + 1);
	if (strcmp(cmd, "report") == 0)
		return ep_cmd_report(argc - 1, argv + 1);
	if (strcmp(cmd, "export") == 0)
		return ep_cmd_export(argc - 1, argv + 1);
	if (strcmp(cmd, "agent") == 0)
		return ep_cmd_agent(argc - 1, argv + 1);
	if (strcmp(cmd, "collector") == 0)
		return ep_cmd_collector(argc - 1, argv + 1);
	if (strcmp(cmd, "profile") == 0)
		return ep_cmd_profile(argc - 1, argv + 1);
	if (strcmp(cmd, "upload") == 0)
		return ep_cmd_upload(argc - 1, argv + 1);
	if (strcmp(cmd, "record") == 0)
		return ep_cmd_record(argc - 1, argv + 1);
	if (strcmp(cmd, "trace") == 0)
		return ep_cmd_trace(argc - 1, argv + 1);
	if (strcmp(cmd, "dump") == 0)
		return ep_cmd_dump(argc - 1, argv + 1);
	if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
		printf("edgeprof %s\n", EDGEPROF_VERSION);
		return 0;
	}
	if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
		usage(stdout);
		return 0;
	}
	fprintf(stderr, "edgeprof: unknown command '%s'\n", cmd);
	usage(stderr);
	return 2;
}
