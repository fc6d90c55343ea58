// agent_state/agent.hpp: Agent, one open agent store (and Versioned, a state with its
// version; StoredState, a state with its schema version).
// A part of the C++ wrapper: include "agent_state.hpp", which includes them all.

#ifndef AGENT_STATE_HPP_AGENT
#define AGENT_STATE_HPP_AGENT

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "agent_state.h"
#include "buffer.hpp"
#include "hooks.hpp"
#include "options.hpp"
#include "status.hpp"
#include "text.hpp"

namespace agent_state {

/// A state together with its version: the number of changes committed to the store (0 while
/// nothing is stored; `state` is then the initial state).
struct Versioned {
    /// The state, as compact JSON text.
    std::string state;
    /// Its version.
    std::uint64_t version = 0;
};

/// A state as stored (Agent::state_at_stored): its JSON text and the schema version it was
/// written under.
struct StoredState {
    /// The state, as compact JSON text, as stored (not upgraded).
    std::string state;
    /// The schema version it was written under (Options::schema_version of its writer).
    std::uint32_t schema = 0;
};

namespace detail {

/// Closed, moved-from or never-opened Agent.
[[noreturn]] inline void throw_closed(const char *what) {
    throw Error(Status::bad_handle,
                std::string("agent_state::Agent::") + what +
                    ": the Agent is closed (closed explicitly, by a hook, or moved from)");
}

}  // namespace detail

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
/// Schema versions: an Agent opened with Options::schema_version upgrades an older stored
/// state on first touch (see set_schema_step); every read and write of a state stored under a
/// newer version throws Error(Status::newer_schema), and a failed upgrade
/// Error(Status::migration), nothing written.
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
    /// with Options::agent_id required, tables created on first open, TLS as the URI's `sslmode` asks)
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
    /// (keys initial_state, max_value_bytes, store_max_value_bytes, synchronous,
    /// busy_timeout_ms, server_timeout_ms, read_only, change_log, agent_id, max_connections,
    /// schema_version, schema_steps).
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
    /// stored (reading never stores it; a state stored under an older schema version is
    /// upgraded first, committed as a migration: see set_schema_step). Throws Error
    /// (bad_handle, storage, busy; json, codec, too_large, invalid_argument for a bad answer of
    /// the initial-state hook; newer_schema, migration) or rethrows what the initial-state hook
    /// threw.
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

    /// As on_state_changed(StateChangedFn), for a hook of the reference's shape,
    /// `fn(next, prev)` (onStateChanged(next, prev)), without the patch. A callable that takes
    /// neither (next, prev) nor (next, prev, patch) does not compile.
    template <class F,
              std::enable_if_t<detail::takes_next_prev_v<F> && !detail::takes_next_prev_patch_v<F>,
                               int> = 0>
    HookId on_state_changed(F fn) {
        return on_state_changed(StateChangedFn(
            [fn = std::move(fn)](std::string_view next, std::string_view prev,
                                 std::optional<std::string_view>) mutable { fn(next, prev); }));
    }

    /// As on_state_changed(), returning a Subscription that removes the hook when destroyed.
    [[nodiscard]] Subscription subscribe(StateChangedFn fn) {
        const HookId id = on_state_changed(std::move(fn));
        return Subscription(handle_.load(), id);
    }

