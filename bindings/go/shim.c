// shim.c: the C half of package agentstate. See shim.h for the contract.

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "shim.h"
#include "_cgo_export.h"

// The Go call in progress on this OS thread (0: none). Saved and restored around every library
// call, so a call made from inside a hook gets its own context and the outer one comes back.
static __thread uintptr_t current_ctx;

// The cancel token bound to this OS thread by this file (0: none). A call made from inside a
// hook of a cancellable call binds its own token, if it has one, and the outer one comes back.
static __thread AgentCancel current_token;

// The thread's Go hooks running (hook, validator, initial-state function, schema step): a
// Context call made from inside one is made synchronously (agentstate_submit).
static __thread uint32_t hook_depth;

// Of those, the ones running on a library worker for a submitted call (no Go call in progress
// on the thread when they started). The library bound that call's token to the worker, and
// this file cannot name it to bind it back after another: a call made there keeps it.
static __thread uint32_t worker_hooks;

// Binds token (0: keep the thread's binding) for one library call; *saved receives what
// restore_token puts back. Inside a hook on a library worker the thread's binding (the
// submitted call's token) is kept too, the call then cancelled by that call's context.
static int32_t bind_token(AgentCancel token, AgentCancel *saved) {
    *saved = current_token;
    if (token == 0 || token == current_token) {
        return AGENT_OK;
    }
    if (worker_hooks > 0) {
        *saved = token; // nothing for restore_token to undo
        return AGENT_OK;
    }
    int32_t rc = agent_cancel_bind(token);
    if (rc == AGENT_OK) {
        current_token = token;
    }
    return rc;
}

static void restore_token(AgentCancel token, AgentCancel saved) {
    if (token == 0 || token == saved) {
        return;
    }
    // saved is the token of a call still running on this thread: not freed yet, so valid.
    if (agent_cancel_bind(saved) == AGENT_OK) {
        current_token = saved;
    }
}

static int32_t fail(int32_t rc, char **err) {
    if (rc != AGENT_OK && err != NULL) {
        // Same native call as the failing function: the message is still this call's.
        const char *msg = agent_last_error();
        *err = strdup(msg != NULL ? msg : "");
    }
    return rc;
}

// The one way a library call is made here, in the order every wrapper needs: bind the call's
// cancel token (a failure to bind is the call's failure, and the call is not made), make `ctx`
// the thread's call context for the hooks the call runs, make the call, copy a failure's
// message (before anything else calls the library and replaces it), then put back the outer
// call's context and token. Returns the call's status from the enclosing function. `token` 0
// keeps the thread's binding; `ctx` current_ctx keeps the thread's context (the store calls,
// during which no hook runs); `ctx` 0 hides the outer call's context from hooks registered or
// freed by this call.
#define RETURN_CALL(ctx, token, err, call)                                                        \
    do {                                                                                          \
        AgentCancel saved_token_;                                                                 \
        int32_t rc_ = bind_token((token), &saved_token_);                                         \
        if (rc_ != AGENT_OK) {                                                                    \
            return fail(rc_, (err));                                                              \
        }                                                                                         \
        uintptr_t saved_ctx_ = current_ctx;                                                       \
        current_ctx = (ctx);                                                                      \
        rc_ = fail((call), (err));                                                                \
        current_ctx = saved_ctx_;                                                                 \
        restore_token((token), saved_token_);                                                     \
        return rc_;                                                                               \
    } while (0)

int32_t agentstate_open(const char *path, const char *options_json, AgentHandle *out, char **err) {
    return fail(agent_open(path, options_json, out), err);
}

int32_t agentstate_close(AgentHandle h, char **err) {
    RETURN_CALL(0, 0, err, agent_close(h));
}

int32_t agentstate_get_state(AgentHandle h, AgentBuffer *out, uintptr_t ctx, AgentCancel token,
                             char **err) {
    RETURN_CALL(ctx, token, err, agent_get_state(h, out));
}

int32_t agentstate_set_state(AgentHandle h, const uint8_t *patch, size_t len, AgentBuffer *out,
                             uintptr_t ctx, AgentCancel token, char **err) {
    RETURN_CALL(ctx, token, err, agent_set_state(h, patch, len, out));
}

