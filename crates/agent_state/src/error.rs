//! The one error type of the safe core.
//!
//! Each variant is a failure a caller can act on differently; the enum is `#[non_exhaustive]`,
//! so a new kind of failure is not a breaking change (match the variants you act on, and
//! [`Error::kind`] or a catch-all for the rest). Variants a caller acts on carry typed fields
//! ([`Error::Conflict`]'s versions, [`Error::Gap`]'s range); a backend's own error is kept as
//! the [`source`](std::error::Error::source) of [`Error::Storage`], [`Error::Busy`],
//! [`Error::Unavailable`] and [`Error::Auth`] ([`Detail`]). [`Error::kind`] names its
//! [`ErrorKind`], which has a stable number: the C ABI's status and the command's exit code are
//! made from it. Messages are written for people: they say what was wrong with which input,
//! never just "error". The core knows no backend: each one converts its own errors
//! (`backends::sqlite::error`, `backends::postgres::error`).

use std::fmt;
use std::ops::RangeInclusive;
use std::sync::Arc;

/// Result alias used throughout the core.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What kind of failure an [`Error`] is, with a stable number ([`ErrorKind::code`]).
///
/// The numbers are the C ABI's `AGENT_ERR_*` statuses (`AGENT_ERR_` + [`ErrorKind::name`]), and
/// the `agent-state` command exits with 64 + the number: one table for every language. They
/// never change and are never reused.
///
/// ```
/// use agent_state::{Agent, ErrorKind, OpenOptions};
///
/// let agent = Agent::open_with(":memory:", &OpenOptions::default())?;
/// let err = agent.set_state(b"{\"a\":").unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::Json);
/// assert_eq!((err.kind().code(), err.kind().name()), (3, "JSON"));
/// # Ok::<(), agent_state::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// [`Error::InvalidArgument`].
    InvalidArgument = 1,
    /// [`Error::Closed`] (in C: a handle that is closed or was never issued).
    Closed = 2,
    /// [`Error::Json`].
    Json = 3,
    /// [`Error::Codec`] and [`Error::Serde`].
    Codec = 4,
    /// [`Error::TooLarge`].
    TooLarge = 5,
    /// [`Error::Storage`] and [`Error::Corrupt`].
    Storage = 6,
    /// [`Error::Busy`].
    Busy = 7,
    /// [`Error::Hook`].
    Hook = 8,
    /// [`Error::Conflict`].
    Conflict = 9,
    /// [`Error::Rejected`].
    Rejected = 10,
    /// [`Error::Gap`].
    Gap = 11,
    /// [`Error::Unavailable`].
    Unavailable = 12,
    /// [`Error::Auth`].
    Auth = 13,
    /// [`Error::Cancelled`].
    Cancelled = 14,
    /// [`Error::NewerSchema`].
    NewerSchema = 15,
    /// [`Error::Migration`].
    Migration = 16,
    /// [`Error::NoSuchPath`].
    Path = 17,
    /// [`Error::TestFailed`].
    TestFailed = 18,
}

impl ErrorKind {
    /// Every kind, in number order.
    pub const ALL: [ErrorKind; 18] = [
        ErrorKind::InvalidArgument,
        ErrorKind::Closed,
        ErrorKind::Json,
        ErrorKind::Codec,
        ErrorKind::TooLarge,
        ErrorKind::Storage,
        ErrorKind::Busy,
        ErrorKind::Hook,
        ErrorKind::Conflict,
        ErrorKind::Rejected,
        ErrorKind::Gap,
        ErrorKind::Unavailable,
        ErrorKind::Auth,
        ErrorKind::Cancelled,
        ErrorKind::NewerSchema,
        ErrorKind::Migration,
        ErrorKind::Path,
        ErrorKind::TestFailed,
    ];

    /// The kind's number (1 to 18).
    pub const fn code(self) -> i32 {
        self as i32
    }

