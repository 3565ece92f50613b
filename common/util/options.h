/* SPDX-License-Identifier: Apache-2.0 */
/* Command-line options of every edgeprof command, from tables: each option
 * says where its value goes and what it accepts, so numbers, word choices,
 * --log-level, --help and the error lines are parsed and worded one way.
 * Groups of options that several commands share (--binary/--symfs, the
 * collector's address and credentials, the profile sink) are tables of their
 * own, passed together. */
#ifndef EP_OPTIONS_H
#define EP_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum ep_option_kind {
	EP_OPT_END = 0,
	EP_OPT_TRUE,	   /* no argument: *(bool *)value = true */
	EP_OPT_FALSE,	   /* no argument: *(bool *)value = false */
	EP_OPT_STRING,	   /* *(const char **)value = the argument */
	EP_OPT_UINT,	   /* *(unsigned *)value, decimal, in [min, max] */
	EP_OPT_U64,	   /* *(uint64_t *)value, decimal, in [min, max] */
	EP_OPT_CHOICE,	   /* *(int *)value = index of the argument in choices */
	EP_OPT_CALL,	   /* call(value, argument): repeatable or special options */
	EP_OPT_CALL_NOARG, /* call(value, NULL) */
	/* Paths, *(const char **)value = the argument once checked here, so a
	 * wrong kind of file is refused at once, in one line naming it, before
	 * anything runs (a FIFO would block the open of an input for ever,
	 * and the rename of an output would replace whatever has its name):
	 * EP_OPT_FILE, an input: a regular file that can be opened
	 * (common/util/regular_file.h); whoever opens it later opens it that
	 * way too. EP_OPT_OUTPUT, written by rename (common/util/
	 * output_file.h): absent, or a regular file (a symbolic link is not
	 * followed). EP_OPT_DIR: absent, or a directory. */
	EP_OPT_FILE,
	EP_OPT_OUTPUT,
	EP_OPT_DIR,
};

struct ep_option {
	const char *name; /* the long name, without "--" */
	int short_name;	  /* a letter (-o), or 0 */
	enum ep_option_kind kind;
	void *value;
	uint64_t min, max;	    /* EP_OPT_UINT, EP_OPT_U64 */
	const char *const *choices; /* EP_OPT_CHOICE: NULL-terminated */
	/* EP_OPT_CALL*: 0, or -1 with a reason in err (the option's name is
	 * added in front of it). */
	int (*call)(void *value, const char *arg, char *err, size_t errlen);
	bool *given; /* when set, becomes true if the option appears */
};

/* A table's entry: EP_OPTION("top", 0, EP_OPT_UINT, &top, .min = 1, .max = 100),
 * the rest of the fields named as in the struct. */
#define EP_OPTION(name_, short_, kind_, value_, ...)                                               \
	{                                                                                          \
		.name = (name_), .short_name = (short_), .kind = (kind_), .value = (value_),       \
		__VA_ARGS__                                                                        \
	}
#define EP_OPTION_END                                                                              \
	{                                                                                          \
		.kind = EP_OPT_END                                                                 \
	}

enum { EP_OPTIONS_HELP = -1, EP_OPTIONS_ERROR = -2 };

/* Parses argv[1..] against the tables (an array of option tables, each ending
 * with EP_OPTION_END, the array itself ending with NULL), plus --log-level L
 * and --help, which every command takes. usage() prints the command's own
 * usage and options; --help prints it followed by the common options.
 * Returns the index of the first operand (argv[returned..argc) are the
 * operands, in order), EP_OPTIONS_HELP after --help (exit 0), or
 * EP_OPTIONS_ERROR after an error line naming the option and the value, and
 * the usage on stderr (exit 2). */
int ep_options_parse(const char *command, int argc, char **argv,
		     const struct ep_option *const *tables, void (*usage)(FILE *out));

/* The same for a command that runs another program (record -- CMD ARGS):
 * options end at the first operand, so the program's own options are left
 * to it. */
int ep_options_parse_command(const char *command, int argc, char **argv,
			     const struct ep_option *const *tables, void (*usage)(FILE *out));

/* The exit code for ep_options_parse's negative results. */
static inline int ep_options_exit_code(int parsed)
{
	return parsed == EP_OPTIONS_HELP ? 0 : 2;
}

/* A decimal number in [min, max]; 0, or -1 for anything else. */
int ep_parse_uint(const char *s, unsigned min, unsigned max, unsigned *out);
int ep_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);

#endif
