//! The entries of an agent store: each agent's state, version and change-log setting (one row
//! of `agent_state`), and its change log (rows of `agent_changes`). All of it runs inside the
//! caller's transaction. `agent` is the agent's key: its `agent_id`, or `""` for the file's
//! single agent.
//!
//! A store of an older schema is only ever read here (opening one for writing upgrades it
//! first, see `schema`), and only for its single agent (named agents are refused when such a
//! store is opened): its entries are then read from the old layout, `agent` unused.

use rusqlite::OptionalExtension;

use super::Sqlite;
use crate::error::{Error, Result};
use crate::store::{LogRetention, LoggedChange};

/// Schemas 1 and 2: the key of the state entry in `agent_kv`.
const OLD_STATE_KEY: &str = "__agent_state";
/// Schemas 1 and 2: the key of the change log's retention settings in `agent_kv`.
const OLD_CHANGE_LOG_KEY: &str = "__agent_change_log";

impl Sqlite {
    /// Reads the agent's state and its version, if a state is stored.
    pub(super) fn read_state(&self, agent: &str) -> Result<Option<(Vec<u8>, u64)>> {
        let (sql, key) = match self.schema {
            1 => (
                "SELECT value, 1 FROM agent_kv WHERE key = ?1",
                OLD_STATE_KEY,
            ),
            2 => (
                "SELECT value, version FROM agent_kv WHERE key = ?1",
                OLD_STATE_KEY,
            ),
            _ => (
                "SELECT value, version FROM agent_state WHERE agent = ?1 AND value IS NOT NULL",
                agent,
            ),
        };
        let mut stmt = self.conn()?.prepare_cached(sql)?;
        Ok(stmt
            .query_row([key], |r| {
                Ok((
                    r.get_ref(0)?.as_bytes()?.to_vec(),
                    r.get::<_, i64>(1)? as u64,
                ))
            })
            .optional()?)
    }

    /// The agent's version (0: nothing stored) and its change log's retention, without the
    /// state (schema 3).
    pub(super) fn head(&self, agent: &str) -> Result<(u64, Option<LogRetention>)> {
        let mut stmt = self
            .conn()?
            .prepare_cached("SELECT version, change_log FROM agent_state WHERE agent = ?1")?;
        let row = stmt
            .query_row([agent], |r| {
                Ok((
                    r.get::<_, i64>(0)? as u64,
                    match r.get_ref(1)? {
                        rusqlite::types::ValueRef::Null => None,
                        v => Some(v.as_bytes()?.to_vec()),
                    },
                ))
            })
            .optional()?;
        match row {
            None => Ok((0, None)),
            Some((version, log)) => Ok((version, parse_retention(log)?)),
        }
    }

    /// Stores the agent's state and its version (inside the caller's transaction).
    pub(super) fn write_state(&self, agent: &str, value: &[u8], version: u64) -> Result<()> {
        // UPDATE first: after the first write it is all there is to do, and cheaper than an
        // upsert's extra uniqueness probe.
        let updated = self
            .conn()?
            .prepare_cached("UPDATE agent_state SET value = ?2, version = ?3 WHERE agent = ?1")?
            .execute(rusqlite::params![agent, value, version as i64])
            .map_err(|e| self.storage_err("cannot write", e))?;
        if updated == 0 {
            self.conn()?
                .prepare_cached(
                    "INSERT INTO agent_state (agent, value, version) VALUES (?1, ?2, ?3)",
                )?
                .execute(rusqlite::params![agent, value, version as i64])
                .map_err(|e| self.storage_err("cannot write", e))?;
        }
        Ok(())
    }

