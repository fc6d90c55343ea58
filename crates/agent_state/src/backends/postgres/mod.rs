//! The PostgreSQL backend: many agents per database, one row each, reached through this
//! process's pool of connections to the server (`pool`), with the tables of `schema`.
//!
//! One concept per file: `agents` (the database's agents as a whole: listing, deletion,
//! expiry), `pool` (checkout and checkin), `conn` (one connection: its runtime
//! and the bound on each round trip), `uri` (passwords hidden, host names resolved), `tls`
//! (sslmode and the certificates, on rustls), `sql` (the statements), `schema`, `error` (the
//! server's errors as the library's kinds), `delta` (which writes send only their patch, and
//! the optimistic commit), `row` (the agent's row read with its patches, a write under its
//! lock), and `backend` (the store's traits, one `impl` per concern).
//!
//! A handle holds a connection only during a transaction:
//! - read: `BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY`, so that its reads see one commit;
//! - locked write: `BEGIN` with the handle's settings (`SET LOCAL lock_timeout` and
//!   `synchronous_commit`, in the same batch) and the agent's row `FOR UPDATE`, pipelined in one
//!   round trip (the row inserted empty first when missing), which serializes the agent's
//!   writers; the row read is kept for the transaction's reads;
//! - optimistic write: no statement until the commit, which is one statement in autocommit, in
//!   one round trip (see `conn`'s `commit_one` for how it has the handle's settings), that
//!   writes only if the stored version and log setting are still those the change was computed
//!   from (`Error::Stale` otherwise, nothing written).
//!
//! By default (`default_query_exec_mode=exec`) every statement is unnamed and no setting
//! outlives its transaction (see `conn`): the same through a connection pooler in transaction
//! or session mode (PgBouncer) as directly; an optimistic commit is one unnamed statement in
//! autocommit that sets its transaction's settings itself. With
//! `default_query_exec_mode=cache_statement`, statements are prepared once per server
//! connection and the settings are the session's (see `conn`): for a session that is the
//! library's (directly, or a pooler in session mode), and an optimistic commit is one prepared
//! statement in autocommit.
//!
//! Outside a transaction, [`Freshness::head`](crate::store::Freshness::head) is one statement
//! on a connection checked out for it. Losing the server is [`Error::Unavailable`]: the
//! connection is discarded and the next call connects again. So is a round trip the server
//! does not answer within `busy_timeout_ms + server_timeout_ms`, timed by the client: a frozen
//! server, a hung host or a cut network, which no server-side timeout can end (see `conn` for
//! what each bounds).

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Duration;

use tokio_postgres::Row;

use self::conn::{Conn, Limits, Settings};
use self::error::{classify, Fault, PgError, PgResult};
use self::pool::Pool;
use self::stamp::Stamps;
use crate::error::{Error, Result};
use crate::store::{process, StoreOptions};

mod agents;
mod backend;
mod changes;
mod conn;
mod delta;
mod error;
mod hosts;
mod listen;
mod params;
mod pool;
mod row;
mod schema;
mod session;
mod settings;
mod sql;
mod stamp;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_listen;
mod tls;
mod uri;
mod wait;
mod watch_reads;

use changes::{keep_bounds, prune_bounds, retention, row_to_change, PendingLog};
pub use listen::Listener;
pub use schema::SCHEMA_VERSION;
pub use watch_reads::PgWatchReads;

/// One agent of a PostgreSQL database, as one handle sees it.
pub struct Postgres {
    pool: Arc<Pool>,
    agent: String,
    read_only: bool,
    busy_timeout: Duration,
    limits: Limits,
    settings: Settings,
    /// The process this handle last ran in.
    pid: u64,
    /// The open transaction, if any (calls on a handle are serialized by the agent).
    txn: RefCell<Option<Open>>,
    /// The stamp this handle writes, and that of the state it last saw.
    stamps: Stamps,
    /// The base and patch bytes of the version this handle last read or wrote (see `delta`).
    known: std::cell::Cell<Option<delta::Known>>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Read,
    Locked,
    Optimistic,
}

