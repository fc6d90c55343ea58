//! The file format: recognising an agent store, creating one, migrating an old one.
//!
//! Layout (schema version [`SCHEMA_VERSION`]): the file's `application_id` is [`APPLICATION_ID`]
//! so foreign SQLite files are recognised and left untouched; `user_version` holds the schema
//! version so later releases can migrate. Table `agent_state(agent TEXT PRIMARY KEY, value BLOB,
//! version INTEGER, change_log BLOB, written_ms INTEGER, written_grain INTEGER, base INTEGER,
//! tail INTEGER, bytes INTEGER, schema INTEGER)` has one row per agent, its head: its key (the
//! `agent_id`, or `''` for the file's single agent, opened without one), the state's version,
//! which counts its commits (1 for the first write; after a deletion of the agent, one above its
//! tombstone's; 0: nothing stored, the row then only holds the log setting), the change log's
//! retention (JSON; NULL: the log is off), and when the state was last written: exactly
//! (`written_ms`), and rounded down to a minute in `written_grain`, which the index
//! `agent_state_idle` orders for expiry and which a handle rewrites at most once a minute (an
//! index entry rewritten at every write would cost a third of a bare write). The state itself is
//! its base, the full copy at version `base` (in `value` when small, else in table
//! `agent_base(agent, value)`), and the patches of the versions after it, rows of
//! `agent_changes`; `tail` counts their bytes and `bytes` is the current state's size (see
//! `delta`). `schema` is the schema version the state was written under (the one its program
//! declares; 0: none, or written before schema 6), set by every write with the version, and 0
//! again when the agent is deleted. Table `agent_deleted(id_hash, version)` holds the
//! tombstones of deleted agents: the hash of the id (not the id) and the last version. Every
//! connection that writes has `secure_delete` on, so what a write or a deletion frees is
//! overwritten with zeros. Table `agent_changes(agent, version, at_ms, writer, patch, next,
//! prev, schema, migrated_from)`, keyed by agent and version, holds those patches and, when it
//! is on, the change log, written in the same transaction as the head: a merge's patch, and its
//! full state (`next`) only at checkpoints (see `entries`); a row's `schema` is the schema
//! version of the state after its change, and `migrated_from` (NULL but for a schema
//! migration) the schema version that migration upgraded from. The journal is WAL, so readers
//! never block the writer.
//!
//! Schema history: 1 had one table `agent_kv(key, value)` with the state under the key
//! `__agent_state`; 2 added its `version` column, the retention under `__agent_change_log` and
//! `agent_changes` without the `agent` column; 3 holds many agents; 4 adds the times of the
//! last writes, their index and `agent_deleted`; 5 stores a state as its base and patches; 6
//! adds the schema version of each state and log entry (`schema`, `migrated_from`), for schema
//! evolution (what was stored before is schema 0). Opening an older store for
//! writing migrates it in place, one step at a time, each in one write transaction (its single
//! agent becomes the agent `''`); a read-only handle reads the old layout as it is.

use std::path::Path;
use std::time::Duration;

use super::Sqlite;
use crate::error::{Error, Result};
use crate::store::{StoreOptions, Synchronous};

/// `PRAGMA application_id` of an agent store: ASCII "AgSt".
pub const APPLICATION_ID: i32 = 0x4167_5374;
/// The schema version this release writes and understands.
pub const SCHEMA_VERSION: i32 = 6;
/// The oldest schema whose layout a handle with an `agent_id`, a listing or a deletion read
/// (a read-only handle reads a file of schema 5 as it is: schema 6 only adds the schema
/// versions, which read as 0 there).
pub(super) const AGENTS_SCHEMA: i32 = 5;

