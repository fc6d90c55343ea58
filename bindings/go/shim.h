/*
 * shim.h: the C side of the Go binding (see shim.c). Internal to package agentstate.
 *
 * Every wrapper makes one library call and, when it fails, copies agent_last_error() into a
 * malloc'ed string (*err, freed by Go with C.free) before returning. The message is a
 * per-OS-thread value and a goroutine may move to another thread between two cgo calls, so it
 * must be read inside the same C call as the function that failed.
 *
 * `ctx` identifies the Go call in progress: it is stored in a C thread-local for the duration
 * of the library call, so that hooks (which the library runs on the calling thread) can tell
 * the Go side which call triggered them and hand their Go error back to it.
 *
 * `token` is the call's cancel token (agent_cancel_new), bound to the calling OS thread for
 * the library call only and the thread's previous binding restored after it, all inside this
 * one C call (a goroutine may change threads between two cgo calls); 0 leaves the thread's
 * binding as it is (none, or that of the call whose hook is running).
 *
 * Hooks of a submitted call (agentstate_submit) run on the library worker that makes it, where
 * no Go call is in progress: they report to a context of the worker's, which the call's
 * completion carries to Go. A call made from inside them keeps the worker's binding (the
 * submitted call's token, which the library bound and this file cannot name to put back)
 * rather than binding its own token.
 */
#ifndef AGENTSTATE_GO_SHIM_H
#define AGENTSTATE_GO_SHIM_H

#include <stddef.h>
#include <stdint.h>
/* The default build on linux/amd64 (link_prebuilt.go defines AGENTSTATE_PREBUILT) links the
 * archive that `make dist` stages beside the package; the repository's own copy has none, and
 * would otherwise fail on the missing header. (Through -I${SRCDIR}/include; GCC 5+ and Clang
 * have __has_include, an older compiler skips the check.) */
#if defined(AGENTSTATE_PREBUILT) && defined(__has_include)
#if !__has_include("../lib/linux_amd64/libagent_state.a")
#error "agentstate: no prebuilt lib/linux_amd64/libagent_state.a beside the package: this is the repository's source, not the module make dist stages (target/dist/go). Build with -tags agentstate_inrepo or agentstate_static (after make build), or agentstate_pkgconfig for an installed library; see doc.go, Linking."
#endif
#endif
#include "agent_state.h"

int32_t agentstate_open(const char *path, const char *options_json, AgentHandle *out, char **err);
int32_t agentstate_close(AgentHandle h, char **err);
int32_t agentstate_get_state(AgentHandle h, AgentBuffer *out, uintptr_t ctx, AgentCancel token,
                             char **err);
int32_t agentstate_set_state(AgentHandle h, const uint8_t *patch, size_t len, AgentBuffer *out,
                             uintptr_t ctx, AgentCancel token, char **err);
int32_t agentstate_replace_state(AgentHandle h, const uint8_t *next, size_t len, AgentBuffer *out,
                                 uintptr_t ctx, AgentCancel token, char **err);
/* The versioned, compare-and-set and change-log calls (agent_state.h 0.2). */
int32_t agentstate_get_state_versioned(AgentHandle h, AgentBuffer *out, uint64_t *out_version,
                                       uintptr_t ctx, AgentCancel token, char **err);
int32_t agentstate_set_state_if(AgentHandle h, uint64_t expected, const uint8_t *patch,
                                size_t len, AgentBuffer *out, uint64_t *out_version,
                                uintptr_t ctx, AgentCancel token, char **err);
int32_t agentstate_replace_state_if(AgentHandle h, uint64_t expected, const uint8_t *next,
                                    size_t len, AgentBuffer *out, uint64_t *out_version,
                                    uintptr_t ctx, AgentCancel token, char **err);
int32_t agentstate_poll(AgentHandle h, size_t *out_delivered, uintptr_t ctx, AgentCancel token,
                        char **err);
int32_t agentstate_changes_since(AgentHandle h, uint64_t after, AgentBuffer *out, uintptr_t ctx,
                                 AgentCancel token, char **err);
int32_t agentstate_get_state_at(AgentHandle h, uint64_t version, AgentBuffer *out, uintptr_t ctx,
                                AgentCancel token, char **err);
int32_t agentstate_restore_state(AgentHandle h, uint64_t version, AgentBuffer *out,
                                 uint64_t *out_version, uintptr_t ctx, AgentCancel token,
                                 char **err);
/* A store's agents (agent_state.h topic 8): no handle and no hook runs during them, so no
 * call context; the token as above. */
int32_t agentstate_store_list(const char *path, const char *options_json, const char *prefix,
                              const char *after, uint32_t limit, AgentBuffer *out,
                              AgentCancel token, char **err);
int32_t agentstate_store_delete(const char *path, const char *options_json, const char *agent_id,
                                int64_t if_version, uint64_t *out_deleted_version,
                                AgentCancel token, char **err);
int32_t agentstate_store_expire(const char *path, const char *options_json, uint64_t idle_ms,
                                uint32_t limit, int dry_run, AgentBuffer *out, AgentCancel token,
                                char **err);
