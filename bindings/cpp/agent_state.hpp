// agent_state.hpp: header-only C++17 wrapper of the agent_state C library.
//
// One persistent, transactional JSON state value per agent, stored in an SQLite file or on a
// PostgreSQL server (a `postgresql://` URI as the path, with Options::agent_id):
// `get_state()` reads it, `set_state(patch)` merges an RFC 7396 merge patch into it,
// `replace_state(next)` replaces it, and hooks observe every committed change. Every commit
// gives the state the next version: `get_state_versioned()` and `set_state_if(expected, patch)`
// make read-modify-write loops that never overwrite another writer's change, `set_validator()`
// gates changes before they commit, and the opt-in change log (Options::change_log) feeds
// `poll()`, `changes_since()`, `state_at()` and `restore()`.
//
// Usage: compile with `-std=c++17` (or later), put both this directory and the C header's
// directory (`include/`) on the include path, and link with
// `-lagent_state -lpthread`.
//
//     agent_state::Options options;
//     options.initial_state = R"({"status":"idle"})";
//     agent_state::Agent agent("conversation.db", options);
//     agent.set_state(R"({"status":"processing"})");  // returns the merged state as JSON text
//
// Conventions:
// - All state, patches and options are JSON text (UTF-8). The wrapper never parses JSON itself;
//   the library validates every input and every answer. Outputs are compact JSON text with the
//   members in their stored order.
// - Every failure is reported by throwing agent_state::Error (status + message), except that an
//   exception thrown by one of your hooks is rethrown as is (see Agent::on_state_changed). An
//   exception thrown by your validator rejects the change: the call throws
//   Error(Status::rejected) with the validator's exception nested in it (see
//   Agent::set_validator).
// - Thread-safety: one Agent may be used from many threads at once (all member functions but
//   the move operations and the destructor); the C library serializes the calls. Moving or
//   destroying an Agent while another thread uses it is a data race, as for any C++ object.

#ifndef AGENT_STATE_HPP
#define AGENT_STATE_HPP

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

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
    /// The store failed: I/O, read-only store, corrupt or foreign file, newer schema; a
    /// PostgreSQL error other than an unreachable server (Status::unavailable).
    storage = AGENT_ERR_STORAGE,
    /// Another connection held what the call needs (the write lock; on PostgreSQL the agent's
    /// row or every pooled connection) longer than `busy_timeout_ms`, or the call came from
    /// inside this Agent's own initial-state hook.
    busy = AGENT_ERR_BUSY,
    /// A hook failed. The wrapper rethrows your hook's own exception instead, so you see this
    /// status only for hooks registered through the raw C API.
    hook = AGENT_ERR_HOOK,
    /// A compare-and-set (set_state_if, replace_state_if) found the state at another version
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

/// Quotes `text` as a JSON string literal (with the surrounding quotes), escaping `"`, `\` and
/// control characters, for building patches and options safely:
/// `agent.set_state("{\"name\":" + agent_state::json_quote(name) + "}")`.
/// Bytes of 0x80 and above are copied as they are: `text` should be UTF-8 (the library refuses
/// invalid UTF-8 with Status::json).
inline std::string json_quote(std::string_view text) {
    static const char hex[] = "0123456789abcdef";
    std::string out;
    out.reserve(text.size() + 2);
    out.push_back('"');
    for (char ch : text) {
        const auto c = static_cast<unsigned char>(ch);
        switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default:
            if (c < 0x20 || c == 0x7f) {
                out += "\\u00";
                out.push_back(hex[c >> 4]);
                out.push_back(hex[c & 0xf]);
            } else {
                out.push_back(ch);
            }
        }
    }
    out.push_back('"');
    return out;
}

/// Move-only owner of an AgentBuffer: a read-only view of library-owned JSON text (followed by a
/// NUL byte), released with `agent_buffer_free` on destruction. The bytes never change while
/// the Buffer lives, even if the state changes or the Agent is closed.
/// Thread-safety: a Buffer may be read from many threads; it is not synchronized otherwise.
class Buffer {
public:
    /// An empty buffer.
    Buffer() noexcept = default;

    /// Takes ownership of `raw`, a buffer filled by the library (or empty).
    explicit Buffer(AgentBuffer raw) noexcept : buf_(raw) {}

    /// Moves the bytes out of `other`, which becomes empty.
    Buffer(Buffer &&other) noexcept : buf_(other.buf_) { other.buf_ = AgentBuffer{nullptr, 0, nullptr}; }

    /// Releases this buffer's bytes and takes `other`'s.
    Buffer &operator=(Buffer &&other) noexcept {
        if (this != &other) {
            reset();
            buf_ = other.buf_;
            other.buf_ = AgentBuffer{nullptr, 0, nullptr};
        }
        return *this;
    }