impl Sqlite {
    pub(super) fn check_and_init(
        &mut self,
        options: &StoreOptions,
        in_memory: bool,
        setup_timeout: Duration,
    ) -> Result<()> {
        // Reading the header first: nothing is written to a file we do not own.
        let kind = self.identify()?;
        if kind == FileKind::Empty && self.options.read_only {
            return Err(Error::Storage(
                format!(
                    "{}: no agent store here to open read-only",
                    self.path.display()
                )
                .into(),
            ));
        }
        if !self.options.read_only {
            if !in_memory {
                self.enable_wal(setup_timeout)?;
            }
            // `full` on a file: SQLite runs at NORMAL and this process's writers share the WAL's
            // syncs after their commits (see `group_sync`); every call still returns only
            // after a sync that covers its change.
            let sync = match options.synchronous {
                Synchronous::Full if !in_memory => {
                    self.wal_sync = Some(super::group_sync::WalSync::for_file(&self.path));
                    "NORMAL"
                }
                Synchronous::Full => "FULL",
                Synchronous::Normal => "NORMAL",
            };
            self.conn()?
                .pragma_update(None, "synchronous", sync)
                .map_err(|e| self.storage_err("cannot set synchronous", e))?;
            // Freed cells and pages are zeroed: a deleted agent's bytes, and the earlier
            // versions of every state, do not linger in the file (see `agents`).
            self.conn()?
                .pragma_update(None, "secure_delete", "ON")
                .map_err(|e| self.storage_err("cannot set secure_delete", e))?;
        }
        match kind {
            FileKind::Empty => self.initialize()?,
            FileKind::Store(schema) if schema < SCHEMA_VERSION && !self.options.read_only => {
                if schema == 1 {
                    self.migrate_from_1()?;
                }
                if schema <= 2 {
                    self.migrate_from_2()?;
                }
                if schema <= 3 {
                    self.migrate_from_3()?;
                }
                if schema <= 4 {
                    self.migrate_from_4()?;
                }
                self.migrate_from_5()?;
                self.schema = SCHEMA_VERSION;
            }
            FileKind::Store(schema) => self.schema = schema,
        }
        Ok(())
    }

    /// Schema 1 -> 2: adds the state's version (an existing state becomes version 1) and the
    /// change log table, in one write transaction (re-checked inside it: another process may
    /// have migrated the file meanwhile).
    pub(super) fn migrate_from_1(&self) -> Result<()> {
        self.upgrade_schema(
            1,
            "ALTER TABLE agent_kv ADD COLUMN version INTEGER NOT NULL DEFAULT 0;
             UPDATE agent_kv SET version = 1 WHERE key = '__agent_state';
             CREATE TABLE agent_changes (version INTEGER PRIMARY KEY NOT NULL,
                 at_ms INTEGER NOT NULL, writer INTEGER NOT NULL, patch BLOB,
                 next BLOB NOT NULL, prev BLOB);
             PRAGMA user_version = 2;",
            "cannot migrate the store from schema version 1",
        )
    }

    /// Schema 2 -> 3: the single agent's entries and log move to the agent `''` of the
    /// many-agent tables, in one write transaction.
    pub(super) fn migrate_from_2(&self) -> Result<()> {
        self.upgrade_schema(
            2,
            &format!(
                "{AGENT_TABLES}
                 INSERT INTO agent_state (agent, value, version, change_log)
                   SELECT '', (SELECT value FROM agent_kv WHERE key = '__agent_state'),
                          coalesce((SELECT version FROM agent_kv WHERE key = '__agent_state'), 0),
                          (SELECT value FROM agent_kv WHERE key = '__agent_change_log')
                   WHERE EXISTS (SELECT 1 FROM agent_kv
                                 WHERE key IN ('__agent_state', '__agent_change_log'));
                 INSERT INTO agent_changes (agent, version, at_ms, writer, patch, next, prev)
                   SELECT '', version, at_ms, writer, patch, next, prev FROM agent_changes_2;
                 DROP TABLE agent_changes_2;
                 DROP TABLE agent_kv;
                 PRAGMA user_version = 3;"
            )
            .replacen(
                "CREATE TABLE agent_changes",
                "ALTER TABLE agent_changes RENAME TO agent_changes_2;\nCREATE TABLE agent_changes",
                1,
            ),
            "cannot migrate the store from schema version 2",
        )
    }

    /// Schema 3 -> 4: the times of the last writes (unknown before: every stored state counts
    /// as written now, so that expiry never takes an agent for idler than it is), their index,
    /// and `agent_deleted`, in one write transaction.
    pub(super) fn migrate_from_3(&self) -> Result<()> {
        let now = crate::store::now_ms();
        let grain = crate::store::grain_of(now);
        self.upgrade_schema(
            3,
            &format!(
                "ALTER TABLE agent_state ADD COLUMN written_ms INTEGER NOT NULL DEFAULT 0;
                 ALTER TABLE agent_state ADD COLUMN written_grain INTEGER NOT NULL DEFAULT 0;
                 UPDATE agent_state SET written_ms = {now}, written_grain = {grain};
                 {STORE_TABLES}
                 PRAGMA user_version = 4;"
            ),
            "cannot migrate the store from schema version 3",
        )
    }

