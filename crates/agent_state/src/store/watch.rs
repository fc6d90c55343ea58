//! What the store's watcher (`crate::watch`) needs from a backend: a signal that agents may
//! have changed, cheaper than a query per agent ([`CommitSignal`]), and the store-wide reads
//! that confirm what changed ([`WatchReads`]).
//!
//! These exist so that watching costs what changes, not what is watched: a watcher follows
//! any number of agents with one signal and, when it fires, one store-wide read of versions.
//! How a backend learns of commits (a ring in shared memory next to an embedded file, a
//! server's notifications, a query per interval) is its own business; the watcher only sees
//! [`Signal`]s. Catch-up reads (the change log after a known version) go through the ordinary
//! per-agent [`Backend`](super::Backend) handle.

use std::time::Duration;

use crate::error::Result;

/// What tells the watcher that agents of a store may have changed, without a query per agent.
///
/// Owned by the store's one watcher thread (hence `Send`, not `Sync`). A signal is a hint:
/// the watcher always reads the store to confirm what it says, so a spurious signal costs a
/// read, never a wrong event; a missed one is caught by the watcher's periodic rescan.
pub trait CommitSignal: Send {
    /// Waits up to `timeout` for commits and says what it learned. [`Signal::Quiet`]: nothing
    /// within `timeout`. [`Signal::Changed`]: these agents reached at least these versions.
    /// [`Signal::Unknown`]: something may have changed and the source cannot say what (a ring
    /// lapped, a connection re-established, a polling interval elapsed): the watcher rescans
    /// every watched agent.
    ///
    /// Errors: what the source's connection reports. A failure that may pass
    /// ([`Error::Busy`](crate::Error::Busy), [`Error::Unavailable`](crate::Error::Unavailable))
    /// is retried by the watcher, which rescans afterwards; any other ends the watches of the
    /// store.
    fn wait(&mut self, timeout: Duration) -> Result<Signal>;
}

/// What a [`CommitSignal`] learned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signal {
    /// No commit noticed within the wait.
    Quiet,
    /// These agents were committed to (each at least at its [`Notice::version`]).
    Changed(Vec<Notice>),
    /// Something may have changed; which agents, the source cannot say.
    Unknown,
}

/// One agent that a [`CommitSignal`] saw committed to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// Its id, when the source carries ids (a server's notification); `None` when only the
    /// hash is known (a slot of a shared-memory ring).
    pub id: Option<String>,
    /// [`id_hash`](super::id_hash) of its id: what the watcher matches against the agents it
    /// follows when `id` is `None`. A hash no watched agent has is ignored; two ids with one
    /// hash both get read (a read too many, never an event missed).
    pub id_hash: i64,
    /// The version the commit made (0: the agent was deleted or expired).
    pub version: u64,
}

impl Notice {
    /// A notice carrying the agent's id (its hash computed here).
    #[allow(dead_code)] // for the backends whose notices carry ids
    pub fn of(id: &str, version: u64) -> Notice {
        Notice {
            id: Some(id.to_string()),
            id_hash: super::id_hash(id),
            version,
        }
    }
}

/// The store-wide reads the watcher makes, on a connection of its own (not an agent's handle).
///
/// Owned by the store's one watcher thread. Each method is one query (or a few pages of one),
/// whatever the number of agents it returns, in one read transaction where the backend has
/// them (so that the versions returned are of one commit).
pub trait WatchReads: Send {
    /// `(id, version)` of every agent with a state stored whose id starts with `prefix` (`""`:
    /// every agent), ordered by id (byte order).
    fn versions_with_prefix(&mut self, prefix: &str) -> Result<Vec<(String, u64)>>;

    /// `(id, version)` of those of `ids` with a state stored (the absent are omitted), in any
    /// order.
    fn versions_of(&mut self, ids: &[&str]) -> Result<Vec<(String, u64)>>;
}