    Buffer(const Buffer &) = delete;
    Buffer &operator=(const Buffer &) = delete;

    /// Releases the bytes.
    ~Buffer() { reset(); }

    /// Releases the bytes now; the buffer becomes empty.
    void reset() noexcept { agent_buffer_free(&buf_); }

    /// The JSON text (empty for an empty buffer).
    std::string_view view() const noexcept {
        return buf_.data == nullptr
                   ? std::string_view()
                   : std::string_view(reinterpret_cast<const char *>(buf_.data), buf_.len);
    }

    /// The JSON text as a NUL-terminated C string (`""` for an empty buffer).
    const char *c_str() const noexcept {
        return buf_.data == nullptr ? "" : reinterpret_cast<const char *>(buf_.data);
    }

    /// The first byte, or nullptr for an empty buffer.
    const char *data() const noexcept { return reinterpret_cast<const char *>(buf_.data); }

    /// The number of bytes, not counting the NUL terminator.
    std::size_t size() const noexcept { return buf_.len; }

    /// True when the buffer holds nothing.
    bool empty() const noexcept { return buf_.data == nullptr; }

    /// A copy of the JSON text.
    std::string str() const { return std::string(view()); }

    /// The JSON text, as view().
    operator std::string_view() const noexcept { return view(); }

    /// Releases the current bytes and returns the raw buffer for a C call to fill.
    AgentBuffer *out() noexcept {
        reset();
        return &buf_;
    }

    /// Gives up ownership: the caller must pass the result to `agent_buffer_free`.
    AgentBuffer release() noexcept {
        AgentBuffer raw = buf_;
        buf_ = AgentBuffer{nullptr, 0, nullptr};
        return raw;
    }

private:
    AgentBuffer buf_{nullptr, 0, nullptr};
};

/// How durable a commit is (the `synchronous` open option).
enum class Synchronous {
    /// fsync on every commit: an acknowledged write survives power loss (the default).
    full,
    /// fsync at checkpoints only: survives a crash of the process, may lose the last commits on
    /// power loss; faster.
    normal,
};

/// The `change_log` open option: switches the store's change log on with a retention, or off.
/// The setting is recorded in the store file, so every handle on it logs its changes (or none
/// does). Build it with ChangeLog::last(n), ChangeLog::seconds(t) or ChangeLog::disabled(), or
/// set the members: with the log on, at least one of `keep_last` and `keep_seconds` must be set
/// (the library refuses the option otherwise, with Status::invalid_argument).
struct ChangeLog {
    /// Keep the last `keep_last` changes (at least 1).
    std::optional<std::uint64_t> keep_last;
    /// Keep the changes of the last `keep_seconds` seconds (at least 1; the newest change is
    /// always kept).
    std::optional<std::uint64_t> keep_seconds;
    /// True: switch the log off and drop what it holds (`"change_log": false`); the retention
    /// members must then be unset.
    bool off = false;

    /// The log on, keeping the last `n` changes.
    static ChangeLog last(std::uint64_t n) {
        ChangeLog log;
        log.keep_last = n;
        return log;
    }

    /// The log on, keeping the changes of the last `t` seconds.
    static ChangeLog seconds(std::uint64_t t) {
        ChangeLog log;
        log.keep_seconds = t;
        return log;
    }

    /// The log off (and dropped).
    static ChangeLog disabled() {
        ChangeLog log;
        log.off = true;
        return log;
    }
};

/// Open options; every member left unset takes the library's default. to_json() builds the
/// options JSON the C library takes.
struct Options {
    /// JSON text of a plain object: the state shown while nothing is stored (default `{}`).
    /// It must be exactly one JSON value; the library checks the rest (object, codec, size).
    std::optional<std::string> initial_state;
    /// The largest encoded state (and input document) accepted, in bytes: 2 to 1000000000
    /// (default 2097152).
    std::optional<std::uint64_t> max_value_bytes;
    /// Commit durability (default Synchronous::full).
    std::optional<Synchronous> synchronous;
    /// How long a call waits for what another connection holds, in milliseconds: 0 to
    /// 2147483647 (default 5000; 0 fails at once with Status::busy): SQLite's write lock; on
    /// PostgreSQL the agent's row, a table lock or a pooled connection. It never bounds how
    /// long an uncontended statement takes.
    std::optional<std::uint64_t> busy_timeout_ms;
    /// PostgreSQL: how long the server may take to answer, in milliseconds: 1 to 2147483647
    /// (default 10000). A connection attempt gets this long, a statement `busy_timeout_ms +
    /// server_timeout_ms`; past it (a frozen or partitioned server) the call fails with
    /// Status::unavailable. Accepted and unused on SQLite.
    std::optional<std::uint64_t> server_timeout_ms;
    /// Open without writing: the store must exist, and every write fails with Status::storage.
    bool read_only = false;
    /// The store's change log (see ChangeLog); unset leaves the store's setting as it is (off
    /// for a new store).
    std::optional<ChangeLog> change_log;
    /// Which agent of the store: UTF-8, 1 to 255 bytes, no NUL byte. Required on PostgreSQL.
    /// On a SQLite file, unset is the file's single agent; with an id, one file holds many
    /// isolated agents (state, version, change log, hooks), and the Agents with an id in one
    /// process share one connection per file.
    std::optional<std::string> agent_id;
    /// PostgreSQL: the most connections this process keeps to the server, shared by all its
    /// Agents on it: 1 to 1000 (default 4; the pool has the largest size any open asked for).
    /// A SQLite file does not use it.
    std::optional<std::uint64_t> max_connections;