    /// Schema 4 -> 5: a state is stored as its base and the patches after it (see `delta`):
    /// every stored state becomes its own base, moved to `agent_base` when it is larger than
    /// the head row keeps, in one write transaction.
    pub(super) fn migrate_from_4(&self) -> Result<()> {
        let inline = super::delta::INLINE_MAX;
        self.upgrade_schema(
            4,
            &format!(
                "{DELTA_COLUMNS}
                 UPDATE agent_state SET base = version, bytes = coalesce(length(value), 0);
                 {BASE_TABLE}
                 INSERT INTO agent_base (agent, value)
                   SELECT agent, value FROM agent_state WHERE length(value) > {inline};
                 UPDATE agent_state SET value = NULL WHERE length(value) > {inline};
                 PRAGMA user_version = 5;"
            ),
            "cannot migrate the store from schema version 4",
        )
    }

    /// Schema 5 -> 6: the schema version of each state (its head row) and of each row of
    /// `agent_changes`, and the version a schema migration upgraded from; what is stored
    /// becomes schema 0 (none declared), in one write transaction.
    pub(super) fn migrate_from_5(&self) -> Result<()> {
        self.upgrade_schema(
            5,
            &format!(
                "{SCHEMA_COLUMNS}
                 PRAGMA user_version = 6;"
            ),
            "cannot migrate the store from schema version 5",
        )
    }

    /// Runs `sql` in one write transaction if the file's schema version, read again inside the
    /// transaction, is still `from` (another process may have done it meanwhile).
    pub(super) fn upgrade_schema(&self, from: i32, sql: &str, what: &str) -> Result<()> {
        self.begin_write()?;
        let upgrade = || -> Result<()> {
            let conn = self.conn()?;
            let version: i32 = conn
                .pragma_query_value(None, "user_version", |r| r.get(0))
                .map_err(|e| self.storage_err(what, e))?;
            if version == from {
                conn.execute_batch(sql)
                    .map_err(|e| self.storage_err(what, e))?;
            }
            Ok(())
        };
        match upgrade() {
            Ok(()) => self.commit(),
            Err(e) => {
                self.rollback();
                Err(e)
            }
        }
    }

    /// Switches the file to WAL journaling. SQLite does not apply the busy timeout to this
    /// pragma (another process initializing the same new file makes it fail at once with
    /// SQLITE_BUSY), so it is retried here until `busy_timeout` has passed.
    pub(super) fn enable_wal(&self, busy_timeout: Duration) -> Result<()> {
        let started = std::time::Instant::now();
        let mut pause = Duration::from_millis(1);
        let conn = self.conn()?;
        loop {
            let attempt: rusqlite::Result<String> =
                conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0));
            match attempt {
                Ok(mode) if mode.eq_ignore_ascii_case("wal") => return Ok(()),
                Ok(mode) => {
                    return Err(Error::Storage(
                        format!(
                            "{}: cannot enable WAL (journal_mode is {mode})",
                            self.path.display()
                        )
                        .into(),
                    ))
                }
                Err(e) => match Error::from(e) {
                    Error::Busy(_) if started.elapsed() < busy_timeout => {
                        std::thread::sleep(pause);
                        pause = (pause * 2).min(Duration::from_millis(20));
                    }
                    Error::Busy(m) => return Err(Error::Busy(m)),
                    Error::Storage(m) => {
                        return Err(Error::Storage(
                            format!("{}: cannot enable WAL: {m}", self.path.display()).into(),
                        ))
                    }
                    other => return Err(other),
                },
            }
        }
    }

    pub(super) fn identify(&self) -> Result<FileKind> {
        // One statement, so one read transaction: the three numbers come from the same commit,
        // never from both sides of another process's initialization.
        let conn = self.conn()?;
        let read = || -> rusqlite::Result<(i32, i32, i64)> {
            conn.query_row(
                "SELECT (SELECT application_id FROM pragma_application_id()),
                        (SELECT user_version FROM pragma_user_version()),
                        (SELECT count(*) FROM sqlite_schema)",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
        };
        let (app, version, objects) = read().map_err(|e| match Error::from(e) {
            Error::Storage(m) => {
                Error::Storage(format!("{}: not an agent store ({m})", self.path.display()).into())
            }
            other => other,
        })?;
        if app == 0 && objects == 0 && version == 0 {
            return Ok(FileKind::Empty);
        }
        if app != APPLICATION_ID {
            return Err(Error::Storage(format!(
                "{}: not an agent store (an SQLite database of another application, application_id {app:#x})",
                self.path.display()
            ).into()));
        }
        if version > SCHEMA_VERSION {
            return Err(Error::Storage(format!(
                "{}: written by a newer release (schema version {version}, this release reads up to {SCHEMA_VERSION})",
                self.path.display()
            ).into()));
        }
        if version < 1 {
            return Err(Error::Storage(
                format!(
                    "{}: agent store with unknown schema version {version}",
                    self.path.display()
                )
                .into(),
            ));
        }
        Ok(FileKind::Store(version))
    }

    /// Creates the schema, inside a write transaction so that two processes opening one new file
    /// at once both end up with the same, single, initialized store.
    pub(super) fn initialize(&self) -> Result<()> {
        self.upgrade_schema(
            0,
            &format!(
                "{AGENT_TABLES}
                 ALTER TABLE agent_state ADD COLUMN written_ms INTEGER NOT NULL DEFAULT 0;
                 ALTER TABLE agent_state ADD COLUMN written_grain INTEGER NOT NULL DEFAULT 0;
                 {STORE_TABLES}
                 {DELTA_COLUMNS}
                 {BASE_TABLE}
                 {SCHEMA_COLUMNS}
                 PRAGMA application_id = {APPLICATION_ID};
                 PRAGMA user_version = {SCHEMA_VERSION};"
            ),
            "cannot initialize",
        )
    }
}

