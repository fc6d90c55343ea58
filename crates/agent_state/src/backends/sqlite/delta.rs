//! A state as its base and the patches after it (schema 5): what a write stores, what a read
//! merges. All of it runs inside the caller's transaction.
//!
//! **Layout.** The agent's row of `agent_state` is its head: the version, `base` (the version
//! of the newest full copy), `tail` (the bytes of the patches stored since), `bytes` (the
//! current state's size) and, for a state of at most [`INLINE_MAX`] bytes, the full copy itself
//! (`value`). A larger state's full copy is the row of `agent_base`, so that the head row stays
//! small: SQLite rewrites a whole row to change one column of it, and a 300 KiB row rewritten to
//! bump a version would cost what rewriting the state costs. The patches of the versions after
//! `base` are rows of `agent_changes` (its `patch` column), the same rows as the change log's
//! when the log is on: a logged write stores one patch, not a patch and a state.
//!
//! **When the full state is written.** A state of at most [`INLINE_MAX`] bytes is always written
//! whole, in the head row (one page, as cheap as a patch row and a head update); a larger one
//! stores the write's patch, unless it is a replacement, the agent's first write, or the patches
//! since the base would outweigh the state or number more than
//! [`max_patches`](crate::store::max_patches) allows. With the log off, a new base deletes the patches
//! before it.

use rusqlite::OptionalExtension;

use super::Sqlite;
use crate::error::{Error, Result};
use crate::store::{max_patches, LogRetention, NewChange, StoredRead};

/// The largest state kept in the head row, written whole at every write (see the module's
/// comment): below a page, a patch row would cost as much as the state.
pub(super) const INLINE_MAX: usize = crate::store::SMALL_STATE;

/// The head row as a write finds it: what the handle knows from its own last write, or read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Head {
    pub version: u64,
    pub base: u64,
    pub tail: u64,
    /// The base is in the head row (`value`), not in `agent_base`.
    pub inline: bool,
}

impl Sqlite {
    /// The agent's stored state as its base and patches (see [`StoredRead`]); only the patches
    /// after `have` when the store holds them all.
    pub(super) fn read_stored(&self, agent: &str, have: Option<u64>) -> Result<Option<StoredRead>> {
        if self.schema < 5 {
            return Ok(self.read_state(agent)?.map(|(value, version)| StoredRead {
                version,
                // Before schema 6 no schema version was stored.
                schema: 0,
                base: Some((value, version)),
                patches: Vec::new(),
            }));
        }
        let conn = self.conn()?;
        // A read-only handle on a schema-5 file: no schema versions stored (0).
        let sql = if self.schema >= 6 {
            "SELECT version, base, schema FROM agent_state WHERE agent = ?1"
        } else {
            "SELECT version, base, 0 FROM agent_state WHERE agent = ?1"
        };
        let head = conn
            .prepare_cached(sql)?
            .query_row([agent], |r| {
                Ok((
                    r.get::<_, i64>(0)? as u64,
                    r.get::<_, i64>(1)? as u64,
                    r.get::<_, u32>(2)?,
                ))
            })
            .optional()?;
        let Some((version, base, schema)) = head.filter(|h| h.0 > 0) else {
            return Ok(None);
        };
        // Only a cache that is behind catches up by patches: one at the stored version is
        // read again whole, which also sees a write made behind the library's back.
        let from = match have {
            Some(have) if have >= base && have < version => have,
            _ => base,
        };
        let base_copy = if from == base {
            let value: Option<Vec<u8>> = conn
                .prepare_cached(
                    "SELECT coalesce(s.value, b.value) FROM agent_state s
                     LEFT JOIN agent_base b ON b.agent = s.agent WHERE s.agent = ?1",
                )?
                // Text or blob alike: what matters is the bytes (the library writes blobs).
                .query_row([agent], |r| match r.get_ref(0)? {
                    rusqlite::types::ValueRef::Null => Ok(None),
                    v => Ok(Some(v.as_bytes()?.to_vec())),
                })?;
            let value = value.ok_or_else(|| {
                Error::Corrupt(format!(
                    "the state of version {version}: its full copy (version {base}) is missing"
                ))
            })?;
            Some((value, base))
        } else {
            None
        };
        let mut patches = Vec::new();
        if version > from {
            let mut stmt = conn.prepare_cached(
                "SELECT version, patch FROM agent_changes
                 WHERE agent = ?1 AND version > ?2 AND version <= ?3 ORDER BY version",
            )?;
            let rows =
                stmt.query_map(rusqlite::params![agent, from as i64, version as i64], |r| {
                    let patch = match r.get_ref(1)? {
                        rusqlite::types::ValueRef::Null => None,
                        v => Some(v.as_bytes()?.to_vec()),
                    };
                    Ok((r.get::<_, i64>(0)? as u64, patch))
                })?;
            for (i, row) in rows.enumerate() {
                let (v, patch) = row?;
                match patch {
                    Some(patch) if v == from + 1 + i as u64 => patches.push(patch),
                    _ => {
                        return Err(Error::Corrupt(format!(
                            "the state of version {version}: the patch of version {} is missing",
                            from + 1 + i as u64
                        )))
                    }
                }
            }
            if patches.len() as u64 != version - from {
                return Err(Error::Corrupt(format!(
                    "the state of version {version}: {} of the patches after version {from} \
                     are missing",
                    version - from - patches.len() as u64
                )));
            }
        }
        Ok(Some(StoredRead {
            version,
            schema,
            base: base_copy,
            patches,
        }))
    }