    /// The options as the JSON object `agent_open` takes (`{}` when nothing is set).
    /// Throws Error(Status::json) when `initial_state` is not exactly one JSON value (so that
    /// it can never inject other options) or holds a NUL byte, and
    /// Error(Status::invalid_argument) when `change_log` is off but has a retention, or
    /// `agent_id` is not valid UTF-8 or holds a NUL byte (the library checks its length).
    std::string to_json() const;
};

/// The id of an `on_state_changed` hook on one Agent (never 0).
using HookId = std::uint64_t;

/// An `on_state_changed` hook: `next` is the state after the change, `prev` the state before it
/// (the initial state when nothing was stored), `patch` the merge patch as applied by
/// `set_state`, or `std::nullopt` for `replace_state`. The views are valid only during the call:
/// copy what you keep.
using StateChangedFn = std::function<void(std::string_view next, std::string_view prev,
                                          std::optional<std::string_view> patch)>;

/// An initial-state hook: returns the JSON text of a plain object, the state shown while
/// nothing is stored.
using InitialStateFn = std::function<std::string()>;

/// A state together with its version: the number of changes committed to the store (0 while
/// nothing is stored; `state` is then the initial state).
struct Versioned {
    /// The state, as compact JSON text.
    std::string state;
    /// Its version.
    std::uint64_t version = 0;
};

/// One change, as Agent::on_change hooks and the validator see it. The views are valid only
/// during the call: copy what you keep.
struct Change {
    /// The state after the change (for the validator: the state the change would commit).
    std::string_view next;
    /// The state before the change (the initial state when nothing was stored).
    std::string_view prev;
    /// The merge patch as applied by set_state (and set_state_if); std::nullopt for a
    /// replacement (replace_state, replace_state_if, restore).
    std::optional<std::string_view> patch;
    /// The state's version after the change (for the validator: the version it would get).
    std::uint64_t version = 0;
};

/// An Agent::on_change hook: sees each committed change, with its version.
using ChangeFn = std::function<void(const Change &change)>;

/// A validator (Agent::set_validator): returns normally to let the change commit, throws to
/// reject it.
using ValidatorFn = std::function<void(const Change &change)>;

