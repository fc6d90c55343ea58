//! One connection to a store file, shared by the handles of one process that open agents of
//! that file with the same options.
//!
//! Each connection costs three file descriptors (the database, its WAL and its shared memory):
//! with one per handle, a process under the usual limit of 1,024 could open only ~340 agents.
//! So handles opened with an `agent_id` share one connection per file and set of options
//! (looked up by the file's identity in [`REGISTRY`]). A handle without one, the file's single
//! agent as in 0.2, keeps a connection of its own: nothing about it changed.
//!
//! Handles sharing a connection take turns on it: a handle takes the [`Turn`] when a call first
//! needs a statement (a transaction, or a freshness check that runs one) and gives it back when
//! the call ends, so one call's transaction never interleaves with another's. A read served
//! from a handle's cache needs no statement and takes no turn. Waiting for the turn is bounded
//! by `busy_timeout_ms`, like waiting for another connection's lock.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use super::fork::FileId;
use super::Sqlite;
use crate::cancel;
use crate::error::{Error, Result};
use crate::store::{Retire, StoreOptions, Synchronous};

/// A connection and the turn its handles take on it.
pub struct Shared {
    turn: Turn,
    conn: Mutex<Sqlite>,
    /// Counts reconnections (after a `fork()`): a handle that saw another epoch drops its
    /// cache, since the new connection's data versions restart.
    epoch: AtomicU64,
}

/// What handles must agree on to share a connection.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    file: (u64, u64),
    read_only: bool,
    full_sync: bool,
    busy_timeout: Duration,
}

/// Shared connections of this process, by file and options.
static REGISTRY: Mutex<Option<HashMap<Key, Weak<Shared>>>> = Mutex::new(None);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Shared {
    /// A connection of its own (not shared).
    pub fn private(conn: Sqlite) -> Arc<Shared> {
        let shared = Arc::new(Shared {
            turn: Turn::default(),
            conn: Mutex::new(conn),
            epoch: AtomicU64::new(0),
        });
        shared.register_for_fork();
        shared
    }

    /// The connection this process shares for `file` with these options, opened by `open`
    /// when there is none yet.
    pub fn for_file(
        file: FileId,
        options: &StoreOptions,
        open: impl FnOnce() -> Result<Sqlite>,
    ) -> Result<Arc<Shared>> {
        let key = Key {
            file: file.parts(),
            read_only: options.read_only,
            full_sync: options.synchronous == Synchronous::Full,
            busy_timeout: options.busy_timeout,
        };
        if let Some(shared) = lock(&REGISTRY)
            .as_ref()
            .and_then(|m| m.get(&key))
            .and_then(Weak::upgrade)
        {
            return Ok(shared);
        }
        // Opened outside the registry's lock: opening may wait for other processes.
        let shared = Shared::private(open()?);
        let mut registry = lock(&REGISTRY);
        let map = registry.get_or_insert_with(HashMap::new);
        map.retain(|_, w| w.strong_count() > 0);
        if let Some(existing) = map.get(&key).and_then(Weak::upgrade) {
            return Ok(existing); // another thread opened one meanwhile; ours closes
        }
        map.insert(key, Arc::downgrade(&shared));
        Ok(shared)
    }

    fn register_for_fork(self: &Arc<Self>) {
        let conn = lock(&self.conn);
        if let Some(tracker) = conn.tracker() {
            let owner: Weak<dyn Retire> = Arc::downgrade(self) as Weak<dyn Retire>;
            super::fork::register(tracker, owner);
        }
    }

    /// The connection, for one statement or check (the caller holds the turn, or needs none).
    pub fn conn(&self) -> MutexGuard<'_, Sqlite> {
        lock(&self.conn)
    }

    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// Makes sure the connection belongs to this process (the caller holds the turn); true
    /// when it reconnected.
    pub fn ensure_current(&self) -> Result<bool> {
        let reconnected = self.conn().ensure_current()?;
        if reconnected {
            self.epoch.fetch_add(1, Ordering::AcqRel);
        }
        Ok(reconnected)
    }

    pub fn take_turn(&self, timeout: Duration) -> Result<()> {
        self.turn.take(timeout)
    }

    pub fn give_turn(&self) {
        self.turn.give()
    }
}

/// After a `fork()`, the registry asks each connection to the file to let go of an inherited
/// connection; a connection in use (its turn taken) says it is busy.
impl Retire for Shared {
    fn try_retire(&self) -> bool {
        if !self.turn.try_take() {
            return false;
        }
        let retired = match self.conn.try_lock() {
            Ok(mut conn) => {
                conn.retire_inherited();
                true
            }
            Err(std::sync::TryLockError::Poisoned(p)) => {
                p.into_inner().retire_inherited();
                true
            }
            Err(std::sync::TryLockError::WouldBlock) => false,
        };
        self.turn.give();
        retired
    }
}

thread_local! {
    /// A number for this thread, to tell who holds a turn (cheaper than `thread::current()`).
    static THREAD: u64 = {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        NEXT.fetch_add(1, Ordering::Relaxed)
    };
}

/// A lock taken and given back by separate calls (held from a call's first statement to its
/// end), with a bounded wait and a refusal instead of a self-deadlock.
#[derive(Default)]
struct Turn {
    holder: Mutex<Holder>,
    free: Condvar,
}

/// Who holds the turn, and how many wait for it: giving it back wakes a waiter only when there
/// is one (a notification is a system call, even with nobody waiting, on every call's end).
#[derive(Default)]
struct Holder {
    thread: Option<u64>,
    waiting: usize,
}

impl Turn {
    fn take(&self, timeout: Duration) -> Result<()> {
        let me = THREAD.with(|t| *t);
        let mut holder = lock(&self.holder);
        if holder.thread == Some(me) {
            return Err(Error::Busy(
                "this handle shares its store connection with a handle whose call is running on \
                 this thread (a validator or initial-state hook of another agent of the same \
                 file); that call holds the connection until it ends, so this one cannot wait \
                 for it"
                    .to_string()
                    .into(),
            ));
        }
        let mut deadline = None;
        while holder.thread.is_some() {
            cancel::check("while waiting for its turn on a shared store connection")?;
            let now = Instant::now();
            let deadline = *deadline.get_or_insert(now + timeout);
            if now >= deadline {
                return Err(Error::Busy(
                    format!(
                        "another handle sharing this store connection held it for longer than \
                     busy_timeout_ms ({} ms)",
                        timeout.as_millis()
                    )
                    .into(),
                ));
            }
            holder.waiting += 1;
            holder = self
                .free
                .wait_timeout(holder, (deadline - now).min(cancel::POLL))
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .0;
            holder.waiting -= 1;
        }
        holder.thread = Some(me);
        Ok(())
    }

    fn try_take(&self) -> bool {
        let mut holder = lock(&self.holder);
        if holder.thread.is_some() {
            return false;
        }
        holder.thread = Some(THREAD.with(|t| *t));
        true
    }

    fn give(&self) {
        let waiting = {
            let mut holder = lock(&self.holder);
            holder.thread = None;
            holder.waiting
        };
        if waiting > 0 {
            self.free.notify_one();
        }
    }
}