    /// Writes `change` (see [`crate::store::StoredState::write_change`]): its patch, or the
    /// full state when it is due, and the head; with `log`, the change-log entry, which is the
    /// patch row itself. `now` is the time of the write; with `grain`, the indexed time is
    /// rewritten too (see `schema`). `known`: the head as the handle left it at its last write
    /// (used when it is the version this change follows; read otherwise). Returns the new head.
    pub(super) fn write_change(
        &self,
        agent: &str,
        change: &NewChange<'_>,
        log: Option<LogRetention>,
        (now, grain): (i64, Option<i64>),
        known: Option<Head>,
    ) -> Result<Head> {
        self.note_commit(agent, change.version);
        let head = match known.filter(|k| k.version + 1 == change.version && !change.first) {
            Some(known) => Some(known),
            None => self.read_head(agent)?,
        };
        let size = change.next.len();
        let version = change.version;
        let patch_len = change.patch.map_or(0, <[u8]>::len) as u64;
        if let (Some(h), Some(_), false) = (head, change.patch, change.first) {
            if size > INLINE_MAX
                && !h.inline
                && h.tail + patch_len <= size as u64
                && version - h.base <= max_patches(size)
            {
                self.set_head(agent, change, (now, grain), None, patch_len)?;
                self.append_change(agent, change, log, false)?;
                return Ok(Head {
                    version,
                    base: h.base,
                    tail: h.tail + patch_len,
                    inline: false,
                });
            }
        }
        let fail = |e| self.storage_err("cannot write", e);
        let conn = self.conn()?;
        let inline = size <= INLINE_MAX;
        if !inline {
            conn.prepare_cached(
                "INSERT INTO agent_base (agent, value) VALUES (?1, ?2)
                 ON CONFLICT (agent) DO UPDATE SET value = excluded.value",
            )?
            .execute(rusqlite::params![agent, change.next.json()])
            .map_err(fail)?;
        }
        let value = inline.then(|| change.next.json());
        match head {
            None => {
                conn.prepare_cached(
                    "INSERT INTO agent_state
                     (agent, value, version, written_ms, written_grain, base, tail, bytes, schema)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?3, 0, ?6, ?7)",
                )?
                .execute(rusqlite::params![
                    agent,
                    super::blob(value),
                    version as i64,
                    now,
                    crate::store::grain_of(now),
                    size as i64,
                    i64::from(change.schema)
                ])
                .map_err(fail)?;
            }
            Some(h) => {
                self.set_head(agent, change, (now, grain), Some(value), 0)?;
                if inline && !h.inline && h.version > 0 {
                    conn.prepare_cached("DELETE FROM agent_base WHERE agent = ?1")?
                        .execute([agent])
                        .map_err(fail)?;
                }
                // With the log off, the patches before the new base go (there are some only
                // when the base was behind).
                if log.is_none() && h.base < h.version {
                    conn.prepare_cached(
                        "DELETE FROM agent_changes WHERE agent = ?1 AND version < ?2",
                    )?
                    .execute(rusqlite::params![agent, version as i64])
                    .map_err(fail)?;
                }
            }
        }
        self.append_change(agent, change, log, true)?;
        Ok(Head {
            version,
            base: version,
            tail: 0,
            inline,
        })
    }

    /// The head row (`None`: no row).
    fn read_head(&self, agent: &str) -> Result<Option<Head>> {
        Ok(self
            .conn()?
            .prepare_cached(
                "SELECT version, base, tail, value IS NOT NULL FROM agent_state WHERE agent = ?1",
            )?
            .query_row([agent], |r| {
                Ok(Head {
                    version: r.get::<_, i64>(0)? as u64,
                    base: r.get::<_, i64>(1)? as u64,
                    tail: r.get::<_, i64>(2)? as u64,
                    inline: r.get(3)?,
                })
            })
            .optional()?)
    }

    /// One UPDATE of the head row: `change`'s version and schema version, the time (the indexed
    /// minute only when it moved: an index entry rewritten at every write would cost a third of
    /// a bare write), the state's size, and either a new base (`base`: the inline value or NULL;
    /// the tail starts again) or `tail_add` more patch bytes.
    fn set_head(
        &self,
        agent: &str,
        change: &NewChange<'_>,
        (now, grain): (i64, Option<i64>),
        base: Option<Option<&[u8]>>,
        tail_add: u64,
    ) -> Result<()> {
        let minute = if grain.is_some() {
            ", written_grain = ?7"
        } else {
            ""
        };
        let set = if base.is_some() {
            "value = ?5, base = ?2, tail = 0"
        } else {
            "tail = tail + ?5"
        };
        let sql = format!(
            "UPDATE agent_state SET version = ?2, written_ms = ?3, bytes = ?4, {set},
             schema = ?6{minute} WHERE agent = ?1"
        );
        let mut stmt = self.conn()?.prepare_cached(&sql)?;
        let (version, size) = (change.version as i64, change.next.len() as i64);
        let schema = i64::from(change.schema);
        let fifth: &dyn rusqlite::ToSql = match &base {
            Some(value) => &super::blob(*value),
            None => &(tail_add as i64),
        };
        let updated = match &grain {
            Some(grain) => stmt.execute(rusqlite::params![
                agent, version, now, size, fifth, schema, grain
            ]),
            None => stmt.execute(rusqlite::params![agent, version, now, size, fifth, schema]),
        }
        .map_err(|e| self.storage_err("cannot write", e))?;
        if updated != 1 {
            return Err(Error::Storage(
                "the agent's row vanished inside the write transaction (internal)"
                    .to_string()
                    .into(),
            ));
        }
        Ok(())
    }

    /// `state` becomes the base at `version` (the head's version is left as it is).
    fn store_base(&self, agent: &str, state: &[u8], version: u64, was_inline: bool) -> Result<()> {
        let fail = |e| self.storage_err("cannot write", e);
        let conn = self.conn()?;
        if state.len() <= INLINE_MAX {
            conn.prepare_cached(
                "UPDATE agent_state SET value = ?2, base = ?3, tail = 0 WHERE agent = ?1",
            )?
            .execute(rusqlite::params![agent, state, version as i64])
            .map_err(fail)?;
            if !was_inline {
                conn.prepare_cached("DELETE FROM agent_base WHERE agent = ?1")?
                    .execute([agent])
                    .map_err(fail)?;
            }
        } else {
            conn.prepare_cached(
                "INSERT INTO agent_base (agent, value) VALUES (?1, ?2)
                 ON CONFLICT (agent) DO UPDATE SET value = excluded.value",
            )?
            .execute(rusqlite::params![agent, state])
            .map_err(fail)?;
            conn.prepare_cached(
                "UPDATE agent_state SET value = NULL, base = ?2, tail = 0 WHERE agent = ?1",
            )?
            .execute(rusqlite::params![agent, version as i64])
            .map_err(fail)?;
        }
        Ok(())
    }

    /// The change's row of `agent_changes`: its patch, which the state needs when no base was
    /// written (`based` false), and the log's entry when the log is on.
    fn append_change(
        &self,
        agent: &str,
        change: &NewChange<'_>,
        log: Option<LogRetention>,
        based: bool,
    ) -> Result<()> {
        match log {
            Some(retention) => self.log_change(agent, change, retention, based),
            None if based => Ok(()),
            None => {
                self.conn()?
                    .prepare_cached(
                        "INSERT OR REPLACE INTO agent_changes
                         (agent, version, at_ms, writer, patch, schema, migrated_from)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    )?
                    .execute(rusqlite::params![
                        agent,
                        change.version as i64,
                        change.at_ms,
                        change.writer as i64,
                        super::blob(change.patch),
                        i64::from(change.schema),
                        change.migrated_from.map(i64::from)
                    ])
                    .map_err(|e| self.storage_err("cannot write", e))?;
                Ok(())
            }
        }
    }

    /// Makes `state` (the agent's state at its current `version`) its base, and drops the
    /// patches before it that the log does not hold (see
    /// [`crate::store::StoredState::rebase`]).
    pub(super) fn rebase(&self, agent: &str, state: &[u8], version: u64) -> Result<()> {
        if self.schema < 5 {
            return Ok(());
        }
        let inline: Option<bool> = self
            .conn()?
            .prepare_cached("SELECT value IS NOT NULL FROM agent_state WHERE agent = ?1")?
            .query_row([agent], |r| r.get(0))
            .optional()?;
        let Some(inline) = inline else {
            return Ok(());
        };
        self.store_base(agent, state, version, inline)?;
        if self.log_retention(agent)?.is_none() {
            self.conn()?
                .prepare_cached("DELETE FROM agent_changes WHERE agent = ?1")?
                .execute([agent])
                .map_err(|e| self.storage_err("cannot write", e))?;
        }
        Ok(())
    }

    /// The agent's stored version (0: nothing stored).
    pub(super) fn stored_version(&self, agent: &str) -> Result<u64> {
        if self.schema < 3 {
            return Ok(self.read_state(agent)?.map_or(0, |(_, v)| v));
        }
        Ok(self.head(agent)?.0)
    }
}