namespace detail {

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

/// Closed, moved-from or never-opened Agent.
[[noreturn]] inline void throw_closed(const char *what) {
    throw Error(Status::bad_handle,
                std::string("agent_state::Agent::") + what +
                    ": the Agent is closed (closed explicitly, by a hook, or moved from)");
}

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

/// A pointer the C library accepts for `text` (never NULL, so that empty text is reported as
/// malformed JSON rather than as a NULL argument).
inline const std::uint8_t *bytes(std::string_view text) noexcept {
    return reinterpret_cast<const std::uint8_t *>(text.empty() ? "" : text.data());
}

/// Throws Error(Status::json) unless `text` is exactly one JSON value, surrounded by optional
/// whitespace, with no NUL byte. Only the structure is checked (strings, brackets, top level);
/// the library parses it for real. This is what keeps embedded JSON from injecting members.
inline void check_one_value(std::string_view text, const char *what) {
    auto fail = [&](const char *why) {
        throw Error(Status::json, std::string("agent_state::Options: ") + what + " " + why);
    };
    if (text.find('\0') != std::string_view::npos) {
        fail("holds a NUL byte");
    }
    auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
    std::size_t i = 0;
    const std::size_t n = text.size();
    while (i < n && is_space(text[i])) ++i;
    if (i == n) {
        fail("is empty, not a JSON value");
    }
    auto skip_string = [&]() {  // text[i] == '"'
        for (++i; i < n; ++i) {
            if (text[i] == '\\') {
                ++i;
            } else if (text[i] == '"') {
                ++i;
                return;
            }
        }
        fail("holds an unterminated string");
    };
    const char first = text[i];
    if (first == '{' || first == '[') {
        std::string open;  // the brackets still open
        while (i < n) {
            const char c = text[i];
            if (c == '"') {
                skip_string();
                continue;
            }
            if (c == '{' || c == '[') {
                open.push_back(c);
            } else if (c == '}' || c == ']') {
                if (open.empty() || (c == '}') != (open.back() == '{')) {
                    fail("has mismatched brackets");
                }
                open.pop_back();
                if (open.empty()) {
                    ++i;
                    break;
                }
            }
            ++i;
        }
        if (!open.empty()) {
            fail("is not complete (unclosed bracket)");
        }
    } else if (first == '"') {
        skip_string();
    } else {
        // A number or a literal: a run of characters that cannot start anything else.
        while (i < n && !is_space(text[i]) &&
               std::string_view(",:{}[]\"").find(text[i]) == std::string_view::npos) {
            ++i;
        }
    }
    while (i < n && is_space(text[i])) ++i;
    if (i != n) {
        fail("is not exactly one JSON value (text follows it)");
    }
}

/// True when `text` is valid UTF-8 (shortest forms, no surrogates, at most U+10FFFF).
inline bool valid_utf8(std::string_view text) noexcept {
    std::size_t i = 0;
    const std::size_t n = text.size();
    while (i < n) {
        const auto c = static_cast<unsigned char>(text[i]);
        std::size_t len = 0;
        std::uint32_t cp = 0;
        if (c < 0x80) {
            ++i;
            continue;
        } else if (c >= 0xc2 && c <= 0xdf) {
            len = 2;
            cp = c & 0x1fU;
        } else if (c >= 0xe0 && c <= 0xef) {
            len = 3;
            cp = c & 0x0fU;
        } else if (c >= 0xf0 && c <= 0xf4) {
            len = 4;
            cp = c & 0x07U;
        } else {
            return false;
        }
        if (n - i < len) return false;
        for (std::size_t k = 1; k < len; ++k) {
            const auto cc = static_cast<unsigned char>(text[i + k]);
            if ((cc & 0xc0U) != 0x80U) return false;
            cp = (cp << 6) | (cc & 0x3fU);
        }
        if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
            (len == 4 && (cp < 0x10000 || cp > 0x10ffff))) {
            return false;
        }
        i += len;
    }
    return true;
}

/// Throws Error(Status::invalid_argument) when `text`, about to be passed as a C string, holds
/// a NUL byte (the C library would silently see a truncated string).
inline void check_c_string(std::string_view text, const char *what, Status status) {
    if (text.find('\0') != std::string_view::npos) {
        throw Error(status, std::string("agent_state::Agent::open: ") + what + " holds a NUL byte");
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

/// Finalizer of an InitialStateFn registration (called exactly once by the library).
inline void agent_state_cpp_free_initial_state(void *user_data) noexcept {
    delete static_cast<InitialStateFn *>(user_data);
}

}  // extern "C"

}  // namespace detail

inline std::string Options::to_json() const {
    std::string out = "{";
    auto member = [&out](const char *name) {
        if (out.size() > 1) out.push_back(',');
        out += json_quote(name);
        out.push_back(':');
    };
    if (initial_state) {
        detail::check_one_value(*initial_state, "initial_state");
        member("initial_state");
        out += *initial_state;
    }
    if (max_value_bytes) {
        member("max_value_bytes");
        out += std::to_string(*max_value_bytes);
    }
    if (synchronous) {
        member("synchronous");
        out += json_quote(*synchronous == Synchronous::normal ? "normal" : "full");
    }
    if (busy_timeout_ms) {
        member("busy_timeout_ms");
        out += std::to_string(*busy_timeout_ms);
    }
    if (server_timeout_ms) {
        member("server_timeout_ms");
        out += std::to_string(*server_timeout_ms);
    }
    if (read_only) {
        member("read_only");
        out += "true";
    }
    if (change_log) {
        member("change_log");
        if (change_log->off) {
            if (change_log->keep_last || change_log->keep_seconds) {
                throw Error(Status::invalid_argument,
                            "agent_state::Options: change_log is off but has a retention");
            }
            out += "false";
        } else {
            out.push_back('{');
            if (change_log->keep_last) {
                out += "\"keep_last\":" + std::to_string(*change_log->keep_last);
            }
            if (change_log->keep_seconds) {
                if (change_log->keep_last) out.push_back(',');
                out += "\"keep_seconds\":" + std::to_string(*change_log->keep_seconds);
            }
            out.push_back('}');
        }
    }
    if (agent_id) {
        if (agent_id->find('\0') != std::string::npos || !detail::valid_utf8(*agent_id)) {
            throw Error(Status::invalid_argument,
                        "agent_state::Options: agent_id must be UTF-8 without NUL bytes");
        }
        member("agent_id");
        out += json_quote(*agent_id);
    }
    if (max_connections) {
        member("max_connections");
        out += std::to_string(*max_connections);
    }
    out.push_back('}');
    return out;
}

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

