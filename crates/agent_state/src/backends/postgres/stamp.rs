//! The stamp a handle writes with each state, and the stamp of the state it last read or
//! wrote: what keeps a cache honest across a failover that lost writes.
//!
//! With asynchronous replication, a promoted standby may lack the primary's last commits:
//! the agent's version goes back (say from 10 to 5), and the next writes make versions 6 to 10
//! again, with other states. A handle that cached the lost version 10 would find the version
//! it knows in the head, and serve the lost state. So each write also stores a stamp, and the
//! freshness test compares it too ([`crate::store::Head`]).
//!
//! A stamp is a random number per handle, not per write: the writer knows the stamp of its own
//! commit without reading it back. It changes when the handle sees the agent's version go
//! back (the only way the same handle could write a version number twice), so even the
//! handle's own versions written again after the loss carry a new stamp.

use std::cell::Cell;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

/// One handle's stamps.
pub(super) struct Stamps {
    /// What this handle writes with its states (never 0: rows of schema 1 have 0).
    own: Cell<i64>,
    /// The highest version this handle has read or written.
    highest: Cell<i64>,
    /// The stamp of the state as last read or written.
    last: Cell<i64>,
}

impl Stamps {
    pub fn new() -> Stamps {
        Stamps {
            own: Cell::new(random()),
            highest: Cell::new(0),
            last: Cell::new(0),
        }
    }

    /// The stamp this handle writes.
    pub fn own(&self) -> i64 {
        self.own.get()
    }

    /// The stamp of the state last read or written.
    pub fn last(&self) -> u64 {
        self.last.get() as u64
    }

    /// A row at `version` with `stamp` was read. A version below one seen before means
    /// versions were lost: this handle's next writes get a new stamp.
    pub fn read(&self, version: i64, stamp: i64) {
        if version < self.highest.get() {
            self.own.set(random());
        }
        self.highest.set(version);
        self.last.set(stamp);
    }

    /// This handle wrote `version` (with its own stamp).
    pub fn wrote(&self, version: i64) {
        self.highest.set(version);
        self.last.set(self.own.get());
    }
}

/// A random non-zero number: std's per-process random hash keys (seeded by the OS), over a
/// counter, so no two calls of a process repeat. (Also a watcher's registration id: see
/// `super::listen`.)
pub(super) fn random() -> i64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    match h.finish() as i64 {
        0 => 1,
        n => n,
    }
}
