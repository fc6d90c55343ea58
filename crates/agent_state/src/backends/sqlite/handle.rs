//! One handle's view of a SQLite store: which agent of the file, on which (possibly shared)
//! connection, and whether this call holds the connection's turn (see [`super::shared`]).

use std::cell::Cell;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::fork::FileId;
use super::mark_watch::MarkWatch;
use super::schema::create_private_file;
use super::shared::Shared;
use super::Sqlite;
use crate::error::{Error, Result};
use crate::store::{
    ChangeLog, CommitWatch, Freshness, Head, LogRetention, LoggedChange, Mark, NewChange,
    Ownership, StoreOptions, StoreSettings, StoredRead, StoredState, Transactions,
};

/// The [`Backend`](crate::store::Backend) of one handle on a SQLite file.
pub struct SqliteAgent {
    shared: Arc<Shared>,
    /// The agent's key in the file: its `agent_id`, or `""` for the file's single agent.
    agent: String,
    /// Named agents share the file with others: a commit to the file is not necessarily one
    /// to this agent, so [`Freshness::head`] is worth asking.
    named: bool,
    busy_timeout: Duration,
    /// This call holds the connection's turn (taken at its first statement).
    holds_turn: Cell<bool>,
    /// The connection's epoch this handle last saw.
    epoch: Cell<u64>,
    /// The indexed time of the last write (`written_grain`) this handle wrote: rewritten only
    /// when a write falls in a later minute.
    grain: Cell<i64>,
    /// The head row as this handle's last write left it (see `delta`); forgotten at a rollback.
    known: Cell<Option<super::delta::Head>>,
}

/// Opens the agent's store at `path`: on a connection shared with this process's other handles
/// to agents of the file when `agent_id` is given, on one of its own otherwise.
pub fn open(path: &Path, options: &StoreOptions) -> Result<SqliteAgent> {
    let in_memory = path.as_os_str() == ":memory:";
    let shared = match &options.agent_id {
        Some(_) if !in_memory => {
            if !options.read_only {
                create_private_file(path)?;
            }
            match FileId::of(path) {
                Some(file) => Shared::for_file(file, options, || Sqlite::open(path, options))?,
                // Read-only and missing: the open says why.
                None => Shared::private(Sqlite::open(path, options)?),
            }
        }
        _ => Shared::private(Sqlite::open(path, options)?),
    };
    if options.agent_id.is_some() && shared.conn().schema() < super::schema::AGENTS_SCHEMA {
        return Err(Error::Storage(
            format!(
                "{}: this store predates agent ids (schema version {}); open it once for writing \
             to upgrade it",
                path.display(),
                shared.conn().schema()
            )
            .into(),
        ));
    }
    let epoch = shared.epoch();
    Ok(SqliteAgent {
        shared,
        agent: options.agent_id.clone().unwrap_or_default(),
        named: options.agent_id.is_some(),
        busy_timeout: options.busy_timeout,
        holds_turn: Cell::new(false),
        epoch: Cell::new(epoch),
        grain: Cell::new(i64::MIN),
        known: Cell::new(None),
    })
}

impl SqliteAgent {
    /// Takes the connection's turn for the rest of this call, if not held yet.
    fn turn(&self) -> Result<()> {
        if !self.holds_turn.get() {
            self.shared.take_turn(self.busy_timeout)?;
            self.holds_turn.set(true);
        }
        Ok(())
    }

    /// Runs `f` on the connection, holding the turn.
    fn with<T>(&self, f: impl FnOnce(&Sqlite) -> Result<T>) -> Result<T> {
        self.turn()?;
        super::busy::during(self.busy_timeout, || f(&self.shared.conn()))
    }
}

/// Across `fork()`, the handle's connection is recovered as [`super::fork`] says; the turn on a
/// shared connection lasts one call.
impl Ownership for SqliteAgent {
    /// Free when the connection belongs to this process and no other handle reconnected it;
    /// after a `fork()`, the first handle's call reconnects (see [`super::fork`]) and every
    /// handle on the connection then drops its cache once.
    fn ensure_current(&mut self) -> Result<bool> {
        if !self.shared.conn().is_current() {
            self.turn()?;
            self.shared.ensure_current()?;
        }
        let epoch = self.shared.epoch();
        Ok(self.epoch.replace(epoch) != epoch)
    }

