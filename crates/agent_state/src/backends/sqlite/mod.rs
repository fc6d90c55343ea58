//! The SQLite backend: one connection to an agent store file.
//!
//! `schema` (the file format), `delta` (a state as its base and the patches after it),
//! `entries` (the change log and the older schemas' state), `agents` (the file's
//! agents as a whole: listing, deletion with erasure, expiry), `error` (SQLite's
//! failures as the library's error kinds),
//! `wal_index` (the cheap freshness test) and [`fork`] (connections across `fork()`, on the
//! fork count of [`crate::store::process`]). `wal_index` talks to C directly: with the fork
//! watcher, it is the only `unsafe` outside the C boundary, each block with its SAFETY note.
//!
//! The file format (tables, reserved keys, schema versions and migration) is described in
//! `schema`; [`APPLICATION_ID`] and [`SCHEMA_VERSION`] identify an agent store.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rusqlite::{Connection, OpenFlags};

use self::error::storage;
use self::fork::{FileId, Tracker};
use self::schema::create_private_file;
use self::wal_index::WatchedConnection;
use crate::error::{Error, Result};
use crate::store::process;
use crate::store::{Mark, StoreOptions};

mod agents;
mod busy;
mod delta;
mod entries;
mod error;
pub mod fork;
mod group_sync;
mod handle;
#[allow(unsafe_code)] // reads SQLite's shared memory without the connection's lock
mod mark_watch;
mod schema;
mod settings;
mod shared;
#[allow(unsafe_code)] // reads SQLite's shared memory through its VFS
mod wal_index;
mod watch;
#[allow(unsafe_code)] // maps the watch ring, shared memory next to the store
mod watch_ring;

pub use agents::SqliteAgents;
pub use handle::open;
pub use mark_watch::MarkWatch;
pub use schema::{APPLICATION_ID, SCHEMA_VERSION};
pub use watch::{SqliteSignal, SqliteWatchReads};

/// One connection to a store file, private to the process that opened it: after a `fork()`,
/// the child's first use closes the inherited connection safely and opens its own (see
/// [`fork`]).
pub struct Sqlite {
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
    /// With `synchronous: full`: the WAL sync this process's writers share (see `group_sync`).
    wal_sync: Option<Arc<group_sync::WalSync>>,
    /// The open transaction is a write (its commit waits for the WAL sync).
    writing: std::sync::atomic::AtomicBool,
    /// The store's watch ring (none in memory, read-only, or where it cannot be mapped).
    ring: Option<watch_ring::Ring>,
    /// What the open write transaction changed, appended to the ring once it commits.
    noted: std::sync::Mutex<Vec<(i64, u64)>>,
}

impl Sqlite {
    /// Opens (creating when absent and not read-only) the store at `path`.
    ///
    /// A new file is created with mode 0600 before SQLite sees it, and SQLite gives its WAL and
    /// shared-memory files the same mode. A file that is not an SQLite database, an SQLite
    /// database of another application, or a store of a newer schema is refused with
    /// [`Error::Storage`] before anything is written to it.
    pub fn open(path: &Path, options: &StoreOptions) -> Result<Sqlite> {
        process::watch();
        let generation = process::generation();
        let mut store = Sqlite {
            conn: None,
            path: path.to_path_buf(),
            options: options.clone(),
            schema: SCHEMA_VERSION,
            generation,
            tracker: None,
            wal_sync: None,
            writing: std::sync::atomic::AtomicBool::new(false),
            ring: None,
            noted: std::sync::Mutex::new(Vec::new()),
        };
        store.connect()?;
        if !store.in_memory() {
            let file = FileId::of(path).ok_or_else(|| {
                Error::Storage(
                    format!("{}: the store file vanished while opening", path.display()).into(),
                )
            })?;
            store.tracker = Some(Tracker::new(file, generation));
            if !options.read_only {
                store.ring = watch_ring::Ring::open(path);
            }
        }
        Ok(store)
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
        conn.busy_handler(Some(busy::handler))
            .map_err(|e| storage(path, "cannot configure", e))?;
        self.conn = Some(WatchedConnection::new(conn));
        let options = self.options.clone();
        // Creating or upgrading the file is the library's own one-time set-up, not a lock the
        // caller chose not to wait for: another connection doing it is waited for as long as
        // server_timeout_ms too, whatever busy_timeout_ms is.
        let setup = options.busy_timeout.max(options.server_timeout);
        if let Err(e) = busy::during(setup, || self.check_and_init(&options, in_memory, setup)) {
            self.conn = None;
            return Err(e);
        }
        // A read-only connection may be given a private copy of the shared memory, whose header
        // would never change: it keeps asking `PRAGMA data_version` instead.
        if !in_memory && !options.read_only {
            // Opening an existing store ran a read in WAL mode, which mapped the shared
            // memory; after creating one, a statement makes sure.
            let watched = self.conn.as_mut().is_some_and(|c| c.watch_wal());
            if !watched {
                self.refresh()?;
                if let Some(conn) = self.conn.as_mut() {
                    conn.watch_wal();
                }
            }
        }
        Ok(())
    }

