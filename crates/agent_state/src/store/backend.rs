//! What the agent needs from a store, as one trait per concern, and [`Backend`], their sum.
//!
//! Each trait answers one question the agent has to ask of the place its state lives:
//! - [`Ownership`]: is this connection still this process's, and is this call done with it?
//!   (A connection inherited across `fork()` must never be used.)
//! - [`Freshness`]: did anything change since the read cache was filled, and how cheaply can
//!   that be told? (Reads served from the cache transfer no state.)
//! - [`Transactions`]: which reads see one commit, and which writes are atomic?
//! - [`StoredState`]: the state and its version, inside a transaction.
//! - [`ChangeLog`]: the log of changes, whose retention is the agent's policy.
//! - [`StoreSettings`]: what the store remembers for every handle that opens it.
//!
//! A backend implements all six; the agent holds a `Box<dyn Backend>`. Supertrait methods are
//! callable on a `dyn Backend` as they were when all of them were `Backend`'s own.

use std::sync::{Arc, Weak};

use super::{AgentInfo, AgentQuery, LogRetention, LoggedChange, Mark, NewChange};
use crate::error::Result;

/// One connection to a store, as the agent uses it: every concern below. Methods that read or
/// write entries run inside a transaction taken with [`Txn`](super::Txn).
pub trait Backend:
    Ownership + Freshness + Transactions + StoredState + ChangeLog + StoreSettings + Send
{
}

impl<
        T: Ownership
            + Freshness
            + Transactions
            + StoredState
            + ChangeLog
            + StoreSettings
            + Send
            + ?Sized,
    > Backend for T
{
}

/// An owner of a connection that can be asked to let go of one inherited across `fork()`.
pub trait Retire: Send + Sync {
    /// Closes the owner's connection if it was inherited (see
    /// `fork()`) and returns true; returns false, doing nothing,
    /// when the owner is busy (its lock is held).
    fn try_retire(&self) -> bool;
}

/// The connection belongs to this process, for the length of one call.
///
/// These exist because of `fork()`: a connection opened by a parent process must be neither
/// used nor closed the ordinary way in the child (a file's locks belong to the parent, a
/// server connection's socket is shared with it), so every call first makes sure of the
/// connection, and a child lets go of what it inherited without touching it. The fork count
/// they compare is [`process`](super::process). `end_call` exists because handles may share
/// one connection and take turns on it, a turn lasting one call.
pub trait Ownership {
    /// Registers the owner of this handle, which the store may ask (through [`Retire`]) to let
    /// go of an inherited connection when a child process must reconnect. A no-op where the
    /// backend tracks its connections itself.
    fn register_owner(&self, _owner: Weak<dyn Retire>) {}

    /// Starts one call of the agent: makes sure the connection belongs to this process (free
    /// when it does; after a `fork()`, reconnects). Returns true when what the caller cached may
    /// be stale (it reconnected). Every call that began ends with [`Ownership::end_call`].
    fn ensure_current(&mut self) -> Result<bool>;

    /// Ends one call of the agent: what the call held of a connection shared with other handles
    /// is given back.
    fn end_call(&mut self) {}

    /// Lets go of a connection inherited from a parent process without touching what the parent
    /// still uses (does nothing to one this process opened).
    fn retire_inherited(&mut self) {}
}

/// Tests that the read cache is still current, from the cheapest to the surest.
///
/// These exist so that a read served from the cache costs no transaction and transfers no
/// state: a commit mark read from shared memory, then a data version, then the stored version
/// itself. Each may say "unavailable" (`None`), and the next one decides.
pub trait Freshness {
    /// A mark that changes whenever any connection, in any process, commits, read without a
    /// transaction. `None` when unavailable (then [`Freshness::data_version`] decides).
    fn commit_mark(&self) -> Option<Mark>;

    /// The commit mark as any thread may read it, without this connection or its lock, for as
    /// long as it holds the `Arc` (a dead watch confirms nothing). `None` where there is no
    /// commit mark, or no such view of it (the default).
    fn commit_watch(&self) -> Option<Arc<dyn CommitWatch>> {
        None
    }

    /// Brings [`Freshness::data_version`] up to date outside a transaction; inside a read
    /// transaction that has not read yet, takes its snapshot now.
    fn refresh(&self) -> Result<()>;

    /// A number that differs from an earlier one when another connection committed in between,
    /// as of this connection's latest transaction (the current one, inside a transaction). Each
    /// commit of this connection moves it by exactly one. `None` when unavailable.
    fn data_version(&self) -> Option<u32>;

