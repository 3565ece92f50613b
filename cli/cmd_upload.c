/* SPDX-License-Identifier: Apache-2.0 */
/* edgeprof upload BINARY... --collector URL: binaries' code to the
 * collector, for its UI (CI pipelines that keep their builds). Each file is
 * checked here first (an ELF file with a GNU build-id note), then sent
 * unless the collector has trusted code for its build-id (an agent's is
 * provisional, and replaced); the collector checks it again. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/resolve/binary.h"
#include "agent/stream/binary_upload.h"
#include "cli/commands.h"
#include "common/util/collector_list.h"
#include "common/util/log.h"
#include "common/util/options.h"
#include "common/util/secret.h"

static void usage(FILE *out)
{
	fprintf(out, "usage: edgeprof upload BINARY... --collector URL[,URL...] [--token-file F]\n"
		     "                       [--cacert F] [--cert F --key F] [--max-mib N]\n"
		     "\n"
		     "Several --collector URLs (replicas on one store): a failed request goes to\n"
		     "the next.\n"
		     "Sends each binary's code and symbols to the collector, which keeps them by\n"
		     "build-id to draw control-flow graphs and disassembly in its web UI. This is\n"
		     "trusted code (source=upload): it replaces what agents sent, which is only\n"
		     "provisional; a collector with --upload-token-file wants that token here as\n"
		     "--token-file. A build-id the collector has trusted code for is not sent\n"
		     "again. Exit code 1 when any file is refused (not ELF, no build-id, too\n"
		     "large, no upload token) or cannot be sent.\n");
}

/* One file: 0 sent or already there, 1 not. */
static int upload_one(const struct ep_upload_target *t, const char *path, uint64_t max)
{
	char err[512];
	struct ep_binary_registry *reg = ep_binreg_new();
	if (!reg || ep_binreg_add_file(reg, path, err, sizeof(err)) != 0) {
		ep_error("%s", reg ? err : "out of memory");
		ep_binreg_free(reg);
		return 1;
	}
	const char *id = ep_binary_build_id_hex(ep_binreg_at(reg, 0));
	if (!*id) {
		ep_error("%s: no GNU build-id note: the collector keeps code by build-id (link "
			 "with -Wl,--build-id)",
			 path);
		ep_binreg_free(reg);
		return 1;
	}
	char msg[512] = "";
	enum ep_arch arch = ep_binary_arch(ep_binreg_at(reg, 0));
	enum ep_upload_result r =
	    ep_upload_file(t, path, id, arch == EP_ARCH_UNKNOWN ? NULL : ep_arch_name(arch),
			   "upload", max, msg, sizeof(msg));
	int rc = 0;
	switch (r) {
	case EP_UPLOAD_SENT:
		ep_info("%s: %s", path, msg);
		break;
	case EP_UPLOAD_HAD:
		ep_info("%s: build-id %s: the collector has it already", path, id);
		break;
	default:
		ep_error("%s: %s", path, msg);
		rc = 1;
	}
	ep_binreg_free(reg);
	return rc;
}

int ep_cmd_upload(int argc, char **argv)
{
	const char *collector = NULL, *token_file = NULL;
	struct ep_collector_arg collector_arg = {.out = &collector};
	struct ep_upload_target t = {0};
	unsigned max_mib = 256;
	const struct ep_option opts[] = {
	    EP_OPTION("collector", 0, EP_OPT_CALL, &collector_arg, .call = ep_collector_arg_add),
	    EP_OPTION("token-file", 0, EP_OPT_FILE, &token_file),
	    EP_OPTION("cacert", 0, EP_OPT_FILE, &t.ca_file),
	    EP_OPTION("cert", 0, EP_OPT_FILE, &t.cert_file),
	    EP_OPTION("key", 0, EP_OPT_FILE, &t.key_file),
	    EP_OPTION("max-mib", 0, EP_OPT_UINT, &max_mib, .min = 1, .max = 4096),
	    EP_OPTION_END,
	};
	const struct ep_option *const tables[] = {opts, NULL};
	int first = ep_options_parse("upload", argc, argv, tables, usage);
	if (first < 0)
		return ep_options_exit_code(first);
	if (!collector || first >= argc) {
		ep_error("upload needs BINARY... and --collector URL");
		return 2;
	}
	char token[512], err[512];
	if (token_file && ep_read_token_file(token_file, token, sizeof(token), err, sizeof(err))) {
		ep_error("%s", err);
		return 1;
	}
	t.collectors = ep_collector_list_parse(collector, err, sizeof(err));
	if (!t.collectors) {
		ep_error("%s", err);
		explicit_bzero(token, sizeof(token));
		return 2;
	}
	t.token = token_file ? token : NULL;
	int rc = 0;
	for (int i = first; i < argc; i++)
		rc |= upload_one(&t, argv[i], (uint64_t)max_mib << 20);
	explicit_bzero(token, sizeof(token));
	ep_collector_list_free(t.collectors);
	return rc;
}
