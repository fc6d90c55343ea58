//! The store's traits for [`Postgres`], one `impl` per concern: how the agent's calls map onto
//! the pool, transactions and statements of `super`.

use super::sql::*;
use std::sync::Weak;

use super::conn::{
    bool_param as boolean, int4_param as int4, int8_param as int8, text_param as txt, Param,
};
use super::error::{self, classify, Fault};
use super::{
    delta, keep_bounds, no_transaction, opt_text, prune_bounds, retention, row_to_change, text,
    Kind, PendingLog, Postgres,
};
use crate::error::{Error, Result};
use crate::store::{
    process, ChangeLog, Freshness, Head, LogRetention, LoggedChange, Mark, NewChange, Ownership,
    Retire, StoredRead, StoredState, Transactions,
};

/// After `fork()`, what the handle and the pool inherited is forgotten (the socket is the
/// parent's) and the next statement connects anew.
impl Ownership for Postgres {
    /// Nothing to register: connections inherited across `fork()` are let go of at the
    /// child's first call on each handle ([`Ownership::ensure_current`]) and by the pool.
    fn register_owner(&self, _owner: Weak<dyn Retire>) {}

    /// In a child process after `fork()`: forgets (never closes: the socket is the parent's)
    /// the connection this handle held and the pool's inherited ones; the next statement
    /// connects anew. Returns true then.
    fn ensure_current(&mut self) -> Result<bool> {
        let now = process::generation();
        if self.pid == now {
            return Ok(false);
        }
        self.retire_inherited();
        self.pool.ensure_current();
        self.pid = now;
        Ok(true)
    }

    fn retire_inherited(&mut self) {
        if self.pid != process::generation() {
            // Conn's drop forgets a connection of another process.
            drop(self.txn.get_mut().take());
        }
    }
}

/// No shared memory to watch: the freshness test is the agent's row's version, one round trip.
impl Freshness for Postgres {
    fn commit_mark(&self) -> Option<Mark> {
        None
    }

    /// Nothing to do: the freshness test is [`Freshness::head`], and a read transaction's
    /// snapshot is taken at its first statement.
    fn refresh(&self) -> Result<()> {
        Ok(())
    }

    fn data_version(&self) -> Option<u32> {
        None
    }

    /// `SELECT version, change_log`: one round trip outside a transaction; inside a write
    /// transaction, what it read when it began.
    fn head(&self) -> Result<Option<Head>> {
        let known = self.txn.borrow().as_ref().and_then(|o| o.head.clone());
        let (version, log, stamp) = match known {
            Some(head) => head,
            None => {
                let agent = &self.agent;
                let head = self.read("cannot read the state's version", |conn| {
                    Ok(conn
                        .query_opt(HEAD, &[txt(agent)])?
                        .map_or((0, None, 0), |r| (r.get(0), r.get(1), r.get(2))))
                })?;
                self.stamps.read(head.0, head.2);
                if let Some(open) = self.txn.borrow_mut().as_mut() {
                    if open.kind == Kind::Read {
                        open.head = Some(head.clone());
                    }
                }
                head
            }
        };
        Ok(Some(Head {
            version: version as u64,
            log: retention(log)?,
            stamp: stamp as u64,
        }))
    }

    fn stamp(&self) -> u64 {
        self.stamps.last()
    }
}

/// Each transaction on a connection checked out of the pool; a write may be optimistic (no
/// lock; one statement at the commit).
impl Transactions for Postgres {
    fn optimistic(&self) -> bool {
        self.txn
            .borrow()
            .as_ref()
            .is_some_and(|o| o.kind == Kind::Optimistic)
    }

    /// Checks out a connection and sends nothing: the commit is one round trip (a transaction
    /// of one statement, pipelined).
    fn begin_optimistic_write(&self) -> Result<()> {
        self.refuse_writes()?;
        self.begin(Kind::Optimistic, |_| Ok(()))
    }

    fn begin_read(&self) -> Result<()> {
        self.begin(Kind::Read, |open| {
            open.conn
                .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        })
    }