    /// The kind's name in upper case, as the C status spells it after `AGENT_ERR_`.
    pub const fn name(self) -> &'static str {
        match self {
            ErrorKind::InvalidArgument => "INVALID_ARGUMENT",
            ErrorKind::Closed => "BAD_HANDLE",
            ErrorKind::Json => "JSON",
            ErrorKind::Codec => "CODEC",
            ErrorKind::TooLarge => "TOO_LARGE",
            ErrorKind::Storage => "STORAGE",
            ErrorKind::Busy => "BUSY",
            ErrorKind::Hook => "HOOK",
            ErrorKind::Conflict => "CONFLICT",
            ErrorKind::Rejected => "REJECTED",
            ErrorKind::Gap => "GAP",
            ErrorKind::Unavailable => "UNAVAILABLE",
            ErrorKind::Auth => "AUTH",
            ErrorKind::Cancelled => "CANCELLED",
            ErrorKind::NewerSchema => "NEWER_SCHEMA",
            ErrorKind::Migration => "MIGRATION",
            ErrorKind::Path => "PATH",
            ErrorKind::TestFailed => "TEST_FAILED",
        }
    }
}

impl ErrorKind {
    /// What the kind means, in one sentence: the text every binding's documentation of the
    /// status carries (see the surface description, `include/agent_state_surface.json`).
    pub const fn meaning(self) -> &'static str {
        match self {
            ErrorKind::InvalidArgument => {
                "A required argument was missing, an option was unknown or ill-typed, or a patch \
                 or state was not a JSON object."
            }
            ErrorKind::Closed => "The handle was closed (or, in C, never issued).",
            ErrorKind::Json => {
                "The input is not well-formed JSON (syntax, invalid UTF-8, a lone surrogate, \
                 nesting of 128 levels or more)."
            }
            ErrorKind::Codec => {
                "The input is JSON the storage codec refuses (duplicate member names, a number \
                 outside the double range, a malformed tagged value, nesting beyond 64 levels)."
            }
            ErrorKind::TooLarge => {
                "The input, or the state a change would produce, is over the size cap (the \
                 handle's max_value_bytes, or the store's); nothing was written."
            }
            ErrorKind::Storage => {
                "The store failed: I/O, a full disk, a read-only or foreign store, a store in \
                 a newer release's format, or the server's error answer."
            }
            ErrorKind::Busy => {
                "Another connection held what the call needs for longer than busy_timeout_ms; \
                 nothing was written."
            }
            ErrorKind::Hook => {
                "A hook failed; for on_state_changed the change is committed all the same."
            }
            ErrorKind::Conflict => {
                "A compare-and-set found another version than expected; nothing was written."
            }
            ErrorKind::Rejected => "The validator rejected the change; nothing was written.",
            ErrorKind::Gap => "The change log no longer holds the changes asked for.",
            ErrorKind::Unavailable => {
                "The server could not be reached or stopped answering; the call had no effect \
                 unless the message says a commit's outcome is unknown."
            }
            ErrorKind::Auth => {
                "The connection could not be secured or authenticated (TLS, certificates, \
                 credentials)."
            }
            ErrorKind::Cancelled => {
                "The call's cancel token fired, or its deadline passed; nothing was written."
            }
            ErrorKind::NewerSchema => {
                "The state was stored under a newer schema version than this handle declares \
                 (schema_version); nothing was read into it or written over it. Run the newer \
                 program, or open read_only to read it as stored."
            }
            ErrorKind::Migration => {
                "A schema step failed, or one is missing, while upgrading a stored state to \
                 this handle's schema_version; the stored state is as it was."
            }
            ErrorKind::Path => {
                "A JSON Pointer names nothing in the state (a member that does not exist, an \
                 index out of range), or a JSON Patch operation cannot apply there (a move into \
                 its own child); nothing was written."
            }
            ErrorKind::TestFailed => {
                "A test operation of a JSON Patch found another value than the one it names; \
                 nothing was written."
            }
        }
    }
}

