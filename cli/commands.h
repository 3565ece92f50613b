/* SPDX-License-Identifier: Apache-2.0 */
/* The subcommands of build/edgeprof. Each returns the process exit code. */
#ifndef EP_COMMANDS_H
#define EP_COMMANDS_H

int ep_cmd_import(int argc, char **argv);
int ep_cmd_report(int argc, char **argv);
int ep_cmd_export(int argc, char **argv);
int ep_cmd_trace(int argc, char **argv);
int ep_cmd_record(int argc, char **argv);
int ep_cmd_agent(int argc, char **argv);
int ep_cmd_collector(int argc, char **argv);
int ep_cmd_profile(int argc, char **argv);
/* edgeprof upload BINARY... --collector URL: binaries' code for the
 * collector's UI */
int ep_cmd_upload(int argc, char **argv);
/* edgeprof dump PERF.DATA: each sample's IP and branch stack in the form of
 * `perf script -F ip,brstack`, so the reader can be diffed against perf. */
int ep_cmd_dump(int argc, char **argv);

#endif
