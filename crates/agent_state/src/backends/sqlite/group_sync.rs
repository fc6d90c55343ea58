//! Group commit: the writers of one store file in this process share each `fdatasync` of its
//! WAL.
//!
//! With `synchronous: full`, SQLite syncs the WAL inside every commit, while the commit holds
//! the file's write lock: writers queue behind each other's syncs, and eight threads commit no
//! more per second than one. Instead, a connection opened with `full` runs SQLite at `NORMAL`
//! (a commit writes its frames to the WAL without syncing; the database is never corrupt,
//! checkpoints still sync) and, once its `COMMIT` has returned, waits here until a sync of the
//! WAL that began after its frames were written has completed. The first writer to arrive
//! syncs; those that commit meanwhile wait for the next sync, which covers all of them. Every
//! call still returns only after a sync that covers its change, so an acknowledged write
//! survives power loss, as with SQLite's own `full`.
//!
//! What changes: another connection may read a commit while its sync is under way, before the
//! writer's call returns (with SQLite's own `full`, readers see it only after the sync). Such a
//! reader can act on a change that a power cut then takes back; the writer itself, and its
//! hooks, never do.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};

use crate::error::{Error, Result};

/// One store file's WAL as this process syncs it.
pub(super) struct WalSync {
    wal: PathBuf,
    state: Mutex<State>,
    synced_cv: Condvar,
}

#[derive(Default)]
struct State {
    /// Commits counted so far (each counted after its frames were written).
    written: u64,
    /// Every commit up to this count is covered by a completed sync.
    synced: u64,
    /// A sync is running.
    syncing: bool,
    /// The WAL, opened by the first sync (it may not exist before the first write).
    file: Option<Arc<File>>,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// This process's [`WalSync`]s, by process and database path (a child after `fork()` starts
/// afresh: the parent's state may be held by one of its threads). A list, not a hash map: a
/// process writes a few files, and a list's storage is reached from its start (memcheck takes
/// a hash table's, reached only through its middle, for a possible leak).
type Registry = Mutex<Vec<(u32, PathBuf, Weak<WalSync>)>>;

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(Default::default)
}

impl WalSync {
    /// The WAL sync shared by this process's connections to the database at `db`.
    pub(super) fn for_file(db: &Path) -> Arc<WalSync> {
        let path = std::fs::canonicalize(db).unwrap_or_else(|_| db.to_path_buf());
        let pid = std::process::id();
        let mut list = registry().lock().unwrap_or_else(|p| p.into_inner());
        list.retain(|(_, _, w)| w.strong_count() > 0);
        let found = list
            .iter()
            .find(|(p, f, _)| *p == pid && *f == path)
            .and_then(|(_, _, w)| w.upgrade());
        if let Some(found) = found {
            return found;
        }
        let mut wal = path.clone().into_os_string();
        wal.push("-wal");
        let sync = Arc::new(WalSync {
            wal: PathBuf::from(wal),
            state: Mutex::new(State::default()),
            synced_cv: Condvar::new(),
        });
        list.push((pid, path, Arc::downgrade(&sync)));
        sync
    }

    /// Called once a write transaction's `COMMIT` has returned: returns when a sync of the WAL
    /// begun after it has completed (one this call made, or another writer's).
    pub(super) fn after_commit(&self) -> Result<()> {
        let mut state = lock(&self.state);
        state.written += 1;
        let mine = state.written;
        loop {
            if state.synced >= mine {
                return Ok(());
            }
            if state.syncing {
                state = self
                    .synced_cv
                    .wait(state)
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                continue;
            }
            state.syncing = true;
            let target = state.written;
            let file = state.file.clone();
            drop(state);
            let result = self.sync(file);
            state = lock(&self.state);
            state.syncing = false;
            let outcome = match result {
                Ok(file) => {
                    state.file.get_or_insert(file);
                    state.synced = state.synced.max(target);
                    Ok(())
                }
                Err(e) => Err(e),
            };
            self.synced_cv.notify_all();
            outcome?;
        }
    }

    /// `fdatasync` of the WAL; the first one also syncs the directory, which a power cut could
    /// otherwise leave without the WAL's entry.
    fn sync(&self, file: Option<Arc<File>>) -> Result<Arc<File>> {
        let failed = |what: &str, e: std::io::Error| {
            Error::Storage(
                format!(
                "{}: the write was committed, but {what} failed, so it may not survive a power \
                 loss: {e}",
                self.wal.display()
            )
                .into(),
            )
        };
        let file = match file {
            Some(file) => file,
            None => {
                let file = File::open(&self.wal).map_err(|e| failed("opening the WAL", e))?;
                if let Some(dir) = self.wal.parent() {
                    File::open(dir)
                        .and_then(|d| d.sync_all())
                        .map_err(|e| failed("syncing the directory", e))?;
                }
                Arc::new(file)
            }
        };
        file.sync_data().map_err(|e| failed("syncing the WAL", e))?;
        Ok(file)
    }
}