/// One open agent store: a move-only RAII owner of a C handle, closed by close() or by the
/// destructor.
///
/// Thread-safety: every member function except the move operations and the destructor may be
/// called from many threads at once on one Agent; the C library serializes the calls, and
/// concurrent set_state calls never lose each other's updates. A call racing with close() on
/// another thread either completes or throws Error(Status::bad_handle).
///
/// Hooks: `on_state_changed` hooks run on the thread that made the change, after the commit,
/// with no library lock held, one at a time and in commit order per Agent (each call's `prev`
/// is the previous call's `next`), in registration order. They may read and write this Agent
/// (a nested change is delivered after the running hook returns), register or remove hooks, and
/// close the Agent, but must not block waiting for another thread's change to the same Agent.
/// An exception thrown by a hook never crosses the C library: it is caught, the remaining hooks
/// still run, and the first such exception is rethrown from the set_state/replace_state call
/// that triggered the delivery (the outermost one, for nested changes), after the commit: the
/// change is stored all the same. The same holds for every call that writes (set_state_if,
/// replace_state_if, restore) and for poll(), which delivers other handles' changes.
///
/// Versions and the change log: every commit gives the state the next version (1 for a store's
/// first write). With the change log on (Options::change_log), poll() delivers to this Agent's
/// hooks the changes that other Agents and processes committed, and changes_since(),
/// state_at() and restore() read the retained history.
class Agent {
public:
    /// An Agent that is not open: every call but close() throws Error(Status::bad_handle).
    Agent() noexcept = default;

    /// Opens (creating when absent) the store at `path` (`":memory:"`: a private in-memory
    /// store; a `postgres://` or `postgresql://` URI in libpq's syntax: a PostgreSQL server,
    /// with Options::agent_id required, tables created on first open, no TLS in this build)
    /// with `options`. Throws Error: Status::invalid_argument (empty path or a NUL byte in it,
    /// bad option, no agent_id for PostgreSQL), Status::json / codec / too_large (the initial
    /// state), Status::storage (cannot open or create, not an agent store, newer schema),
    /// Status::busy, Status::unavailable (the server cannot be reached within
    /// `server_timeout_ms`).
    explicit Agent(std::string_view path, const Options &options = Options())
        : Agent(open(path, options)) {}

    /// Opens the store at `path` with `options` (as the constructor).
    static Agent open(std::string_view path, const Options &options = Options()) {
        return open_raw(path, options.to_json().c_str());
    }

    /// Opens the store at `path` with `options_json`, the JSON object `agent_open` takes
    /// (keys initial_state, max_value_bytes, synchronous, busy_timeout_ms, server_timeout_ms, read_only,
    /// change_log, agent_id, max_connections).
    /// Throws as the constructor; malformed options are Status::json, unknown or ill-typed
    /// ones Status::invalid_argument.
    static Agent open(std::string_view path, std::string_view options_json) {
        detail::check_c_string(options_json, "options_json", Status::json);
        return open_raw(path, std::string(options_json).c_str());
    }

    /// Takes ownership of `handle`, an open handle from `agent_open` (or from release()).
    static Agent adopt(AgentHandle handle) noexcept {
        Agent agent;
        agent.handle_.store(handle);
        return agent;
    }

    /// Takes over `other`'s handle; `other` is left closed.
    Agent(Agent &&other) noexcept : handle_(other.handle_.exchange(0)) {}

    /// Closes this Agent (ignoring errors), then takes over `other`'s handle; `other` is left
    /// closed.
    Agent &operator=(Agent &&other) noexcept {
        if (this != &other) {
            close_noexcept();
            handle_.store(other.handle_.exchange(0));
        }
        return *this;
    }

    Agent(const Agent &) = delete;
    Agent &operator=(const Agent &) = delete;

    /// Closes the Agent (as close(), ignoring errors).
    ~Agent() { close_noexcept(); }

    /// Closes the store and unregisters every hook. Idempotent: closing a closed (or
    /// moved-from) Agent does nothing. May be called from inside one of this Agent's
    /// on_state_changed hooks; from inside its initial-state hook it throws
    /// Error(Status::busy) and the Agent stays open.
    void close() {
        const AgentHandle h = handle_.load();
        if (h == 0) {
            return;
        }
        detail::begin_call();
        const AgentStatus status = agent_close(h);
        if (status == AGENT_OK || status == AGENT_ERR_BAD_HANDLE) {
            AgentHandle expected = h;
            handle_.compare_exchange_strong(expected, 0);
            return;
        }
        detail::check(status);
    }

