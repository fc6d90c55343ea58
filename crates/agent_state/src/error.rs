//! The one error type of the safe core.
//!
//! Each variant is a failure a caller can act on differently, and [`Error::kind`] names its
//! [`ErrorKind`], which has a stable number: the C ABI's status and the command's exit code are
//! made from it. Messages are written for people: they say what was wrong with which input,
//! never just "error". The core knows no backend: each one converts its own errors
//! (`backends::sqlite::error`, `backends::postgres::error`).

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
/// let agent = Agent::open(":memory:".as_ref(), &OpenOptions::default())?;
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
    /// [`Error::Codec`].
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
}

impl ErrorKind {
    /// Every kind, in number order.
    pub const ALL: [ErrorKind; 14] = [
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
    ];

    /// The kind's number (1 to 14).
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
            Error::Codec(_) => ErrorKind::Codec,
            Error::TooLarge(_) => ErrorKind::TooLarge,
            Error::Storage(_) | Error::Corrupt(_) | Error::Stale => ErrorKind::Storage,
            Error::Busy(_) => ErrorKind::Busy,
            Error::Hook(_) => ErrorKind::Hook,
            Error::Conflict(_) => ErrorKind::Conflict,
            Error::Rejected(_) => ErrorKind::Rejected,
            Error::Gap(_) => ErrorKind::Gap,
            Error::Unavailable(_) => ErrorKind::Unavailable,
            Error::Auth(_) => ErrorKind::Auth,
            Error::Cancelled(_) => ErrorKind::Cancelled,
        }
    }
}

/// Everything that can go wrong in the core.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A required argument was missing, an option was unknown or ill-typed, or a patch/state was
    /// not a JSON object.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The agent was closed (possibly by another thread) before or during the call; at the C
    /// boundary also a handle that was never issued.
    #[error("the handle is not open (it was closed, or never issued)")]
    Closed,
    /// The input is not well-formed JSON (syntax, invalid UTF-8, lone surrogate, nesting beyond
    /// the parser's limit).
    #[error("malformed JSON: {0}")]
    Json(String),
    /// The input is JSON but not a value the storage codec accepts (duplicate member names,
    /// a number outside the double range, a malformed tagged value, nesting beyond the cap).
    #[error("codec error: {0}")]
    Codec(String),
    /// The encoded state (or an input document) exceeds `max_value_bytes`.
    #[error("too large: {0}")]
    TooLarge(String),
    /// The store failed: an I/O error, a full disk, a read-only store, a corrupt or foreign
    /// file, or the database server's error answer to a statement. (Each backend turns its
    /// own errors into these kinds, in its own module.)
    #[error("storage error: {0}")]
    Storage(String),
    /// The stored state cannot be decoded (the file was changed behind the library's back).
    /// Reads and merges fail; a replacement repairs it.
    #[error("storage error: the stored state is corrupt: {0}")]
    Corrupt(String),
    /// Another connection held what the call needs (a lock, every pooled connection) for
    /// longer than `busy_timeout_ms`, or the handle is busy computing its initial state on
    /// this very thread.
    #[error("busy: {0}")]
    Busy(String),
    /// A compare-and-set found another version than the expected one; nothing was written.
    #[error("conflict: {0}")]
    Conflict(String),
    /// The validation gate rejected the change; nothing was written.
    #[error("rejected: {0}")]
    Rejected(String),
    /// The change log no longer holds changes that were asked for (pruned by its retention).
    #[error("gap in the change log: {0}")]
    Gap(String),
    /// A hook reported failure. For `on_state_changed` the change is committed all the same.
    #[error("hook failed: {0}")]
    Hook(String),
    /// The database server could not be reached or the connection was lost (refused, timed
    /// out, restarted). The call had no effect, unless the message says a commit's outcome is
    /// unknown (the state's version then tells). The next call reconnects.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// The connection to the database server could not be secured or authenticated: the TLS
    /// handshake failed (a certificate not trusted, expired or for another host; the server
    /// offers no TLS where `sslmode` requires it, or wants a client certificate), or the server
    /// refused the credentials (a wrong password, no `pg_hba.conf` entry). Unlike
    /// [`Error::Unavailable`], retrying the same settings will not help.
    #[error("cannot secure or authenticate the connection: {0}")]
    Auth(String),
    /// The call's cancel token fired, or its deadline passed, while the call waited (for a
    /// lock, a connection or the server; see [`crate::Cancel`]): nothing was written.
    #[error("cancelled: {0}")]
    Cancelled(String),
    /// Internal to the write path, never returned by the agent: an optimistic write found the
    /// stored version moved since the state it was computed from; nothing was written, and the
    /// write is retried under a lock (see `store::Transactions::optimistic`).
    #[error("storage error: the state changed during an optimistic write (internal; retried)")]
    Stale,
}
