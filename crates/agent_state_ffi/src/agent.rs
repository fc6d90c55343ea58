//! Opening and closing an agent: `agent_open`, `agent_close`.

use std::ffi::c_char;

use super::args::{open_args, with_agent, NumberOut};
use super::boundary;
use super::handle::{self, AgentHandle};
use super::status::AgentStatus;
use agent_state::Agent;

/// Opens (creating when absent) an agent's store at `path` and stores a new handle in `*out`.
///
/// Arguments: `path` is a NUL-terminated file name (bytes, as the OS takes them; `":memory:"`
/// opens a private in-memory store), or a PostgreSQL connection URI in libpq's syntax starting
/// with `postgres://` or `postgresql://` (`postgresql://user:password@host:port/dbname`, or
/// `postgresql:///dbname?host=/socket/dir&port=5432` for a Unix socket; TLS with libpq's
/// `sslmode`, `sslrootcert`, `sslcert`, `sslkey`: the TLS section of the book's
/// `docs/src/guides/postgresql.md`). `options_json` is NULL for the defaults or a
/// NUL-terminated JSON object with any of: `"initial_state"` (object, default `{}`),
/// `"max_value_bytes"` (this handle's cap on an encoded state and on an input document, 2 to
/// 1000000000; absent: the store's cap, else 2097152), `"store_max_value_bytes"` (records a cap
/// in the store, which every handle opened later without its own `"max_value_bytes"` uses, this
/// one included; refused with `"read_only"`), `"synchronous"` (`"full"`, the default: an
/// acknowledged write survives power loss, on PostgreSQL `synchronous_commit=on`; or
/// `"normal"`: survives a crash of the process, on PostgreSQL `synchronous_commit=off`, whose
/// loss window is the server's `wal_writer_delay`), `"busy_timeout_ms"` (0 to 2147483647,
/// default 5000: how long a call waits for what another connection holds: SQLite's write lock;
/// on PostgreSQL the agent's row or a table lock, and a connection of this process's pool;
/// 0 fails at once with `AGENT_ERR_BUSY`; it never bounds how long an uncontended statement
/// takes), `"server_timeout_ms"` (PostgreSQL, 1 to 2147483647, default 10000: how long the
/// server may take to answer, so that a frozen or partitioned server fails the call with
/// `AGENT_ERR_UNAVAILABLE`: a connection attempt gets `server_timeout_ms`, a statement
/// `busy_timeout_ms + server_timeout_ms`; accepted and without effect on SQLite), `"read_only"`
/// (default false), `"change_log"` (`{"keep_last": N}` and/or `{"keep_seconds": T}`: switch the
/// agent's change log on, recorded with the agent so that every handle of it logs its changes;
/// `false`: switch it off and drop it; absent: leave the agent's setting; other agents of the
/// store keep their own), `"agent_id"` (a
/// non-empty UTF-8 string of at most 255 bytes, without NUL: which agent of the store; required on
/// PostgreSQL; on a SQLite file absent means the file's single agent), `"max_connections"`
/// (PostgreSQL: the most connections this process keeps to the server, shared by all its
/// handles to it, 1 to 1000, default 4; the pool has the largest size any open asked for),
/// `"schema_version"` (0 to 1000000, default 0: the schema version of the states this program
/// reads and writes; a state stored under an older one is upgraded on first touch by the steps,
/// once, as a change of its own, `AGENT_CHANGE_MIGRATION`; one stored under a newer one is
/// refused with `AGENT_ERR_NEWER_SCHEMA` unless `"read_only"`), `"schema_steps"`
/// (`[{"from": K, "ops": [...]}, ...]`: declarative steps, each upgrading a state from version K
/// to K + 1 with the operations `{"op": "merge", "value": {...}}` (an RFC 7396 patch, at
/// `"path"` when given), `"default"` (`"path"`, `"value"`: set where missing), `"set"`,
/// `"remove"` (where present), `"rename"` (`"path"`, `"to"`: a member's new name) and `"move"`
/// (`"from"`, `"path"`); steps of code, `agent_set_schema_step`, fill the versions these leave
/// out), `"watch"` (default false: changes that other handles and processes commit are
/// delivered to this handle's `on_state_changed` hooks without `agent_poll`, in commit order and
/// once each, on a library worker thread, as the store's watcher notices them; needs the change
/// log on, else `AGENT_ERR_INVALID_ARGUMENT`; not in a child process after `fork()`, like a
/// watch). Unknown keys are refused.
///
/// Agents of one store are isolated: state, version, change log, hooks. On a SQLite file, the
/// handles with an `agent_id` in one process share one connection per file and set of options
/// (10,000 handles cost three file descriptors); a handle without one has its own. A new store
/// file is created with mode 0600 and uses WAL journaling. A file that is not an agent store,
/// or was written by a newer release, is refused and left untouched; so is a PostgreSQL
/// database whose agent_state tables are of a newer schema.
///
/// Ownership: `path` and `options_json` are only read during the call. The handle must be
/// closed with `agent_close`. On failure `*out` is 0.
/// Errors: `AGENT_ERR_INVALID_ARGUMENT` (NULL or empty `path`, NULL `out`, bad option,
/// `agent_id` missing for PostgreSQL), `AGENT_ERR_JSON` (malformed options), `AGENT_ERR_CODEC`
/// / `AGENT_ERR_TOO_LARGE` (the initial state), `AGENT_ERR_STORAGE` (cannot open or create,
/// foreign or newer file or schema), `AGENT_ERR_BUSY`, `AGENT_ERR_UNAVAILABLE` (the server
/// cannot be reached, or does not answer within `server_timeout_ms`), `AGENT_ERR_AUTH` (the
/// connection could not be secured, the TLS handshake or the server's certificate failed, or
/// the server refused the credentials).
/// Thread-safety: any thread. Several handles, in one process or many, may open the same file.
#[no_mangle]
pub unsafe extern "C" fn agent_open(
    path: *const c_char,
    options_json: *const c_char,
    out: *mut AgentHandle,
) -> AgentStatus {
    boundary::run("agent_open", || {
        // SAFETY: NULL or writable, per the caller.
        let out = unsafe { NumberOut::new(out) };
        out.required("out")?;
        // SAFETY: NULL or NUL-terminated strings, per the caller.
        let (path, options) = unsafe { open_args(path, options_json) }?;
        let agent = Agent::open_shared_with(&path, &options)?;
        out.set(handle::insert(agent));
        Ok(())
    })
}

/// Closes handle `h`: the store connection is closed, hooks are unregistered (their
/// `free_user_data` runs once no running delivery uses them), and `h` is never valid again.
///
/// Calls on `h` already running on other threads finish or fail with `AGENT_ERR_BAD_HANDLE`;
/// buffers already handed out stay valid. May be called from inside one of `h`'s
/// `on_state_changed` hooks (not from its initial-state hook: `AGENT_ERR_BUSY`).
/// Errors: `AGENT_ERR_BAD_HANDLE` (never issued, or already closed).
/// Thread-safety: any thread.
#[no_mangle]
pub extern "C" fn agent_close(h: AgentHandle) -> AgentStatus {
    boundary::run("agent_close", || {
        // Refuse a close from inside the initial-state hook before unregistering the handle.
        with_agent(h, Agent::close)?;
        handle::remove(h).map(drop)
    })
}