    /// True until the Agent is closed or moved from.
    bool is_open() const noexcept { return handle_.load() != 0; }

    /// True until the Agent is closed or moved from.
    explicit operator bool() const noexcept { return is_open(); }

    /// The C handle (0 when closed), for use with the C API; the Agent keeps owning it.
    AgentHandle handle() const noexcept { return handle_.load(); }

    /// Gives up ownership of the C handle, which the caller must close with `agent_close`;
    /// the Agent is left closed.
    AgentHandle release() noexcept { return handle_.exchange(0); }

    /// The state as compact JSON text: the stored object, or the initial state while nothing is
    /// stored (reading never stores it). Throws Error (bad_handle, storage, busy; json, codec,
    /// too_large, invalid_argument for a bad answer of the initial-state hook) or rethrows what
    /// the initial-state hook threw.
    std::string get_state() const { return get_state_buffer().str(); }

    /// As get_state(), without copying: the Buffer shares the library's immutable snapshot.
    Buffer get_state_buffer() const {
        const AgentHandle h = live("get_state");
        Buffer out;
        detail::begin_call();
        detail::check(agent_get_state(h, out.out()));
        return out;
    }

    /// Merges `patch`, the JSON text of an object, into the state by RFC 7396 (members merge
    /// recursively, `null` deletes, anything else replaces) in one transaction, then runs the
    /// on_state_changed hooks; returns the full merged state as compact JSON text.
    /// Throws Error: invalid_argument (not an object), bad_handle, json, codec, too_large,
    /// storage (also: read-only), busy, hook; nothing was written then. If a hook threw, its
    /// exception is rethrown here after the commit (the change is stored).
    std::string set_state(std::string_view patch) { return set_state_buffer(patch).str(); }

    /// As set_state(), without copying the merged state: the Buffer shares the library's
    /// immutable snapshot.
    Buffer set_state_buffer(std::string_view patch) {
        const AgentHandle h = live("set_state");
        Buffer out;
        detail::begin_call();
        detail::check(agent_set_state(h, detail::bytes(patch), patch.size(), out.out()));
        return out;
    }

    /// Replaces the state with `next`, the JSON text of an object (nothing of the previous state
    /// survives); returns it as stored (compact JSON text). Same errors and hook rules as
    /// set_state(); hooks see `patch == std::nullopt`.
    std::string replace_state(std::string_view next) { return replace_state_buffer(next).str(); }

    /// As replace_state(), without copying the new state: the Buffer shares the library's
    /// immutable snapshot.
    Buffer replace_state_buffer(std::string_view next) {
        const AgentHandle h = live("replace_state");
        Buffer out;
        detail::begin_call();
        detail::check(agent_replace_state(h, detail::bytes(next), next.size(), out.out()));
        return out;
    }

    /// Registers `fn` to run after every committed change made through this Agent (see the
    /// class comment for the delivery rules); returns its id, for remove_hook(). The function
    /// is destroyed when the hook is removed or the Agent closed, once no delivery runs it.
    /// It may be called from any thread that writes, so it must be safe to run there.
    /// Throws Error: invalid_argument (empty `fn`), bad_handle.
    HookId on_state_changed(StateChangedFn fn) {
        const AgentHandle h = live("on_state_changed");
        if (!fn) {
            throw Error(Status::invalid_argument,
                        "agent_state::Agent::on_state_changed: the function is empty");
        }
        auto *heap = new StateChangedFn(std::move(fn));
        HookId id = 0;
        // On failure the library calls the finalizer right away: `heap` is not leaked.
        detail::begin_call();
        detail::check(agent_on_state_changed(h, detail::agent_state_cpp_state_changed, heap,
                                             detail::agent_state_cpp_free_state_changed, &id));
        return id;
    }

    /// As on_state_changed(), returning a Subscription that removes the hook when destroyed.
    [[nodiscard]] Subscription subscribe(StateChangedFn fn) {
        const HookId id = on_state_changed(std::move(fn));
        return Subscription(handle_.load(), id);
    }

    /// Unregisters hook `id`: it is not called for changes delivered later (a delivery already
    /// running on another thread may still be inside it). May be called from inside a hook.
    /// Throws Error: invalid_argument (no such hook on this Agent), bad_handle.
    void remove_hook(HookId id) {
        const AgentHandle h = live("remove_hook");
        detail::begin_call();
        detail::check(agent_remove_hook(h, id));
    }

