//! What becomes of SQLite connections when the process forks (the fork count itself, which
//! the PostgreSQL backend needs as well, is [`crate::store::process`]).
//!
//! SQLite's rule is that a connection opened before `fork()` must not be used in the child.
//! Opening a fresh connection in the child is not enough on its own either: SQLite's unix VFS
//! keeps one record per database file and process (its "inode info" and shared-memory node)
//! with the locks the *process* holds, shared by all its connections to that file. The child
//! inherits the parent's record, which claims locks that, being POSIX advisory locks, the child
//! does not hold; a fresh connection joining that record takes no real lock, so a parent that
//! closes its last connection checkpoints and deletes the WAL the child is appending to, and
//! acknowledged writes vanish.
//!
//! So in a child, before a handle opens its fresh connection to a file, every connection the
//! child inherited to that file is closed *in a mode that cannot touch shared state*: with
//! checkpoint-on-close disabled, closing an idle connection only releases process-local memory,
//! file descriptors and locks the child never held, and never checkpoints, truncates or deletes
//! the WAL. Once the last inherited connection to the file is gone, SQLite drops the inherited
//! record, and the fresh connection takes real locks. The parent's connections are untouched.
//!
//! A connection caught in the middle of a transaction when the process forked (a fork from
//! inside a validator or an initial-state hook, or while another thread was inside a call) is
//! not closed at all: it is abandoned, and the file is marked unusable in that child, since no
//! fresh connection could take real locks next to it.
//!
//! Every store connection registers here with its file's identity and the fork generation it
//! was opened in ([`crate::store::process`] counts forks); [`recover`] does the closing.

use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::store::process::generation;
use crate::store::Retire;

/// The identity of a store file (device and inode): what SQLite shares its lock records by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileId {
    dev: u64,
    ino: u64,
}

impl FileId {
    /// Device and inode.
    /// The device and inode numbers.
    pub fn parts(&self) -> (u64, u64) {
        (self.dev, self.ino)
    }

    /// The identity of the file at `path`, when it exists.
    pub fn of(path: &std::path::Path) -> Option<FileId> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path).ok()?;
        Some(FileId {
            dev: meta.dev(),
            ino: meta.ino(),
        })
    }
}

/// What one connection's owner shares with the registry.
#[derive(Debug)]
pub struct Tracker {
    file: FileId,
    /// The fork generation of the connection held, or the current one when none is held.
    generation: AtomicU64,
    /// The connection was abandoned mid-transaction in this process: the file cannot be
    /// reopened here.
    poisoned: AtomicBool,
}

impl Tracker {
    /// A tracker of a connection to `file` opened in fork generation `generation`.
    pub fn new(file: FileId, generation: u64) -> Arc<Tracker> {
        Arc::new(Tracker {
            file,
            generation: AtomicU64::new(generation),
            poisoned: AtomicBool::new(false),
        })
    }

    /// Records that the owner now holds a connection of generation `g` (or none, with the
    /// current generation).
    pub fn set_generation(&self, g: u64) {
        self.generation.store(g, Ordering::Release);
    }

    /// The file the connection is to.
    pub fn file_id(&self) -> FileId {
        self.file
    }

    /// Marks the file as not reopenable in this process (its connection was abandoned in the
    /// middle of a transaction).
    pub fn poison(&self) {
        self.poisoned.store(true, Ordering::Release);
    }
}

struct Entry {
    tracker: Arc<Tracker>,
    owner: Weak<dyn Retire>,
}

static REGISTRY: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

/// Inherited connections abandoned mid-transaction: kept reachable, never closed.
static ABANDONED: Mutex<Vec<ManuallyDrop<Box<dyn Send>>>> = Mutex::new(Vec::new());

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Registers a connection's owner; entries of owners that are gone are pruned here.
pub fn register(tracker: Arc<Tracker>, owner: Weak<dyn Retire>) {
    let mut registry = lock(&REGISTRY);
    registry.retain(|e| e.owner.strong_count() > 0);
    registry.push(Entry { tracker, owner });
}

/// Keeps `conn` alive, unused, for the rest of the process, and marks its file unusable here.
pub fn abandon(conn: Box<dyn Send>, tracker: &Tracker) {
    tracker.poison();
    lock(&ABANDONED).push(ManuallyDrop::new(conn));
}

/// Before a fresh connection to `file` is opened in this process: closes every connection to
/// it that this process inherited from its parent. Waits (up to `timeout`) for owners busy in
/// another thread; fails with [`Error::Busy`] when one stays busy (a lock held by a thread of
/// the parent that does not exist in the child) and with [`Error::Storage`] when one was
/// abandoned mid-transaction.
pub fn recover(file: FileId, timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_micros(100);
    loop {
        let now = generation();
        let mut busy = false;
        {
            let registry = lock(&REGISTRY);
            for entry in registry.iter().filter(|e| e.tracker.file == file) {
                if entry.tracker.generation.load(Ordering::Acquire) == now {
                    continue;
                }
                if entry.tracker.poisoned.load(Ordering::Acquire) {
                    return Err(Error::Storage(
                        "this process was forked while a call on a handle to this store was in \
                         the middle of a transaction; the store cannot be used in the child \
                         process (open handles after fork, or fork outside calls)"
                            .to_string()
                            .into(),
                    ));
                }
                // An owner that is gone dropped its connection (closing an inherited one the
                // safe way); one that is alive is asked to.
                if let Some(owner) = entry.owner.upgrade() {
                    busy |= !owner.try_retire();
                }
            }
        }
        if !busy {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(Error::Busy(
                "a handle inherited from the parent process is still in use by a thread that \
                 was inside a call when the process forked; its connection cannot be released \
                 in the child"
                    .to_string()
                    .into(),
            ));
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(10));
    }
}