    fn end_call(&mut self) {
        if self.holds_turn.replace(false) {
            self.shared.give_turn();
        }
    }
}

/// The WAL-index header, then the pager's data version; [`Freshness::head`] only for a named
/// agent, which shares the file with others.
impl Freshness for SqliteAgent {
    fn commit_mark(&self) -> Option<Mark> {
        // Reads shared memory only: no statement, no turn.
        self.shared.conn().commit_mark()
    }

    fn commit_watch(&self) -> Option<Arc<dyn CommitWatch>> {
        let watch: Arc<MarkWatch> = self.shared.conn().mark_watch()?;
        Some(watch)
    }

    fn refresh(&self) -> Result<()> {
        self.with(|c| c.refresh())
    }

    fn data_version(&self) -> Option<u32> {
        self.with(|c| Ok(c.data_version())).ok().flatten()
    }

    fn head(&self) -> Result<Option<Head>> {
        if !self.named {
            return Ok(None);
        }
        let (version, log) = self.with(|c| c.head(&self.agent))?;
        Ok(Some(Head {
            version,
            log,
            stamp: 0,
        }))
    }
}

/// SQLite's own transactions (`BEGIN DEFERRED`, `BEGIN IMMEDIATE`), on the connection's turn.
impl Transactions for SqliteAgent {
    fn begin_read(&self) -> Result<()> {
        self.with(|c| c.begin_read())
    }

    fn begin_write(&self) -> Result<()> {
        self.with(|c| c.begin_write())
    }

    fn commit(&self) -> Result<()> {
        self.with(|c| c.commit())
            .inspect_err(|_| self.known.set(None))
    }

    fn rollback(&self) {
        self.known.set(None);
        if self.holds_turn.get() {
            self.shared.conn().rollback();
        }
    }
}

impl StoredState for SqliteAgent {
    fn read_stored(&self, have: Option<u64>) -> Result<Option<StoredRead>> {
        self.with(|c| c.read_stored(&self.agent, have))
    }

    fn stored_version(&self) -> Result<u64> {
        self.with(|c| c.stored_version(&self.agent))
    }

    fn write_change(&self, change: &NewChange<'_>, log: Option<LogRetention>) -> Result<()> {
        let now = crate::store::now_ms();
        let grain = crate::store::grain_of(now);
        // Another handle may have written a later minute meanwhile: rewriting an earlier one
        // would only make the agent look idler by less than a minute, and expiry checks the
        // exact time before it deletes.
        let stale = (self.grain.get() < grain).then_some(grain);
        let known = self.known.take();
        let head = self.with(|c| c.write_change(&self.agent, change, log, (now, stale), known))?;
        self.known.set(Some(head));
        self.grain.set(grain);
        Ok(())
    }

    fn rebase(&self, state: &[u8], version: u64) -> Result<()> {
        self.known.set(None);
        self.with(|c| c.rebase(&self.agent, state, version))
    }

    fn first_version(&self) -> Result<u64> {
        self.with(|c| c.first_version(&self.agent))
    }
}

impl ChangeLog for SqliteAgent {
    fn log_retention(&self) -> Result<Option<LogRetention>> {
        self.with(|c| c.log_retention(&self.agent))
    }

    fn set_log_retention(&self, retention: Option<LogRetention>) -> Result<()> {
        self.with(|c| c.set_log_retention(&self.agent, retention))
    }

    fn changes_after(&self, after: u64, retention: LogRetention) -> Result<Vec<LoggedChange>> {
        self.with(|c| c.changes_after(&self.agent, after, retention))
    }

    fn change_at(&self, version: u64, retention: LogRetention) -> Result<Option<LoggedChange>> {
        self.with(|c| c.change_at(&self.agent, version, retention))
    }

    fn replay_to(&self, version: u64) -> Result<Vec<LoggedChange>> {
        self.with(|c| c.replay_to(&self.agent, version))
    }
}

impl StoreSettings for SqliteAgent {
    fn stored_cap(&self) -> Result<Option<usize>> {
        self.with(|c| c.stored_cap())
    }

    fn set_stored_cap(&self, bytes: usize) -> Result<()> {
        self.with(|c| c.set_stored_cap(bytes))
    }
}

/// A handle closed in the middle of a call (never by the agent, which ends every call) still
/// gives the turn back.
impl Drop for SqliteAgent {
    fn drop(&mut self) {
        self.end_call();
    }
}
