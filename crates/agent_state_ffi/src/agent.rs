//! Opening, closing, reading and writing an agent through a handle.

use std::ffi::{c_char, CStr, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use std::ptr::null_mut;

use super::args::{input, with_agent, BufferOut, NumberOut};
use super::boundary;
use super::buffer::AgentBuffer;
use super::handle::{self, AgentHandle};
use super::status::AgentStatus;
use agent_state::Agent;
use agent_state::Error;
use agent_state::OpenOptions;

/// Opens (creating when absent) an agent's store at `path` and stores a new handle in `*out`.
///
/// Arguments: `path` is a NUL-terminated file name (bytes, as the OS takes them; `":memory:"`
/// opens a private in-memory store), or a PostgreSQL connection URI in libpq's syntax starting
/// with `postgres://` or `postgresql://` (`postgresql://user:password@host:port/dbname`, or
/// `postgresql:///dbname?host=/socket/dir&port=5432` for a Unix socket; `sslmode=disable` or
/// `prefer`: this build has no TLS). `options_json` is NULL for the defaults or a
/// NUL-terminated JSON object with any of: `"initial_state"` (object, default `{}`),
/// `"max_value_bytes"` (default 2097152), `"synchronous"` (`"full"`, the default: an
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
/// agent's change log on, recorded in the store so that every handle logs its changes;
/// `false`: switch it off and drop it; absent: leave the store's setting), `"agent_id"` (a
/// non-empty UTF-8 string of at most 255 bytes, without NUL: which agent of the store; required on
/// PostgreSQL; on a SQLite file absent means the file's single agent), `"max_connections"`
/// (PostgreSQL: the most connections this process keeps to the server, shared by all its
/// handles to it, 1 to 1000, default 4; the pool has the largest size any open asked for).
/// Unknown keys are refused.
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
/// cannot be reached, or does not answer within `server_timeout_ms`).
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
        if path.is_null() {
            return Err(Error::InvalidArgument("path is NULL".into()));
        }
        // SAFETY: not NULL; the caller guarantees a NUL-terminated string.
        let path = unsafe { CStr::from_ptr(path) }.to_bytes();
        if path.is_empty() {
            return Err(Error::InvalidArgument("path is empty".into()));
        }
        let options = if options_json.is_null() {
            OpenOptions::default()
        } else {
            // SAFETY: not NULL; the caller guarantees a NUL-terminated string.
            let text = unsafe { CStr::from_ptr(options_json) }.to_bytes();
            OpenOptions::from_json(text).map_err(|e| match e {
                Error::Json(m) => Error::Json(format!("options: {m}")),
                other => other,
            })?
        };
        let agent = Agent::open(Path::new(OsStr::from_bytes(path)), &options)?;
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

/// Reads the state: the stored object, or the initial state while nothing is stored (reading
/// never stores it). `*out` receives a view of compact JSON text.
///
/// Cost: O(1) when no other connection committed since the last read: the view shares the
/// handle's cached immutable snapshot instead of copying it.
/// Ownership: release `*out` with `agent_buffer_free`; it is empty on failure.
/// Errors: `AGENT_ERR_INVALID_ARGUMENT` (NULL `out`), `AGENT_ERR_BAD_HANDLE`,
/// `AGENT_ERR_STORAGE`, `AGENT_ERR_BUSY`; while nothing is stored and an initial-state hook is
/// set, also what its answer earns: `AGENT_ERR_HOOK` (non-zero return),
/// `AGENT_ERR_INVALID_ARGUMENT` (not an object), `AGENT_ERR_JSON`, `AGENT_ERR_CODEC`,
/// `AGENT_ERR_TOO_LARGE`.
/// Thread-safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn agent_get_state(h: AgentHandle, out: *mut AgentBuffer) -> AgentStatus {
    boundary::run("agent_get_state", || {
        // SAFETY: NULL or writable, per the caller.
        let out = unsafe { BufferOut::new(out) };
        out.required()?;
        out.snapshot(with_agent(h, Agent::get_state)?);
        Ok(())
    })
}

