/* SPDX-License-Identifier: Apache-2.0 */
#include "common/util/log.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static enum ep_log_level current_level = EP_LOG_INFO;
static _Thread_local bool thread_muted;

void ep_log_mute_thread(bool mute)
{
	thread_muted = mute;
}

void ep_log_set_level(enum ep_log_level level)
{
	current_level = level;
}

int ep_log_parse_level(const char *name)
{
	static const char *const names[] = {"error", "warn", "info", "debug"};
	for (int i = 0; i < 4; i++)
		if (strcmp(name, names[i]) == 0)
			return i;
	return -1;
}

void ep_log(enum ep_log_level level, const char *fmt, ...)
{
	static const char *const tags[] = {"error", "warn", "info", "debug"};
	if (level > current_level || (thread_muted && level > EP_LOG_ERROR))
		return;
	/* Build the whole line first so concurrent writers never interleave
	 * halves of a line. */
	char line[2048];
	int n = snprintf(line, sizeof(line), "edgeprof: %s: ", tags[level]);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	size_t len = strlen(line);
	if (len > 0 && line[len - 1] == '\n')
		line[--len] = '\0';
	fprintf(stderr, "%s\n", line);
}