/// An open transaction and what it has read or buffered.
struct Open {
    conn: Conn,
    kind: Kind,
    /// The agent's version, log setting and stamp as this transaction saw them (`None`: not
    /// read).
    head: Option<(i64, Option<String>, i64)>,
    /// The stored base as this transaction saw it (outer `None`: not read).
    value: Option<Option<String>>,
    /// The base's version and the bytes of the patches after it, as this transaction saw them.
    base: Option<(i64, i64)>,
    /// The state's schema version as this transaction saw it (`None`: not read).
    schema: Option<i32>,
    /// The patches after the base, when read with [`ROW`] (`None`: not read).
    patches: Option<Vec<Option<String>>>,
    /// A statement failed: the server rolled the transaction back.
    failed: bool,
    /// Optimistic: the write to make at commit, and its log entry.
    state: Option<(delta::Pending, delta::Known)>,
    log: Option<PendingLog>,
}

impl Open {
    fn new(conn: Conn, kind: Kind) -> Open {
        Open {
            conn,
            kind,
            head: None,
            value: None,
            base: None,
            schema: None,
            patches: None,
            failed: false,
            state: None,
            log: None,
        }
    }

    /// Keeps a row read with [`ROW`] (or none: nothing stored, no row).
    fn keep_row(&mut self, row: Option<&Row>) {
        match row {
            Some(row) => {
                self.value = Some(row.get(0));
                self.head = Some((row.get(1), row.get(2), row.get(3)));
                self.base = Some((row.get(4), row.get(5)));
                self.schema = Some(row.get(6));
                self.patches = row
                    .try_get::<_, Option<Vec<Option<String>>>>(7)
                    .ok()
                    .map(Option::unwrap_or_default);
            }
            None => {
                self.value = Some(None);
                self.head = Some((0, None, 0));
                self.base = Some((0, 0));
                self.schema = Some(0);
                self.patches = Some(Vec::new());
            }
        }
    }
}

impl Postgres {
    /// Opens the agent `options.agent_id` of the database at `uri`, creating the tables when
    /// missing (unless `read_only`). The connection pool is shared by every handle of this
    /// process on the same URI.
    pub fn open(uri: &str, options: &StoreOptions) -> Result<Postgres> {
        let agent = options.agent_id.clone().ok_or_else(|| {
            Error::InvalidArgument("agent_id is required for a PostgreSQL store".to_string())
        })?;
        Self::open_as(uri, options, agent, true)
    }

    /// Opens the database at `uri` for its agents as a whole (see `agents`): a handle of no
    /// agent, on the same pool.
    pub fn open_agents(uri: &str, options: &StoreOptions) -> Result<Postgres> {
        Self::open_as(uri, options, String::new(), true)
    }

    /// [`Postgres::open_agents`] of a store that must be there: a database without its tables
    /// is [`Error::Storage`], nothing created (a watcher's reads: watching never creates a
    /// store). An older schema is upgraded as by any open.
    pub fn open_existing(uri: &str, options: &StoreOptions) -> Result<Postgres> {
        Self::open_as(uri, options, String::new(), false)
    }

    fn open_as(uri: &str, options: &StoreOptions, agent: String, create: bool) -> Result<Postgres> {
        let shown = uri::redact(uri);
        let target = hosts::Target::parse(uri, &shown)?;
        let timeout_ms = u64::try_from(options.busy_timeout.as_millis()).unwrap_or(u64::MAX);
        let store = Postgres {
            pool: Pool::get(uri, target, options.max_connections),
            agent,
            read_only: options.read_only,
            busy_timeout: options.busy_timeout,
            limits: Limits::new(options.busy_timeout, options.server_timeout),
            settings: Settings {
                synchronous: options.synchronous,
                lock_timeout_ms: timeout_ms.max(1),
            },
            pid: process::generation(),
            txn: RefCell::new(None),
            stamps: Stamps::new(),
            known: std::cell::Cell::new(None),
        };
        if !store.pool.schema_checked() {
            let mut conn = store.acquire()?;
            // Creating the tables is the library's own one-time set-up, not a lock the caller
            // chose not to wait for: it waits for another process's creation as long as the
            // server may take to answer, whatever busy_timeout_ms is.
            let server_ms = u64::try_from(options.server_timeout.as_millis()).unwrap_or(u64::MAX);
            let creating = Settings {
                lock_timeout_ms: store.settings.lock_timeout_ms.max(server_ms),
                ..store.settings
            };
            let checked = if create {
                Ok(())
            } else {
                schema::exists(&mut conn, &store.pool.shown).map(drop)
            };
            match checked.and_then(|()| {
                schema::check(&mut conn, creating, store.read_only, &store.pool.shown)
            }) {
                Ok(()) => {
                    store.pool.checkin(conn);
                    store.pool.set_schema_checked();
                }
                Err(Fault::Answered(e)) => {
                    store.pool.checkin(conn);
                    return Err(e);
                }
                Err(Fault::Lost(e)) => {
                    store.pool.discard(conn, true);
                    return Err(e);
                }
            }
        }
        Ok(store)
    }

