//! The key-value layer on one SQLite file.
//!
//! Layout (schema version [`SCHEMA_VERSION`]): the file's `application_id` is [`APPLICATION_ID`]
//! so foreign SQLite files are recognised and left untouched; `user_version` holds the schema
//! version so later releases can migrate; table `agent_kv(key TEXT PRIMARY KEY, value BLOB)` holds
//! entries, of which the library reserves keys starting with `__agent_`. The state is the single
//! entry [`STATE_KEY`]. The journal is WAL, so readers never block the writer.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension};

use crate::ffi::wal_index::{WalHeader, WatchedConnection};

use crate::error::{Error, Result};

/// `PRAGMA application_id` of an agent store: ASCII "AgSt".
pub const APPLICATION_ID: i32 = 0x4167_5374;
/// The schema version this release writes and understands.
pub const SCHEMA_VERSION: i32 = 1;
/// The key of the state entry.
pub const STATE_KEY: &str = "__agent_state";

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

/// One connection to a store file.
pub struct Store {
    conn: WatchedConnection,
    path: PathBuf,
    read_only: bool,
}

impl Store {
    /// Opens (creating when absent and not read-only) the store at `path`.
    ///
    /// A new file is created with mode 0600 before SQLite sees it, and SQLite gives its WAL and
    /// shared-memory files the same mode. A file that is not an SQLite database, an SQLite
    /// database of another application, or a store of a newer schema is refused with
    /// [`Error::Storage`] before anything is written to it.
    pub fn open(path: &Path, options: &StoreOptions) -> Result<Store> {
        let in_memory = path.as_os_str() == ":memory:";
        if !in_memory && !options.read_only {
            create_private_file(path)?;
        }
        let mut flags = OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_EXRESCODE;
        flags |= if options.read_only {
            OpenFlags::SQLITE_OPEN_READ_ONLY
        } else {
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE
        };
        let conn = Connection::open_with_flags(path, flags)
            .map_err(|e| storage(path, "cannot open", e))?;
        conn.busy_timeout(options.busy_timeout)
            .map_err(|e| storage(path, "cannot configure", e))?;
        let mut store = Store {
            conn: WatchedConnection::new(conn),
            path: path.to_path_buf(),
            read_only: options.read_only,
        };
        store.check_and_init(options, in_memory)?;
        // A read-only connection may be given a private copy of the shared memory, whose header
        // would never change: it keeps asking `PRAGMA data_version` instead.
        if !in_memory && !options.read_only {
            store.data_version()?; // makes sure SQLite has mapped the shared memory
            store.conn.watch_wal();
        }
        Ok(store)
    }

    fn check_and_init(&self, options: &StoreOptions, in_memory: bool) -> Result<()> {
        // Reading the header first: nothing is written to a file we do not own.
        let kind = self.identify()?;
        if kind == FileKind::Empty && self.read_only {
            return Err(Error::Storage(format!(
                "{}: no agent store here to open read-only",
                self.path.display()
            )));
        }
        if !self.read_only {
            if !in_memory {
                self.enable_wal(options.busy_timeout)?;
            }
            let sync = match options.synchronous {
                Synchronous::Full => "FULL",
                Synchronous::Normal => "NORMAL",
            };
            self.conn
                .pragma_update(None, "synchronous", sync)
                .map_err(|e| self.storage_err("cannot set synchronous", e))?;
        }
        if kind == FileKind::Empty {
            self.initialize()?;
        }
        Ok(())
    }

