/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agent's side of on-demand sessions (collector/sessions): the collector
 * hands one over in an ingest answer; the agent resolves its target to a
 * cgroup or a pid and samples it at the session's rate with a second BPF
 * program on its own perf events, on top of the continuous profile, which
 * goes on unchanged. Its counts go through their own pipeline and travel
 * with Labels.session_id; how it stands travels as SessionReports. An agent
 * that stops mid-session sends what it has and leaves the session running:
 * its successor on the node is handed the rest (same deadline).
 */
#ifndef EP_SESSION_RUNNER_H
#define EP_SESSION_RUNNER_H

#include <stdbool.h>

struct ep_sink;
struct ep_live_config;
struct ep_binary_registry;
struct ep_k8s;

struct ep_session_runner;

/* Sessions come through main_sink's streamer, and their batches and
 * reports go out through it; each samples like main_cfg (the continuous
 * profile's settings), faster. k8s: this node's pods, for pod targets (NULL
 * outside a cluster). NULL when out of memory. */
struct ep_session_runner *ep_session_runner_new(struct ep_sink *main_sink,
						const struct ep_live_config *main_cfg,
						struct ep_binary_registry *reg, struct ep_k8s *k8s);
/* One turn of the agent's loop: new sessions from the collector, their
 * samples, their counts and reports when emit (every interval), and the end
 * of those that reached it. */
void ep_session_runner_turn(struct ep_session_runner *r, bool emit);
/* The agent is stopping: each running session's sampling stops, its counts
 * are sent, and it is reported still running, for the next agent. */
void ep_session_runner_leave(struct ep_session_runner *r);
void ep_session_runner_free(struct ep_session_runner *r);

#endif
