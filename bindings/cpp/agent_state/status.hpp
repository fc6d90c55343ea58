// agent_state/status.hpp: the status codes, the library's version, and Error, the exception
// thrown for every failure.
// A part of the C++ wrapper: include "agent_state.hpp", which includes them all.

#ifndef AGENT_STATE_HPP_STATUS
#define AGENT_STATE_HPP_STATUS

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "agent_state.h"

/// Everything of the C++ wrapper lives in this namespace.
namespace agent_state {

/// The status codes of the C library (`AGENT_OK`, `AGENT_ERR_*`), as a scoped enum. The numbers
/// are part of the C ABI and never change.
enum class Status : std::int32_t {
    /// Success (never carried by an Error).
    ok = AGENT_OK,
    /// A required argument was missing, an option unknown or ill-typed, a patch or state not a
    /// JSON object, or a hook id unknown.
    invalid_argument = AGENT_ERR_INVALID_ARGUMENT,
    /// The Agent is closed (explicitly, by a hook, or because it was moved from).
    bad_handle = AGENT_ERR_BAD_HANDLE,
    /// The input is not well-formed JSON.
    json = AGENT_ERR_JSON,
    /// The input is JSON the storage codec refuses (duplicate names, number outside the double
    /// range, malformed tagged value, nesting beyond 64 levels).
    codec = AGENT_ERR_CODEC,
    /// The input, or the state a change would produce, exceeds `max_value_bytes`.
    too_large = AGENT_ERR_TOO_LARGE,
    /// The store failed: I/O, read-only store, corrupt or foreign file, a store of a newer
    /// release (for a state of a newer schema version, see Status::newer_schema); a
    /// PostgreSQL error other than an unreachable server (Status::unavailable) or refused
    /// credentials (Status::auth).
    storage = AGENT_ERR_STORAGE,
    /// Another connection held what the call needs (the write lock; on PostgreSQL the agent's
    /// row or every pooled connection) longer than `busy_timeout_ms`, or the call came from
    /// inside this Agent's own initial-state hook.
    busy = AGENT_ERR_BUSY,
    /// A hook failed. The wrapper rethrows your hook's own exception instead, so you see this
    /// status only for hooks registered through the raw C API.
    hook = AGENT_ERR_HOOK,
    /// A compare-and-set (set_state_if, replace_state_if, patch_state_if) found the state at another version
    /// than expected; nothing was written.
    conflict = AGENT_ERR_CONFLICT,
    /// The validator (Agent::set_validator) rejected the change; nothing was written. The
    /// message carries the validator's reason.
    rejected = AGENT_ERR_REJECTED,
    /// The change log no longer holds changes that were asked for: its retention pruned them
    /// (poll, changes_since, state_at, restore).
    gap = AGENT_ERR_GAP,
    /// The database server (PostgreSQL) could not be reached within `server_timeout_ms`, or the
    /// connection was lost. The call had no effect, unless the message says a commit's outcome
    /// is unknown (read the version to tell); the Agent stays usable and reconnects on its next
    /// call. A SQLite file never reports it.
    unavailable = AGENT_ERR_UNAVAILABLE,
    /// The connection to the database server (PostgreSQL) could not be secured or
    /// authenticated: the TLS handshake or the server's certificate failed, the server offers
    /// no TLS while `sslmode` requires it, or the server refused the credentials (a wrong
    /// password). Retrying with the same URI will not help.
    auth = AGENT_ERR_AUTH,
    /// The call's cancel token (agent_state::Cancel, bound with Cancel::Scope) fired, or its
    /// deadline passed, while the call waited for a lock, a connection or the server. Nothing
    /// was written; the Agent stays usable.
    cancelled = AGENT_ERR_CANCELLED,
    /// The agent's state is stored under a newer schema version than this Agent declares
    /// (Options::schema_version): a newer program wrote it. Nothing was read into this Agent's
    /// shape or written over it; run the newer program, or open with Options::read_only to
    /// read it as stored.
    newer_schema = AGENT_ERR_NEWER_SCHEMA,
    /// Upgrading a stored state to this Agent's schema version failed: a step
    /// (Options::schema_steps or Agent::set_schema_step) failed, threw or is missing, or its
    /// result is refused (codec, size cap, validator). The message names the step
    /// (`schema step 1 -> 2: ...`) and why; the stored state is as it was.
    migration = AGENT_ERR_MIGRATION,
    /// A JSON Pointer names nothing in the state: get_path() or get_tail() of a member that
    /// does not exist or an index out of range, or an operation of patch_state() whose `path`
    /// (or `from`) does not exist, an index out of range or with a leading zero, or a `move`
    /// into its own child. The message names the operation (`operation 1 (remove "/q"): ...`).
    /// Nothing was written.
    path = AGENT_ERR_PATH,
    /// A `test` operation of patch_state() found another value than the one it names (the
    /// patch's own compare-and-set said no). The message names the operation. Nothing was
    /// written.
    test_failed = AGENT_ERR_TEST_FAILED,
    /// A bug in the library was caught at the C boundary; the Agent may still be used.
    panic = AGENT_ERR_PANIC,
};

/// The C name of a status, e.g. `"AGENT_ERR_CODEC"` (`"AGENT_ERR_UNKNOWN"` for other numbers).
/// The string is static.
inline const char *status_name(Status status) noexcept {
    return agent_status_name(static_cast<AgentStatus>(status));
}

/// The library's version, e.g. `"0.1.0"`.
inline std::string_view version() noexcept { return agent_version(); }

/// The exception thrown for every failure the library (or the wrapper) reports: a status and a
/// message for people. The message of a library failure starts with the C function's name,
/// e.g. `"agent_set_state: malformed JSON: ..."`.
class Error : public std::runtime_error {
public:
    /// An error with `status` and `message` (what `what()` returns).
    Error(Status status, const std::string &message)
        : std::runtime_error(message), status_(status) {}

    /// The status code.
    Status status() const noexcept { return status_; }

    /// The status code as the C library's number.
    std::int32_t code() const noexcept { return static_cast<std::int32_t>(status_); }

    /// The status code's C name, e.g. `"AGENT_ERR_JSON"`.
    const char *name() const noexcept { return status_name(status_); }

private:
    Status status_;
};

}  // namespace agent_state

#endif  // AGENT_STATE_HPP_STATUS