int32_t agentstate_replace_state(AgentHandle h, const uint8_t *next, size_t len, AgentBuffer *out,
                                 uintptr_t ctx, AgentCancel token, char **err) {
    RETURN_CALL(ctx, token, err, agent_replace_state(h, next, len, out));
}

int32_t agentstate_get_state_versioned(AgentHandle h, AgentBuffer *out, uint64_t *out_version,
                                       uintptr_t ctx, AgentCancel token, char **err) {
    RETURN_CALL(ctx, token, err, agent_get_state_versioned(h, out, out_version));
}

int32_t agentstate_set_state_if(AgentHandle h, uint64_t expected, const uint8_t *patch,
                                size_t len, AgentBuffer *out, uint64_t *out_version,
                                uintptr_t ctx, AgentCancel token, char **err) {
    RETURN_CALL(ctx, token, err, agent_set_state_if(h, expected, patch, len, out, out_version));
}

int32_t agentstate_replace_state_if(AgentHandle h, uint64_t expected, const uint8_t *next,
                                    size_t len, AgentBuffer *out, uint64_t *out_version,
                                    uintptr_t ctx, AgentCancel token, char **err) {
    RETURN_CALL(ctx, token, err, agent_replace_state_if(h, expected, next, len, out, out_version));
}

int32_t agentstate_poll(AgentHandle h, size_t *out_delivered, uintptr_t ctx, AgentCancel token,
                        char **err) {
    RETURN_CALL(ctx, token, err, agent_poll(h, out_delivered));
}

int32_t agentstate_changes_since(AgentHandle h, uint64_t after, AgentBuffer *out, uintptr_t ctx,
                                 AgentCancel token, char **err) {
    RETURN_CALL(ctx, token, err, agent_changes_since(h, after, out));
}

int32_t agentstate_get_state_at(AgentHandle h, uint64_t version, AgentBuffer *out, uintptr_t ctx,
                                AgentCancel token, char **err) {
    RETURN_CALL(ctx, token, err, agent_get_state_at(h, version, out));
}

int32_t agentstate_restore_state(AgentHandle h, uint64_t version, AgentBuffer *out,
                                 uint64_t *out_version, uintptr_t ctx, AgentCancel token,
                                 char **err) {
    RETURN_CALL(ctx, token, err, agent_restore_state(h, version, out, out_version));
}

int32_t agentstate_store_list(const char *path, const char *options_json, const char *prefix,
                              const char *after, uint32_t limit, AgentBuffer *out,
                              AgentCancel token, char **err) {
    RETURN_CALL(current_ctx, token, err,
                agent_store_list(path, options_json, prefix, after, limit, out));
}

int32_t agentstate_store_delete(const char *path, const char *options_json, const char *agent_id,
                                int64_t if_version, uint64_t *out_deleted_version,
                                AgentCancel token, char **err) {
    RETURN_CALL(current_ctx, token, err,
                agent_store_delete(path, options_json, agent_id, if_version, out_deleted_version));
}

int32_t agentstate_store_expire(const char *path, const char *options_json, uint64_t idle_ms,
                                uint32_t limit, int dry_run, AgentBuffer *out, AgentCancel token,
                                char **err) {
    RETURN_CALL(current_ctx, token, err,
                agent_store_expire(path, options_json, idle_ms, limit, dry_run, out));
}

// The hooks' context on a thread with no Go call in progress: a library worker running a
// submitted call. Made by the first hook that reports there, handed to Go with the call's
// completion and reset by done_trampoline, which the library calls on the same worker after
// the call and its hooks (0: no hook reported yet).
static __thread uintptr_t worker_ctx;

// Worker contexts count down from the top of the range, never meeting Go's call contexts
// (newCallContext counts up from 1).
static uintptr_t worker_ctx_seq = UINTPTR_MAX;

// Enters a Go hook on this thread: returns the context it reports to (the Go call in progress
// on this thread, else the submitted call this worker runs) and whether it runs on a worker,
// for leave_hook.
static uintptr_t enter_hook(uint32_t *on_worker) {
    *on_worker = current_ctx == 0;
    hook_depth++;
    worker_hooks += *on_worker;
    if (current_ctx != 0) {
        return current_ctx;
    }
    if (worker_ctx == 0) {
        worker_ctx = __atomic_fetch_sub(&worker_ctx_seq, 1, __ATOMIC_RELAXED);
    }
    return worker_ctx;
}