    /// `BEGIN` with the handle's settings (one batch) and the agent's row `FOR UPDATE`,
    /// pipelined (one round trip); the row inserted empty first when missing; kept for the
    /// transaction's reads.
    fn begin_write(&self) -> Result<()> {
        self.refuse_writes()?;
        let agent = &self.agent;
        self.begin(Kind::Locked, |open| {
            let mut row = open
                .conn
                .begin_with(self.settings, ROW_FOR_UPDATE, &[txt(agent)])?;
            // Until the row is there and locked: a deletion committed while this waited for
            // the row's lock takes the row with it (READ COMMITTED then skips it), and the
            // write must not go to a row that is not there.
            while row.is_none() {
                open.conn.execute(ENSURE_ROW, &[txt(agent)])?;
                row = open.conn.query_opt(ROW_FOR_UPDATE, &[txt(agent)])?;
            }
            open.keep_row(row.as_ref());
            if let Some((version, _, stamp)) = &open.head {
                self.stamps.read(*version, *stamp);
            }
            Ok(())
        })
    }

    fn commit(&self) -> Result<()> {
        let Some(mut open) = self.txn.borrow_mut().take() else {
            return Err(no_transaction());
        };
        if open.failed {
            self.end(open);
            return Err(Error::Storage(
                "cannot commit: a statement of the transaction failed; it was rolled back"
                    .to_string()
                    .into(),
            ));
        }
        if open.kind == Kind::Optimistic {
            let Some((pending, after)) = open.state.take() else {
                self.pool.checkin(open.conn);
                return Ok(());
            };
            let log = open.log.take();
            let result = self.commit_optimistic(&mut open.conn, &pending, log.as_ref());
            if !matches!(result, Ok(true)) {
                self.known.set(None);
            }
            return match result {
                Ok(true) => {
                    self.pool.checkin(open.conn);
                    self.stamps.wrote(pending.version() as i64);
                    self.known.set(Some(after));
                    Ok(())
                }
                Ok(false) => {
                    self.pool.checkin(open.conn);
                    Err(Error::stale())
                }
                // A conflict, or a server that forgot the session's prepared statements
                // (`cache_statement`; the connection prepares them again): nothing was
                // written, and the agent tries again under a lock.
                Err(e) if error::conflict(&e) || super::conn::forgotten(&e) => {
                    self.pool.checkin(open.conn);
                    Err(Error::stale())
                }
                Err(e) => match classify(&e, "cannot commit") {
                    // Nothing reached the server (it closed the connection before), or the
                    // server is read-only now: nothing was written, and the agent tries again
                    // under a lock, on a new connection.
                    Fault::Lost(_) if error::unsent(&e) || error::read_only(&e) => {
                        self.pool.discard(open.conn, true);
                        Err(Error::stale())
                    }
                    Fault::Lost(_) => {
                        self.pool.discard(open.conn, true);
                        Err(error::unknown_outcome(&e))
                    }
                    Fault::Answered(err) => {
                        self.pool.checkin(open.conn);
                        Err(err)
                    }
                },
            };
        }
        match open.conn.commit() {
            Ok(()) => {
                self.pool.checkin(open.conn);
                Ok(())
            }
            Err(e) => match classify(&e, "cannot commit") {
                Fault::Lost(err) if error::unsent(&e) => {
                    // The server closed the connection before the COMMIT: it rolled back.
                    self.pool.discard(open.conn, true);
                    Err(err)
                }
                Fault::Lost(err) => {
                    self.pool.discard(open.conn, true);
                    Err(match open.kind {
                        Kind::Read if e.timed_out() => err,
                        Kind::Read => Error::Unavailable(
                            "the connection to the PostgreSQL server was lost"
                                .to_string()
                                .into(),
                        ),
                        _ => error::unknown_outcome(&e),
                    })
                }
                Fault::Answered(err) => {
                    // A failed COMMIT ends the transaction: the connection is idle again.
                    self.pool.checkin(open.conn);
                    // A serialization failure at the commit: nothing written; the agent runs
                    // a locked write again (see `Postgres::in_txn`).
                    if open.kind == Kind::Locked && error::conflict(&e) {
                        return Err(Error::stale());
                    }
                    Err(err)
                }
            },
        }
    }

    fn rollback(&self) {
        if let Some(open) = self.txn.borrow_mut().take() {
            self.end(open);
        }
    }
}

