//! Status codes (fixed numbers, never reused, never renumbered), their names, the calling
//! thread's last error message, and the library's version: `agent_status_name`,
//! `agent_last_error`, `agent_version`.

/// Generates, from one list of `STATUS [=> the core's error kind]`, the status names and the
/// mapping of errors to statuses (see the table below), and checks at compile time that each
/// status is its kind's number.
macro_rules! status_table {
    ($($status:ident $(=> $kind:ident)?),+ $(,)?) => {
        /// Every status with its name, NUL-terminated.
        const NAMES: &[(AgentStatus, &str)] = &[$(($status, concat!(stringify!($status), "\0"))),+];

        const _: () = {
            let all = [$($status),+];
            let mut i = 0;
            while i < all.len() {
                let mut j = i + 1;
                while j < all.len() {
                    assert!(all[i] != all[j], "two statuses share a number");
                    j += 1;
                }
                i += 1;
            }
        };

        $($(const _: () = assert!($status == ErrorKind::$kind.code(), "a status is not its kind's number");)?)+

        /// The status that reports `e`.
        pub(crate) fn status_of(e: &Error) -> AgentStatus {
            match e.kind() {
                $($(ErrorKind::$kind => $status,)?)+
            }
        }
    };
}

use std::ffi::c_char;

use super::boundary;
use agent_state::{Error, ErrorKind};

/// The result of every fallible `agent_*` call: `AGENT_OK` (0) or one of the `AGENT_ERR_*`
/// codes below. The numbers are part of the ABI: they never change and are never reused.
pub type AgentStatus = i32;

/// Success.
pub const AGENT_OK: AgentStatus = 0;
/// A required pointer was NULL, an option was unknown or ill-typed, a patch or state was not a
/// JSON object, or a hook id was unknown.
pub const AGENT_ERR_INVALID_ARGUMENT: AgentStatus = 1;
/// The handle was never issued, or has been closed.
pub const AGENT_ERR_BAD_HANDLE: AgentStatus = 2;
/// The input is not well-formed JSON (syntax, invalid UTF-8, lone surrogate, nesting of 128
/// levels or more, where the parser stops).
pub const AGENT_ERR_JSON: AgentStatus = 3;
/// The input is JSON that the storage codec refuses: duplicate member names, a number outside
/// the double range, a malformed tagged value, nesting beyond 64 levels.
pub const AGENT_ERR_CODEC: AgentStatus = 4;
/// The input document, or the encoded state a change would produce, exceeds `max_value_bytes`.
pub const AGENT_ERR_TOO_LARGE: AgentStatus = 5;
/// The store failed: an I/O error, a full disk, a read-only store or file, a corrupt or foreign
/// file, a store in a newer release's format; on PostgreSQL, an error of the server other than
/// an unreachable one (`AGENT_ERR_UNAVAILABLE`), refused credentials (`AGENT_ERR_AUTH`) or a
/// lock wait (`AGENT_ERR_BUSY`).
pub const AGENT_ERR_STORAGE: AgentStatus = 6;
/// Another connection held what the call needs (SQLite's write lock; on PostgreSQL the agent's
/// row, a table lock or every connection of the pool) for longer than `busy_timeout_ms`, or
/// the call came from inside the handle's own initial-state hook. Nothing was written.
pub const AGENT_ERR_BUSY: AgentStatus = 7;
/// A hook returned non-zero. For `on_state_changed` hooks the change is committed all the same.
pub const AGENT_ERR_HOOK: AgentStatus = 8;
/// A compare-and-set (`agent_set_state_if`, `agent_replace_state_if`) found the state at
/// another version than expected; nothing was written.
pub const AGENT_ERR_CONFLICT: AgentStatus = 9;
/// The validation gate (`agent_set_validator`) rejected the change; nothing was written. The
/// message carries the validator's reason.
pub const AGENT_ERR_REJECTED: AgentStatus = 10;
/// The change log no longer holds changes that were asked for: they were pruned by its
/// retention (`agent_poll`, `agent_changes_since`, `agent_get_state_at`).
pub const AGENT_ERR_GAP: AgentStatus = 11;
/// The database server (PostgreSQL) could not be reached, or the connection was lost: refused,
/// no answer within `server_timeout_ms` (a statement: `busy_timeout_ms + server_timeout_ms`),
/// or the server restarted. The call had no effect, except when the connection dropped while a
/// commit was in flight: then the message says the outcome is unknown (read the version to
/// tell). The handle stays usable: the next call reconnects.
pub const AGENT_ERR_UNAVAILABLE: AgentStatus = 12;
/// The connection to the database server (PostgreSQL) could not be secured or authenticated:
/// the TLS handshake failed (the server's certificate is not trusted, has expired or names
/// another host; the server offers no TLS while `sslmode` requires it, or wants a client
/// certificate), or the server refused the credentials (a wrong password, no `pg_hba.conf`
/// entry). Unlike `AGENT_ERR_UNAVAILABLE`, trying again with the same URI will not help. The
/// message says which; it never contains the password.
pub const AGENT_ERR_AUTH: AgentStatus = 13;
/// The call's cancel token (`agent_cancel_bind`) fired, or its deadline passed, while the call
/// waited: for another connection's lock (SQLite's write lock, a PostgreSQL row lock), for a
/// connection of the pool or its turn on the handle, or for the server's answer. Nothing was
/// written; the handle stays usable. (A commit already under way is never cancelled: it
/// finishes, or on PostgreSQL reports its outcome unknown as `AGENT_ERR_UNAVAILABLE` does.)
pub const AGENT_ERR_CANCELLED: AgentStatus = 14;
/// The agent's state is stored under a newer schema version than the handle declares (open
/// option `schema_version`): a newer program wrote it. Nothing was read into the handle's shape
/// or written over it (an older program never overwrites a newer state); run the newer program,
/// or open with `read_only` to read it as stored.
pub const AGENT_ERR_NEWER_SCHEMA: AgentStatus = 15;
/// Upgrading a stored state to the handle's schema version failed: a step (`schema_steps`, or
/// one set with `agent_set_schema_step`) failed or is missing, or its result is not a state the
/// codec, the size cap or the validator accepts. The message names the step and why; the
/// stored state is as it was.
pub const AGENT_ERR_MIGRATION: AgentStatus = 16;
/// A JSON Pointer names nothing in the state: `agent_get_path` or `agent_get_tail` of a member
/// that does not exist or an index out of range, or an operation of `agent_patch_state` whose
/// `path` (or `from`) does not exist, or a `move` into its own child. The message names the
/// operation (its index in the patch, its `op` and `path`). Nothing was written.
pub const AGENT_ERR_PATH: AgentStatus = 17;
/// A `test` operation of `agent_patch_state` found another value than the one it names (the
/// patch's own compare-and-set said no). The message names the operation. Nothing was written.
pub const AGENT_ERR_TEST_FAILED: AgentStatus = 18;
/// A bug in the library was caught at the ABI boundary; the handle may still be used.
pub const AGENT_ERR_PANIC: AgentStatus = 99;

