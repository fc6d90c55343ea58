//! PostgreSQL's failures as the library's error kinds.

use std::time::Duration;

use tokio_postgres::error::SqlState;

use crate::error::Error;

/// What a failed statement means for the connection it ran on.
pub(super) enum Fault {
    /// The server answered with an error: the connection is usable (after a rollback, inside a
    /// transaction).
    Answered(Error),
    /// The connection is gone (or in a state no one can tell): discard it.
    Lost(Error),
}

/// A round trip's failure.
#[derive(Debug)]
pub(super) enum PgError {
    /// The client's error, or the server's answer.
    Client(tokio_postgres::Error),
    /// No answer within the client's bound (the handle's `busy_timeout_ms +
    /// server_timeout_ms`): the connection's state is unknown.
    TimedOut(Duration),
    /// The calling thread's cancel token fired (or its deadline passed) while waiting: the
    /// connection's state is unknown (given up); no commit was in flight.
    Cancelled,
}

pub(super) type PgResult<T> = std::result::Result<T, PgError>;

impl From<tokio_postgres::Error> for PgError {
    fn from(e: tokio_postgres::Error) -> PgError {
        PgError::Client(e)
    }
}

impl PgError {
    /// The server's SQLSTATE, when it answered with an error.
    pub fn code(&self) -> Option<&SqlState> {
        match self {
            PgError::Client(e) => e.code(),
            PgError::TimedOut(_) | PgError::Cancelled => None,
        }
    }

    /// True when the wait was given up (no answer in time, or cancelled): not worth a retry.
    pub fn given_up(&self) -> bool {
        matches!(self, PgError::TimedOut(_) | PgError::Cancelled)
    }

    /// True when the server did not answer in time.
    pub fn timed_out(&self) -> bool {
        matches!(self, PgError::TimedOut(_))
    }

    /// What happened, for a message.
    pub fn describe(&self) -> String {
        match self {
            PgError::Client(e) => describe(e),
            PgError::TimedOut(limit) => timed_out_text(*limit),
            PgError::Cancelled => "the call was cancelled".to_string(),
        }
    }
}

/// The text of a round trip that went unanswered after `limit`.
fn timed_out_text(limit: Duration) -> String {
    format!(
        "the PostgreSQL server did not answer within busy_timeout_ms + server_timeout_ms ({} \
         ms)",
        limit.as_millis()
    )
}

/// The error's text for a message: the server's own message and SQLSTATE, or the client's
/// description with its cause (neither carries the connection's password).
pub(super) fn describe(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!("{} (SQLSTATE {})", db.message(), db.code().code());
    }
    match std::error::Error::source(e) {
        Some(cause) => format!("{e}: {cause}"),
        None => e.to_string(),
    }
}

/// True when a connection attempt failed because the connection could not be secured (TLS:
/// see `super::tls`) or the server refused the credentials: SQLSTATE 28P01 (a wrong password)
/// or 28000 (no `pg_hba.conf` entry, a client certificate required). [`Error::Auth`]: unlike
/// an unreachable server, trying again will not help.
pub(super) fn refused(e: &tokio_postgres::Error) -> bool {
    super::tls::secured_failed(e) || matches!(e.code().map(|c| c.code()), Some("28P01" | "28000"))
}

/// The text of a failed connection attempt, with what to do for a server that offers no TLS.
pub(super) fn describe_connect(e: &tokio_postgres::Error) -> String {
    let text = describe(e);
    if text.ends_with("server does not support TLS") {
        return format!(
            "{text}: the server does not offer TLS, and sslmode (require, verify-ca, \
             verify-full) requires it"
        );
    }
    text
}