/// Merges `patch` (`len` bytes of JSON text: an object) into the state by RFC 7396 — members
/// merge recursively, `null` deletes, everything else (arrays, scalars, tagged values) replaces —
/// in one `BEGIN IMMEDIATE` transaction that starts from the latest committed state. `*out`
/// (when `out` is not NULL) receives the full merged state. After the commit, the handle's
/// `on_state_changed` hooks run on this thread.
///
/// On any error but `AGENT_ERR_HOOK` nothing was written. `AGENT_ERR_HOOK` means the change
/// committed but a hook returned non-zero; `*out` is then empty (read the state again if needed).
/// Ownership: `patch` is only read during the call; release `*out` with `agent_buffer_free`.
/// Errors: `AGENT_ERR_INVALID_ARGUMENT` (NULL `patch`, not an object), `AGENT_ERR_BAD_HANDLE`,
/// `AGENT_ERR_JSON`, `AGENT_ERR_CODEC`, `AGENT_ERR_TOO_LARGE`, `AGENT_ERR_STORAGE` (also: the
/// handle is read-only), `AGENT_ERR_BUSY`, `AGENT_ERR_HOOK`; on the first write with an
/// initial-state hook set, also the errors its answer earns (see `agent_get_state`), with
/// nothing written.
/// Thread-safety: any thread; concurrent writers never lose each other's updates.
#[no_mangle]
pub unsafe extern "C" fn agent_set_state(
    h: AgentHandle,
    patch: *const u8,
    len: usize,
    out: *mut AgentBuffer,
) -> AgentStatus {
    // SAFETY: forwarded under this function's contract.
    unsafe {
        write(
            "agent_set_state",
            h,
            Write::Merge,
            (patch, len),
            None,
            out,
            null_mut(),
        )
    }
}

/// Replaces the state with `next` (`len` bytes of JSON text: an object); nothing of the
/// previous state survives. Same transaction, hook, ownership and error rules as
/// `agent_set_state`; hooks see a NULL patch. A stored state that no longer decodes (changed
/// behind the library's back: reads and merges fail with `AGENT_ERR_STORAGE`) is repaired by a
/// replacement; hooks then see `{}` as `prev`.
#[no_mangle]
pub unsafe extern "C" fn agent_replace_state(
    h: AgentHandle,
    next: *const u8,
    len: usize,
    out: *mut AgentBuffer,
) -> AgentStatus {
    // SAFETY: forwarded under this function's contract.
    unsafe {
        write(
            "agent_replace_state",
            h,
            Write::Replace,
            (next, len),
            None,
            out,
            null_mut(),
        )
    }
}

/// The message of the calling thread's last failed `agent_*` call (starting with the function's
/// name), or `""` if none failed yet. Successful calls do not clear it.
///
/// The message belongs to the calling thread: read it on the same thread, right after the
/// failing call. Runtimes that move work between OS threads (Go's goroutines) must read it in
/// the same native call as the failing function.
/// Ownership: owned by the library; valid until the next failing call on this thread. Never free.
#[no_mangle]
pub extern "C" fn agent_last_error() -> *const c_char {
    boundary::guard("agent_last_error", boundary::last_error_ptr)
}

/// The library's version, `"MAJOR.MINOR.PATCH"`: the header's `AGENT_STATE_VERSION` when header
/// and library match. Static; never free.
#[no_mangle]
pub extern "C" fn agent_version() -> *const c_char {
    boundary::guard("agent_version", || {
        concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
    })
}

/// The two kinds of write.
pub(super) enum Write {
    /// RFC 7396 merge of a patch (argument `patch`).
    Merge,
    /// Replacement (argument `next`).
    Replace,
}

/// The body of the four writes (`agent_set_state`, `agent_replace_state` and their `_if`
/// forms): `kind` with the `len` bytes at `data`, when the version is `expected` (if given).
///
/// # Safety
/// As the exports: `data` NULL or readable for `len` bytes; `out` and `out_version` NULL or
/// writable.
pub(super) unsafe fn write(
    name: &str,
    h: AgentHandle,
    kind: Write,
    (data, len): (*const u8, usize),
    expected: Option<u64>,
    out: *mut AgentBuffer,
    out_version: *mut u64,
) -> AgentStatus {
    boundary::run(name, || {
        // SAFETY: NULL or writable, per the caller.
        let (out, out_version) = unsafe { (BufferOut::new(out), NumberOut::new(out_version)) };
        let arg = match kind {
            Write::Merge => "patch",
            Write::Replace => "next",
        };
        // SAFETY: NULL or readable for `len` bytes, per the caller.
        let input = unsafe { input(data, len, arg) }?;
        let v = with_agent(h, |agent| match kind {
            Write::Merge => agent.set_state_if(input, expected),
            Write::Replace => agent.replace_state_if(input, expected),
        })?;
        out_version.set(v.version);
        out.snapshot(v.state);
        Ok(())
    })
}
