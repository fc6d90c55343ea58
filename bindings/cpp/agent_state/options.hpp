// agent_state/options.hpp: the open options: Synchronous, ChangeLog, Options and
// Options::to_json.
// A part of the C++ wrapper: include "agent_state.hpp", which includes them all.

#ifndef AGENT_STATE_HPP_OPTIONS
#define AGENT_STATE_HPP_OPTIONS

#include <cstdint>
#include <optional>
#include <string>

#include "status.hpp"
#include "text.hpp"

namespace agent_state {

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
    /// This handle's cap on an encoded state (and input document), in bytes: 2 to 1000000000
    /// (unset: the store's cap, see store_max_value_bytes, else 2097152).
    std::optional<std::uint64_t> max_value_bytes;
    /// Records a cap in the store, which every Agent opened later without its own
    /// max_value_bytes uses (this one too): 2 to 1000000000. Refused with read_only.
    std::optional<std::uint64_t> store_max_value_bytes;
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
    /// Hand this agent's hooks the changes other handles and processes commit, as they are
    /// committed, without poll(): the store's watcher (one per store in the process) queues a
    /// poll on the library's worker pool, so the hooks run there, in commit order, each change
    /// once. Needs the change log (else Status::invalid_argument). PostgreSQL: the watcher
    /// listens for notifications (not through a pooler in transaction mode).
    bool watch = false;
    /// The agent's change log (see ChangeLog), recorded with the agent for every handle of
    /// it; unset leaves the agent's setting as it is (off for a new agent). Other agents of
    /// the store keep their own.
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
    /// The schema version of the states this program reads and writes: 0 to 1000000 (unset:
    /// 0). A state stored under an older version is upgraded on first touch (a read or a
    /// write) by the steps (schema_steps, Agent::set_schema_step), once, as a change of its
    /// own that hooks see with ChangeKind::migration; one stored under a newer version is
    /// refused with Status::newer_schema unless read_only (which reads every state as stored).
    std::optional<std::uint32_t> schema_version;
    /// Declarative schema steps, as the JSON text of an array:
    /// `[{"from": K, "ops": [...]}, ...]`, each upgrading a state from version K to K + 1 with
    /// the ops `{"op":"merge","value":{...}}` (RFC 7396, at `"path"` when given),
    /// `{"op":"default","path":P,"value":V}` (set where missing), `"set"`, `"remove"` (where
    /// present), `{"op":"rename","path":P,"to":"name"}` and `{"op":"move","from":P,"path":Q}`
    /// (paths: JSON Pointers to object members). It must be exactly one JSON value; the
    /// library checks the rest (Status::invalid_argument). Agent::set_schema_step fills the
    /// versions these leave out.
    std::optional<std::string> schema_steps;

    /// The options as the JSON object `agent_open` takes (`{}` when nothing is set).
    /// Throws Error(Status::json) when `initial_state` or `schema_steps` is not exactly one
    /// JSON value (so that it can never inject other options) or holds a NUL byte, and
    /// Error(Status::invalid_argument) when `change_log` is off but has a retention, or
    /// `agent_id` is not valid UTF-8 or holds a NUL byte (the library checks its length).
    std::string to_json() const;
};

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
    if (store_max_value_bytes) {
        member("store_max_value_bytes");
        out += std::to_string(*store_max_value_bytes);
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
    if (watch) {
        member("watch");
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
    if (schema_version) {
        member("schema_version");
        out += std::to_string(*schema_version);
    }
    if (schema_steps) {
        detail::check_one_value(*schema_steps, "schema_steps");
        member("schema_steps");
        out += *schema_steps;
    }
    if (max_connections) {
        member("max_connections");
        out += std::to_string(*max_connections);
    }
    out.push_back('}');
    return out;
}

}  // namespace agent_state

#endif  // AGENT_STATE_HPP_OPTIONS