static void leave_hook(uint32_t on_worker) {
    worker_hooks -= on_worker;
    hook_depth--;
}

// The library's hook signatures, forwarding to the //export'ed Go functions with the context of
// the call that triggered them.
static int32_t state_changed_trampoline(void *user_data, const AgentStateChange *change) {
    uint32_t on_worker;
    uintptr_t ctx = enter_hook(&on_worker);
    int32_t rc = agentstateStateChanged((uintptr_t)user_data, (AgentStateChange *)change, ctx);
    leave_hook(on_worker);
    return rc;
}

static int32_t initial_state_trampoline(void *user_data, AgentBuffer *out) {
    uint32_t on_worker;
    uintptr_t ctx = enter_hook(&on_worker);
    int32_t rc = agentstateInitialState((uintptr_t)user_data, out, ctx);
    leave_hook(on_worker);
    return rc;
}

static int32_t validate_trampoline(void *user_data, const AgentStateChange *change,
                                   AgentBuffer *message) {
    uint32_t on_worker;
    uintptr_t ctx = enter_hook(&on_worker);
    int32_t rc =
        agentstateValidate((uintptr_t)user_data, (AgentStateChange *)change, message, ctx);
    leave_hook(on_worker);
    return rc;
}

static int32_t schema_step_trampoline(void *user_data, uint32_t from, const uint8_t *state,
                                      size_t state_len, AgentBuffer *out, AgentBuffer *message) {
    uint32_t on_worker;
    uintptr_t ctx = enter_hook(&on_worker);
    int32_t rc = agentstateSchemaStep((uintptr_t)user_data, from, (uint8_t *)state, state_len,
                                      out, message, ctx);
    leave_hook(on_worker);
    return rc;
}

static void free_trampoline(void *user_data) {
    agentstateFreeHook((uintptr_t)user_data);
}

int32_t agentstate_on_state_changed(AgentHandle h, uintptr_t hook, uint64_t *out_id, char **err) {
    RETURN_CALL(0, 0, err,
                agent_on_state_changed(h, state_changed_trampoline, (void *)hook, free_trampoline,
                                       out_id));
}

int32_t agentstate_remove_hook(AgentHandle h, uint64_t id, char **err) {
    RETURN_CALL(0, 0, err, agent_remove_hook(h, id));
}

int32_t agentstate_set_initial_state_hook(AgentHandle h, uintptr_t hook, char **err) {
    RETURN_CALL(0, 0, err,
                hook == 0 ? agent_set_initial_state_hook(h, NULL, NULL, NULL)
                          : agent_set_initial_state_hook(h, initial_state_trampoline,
                                                         (void *)hook, free_trampoline));
}

int32_t agentstate_set_validator(AgentHandle h, uintptr_t hook, char **err) {
    RETURN_CALL(0, 0, err,
                hook == 0 ? agent_set_validator(h, NULL, NULL, NULL)
                          : agent_set_validator(h, validate_trampoline, (void *)hook,
                                                free_trampoline));
}

int32_t agentstate_set_schema_step(AgentHandle h, uint32_t from, uintptr_t hook, char **err) {
    RETURN_CALL(0, 0, err,
                hook == 0 ? agent_set_schema_step(h, from, NULL, NULL, NULL)
                          : agent_set_schema_step(h, from, schema_step_trampoline, (void *)hook,
                                                  free_trampoline));
}

int32_t agentstate_schema_version(AgentHandle h, uint32_t *out, char **err) {
    RETURN_CALL(0, 0, err, agent_schema_version(h, out));
}

int32_t agentstate_get_state_at_stored(AgentHandle h, uint64_t version, AgentBuffer *out,
                                       uint32_t *out_schema, uintptr_t ctx, AgentCancel token,
                                       char **err) {
    RETURN_CALL(ctx, token, err, agent_get_state_at_stored(h, version, out, out_schema));
}

int32_t agentstate_upgrade_state(AgentHandle h, const uint8_t *state, size_t len, uint32_t from,
                                 AgentBuffer *out, uintptr_t ctx, AgentCancel token, char **err) {
    RETURN_CALL(ctx, token, err, agent_upgrade_state(h, state, len, from, out));
}

int32_t agentstate_patch_state(AgentHandle h, const uint8_t *operations, size_t len,
                               AgentBuffer *out, uintptr_t ctx, AgentCancel token, char **err) {
    RETURN_CALL(ctx, token, err, agent_patch_state(h, operations, len, out));
}