    /// The agent's stored version (0: nothing stored) and the change log's retention, in one
    /// atomic read (its own read, outside a transaction; inside one, as the transaction sees
    /// them). The test that a cached state is still current once the cheaper ones above say
    /// "something changed" or are unavailable: it transfers no state. `None` when the backend
    /// has no such test worth making (a store of one agent: any commit is to it, and the state
    /// is re-read, which also sees a write made behind the library's back).
    fn head(&self) -> Result<Option<Head>>;

    /// The stamp of the state as this handle last read or wrote it (see [`Head::stamp`]); 0
    /// where the backend has none.
    fn stamp(&self) -> u64 {
        0
    }
}

/// A view of a store's commit mark that any thread may read without the connection or its
/// lock: what lets a hot read trust its own copy of the state (`agent::hot`).
pub trait CommitWatch: Send + Sync {
    /// True when the connection is open and its commit mark is still `mark`: nothing was
    /// committed since `mark` was read. False when unsure (a commit under way, the connection
    /// closing): the caller then takes the locked path.
    fn unchanged(&self, mark: &Mark) -> bool;
}

/// What [`Freshness::head`] reads: enough to tell that a cached state is still the stored one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    /// The agent's stored version (0: nothing stored).
    pub version: u64,
    /// The change log's retention; `None` when the log is off.
    pub log: Option<LogRetention>,
    /// A number written with each state (0 where the backend has none). On a server
    /// whose replication is asynchronous, a failover can lose the last versions, and the same
    /// version numbers are then written again with other states: the stamp tells them apart.
    pub stamp: u64,
}

/// Transactions, taken through [`Txn`](super::Txn), which rolls back unless committed.
///
/// These exist so that several reads see one commit, a change and its log entry are written
/// together or not at all, and, where a lock costs round trips, a write can be made without
/// one and retried under one when it lost a race.
pub trait Transactions {
    /// Starts a read transaction; its snapshot is taken at its first read.
    fn begin_read(&self) -> Result<()>;

    /// Starts a write transaction, waiting for other writers up to the busy timeout. Refused on
    /// a read-only store.
    fn begin_write(&self) -> Result<()>;

    /// True while the open write transaction is *optimistic*: it took no lock, so the caller
    /// computes the change from its cached state without reading, and
    /// [`Transactions::commit`] writes only if the stored version is still the one the change
    /// was computed from; otherwise it fails with `Error::Stale` (internal),
    /// nothing written, and the caller retries with [`Transactions::begin_write`] under a lock
    /// (`optimistic` false). Backends whose write transactions are cheap to lock (an embedded
    /// file) always say false.
    fn optimistic(&self) -> bool {
        false
    }

    /// Starts an optimistic write transaction where the backend offers one (a server, where a
    /// lock costs round trips); elsewhere the same as [`Transactions::begin_write`].
    fn begin_optimistic_write(&self) -> Result<()> {
        self.begin_write()
    }

    /// Commits the open transaction; on failure it is rolled back.
    fn commit(&self) -> Result<()>;

    /// Rolls back the open transaction, if any.
    fn rollback(&self);
}

/// The agent's state and its version, inside a transaction: what the store is for.
///
/// A state is stored as its newest full copy (the *base*) and the merge patches committed
/// after it (see [`StoredRead`]): a write costs what its patch is, not what the state is, and
/// the backend writes the full state again when the patches since the base outweigh it or
/// after a bounded count ([`max_patches`](super::max_patches): one per KiB of the state, at
/// least 128), so a cold read merges at most that many patches. The agent merges them (exactly as the writers did); backends store
/// bytes.
pub trait StoredState {
    /// The stored state, if any: its base and the patches after it. With `have`, the version
    /// of a state the caller holds: when the patches after it are all stored, only they are
    /// read (`base` is `None`), so a cache that is behind catches up without reading the
    /// whole state.
    fn read_stored(&self, have: Option<u64>) -> Result<Option<StoredRead>>;

    /// The stored version (0: nothing stored), without the state: what a caller repairing an
    /// entry that no longer decodes needs.
    fn stored_version(&self) -> Result<u64>;

