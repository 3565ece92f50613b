/* SPDX-License-Identifier: Apache-2.0 */
#include "cli/cli_mix.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/decode/insn_mix.h"
#include "agent/resolve/binary.h"
#include "cli/cli_util.h"
#include "common/profile/profile_file.h"
#include "common/util/log.h"

/* --profile-max-mib N: 1 MiB to 1 TiB */
static int set_profile_max(void *unused, const char *arg, char *err, size_t errlen)
{
	(void)unused;
	unsigned mib;
	if (ep_parse_uint(arg, 1, 1u << 20, &mib) != 0) {
		snprintf(err, errlen, "'%s' is not a number of MiB from 1 to %u", arg, 1u << 20);
		return -1;
	}
	ep_profile_set_max((uint64_t)mib << 20);
	return 0;
}

int ep_cli_mix_options(struct ep_option out[EP_CLI_MIX_OPTION_COUNT + 1], struct ep_cli_mix *o)
{
	o->reg = ep_binreg_new();
	if (!o->reg)
		return -1;
	out[0] = (struct ep_option)EP_OPTION("insn-mix", 0, EP_OPT_TRUE, &o->insn_mix);
	out[1] = (struct ep_option)EP_OPTION("range", 0, EP_OPT_STRING, &o->range);
	out[2] = (struct ep_option)EP_OPTION("function", 0, EP_OPT_STRING, &o->function);
	out[3] =
	    (struct ep_option){"profile-max-mib", 0, EP_OPT_CALL, NULL, .call = set_profile_max};
	ep_cli_binary_options(out + 4, o->reg);
	return 0;
}

void ep_cli_mix_free(struct ep_cli_mix *o)
{
	ep_binreg_free(o->reg);
	o->reg = NULL;
}

static int parse_addr(const char *s, const char **end, uint64_t *v)
{
	char *e;
	if (*s < '0' || *s > '9')
		return -1;
	unsigned long long x = strtoull(s, &e, 0);
	*end = e;
	*v = x;
	return e == s ? -1 : 0;
}

/* START-END into [lo, hi): 0 or -1 (logged). */
static int parse_range(const char *s, uint64_t *lo, uint64_t *hi)
{
	const char *e;
	if (parse_addr(s, &e, lo) != 0 || *e != '-' || parse_addr(e + 1, &e, hi) != 0 || *e ||
	    *hi <= *lo) {
		ep_error("--range: '%s' is not START-END with START < END (addresses, 0x for hex)",
			 s);
		return -1;
	}
	return 0;
}

static const Edgeprof__V1__Function *find_function(const Edgeprof__V1__BinaryProfile *bp,
						   const char *name)
{
	for (size_t i = 0; i < bp->n_functions; i++)
		if (strcmp(bp->functions[i]->name, name) == 0)
			return bp->functions[i];
	return NULL;
}

static int hex_bytes(const char *hex, uint8_t *out, size_t max, size_t *len)
{
	size_t n = strlen(hex);
	if (n % 2 || n / 2 > max)
		return -1;
	for (size_t i = 0; i < n / 2; i++) {
		unsigned v;
		if (sscanf(hex + 2 * i, "%2x", &v) != 1)
			return -1;
		out[i] = (uint8_t)v;
	}
	*len = n / 2;
	return 0;
}

const struct ep_binary *ep_cli_find_binary(struct ep_binary_registry *reg,
					   const Edgeprof__V1__BinaryProfile *bp, char **why)
{
	uint8_t id[64];
	size_t idlen = 0;
	const char *path = bp->n_paths ? bp->paths[0] : "";
	if (hex_bytes(bp->build_id, id, sizeof(id), &idlen) != 0)
		idlen = 0;
	const struct ep_binary *bin =
	    path[0] || idlen ? ep_binreg_lookup(reg, path, id, idlen) : NULL;
	char buf[512];
	if (!bin)
		snprintf(buf, sizeof(buf),
			 "%s: binary not found (pass it with --binary or --symfs)", path);
	else if (bp->build_id[0] && strcmp(ep_binary_build_id_hex(bin), bp->build_id) != 0)
		snprintf(buf, sizeof(buf), "%s: build-id %s, the profile's is %s: another build",
			 ep_binary_path(bin), ep_binary_build_id_hex(bin), bp->build_id);
	else if (ep_binary_arch(bin) != EP_ARCH_X86_64 && ep_binary_arch(bin) != EP_ARCH_AARCH64)
		snprintf(buf, sizeof(buf), "%s: no decoder for its instruction set",
			 ep_binary_path(bin));
	else
		return bin;
	*why = strdup(buf);
	return NULL;
}

static int binary_mix(const struct ep_cli_mix *o, const Edgeprof__V1__BinaryProfile *bp,
		      uint64_t lo, uint64_t hi, struct ep_binary_mix *out)
{
	char *why = NULL;
	const struct ep_binary *bin = ep_cli_find_binary(o->reg, bp, &why);
	if (!bin) {
		if (!why)
			return -1;
		ep_warn("no instruction mix for %s", why);
		*out = (struct ep_binary_mix){.missing = why, .lo = lo, .hi = hi};
		return 0;
	}
	return ep_insn_mix_binary(bp, bin, lo, hi, out);
}

struct ep_profile_mix *ep_cli_profile_mix(const Edgeprof__V1__Profile *p,
					  const struct ep_cli_mix *o, const char *name)
{
	uint64_t lo = 0, hi = UINT64_MAX;
	if (o->range && o->function) {
		ep_error("--range and --function: give one of them");
		return NULL;
	}
	if (o->range && parse_range(o->range, &lo, &hi) != 0)
		return NULL;
	struct ep_profile_mix *mix = calloc(1, sizeof(*mix));
	char scope[256] = "";
	if (o->range)
		snprintf(scope, sizeof(scope), "range 0x%" PRIx64 "-0x%" PRIx64, lo, hi);
	else if (o->function)
		snprintf(scope, sizeof(scope), "function %s", o->function);
	if (!mix || !(mix->scope = strdup(scope)) ||
	    !(mix->bins = calloc(p->n_binaries ? p->n_binaries : 1, sizeof(*mix->bins))))
		goto oom;
	size_t found = 0;
	for (size_t i = 0; i < p->n_binaries; i++, mix->n++) {
		const Edgeprof__V1__BinaryProfile *bp = p->binaries[i];
		uint64_t blo = lo, bhi = hi;
		if (o->function) {
			const Edgeprof__V1__Function *f = find_function(bp, o->function);
			if (!f) {
				mix->bins[i].out_of_scope = true;
				continue;
			}
			blo = f->start;
			bhi = f->start + (f->size ? f->size : 1);
			found++;
		}
		if (binary_mix(o, bp, blo, bhi, &mix->bins[i]) != 0)
			goto oom;
	}
	if (o->function && !found) {
		ep_error("%s: no function named %s in the profile", name, o->function);
		ep_profile_mix_free(mix);
		return NULL;
	}
	return mix;
oom:
	ep_error("instruction mix: out of memory");
	ep_profile_mix_free(mix);
	return NULL;
}
