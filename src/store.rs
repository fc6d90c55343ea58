//! The key-value layer on one SQLite file.
//!
//! Layout (schema version [`SCHEMA_VERSION`]): the file's `application_id` is [`APPLICATION_ID`]
//! so foreign SQLite files are recognised and left untouched; `user_version` holds the schema
//! version so later releases can migrate. Table `agent_kv(key TEXT PRIMARY KEY, value BLOB,
//! version INTEGER)` holds entries, of which the library reserves keys starting with
//! `__agent_`: the state is the single entry [`STATE_KEY`], whose `version` counts its commits
//! (1 for the first write); [`CHANGE_LOG_KEY`] holds the change log's retention, when enabled.
//! Table `agent_changes(version INTEGER PRIMARY KEY, at_ms, writer, patch, next, prev)` is the
//! optional change log, written in the same transaction as the state. The journal is WAL, so
//! readers never block the writer.
//!
//! Schema history: 1 had no `version` column and no change log; opening a version-1 store for
//! writing migrates it (its state, if any, becomes version 1).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension};

use crate::ffi::wal_index::{WalHeader, WatchedConnection};

use crate::error::{Error, Result};
use crate::fork::{self, FileId, Tracker};

/// `PRAGMA application_id` of an agent store: ASCII "AgSt".
pub const APPLICATION_ID: i32 = 0x4167_5374;
/// The schema version this release writes and understands.
pub const SCHEMA_VERSION: i32 = 2;
/// The key of the state entry.
pub const STATE_KEY: &str = "__agent_state";
/// The key of the change log's retention settings (JSON), present while the log is enabled.
pub const CHANGE_LOG_KEY: &str = "__agent_change_log";

/// One entry of the change log.
#[derive(Debug, Clone)]
pub struct LoggedChange {
    /// The state's version after this change.
    pub version: u64,
    /// When it was committed, in milliseconds since the Unix epoch.
    pub at_ms: i64,
    /// Which agent handle made it (an id unique to one open handle).
    pub writer: u64,
    /// The merge patch as applied (compact JSON), or `None` for a replacement.
    pub patch: Option<Vec<u8>>,
    /// The state before the change, kept only for a store's first change (version 1), whose
    /// `prev` is the writer's initial state, which other handles cannot know.
    pub prev: Option<Vec<u8>>,
    /// The state after the change (compact JSON).
    pub next: Vec<u8>,
}

/// Durability of a commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Synchronous {
    /// fsync on every commit: an acknowledged write survives power loss.
    Full,
    /// fsync at checkpoints only: survives a process crash, may lose the last commits on power loss.
    Normal,
}

/// How to open a store.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    pub synchronous: Synchronous,
    pub busy_timeout: Duration,
    pub read_only: bool,
}

/// One connection to a store file, private to the process that opened it: after a `fork()`,
/// the child's first use closes the inherited connection safely and opens its own (see
/// [`crate::fork`]).
pub struct Store {
    /// `None` after an inherited connection was retired and before the next one is open.
    conn: Option<WatchedConnection>,
    path: PathBuf,
    options: StoreOptions,
    /// The file's schema version (a read-only handle may be reading a version-1 store).
    schema: i32,
    /// The fork generation `conn` was opened in.
    generation: u64,
    /// Shared with the fork registry; `None` for an in-memory store, which no other process
    /// can see (the child keeps using its private copy).
    tracker: Option<Arc<Tracker>>,
}

impl Store {
    /// Opens (creating when absent and not read-only) the store at `path`.
    ///
    /// A new file is created with mode 0600 before SQLite sees it, and SQLite gives its WAL and
    /// shared-memory files the same mode. A file that is not an SQLite database, an SQLite
    /// database of another application, or a store of a newer schema is refused with
    /// [`Error::Storage`] before anything is written to it.
    pub fn open(path: &Path, options: &StoreOptions) -> Result<Store> {
        let generation = fork::generation();
        let mut store = Store {
            conn: None,
            path: path.to_path_buf(),
            options: options.clone(),
            schema: SCHEMA_VERSION,
            generation,
            tracker: None,
        };
        store.connect()?;
        if !store.in_memory() {
            let file = FileId::of(path).ok_or_else(|| {
                Error::Storage(format!(
                    "{}: the store file vanished while opening",
                    path.display()
                ))
            })?;
            store.tracker = Some(Tracker::new(file, generation));
        }
        Ok(store)
    }

