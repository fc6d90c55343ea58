//! PostgreSQL's failures as the library's error kinds.

use crate::error::Error;

/// What a failed statement means for the connection it ran on.
pub(super) enum Fault {
    /// The server answered with an error: the connection is usable (after a rollback, inside a
    /// transaction).
    Answered(Error),
    /// The connection is gone (or in a state no one can tell): discard it.
    Lost(Error),
}

impl Fault {
    pub fn error(self) -> Error {
        match self {
            Fault::Answered(e) | Fault::Lost(e) => e,
        }
    }
}

/// The error's text for a message: the server's own message and SQLSTATE, or the client's
/// description with its cause (neither carries the connection's password).
pub(super) fn describe(e: &postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!("{} (SQLSTATE {})", db.message(), db.code().code());
    }
    match std::error::Error::source(e) {
        Some(cause) => format!("{e}: {cause}"),
        None => e.to_string(),
    }
}

/// Classifies a failure of `what` (a phrase such as "cannot read the state").
pub(super) fn classify(e: &postgres::Error, what: &str) -> Fault {
    let Some(db) = e.as_db_error() else {
        return Fault::Lost(Error::Unavailable(format!(
            "{what}: the connection to the PostgreSQL server failed: {}",
            describe(e)
        )));
    };
    let code = db.code().code();
    let text = describe(e);
    match code {
        // Under a lock, as in PostgreSQL's READ COMMITTED, these should not happen; servers that
        // serialize transactions optimistically (CockroachDB) abort some: the caller may retry.
        // (The optimistic commit turns them into Error::Stale, retried under a lock.)
        "40001" | "40P01" => Fault::Answered(Error::Busy(format!(
            "{what}: the server aborted the transaction to resolve a conflict with another; \
             nothing was written, try again ({text})"
        ))),
        "57014" => Fault::Answered(Error::Busy(format!(
            "{what}: the statement took longer than busy_timeout_ms ({text})"
        ))),
        "55P03" => Fault::Answered(Error::Busy(format!(
            "{what}: another connection held the agent's row for longer than busy_timeout_ms \
             ({text})"
        ))),
        // admin_shutdown, crash_shutdown, cannot_connect_now, connection exceptions
        c if c.starts_with("57P") || c.starts_with("08") => Fault::Lost(Error::Unavailable(
            format!("{what}: the PostgreSQL server ended the connection: {text}"),
        )),
        _ => Fault::Answered(Error::Storage(format!("{what}: {text}"))),
    }
}

/// True when the failure was writing to a socket the server had already closed: the request
/// never reached a live server, so it had no effect (whatever it was, a commit included).
pub(super) fn unsent(e: &postgres::Error) -> bool {
    std::error::Error::source(e)
        .and_then(|c| c.downcast_ref::<std::io::Error>())
        .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
}

/// True for a serialization failure or a deadlock: the transaction was aborted, nothing
/// written.
pub(super) fn conflict(e: &postgres::Error) -> bool {
    matches!(e.code().map(|c| c.code()), Some("40001" | "40P01"))
}
