/* SPDX-License-Identifier: Apache-2.0 */
/* --insn-mix [--range START-END | --function NAME] with --binary/--symfs:
 * the options report and export share, and the mix they ask for, read
 * from the profiled binaries. */
#ifndef EP_CLI_MIX_H
#define EP_CLI_MIX_H

#include <stdbool.h>

#include "common/profile/insn_mix.h"
#include "common/util/options.h"
#include "profile.pb-c.h"

struct ep_binary_registry;

struct ep_cli_mix {
	bool insn_mix;
	const char *range;    /* START-END, hex or decimal, END exclusive */
	const char *function; /* a function of the profile */
	struct ep_binary_registry *reg;
};

#define EP_CLI_MIX_OPTION_COUNT 10
/* --insn-mix, --range, --function, --profile-max-mib (ep_profile_set_max)
 * and the binary options (ep_cli_binary_options) into o (o->reg is made
 * here; free it with ep_cli_mix_free). Fills out[0..10], the last the end. */
int ep_cli_mix_options(struct ep_option out[EP_CLI_MIX_OPTION_COUNT + 1], struct ep_cli_mix *o);
void ep_cli_mix_free(struct ep_cli_mix *o);

/* The mix the options ask for, NULL with the reason logged (naming the
 * option or the profile `name`). A binary whose file cannot be found or is
 * another build gets no mix, said once on stderr and in the output. */
struct ep_profile_mix *ep_cli_profile_mix(const Edgeprof__V1__Profile *p,
					  const struct ep_cli_mix *o, const char *name);

/* The file holding bp's code (found in reg by the profile's path and
 * build-id), or NULL with *why said (malloc'd; NULL too when memory ran
 * out). */
struct ep_binary;
const struct ep_binary *ep_cli_find_binary(struct ep_binary_registry *reg,
					   const Edgeprof__V1__BinaryProfile *bp, char **why);

#endif
