//! A store file's agents as a whole: listing, deletion with erasure, expiry ([`Agents`]), on a
//! connection of their own.
//!
//! **Erasure.** Every writing connection has `secure_delete` on (see `schema`), so the cells
//! and pages a deletion frees are overwritten with zeros in the database, as are those that
//! each earlier write of a state freed. What remains are the WAL's frames: older images of
//! the pages, holding earlier states. After a deletion commits, a `TRUNCATE` checkpoint
//! copies the WAL into the database and empties it; it waits (up to the busy timeout) for
//! other connections' reads to end, and if one outlasts it, the call fails with
//! [`Error::Busy`] saying the agent is deleted but its bytes not yet erased (deleting it again
//! erases them).
//!
//! **Versions.** A deletion leaves the agent's tombstone (the hash of its id and the deleted
//! version); its next first write takes the version after it
//! ([`StoredState::first_version`](crate::store::StoredState::first_version)).

use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::types::Value as SqlValue;
use rusqlite::OptionalExtension;

use super::{busy, Sqlite};
use crate::cancel;
use crate::error::{Error, Result};
use crate::store::{grain_of, now_ms, AgentInfo, AgentQuery, Agents, StoreOptions};

/// A connection to a store file for its agents as a whole.
pub struct SqliteAgents {
    conn: Sqlite,
    busy_timeout: Duration,
}

impl SqliteAgents {
    /// Opens the store file at `path`, which must exist (listing or deleting never creates a
    /// store).
    pub fn open(path: &Path, options: &StoreOptions) -> Result<SqliteAgents> {
        Ok(SqliteAgents {
            conn: open_existing(path, options, "list or delete")?,
            busy_timeout: options.busy_timeout,
        })
    }

    fn during<T>(&self, f: impl FnOnce(&Sqlite) -> Result<T>) -> Result<T> {
        busy::during(self.busy_timeout, || f(&self.conn))
    }
}

/// Opens a connection of its own to the existing store file at `path`, for its agents as a
/// whole (to `what` them: the error's words), never creating one: an in-memory store is
/// refused ([`Error::InvalidArgument`]: it is private to its handle), a missing file or a
/// store too old to list is [`Error::Storage`].
pub(super) fn open_existing(path: &Path, options: &StoreOptions, what: &str) -> Result<Sqlite> {
    if path.as_os_str() == ":memory:" {
        return Err(Error::InvalidArgument(format!(
            "an in-memory store is private to its handle: it has no agents to {what} from \
                 another connection"
        )));
    }
    if !path.exists() {
        return Err(Error::Storage(
            format!("{}: no agent store here", path.display()).into(),
        ));
    }
    let conn = Sqlite::open(path, options)?;
    if conn.schema() < super::schema::AGENTS_SCHEMA {
        return Err(Error::Storage(
            format!(
                "{}: this store predates listing and deletion (schema version {}); open it \
                 once for writing to upgrade it",
                path.display(),
                conn.schema()
            )
            .into(),
        ));
    }
    Ok(conn)
}

impl Agents for SqliteAgents {
    fn list_agents(&self, query: &AgentQuery) -> Result<Vec<AgentInfo>> {
        self.during(|c| c.list_agents(query))
    }

    fn delete_agent(&self, id: &str, allow: &dyn Fn(u64) -> Result<()>) -> Result<Option<u64>> {
        let deleted = self.during(|c| c.in_write(|c| c.delete_one(id, Some(allow), None)))?;
        // Also when nothing was stored: a deletion whose erasure a reader held up is finished.
        self.during(|c| c.erase(self.busy_timeout))?;
        Ok(deleted)
    }

    fn expire_agents(&self, before_ms: i64, limit: usize, dry_run: bool) -> Result<Vec<AgentInfo>> {
        if dry_run {
            return self.during(|c| c.idle_agents(before_ms, limit));
        }
        let expired = self.during(|c| {
            c.in_write(|c| {
                let mut expired = Vec::new();
                for agent in c.idle_agents(before_ms, limit)? {
                    if c.delete_one(&agent.id, None, Some(before_ms))?.is_some() {
                        expired.push(agent);
                    }
                }
                Ok(expired)
            })
        })?;
        if !expired.is_empty() {
            self.during(|c| c.erase(self.busy_timeout))?;
        }
        Ok(expired)
    }
}

const COLUMNS: &str = "agent, version, bytes, written_ms";

fn info(r: &rusqlite::Row<'_>) -> rusqlite::Result<AgentInfo> {
    Ok(AgentInfo {
        id: r.get(0)?,
        version: r.get::<_, i64>(1)? as u64,
        bytes: r.get::<_, i64>(2)? as u64,
        written_ms: r.get(3)?,
    })
}

impl Sqlite {
    /// Runs `f` in a write transaction, committed when it succeeds.
    fn in_write<T>(&self, f: impl FnOnce(&Sqlite) -> Result<T>) -> Result<T> {
        self.begin_write()?;
        match f(self) {
            Ok(v) => {
                self.commit()?;
                Ok(v)
            }
            Err(e) => {
                self.rollback();
                Err(e)
            }
        }
    }