    /// What the fork registry knows of this connection (`None` in memory).
    pub fn tracker(&self) -> Option<Arc<Tracker>> {
        self.tracker.clone()
    }

    fn in_memory(&self) -> bool {
        self.path.as_os_str() == ":memory:"
    }

    /// Opens this process's connection, creating and initializing the store as needed.
    fn connect(&mut self) -> Result<()> {
        let (path, options) = (&self.path, &self.options);
        let in_memory = self.in_memory();
        if !in_memory && !options.read_only {
            create_private_file(path)?;
        }
        let mut flags = OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_EXRESCODE;
        flags |= if options.read_only {
            OpenFlags::SQLITE_OPEN_READ_ONLY
        } else {
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE
        };
        // The bundled SQLite interprets file names starting with "file:" as URIs ("file:a.db"
        // would open "a.db", with the query and fragment dropped); a path is a file name, so a
        // relative one is given to SQLite as "./path", which no URI parser touches.
        let literal;
        let sqlite_path = if !in_memory && path.is_relative() {
            literal = Path::new(".").join(path);
            literal.as_path()
        } else {
            path.as_path()
        };
        let conn = Connection::open_with_flags(sqlite_path, flags)
            .map_err(|e| storage(path, "cannot open", e))?;
        conn.busy_timeout(options.busy_timeout)
            .map_err(|e| storage(path, "cannot configure", e))?;
        self.conn = Some(WatchedConnection::new(conn));
        let options = self.options.clone();
        if let Err(e) = self.check_and_init(&options, in_memory) {
            self.conn = None;
            return Err(e);
        }
        // A read-only connection may be given a private copy of the shared memory, whose header
        // would never change: it keeps asking `PRAGMA data_version` instead.
        if !in_memory && !options.read_only {
            self.data_version()?; // makes sure SQLite has mapped the shared memory
            if let Some(conn) = self.conn.as_mut() {
                conn.watch_wal();
            }
        }
        Ok(())
    }

    /// Makes sure the connection belongs to this process. Free when it does (one atomic load);
    /// in a child process after `fork()`, closes the inherited connection (and every other one
    /// this process inherited to the same file) without touching shared state, then opens a
    /// fresh one. Returns true when it reconnected: what the caller cached may be stale.
    pub fn ensure_current(&mut self) -> Result<bool> {
        let now = fork::generation();
        if self.generation == now && self.conn.is_some() {
            return Ok(false);
        }
        let Some(tracker) = self.tracker.clone() else {
            // In memory: the child's copy is its own.
            self.generation = now;
            return Ok(false);
        };
        self.retire_inherited();
        fork::recover(tracker.file_id(), self.options.busy_timeout)?;
        self.generation = now;
        self.connect()?;
        tracker.set_generation(now);
        Ok(true)
    }

    /// If the connection was inherited from a parent process, lets go of it without touching
    /// what the parent still uses: an idle one is closed with checkpoint-on-close off; one in
    /// the middle of a transaction is abandoned and the file marked unusable in this process.
    pub fn retire_inherited(&mut self) {
        let now = fork::generation();
        if self.generation == now {
            return;
        }
        let Some(tracker) = self.tracker.clone() else {
            return;
        };
        if let Some(conn) = self.conn.take() {
            if conn.is_autocommit() {
                // Checkpointing on close is what deletes a WAL that others still use; with
                // it off, closing an idle connection touches nothing shared.
                let _ = conn.set_db_config(
                    rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
                    true,
                );
                drop(conn);
            } else {
                fork::abandon(Box::new(conn), &tracker);
                return;
            }
        }
        tracker.set_generation(now);
    }