    /// A connection of the pool, alive, its round trips bounded as this handle's. In `exec`
    /// mode nothing is set for the session (each transaction sets what it needs); in
    /// `cache_statement` mode the session has this handle's settings (set now when it had
    /// others: see `conn`).
    fn acquire(&self) -> Result<Conn> {
        let mut retried = false;
        loop {
            let mut conn = self.pool.checkout(self.busy_timeout, self.limits)?;
            if conn.reused && !conn.alive() {
                self.pool.discard(conn, false);
                continue;
            }
            conn.set_limit(self.limits.round_trip);
            if let Err(e) = conn.ensure_session(self.settings) {
                self.after_failure(conn, &e, "cannot set the session's settings", &mut retried)?;
                continue;
            }
            return Ok(conn);
        }
    }

    /// After `e`, a failure of `what` on `conn` outside a transaction: the connection goes
    /// back to the pool (the server answered) or is discarded (lost). `Ok(())` when the call
    /// is worth trying again on another connection: a reused one was found lost (the server
    /// may have restarted meanwhile), once (`retried`), and not after a timeout (the server is
    /// there but does not answer, and a second try would double the wait). The error otherwise.
    fn after_failure(&self, conn: Conn, e: &PgError, what: &str, retried: &mut bool) -> Result<()> {
        match classify(e, what) {
            Fault::Lost(err) => {
                let reused = conn.reused;
                self.pool.discard(conn, true);
                if reused && !*retried && !e.given_up() {
                    *retried = true;
                    return Ok(());
                }
                Err(err)
            }
            Fault::Answered(err) => {
                self.pool.checkin(conn);
                Err(err)
            }
        }
    }

    /// Runs `f` (a read) on a connection checked out for it (autocommit). A reused
    /// connection found dead is replaced once: the server may have restarted meanwhile. So is
    /// `f` run again once when the server forgot the session's prepared statements
    /// (`cache_statement`): they are prepared again.
    fn autocommit<T>(&self, what: &str, f: impl Fn(&mut Conn) -> PgResult<T>) -> Result<T> {
        let mut retried = false;
        let mut prepared_again = false;
        loop {
            let mut conn = self.acquire()?;
            return match f(&mut conn) {
                Ok(v) => {
                    self.pool.checkin(conn);
                    Ok(v)
                }
                Err(e) if conn::forgotten(&e) && !prepared_again => {
                    prepared_again = true;
                    self.pool.checkin(conn);
                    continue;
                }
                Err(e) => {
                    self.after_failure(conn, &e, what, &mut retried)?;
                    continue;
                }
            };
        }
    }

    /// Runs `f` inside the open transaction. A lost connection ends the transaction (the
    /// server rolls it back); a statement's error marks it failed.
    fn in_txn<T>(&self, what: &str, f: impl FnOnce(&mut Open) -> PgResult<T>) -> Result<T> {
        let mut slot = self.txn.borrow_mut();
        let open = slot.as_mut().ok_or_else(no_transaction)?;
        if open.failed {
            return Err(Error::Storage(
                format!(
                    "{what}: an earlier statement of this transaction failed; it was rolled back"
                )
                .into(),
            ));
        }
        match f(open) {
            Ok(v) => Ok(v),
            Err(e) => match classify(&e, what) {
                Fault::Lost(err) => {
                    if let Some(open) = slot.take() {
                        self.pool.discard(open.conn, true);
                    }
                    Err(err)
                }
                // A serialization failure or deadlock in a locked write (SERIALIZABLE servers
                // such as CockroachDB, or a database whose default isolation is above READ
                // COMMITTED), or a server that forgot the session's prepared statements
                // (`cache_statement`; the connection prepares them again): nothing was
                // written, and the agent runs the write again, a bounded number of times.
                Fault::Answered(_)
                    if open.kind == Kind::Locked
                        && (error::conflict(&e) || conn::forgotten(&e)) =>
                {
                    open.failed = true;
                    Err(Error::stale())
                }
                Fault::Answered(err) => {
                    open.failed = true;
                    Err(err)
                }
            },
        }
    }

