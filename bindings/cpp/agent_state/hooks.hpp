// agent_state/hooks.hpp: hooks: their function types, Change and ChangeKind, the schema
// step's type, the C trampolines that run them, how their exceptions come back to the call (detail::check), and Subscription.
// A part of the C++ wrapper: include "agent_state.hpp", which includes them all.

#ifndef AGENT_STATE_HPP_HOOKS
#define AGENT_STATE_HPP_HOOKS

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "agent_state.h"
#include "status.hpp"

namespace agent_state {

/// The id of an `on_state_changed` hook on one Agent (never 0).
using HookId = std::uint64_t;

/// An `on_state_changed` hook: `next` is the state after the change, `prev` the state before it
/// (the initial state when nothing was stored), `patch` the merge patch as applied by
/// `set_state`, the array of operations of `patch_state`, or `std::nullopt` for
/// `replace_state`. The views are valid only during the call: copy what you keep.
using StateChangedFn = std::function<void(std::string_view next, std::string_view prev,
                                          std::optional<std::string_view> patch)>;

/// An initial-state hook: returns the JSON text of a plain object, the state shown while
/// nothing is stored.
using InitialStateFn = std::function<std::string()>;

/// What kind of change a Change is (the C `AGENT_CHANGE_*` numbers).
enum class ChangeKind : std::int32_t {
    /// A merge patch (set_state, set_state_if).
    merge = AGENT_CHANGE_MERGE,
    /// A replacement (replace_state, replace_state_if, restore; a deletion seen by poll).
    replace = AGENT_CHANGE_REPLACE,
    /// A schema migration: a state stored under an older schema version upgraded to the
    /// writer's (Options::schema_version); Change::migrated_from says from which.
    migration = AGENT_CHANGE_MIGRATION,
    /// An RFC 6902 JSON Patch (patch_state, patch_state_if): Change::patch is the JSON text of
    /// the array of operations.
    json_patch = AGENT_CHANGE_JSON_PATCH,
};

/// One change, as Agent::on_change hooks and the validator see it. The views are valid only
/// during the call: copy what you keep.
struct Change {
    /// The state after the change (for the validator: the state the change would commit).
    std::string_view next;
    /// The state before the change (the initial state when nothing was stored).
    std::string_view prev;
    /// The patch as applied: the merge patch (an object) of set_state (and set_state_if), the
    /// array of operations of patch_state (and patch_state_if; see `kind`); std::nullopt for a
    /// replacement (replace_state, replace_state_if, restore) and a migration.
    std::optional<std::string_view> patch;
    /// The state's version after the change (for the validator: the version it would get).
    std::uint64_t version = 0;
    /// What kind of change this is.
    ChangeKind kind = ChangeKind::merge;
    /// The schema version of `next`: the writer's Options::schema_version (0 when unset).
    std::uint32_t schema = 0;
    /// For ChangeKind::migration, the schema version the state was upgraded from;
    /// std::nullopt for any other change.
    std::optional<std::uint32_t> migrated_from;
};

/// An Agent::on_change hook: sees each committed change, with its version.
using ChangeFn = std::function<void(const Change &change)>;

/// A schema step of code (Agent::set_schema_step): takes a state stored under the step's
/// version K (compact JSON text, valid only during the call) and returns the JSON text of the
/// same state upgraded to version K + 1 (a plain object). Throw to fail the upgrade.
using SchemaStepFn = std::function<std::string(std::string_view state)>;

/// A validator (Agent::set_validator): returns normally to let the change commit, throws to
/// reject it.
using ValidatorFn = std::function<void(const Change &change)>;

namespace detail {

/// Whether a hook of type F can be called as the reference's onStateChanged(next, prev).
template <class F>
inline constexpr bool takes_next_prev_v =
    std::is_invocable_v<F &, std::string_view, std::string_view>;
/// Whether it can be called with the patch too (a StateChangedFn).
template <class F>
inline constexpr bool takes_next_prev_patch_v =
    std::is_invocable_v<F &, std::string_view, std::string_view, std::optional<std::string_view>>;

/// The first exception thrown by an on_state_changed hook during the current delivery loop of
/// this thread (hooks run on the thread that made the change).
inline thread_local std::exception_ptr state_hook_error;
/// The exception thrown by an initial-state hook during the current call of this thread.
inline thread_local std::exception_ptr initial_hook_error;
/// The exception thrown by a validator during the current call of this thread (the validator
/// runs inside the writing call, before it returns).
inline thread_local std::exception_ptr validator_error;
/// How many on_state_changed hooks of this wrapper are running on this thread. While it is
/// above 0, changes made by this thread are delivered by the outermost call, not in place.
inline thread_local int hook_depth = 0;

/// Turns the status of a C call made by this thread into an exception, or returns on AGENT_OK.
/// Must run right after the C call: it reads the thread's last error message.
inline void check(AgentStatus status) {
    // An initial-state hook runs inside the call that needed it, so its exception (if any)
    // belongs to the call that just returned; so does a validator's.
    std::exception_ptr initial = std::exchange(initial_hook_error, nullptr);
    std::exception_ptr rejection = std::exchange(validator_error, nullptr);
    // Only an outermost call (no hook of ours running on this thread) runs a delivery loop, so
    // only it owns the exceptions of on_state_changed hooks.
    std::exception_ptr changed;
    if (hook_depth == 0) {
        changed = std::exchange(state_hook_error, nullptr);
    }
    if (status == AGENT_OK) {
        return;
    }
    if (status == AGENT_ERR_HOOK) {
        if (initial) {
            std::rethrow_exception(initial);
        }
        if (changed) {
            std::rethrow_exception(changed);
        }
    }
    if (status == AGENT_ERR_REJECTED && rejection) {
        // Error(rejected) with the validator's own exception nested in it.
        const std::string message = agent_last_error();
        try {
            std::rethrow_exception(rejection);
        } catch (...) {
            std::throw_with_nested(Error(Status::rejected, message));
        }
    }
    throw Error(static_cast<Status>(status), agent_last_error());
}

/// Start of a call that may trigger hooks: drops a stale exception left by a hook that ran for
/// a change made through the raw C API.
inline void begin_call() noexcept {
    initial_hook_error = nullptr;
    validator_error = nullptr;
    if (hook_depth == 0) {
        state_hook_error = nullptr;
    }
}

extern "C" {

/// The C trampoline of every StateChangedFn: runs the std::function and stores what it throws
/// instead of letting it unwind through the library.
inline std::int32_t agent_state_cpp_state_changed(void *user_data,
                                                  const AgentStateChange *change) noexcept {
    const auto &fn = *static_cast<const StateChangedFn *>(user_data);
    struct Depth {
        Depth() noexcept { ++hook_depth; }
        ~Depth() { --hook_depth; }
    };
    try {
        Depth depth;
        std::optional<std::string_view> patch;
        if (change->patch != nullptr) {
            patch.emplace(reinterpret_cast<const char *>(change->patch), change->patch_len);
        }
        fn(std::string_view(reinterpret_cast<const char *>(change->next), change->next_len),
           std::string_view(reinterpret_cast<const char *>(change->prev), change->prev_len),
           patch);
        return 0;
    } catch (...) {
        if (!state_hook_error) {
            state_hook_error = std::current_exception();
        }
        return 1;
    }
}

/// Finalizer of a StateChangedFn registration (called exactly once by the library).
inline void agent_state_cpp_free_state_changed(void *user_data) noexcept {
    delete static_cast<StateChangedFn *>(user_data);
}

/// The C++ view of a C change.
inline Change to_change(const AgentStateChange &c) noexcept {
    Change change;
    change.next = std::string_view(reinterpret_cast<const char *>(c.next), c.next_len);
    change.prev = std::string_view(reinterpret_cast<const char *>(c.prev), c.prev_len);
    if (c.patch != nullptr) {
        change.patch.emplace(reinterpret_cast<const char *>(c.patch), c.patch_len);
    }
    change.version = c.version;
    change.kind = static_cast<ChangeKind>(c.kind);
    change.schema = c.schema;
    if (c.kind == AGENT_CHANGE_MIGRATION) {
        change.migrated_from = c.migrated_from;
    }
    return change;
}

/// The C trampoline of every ChangeFn registered with Agent::on_change: as
/// agent_state_cpp_state_changed, with the version.
inline std::int32_t agent_state_cpp_change(void *user_data, const AgentStateChange *change) noexcept {
    const auto &fn = *static_cast<const ChangeFn *>(user_data);
    struct Depth {
        Depth() noexcept { ++hook_depth; }
        ~Depth() { --hook_depth; }
    };
    try {
        Depth depth;
        fn(to_change(*change));
        return 0;
    } catch (...) {
        if (!state_hook_error) {
            state_hook_error = std::current_exception();
        }
        return 1;
    }
}

/// Finalizer of a ChangeFn or ValidatorFn registration (called exactly once by the library).
inline void agent_state_cpp_free_change(void *user_data) noexcept {
    delete static_cast<ChangeFn *>(user_data);
}

/// The C trampoline of a ValidatorFn: returning normally lets the change commit; an exception
/// rejects it, its what() becoming the rejection message, and is kept for the writing call to
/// nest in the Error(Status::rejected) it throws.
inline std::int32_t agent_state_cpp_validate(void *user_data, const AgentStateChange *change,
                                             AgentBuffer *message) noexcept {
    const auto &fn = *static_cast<const ValidatorFn *>(user_data);
    const char *why = "the validator threw an exception that is not a std::exception";
    try {
        fn(to_change(*change));
        return 0;
    } catch (const std::exception &e) {
        validator_error = std::current_exception();
        why = e.what();
        (void)agent_buffer_copy(reinterpret_cast<const std::uint8_t *>(why), std::strlen(why),
                                message);
        return 1;
    } catch (...) {
        validator_error = std::current_exception();
    }
    (void)agent_buffer_copy(reinterpret_cast<const std::uint8_t *>(why), std::strlen(why), message);
    return 1;
}

/// The C trampoline of an InitialStateFn: copies its answer into a library buffer and stores
/// what it throws instead of letting it unwind through the library.
inline std::int32_t agent_state_cpp_initial_state(void *user_data, AgentBuffer *out) noexcept {
    const auto &fn = *static_cast<const InitialStateFn *>(user_data);
    try {
        const std::string state = fn();
        return agent_buffer_copy(reinterpret_cast<const std::uint8_t *>(state.data()), state.size(),
                                 out) == AGENT_OK
                   ? 0
                   : 1;
    } catch (...) {
        if (!initial_hook_error) {
            initial_hook_error = std::current_exception();
        }
        return 1;
    }
}

/// The C trampoline of a SchemaStepFn: copies its answer into a library buffer; an exception
/// fails the step, its what() becoming the failure message (for an exception that is not a
/// std::exception, a fixed text). Nothing unwinds through the library.
inline std::int32_t agent_state_cpp_schema_step(void *user_data, std::uint32_t /*from*/,
                                                const std::uint8_t *state, std::size_t state_len,
                                                AgentBuffer *out, AgentBuffer *message) noexcept {
    const auto &fn = *static_cast<const SchemaStepFn *>(user_data);
    const char *why = "the schema step threw an exception that is not a std::exception";
    try {
        const std::string next =
            fn(std::string_view(reinterpret_cast<const char *>(state), state_len));
        if (agent_buffer_copy(reinterpret_cast<const std::uint8_t *>(next.data()), next.size(),
                              out) == AGENT_OK) {
            return 0;
        }
        why = "the schema step's answer could not be copied";
    } catch (const std::exception &e) {
        (void)agent_buffer_copy(reinterpret_cast<const std::uint8_t *>(e.what()),
                                std::strlen(e.what()), message);
        return 1;
    } catch (...) {
    }
    (void)agent_buffer_copy(reinterpret_cast<const std::uint8_t *>(why), std::strlen(why), message);
    return 1;
}

/// Finalizer of a SchemaStepFn registration (called exactly once by the library).
inline void agent_state_cpp_free_schema_step(void *user_data) noexcept {
    delete static_cast<SchemaStepFn *>(user_data);
}

/// Finalizer of an InitialStateFn registration (called exactly once by the library).
inline void agent_state_cpp_free_initial_state(void *user_data) noexcept {
    delete static_cast<InitialStateFn *>(user_data);
}

}  // extern "C"

}  // namespace detail

/// Move-only RAII registration of an `on_state_changed` hook (from Agent::subscribe): the hook
/// is removed when the Subscription is destroyed or reset. It refers to the Agent's handle, not
/// to the Agent object, so it stays correct when the Agent is moved, and is harmless after the
/// Agent was closed (closing removed the hook already).
class Subscription {
public:
    /// A subscription to nothing.
    Subscription() noexcept = default;

