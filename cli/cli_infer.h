/* SPDX-License-Identifier: Apache-2.0 */
/* --infer on|off and --infer-max-blocks N: export's profile inference
 * (common/profile/infer.h) on the binary an optimizer format is for, read
 * from its file. */
#ifndef EP_CLI_INFER_H
#define EP_CLI_INFER_H

#include "common/util/options.h"
#include "profile.pb-c.h"

struct ep_binary_registry;

struct ep_cli_infer {
	int off;		    /* --infer: 0 on (the default), 1 off */
	unsigned max_blocks;	    /* --infer-max-blocks */
	Edgeprof__V1__Profile view; /* the profile with the inferred binary */
	Edgeprof__V1__BinaryProfile **binaries, *inferred;
};

#define EP_CLI_INFER_OPTION_COUNT 2
void ep_cli_infer_options(struct ep_option out[EP_CLI_INFER_OPTION_COUNT + 1],
			  struct ep_cli_infer *o);

/* The profile to export in `format`: p itself, or (fdata, --infer on, the
 * binary's file found) a view of p whose exported binary has inferred
 * counts, valid until ep_cli_infer_free(o). What was done is logged; a
 * binary without its file is exported as sampled, with a warning. NULL when
 * memory runs out. */
const Edgeprof__V1__Profile *ep_cli_infer(struct ep_cli_infer *o, const Edgeprof__V1__Profile *p,
					  int format, const char *build_id,
					  struct ep_binary_registry *reg);
void ep_cli_infer_free(struct ep_cli_infer *o);

#endif