    /// Makes sure the connection belongs to this process. Free when it does (one atomic load);
    /// in a child process after `fork()`, closes the inherited connection (and every other one
    /// this process inherited to the same file) without touching shared state, then opens a
    /// fresh one. Returns true when it reconnected: what the caller cached may be stale.
    pub fn ensure_current(&mut self) -> Result<bool> {
        let now = process::generation();
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
        let now = process::generation();
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
            Some(conn) if self.generation == process::generation() => Ok(conn),
            _ => Err(Error::Storage(
                format!(
                    "{}: the process forked during this call; the call was not completed in the \
                 child process",
                    self.path.display()
                )
                .into(),
            )),
        }
    }

    fn storage_err(&self, what: &str, e: rusqlite::Error) -> Error {
        storage(&self.path, what, e)
    }
}

/// The connection's operations, used by [`SqliteAgent`] (which holds the connection's turn).
impl Sqlite {
    /// The file's schema version.
    pub(super) fn schema(&self) -> i32 {
        self.schema
    }

    /// The fork registry's record of this connection (none for an in-memory store).
    pub(super) fn tracker(&self) -> Option<Arc<Tracker>> {
        self.tracker.clone()
    }

    /// True when the connection is open and belongs to this process (one atomic load).
    pub(super) fn is_current(&self) -> bool {
        self.conn.is_some() && (self.generation == process::generation() || self.tracker.is_none())
    }

    /// The WAL-index header: it changes whenever any connection, in any process, commits.
    /// `None` when unavailable (read-only or in-memory store, or a commit in progress).
    pub(super) fn commit_mark(&self) -> Option<Mark> {
        // The read path's hot call: no fork check here (the call's lock already made sure of
        // the connection, and a fork in mid-call stops at the next statement, in `conn`).
        self.conn.as_ref()?.wal_header().map(Mark)
    }

    /// The commit mark as any thread may read it without this connection (`None` where
    /// [`Sqlite::commit_mark`] has none, or the connection is not this process's).
    pub(super) fn mark_watch(&self) -> Option<Arc<MarkWatch>> {
        self.conn().ok()?.mark_watch()
    }

    /// `PRAGMA data_version`: a statement, and so a read transaction of its own outside one.
    pub(super) fn refresh(&self) -> Result<()> {
        let mut stmt = self.conn()?.prepare_cached("PRAGMA data_version")?;
        stmt.query_row([], |r| r.get::<_, i64>(0))?;
        Ok(())
    }

    /// The pager's data version: a function call, where `PRAGMA data_version` runs a statement.
    pub(super) fn data_version(&self) -> Option<u32> {
        self.conn().ok()?.pager_data_version()
    }

    /// Starts a read transaction, so that several reads see one commit.
    pub(super) fn begin_read(&self) -> Result<()> {
        self.conn()?
            .prepare_cached("BEGIN DEFERRED")?
            .execute([])
            .map_err(|e| self.storage_err("cannot begin a transaction", e))?;
        Ok(())
    }

