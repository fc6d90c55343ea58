//! Storage: what an agent needs from the place its state lives, as one trait.
//!
//! [`Backend`] holds exactly that: the connection's ownership across `fork()`, a cheap
//! freshness test for the read cache, transactions, the state and its version, and the change
//! log, whose retention is the store's policy. Transactions are taken through [`Txn`], which
//! rolls back unless committed, so an early return or a `?` can never leave one open.
//!
//! Two backends: [`sqlite`] (an embedded SQLite file, one agent) and [`postgres`] (a server,
//! one row per agent, feature `postgres`), sibling modules behind the same trait; nothing
//! above the trait changes. The agent never sees SQL, storage keys or how the log is pruned.

#[cfg(feature = "postgres")]
pub mod postgres;
// The fork watcher: a `pthread_atfork` handler, registered through C.
#[allow(unsafe_code)]
pub mod process;
pub mod sqlite;
mod txn;
mod types;

use std::path::Path;
use std::sync::Weak;

use crate::error::Result;

pub use txn::Txn;
pub use types::{
    LogRetention, LoggedChange, Mark, NewChange, StoreOptions, Synchronous, CHECKPOINT_EVERY,
    MAX_RETENTION,
};

/// Opens the store at `path` with the backend it names: a `postgres://` or `postgresql://`
/// connection URI is a PostgreSQL server, anything else a SQLite file.
pub fn open(path: &Path, options: &StoreOptions) -> Result<Box<dyn Backend>> {
    if let Some(uri) = server_uri(path) {
        return open_server(uri, options);
    }
    Ok(Box::new(sqlite::open(path, options)?))
}

/// `path` as a PostgreSQL connection URI, when it is one.
pub fn server_uri(path: &Path) -> Option<&str> {
    let text = path.to_str()?;
    let scheme = text.split_once("://")?.0;
    (scheme == "postgres" || scheme == "postgresql").then_some(text)
}

#[cfg(feature = "postgres")]
fn open_server(uri: &str, options: &StoreOptions) -> Result<Box<dyn Backend>> {
    Ok(Box::new(postgres::Postgres::open(uri, options)?))
}

#[cfg(not(feature = "postgres"))]
fn open_server(_uri: &str, _options: &StoreOptions) -> Result<Box<dyn Backend>> {
    Err(crate::error::Error::InvalidArgument(
        "this build of agent_state has no PostgreSQL support (cargo feature `postgres`)"
            .to_string(),
    ))
}

/// An owner of a connection that can be asked to let go of one inherited across `fork()`.
pub trait Retire: Send + Sync {
    /// Closes the owner's connection if it was inherited (see [`sqlite::fork`]) and returns
    /// true; returns false, doing nothing, when the owner is busy (its lock is held).
    fn try_retire(&self) -> bool;
}

/// One connection to a store, as the agent uses it. Methods that read or write entries run
/// inside a transaction taken with [`Txn`].
pub trait Backend: Send {
    // ---- the connection belongs to this process ------------------------------------------

    /// Registers the owner of this handle, which the store may ask (through [`Retire`]) to let
    /// go of an inherited connection when a child process must reconnect. A no-op where the
    /// backend tracks its connections itself.
    fn register_owner(&self, _owner: Weak<dyn Retire>) {}

    /// Starts one call of the agent: makes sure the connection belongs to this process (free
    /// when it does; after a `fork()`, reconnects). Returns true when what the caller cached may
    /// be stale (it reconnected). Every call that began ends with [`Backend::end_call`].
    fn ensure_current(&mut self) -> Result<bool>;

    /// Ends one call of the agent: what the call held of a connection shared with other handles
    /// is given back.
    fn end_call(&mut self) {}

    /// Lets go of a connection inherited from a parent process without touching what the parent
    /// still uses (does nothing to one this process opened).
    fn retire_inherited(&mut self) {}

    // ---- freshness, for the read cache ---------------------------------------------------

    /// A mark that changes whenever any connection, in any process, commits, read without a
    /// transaction. `None` when unavailable (then [`Backend::data_version`] decides).
    fn commit_mark(&self) -> Option<Mark>;

    /// Brings [`Backend::data_version`] up to date outside a transaction; inside a read
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
    /// has no such test worth making (a SQLite file's single agent: any commit is to it, and
    /// the state is re-read, which also sees a write made behind the library's back).
    fn head(&self) -> Result<Option<(u64, Option<LogRetention>)>>;

    /// True while the open write transaction is *optimistic*: it took no lock, so the caller
    /// computes the change from its cached state without reading, and [`Backend::commit`]
    /// writes only if the stored version is still the one the change was computed from;
    /// otherwise it fails with [`Error::Stale`](crate::error::Error::Stale), nothing written,
    /// and the caller retries with [`Backend::begin_write`] under a lock (`optimistic` false).
    /// Backends whose write transactions are cheap to lock (SQLite) always say false.
    fn optimistic(&self) -> bool {
        false
    }

    /// Starts an optimistic write transaction where the backend offers one (a server, where a
    /// lock costs round trips); elsewhere the same as [`Backend::begin_write`].
    fn begin_optimistic_write(&self) -> Result<()> {
        self.begin_write()
    }

    // ---- transactions (through [`Txn`]) --------------------------------------------------

    /// Starts a read transaction; its snapshot is taken at its first read.
    fn begin_read(&self) -> Result<()>;

    /// Starts a write transaction, waiting for other writers up to the busy timeout. Refused on
    /// a read-only store.
    fn begin_write(&self) -> Result<()>;

    /// Commits the open transaction; on failure it is rolled back.
    fn commit(&self) -> Result<()>;

    /// Rolls back the open transaction, if any.
    fn rollback(&self);

    // ---- inside a transaction ------------------------------------------------------------

    /// The stored state (encoded) and its version, if any state is stored.
    fn read_state(&self) -> Result<Option<(Vec<u8>, u64)>>;

    /// Stores the state and its version.
    fn write_state(&self, value: &[u8], version: u64) -> Result<()>;

    /// The change log's retention (`None`: the log is off).
    fn log_retention(&self) -> Result<Option<LogRetention>>;

    /// Switches the change log on with this retention, or off (`None`, dropping the log).
    fn set_log_retention(&self, retention: Option<LogRetention>) -> Result<()>;

    /// Appends a change to the log. What `retention` no longer keeps disappears from the log
    /// at once ([`Backend::changes_after`] and [`Backend::change_at`] never return it) and is
    /// deleted, possibly later and in batches, except what [`Backend::replay_to`] still needs.
    /// The backend may store a merge's `next` only at checkpoints (see
    /// [`LoggedChange::next`]); the change's own patch rebuilds it otherwise.
    fn log_change(&self, change: &NewChange<'_>, retention: LogRetention) -> Result<()>;

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