#[derive(Debug, PartialEq, Eq)]
pub(super) enum FileKind {
    Empty,
    /// An agent store of this schema version.
    Store(i32),
}

/// What schema 5 adds to `agent_state` (see `delta`): the version of the base, the bytes of
/// the patches since, the size of the current state.
const DELTA_COLUMNS: &str = "ALTER TABLE agent_state ADD COLUMN base INTEGER NOT NULL DEFAULT 0;
ALTER TABLE agent_state ADD COLUMN tail INTEGER NOT NULL DEFAULT 0;
ALTER TABLE agent_state ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0;";

/// What schema 6 adds: the schema version of the state (the head row) and of each row of
/// `agent_changes`, and, for a schema migration's row, the version it upgraded from.
const SCHEMA_COLUMNS: &str = "ALTER TABLE agent_state ADD COLUMN schema INTEGER NOT NULL DEFAULT 0;
ALTER TABLE agent_changes ADD COLUMN schema INTEGER NOT NULL DEFAULT 0;
ALTER TABLE agent_changes ADD COLUMN migrated_from INTEGER;";

/// Schema 5's full copies of the states too large for the head row (see `delta`).
const BASE_TABLE: &str = "CREATE TABLE agent_base (
    agent TEXT PRIMARY KEY NOT NULL,
    value BLOB NOT NULL);";

/// What schema 4 adds to the tables of schema 3 (besides the columns of the last write).
const STORE_TABLES: &str = "CREATE INDEX agent_state_idle ON agent_state (written_grain);
CREATE TABLE agent_deleted (
    id_hash INTEGER PRIMARY KEY NOT NULL,
    version INTEGER NOT NULL);";

/// The tables of schema 3.
const AGENT_TABLES: &str = "CREATE TABLE agent_state (
    agent TEXT PRIMARY KEY NOT NULL,
    value BLOB,
    version INTEGER NOT NULL DEFAULT 0,
    change_log BLOB);
CREATE TABLE agent_changes (
    agent TEXT NOT NULL,
    version INTEGER NOT NULL,
    at_ms INTEGER NOT NULL,
    writer INTEGER NOT NULL,
    patch BLOB,
    next BLOB,
    prev BLOB,
    PRIMARY KEY (agent, version)) WITHOUT ROWID;";

/// Creates `path` with mode 0600 if it does not exist yet. SQLite would create it with the
/// process umask (usually 0644), exposing agent state to every local user.
pub(super) fn create_private_file(path: &Path) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(Error::Storage(crate::error::Detail::with_source(
            format!("{}: cannot create the store file: {e}", path.display()),
            e,
        ))),
    }
}