    /// Sets the initial-state hook: `fn` supplies the JSON text of a plain object every time a
    /// default state is needed (by get_state while nothing is stored, and by the first write);
    /// it takes precedence over Options::initial_state, and its answer is checked like any
    /// input. An empty `fn` removes the hook. `fn` runs with the Agent's lock held: calling this
    /// Agent from inside it throws Error(Status::busy) (other Agents may be used). What `fn`
    /// throws is rethrown from the call that needed the initial state; nothing is written then.
    /// Throws Error: bad_handle.
    void set_initial_state_hook(InitialStateFn fn) {
        const AgentHandle h = live("set_initial_state_hook");
        detail::begin_call();
        if (!fn) {
            detail::check(agent_set_initial_state_hook(h, nullptr, nullptr, nullptr));
            return;
        }
        auto *heap = new InitialStateFn(std::move(fn));
        // On failure the library calls the finalizer right away: `heap` is not leaked.
        detail::check(agent_set_initial_state_hook(h, detail::agent_state_cpp_initial_state, heap,
                                                   detail::agent_state_cpp_free_initial_state));
    }

    /// Removes the initial-state hook (Options::initial_state applies again).
    void clear_initial_state_hook() { set_initial_state_hook(InitialStateFn()); }

    // -----------------------------------------------------------------------------------------
    // Versions and compare-and-set.

    /// The state (as get_state()) and its version, read together: the number of changes
    /// committed to the store (0 while nothing is stored; the state is then the initial
    /// state). Throws as get_state().
    Versioned get_state_versioned() const {
        const AgentHandle h = live("get_state_versioned");
        Buffer out;
        std::uint64_t version = 0;
        detail::begin_call();
        detail::check(agent_get_state_versioned(h, out.out(), &version));
        return Versioned{out.str(), version};
    }

    /// Compare-and-set merge: set_state(patch), but only if the store is still at version
    /// `expected` (0: nothing stored yet) when the write transaction starts; returns the merged
    /// state and its new version. Otherwise throws Error(Status::conflict) and writes nothing:
    /// read again with get_state_versioned() and retry. Other errors and the hook rules as
    /// set_state().
    Versioned set_state_if(std::uint64_t expected, std::string_view patch) {
        const AgentHandle h = live("set_state_if");
        Buffer out;
        std::uint64_t version = 0;
        detail::begin_call();
        detail::check(agent_set_state_if(h, expected, detail::bytes(patch), patch.size(),
                                         out.out(), &version));
        return Versioned{out.str(), version};
    }

    /// Compare-and-set replacement: replace_state(next), but only if the store is still at
    /// version `expected`; returns the new state and its version. Otherwise throws
    /// Error(Status::conflict) and writes nothing. Other errors and the hook rules as
    /// replace_state().
    Versioned replace_state_if(std::uint64_t expected, std::string_view next) {
        const AgentHandle h = live("replace_state_if");
        Buffer out;
        std::uint64_t version = 0;
        detail::begin_call();
        detail::check(agent_replace_state_if(h, expected, detail::bytes(next), next.size(),
                                             out.out(), &version));
        return Versioned{out.str(), version};
    }

    // -----------------------------------------------------------------------------------------
    // Hooks with versions and the validator.

    /// As on_state_changed(), for a hook that takes the whole Change (with its version). The
    /// delivery and exception rules are the same; returns the hook's id, for remove_hook().
    /// Throws Error: invalid_argument (empty `fn`), bad_handle.
    HookId on_change(ChangeFn fn) {
        const AgentHandle h = live("on_change");
        if (!fn) {
            throw Error(Status::invalid_argument,
                        "agent_state::Agent::on_change: the function is empty");
        }
        auto *heap = new ChangeFn(std::move(fn));
        HookId id = 0;
        // On failure the library calls the finalizer right away: `heap` is not leaked.
        detail::begin_call();
        detail::check(agent_on_state_changed(h, detail::agent_state_cpp_change, heap,
                                             detail::agent_state_cpp_free_change, &id));
        return id;
    }

    /// As on_change(), returning a Subscription that removes the hook when destroyed.
    [[nodiscard]] Subscription subscribe_changes(ChangeFn fn) {
        const HookId id = on_change(std::move(fn));
        return Subscription(handle_.load(), id);
    }

