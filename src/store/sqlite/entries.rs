//! The entries of an agent store: the state and its version, the change log and its
//! retention. All of it runs inside the caller's transaction.

use rusqlite::OptionalExtension;

use super::Sqlite;
use crate::error::{Error, Result};
use crate::store::{LogRetention, LoggedChange};

/// The key of the state entry.
pub const STATE_KEY: &str = "__agent_state";
/// The key of the change log's retention settings (JSON), present while the log is enabled.
pub const CHANGE_LOG_KEY: &str = "__agent_change_log";

impl Sqlite {
    /// Reads the state entry and its version, if any.
    pub(super) fn read_state(&self) -> Result<Option<(Vec<u8>, u64)>> {
        let sql = if self.schema >= 2 {
            "SELECT value, version FROM agent_kv WHERE key = ?1"
        } else {
            "SELECT value, 1 FROM agent_kv WHERE key = ?1"
        };
        let mut stmt = self.conn()?.prepare_cached(sql)?;
        Ok(stmt
            .query_row([STATE_KEY], |r| {
                Ok((
                    r.get_ref(0)?.as_bytes()?.to_vec(),
                    r.get::<_, i64>(1)? as u64,
                ))
            })
            .optional()?)
    }

    /// Stores the state and its version (inside the caller's transaction).
    pub(super) fn write_state(&self, value: &[u8], version: u64) -> Result<()> {
        // UPDATE first: after the first write it is all there is to do, and cheaper than an
        // upsert's extra uniqueness probe.
        let updated = self
            .conn()?
            .prepare_cached("UPDATE agent_kv SET value = ?2, version = ?3 WHERE key = ?1")?
            .execute(rusqlite::params![STATE_KEY, value, version as i64])
            .map_err(|e| self.storage_err("cannot write", e))?;
        if updated == 0 {
            self.conn()?
                .prepare_cached("INSERT INTO agent_kv (key, value, version) VALUES (?1, ?2, ?3)")?
                .execute(rusqlite::params![STATE_KEY, value, version as i64])
                .map_err(|e| self.storage_err("cannot write", e))?;
        }
        Ok(())
    }

    /// Appends a change to the log and prunes what `retention` no longer keeps: beyond the last
    /// `keep_last` entries, and entries older than `keep_seconds` before this change. The entry
    /// just written is always kept.
    pub(super) fn log_change(&self, change: &LoggedChange, retention: LogRetention) -> Result<()> {
        let keep_last = retention.keep_last;
        let keep_since_ms = retention
            .keep_seconds
            .map(|s| change.at_ms.saturating_sub(s.saturating_mul(1000) as i64));
        let fail = |e| self.storage_err("cannot write the change log", e);
        self.conn()?
            .prepare_cached(
                "INSERT OR REPLACE INTO agent_changes (version, at_ms, writer, patch, next, prev)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?
            .execute(rusqlite::params![
                change.version as i64,
                change.at_ms,
                change.writer as i64,
                change.patch.as_deref(),
                change.next.as_slice(),
                change.prev.as_deref()
            ])
            .map_err(fail)?;
        if let Some(keep) = keep_last {
            let below = change.version.saturating_sub(keep.max(1)) as i64;
            self.conn()?
                .prepare_cached("DELETE FROM agent_changes WHERE version <= ?1")?
                .execute([below])
                .map_err(fail)?;
        }
        if let Some(since) = keep_since_ms {
            self.conn()?
                .prepare_cached("DELETE FROM agent_changes WHERE at_ms < ?1 AND version < ?2")?
                .execute(rusqlite::params![since, change.version as i64])
                .map_err(fail)?;
        }
        Ok(())
    }

    /// Logged changes with a version above `after`, oldest first.
    pub(super) fn changes_after(&self, after: u64) -> Result<Vec<LoggedChange>> {
        if self.schema < 2 {
            return Ok(Vec::new());
        }
        let mut stmt = self.conn()?.prepare_cached(
            "SELECT version, at_ms, writer, patch, next, prev FROM agent_changes
             WHERE version > ?1 ORDER BY version",
        )?;
        let rows = stmt.query_map([after as i64], row_to_change)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// The logged change that made `version`, if retained.
    pub(super) fn change_at(&self, version: u64) -> Result<Option<LoggedChange>> {
        if self.schema < 2 {
            return Ok(None);
        }
        let mut stmt = self.conn()?.prepare_cached(
            "SELECT version, at_ms, writer, patch, next, prev FROM agent_changes WHERE version = ?1",
        )?;
        Ok(stmt.query_row([version as i64], row_to_change).optional()?)
    }

    /// Empties the change log (when it is switched off).
    fn clear_log(&self) -> Result<()> {
        if self.schema >= 2 {
            self.conn()?
                .prepare_cached("DELETE FROM agent_changes")?
                .execute([])
                .map_err(|e| self.storage_err("cannot clear the change log", e))?;
        }
        Ok(())
    }

    /// The change log's retention as stored (`None`: the log is off).
    pub(super) fn log_retention(&self) -> Result<Option<LogRetention>> {
        match self.read(CHANGE_LOG_KEY)? {
            None => Ok(None),
            Some(text) => LogRetention::from_json(&text)
                .map(Some)
                .map_err(|e| Error::Corrupt(format!("the change log settings: {e}"))),
        }
    }

    /// Switches the change log on (recording its retention) or off (dropping the log).
    pub(super) fn set_log_retention(&self, retention: Option<LogRetention>) -> Result<()> {
        match retention {
            Some(r) => self.write(CHANGE_LOG_KEY, &r.to_json()),
            None => {
                self.delete(CHANGE_LOG_KEY)?;
                self.clear_log()
            }
        }
    }

    /// Reads the value stored under `key`, if any.
    fn read(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let mut stmt = self
            .conn()?
            .prepare_cached("SELECT value FROM agent_kv WHERE key = ?1")?;
        // Text or blob alike: what matters is the bytes (the library writes blobs).
        Ok(stmt
            .query_row([key], |r| Ok(r.get_ref(0)?.as_bytes()?.to_vec()))
            .optional()?)
    }

    /// Stores `value` under `key` (inside the caller's transaction).
    fn write(&self, key: &str, value: &[u8]) -> Result<()> {
        self.conn()?
            .prepare_cached(
                "INSERT INTO agent_kv (key, value) VALUES (?1, ?2)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            )?
            .execute(rusqlite::params![key, value])
            .map_err(|e| self.storage_err("cannot write", e))?;
        Ok(())
    }

    /// Deletes the entry under `key` (inside the caller's transaction).
    fn delete(&self, key: &str) -> Result<()> {
        self.conn()?
            .prepare_cached("DELETE FROM agent_kv WHERE key = ?1")?
            .execute([key])
            .map_err(|e| self.storage_err("cannot write", e))?;
        Ok(())
    }
}

fn row_to_change(r: &rusqlite::Row<'_>) -> rusqlite::Result<LoggedChange> {
    Ok(LoggedChange {
        version: r.get::<_, i64>(0)? as u64,
        at_ms: r.get(1)?,
        writer: r.get::<_, i64>(2)? as u64,
        patch: match r.get_ref(3)? {
            rusqlite::types::ValueRef::Null => None,
            v => Some(v.as_bytes()?.to_vec()),
        },
        next: r.get_ref(4)?.as_bytes()?.to_vec(),
        prev: match r.get_ref(5)? {
            rusqlite::types::ValueRef::Null => None,
            v => Some(v.as_bytes()?.to_vec()),
        },
    })
}