    /// Writes `change` (the new state, its version, the time of this write: now) and, with
    /// `log`, its change-log entry, as one (the log's entry is the stored patch). What
    /// `log`'s retention no longer keeps disappears from the log at once
    /// ([`ChangeLog::changes_after`] and [`ChangeLog::change_at`] never return it) and is
    /// deleted, possibly later and in batches, except what [`ChangeLog::replay_to`] or the
    /// state still need.
    fn write_change(&self, change: &NewChange<'_>, log: Option<LogRetention>) -> Result<()>;

    /// Stores `state`, the agent's state at its current `version`, as its base: the patches
    /// before it are no longer needed for the state (the log, when on, keeps its own). Done
    /// before the change log is switched on or off, so that no patch stored while it was off
    /// becomes part of the log, and none the state needs is dropped with it.
    fn rebase(&self, state: &[u8], version: u64) -> Result<()>;

    /// The version a first write takes while nothing is stored: one above the last version
    /// of the agent when it was deleted (its tombstone), 1 for an agent never deleted, so that
    /// no version read before a deletion is ever the version of a state written after it.
    fn first_version(&self) -> Result<u64>;
}

/// What [`StoredState::read_stored`] reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRead {
    /// The stored version.
    pub version: u64,
    /// The schema version the stored state was written under (0: before schema versions
    /// were stored, or by a program that declares none).
    pub schema: u32,
    /// The full state at version `base.1`, or `None` when the patches apply to the caller's
    /// own copy (at the `have` it gave).
    pub base: Option<(Vec<u8>, u64)>,
    /// The merge patches of the versions after the base (or after `have`) through `version`,
    /// oldest first, one per version.
    pub patches: Vec<Vec<u8>>,
}

/// The agents of a store, on a connection of its own (not one agent's handle).
///
/// These exist so that a program can see what a store holds and take agents out of it: a
/// listing that costs what the page holds, a deletion that erases, and the idle agents that
/// expiry deletes in bounded batches.
pub trait Agents: Send {
    /// The agents with a state stored that `query` selects, ordered by id.
    fn list_agents(&self, query: &AgentQuery) -> Result<Vec<AgentInfo>>;

    /// Deletes agent `id`'s state, versions and change log in one transaction and returns the
    /// version it had (`None`: nothing was stored, nothing done). `allow` is asked first,
    /// inside that transaction, with the stored version (0: nothing stored); its error
    /// (a compare-and-set's conflict, decided above the backends) is returned and nothing is
    /// deleted. The agent's change-log setting stays, and its tombstone (the hash of its id,
    /// [`id_hash`](super::id_hash), and the deleted version) is kept for
    /// [`StoredState::first_version`]. Once it returns, no byte of what was deleted is left in
    /// the store's files where the backend controls them (an embedded file and its journal).
    fn delete_agent(&self, id: &str, allow: &dyn Fn(u64) -> Result<()>) -> Result<Option<u64>>;

    /// Deletes (unless `dry_run`) and returns at most `limit` agents whose state was last
    /// written before `before_ms`, the longest idle first, in one transaction; an agent written
    /// meanwhile is not idle and stays. Costs what it returns, whatever the store holds.
    fn expire_agents(&self, before_ms: i64, limit: usize, dry_run: bool) -> Result<Vec<AgentInfo>>;
}

/// The change log, inside a transaction.
///
/// These exist for history, other handles' changes (`poll`) and states rebuilt at a version;
/// what the log keeps is its retention, and how it prunes is the store's business, never the
/// agent's.
pub trait ChangeLog {
    /// The change log's retention (`None`: the log is off).
    fn log_retention(&self) -> Result<Option<LogRetention>>;

    /// Switches the change log on with this retention, or off (`None`, dropping the log).
    fn set_log_retention(&self, retention: Option<LogRetention>) -> Result<()>;

    /// The changes with a version above `after` that `retention` keeps, oldest first. A change
    /// is kept when it is among the last `keep_last` and, with `keep_seconds`, at most that
    /// old relative to the newest change (which is always kept).
    fn changes_after(&self, after: u64, retention: LogRetention) -> Result<Vec<LoggedChange>>;

    /// The change that made `version`, if `retention` keeps it.
    fn change_at(&self, version: u64, retention: LogRetention) -> Result<Option<LoggedChange>>;

    /// What rebuilds the state at `version`: the logged changes from the newest one at or
    /// below `version` that holds its full state, through `version`, oldest first, whether or
    /// not retention still shows them. Empty when the log cannot rebuild it.
    fn replay_to(&self, version: u64) -> Result<Vec<LoggedChange>>;
}

/// What a store remembers for every handle that opens it, whichever agent it opens.
///
/// These exist so that a choice made once for a store holds for every handle opened later
/// without each being told again: today, how large a state may grow (a state one handle was
/// allowed to store must stay writable by the next handle opened with the defaults).
pub trait StoreSettings {
    /// The cap on an encoded state recorded for the store (open option
    /// `store_max_value_bytes`), read outside any transaction; `None` when none was recorded.
    fn stored_cap(&self) -> Result<Option<usize>>;

    /// Records `bytes` as the store's cap, in a write transaction of its own.
    fn set_stored_cap(&self, bytes: usize) -> Result<()>;
}