impl Error {
    /// The kind of this error: what to act on, and its stable number.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidArgument(_) => ErrorKind::InvalidArgument,
            Error::Closed => ErrorKind::Closed,
            Error::Json(_) => ErrorKind::Json,
            Error::Codec(_) | Error::Serde(_) => ErrorKind::Codec,
            Error::TooLarge(_) => ErrorKind::TooLarge,
            Error::Storage(_) | Error::Corrupt(_) | Error::Stale(_) | Error::Outdated(_) => {
                ErrorKind::Storage
            }
            Error::Busy(_) => ErrorKind::Busy,
            Error::Hook(_) => ErrorKind::Hook,
            Error::Conflict { .. } => ErrorKind::Conflict,
            Error::Rejected(_) => ErrorKind::Rejected,
            Error::Gap { .. } => ErrorKind::Gap,
            Error::Unavailable(_) => ErrorKind::Unavailable,
            Error::Auth(_) => ErrorKind::Auth,
            Error::Cancelled(_) => ErrorKind::Cancelled,
            Error::NewerSchema { .. } => ErrorKind::NewerSchema,
            Error::Migration { .. } => ErrorKind::Migration,
            Error::NoSuchPath { .. } => ErrorKind::Path,
            Error::TestFailed { .. } => ErrorKind::TestFailed,
        }
    }
}