    /// One page of the listing: a range of the primary key's index, so it costs what it holds.
    pub(super) fn list_agents(&self, query: &AgentQuery) -> Result<Vec<AgentInfo>> {
        let mut sql = format!("SELECT {COLUMNS} FROM agent_state WHERE version > 0");
        let mut params: Vec<SqlValue> = Vec::new();
        if let Some((start, exclusive)) = query.start() {
            params.push(SqlValue::Text(start.to_string()));
            let op = if exclusive { ">" } else { ">=" };
            sql += &format!(" AND agent {op} ?{}", params.len());
        }
        if let Some(end) = query.prefix_end() {
            params.push(SqlValue::Text(end));
            sql += &format!(" AND agent < ?{}", params.len());
        }
        params.push(SqlValue::Integer(query.limit as i64));
        sql += &format!(" ORDER BY agent LIMIT ?{}", params.len());
        let mut stmt = self.conn()?.prepare_cached(&sql)?;
        let rows = stmt.query_map(rusqlite::params_from_iter(params), info)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// At most `limit` agents last written before `before_ms`, the longest idle first: a range
    /// of the index on `written_grain` (which is never later than the exact time).
    fn idle_agents(&self, before_ms: i64, limit: usize) -> Result<Vec<AgentInfo>> {
        let mut stmt = self.conn()?.prepare_cached(&format!(
            "SELECT {COLUMNS} FROM agent_state
             WHERE written_grain <= ?1 AND written_ms < ?2 AND version > 0
             ORDER BY written_grain, agent LIMIT ?3"
        ))?;
        let rows = stmt.query_map(
            rusqlite::params![grain_of(before_ms), before_ms, limit as i64],
            info,
        )?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// Inside a write transaction: deletes agent `id` (see [`Agents::delete_agent`]); with
    /// `idle_before`, only if it was last written before then.
    fn delete_one(
        &self,
        id: &str,
        allow: Option<&dyn Fn(u64) -> Result<()>>,
        idle_before: Option<i64>,
    ) -> Result<Option<u64>> {
        let fail = |e| self.storage_err("cannot delete the agent", e);
        let row = self
            .conn()?
            .prepare_cached(
                "SELECT version, version > 0, change_log IS NOT NULL, written_ms
                 FROM agent_state WHERE agent = ?1",
            )?
            .query_row([id], |r| {
                Ok((
                    r.get::<_, i64>(0)? as u64,
                    r.get::<_, bool>(1)?,
                    r.get::<_, bool>(2)?,
                    r.get::<_, i64>(3)?,
                ))
            })
            .optional()?;
        let stored = row.filter(|r| r.1).map(|r| r.0);
        if let Some(allow) = allow {
            allow(stored.unwrap_or(0))?;
        }
        let (Some(version), Some((_, _, keeps_log, written))) = (stored, row) else {
            return Ok(None);
        };
        if idle_before.is_some_and(|before| written >= before) {
            return Ok(None);
        }
        self.note_commit(id, 0);
        let conn = self.conn()?;
        for sql in [
            "DELETE FROM agent_changes WHERE agent = ?1",
            "DELETE FROM agent_base WHERE agent = ?1",
        ] {
            conn.prepare_cached(sql)?.execute([id]).map_err(fail)?;
        }
        if keeps_log {
            let now = now_ms();
            conn.prepare_cached(
                "UPDATE agent_state SET value = NULL, version = 0, base = 0, tail = 0, bytes = 0,
                 schema = 0, written_ms = ?2, written_grain = ?3 WHERE agent = ?1",
            )?
            .execute(rusqlite::params![id, now, grain_of(now)])
            .map_err(fail)?;
        } else {
            conn.prepare_cached("DELETE FROM agent_state WHERE agent = ?1")?
                .execute([id])
                .map_err(fail)?;
        }
        conn.prepare_cached(
            "INSERT INTO agent_deleted (id_hash, version) VALUES (?1, ?2)
             ON CONFLICT (id_hash) DO UPDATE SET version = max(version, excluded.version)",
        )?
        .execute(rusqlite::params![crate::store::id_hash(id), version as i64])
        .map_err(fail)?;
        Ok(Some(version))
    }

    /// Empties the WAL into the database (whose freed pages `secure_delete` zeroed), waiting up
    /// to `timeout` for other connections' reads to end.
    fn erase(&self, timeout: Duration) -> Result<()> {
        let started = Instant::now();
        loop {
            let busy: i64 = self
                .conn()?
                .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))
                .map_err(|e| self.storage_err("cannot erase the deleted agent from the WAL", e))?;
            if busy == 0 {
                return Ok(());
            }
            if cancel::current().is_some_and(|t| t.is_cancelled()) || started.elapsed() >= timeout {
                return Err(Error::Busy(
                    format!(
                        "{}: the agent was deleted, but another connection's read kept earlier \
                     copies of its pages in the WAL past the busy timeout; delete it again to \
                     erase them",
                        self.path.display()
                    )
                    .into(),
                ));
            }
            std::thread::sleep(cancel::POLL.min(Duration::from_millis(10)));
        }
    }
}