impl StoredState for Postgres {
    fn read_stored(&self, _have: Option<u64>) -> Result<Option<StoredRead>> {
        let row = self.read_row()?;
        self.stamps.read(row.version, row.stamp);
        self.known.set(Some(delta::Known {
            version: row.version as u64,
            base: row.base as u64,
            tail: row.tail as u64,
            stamp: row.stamp,
        }));
        let Some(value) = row.value.filter(|_| row.version > 0) else {
            return Ok(None);
        };
        let patches = match row.patches {
            Some(patches) => patches,
            None if row.base < row.version => self.read_patches(row.base, row.version)?,
            None => Vec::new(),
        };
        let missing = || {
            Error::Corrupt(format!(
                "the state of version {}: patches after its base (version {}) are missing",
                row.version, row.base
            ))
        };
        if patches.len() as i64 != row.version - row.base {
            return Err(missing());
        }
        let patches = patches
            .into_iter()
            .map(|p| p.map(String::into_bytes).ok_or_else(missing))
            .collect::<Result<Vec<_>>>()?;
        Ok(Some(StoredRead {
            schema: super::read_schema(row.schema),
            version: row.version as u64,
            base: Some((value.into_bytes(), row.base as u64)),
            patches,
        }))
    }

    fn stored_version(&self) -> Result<u64> {
        Ok(self.head()?.map_or(0, |h| h.version))
    }

    fn write_change(&self, change: &NewChange<'_>, log: Option<LogRetention>) -> Result<()> {
        let kind = self.txn.borrow().as_ref().map(|o| o.kind);
        match kind {
            None => Err(no_transaction()),
            Some(Kind::Read) => Err(Error::Storage(
                "cannot write inside a read transaction (internal)"
                    .to_string()
                    .into(),
            )),
            Some(Kind::Optimistic) => {
                let (pending, after) =
                    delta::Pending::of(change, log, self.known.get(), self.stamps.own())?;
                let pending_log = log.map(|r| PendingLog::new(change, r)).transpose()?;
                if let Some(open) = self.txn.borrow_mut().as_mut() {
                    open.state = Some((pending, after));
                    open.log = pending_log;
                }
                Ok(())
            }
            Some(Kind::Locked) => {
                let known = self.txn.borrow().as_ref().and_then(|o| {
                    let (head, base) = (o.head.as_ref()?, o.base?);
                    Some(delta::Known {
                        version: head.0 as u64,
                        base: base.0 as u64,
                        tail: base.1 as u64,
                        stamp: head.2,
                    })
                });
                let (pending, after) = delta::Pending::of(change, log, known, self.stamps.own())?;
                self.write_locked(&pending)?;
                if let Some(retention) = log {
                    self.log_change(change, retention)?;
                }
                self.known.set(Some(after));
                Ok(())
            }
        }
    }

    fn rebase(&self, state: &[u8], _version: u64) -> Result<()> {
        let kind = self.txn.borrow().as_ref().map(|o| o.kind);
        if kind != Some(Kind::Locked) {
            return Err(Error::Storage(
                "a state's base is rewritten only under the row's lock (internal)"
                    .to_string()
                    .into(),
            ));
        }
        let state = text(state)?;
        let agent = &self.agent;
        self.in_txn("cannot write the state", |open| {
            let log_off = open.head.as_ref().is_none_or(|h| h.1.is_none());
            open.conn
                .execute(REBASE, &[txt(agent), txt(&state), boolean(&log_off)])?;
            if let (Some(head), Some(base)) = (open.head.as_ref(), open.base.as_mut()) {
                *base = (head.0, 0);
            }
            open.value = Some(Some(state.to_string()));
            open.patches = Some(Vec::new());
            Ok(())
        })?;
        self.known.set(None);
        Ok(())
    }

    fn first_version(&self) -> Result<u64> {
        let hash = crate::store::id_hash(&self.agent);
        let first: i64 = self.read("cannot read the agent's tombstone", |conn| {
            Ok(conn
                .query_opt(FIRST_VERSION, &[int8(&hash)])?
                .map_or(1, |row| row.get::<_, i64>(0)))
        })?;
        Ok(first as u64)
    }
}