int32_t agentstate_patch_state_if(AgentHandle h, uint64_t expected, const uint8_t *operations,
                                  size_t len, AgentBuffer *out, uint64_t *out_version,
                                  uintptr_t ctx, AgentCancel token, char **err) {
    RETURN_CALL(ctx, token, err,
                agent_patch_state_if(h, expected, operations, len, out, out_version));
}

int32_t agentstate_get_path(AgentHandle h, const char *pointer, size_t len, AgentBuffer *out,
                            uintptr_t ctx, AgentCancel token, char **err) {
    RETURN_CALL(ctx, token, err, agent_get_path(h, pointer, len, out));
}

int32_t agentstate_get_tail(AgentHandle h, const char *pointer, size_t len, size_t n,
                            AgentBuffer *out, uintptr_t ctx, AgentCancel token, char **err) {
    RETURN_CALL(ctx, token, err, agent_get_tail(h, pointer, len, n, out));
}

// ---- awaited calls ----

// The completion this thread's agentstate_submit waits for when it may come before
// agent_submit returns (NULL: none), and its tag.
static __thread AgentCompletion *inline_slot;
static __thread uint64_t inline_tag;

// The completions made on workers, waiting for Go's dispatcher goroutine (completions.go),
// which done_fd, an eventfd Go's netpoller watches, wakes. A worker calling into Go instead (a
// cgo callback from a thread Go did not start) costs that thread the setup of a Go M, and the
// P it takes stays in the state of a system call until the scheduler takes it back: tens of
// microseconds before the waiting goroutine runs. done_fd -1: no dispatcher yet.
static pthread_mutex_t done_mu = PTHREAD_MUTEX_INITIALIZER;
static AgentstateDone *done_list;
static size_t done_len, done_cap;
static int done_fd = -1;

// Puts a worker's completion in the list; 0 when there is no dispatcher or no memory (the
// caller then hands it to Go itself).
static int queue_completion(const AgentCompletion *completion, uintptr_t hooks) {
    pthread_mutex_lock(&done_mu);
    if (done_fd < 0) {
        pthread_mutex_unlock(&done_mu);
        return 0;
    }
    if (done_len == done_cap) {
        size_t cap = done_cap == 0 ? 64 : done_cap * 2;
        AgentstateDone *grown = realloc(done_list, cap * sizeof *grown);
        if (grown == NULL) {
            pthread_mutex_unlock(&done_mu);
            return 0;
        }
        done_list = grown;
        done_cap = cap;
    }
    done_list[done_len].completion = *completion;
    done_list[done_len].hooks = hooks;
    done_len++;
    if (done_len == 1) {
        uint64_t one = 1;
        // Fails only with the counter at its maximum, which the dispatcher's reads prevent.
        ssize_t wrote = write(done_fd, &one, sizeof one);
        (void)wrote;
    }
    pthread_mutex_unlock(&done_mu);
    return 1;
}

int32_t agentstate_completions_fd(int32_t *out_fd, char **err) {
    pthread_mutex_lock(&done_mu);
    if (done_fd < 0) {
        done_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    }
    int fd = done_fd;
    int saved_errno = errno;
    pthread_mutex_unlock(&done_mu);
    if (fd < 0) {
        if (err != NULL) {
            const char *what = "cannot make the eventfd of awaited calls' completions: ";
            const char *why = strerror(saved_errno);
            *err = malloc(strlen(what) + strlen(why) + 1);
            if (*err != NULL) {
                strcpy(*err, what);
                strcat(*err, why);
            }
        }
        return AGENT_ERR_STORAGE;
    }
    *out_fd = fd;
    return AGENT_OK;
}

size_t agentstate_take_completions(AgentstateDone *out, size_t cap) {
    pthread_mutex_lock(&done_mu);
    size_t n = done_len < cap ? done_len : cap;
    if (n > 0) {
        memcpy(out, done_list, n * sizeof *out);
        memmove(done_list, done_list + n, (done_len - n) * sizeof *done_list);
        done_len -= n;
    }
    pthread_mutex_unlock(&done_mu);
    return n;
}