    /// Switches the file to WAL journaling. SQLite does not apply the busy timeout to this
    /// pragma (another process initializing the same new file makes it fail at once with
    /// SQLITE_BUSY), so it is retried here until `busy_timeout` has passed.
    fn enable_wal(&self, busy_timeout: Duration) -> Result<()> {
        let started = std::time::Instant::now();
        let mut pause = Duration::from_millis(1);
        loop {
            let attempt: rusqlite::Result<String> =
                self.conn
                    .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0));
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
        let read = || -> rusqlite::Result<(i32, i32, i64)> {
            self.conn.query_row(
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
        Ok(FileKind::Store)
    }

    /// Creates the schema, inside a write transaction so that two processes opening one new file
    /// at once both end up with the same, single, initialized store.
    fn initialize(&self) -> Result<()> {
        self.begin_immediate()?;
        let result = (|| -> rusqlite::Result<()> {
            let version: i32 = self
                .conn
                .pragma_query_value(None, "user_version", |r| r.get(0))?;
            if version == 0 {
                self.conn.execute_batch(&format!(
                    "CREATE TABLE agent_kv (key TEXT PRIMARY KEY NOT NULL, value BLOB NOT NULL);
                     PRAGMA application_id = {APPLICATION_ID};
                     PRAGMA user_version = {SCHEMA_VERSION};"
                ))?;
            }
            Ok(())
        })();
        match result {
            Ok(()) => self.commit(),
            Err(e) => {
                self.rollback();
                Err(self.storage_err("cannot initialize", e))
            }
        }
    }

    /// True when the store was opened read-only.
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// A number that changes whenever *another* connection commits to the file (SQLite's
    /// `PRAGMA data_version`); this connection's own commits leave it unchanged.
    pub fn data_version(&self) -> Result<i64> {
        let mut stmt = self.conn.prepare_cached("PRAGMA data_version")?;
        Ok(stmt.query_row([], |r| r.get(0))?)
    }

    /// The WAL-index header: it changes whenever any connection, in any process, commits. When
    /// it is the same as when the caller last checked `data_version`, nothing was committed
    /// since. `None` when unavailable (read-only or in-memory store, or a commit in progress).
    pub fn wal_header(&self) -> Option<WalHeader> {
        self.conn.wal_header()
    }

    /// The pager's data version as of this connection's latest transaction (the current one,
    /// inside a transaction): it changes whenever a transaction starts and finds the database
    /// changed by another connection, and by exactly one with each of this connection's own
    /// commits. Costs a function call, where [`Store::data_version`] runs a statement.
    pub fn data_version_in_transaction(&self) -> Option<u32> {
        self.conn.pager_data_version()
    }

    /// Reads the value stored under `key`, if any.
    pub fn read(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT value FROM agent_kv WHERE key = ?1")?;
        // Text or blob alike: what matters is the bytes (the library writes blobs).
        Ok(stmt
            .query_row([key], |r| Ok(r.get_ref(0)?.as_bytes()?.to_vec()))
            .optional()?)
    }

    /// Stores `value` under `key` (inside the caller's transaction).
    pub fn write(&self, key: &str, value: &[u8]) -> Result<()> {
        // UPDATE first: after the first write it is all there is to do, and cheaper than an
        // upsert's extra uniqueness probe.
        let updated = self
            .conn
            .prepare_cached("UPDATE agent_kv SET value = ?2 WHERE key = ?1")?
            .execute(rusqlite::params![key, value])
            .map_err(|e| self.storage_err("cannot write", e))?;
        if updated == 0 {
            self.conn
                .prepare_cached("INSERT INTO agent_kv (key, value) VALUES (?1, ?2)")?
                .execute(rusqlite::params![key, value])
                .map_err(|e| self.storage_err("cannot write", e))?;
        }
        Ok(())
    }

    /// Starts a write transaction, taking the write lock now (waiting up to the busy timeout).
    pub fn begin_immediate(&self) -> Result<()> {
        if self.read_only {
            return Err(Error::Storage(format!(
                "{}: the store was opened read_only; writes are refused",
                self.path.display()
            )));
        }
        let mut stmt = self.conn.prepare_cached("BEGIN IMMEDIATE")?;
        stmt.execute([])
            .map_err(|e| self.storage_err("cannot begin a transaction", e))?;
        Ok(())
    }

    /// Commits the open transaction; on failure the transaction is rolled back.
    pub fn commit(&self) -> Result<()> {
        let result = self
            .conn
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
        if !self.conn.is_autocommit() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }

    fn storage_err(&self, what: &str, e: rusqlite::Error) -> Error {
        storage(&self.path, what, e)
    }
}

#[derive(Debug, PartialEq, Eq)]
enum FileKind {
    Empty,
    Store,
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