    /// Sets the validator, which gates every change made through this Agent (set_state,
    /// replace_state, restore, and the _if forms; not changes made through other Agents). It
    /// runs inside the write transaction, after the merge and the codec and size checks and
    /// before the commit, on the writing thread; `change` is the change about to commit
    /// (`version` is the version it would get).
    ///
    /// To let the change commit, return normally. To reject it, throw: nothing is written, no
    /// on_state_changed hook runs, and the writing call throws Error(Status::rejected) (never
    /// your exception itself: the status says what happened to the change) whose what() is the
    /// library's message, which includes your exception's what() (for an exception that is not
    /// a std::exception, a fixed text). Your exception is nested in the Error
    /// (std::throw_with_nested): `std::rethrow_if_nested(error)` rethrows it.
    ///
    /// `fn` runs with the Agent's lock held and the store's write lock taken: keep it quick.
    /// Calling this Agent from inside it throws Error(Status::busy) (other Agents may be used).
    /// An empty `fn` removes the validator. The previous validator's function is destroyed
    /// when it is replaced or removed, or when the Agent is closed.
    /// Throws Error: bad_handle, busy (from inside this Agent's initial-state hook or
    /// validator).
    void set_validator(ValidatorFn fn) {
        const AgentHandle h = live("set_validator");
        detail::begin_call();
        if (!fn) {
            detail::check(agent_set_validator(h, nullptr, nullptr, nullptr));
            return;
        }
        auto *heap = new ValidatorFn(std::move(fn));
        // On failure the library calls the finalizer right away: `heap` is not leaked.
        detail::check(agent_set_validator(h, detail::agent_state_cpp_validate, heap,
                                          detail::agent_state_cpp_free_change));
    }

    /// Removes the validator: every change commits again.
    void clear_validator() { set_validator(ValidatorFn()); }

    // -----------------------------------------------------------------------------------------
    // The change log (Options::change_log).

    /// Delivers to this Agent's hooks, on this thread and in commit order, every change that
    /// other Agents or processes committed since this Agent's last delivery, each once, with
    /// its real prev, next, patch and version; returns how many it delivered. Changes committed
    /// before this Agent was opened are not delivered; a write through this Agent first
    /// delivers the pending ones, so its hooks always see one ordered history. Call it when
    /// convenient (a timer, an event loop): the library starts no thread.
    /// Throws Error: invalid_argument (the change log is off), bad_handle, storage, busy;
    /// gap: the log's retention dropped changes before this Agent delivered them: they were
    /// skipped and the rest delivered (reported once: the next poll() goes on from the current
    /// state). What a hook throws is rethrown after all deliveries, as for set_state().
    std::size_t poll() {
        const AgentHandle h = live("poll");
        std::size_t delivered = 0;
        detail::begin_call();
        detail::check(agent_poll(h, &delivered));
        return delivered;
    }

    /// The changes committed after version `after` (by any Agent or process), oldest first,
    /// as the JSON text of an array:
    /// `[{"version":N,"at":MS,"patch":{...}|null,"next":{...}},...]` (`at`: milliseconds since
    /// the Unix epoch; `patch` null for a replacement); `[]` when `after` is the current
    /// version. For a client that reconnects: send it the changes since the version it has.
    /// Throws Error: invalid_argument (the change log is off, `after` is in the future), gap
    /// (the log no longer holds all of them: send the whole state instead), bad_handle,
    /// storage.
    std::string changes_since(std::uint64_t after) const {
        const AgentHandle h = live("changes_since");
        Buffer out;
        detail::begin_call();
        detail::check(agent_changes_since(h, after, out.out()));
        return out.str();
    }

    /// The state at `version`, as compact JSON text: the current one, one the change log
    /// retains, or 0 (the initial state). Throws Error: gap (not retained, or the log is off),
    /// invalid_argument (a future version), bad_handle, storage.
    std::string state_at(std::uint64_t version) const {
        const AgentHandle h = live("state_at");
        Buffer out;
        detail::begin_call();
        detail::check(agent_get_state_at(h, version, out.out()));
        return out.str();
    }

    /// Point-in-time recovery: replaces the state with the state at `version` (as state_at()
    /// finds it), as a new change with a new version; hooks see it as a replacement and the
    /// validator gates it. Returns the restored state and its new version. Throws what
    /// state_at() and replace_state() throw.
    Versioned restore(std::uint64_t version) {
        const AgentHandle h = live("restore");
        Buffer out;
        std::uint64_t new_version = 0;
        detail::begin_call();
        detail::check(agent_restore_state(h, version, out.out(), &new_version));
        return Versioned{out.str(), new_version};
    }

private:
    static Agent open_raw(std::string_view path, const char *options_json) {
        detail::check_c_string(path, "path", Status::invalid_argument);
        const std::string c_path(path);
        AgentHandle h = 0;
        detail::begin_call();
        detail::check(agent_open(c_path.c_str(), options_json, &h));
        return adopt(h);
    }

    AgentHandle live(const char *what) const {
        const AgentHandle h = handle_.load();
        if (h == 0) {
            detail::throw_closed(what);
        }
        return h;
    }

    void close_noexcept() noexcept {
        try {
            close();
        } catch (...) {
            // Destructors and move assignment must not throw; the only failure left is a close
            // from inside this Agent's own initial-state hook.
        }
    }

    std::atomic<AgentHandle> handle_{0};
};

}  // namespace agent_state

#endif  // AGENT_STATE_HPP