/// Classifies a failure of `what` (a phrase such as "cannot read the state").
pub(super) fn classify(e: &PgError, what: &str) -> Fault {
    let e = match e {
        PgError::Client(e) => e,
        PgError::Cancelled => {
            return Fault::Lost(crate::cancel::cancelled(&format!(
                "while waiting for the PostgreSQL server ({what})"
            )))
        }
        PgError::TimedOut(_) => {
            return Fault::Lost(Error::Unavailable(
                format!(
                    "{what}: {}, as when it is frozen or the network is cut; the connection was \
                 given up",
                    e.describe()
                )
                .into(),
            ))
        }
    };
    let Some(db) = e.as_db_error() else {
        return Fault::Lost(Error::Unavailable(
            format!(
                "{what}: the connection to the PostgreSQL server failed: {}",
                describe(e)
            )
            .into(),
        ));
    };
    let code = db.code().code();
    let text = describe(e);
    // The server's own error (its SQLSTATE, message, detail) stays behind ours as its source.
    let fault = match code {
        // Under a lock, as in PostgreSQL's READ COMMITTED, these should not happen; servers that
        // serialize transactions optimistically (CockroachDB) abort some: the caller may retry.
        // (The optimistic commit turns them into Error::Stale, retried under a lock.)
        "40001" | "40P01" => Fault::Answered(Error::Busy(
            format!(
                "{what}: the server aborted the transaction to resolve a conflict with another; \
             nothing was written, try again ({text})"
            )
            .into(),
        )),
        // This library sets no statement_timeout: the server's or the role's own setting, or
        // an administrator's pg_cancel_backend, cancelled the statement.
        "57014" => Fault::Answered(Error::Busy(
            format!(
                "{what}: the server cancelled the statement (its statement_timeout, or an \
             administrator); nothing was written, try again ({text})"
            )
            .into(),
        )),
        "55P03" => Fault::Answered(Error::Busy(
            format!(
                "{what}: another connection held the agent's row for longer than busy_timeout_ms \
             ({text})"
            )
            .into(),
        )),
        // read_only_sql_transaction: the server is a standby, or was demoted by a failover
        // (or is read-only by default). Every connection to it is as useless for writing: the
        // pool drops them, and the next connection goes to a server that takes writes, if
        // target_session_attrs asks for one. Nothing was written.
        "25006" => Fault::Lost(Error::Unavailable(
            format!(
                "{what}: the server does not accept writes now (a standby, or demoted by a \
             failover); the connection was dropped, and the next call connects again \
             (target_session_attrs=read-write finds the writable host of a multi-host URI): \
             {text}"
            )
            .into(),
        )),
        // admin_shutdown, crash_shutdown, cannot_connect_now, connection exceptions
        c if c.starts_with("57P") || c.starts_with("08") => Fault::Lost(Error::Unavailable(
            format!("{what}: the PostgreSQL server ended the connection: {text}").into(),
        )),
        _ => Fault::Answered(Error::Storage(format!("{what}: {text}").into())),
    };
    match fault {
        Fault::Answered(e) => Fault::Answered(e.with_source(db.clone())),
        Fault::Lost(e) => Fault::Lost(e.with_source(db.clone())),
    }
}

/// True when the failure was writing to a socket the server had already closed: the request
/// never reached a live server, so it had no effect (whatever it was, a commit included).
pub(super) fn unsent(e: &PgError) -> bool {
    let PgError::Client(e) = e else {
        return false;
    };
    std::error::Error::source(e)
        .and_then(|c| c.downcast_ref::<std::io::Error>())
        .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
}

/// True when the server refused to write because it is read-only (SQLSTATE 25006): nothing
/// was written.
pub(super) fn read_only(e: &PgError) -> bool {
    matches!(e.code().map(|c| c.code()), Some("25006"))
}

/// True for a serialization failure or a deadlock: the transaction was aborted, nothing
/// written.
pub(super) fn conflict(e: &PgError) -> bool {
    matches!(e.code().map(|c| c.code()), Some("40001" | "40P01"))
}

/// The error of a commit whose outcome cannot be known: the connection was lost after the
/// commit was sent, or the server did not answer it in time.
pub(super) fn unknown_outcome(e: &PgError) -> Error {
    match e {
        PgError::TimedOut(limit) => Error::Unavailable(
            format!(
                "cannot commit: {}: the outcome is unknown; read the state's version to tell",
                timed_out_text(*limit)
            )
            .into(),
        ),
        PgError::Client(_) | PgError::Cancelled => {
            Error::Unavailable(super::sql::UNKNOWN_OUTCOME.to_string().into())
        }
    }
}
