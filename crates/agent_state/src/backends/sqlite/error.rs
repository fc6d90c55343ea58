//! SQLite's failures as the library's error kinds: the one place that knows what a `rusqlite`
//! error means (the core's [`Error`] knows no backend).

use std::path::Path;

use crate::error::{Detail, Error};

/// A lock held by another connection for longer than the busy timeout is [`Error::Busy`], which
/// a caller may retry; anything else (I/O, a full disk, a read-only or corrupt file, a file of
/// another application) is [`Error::Storage`].
impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Self {
        use rusqlite::ErrorCode;
        match e.sqlite_error_code() {
            Some(ErrorCode::DatabaseBusy) | Some(ErrorCode::DatabaseLocked) => {
                Error::Busy(Detail::with_source(
                    format!("the store is locked by another connection ({e})"),
                    e,
                ))
            }
            _ => Error::Storage(Detail::with_source(e.to_string(), e)),
        }
    }
}

/// `e`, met doing `what` on the store at `path`, as an error whose message names the file and
/// the step (a busy store's message is already complete).
pub(super) fn storage(path: &Path, what: &str, e: rusqlite::Error) -> Error {
    match Error::from(e) {
        Error::Storage(m) => Error::Storage(m.map(|m| format!("{}: {what}: {m}", path.display()))),
        other => other,
    }
}
