// shim.c: the C half of package agentstate. See shim.h for the contract.

#include <stdlib.h>
#include <string.h>

#include "shim.h"
#include "_cgo_export.h"

// The Go call in progress on this OS thread (0: none). Saved and restored around every library
// call, so a call made from inside a hook gets its own context and the outer one comes back.
static __thread uintptr_t current_ctx;

// The cancel token bound to this OS thread by this file (0: none). A call made from inside a
// hook of a cancellable call binds its own token, if it has one, and the outer one comes back.
static __thread AgentCancel current_token;

// Binds token (0: keep the thread's binding) for one library call; *saved receives what
// restore_token puts back.
static int32_t bind_token(AgentCancel token, AgentCancel *saved) {
    *saved = current_token;
    if (token == 0 || token == current_token) {
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

// The library's hook signatures, forwarding to the //export'ed Go functions with the context of
// the call that triggered them.
static int32_t state_changed_trampoline(void *user_data, const AgentStateChange *change) {
    return agentstateStateChanged((uintptr_t)user_data, (AgentStateChange *)change, current_ctx);
}

static int32_t initial_state_trampoline(void *user_data, AgentBuffer *out) {
    return agentstateInitialState((uintptr_t)user_data, out, current_ctx);
}

static int32_t validate_trampoline(void *user_data, const AgentStateChange *change,
                                   AgentBuffer *message) {
    return agentstateValidate((uintptr_t)user_data, (AgentStateChange *)change, message,
                              current_ctx);
}

static int32_t schema_step_trampoline(void *user_data, uint32_t from, const uint8_t *state,
                                      size_t state_len, AgentBuffer *out, AgentBuffer *message) {
    return agentstateSchemaStep((uintptr_t)user_data, from, (uint8_t *)state, state_len, out,
                                message, current_ctx);
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

int32_t agentstate_buffer_copy(const uint8_t *data, size_t len, AgentBuffer *out, char **err) {
    return fail(agent_buffer_copy(data, len, out), err);
}

int32_t agentstate_remove_hook_plain(AgentHandle h, uint64_t id) {
    return agent_remove_hook(h, id);
}