    /// This process's connection. Fails when it is not (the process forked while the caller
    /// was in a call: the call is not completed in the child) or when none is open.
    fn conn(&self) -> Result<&WatchedConnection> {
        match &self.conn {
            Some(conn) if self.generation == fork::generation() => Ok(conn),
            _ => Err(Error::Storage(format!(
                "{}: the process forked during this call; the call was not completed in the \
                 child process",
                self.path.display()
            ))),
        }
    }

    fn check_and_init(&mut self, options: &StoreOptions, in_memory: bool) -> Result<()> {
        // Reading the header first: nothing is written to a file we do not own.
        let kind = self.identify()?;
        if kind == FileKind::Empty && self.options.read_only {
            return Err(Error::Storage(format!(
                "{}: no agent store here to open read-only",
                self.path.display()
            )));
        }
        if !self.options.read_only {
            if !in_memory {
                self.enable_wal(options.busy_timeout)?;
            }
            let sync = match options.synchronous {
                Synchronous::Full => "FULL",
                Synchronous::Normal => "NORMAL",
            };
            self.conn()?
                .pragma_update(None, "synchronous", sync)
                .map_err(|e| self.storage_err("cannot set synchronous", e))?;
        }
        match kind {
            FileKind::Empty => self.initialize()?,
            FileKind::Store(1) if !self.options.read_only => self.migrate_from_1()?,
            FileKind::Store(schema) => self.schema = schema,
        }
        Ok(())
    }

    /// Schema 1 -> 2: adds the state's version (an existing state becomes version 1) and the
    /// change log table, in one write transaction (re-checked inside it: another process may
    /// have migrated the file meanwhile).
    fn migrate_from_1(&self) -> Result<()> {
        self.upgrade_schema(
            1,
            &format!(
                "ALTER TABLE agent_kv ADD COLUMN version INTEGER NOT NULL DEFAULT 0;
                 UPDATE agent_kv SET version = 1 WHERE key = '{STATE_KEY}';
                 {CHANGES_TABLE}
                 PRAGMA user_version = 2;"
            ),
            "cannot migrate the store from schema version 1",
        )
    }

    /// Runs `sql` in one write transaction if the file's schema version, read again inside the
    /// transaction, is still `from` (another process may have done it meanwhile).
    fn upgrade_schema(&self, from: i32, sql: &str, what: &str) -> Result<()> {
        self.begin_immediate()?;
        let conn = self.conn()?;
        let result = (|| -> rusqlite::Result<()> {
            let version: i32 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
            if version == from {
                conn.execute_batch(sql)?;
            }
            Ok(())
        })();
        match result {
            Ok(()) => self.commit(),
            Err(e) => {
                self.rollback();
                Err(self.storage_err(what, e))
            }
        }
    }