// The table: every status once, with the core's error kind it reports (`agent_state::ErrorKind`,
// whose numbers these are). It generates the name table of `agent_status_name` (names spelled
// by the constants themselves) and `status_of`, whose match the compiler checks for
// exhaustiveness, and checks at compile time that no two statuses share a number and that each
// is its kind's number. (The constants above stay written out: cbindgen reads them, with
// their docs, from the source and does not expand macros.)
status_table! {
    AGENT_OK,
    AGENT_ERR_INVALID_ARGUMENT => InvalidArgument,
    AGENT_ERR_BAD_HANDLE => Closed,
    AGENT_ERR_JSON => Json,
    AGENT_ERR_CODEC => Codec,
    AGENT_ERR_TOO_LARGE => TooLarge,
    AGENT_ERR_STORAGE => Storage,
    AGENT_ERR_BUSY => Busy,
    AGENT_ERR_HOOK => Hook,
    AGENT_ERR_CONFLICT => Conflict,
    AGENT_ERR_REJECTED => Rejected,
    AGENT_ERR_GAP => Gap,
    AGENT_ERR_UNAVAILABLE => Unavailable,
    AGENT_ERR_AUTH => Auth,
    AGENT_ERR_CANCELLED => Cancelled,
    AGENT_ERR_NEWER_SCHEMA => NewerSchema,
    AGENT_ERR_MIGRATION => Migration,
    AGENT_ERR_PATH => Path,
    AGENT_ERR_TEST_FAILED => TestFailed,
    AGENT_ERR_PANIC,
}

/// The name of a status code, e.g. `"AGENT_ERR_CODEC"`, or `"AGENT_ERR_UNKNOWN"` for a number
/// that is not a status.
///
/// Ownership: the returned string is static; never free it. Thread-safety: any thread.
#[no_mangle]
pub extern "C" fn agent_status_name(status: AgentStatus) -> *const c_char {
    boundary::guard("agent_status_name", || {
        let name = NAMES
            .iter()
            .find(|(s, _)| *s == status)
            .map_or("AGENT_ERR_UNKNOWN\0", |(_, name)| name);
        name.as_ptr().cast()
    })
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
