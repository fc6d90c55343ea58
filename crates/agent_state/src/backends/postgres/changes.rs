//! The change log's rows as this backend writes and reads them: an optimistic write's entry
//! sent with its commit ([`PendingLog`]), the pruning bounds of a retention setting, and a
//! logged change read back from its row.

use tokio_postgres::Row;

use super::{opt_text, read_schema, stored_schema, text};
use crate::error::{Error, Result};
use crate::store::{LogRetention, LoggedChange, NewChange};

/// An optimistic write's log entry, ready to be sent with the commit.
pub(super) struct PendingLog {
    /// The retention the change was computed with, as stored.
    pub(super) retention: String,
    pub(super) at_ms: i64,
    pub(super) writer: i64,
    pub(super) patch: Option<String>,
    pub(super) next: String,
    pub(super) prev: Option<String>,
    pub(super) below: Option<i64>,
    pub(super) since: Option<i64>,
    /// The version a schema migration upgraded from (see [`stored_schema`]).
    pub(super) migrated_from: Option<i32>,
}

impl PendingLog {
    pub(super) fn new(change: &NewChange<'_>, retention: LogRetention) -> Result<PendingLog> {
        let (below, since) = prune_bounds(change, retention);
        Ok(PendingLog {
            retention: text(&retention.to_json())?.to_string(),
            at_ms: change.at_ms,
            writer: change.writer as i64,
            patch: opt_text(change.patch)?.map(str::to_string),
            next: text(change.next.json())?.to_string(),
            prev: opt_text(change.prev)?.map(str::to_string),
            below,
            since,
            migrated_from: change.migrated_from.map(stored_schema),
        })
    }
}

/// The pruning bounds of `retention` after `change`: delete versions up to the first (when
/// keep_last), and entries older than the second (ms, when keep_seconds).
pub(super) fn prune_bounds(
    change: &NewChange<'_>,
    retention: LogRetention,
) -> (Option<i64>, Option<i64>) {
    let below = retention
        .keep_last
        .map(|keep| change.version.saturating_sub(keep.max(1)) as i64);
    let since = retention
        .keep_seconds
        .map(|s| change.at_ms.saturating_sub(s.saturating_mul(1000) as i64));
    (below, since)
}

/// `keep_last` and `keep_seconds` in milliseconds, as statement parameters.
pub(super) fn keep_bounds(retention: LogRetention) -> (Option<i64>, Option<i64>) {
    (
        retention.keep_last.map(|n| n.max(1) as i64),
        retention
            .keep_seconds
            .map(|s| s.saturating_mul(1000).min(i64::MAX as u64) as i64),
    )
}

pub(super) fn retention(text: Option<String>) -> Result<Option<LogRetention>> {
    match text {
        None => Ok(None),
        Some(t) => LogRetention::from_json(t.as_bytes())
            .map(Some)
            .map_err(|e| Error::Corrupt(format!("the change log settings: {e}"))),
    }
}

pub(super) fn row_to_change(r: &Row) -> LoggedChange {
    LoggedChange {
        version: r.get::<_, i64>(0) as u64,
        at_ms: r.get(1),
        writer: r.get::<_, i64>(2) as u64,
        patch: r.get::<_, Option<String>>(3).map(String::into_bytes),
        next: r.get::<_, Option<String>>(4).map(String::into_bytes),
        prev: r.get::<_, Option<String>>(5).map(String::into_bytes),
        schema: read_schema(r.get(6)),
        migrated_from: r.get::<_, Option<i32>>(7).map(read_schema),
    }
}