impl ChangeLog for Postgres {
    fn log_retention(&self) -> Result<Option<LogRetention>> {
        Ok(self.head()?.and_then(|head| head.log))
    }

    fn set_log_retention(&self, retention: Option<LogRetention>) -> Result<()> {
        let kind = self.txn.borrow().as_ref().map(|o| o.kind);
        if kind != Some(Kind::Locked) {
            return Err(Error::Storage(
                "the change log's setting is written only under the row's lock (internal)"
                    .to_string()
                    .into(),
            ));
        }
        let json = retention.map(|r| r.to_json());
        let setting = opt_text(json.as_deref())?;
        let agent = &self.agent;
        self.in_txn("cannot write the change log setting", |open| {
            open.conn.execute(SET_LOG, &[txt(agent), txt(&setting)])?;
            if setting.is_none() {
                open.conn.execute(CLEAR_LOG, &[txt(agent)])?;
            }
            if let Some(head) = open.head.as_mut() {
                head.1 = setting.map(str::to_string);
            }
            Ok(())
        })
    }

    fn changes_after(&self, after: u64, retention: LogRetention) -> Result<Vec<LoggedChange>> {
        let agent = &self.agent;
        let after = i64::try_from(after).unwrap_or(i64::MAX);
        let (keep_last, keep_ms) = keep_bounds(retention);
        let rows = self.read("cannot read the change log", |conn| {
            let params = [txt(agent), int8(&after), int8(&keep_last), int8(&keep_ms)];
            conn.query(CHANGES_AFTER, &params)
        })?;
        Ok(rows.iter().map(row_to_change).collect())
    }

    fn change_at(&self, version: u64, retention: LogRetention) -> Result<Option<LoggedChange>> {
        let agent = &self.agent;
        let Ok(version) = i64::try_from(version) else {
            return Ok(None);
        };
        let (keep_last, keep_ms) = keep_bounds(retention);
        let row = self.read("cannot read the change log", |conn| {
            let params = [txt(agent), int8(&version), int8(&keep_last), int8(&keep_ms)];
            conn.query_opt(CHANGE_AT, &params)
        })?;
        Ok(row.as_ref().map(row_to_change))
    }

    fn replay_to(&self, version: u64) -> Result<Vec<LoggedChange>> {
        let agent = &self.agent;
        let Ok(version) = i64::try_from(version) else {
            return Ok(Vec::new());
        };
        let rows = self.read("cannot read the change log", |conn| {
            conn.query(REPLAY_TO, &[txt(agent), int8(&version)])
        })?;
        Ok(rows.iter().map(row_to_change).collect())
    }
}

/// The log entry of a change, written with its state (see [`StoredState::write_change`]).
impl Postgres {
    fn log_change(&self, change: &NewChange<'_>, retention: LogRetention) -> Result<()> {
        let kind = self.txn.borrow().as_ref().map(|o| o.kind);
        match kind {
            Some(Kind::Optimistic) => {
                let pending = PendingLog::new(change, retention)?;
                if let Some(open) = self.txn.borrow_mut().as_mut() {
                    open.log = Some(pending);
                }
                Ok(())
            }
            Some(Kind::Locked) => {
                let (below, since) = prune_bounds(change, retention);
                let next = text(change.next.json())?;
                let patch = opt_text(change.patch)?;
                let prev = opt_text(change.prev)?;
                let (version, writer) = (change.version as i64, change.writer as i64);
                let schema = super::stored_schema(change.schema);
                let migrated_from = change.migrated_from.map(super::stored_schema);
                let agent = &self.agent;
                self.in_txn("cannot write the change log", |open| {
                    let params: [Param<'_>; 11] = [
                        txt(agent),
                        int8(&version),
                        int8(&change.at_ms),
                        int8(&writer),
                        txt(&patch),
                        txt(&next),
                        txt(&prev),
                        int8(&below),
                        int8(&since),
                        int4(&schema),
                        int4(&migrated_from),
                    ];
                    open.conn.execute(LOG_CHANGE, &params)?;
                    Ok(())
                })
            }
            Some(Kind::Read) => Err(Error::Storage(
                "cannot write inside a read transaction (internal)"
                    .to_string()
                    .into(),
            )),
            None => Err(no_transaction()),
        }
    }
}