    /// Takes over hook `id` registered on raw handle `handle`.
    Subscription(AgentHandle handle, HookId id) noexcept : handle_(handle), id_(id) {}

    /// Takes over `other`'s hook; `other` becomes empty.
    Subscription(Subscription &&other) noexcept
        : handle_(std::exchange(other.handle_, 0)), id_(std::exchange(other.id_, 0)) {}

    /// Removes this subscription's hook, then takes over `other`'s.
    Subscription &operator=(Subscription &&other) noexcept {
        if (this != &other) {
            reset();
            handle_ = std::exchange(other.handle_, 0);
            id_ = std::exchange(other.id_, 0);
        }
        return *this;
    }

    Subscription(const Subscription &) = delete;
    Subscription &operator=(const Subscription &) = delete;

    /// Removes the hook.
    ~Subscription() { reset(); }

    /// Removes the hook now (ignoring that the Agent may be closed already); may be called from
    /// inside a hook, including the hook itself. Afterwards the subscription is empty.
    void reset() noexcept {
        if (id_ != 0) {
            (void)agent_remove_hook(handle_, id_);
            handle_ = 0;
            id_ = 0;
        }
    }

    /// Gives up ownership without removing the hook; returns its id (0 if empty).
    HookId release() noexcept {
        handle_ = 0;
        return std::exchange(id_, 0);
    }

    /// The hook's id, or 0 when empty.
    HookId id() const noexcept { return id_; }

    /// True while the subscription owns a hook.
    explicit operator bool() const noexcept { return id_ != 0; }

private:
    AgentHandle handle_ = 0;
    HookId id_ = 0;
};

}  // namespace agent_state

#endif  // AGENT_STATE_HPP_HOOKS
