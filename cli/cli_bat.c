/* SPDX-License-Identifier: Apache-2.0 */
#include "cli/cli_bat.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent/resolve/binary.h"
#include "common/elf/elf_bat.h"
#include "common/export/export.h"
#include "common/util/log.h"
#include "common/util/output_file.h"

static size_t hex_bytes(const char *hex, uint8_t *out, size_t max)
{
	size_t n = strlen(hex);
	if (n % 2 || n / 2 > max)
		return 0;
	for (size_t i = 0; i < n / 2; i++) {
		unsigned v;
		if (sscanf(hex + 2 * i, "%2x", &v) != 1)
			return 0;
		out[i] = (uint8_t)v;
	}
	return n / 2;
}

/* The table of bp's file, NULL when none (or its file is not at hand: a
 * profile whose binary is gone exports as before, without a warning);
 * *refused when it has one that was refused. */
static const struct ep_bat *find_bat(const Edgeprof__V1__BinaryProfile *bp,
				     struct ep_binary_registry *reg, const char **path,
				     bool *refused)
{
	uint8_t id[EP_ELF_BUILD_ID_MAX];
	size_t idlen = hex_bytes(bp->build_id, id, sizeof(id));
	*path = bp->n_paths ? bp->paths[0] : "";
	if (ep_binreg_count(reg) == 0 && (!(*path)[0] || access(*path, R_OK) != 0))
		return NULL;
	struct ep_binary *bin = ep_binreg_lookup(reg, *path, id, idlen);
	if (!bin || (bp->build_id[0] && strcmp(ep_binary_build_id_hex(bin), bp->build_id) != 0))
		return NULL;
	*path = ep_binary_path(bin);
	return ep_binary_bat(bin, refused);
}

/* BOLT gives its output the input's build-id with the last bit flipped
 * (RewriteInstance::patchBuildID): the input's, where the table has none. */
static void say_input(const char *path, const char *build_id, const struct ep_bat *bat)
{
	char in[2 * EP_ELF_BUILD_ID_MAX + 1];
	size_t n = strlen(build_id);
	snprintf(in, sizeof(in), "%s", build_id);
	if (n && n < sizeof(in)) {
		unsigned last = 0;
		sscanf(in + n - 1, "%1x", &last);
		snprintf(in + n - 1, 2, "%x", last ^ 1);
	}
	ep_info("%s was laid out by BOLT with --enable-bat (BOLT %d's table, %zu functions): fdata "
		"in its input binary's terms (build-id %s: this one's, last bit flipped back)",
		path, bat->bolt_version, bat->nfrags, n ? in : "unknown");
}

int ep_cli_export_bat(const Edgeprof__V1__Profile *profile, const char *build_id,
		      struct ep_binary_registry *reg, const char *output)
{
	char err[512];
	const Edgeprof__V1__BinaryProfile *bp =
	    ep_export_select_binary(profile, build_id, err, sizeof(err));
	const char *path;
	bool refused = false;
	const struct ep_bat *bat = bp ? find_bat(bp, reg, &path, &refused) : NULL;
	if (refused) {
		/* its offsets would be the BOLTed layout's, stale for the input */
		ep_error("%s: no fdata: the binary was BOLTed with --enable-bat and its "
			 "translation table could not be read (said above)",
			 path);
		return 1;
	}
	if (!bat)
		return -1;
	say_input(path, bp->build_id, bat);
	struct ep_output o = {.f = stdout};
	if (output && ep_output_open(&o, output, "w", err, sizeof(err)) != 0) {
		ep_error("%s", err);
		return 1;
	}
	if (ep_export_fdata_bat(profile, bp, bat, o.f, err, sizeof(err)) != 0) {
		ep_error("%s", err);
		if (output)
			ep_output_discard(&o);
		return 1;
	}
	if (output ? ep_output_commit(&o, err, sizeof(err)) != 0
		   : fflush(stdout) != 0 || ferror(stdout)) {
		ep_error("%s", output ? err : strerror(errno));
		return 1;
	}
	return 0;
}
