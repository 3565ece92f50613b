/* SPDX-License-Identifier: Apache-2.0 */
#ifndef EP_CMD_DUMP_H
#define EP_CMD_DUMP_H

/* edgeprof dump PERF.DATA: each sample's IP and branch stack in the form of
 * `perf script -F ip,brstack`, so the reader can be diffed against perf. */
int ep_cmd_dump(int argc, char **argv);

#endif
