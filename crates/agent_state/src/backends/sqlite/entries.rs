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
use crate::store::{LogRetention, LoggedChange, NewChange};

/// A small state's full copy is stored in the log at least at every this many versions (a large
/// state's at each of its bases, at most [`MAX_PATCHES`](crate::store::MAX_PATCHES) apart):
/// with those, the most patches replayed to rebuild a logged state.
pub const CHECKPOINT_EVERY: u64 = 32;

/// Pruning runs at every this many versions, deleting in one statement what retention no
/// longer keeps (reads hide it meanwhile).
const PRUNE_EVERY: u64 = 16;

/// The SQL condition that change `c` is kept by `retention`, whose `keep_last` / `keep_ms` are
/// the SQL expressions given (NULL when unset) relative to the newest change (`newest`,
/// `newest_at`): among the last `keep_last`, and no older than `keep_ms` before the newest,
/// which is always kept. The same rule as pruning each change as it is logged, which is what
/// reads must show.
///
/// With `keep_last` set, the condition on the version is a bare range (`c.version > ...`), which
/// SQLite finds in the table's key; wrapped in `keep_last IS NULL OR ...` it would read every
/// entry of the agent instead (a thousand, at each prune). Unset, it is `keep_last IS NULL`
/// (true), so that the statement binds the same parameters either way.
fn visible(
    c: &str,
    newest: &str,
    newest_at: &str,
    (keep_last, keep_ms): (&str, &str),
    retention: LogRetention,
) -> String {
    let by_version = if retention.keep_last.is_some() {
        format!("{c}.version > {newest} - {keep_last}")
    } else {
        format!("{keep_last} IS NULL")
    };
    format!(
        "{by_version} AND \
         ({keep_ms} IS NULL OR {c}.at_ms >= {newest_at} - {keep_ms} OR {c}.version = {newest})"
    )
}

/// `keep_last` and `keep_seconds` in milliseconds, as SQL parameters.
fn bounds(retention: LogRetention) -> (Option<i64>, Option<i64>) {
    (
        retention.keep_last.map(|n| n.max(1) as i64),
        retention
            .keep_seconds
            .map(|s| s.saturating_mul(1000) as i64),
    )
}

/// Schemas 1 and 2: the key of the state entry in `agent_kv`.
const OLD_STATE_KEY: &str = "__agent_state";
/// Schemas 1 and 2: the key of the change log's retention settings in `agent_kv`.
const OLD_CHANGE_LOG_KEY: &str = "__agent_change_log";

impl Sqlite {
    /// Reads the agent's state and its version, if a state is stored, from a store of a schema
    /// before 5 (which stored the whole state at every write; see `delta` for schema 5).
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

    /// The version the agent's first write takes: one above its tombstone's, if it was deleted.
    pub(super) fn first_version(&self, agent: &str) -> Result<u64> {
        if self.schema < 4 {
            return Ok(1);
        }
        let deleted: i64 = self
            .conn()?
            .prepare_cached("SELECT version FROM agent_deleted WHERE id_hash = ?1")?
            .query_row([crate::store::id_hash(agent)], |r| r.get(0))
            .optional()?
            .unwrap_or(0);
        Ok(deleted as u64 + 1)
    }

    /// Appends a change to the agent's log (`based`: the write stored the state's base). A
    /// merge's full state is stored only at checkpoints (see below) and when the change before
    /// it is not logged (the log was just switched on): otherwise its patch is what the log
    /// holds, a few dozen bytes instead of the whole state. Every [`PRUNE_EVERY`]th change deletes, in one statement, what
    /// `retention` no longer keeps except the stored state that the oldest kept change is
    /// rebuilt from; until then, reads hide it (see [`visible`]).
    pub(super) fn log_change(
        &self,
        agent: &str,
        change: &NewChange<'_>,
        retention: LogRetention,
        based: bool,
    ) -> Result<()> {
        let fail = |e| self.storage_err("cannot write the change log", e);
        // A large state's checkpoints are the writes that stored its base (at most
        // `max_patches` apart, see `delta`): the log's full copies cost nothing more than the
        // state's own. A small state, written whole each time, checkpoints the log every
        // `CHECKPOINT_EVERY` versions.
        let checkpoint = if change.next.len() > super::delta::INLINE_MAX {
            based
        } else {
            change.version.is_multiple_of(CHECKPOINT_EVERY)
        };
        let full = change.patch.is_none()
            || checkpoint
            || !(change.prev_logged || self.logged(agent, change.version.saturating_sub(1))?);
        self.conn()?
            .prepare_cached(
                "INSERT OR REPLACE INTO agent_changes
                 (agent, version, at_ms, writer, patch, next, prev, schema, migrated_from)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )?
            .execute(rusqlite::params![
                agent,
                change.version as i64,
                change.at_ms,
                change.writer as i64,
                super::blob(change.patch),
                super::blob(full.then(|| change.next.json())),
                super::blob(change.prev),
                i64::from(change.schema),
                change.migrated_from.map(i64::from)
            ])
            .map_err(fail)?;
        if change.version.is_multiple_of(PRUNE_EVERY) {
            let (keep_last, keep_ms) = bounds(retention);
            self.conn()?
                .prepare_cached(&format!(
                    // One bound on the version, the lesser of the two (a NULL one deletes
                    // nothing): given as two terms, SQLite may range over the first, the base,
                    // which a state stored whole keeps at its newest version, and so read
                    // every entry of the agent at each prune.
                    "DELETE FROM agent_changes WHERE agent = ?1
                     AND version < min(
                       (SELECT base FROM agent_state WHERE agent = ?1) + 1,
                       (SELECT max(b.version) FROM agent_changes b
                        WHERE b.agent = ?1 AND b.next IS NOT NULL AND b.version <= (
                          SELECT min(c.version) FROM agent_changes c
                          WHERE c.agent = ?1 AND {})))",
                    visible("c", "?2", "?3", ("?4", "?5"), retention)
                ))?
                .execute(rusqlite::params![
                    agent,
                    change.version as i64,
                    change.at_ms,
                    keep_last,
                    keep_ms
                ])
                .map_err(fail)?;
        }
        Ok(())
    }

