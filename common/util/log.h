/* SPDX-License-Identifier: Apache-2.0 */
/* One line per event, with a level; the default level (info) stays quiet
 * during normal work so operators only see what needs them. */
#ifndef EP_LOG_H
#define EP_LOG_H

#include <stdbool.h>

enum ep_log_level { EP_LOG_ERROR = 0, EP_LOG_WARN, EP_LOG_INFO, EP_LOG_DEBUG };

void ep_log_set_level(enum ep_log_level level);
/* Parses "error|warn|info|debug"; returns -1 on anything else. */
int ep_log_parse_level(const char *name);

/* Only errors from the calling thread: for a worker that would repeat what
 * another one says (the readers of a parallel import). */
void ep_log_mute_thread(bool mute);

void ep_log(enum ep_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define ep_error(...) ep_log(EP_LOG_ERROR, __VA_ARGS__)
#define ep_warn(...)  ep_log(EP_LOG_WARN, __VA_ARGS__)
#define ep_info(...)  ep_log(EP_LOG_INFO, __VA_ARGS__)
#define ep_debug(...) ep_log(EP_LOG_DEBUG, __VA_ARGS__)

#endif