    /// As subscribe(StateChangedFn), for a hook `fn(next, prev)`.
    template <class F,
              std::enable_if_t<detail::takes_next_prev_v<F> && !detail::takes_next_prev_patch_v<F>,
                               int> = 0>
    [[nodiscard]] Subscription subscribe(F fn) {
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
    // JSON Patch (RFC 6902) and reads of one place (RFC 6901 JSON Pointers).

    /// Applies `operations`, the JSON text of an RFC 6902 JSON Patch (an array of operations,
    /// each an object with `op`: add, remove, replace, move, copy or test; `path`, a JSON
    /// Pointer, where `/messages/-` is the place after an array's last element, so `add` there
    /// appends; and `value` or `from` as the operation needs), in order, all or nothing, in one
    /// transaction that starts from the latest committed state; then runs the hooks, which see
    /// ChangeKind::json_patch and the operations as the patch. Returns the full new state as
    /// compact JSON text. A patch whose result is the stored state commits nothing.
    /// Throws Error, nothing written: invalid_argument (a malformed patch: not an array, an
    /// unknown op, a missing member, a bad pointer escape such as `~2`; a result that is not an
    /// object), path (a path or `from` that names nothing, an index out of range or with a
    /// leading zero, a move into its own child), test_failed (a `test` that does not hold),
    /// json, codec (also a duplicate member), too_large (the patch or the result), rejected,
    /// and the others of set_state(). The message names the operation at fault (its index from
    /// 0, its op and path). If a hook threw, its exception is rethrown here after the commit.
    /// Thread-safety: as set_state(); concurrent writers never lose each other's updates.
    std::string patch_state(std::string_view operations) {
        return patch_state_buffer(operations).str();
    }

    /// As patch_state(), without copying the new state: the Buffer shares the library's
    /// immutable snapshot.
    Buffer patch_state_buffer(std::string_view operations) {
        const AgentHandle h = live("patch_state");
        Buffer out;
        detail::begin_call();
        detail::check(agent_patch_state(h, detail::bytes(operations), operations.size(), out.out()));
        return out;
    }

    /// Compare-and-set JSON Patch: patch_state(operations), but only if the store is still at
    /// version `expected` (0: nothing stored yet) when the write transaction starts; returns the
    /// new state and its version. Otherwise throws Error(Status::conflict) and writes nothing.
    /// (A `test` operation checks one value; this checks the whole state's version.) Other
    /// errors and the hook rules as patch_state().
    Versioned patch_state_if(std::uint64_t expected, std::string_view operations) {
        const AgentHandle h = live("patch_state_if");
        Buffer out;
        std::uint64_t version = 0;
        detail::begin_call();
        detail::check(agent_patch_state_if(h, expected, detail::bytes(operations),
                                           operations.size(), out.out(), &version));
        return Versioned{out.str(), version};
    }

    /// The value at `pointer`, an RFC 6901 JSON Pointer such as `/messages/0/text` (`""`: the
    /// whole state; `~1` stands for `/` and `~0` for `~` in a name), as compact JSON text. Only
    /// that part is encoded, whatever the state's size. Reads as get_state() does (the initial
    /// state while nothing is stored; never writes).
    /// Throws Error: invalid_argument (not a JSON Pointer: no leading `/`, a bad escape such as
    /// `~2`, invalid UTF-8), path (nothing there: a member that does not exist, an index out of
    /// range or with a leading zero, `-`), and what get_state() throws.
    /// Thread-safety: any thread.
    std::string get_path(std::string_view pointer) const {
        const AgentHandle h = live("get_path");
        Buffer out;
        detail::begin_call();
        detail::check(agent_get_path(h, pointer.empty() ? "" : pointer.data(), pointer.size(),
                                     out.out()));
        return out.str();
    }

    /// The last `n` elements of the array at `pointer` (as get_path()), as the JSON text of an
    /// array, oldest first (all of them when there are fewer). The last message of a
    /// conversation is `get_tail("/messages", 1)`. Throws what get_path() throws, and
    /// Error(Status::invalid_argument) when the value there is not an array.
    /// Thread-safety: any thread.
    std::string get_tail(std::string_view pointer, std::size_t n) const {
        const AgentHandle h = live("get_tail");
        Buffer out;
        detail::begin_call();
        detail::check(agent_get_tail(h, pointer.empty() ? "" : pointer.data(), pointer.size(), n,
                                     out.out()));
        return out.str();
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
    /// replace_state, patch_state, restore, and the _if forms; not changes made through other Agents). It
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
    /// `[{"version":N,"at":MS,"kind":K,"schema":S,"migrated_from":F|null,"patch":...|null,
    /// "next":{...}},...]` (`at`: milliseconds since the Unix epoch; `kind`: `"merge"`,
    /// `"json_patch"`, `"replace"` or `"migration"`; `schema`: the schema version of `next`;
    /// `migrated_from`: for a migration, the version it upgraded from; `patch`: the merge patch
    /// (an object) or the JSON Patch's operations (an array), null for a replacement or a
    /// migration; states as stored: upgrade_state() gives
    /// one in this Agent's shape); `[]` when `after` is the current
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
    /// finds it, upgraded to this Agent's schema version when it was stored under an older
    /// one), as a new change with a new version; hooks see it as a replacement and the
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

    // -----------------------------------------------------------------------------------------
    // Schema versions (Options::schema_version, Options::schema_steps).

    /// Sets the step of code that upgrades a state from schema version `from` to `from + 1`;
    /// an empty `fn` removes it. An Agent opened with Options::schema_version N upgrades a state
    /// stored under an older version on first touch (a read or a write), running the steps
    /// from its version up to N (the declarative ones of Options::schema_steps, these for the
    /// others), then the validator, and commits the result as a migration
    /// (ChangeKind::migration to hooks), once, whichever Agent or process gets there first.
    /// Set the steps right after opening, before the first read or write.
    ///
    /// `fn` runs with the Agent's lock held, inside the write transaction, on the thread that
    /// read or wrote: keep it quick; calling this Agent from inside it throws
    /// Error(Status::busy). What it throws never crosses the C library: the upgrade fails, and
    /// the reading or writing call throws Error(Status::migration) whose message names the
    /// step and includes the exception's what(); nothing is written. The function is
    /// destroyed when the step is replaced or removed, or the Agent closed (or right away if
    /// this call fails). It must be safe to run on every thread that reads or writes.
    /// Throws Error: invalid_argument (`from` not below schema_version(), or a declarative
    /// step from `from` given in the options), bad_handle, busy (from inside this Agent's own
    /// hooks that hold its lock).
    void set_schema_step(std::uint32_t from, SchemaStepFn fn) {
        const AgentHandle h = live("set_schema_step");
        detail::begin_call();
        if (!fn) {
            detail::check(agent_set_schema_step(h, from, nullptr, nullptr, nullptr));
            return;
        }
        auto *heap = new SchemaStepFn(std::move(fn));
        // On failure the library calls the finalizer right away: `heap` is not leaked.
        detail::check(agent_set_schema_step(h, from, detail::agent_state_cpp_schema_step, heap,
                                            detail::agent_state_cpp_free_schema_step));
    }

    /// Removes the step of code from `from` (as set_schema_step(from, {})).
    void clear_schema_step(std::uint32_t from) { set_schema_step(from, SchemaStepFn()); }

    /// The schema version this Agent declares (Options::schema_version; 0 when unset).
    /// Throws Error: bad_handle.
    std::uint32_t schema_version() const {
        const AgentHandle h = live("schema_version");
        std::uint32_t out = 0;
        detail::begin_call();
        detail::check(agent_schema_version(h, &out));
        return out;
    }

    /// The state at `version` as state_at() finds it, but as stored (not upgraded), with the
    /// schema version it was written under (this Agent's own for version 0, the initial
    /// state). Throws as state_at().
    StoredState state_at_stored(std::uint64_t version) const {
        const AgentHandle h = live("state_at_stored");
        Buffer out;
        std::uint32_t schema = 0;
        detail::begin_call();
        detail::check(agent_get_state_at_stored(h, version, out.out(), &schema));
        return StoredState{out.str(), schema};
    }

    /// `state` (the JSON text of an object) stored under schema version `from`, upgraded to
    /// this Agent's schema version by its steps, as compact JSON text; nothing is written. For
    /// a state from the history (state_at_stored(), the `"schema"` of a changes_since() entry)
    /// wanted in the current shape; a state of this Agent's version comes back as it is.
    /// Throws Error: newer_schema (`from` above schema_version()), migration (a step failed,
    /// threw or is missing), json / codec / invalid_argument (the input), bad_handle.
    std::string upgrade_state(std::string_view state, std::uint32_t from) const {
        const AgentHandle h = live("upgrade_state");
        Buffer out;
        detail::begin_call();
        detail::check(agent_upgrade_state(h, detail::bytes(state), state.size(), from, out.out()));
        return out.str();
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

#endif  // AGENT_STATE_HPP_AGENT