// agent_submit's callback: a completion made before agent_submit returned goes to the
// submitter's slot (no call into Go); one made on a worker goes to Go with the context its
// hooks reported to there, through the list while there is a dispatcher.
static void done_trampoline(void *context, AgentCompletion *completion) {
    (void)context;
    if (inline_slot != NULL && completion->tag == inline_tag) {
        *inline_slot = *completion;
        inline_slot = NULL;
        return;
    }
    uintptr_t hooks = worker_ctx;
    worker_ctx = 0;
    if (!queue_completion(completion, hooks)) {
        agentstateCompleted(completion, hooks);
    }
}

// Copies the failure's message into an AgentBuffer, as a completion carries it.
static void message_of(int32_t rc, AgentBuffer *message) {
    if (rc == AGENT_OK) {
        return;
    }
    const char *msg = agent_last_error();
    if (msg == NULL) {
        msg = "";
    }
    // On failure (out of memory) the message stays empty; the status still says what failed.
    (void)agent_buffer_copy((const uint8_t *)msg, strlen(msg), message);
}

// The call of a submission made synchronously (from inside a Go hook), as the completion the
// worker would have made: status, the state (and its version where the call gives it) or the
// failure's message.
static void call_now(AgentHandle h, const AgentCall *call, AgentCompletion *now, uintptr_t ctx) {
    memset(now, 0, sizeof *now);
    now->tag = call->tag;
    AgentCancel saved_token;
    int32_t rc = bind_token(call->cancel, &saved_token);
    if (rc != AGENT_OK) {
        now->status = rc;
        message_of(rc, &now->message);
        return;
    }
    uintptr_t saved_ctx = current_ctx;
    current_ctx = ctx;
    AgentBuffer *out = &now->state;
    uint64_t version = 0;
    int cas = (call->flags & AGENT_CALL_IF) != 0;
    switch (call->op) {
    case AGENT_OP_GET_STATE:
        rc = agent_get_state_versioned(h, out, &version);
        break;
    case AGENT_OP_SET_STATE:
        rc = cas ? agent_set_state_if(h, call->expected_version, call->data, call->len, out,
                                      &version)
                 : agent_set_state(h, call->data, call->len, out);
        break;
    case AGENT_OP_REPLACE_STATE:
        rc = cas ? agent_replace_state_if(h, call->expected_version, call->data, call->len, out,
                                          &version)
                 : agent_replace_state(h, call->data, call->len, out);
        break;
    case AGENT_OP_PATCH_STATE:
        rc = cas ? agent_patch_state_if(h, call->expected_version, call->data, call->len, out,
                                        &version)
                 : agent_patch_state(h, call->data, call->len, out);
        break;
    default:
        // Never reached: the Go side names only the ops above.
        rc = AGENT_ERR_INVALID_ARGUMENT;
        break;
    }
    now->status = rc;
    now->version = rc == AGENT_OK ? version : 0;
    message_of(rc, &now->message);
    current_ctx = saved_ctx;
    restore_token(call->cancel, saved_token);
}

int32_t agentstate_submit(AgentHandle h, int32_t op, uint32_t flags, const uint8_t *data,
                          size_t len, uint64_t expected, AgentCancel token, uint64_t tag,
                          AgentCompletion *now, int32_t *out_now, uintptr_t ctx, char **err) {
    AgentCall call = {0};
    call.op = op;
    call.flags = flags;
    call.data = data;
    call.len = len;
    call.expected_version = expected;
    call.cancel = token;
    call.tag = tag;
    if (hook_depth > 0) {
        call_now(h, &call, now, ctx);
        *out_now = 1;
        return AGENT_OK;
    }
    AgentCompletion *saved_slot = inline_slot;
    uint64_t saved_tag = inline_tag;
    inline_slot = now;
    inline_tag = tag;
    uintptr_t saved_ctx = current_ctx;
    current_ctx = ctx;
    int32_t rc = fail(agent_submit(h, &call, done_trampoline, NULL), err);
    current_ctx = saved_ctx;
    *out_now = inline_slot == NULL;
    inline_slot = saved_slot;
    inline_tag = saved_tag;
    return rc;
}

int32_t agentstate_buffer_copy(const uint8_t *data, size_t len, AgentBuffer *out, char **err) {
    return fail(agent_buffer_copy(data, len, out), err);
}

int32_t agentstate_remove_hook_plain(AgentHandle h, uint64_t id) {
    return agent_remove_hook(h, id);
}