/* Registers the Go state-changed trampoline with `hook` (a runtime/cgo.Handle) as user_data. */
int32_t agentstate_on_state_changed(AgentHandle h, uintptr_t hook, uint64_t *out_id, char **err);
int32_t agentstate_remove_hook(AgentHandle h, uint64_t id, char **err);
/* Sets the Go initial-state trampoline with `hook` (a runtime/cgo.Handle); 0 removes the hook. */
int32_t agentstate_set_initial_state_hook(AgentHandle h, uintptr_t hook, char **err);
/* Sets the Go validator trampoline with `hook` (a runtime/cgo.Handle); 0 removes the gate. */
int32_t agentstate_set_validator(AgentHandle h, uintptr_t hook, char **err);
/* Schema evolution (agent_state.h topic 9). Sets the Go schema-step trampoline with `hook` (a
 * runtime/cgo.Handle) as the step from `from`; 0 removes the step. */
int32_t agentstate_set_schema_step(AgentHandle h, uint32_t from, uintptr_t hook, char **err);
int32_t agentstate_schema_version(AgentHandle h, uint32_t *out, char **err);
int32_t agentstate_get_state_at_stored(AgentHandle h, uint64_t version, AgentBuffer *out,
                                       uint32_t *out_schema, uintptr_t ctx, AgentCancel token,
                                       char **err);
int32_t agentstate_upgrade_state(AgentHandle h, const uint8_t *state, size_t len, uint32_t from,
                                 AgentBuffer *out, uintptr_t ctx, AgentCancel token, char **err);
/* JSON Patch and reads of one place (agent_state.h topic 10). */
int32_t agentstate_patch_state(AgentHandle h, const uint8_t *operations, size_t len,
                               AgentBuffer *out, uintptr_t ctx, AgentCancel token, char **err);
int32_t agentstate_patch_state_if(AgentHandle h, uint64_t expected, const uint8_t *operations,
                                  size_t len, AgentBuffer *out, uint64_t *out_version,
                                  uintptr_t ctx, AgentCancel token, char **err);
int32_t agentstate_get_path(AgentHandle h, const char *pointer, size_t len, AgentBuffer *out,
                            uintptr_t ctx, AgentCancel token, char **err);
int32_t agentstate_get_tail(AgentHandle h, const char *pointer, size_t len, size_t n,
                            AgentBuffer *out, uintptr_t ctx, AgentCancel token, char **err);
/* Awaited calls (agent_state.h, "Awaited calls"): the Context methods of the state submit their
 * call with agent_submit instead of waiting for it in a cgo call, so that a goroutine waiting
 * for a busy store holds no OS thread (completions.go).
 *
 * Submits the call {op, flags, data[0..len), expected, token, tag}; the data is copied before
 * this returns, and `token` (0: none) stays the caller's, to free once the call completed.
 * Returns the status of agent_submit (any failure's message in *err, as above): on AGENT_OK
 * the call completes exactly once, either before this returns (*out_now = 1 and the
 * completion in *now: a read the handle's validated copy answers, a call refused at once, or
 * any call made from inside a Go hook, validator, initial-state function or schema step,
 * which is made synchronously on this thread, as it must be: the library delivers a hook's
 * nested change after the hook returns, on the same thread, and refuses re-entrance from the
 * functions that run under the handle's lock), or later (*out_now = 0) on a library worker
 * thread, which puts the completion, with the context the call's hooks reported to there, in
 * the list agentstate_take_completions empties (or, before agentstate_completions_fd made the
 * list's eventfd, or when memory for the list runs out, hands it to the //export'ed
 * agentstateCompleted). The completion's buffers are the receiver's to free. `ctx` is the Go
 * call's context for the hooks that run on this thread. */
int32_t agentstate_submit(AgentHandle h, int32_t op, uint32_t flags, const uint8_t *data,
                          size_t len, uint64_t expected, AgentCancel token, uint64_t tag,
                          AgentCompletion *now, int32_t *out_now, uintptr_t ctx, char **err);
/* A completion made on a library worker, waiting for Go's dispatcher goroutine. */
typedef struct AgentstateDone {
    AgentCompletion completion;
    uintptr_t hooks; /* the context the call's hooks reported to on the worker (0: none) */
} AgentstateDone;
/* Makes (once; later calls return the same) the eventfd that is readable while completions wait
 * in the list; from then on the workers put completions there. It stays open for the process's
 * life. Errors: AGENT_ERR_STORAGE (the system refused an eventfd), with the message in *err. */
int32_t agentstate_completions_fd(int32_t *out_fd, char **err);
/* Moves up to `cap` waiting completions, oldest first, into out[0..n) and returns n; never
 * blocks. A completion put in the list when it was empty makes the eventfd readable. */
size_t agentstate_take_completions(AgentstateDone *out, size_t cap);

/* agent_buffer_copy, with the same error discipline. */
int32_t agentstate_buffer_copy(const uint8_t *data, size_t len, AgentBuffer *out, char **err);

/* Test support: calls the library the naive way (failing call, then agent_last_error in a
 * separate cgo call), used only to show that the test above would catch a mix-up. */
int32_t agentstate_remove_hook_plain(AgentHandle h, uint64_t id);

#endif