    /// Switches the file to WAL journaling. SQLite does not apply the busy timeout to this
    /// pragma (another process initializing the same new file makes it fail at once with
    /// SQLITE_BUSY), so it is retried here until `busy_timeout` has passed.
    fn enable_wal(&self, busy_timeout: Duration) -> Result<()> {
        let started = std::time::Instant::now();
        let mut pause = Duration::from_millis(1);
        let conn = self.conn()?;
        loop {
            let attempt: rusqlite::Result<String> =
                conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0));
            match attempt {
                Ok(mode) if mode.eq_ignore_ascii_case("wal") => return Ok(()),
                Ok(mode) => {
                    return Err(Error::Storage(format!(
                        "{}: cannot enable WAL (journal_mode is {mode})",
                        self.path.display()
                    )))
                }
                Err(e) => match Error::from(e) {
                    Error::Busy(_) if started.elapsed() < busy_timeout => {
                        std::thread::sleep(pause);
                        pause = (pause * 2).min(Duration::from_millis(20));
                    }
                    Error::Busy(m) => return Err(Error::Busy(m)),
                    Error::Storage(m) => {
                        return Err(Error::Storage(format!(
                            "{}: cannot enable WAL: {m}",
                            self.path.display()
                        )))
                    }
                    other => return Err(other),
                },
            }
        }
    }

    fn identify(&self) -> Result<FileKind> {
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
                Error::Storage(format!("{}: not an agent store ({m})", self.path.display()))
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
            )));
        }
        if version > SCHEMA_VERSION {
            return Err(Error::Storage(format!(
                "{}: written by a newer release (schema version {version}, this release reads up to {SCHEMA_VERSION})",
                self.path.display()
            )));
        }
        if version < 1 {
            return Err(Error::Storage(format!(
                "{}: agent store with unknown schema version {version}",
                self.path.display()
            )));
        }
        Ok(FileKind::Store(version))
    }

    /// Creates the schema, inside a write transaction so that two processes opening one new file
    /// at once both end up with the same, single, initialized store.
    fn initialize(&self) -> Result<()> {
        self.upgrade_schema(
            0,
            &format!(
                "CREATE TABLE agent_kv (key TEXT PRIMARY KEY NOT NULL, value BLOB NOT NULL,
                                        version INTEGER NOT NULL DEFAULT 0);
                 {CHANGES_TABLE}
                 PRAGMA application_id = {APPLICATION_ID};
                 PRAGMA user_version = {SCHEMA_VERSION};"
            ),
            "cannot initialize",
        )
    }

    /// A number that changes whenever *another* connection commits to the file (SQLite's
    /// `PRAGMA data_version`); this connection's own commits leave it unchanged.
    pub fn data_version(&self) -> Result<i64> {
        let mut stmt = self.conn()?.prepare_cached("PRAGMA data_version")?;
        Ok(stmt.query_row([], |r| r.get(0))?)
    }

    /// The WAL-index header: it changes whenever any connection, in any process, commits. When
    /// it is the same as when the caller last checked `data_version`, nothing was committed
    /// since. `None` when unavailable (read-only or in-memory store, or a commit in progress).
    pub fn wal_header(&self) -> Option<WalHeader> {
        self.conn().ok()?.wal_header()
    }

    /// The pager's data version as of this connection's latest transaction (the current one,
    /// inside a transaction): it changes whenever a transaction starts and finds the database
    /// changed by another connection, and by exactly one with each of this connection's own
    /// commits. Costs a function call, where [`Store::data_version`] runs a statement.
    pub fn data_version_in_transaction(&self) -> Option<u32> {
        self.conn().ok()?.pager_data_version()
    }

    /// Reads the state entry and its version, if any.
    pub fn read_state(&self) -> Result<Option<(Vec<u8>, u64)>> {
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
    pub fn write_state(&self, value: &[u8], version: u64) -> Result<()> {
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

    /// Appends a change to the log and prunes what the retention no longer keeps (inside the
    /// caller's transaction). `keep_last`: entries to keep; `keep_since_ms`: drop entries older
    /// than this. The entry just written is always kept.
    pub fn log_change(
        &self,
        change: &LoggedChange,
        keep_last: Option<u64>,
        keep_since_ms: Option<i64>,
    ) -> Result<()> {
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
    pub fn changes_after(&self, after: u64) -> Result<Vec<LoggedChange>> {
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
    pub fn change_at(&self, version: u64) -> Result<Option<LoggedChange>> {
        if self.schema < 2 {
            return Ok(None);
        }
        let mut stmt = self.conn()?.prepare_cached(
            "SELECT version, at_ms, writer, patch, next, prev FROM agent_changes WHERE version = ?1",
        )?;
        Ok(stmt.query_row([version as i64], row_to_change).optional()?)
    }

    /// Empties the change log (when it is switched off).
    pub fn clear_log(&self) -> Result<()> {
        if self.schema >= 2 {
            self.conn()?
                .prepare_cached("DELETE FROM agent_changes")?
                .execute([])
                .map_err(|e| self.storage_err("cannot clear the change log", e))?;
        }
        Ok(())
    }

    /// Deletes the entry under `key` (inside the caller's transaction).
    pub fn delete(&self, key: &str) -> Result<()> {
        self.conn()?
            .prepare_cached("DELETE FROM agent_kv WHERE key = ?1")?
            .execute([key])
            .map_err(|e| self.storage_err("cannot write", e))?;
        Ok(())
    }

    /// Starts a read transaction, so that several reads see one commit.
    pub fn begin_read(&self) -> Result<()> {
        self.conn()?
            .prepare_cached("BEGIN DEFERRED")?
            .execute([])
            .map_err(|e| self.storage_err("cannot begin a transaction", e))?;
        Ok(())
    }

    /// Reads the value stored under `key`, if any.
    pub fn read(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let mut stmt = self
            .conn()?
            .prepare_cached("SELECT value FROM agent_kv WHERE key = ?1")?;
        // Text or blob alike: what matters is the bytes (the library writes blobs).
        Ok(stmt
            .query_row([key], |r| Ok(r.get_ref(0)?.as_bytes()?.to_vec()))
            .optional()?)
    }

    /// Stores `value` under `key` (inside the caller's transaction).
    pub fn write(&self, key: &str, value: &[u8]) -> Result<()> {
        self.conn()?
            .prepare_cached(
                "INSERT INTO agent_kv (key, value) VALUES (?1, ?2)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            )?
            .execute(rusqlite::params![key, value])
            .map_err(|e| self.storage_err("cannot write", e))?;
        Ok(())
    }

    /// Starts a write transaction, taking the write lock now (waiting up to the busy timeout).
    pub fn begin_immediate(&self) -> Result<()> {
        if self.options.read_only {
            return Err(Error::Storage(format!(
                "{}: the store was opened read_only; writes are refused",
                self.path.display()
            )));
        }
        // A file deleted or replaced since it was opened would take the write where no one
        // can read it again: refuse instead of acknowledging a lost write (costs one stat).
        if self.conn()?.has_moved() {
            return Err(Error::Storage(format!(
                "{}: the store file was deleted, moved or replaced after it was opened; \
                 reopen the store (this write was not made)",
                self.path.display()
            )));
        }
        let mut stmt = self.conn()?.prepare_cached("BEGIN IMMEDIATE")?;
        stmt.execute([])
            .map_err(|e| self.storage_err("cannot begin a transaction", e))?;
        Ok(())
    }

    /// Commits the open transaction; on failure the transaction is rolled back.
    pub fn commit(&self) -> Result<()> {
        let result = self
            .conn()?
            .prepare_cached("COMMIT")
            .and_then(|mut s| s.execute([]).map(|_| ()));
        if let Err(e) = result {
            self.rollback();
            return Err(self.storage_err("cannot commit", e));
        }
        Ok(())
    }

    /// Rolls back the open transaction, if any. Errors are ignored: SQLite rolls back on its
    /// own when a statement fails in a way that ends the transaction.
    pub fn rollback(&self) {
        if let Ok(conn) = self.conn() {
            if !conn.is_autocommit() {
                let _ = conn.execute_batch("ROLLBACK");
            }
        }
    }

    fn storage_err(&self, what: &str, e: rusqlite::Error) -> Error {
        storage(&self.path, what, e)
    }
}

/// Closing a connection inherited from a parent process the ordinary way would checkpoint
/// and could delete the WAL the parent still uses: `agent_close` in a child closes only what
/// the child opened.
impl Drop for Store {
    fn drop(&mut self) {
        self.retire_inherited();
    }
}

#[derive(Debug, PartialEq, Eq)]
enum FileKind {
    Empty,
    /// An agent store of this schema version.
    Store(i32),
}

/// The change log table (schema 2).
const CHANGES_TABLE: &str = "CREATE TABLE agent_changes (
    version INTEGER PRIMARY KEY NOT NULL,
    at_ms INTEGER NOT NULL,
    writer INTEGER NOT NULL,
    patch BLOB,
    next BLOB NOT NULL,
    prev BLOB);";

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

fn storage(path: &Path, what: &str, e: rusqlite::Error) -> Error {
    match Error::from(e) {
        Error::Storage(m) => Error::Storage(format!("{}: {what}: {m}", path.display())),
        other => other,
    }
}

/// Creates `path` with mode 0600 if it does not exist yet. SQLite would create it with the
/// process umask (usually 0644), exposing agent state to every local user.
fn create_private_file(path: &Path) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(Error::Storage(format!(
            "{}: cannot create the store file: {e}",
            path.display()
        ))),
    }
}