    /// Appends a change to the agent's log and prunes what `retention` no longer keeps: beyond
    /// the last `keep_last` entries, and entries older than `keep_seconds` before this change.
    /// The entry just written is always kept.
    pub(super) fn log_change(
        &self,
        agent: &str,
        change: &LoggedChange,
        retention: LogRetention,
    ) -> Result<()> {
        let keep_last = retention.keep_last;
        let keep_since_ms = retention
            .keep_seconds
            .map(|s| change.at_ms.saturating_sub(s.saturating_mul(1000) as i64));
        let fail = |e| self.storage_err("cannot write the change log", e);
        self.conn()?
            .prepare_cached(
                "INSERT OR REPLACE INTO agent_changes
                 (agent, version, at_ms, writer, patch, next, prev)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?
            .execute(rusqlite::params![
                agent,
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
                .prepare_cached("DELETE FROM agent_changes WHERE agent = ?1 AND version <= ?2")?
                .execute(rusqlite::params![agent, below])
                .map_err(fail)?;
        }
        if let Some(since) = keep_since_ms {
            self.conn()?
                .prepare_cached(
                    "DELETE FROM agent_changes WHERE agent = ?1 AND at_ms < ?2 AND version < ?3",
                )?
                .execute(rusqlite::params![agent, since, change.version as i64])
                .map_err(fail)?;
        }
        Ok(())
    }

    /// The agent's logged changes with a version above `after`, oldest first.
    pub(super) fn changes_after(&self, agent: &str, after: u64) -> Result<Vec<LoggedChange>> {
        let sql = match self.schema {
            1 => return Ok(Vec::new()),
            2 => {
                "SELECT version, at_ms, writer, patch, next, prev FROM agent_changes
                 WHERE version > ?1 AND ?2 IS NOT NULL ORDER BY version"
            }
            _ => {
                "SELECT version, at_ms, writer, patch, next, prev FROM agent_changes
                 WHERE agent = ?2 AND version > ?1 ORDER BY version"
            }
        };
        let mut stmt = self.conn()?.prepare_cached(sql)?;
        let rows = stmt.query_map(rusqlite::params![after as i64, agent], row_to_change)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// The agent's logged change that made `version`, if retained.
    pub(super) fn change_at(&self, agent: &str, version: u64) -> Result<Option<LoggedChange>> {
        let sql = match self.schema {
            1 => return Ok(None),
            2 => {
                "SELECT version, at_ms, writer, patch, next, prev FROM agent_changes
                 WHERE version = ?1 AND ?2 IS NOT NULL"
            }
            _ => {
                "SELECT version, at_ms, writer, patch, next, prev FROM agent_changes
                 WHERE agent = ?2 AND version = ?1"
            }
        };
        let mut stmt = self.conn()?.prepare_cached(sql)?;
        Ok(stmt
            .query_row(rusqlite::params![version as i64, agent], row_to_change)
            .optional()?)
    }

    /// The agent's change log retention as stored (`None`: the log is off).
    pub(super) fn log_retention(&self, agent: &str) -> Result<Option<LogRetention>> {
        let (sql, key) = match self.schema {
            1 | 2 => (
                "SELECT value FROM agent_kv WHERE key = ?1",
                OLD_CHANGE_LOG_KEY,
            ),
            _ => ("SELECT change_log FROM agent_state WHERE agent = ?1", agent),
        };
        let mut stmt = self.conn()?.prepare_cached(sql)?;
        // Text or blob alike: what matters is the bytes (the library writes blobs).
        let text = stmt
            .query_row([key], |r| match r.get_ref(0)? {
                rusqlite::types::ValueRef::Null => Ok(None),
                v => Ok(Some(v.as_bytes()?.to_vec())),
            })
            .optional()?
            .flatten();
        parse_retention(text)
    }

    /// Switches the agent's change log on (recording its retention) or off (dropping its log).
    pub(super) fn set_log_retention(
        &self,
        agent: &str,
        retention: Option<LogRetention>,
    ) -> Result<()> {
        let fail = |e| self.storage_err("cannot write", e);
        let setting = retention.map(|r| r.to_json());
        self.conn()?
            .prepare_cached(
                "INSERT INTO agent_state (agent, change_log) VALUES (?1, ?2)
                 ON CONFLICT (agent) DO UPDATE SET change_log = excluded.change_log",
            )?
            .execute(rusqlite::params![agent, setting])
            .map_err(fail)?;
        if retention.is_none() {
            self.conn()?
                .prepare_cached("DELETE FROM agent_changes WHERE agent = ?1")?
                .execute([agent])
                .map_err(fail)?;
        }
        Ok(())
    }
}

fn parse_retention(text: Option<Vec<u8>>) -> Result<Option<LogRetention>> {
    match text {
        None => Ok(None),
        Some(text) => LogRetention::from_json(&text)
            .map(Some)
            .map_err(|e| Error::Corrupt(format!("the change log settings: {e}"))),
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