/// The message of an error the store reported, with the backend's own error behind it (its
/// [`source`](std::error::Error::source)) when there is one. Reads as the message (`Deref` to
/// `str`, `Display`); compares by the message alone.
#[derive(Clone, Default)]
pub struct Detail {
    message: String,
    source: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

impl Detail {
    /// A message with the backend's error behind it.
    pub fn with_source(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Detail {
        Detail {
            message: message.into(),
            source: Some(Arc::new(source)),
        }
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The same source under another message (a message completed with its context).
    pub fn map(self, f: impl FnOnce(String) -> String) -> Detail {
        Detail {
            message: f(self.message),
            source: self.source,
        }
    }

    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl From<String> for Detail {
    fn from(message: String) -> Detail {
        Detail {
            message,
            source: None,
        }
    }
}

impl From<&str> for Detail {
    fn from(message: &str) -> Detail {
        Detail::from(message.to_string())
    }
}

impl std::ops::Deref for Detail {
    type Target = str;
    fn deref(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Detail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Debug for Detail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.source {
            None => fmt::Debug::fmt(&self.message, f),
            Some(source) => write!(f, "{:?} (source: {source:?})", self.message),
        }
    }
}

impl PartialEq for Detail {
    fn eq(&self, other: &Detail) -> bool {
        self.message == other.message
    }
}

impl Eq for Detail {}

/// Everything that can go wrong in the core.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// A required argument was missing, an option was unknown or ill-typed, or a patch/state was
    /// not a JSON object.
    InvalidArgument(String),
    /// The agent was closed (possibly by another thread) before or during the call; at the C
    /// boundary also a handle that was never issued (`AGENT_ERR_BAD_HANDLE`).
    Closed,
    /// The input is not well-formed JSON (syntax, invalid UTF-8, lone surrogate, nesting beyond
    /// the parser's limit).
    Json(String),
    /// The input is JSON but not a value the storage codec accepts (duplicate member names,
    /// a number outside the double range, a malformed tagged value, nesting beyond the cap).
    Codec(String),
    /// The encoded state (or an input document) exceeds the handle's cap (`max_value_bytes`,
    /// or the store's); the message says which cap and how to raise it.
    TooLarge(String),
    /// The store failed: an I/O error, a full disk, a read-only store, a corrupt or foreign
    /// file, or the database server's error answer to a statement (its error is the source).
    Storage(Detail),
    /// The stored state cannot be decoded (the file was changed behind the library's back).
    /// Reads and merges fail; a replacement repairs it.
    Corrupt(String),
    /// Another connection held what the call needs (a lock, every pooled connection) for
    /// longer than `busy_timeout_ms`, or the handle is busy computing its initial state on
    /// this very thread.
    Busy(Detail),
    /// A compare-and-set found another version than the expected one; nothing was written
    /// (or deleted).
    Conflict {
        /// The version the caller expected.
        expected: u64,
        /// The version the store holds (0: nothing stored).
        actual: u64,
        /// What was refused, in words.
        message: String,
    },
    /// The validation gate rejected the change; nothing was written.
    Rejected(String),
    /// The change log no longer holds changes that were asked for (pruned by its retention,
    /// or gone with a deletion of the agent).
    Gap {
        /// The versions whose changes are missing.
        missing: RangeInclusive<u64>,
        /// What is missing, in words.
        message: String,
    },
    /// A hook reported failure. For `on_state_changed` the change is committed all the same.
    Hook(String),
    /// The database server could not be reached or the connection was lost (refused, timed
    /// out, restarted). The call had no effect, unless the message says a commit's outcome is
    /// unknown (the state's version then tells). The next call reconnects.
    Unavailable(Detail),
    /// The connection to the database server could not be secured or authenticated: the TLS
    /// handshake failed (a certificate not trusted, expired or for another host; the server
    /// offers no TLS where `sslmode` requires it, or wants a client certificate), or the server
    /// refused the credentials (a wrong password, no `pg_hba.conf` entry). Unlike
    /// [`Error::Unavailable`], retrying the same settings will not help.
    Auth(Detail),
    /// The call's cancel token fired, or its deadline passed, while the call waited (for a
    /// lock, a connection or the server; see [`crate::Cancel`]): nothing was written.
    Cancelled(String),
    /// The state is stored under a newer schema version than this handle declares (option
    /// `schema_version`): a newer program wrote it. Nothing was read into this handle's shape
    /// or written over it; a `read_only` handle reads it as stored.
    NewerSchema {
        /// The schema version the state was stored under.
        stored: u32,
        /// The schema version this handle declares.
        declared: u32,
        /// What was refused, in words.
        message: String,
    },
    /// Upgrading a stored state to this handle's schema version failed: a step (declarative or
    /// code) failed or is missing, or its result is not a state the codec, the size cap or the
    /// validator accepts. The stored state is as it was.
    Migration {
        /// The schema version of the step that failed (it upgrades `from` to `from + 1`).
        from: u32,
        /// Which step and why, in words.
        message: String,
    },
    /// A JSON Pointer names nothing in the state: a read of one path, or an operation of a JSON
    /// Patch whose path (or `from`) does not exist, an index out of range, a move into its own
    /// child. Nothing was written.
    NoSuchPath {
        /// The operation's index in the JSON Patch (from 0); `None` for a read.
        operation: Option<usize>,
        /// The pointer as written.
        path: String,
        /// What is missing, in words.
        message: String,
    },
    /// A `test` operation of a JSON Patch found another value than the one it names: the
    /// patch's own compare-and-set said no, and nothing was written.
    TestFailed {
        /// The operation's index in the JSON Patch (from 0).
        operation: usize,
        /// The pointer the operation tested.
        path: String,
        /// What was found, in words.
        message: String,
    },
    /// A Rust value and JSON did not fit: serde could not write a value given to the typed API
    /// ([`Agent::set`](crate::Agent::set) and its kin, the builder's initial state) as JSON,
    /// or a state could not be read into the type asked for ([`Agent::get`](crate::Agent::get):
    /// a member missing or of another type; the message names where). Nothing was written.
    /// Its [`source`](std::error::Error::source) is serde's error. Of the kind
    /// [`ErrorKind::Codec`].
    Serde(Detail),
    /// Internal to the write path, never returned by the agent (and not constructible outside
    /// the crate): an optimistic write found the stored version moved since the state it was
    /// computed from; nothing was written, and the write is retried under a lock.
    #[doc(hidden)]
    Stale(Internal),
    /// Internal to the write path, never returned by the agent: the stored state is of an
    /// older schema version than the handle's, so it is migrated first and the write made
    /// again.
    #[doc(hidden)]
    Outdated(Internal),
}

/// The payload of [`Error::Stale`], which only the crate constructs.
#[doc(hidden)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Internal(());

impl Error {
    /// The same error with `source` behind it, when its kind carries a [`Detail`] (the others
    /// are returned as they are).
    pub(crate) fn with_source(
        self,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Error {
        let attach = |d: Detail| Detail::with_source(d.message, source);
        match self {
            Error::Storage(d) => Error::Storage(attach(d)),
            Error::Busy(d) => Error::Busy(attach(d)),
            Error::Unavailable(d) => Error::Unavailable(attach(d)),
            Error::Auth(d) => Error::Auth(attach(d)),
            other => other,
        }
    }

    /// The internal "retry under a lock" signal of the write path (see `Error::Stale`).
    pub(crate) fn stale() -> Error {
        Error::Stale(Internal(()))
    }

    /// The internal "migrate first" signal of the write path (see `Error::Outdated`).
    pub(crate) fn outdated() -> Error {
        Error::Outdated(Internal(()))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidArgument(m) => write!(f, "invalid argument: {m}"),
            Error::Closed => f.write_str("the handle is not open (it was closed, or never issued)"),
            Error::Json(m) => write!(f, "malformed JSON: {m}"),
            Error::Codec(m) => write!(f, "codec error: {m}"),
            Error::Serde(m) => write!(f, "codec error: {m}"),
            Error::TooLarge(m) => write!(f, "too large: {m}"),
            Error::Storage(m) => write!(f, "storage error: {m}"),
            Error::Corrupt(m) => write!(f, "storage error: the stored state is corrupt: {m}"),
            Error::Busy(m) => write!(f, "busy: {m}"),
            Error::Conflict { message, .. } => write!(f, "conflict: {message}"),
            Error::Rejected(m) => write!(f, "rejected: {m}"),
            Error::Gap { message, .. } => write!(f, "gap in the change log: {message}"),
            Error::Hook(m) => write!(f, "hook failed: {m}"),
            Error::Unavailable(m) => write!(f, "unavailable: {m}"),
            Error::Auth(m) => write!(f, "cannot secure or authenticate the connection: {m}"),
            Error::Cancelled(m) => write!(f, "cancelled: {m}"),
            Error::NewerSchema { message, .. } => write!(f, "newer schema: {message}"),
            Error::Migration { message, .. } => write!(f, "schema migration failed: {message}"),
            Error::NoSuchPath { message, .. } => write!(f, "no such path: {message}"),
            Error::TestFailed { message, .. } => write!(f, "test failed: {message}"),
            Error::Stale(_) => f.write_str(
                "storage error: the state changed during an optimistic write (internal; retried)",
            ),
            Error::Outdated(_) => f.write_str(
                "storage error: the state is of an older schema version (internal; migrated)",
            ),
        }
    }
}

/// The value layer's failures are the core's of the same kind, with the same message.
impl From<agent_state_value::Error> for Error {
    fn from(e: agent_state_value::Error) -> Error {
        use agent_state_value::Error as V;
        match e {
            V::InvalidArgument(m) => Error::InvalidArgument(m),
            V::Json(m) => Error::Json(m),
            V::Codec(m) => Error::Codec(m),
            V::TooLarge(m) => Error::TooLarge(m),
            V::Corrupt(m) => Error::Corrupt(m),
            V::NoSuchPath(m) => Error::NoSuchPath {
                operation: None,
                path: String::new(),
                message: m,
            },
            V::Patch(e) => {
                use agent_state_value::json_patch::PatchErrorKind as K;
                let message = e.to_string();
                let path = e.path.clone().unwrap_or_default();
                match (e.kind, e.index) {
                    (K::TestFailed, Some(operation)) => Error::TestFailed {
                        operation,
                        path,
                        message,
                    },
                    (K::NotApplicable, operation) => Error::NoSuchPath {
                        operation,
                        path,
                        message,
                    },
                    _ => Error::InvalidArgument(format!("the JSON Patch is malformed: {message}")),
                }
            }
            // The value layer's enum may grow; a kind it adds is reported as a codec failure
            // until the core names it.
            other => Error::Codec(other.to_string()),
        }
    }
}

/// The source of a store's error is the backend's own error, when the backend gave one.
impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Storage(d)
            | Error::Busy(d)
            | Error::Unavailable(d)
            | Error::Auth(d)
            | Error::Serde(d) => d.source(),
            _ => None,
        }
    }
}
