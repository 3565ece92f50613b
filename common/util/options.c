/* SPDX-License-Identifier: Apache-2.0 */
#include "common/util/options.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util/log.h"
#include "common/util/output_file.h"
#include "common/util/regular_file.h"

#define MAX_OPTIONS 96

int ep_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

int ep_parse_uint(const char *s, unsigned min, unsigned max, unsigned *out)
{
	uint64_t v;
	if (ep_parse_u64(s, min, max, &v) != 0)
		return -1;
	*out = (unsigned)v;
	return 0;
}

static void common_usage(FILE *out)
{
	fprintf(out, "  --log-level L     error|warn|info (default)|debug\n"
		     "  --help            this text\n");
}

static void print_choices(char *buf, size_t len, const char *const *choices)
{
	size_t used = 0;
	buf[0] = '\0';
	for (size_t i = 0; choices[i] && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? "|" : "", choices[i]);
}

/* What EP_OPT_FILE, EP_OPT_OUTPUT and EP_OPT_DIR accept (options.h); 0,
 * or -1 with err naming path and what it is. */
static int check_path(enum ep_option_kind kind, const char *path, char *err, size_t errlen)
{
	char why[256];
	if (kind == EP_OPT_FILE) {
		int fd = ep_open_regular(path, why, sizeof(why));
		if (fd < 0) {
			snprintf(err, errlen, "%s: %s", path, why);
			return -1;
		}
		close(fd);
		return 0;
	}
	if (kind == EP_OPT_OUTPUT)
		return ep_output_check(path, err, errlen);
	struct stat st;
	if (stat(path, &st) == 0 && !S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "%s: is %s, not a directory", path, ep_file_kind(st.st_mode));
		return -1;
	}
	return 0;
}

/* Stores arg per o's kind; 0, or -1 with the reason in err. */
static int apply(const struct ep_option *o, const char *arg, char *err, size_t errlen)
{
	uint64_t v;
	switch (o->kind) {
	case EP_OPT_TRUE:
	case EP_OPT_FALSE:
		*(bool *)o->value = o->kind == EP_OPT_TRUE;
		return 0;
	case EP_OPT_STRING:
		*(const char **)o->value = arg;
		return 0;
	case EP_OPT_UINT:
	case EP_OPT_U64:
		if (ep_parse_u64(arg, o->min, o->max, &v) != 0) {
			snprintf(err, errlen, "'%s' is not a number in %" PRIu64 "-%" PRIu64, arg,
				 o->min, o->max);
			return -1;
		}
		if (o->kind == EP_OPT_UINT)
			*(unsigned *)o->value = (unsigned)v;
		else
			*(uint64_t *)o->value = v;
		return 0;
	case EP_OPT_CHOICE:
		for (int i = 0; o->choices[i]; i++) {
			if (strcmp(arg, o->choices[i]) == 0) {
				*(int *)o->value = i;
				return 0;
			}
		}
		char words[256];
		print_choices(words, sizeof(words), o->choices);
		snprintf(err, errlen, "'%s' is not one of %s", arg, words);
		return -1;
	case EP_OPT_FILE:
	case EP_OPT_OUTPUT:
	case EP_OPT_DIR:
		if (check_path(o->kind, arg, err, errlen) != 0)
			return -1;
		*(const char **)o->value = arg;
		return 0;
	case EP_OPT_CALL:
	case EP_OPT_CALL_NOARG:
		err[0] = '\0';
		if (o->call(o->value, arg, err, errlen) != 0) {
			if (!err[0])
				snprintf(err, errlen, "'%s' is not accepted", arg ? arg : "");
			return -1;
		}
		return 0;
	case EP_OPT_END:
		break;
	}
	snprintf(err, errlen, "unknown option kind");
	return -1;
}

enum { OPT_LOG_LEVEL = 0x10000, OPT_HELP, OPT_TABLE_BASE = 0x20000 };