    /// True when the agent's log holds the change that made `version`.
    fn logged(&self, agent: &str, version: u64) -> Result<bool> {
        Ok(self
            .conn()?
            .prepare_cached("SELECT 1 FROM agent_changes WHERE agent = ?1 AND version = ?2")?
            .query_row(rusqlite::params![agent, version as i64], |_| Ok(()))
            .optional()?
            .is_some())
    }

    /// The agent's logged changes with a version above `after` that `retention` keeps, oldest
    /// first.
    pub(super) fn changes_after(
        &self,
        agent: &str,
        after: u64,
        retention: LogRetention,
    ) -> Result<Vec<LoggedChange>> {
        self.kept_changes(agent, "c.version > ?2", after, retention)
    }

    /// The agent's logged change that made `version`, if `retention` keeps it.
    pub(super) fn change_at(
        &self,
        agent: &str,
        version: u64,
        retention: LogRetention,
    ) -> Result<Option<LoggedChange>> {
        Ok(self
            .kept_changes(agent, "c.version = ?2", version, retention)?
            .pop())
    }

    /// The kept changes (see [`visible`]) with versions matching `filter` (on `?2`).
    fn kept_changes(
        &self,
        agent: &str,
        filter: &str,
        version: u64,
        retention: LogRetention,
    ) -> Result<Vec<LoggedChange>> {
        let (keep_last, keep_ms) = bounds(retention);
        let sql = match self.schema {
            1 => return Ok(Vec::new()),
            // A version-2 store (read-only) was pruned exactly: all it holds is kept.
            2 => format!(
                "SELECT version, at_ms, writer, patch, next, prev, 0, NULL FROM agent_changes c
                 WHERE {filter} AND ?1 IS NOT NULL AND ?3 IS ?3 AND ?4 IS ?4 ORDER BY version"
            ),
            _ => format!(
                "SELECT c.version, c.at_ms, c.writer, c.patch, c.next, c.prev, {cols}
                 FROM agent_changes c,
                      (SELECT version AS v, at_ms AS t FROM agent_changes WHERE agent = ?1
                       ORDER BY version DESC LIMIT 1) n
                 WHERE c.agent = ?1 AND {filter} AND {}
                 ORDER BY c.version",
                visible("c", "n.v", "n.t", ("?3", "?4"), retention),
                cols = self.schema_columns(true)
            ),
        };
        let mut stmt = self.conn()?.prepare_cached(&sql)?;
        let rows = stmt.query_map(
            rusqlite::params![agent, version as i64, keep_last, keep_ms],
            row_to_change,
        )?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// The agent's logged changes from the newest one at or below `version` that holds its
    /// full state through `version`, kept or not.
    pub(super) fn replay_to(&self, agent: &str, version: u64) -> Result<Vec<LoggedChange>> {
        let sql = match self.schema {
            1 => return Ok(Vec::new()),
            2 => "SELECT version, at_ms, writer, patch, next, prev, 0, NULL FROM agent_changes
                 WHERE version = ?2 AND ?1 IS NOT NULL"
                .to_string(),
            _ => format!(
                "SELECT version, at_ms, writer, patch, next, prev, {} FROM agent_changes
                 WHERE agent = ?1 AND version <= ?2 AND version >= (
                   SELECT max(version) FROM agent_changes
                   WHERE agent = ?1 AND version <= ?2 AND next IS NOT NULL)
                 ORDER BY version",
                self.schema_columns(false)
            ),
        };
        let mut stmt = self.conn()?.prepare_cached(&sql)?;
        let rows = stmt.query_map(rusqlite::params![agent, version as i64], row_to_change)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// The columns of an entry's schema version and the version a migration upgraded from
    /// (of the table aliased `c` when `aliased`): constants before schema 6, which stored none
    /// (a read-only handle reads an older file as it is).
    fn schema_columns(&self, aliased: bool) -> &'static str {
        match (self.schema >= 6, aliased) {
            (false, _) => "0, NULL",
            (true, false) => "schema, migrated_from",
            (true, true) => "c.schema, c.migrated_from",
        }
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
        next: match r.get_ref(4)? {
            rusqlite::types::ValueRef::Null => None,
            v => Some(v.as_bytes()?.to_vec()),
        },
        prev: match r.get_ref(5)? {
            rusqlite::types::ValueRef::Null => None,
            v => Some(v.as_bytes()?.to_vec()),
        },
        schema: r.get(6)?,
        migrated_from: r.get(7)?,
    })
}
