/*
 * watch_shim.h: the C side of the Go binding's watches (watch.go). Internal to package
 * agentstate; the same discipline as shim.h: every wrapper makes one library call and, when it
 * fails, copies agent_last_error() into a malloc'ed string (*err, freed by Go with C.free)
 * inside the same C call, since a goroutine may move to another OS thread between two cgo
 * calls. No Go hook runs during these calls, so they carry no call context and no token.
 */
#ifndef AGENTSTATE_GO_WATCH_SHIM_H
#define AGENTSTATE_GO_WATCH_SHIM_H

#include "shim.h"

/* agent_watch_open in its queue form (no callback): *out_fd is the watch's descriptor, readable
 * while events are queued, owned by the watch (Go polls a duplicate of it). */
int32_t agentstate_watch_open(const char *path, const char *options_json, AgentWatch *out,
                              int32_t *out_fd, char **err);
/* agent_watch_next: *out is NULL when no event came within timeout_ms (0: none queued). */
int32_t agentstate_watch_next(AgentWatch w, int64_t timeout_ms, AgentWatchEvent **out,
                              char **err);
int32_t agentstate_watch_add(AgentWatch w, const char *id, int64_t since, char **err);
int32_t agentstate_watch_remove(AgentWatch w, const char *id, char **err);
int32_t agentstate_watch_close(AgentWatch w, char **err);
/* A duplicate of fd, close-on-exec and non-blocking (for Go's netpoller), or -1 with errno. */
int agentstate_watch_dup_fd(int32_t fd);

#endif