static int parse(const char *command, int argc, char **argv, const struct ep_option *const *tables,
		 void (*usage)(FILE *out), bool stop_at_operand)
{
	struct option longs[MAX_OPTIONS + 3];
	const struct ep_option *by_index[MAX_OPTIONS];
	char shorts[2 * MAX_OPTIONS + 4];
	size_t n = 0, ns = 0;
	if (stop_at_operand)
		shorts[ns++] = '+'; /* getopt's "stop at the first operand" */
	shorts[ns++] = ':';	    /* missing arguments reported as ':' */
	for (size_t t = 0; tables[t]; t++) {
		for (const struct ep_option *o = tables[t]; o->kind != EP_OPT_END; o++) {
			if (n == MAX_OPTIONS) {
				ep_error("%s: too many options (the table holds %d)", command,
					 MAX_OPTIONS);
				return EP_OPTIONS_ERROR;
			}
			bool has_arg = o->kind != EP_OPT_TRUE && o->kind != EP_OPT_FALSE &&
				       o->kind != EP_OPT_CALL_NOARG;
			by_index[n] = o;
			longs[n] =
			    (struct option){o->name, has_arg ? required_argument : no_argument,
					    NULL, OPT_TABLE_BASE + (int)n};
			if (o->short_name) {
				shorts[ns++] = (char)o->short_name;
				if (has_arg)
					shorts[ns++] = ':';
			}
			n++;
		}
	}
	shorts[ns++] = 'h';
	shorts[ns] = '\0';
	longs[n++] = (struct option){"log-level", required_argument, NULL, OPT_LOG_LEVEL};
	longs[n++] = (struct option){"help", no_argument, NULL, OPT_HELP};
	longs[n] = (struct option){0};

	/* 0, not 1: glibc then starts afresh, ordering ('+') included, even when
	 * an earlier parse in this process left its state behind */
	optind = 0;
	opterr = 0;
	int ch, idx = -1;
	while ((idx = -1, ch = getopt_long(argc, argv, shorts, longs, &idx)) != -1) {
		const struct ep_option *o = NULL;
		if (ch >= OPT_TABLE_BASE) {
			o = by_index[ch - OPT_TABLE_BASE];
		} else if (ch == OPT_LOG_LEVEL) {
			int level = ep_log_parse_level(optarg);
			if (level < 0) {
				ep_error("%s --log-level: '%s' is not error|warn|info|debug",
					 command, optarg);
				return EP_OPTIONS_ERROR;
			}
			ep_log_set_level((enum ep_log_level)level);
			continue;
		} else if (ch == OPT_HELP || ch == 'h') {
			usage(stdout);
			common_usage(stdout);
			return EP_OPTIONS_HELP;
		} else if (ch == '?' || ch == ':') {
			const char *what = ch == '?' ? "unknown option" : "missing the value of";
			if (optopt && optopt < OPT_LOG_LEVEL)
				ep_error("%s: %s -%c", command, what, optopt);
			else
				ep_error("%s: %s %s", command, what, argv[optind - 1]);
			usage(stderr);
			return EP_OPTIONS_ERROR;
		} else {
			for (size_t i = 0; i + 2 < n && !o; i++)
				if (by_index[i]->short_name == ch)
					o = by_index[i];
		}
		if (!o)
			continue;
		char err[512];
		if (apply(o, optarg, err, sizeof(err)) != 0) {
			if (o->short_name && idx < 0)
				ep_error("%s -%c: %s", command, o->short_name, err);
			else
				ep_error("%s --%s: %s", command, o->name, err);
			return EP_OPTIONS_ERROR;
		}
		if (o->given)
			*o->given = true;
	}
	return optind;
}

int ep_options_parse(const char *command, int argc, char **argv,
		     const struct ep_option *const *tables, void (*usage)(FILE *out))
{
	return parse(command, argc, argv, tables, usage, false);
}

int ep_options_parse_command(const char *command, int argc, char **argv,
			     const struct ep_option *const *tables, void (*usage)(FILE *out))
{
	return parse(command, argc, argv, tables, usage, true);
}