    /// Starts a write transaction, taking the write lock now (waiting up to the busy timeout).
    pub(super) fn begin_write(&self) -> Result<()> {
        if self.options.read_only {
            return Err(Error::Storage(
                format!(
                    "{}: the store was opened read_only; writes are refused",
                    self.path.display()
                )
                .into(),
            ));
        }
        // A file deleted or replaced since it was opened would take the write where no one
        // can read it again: refuse instead of acknowledging a lost write (costs one stat).
        if self.conn()?.has_moved() {
            return Err(Error::Storage(
                format!(
                    "{}: the store file was deleted, moved or replaced after it was opened; \
                 reopen the store (this write was not made)",
                    self.path.display()
                )
                .into(),
            ));
        }
        let mut stmt = self.conn()?.prepare_cached("BEGIN IMMEDIATE")?;
        stmt.execute([])
            .map_err(|e| self.storage_err("cannot begin a transaction", e))?;
        self.writing
            .store(true, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Commits the open transaction; on failure the transaction is rolled back.
    pub(super) fn commit(&self) -> Result<()> {
        let wrote = self
            .writing
            .swap(false, std::sync::atomic::Ordering::Relaxed);
        let result = self
            .conn()?
            .prepare_cached("COMMIT")
            .and_then(|mut s| s.execute([]).map(|_| ()));
        if let Err(e) = result {
            self.rollback();
            return Err(self.storage_err("cannot commit", e));
        }
        if wrote {
            self.tell_watchers();
        }
        match &self.wal_sync {
            Some(sync) if wrote => sync.after_commit(),
            _ => Ok(()),
        }
    }

    /// Inside a write transaction: agent `agent` gets `version` (0: deleted), which watchers
    /// are told of once the transaction commits.
    pub(super) fn note_commit(&self, agent: &str, version: u64) {
        if self.ring.is_some() {
            let mut noted = self.noted.lock().unwrap_or_else(|p| p.into_inner());
            noted.push((crate::store::id_hash(agent), version));
        }
    }

    /// After a commit: appends what it changed to the watch ring.
    fn tell_watchers(&self) {
        let Some(ring) = &self.ring else { return };
        let mut noted = self.noted.lock().unwrap_or_else(|p| p.into_inner());
        for (hash, version) in noted.drain(..) {
            ring.append(hash, version);
        }
    }

    /// Rolls back the open transaction, if any. Errors are ignored: SQLite rolls back on its
    /// own when a statement fails in a way that ends the transaction.
    pub(super) fn rollback(&self) {
        self.writing
            .store(false, std::sync::atomic::Ordering::Relaxed);
        if self.ring.is_some() {
            self.noted.lock().unwrap_or_else(|p| p.into_inner()).clear();
        }
        if let Ok(conn) = self.conn() {
            if !conn.is_autocommit() {
                let _ = conn.execute_batch("ROLLBACK");
            }
        }
    }
}

/// Closing a connection inherited from a parent process the ordinary way would checkpoint
/// and could delete the WAL the parent still uses: `agent_close` in a child closes only what
/// the child opened.
impl Drop for Sqlite {
    fn drop(&mut self) {
        self.retire_inherited();
    }
}

/// A nullable blob as a statement parameter. (Binding an `Option<&[u8]>` builds a
/// `ToSqlOutput::Owned(Value::Null)` whose unused bytes valgrind's memcheck follows into a
/// comparison in rusqlite's `bind_parameter` and reports as uninitialised; a borrowed
/// `ValueRef` is bound as it is.)
fn blob(bytes: Option<&[u8]>) -> rusqlite::types::ToSqlOutput<'_> {
    use rusqlite::types::{ToSqlOutput, ValueRef};
    ToSqlOutput::Borrowed(match bytes {
        Some(b) => ValueRef::Blob(b),
        None => ValueRef::Null,
    })
}