    /// Runs `f` inside the open transaction, or in autocommit when none is open.
    fn read<T>(&self, what: &str, f: impl Fn(&mut Conn) -> PgResult<T>) -> Result<T> {
        if self.txn.borrow().is_some() {
            self.in_txn(what, |open| f(&mut open.conn))
        } else {
            self.autocommit(what, f)
        }
    }

    /// Opens a transaction of `kind`, its first statements run by `start`. A reused
    /// connection that turns out to be dead is replaced once (nothing was done on it); so is
    /// the transaction begun again once when the server forgot the session's prepared
    /// statements (`cache_statement`: they are prepared again).
    fn begin(&self, kind: Kind, start: impl Fn(&mut Open) -> PgResult<()>) -> Result<()> {
        if let Some(open) = self.txn.borrow_mut().take() {
            // Not expected (transactions go through `Txn`): end it rather than nest.
            self.end(open);
        }
        let mut retried = false;
        let mut prepared_again = false;
        loop {
            let conn = self.acquire()?;
            let reused = conn.reused;
            let mut open = Open::new(conn, kind);
            match start(&mut open) {
                Ok(()) => {
                    *self.txn.borrow_mut() = Some(open);
                    return Ok(());
                }
                Err(e) if conn::forgotten(&e) && !prepared_again => {
                    prepared_again = true;
                    open.failed = true;
                    self.end(open);
                    continue;
                }
                Err(e) => match classify(&e, "cannot begin a transaction") {
                    Fault::Lost(err) => {
                        self.pool.discard(open.conn, true);
                        if reused && !retried && !e.given_up() {
                            retried = true;
                            continue;
                        }
                        return Err(err);
                    }
                    Fault::Answered(err) => {
                        open.failed = true;
                        self.end(open);
                        // As in `in_txn`: the agent runs a locked write again.
                        if kind == Kind::Locked && error::conflict(&e) {
                            return Err(Error::stale());
                        }
                        return Err(err);
                    }
                },
            }
        }
    }

    /// Rolls back `open` (if a statement was sent) and returns its connection to the pool,
    /// or discards the connection when its state cannot be known.
    fn end(&self, mut open: Open) {
        if open.kind == Kind::Optimistic {
            self.pool.checkin(open.conn);
            return;
        }
        match open.conn.batch_execute("ROLLBACK") {
            Ok(()) => self.pool.checkin(open.conn),
            Err(e) => {
                let lost = matches!(classify(&e, "rollback"), Fault::Lost(_));
                self.pool.discard(open.conn, lost);
            }
        }
    }

    fn refuse_writes(&self) -> Result<()> {
        if self.read_only {
            return Err(Error::Storage(
                format!(
                    "{}: the store was opened read_only; writes are refused",
                    self.pool.shown
                )
                .into(),
            ));
        }
        Ok(())
    }
}

fn no_transaction() -> Error {
    Error::Storage("no transaction is open (internal)".to_string().into())
}

fn text(bytes: &[u8]) -> Result<&str> {
    std::str::from_utf8(bytes).map_err(|_| {
        Error::Storage(
            "a value to store is not UTF-8 text (internal)"
                .to_string()
                .into(),
        )
    })
}

fn opt_text(bytes: Option<&[u8]>) -> Result<Option<&str>> {
    bytes.map(text).transpose()
}

/// A schema version as its `integer` column holds it: the `u32`'s 32 bits as they are (see
/// `schema`), so that every version the program may declare is stored and read back exactly.
fn stored_schema(schema: u32) -> i32 {
    schema as i32
}

/// A schema version read from its `integer` column (see [`stored_schema`]).
fn read_schema(stored: i32) -> u32 {
    stored as u32
}
