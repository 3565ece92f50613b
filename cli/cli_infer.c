/* SPDX-License-Identifier: Apache-2.0 */
#include "cli/cli_infer.h"

#include <stdlib.h>
#include <string.h>

#include "agent/resolve/binary.h"
#include "cli/cli_mix.h"
#include "common/export/export.h"
#include "common/profile/infer.h"
#include "common/util/log.h"

static const char *const on_off[] = {"on", "off", NULL};

void ep_cli_infer_options(struct ep_option out[EP_CLI_INFER_OPTION_COUNT + 1],
			  struct ep_cli_infer *o)
{
	o->off = 0;
	o->max_blocks = EP_INFER_MAX_BLOCKS_DEFAULT;
	out[0] = (struct ep_option)EP_OPTION("infer", 0, EP_OPT_CHOICE, &o->off, .choices = on_off);
	out[1] = (struct ep_option)EP_OPTION("infer-max-blocks", 0, EP_OPT_UINT, &o->max_blocks,
					     .min = 1, .max = 1u << 24);
	out[2] = (struct ep_option)EP_OPTION_END;
}

void ep_cli_infer_free(struct ep_cli_infer *o)
{
	if (o->inferred)
		edgeprof__v1__binary_profile__free_unpacked(o->inferred, NULL);
	free(o->binaries);
	o->inferred = NULL;
	o->binaries = NULL;
}

static void say(const Edgeprof__V1__BinaryProfile *bp, const struct ep_infer_stats *s,
		unsigned max_blocks)
{
	ep_info("infer %s: %llu functions, %llu blocks (%llu unsampled, %llu of them given "
		"counts by flow, %llu of them by a unit spread to them)",
		bp->build_id, (unsigned long long)s->functions, (unsigned long long)s->blocks,
		(unsigned long long)s->blocks_zero_sampled,
		(unsigned long long)(s->blocks_zero_sampled -
				     (s->blocks_zero_inferred < s->blocks_zero_sampled
					  ? s->blocks_zero_inferred
					  : s->blocks_zero_sampled)),
		(unsigned long long)s->blocks_spread);
	if (s->functions_refused)
		ep_warn("infer %s: %llu functions keep their sampled counts; the last, %s: %s "
			"(--infer-max-blocks %u)",
			bp->build_id, (unsigned long long)s->functions_refused, s->last_refused,
			ep_infer_status_name(s->last_refusal), max_blocks);
}

/* bp's counts inferred on its code; NULL (said) when there is no code. */
static Edgeprof__V1__BinaryProfile *infer_binary(const struct ep_cli_infer *o,
						 const Edgeprof__V1__BinaryProfile *bp,
						 struct ep_binary_registry *reg, bool *oom)
{
	char *why = NULL;
	const struct ep_binary *bin = ep_cli_find_binary(reg, bp, &why);
	if (!bin) {
		*oom = !why;
		if (why)
			ep_warn("counts not inferred (sampled counts exported): %s", why);
		free(why);
		return NULL;
	}
	size_t nseg = 0, ndata = 0;
	const struct ep_code_segment *segs = ep_binary_code_segments(bin, &nseg);
	struct ep_decoder *dec = ep_decoder_new(ep_binary_arch(bin), segs, nseg);
	if (!dec) {
		*oom = true;
		return NULL;
	}
	const struct ep_addr_range *data = ep_binary_data_in_code(bin, &ndata);
	if (ndata)
		ep_decoder_set_data(dec, data, ndata);
	struct ep_infer_limits limits;
	ep_infer_limits_default(&limits);
	limits.max_blocks = o->max_blocks;
	struct ep_infer_stats stats;
	Edgeprof__V1__BinaryProfile *out = NULL;
	int rc = ep_infer_profile(bp, dec, &limits, &out, &stats);
	if (rc < 0)
		*oom = true;
	else if (rc > 0)
		ep_warn("counts not inferred (sampled counts exported): %s",
			ep_infer_status_name(stats.last_refusal));
	else
		say(bp, &stats, o->max_blocks);
	ep_decoder_free(dec);
	return out;
}

const Edgeprof__V1__Profile *ep_cli_infer(struct ep_cli_infer *o, const Edgeprof__V1__Profile *p,
					  int format, const char *build_id,
					  struct ep_binary_registry *reg)
{
	if (o->off || format != EP_EXPORT_FDATA)
		return p;
	char err[256];
	const Edgeprof__V1__BinaryProfile *bp =
	    ep_export_select_binary(p, build_id, err, sizeof(err));
	if (!bp)
		return p; /* the export says why */
	bool oom = false;
	o->inferred = infer_binary(o, bp, reg, &oom);
	if (!o->inferred)
		return oom ? NULL : p;
	o->binaries = malloc(p->n_binaries * sizeof(*o->binaries));
	if (!o->binaries)
		return NULL;
	for (size_t i = 0; i < p->n_binaries; i++)
		o->binaries[i] = p->binaries[i] == bp ? o->inferred : p->binaries[i];
	o->view = *p;
	o->view.binaries = o->binaries;
	return &o->view;
}
