//! The PostgreSQL backend: many agents per database, one row each, reached through this
//! process's pool of connections to the server (`pool`), with the tables of `schema`.
//!
//! A handle holds a connection only during a transaction:
//! - read: `BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY`, so that its reads see one commit;
//! - locked write: `BEGIN`, then the agent's row `FOR UPDATE` (inserted empty first when
//!   missing), which serializes the agent's writers; the row read is kept for the
//!   transaction's reads;
//! - optimistic write: no statement until the commit, which is one statement (one round
//!   trip, atomic in autocommit) that writes only if the stored version and log setting are
//!   still those the change was computed from ([`Error::Stale`] otherwise, nothing written).
//!
//! Outside a transaction, [`Backend::head`] is one statement on a connection checked out for
//! it. Losing the server is [`Error::Unavailable`]: the connection is discarded and the next
//! call connects again.

use std::cell::RefCell;
use std::sync::{Arc, Weak};
use std::time::Duration;

use postgres::types::ToSql;
use postgres::Row;

use self::error::{classify, Fault};
use self::pool::{Conn, Pool, Settings};
use super::{Backend, LogRetention, LoggedChange, Mark, Retire, StoreOptions};
use crate::error::{Error, Result};

mod error;
mod pool;
mod schema;

pub use schema::SCHEMA_VERSION;

const HEAD: &str = "SELECT version, change_log FROM agent_state WHERE agent = $1";
const ROW: &str = "SELECT value, version, change_log FROM agent_state WHERE agent = $1";
const ROW_FOR_UPDATE: &str =
    "SELECT value, version, change_log FROM agent_state WHERE agent = $1 FOR UPDATE";
const ENSURE_ROW: &str =
    "INSERT INTO agent_state (agent) VALUES ($1) ON CONFLICT (agent) DO NOTHING";
const WRITE_STATE: &str =
    "UPDATE agent_state SET value = $2, version = $3::bigint WHERE agent = $1";
const SET_LOG: &str = "UPDATE agent_state SET change_log = $2 WHERE agent = $1";
const CLEAR_LOG: &str = "DELETE FROM agent_changes WHERE agent = $1";
/// Appends a change ($2: its version) and prunes: versions up to $8 (keep_last), and those
/// older than $9 ms (keep_seconds); never the change just appended. (The DELETE does not see
/// the row the INSERT adds: one snapshot for the whole statement.)
const LOG_CHANGE: &str = "
WITH l AS (
    INSERT INTO agent_changes (agent, version, at_ms, writer, patch, next, prev)
    VALUES ($1, $2::bigint, $3::bigint, $4::bigint, $5::text, $6::text, $7::text)
    ON CONFLICT (agent, version) DO UPDATE SET at_ms = excluded.at_ms, writer = excluded.writer,
        patch = excluded.patch, next = excluded.next, prev = excluded.prev
)
DELETE FROM agent_changes WHERE agent = $1 AND version < $2::bigint
    AND (version <= $8::bigint OR at_ms < $9::bigint)";
const CHANGES_AFTER: &str = "SELECT version, at_ms, writer, patch, next, prev FROM agent_changes
     WHERE agent = $1 AND version > $2::bigint ORDER BY version";
const CHANGE_AT: &str = "SELECT version, at_ms, writer, patch, next, prev FROM agent_changes
     WHERE agent = $1 AND version = $2::bigint";

/// The optimistic commit of an agent's first state (version 1) with the log off: inserts the
/// row, or fills the empty row (version 0) another handle left, if the log is still off.
const FIRST_WRITE: &str = "
INSERT INTO agent_state AS s (agent, value, version) VALUES ($1, $2, 1)
ON CONFLICT (agent) DO UPDATE SET value = excluded.value, version = 1
    WHERE s.version = 0 AND s.change_log IS NULL
RETURNING version";
/// The optimistic commit of version $3 with the log off.
const NEXT_WRITE: &str = "
UPDATE agent_state SET value = $2, version = $3::bigint
WHERE agent = $1 AND version = $3::bigint - 1 AND change_log IS NULL
RETURNING version";
/// The optimistic commit of version $3 with the log on ($4: the retention it was computed
/// with), its log entry ($5 at_ms, $6 writer, $7 patch, $8 next or NULL for $2, $9 prev) and
/// the pruning ($10, $11 as in [`LOG_CHANGE`]), all or nothing.
const LOGGED_WRITE: &str = "
WITH s AS (
    UPDATE agent_state SET value = $2, version = $3::bigint
    WHERE agent = $1 AND version = $3::bigint - 1 AND change_log = $4::text
    RETURNING version
), l AS (
    INSERT INTO agent_changes (agent, version, at_ms, writer, patch, next, prev)
    SELECT $1, version, $5::bigint, $6::bigint, $7::text, COALESCE($8::text, $2), $9::text FROM s
    ON CONFLICT (agent, version) DO UPDATE SET at_ms = excluded.at_ms, writer = excluded.writer,
        patch = excluded.patch, next = excluded.next, prev = excluded.prev
), d AS (
    DELETE FROM agent_changes WHERE agent = $1 AND EXISTS (SELECT 1 FROM s)
        AND version < $3::bigint AND (version <= $10::bigint OR at_ms < $11::bigint)
)
SELECT count(*) FROM s";

const UNKNOWN_OUTCOME: &str =
    "the connection was lost while committing: the outcome is unknown; read the state's version \
     to tell";

/// One agent of a PostgreSQL database, as one handle sees it.
pub struct Postgres {
    pool: Arc<Pool>,
    agent: String,
    read_only: bool,
    busy_timeout: Duration,
    settings: Settings,
    /// The process this handle last ran in.
    pid: u32,
    /// The open transaction, if any (calls on a handle are serialized by the agent).
    txn: RefCell<Option<Open>>,
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
    /// The agent's version and log setting as this transaction saw them (`None`: not read).
    head: Option<(i64, Option<String>)>,
    /// The stored state as this transaction saw it (outer `None`: not read).
    value: Option<Option<String>>,
    /// A statement failed: the server rolled the transaction back.
    failed: bool,
    /// Optimistic: the state to write at commit, and its log entry.
    state: Option<(String, u64)>,
    log: Option<PendingLog>,
}

impl Open {
    fn new(conn: Conn, kind: Kind) -> Open {
        Open {
            conn,
            kind,
            head: None,
            value: None,
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
                self.head = Some((row.get(1), row.get(2)));
            }
            None => {
                self.value = Some(None);
                self.head = Some((0, None));
            }
        }
    }
}

type PgResult<T> = std::result::Result<T, postgres::Error>;

impl Postgres {
    /// Opens the agent `options.agent_id` of the database at `uri`, creating the tables when
    /// missing (unless `read_only`). The connection pool is shared by every handle of this
    /// process on the same URI.
    pub fn open(uri: &str, options: &StoreOptions) -> Result<Postgres> {
        let agent = options.agent_id.clone().ok_or_else(|| {
            Error::InvalidArgument("agent_id is required for a PostgreSQL store".to_string())
        })?;
        let shown = pool::redact(uri);
        let config: postgres::Config = uri.parse().map_err(|e: postgres::Error| {
            Error::InvalidArgument(format!(
                "{shown}: not a PostgreSQL connection URI this library understands: {}",
                error::describe(&e)
            ))
        })?;
        if config.get_ssl_mode() == postgres::config::SslMode::Require {
            return Err(Error::InvalidArgument(format!(
                "{shown}: sslmode=require, but this build of agent_state has no TLS support \
                 (use sslmode=disable, or a Unix socket or a TLS tunnel)"
            )));
        }
        let timeout_ms = u64::try_from(options.busy_timeout.as_millis()).unwrap_or(u64::MAX);
        let store = Postgres {
            pool: Pool::get(uri, config, options.max_connections),
            agent,
            read_only: options.read_only,
            busy_timeout: options.busy_timeout,
            settings: Settings {
                synchronous: options.synchronous,
                timeout_ms: timeout_ms.max(1),
            },
            pid: std::process::id(),
            txn: RefCell::new(None),
        };
        if !store.pool.schema_checked() {
            let mut conn = store.acquire()?;
            match schema::check(&mut conn, store.read_only, &store.pool.shown) {
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

    /// A connection of the pool, alive and with this handle's session settings.
    fn acquire(&self) -> Result<Conn> {
        loop {
            let mut conn = self.pool.checkout(self.busy_timeout)?;
            if conn.reused && !conn.alive() {
                self.pool.discard(conn, false);
                continue;
            }
            return match conn.apply(self.settings) {
                Ok(()) => Ok(conn),
                Err(e) => {
                    let fault = classify(&e, "cannot configure the session");
                    self.pool.discard(conn, matches!(fault, Fault::Lost(_)));
                    Err(fault.error())
                }
            };
        }
    }

    /// Runs `f` (a read) on a connection checked out for it (autocommit). A reused
    /// connection found dead is replaced once: the server may have restarted meanwhile.
    fn autocommit<T>(&self, what: &str, f: impl Fn(&mut Conn) -> PgResult<T>) -> Result<T> {
        let mut retried = false;
        loop {
            let mut conn = self.acquire()?;
            return match f(&mut conn) {
                Ok(v) => {
                    self.pool.checkin(conn);
                    Ok(v)
                }
                Err(e) => match classify(&e, what) {
                    Fault::Lost(err) => {
                        let reused = conn.reused;
                        self.pool.discard(conn, true);
                        if reused && !retried {
                            retried = true;
                            continue;
                        }
                        Err(err)
                    }
                    Fault::Answered(err) => {
                        self.pool.checkin(conn);
                        Err(err)
                    }
                },
            };
        }
    }

    /// Runs `f` inside the open transaction. A lost connection ends the transaction (the
    /// server rolls it back); a statement's error marks it failed.
    fn in_txn<T>(&self, what: &str, f: impl FnOnce(&mut Open) -> PgResult<T>) -> Result<T> {
        let mut slot = self.txn.borrow_mut();
        let open = slot.as_mut().ok_or_else(no_transaction)?;
        if open.failed {
            return Err(Error::Storage(format!(
                "{what}: an earlier statement of this transaction failed; it was rolled back"
            )));
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
    /// connection that turns out to be dead is replaced once (nothing was done on it).
    fn begin(&self, kind: Kind, start: impl Fn(&mut Open) -> PgResult<()>) -> Result<()> {
        if let Some(open) = self.txn.borrow_mut().take() {
            // Not expected (transactions go through `Txn`): end it rather than nest.
            self.end(open);
        }
        let mut retried = false;
        loop {
            let conn = self.acquire()?;
            let reused = conn.reused;
            let mut open = Open::new(conn, kind);
            match start(&mut open) {
                Ok(()) => {
                    *self.txn.borrow_mut() = Some(open);
                    return Ok(());
                }
                Err(e) => match classify(&e, "cannot begin a transaction") {
                    Fault::Lost(err) => {
                        self.pool.discard(open.conn, true);
                        if reused && !retried {
                            retried = true;
                            continue;
                        }
                        return Err(err);
                    }
                    Fault::Answered(err) => {
                        open.failed = true;
                        self.end(open);
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
        match open.conn.client().batch_execute("ROLLBACK") {
            Ok(()) => self.pool.checkin(open.conn),
            Err(e) => {
                let lost = matches!(classify(&e, "rollback"), Fault::Lost(_));
                self.pool.discard(open.conn, lost);
            }
        }
    }

    fn refuse_writes(&self) -> Result<()> {
        if self.read_only {
            return Err(Error::Storage(format!(
                "{}: the store was opened read_only; writes are refused",
                self.pool.shown
            )));
        }
        Ok(())
    }

    /// The optimistic commit: one statement. `Ok(false)`: the stored version or log setting
    /// moved, nothing written.
    fn commit_optimistic(
        &self,
        conn: &mut Conn,
        value: &str,
        version: u64,
        log: Option<&PendingLog>,
    ) -> PgResult<bool> {
        let agent = &self.agent;
        let version = version as i64;
        match log {
            None if version == 1 => {
                let s = conn.statement(FIRST_WRITE)?;
                Ok(!conn.client().query(&s, &[agent, &value])?.is_empty())
            }
            None => {
                let s = conn.statement(NEXT_WRITE)?;
                Ok(!conn
                    .client()
                    .query(&s, &[agent, &value, &version])?
                    .is_empty())
            }
            Some(log) => {
                // The logged state is the state written: not sent twice.
                let next = (log.next != value).then_some(log.next.as_str());
                let s = conn.statement(LOGGED_WRITE)?;
                let params: [&(dyn ToSql + Sync); 11] = [
                    agent,
                    &value,
                    &version,
                    &log.retention,
                    &log.at_ms,
                    &log.writer,
                    &log.patch,
                    &next,
                    &log.prev,
                    &log.below,
                    &log.since,
                ];
                let row = conn.client().query_one(&s, &params)?;
                Ok(row.get::<_, i64>(0) > 0)
            }
        }
    }
}

/// An optimistic write's log entry, ready to be sent with the commit.
struct PendingLog {
    /// The retention the change was computed with, as stored.
    retention: String,
    at_ms: i64,
    writer: i64,
    patch: Option<String>,
    next: String,
    prev: Option<String>,
    below: Option<i64>,
    since: Option<i64>,
}

impl PendingLog {
    fn new(change: &LoggedChange, retention: LogRetention) -> Result<PendingLog> {
        let (below, since) = prune_bounds(change, retention);
        Ok(PendingLog {
            retention: text(&retention.to_json())?.to_string(),
            at_ms: change.at_ms,
            writer: change.writer as i64,
            patch: opt_text(change.patch.as_deref())?.map(str::to_string),
            next: text(&change.next)?.to_string(),
            prev: opt_text(change.prev.as_deref())?.map(str::to_string),
            below,
            since,
        })
    }
}

fn no_transaction() -> Error {
    Error::Storage("no transaction is open (internal)".to_string())
}

fn text(bytes: &[u8]) -> Result<&str> {
    std::str::from_utf8(bytes)
        .map_err(|_| Error::Storage("a value to store is not UTF-8 text (internal)".to_string()))
}

fn opt_text(bytes: Option<&[u8]>) -> Result<Option<&str>> {
    bytes.map(text).transpose()
}

/// The pruning bounds of `retention` after `change`: delete versions up to the first (when
/// keep_last), and entries older than the second (ms, when keep_seconds).
fn prune_bounds(change: &LoggedChange, retention: LogRetention) -> (Option<i64>, Option<i64>) {
    let below = retention
        .keep_last
        .map(|keep| change.version.saturating_sub(keep.max(1)) as i64);
    let since = retention
        .keep_seconds
        .map(|s| change.at_ms.saturating_sub(s.saturating_mul(1000) as i64));
    (below, since)
}

fn retention(text: Option<String>) -> Result<Option<LogRetention>> {
    match text {
        None => Ok(None),
        Some(t) => LogRetention::from_json(t.as_bytes())
            .map(Some)
            .map_err(|e| Error::Corrupt(format!("the change log settings: {e}"))),
    }
}

fn row_to_change(r: &Row) -> LoggedChange {
    LoggedChange {
        version: r.get::<_, i64>(0) as u64,
        at_ms: r.get(1),
        writer: r.get::<_, i64>(2) as u64,
        patch: r.get::<_, Option<String>>(3).map(String::into_bytes),
        next: r.get::<_, String>(4).into_bytes(),
        prev: r.get::<_, Option<String>>(5).map(String::into_bytes),
    }
}

impl Backend for Postgres {
    /// Nothing to register: connections inherited across `fork()` are let go of at the
    /// child's first call on each handle ([`Backend::ensure_current`]) and by the pool.
    fn register_owner(&self, _owner: Weak<dyn Retire>) {}

    /// In a child process after `fork()`: forgets (never closes: the socket is the parent's)
    /// the connection this handle held and the pool's inherited ones; the next statement
    /// connects anew. Returns true then.
    fn ensure_current(&mut self) -> Result<bool> {
        let now = std::process::id();
        if self.pid == now {
            return Ok(false);
        }
        self.retire_inherited();
        self.pool.ensure_current();
        self.pid = now;
        Ok(true)
    }

    fn retire_inherited(&mut self) {
        if self.pid != std::process::id() {
            // Conn's drop forgets a connection of another process.
            drop(self.txn.get_mut().take());
        }
    }

    fn commit_mark(&self) -> Option<Mark> {
        None
    }

    /// Nothing to do: the freshness test is [`Backend::head`], and a read transaction's
    /// snapshot is taken at its first statement.
    fn refresh(&self) -> Result<()> {
        Ok(())
    }

    fn data_version(&self) -> Option<u32> {
        None
    }

    /// `SELECT version, change_log`: one round trip outside a transaction; inside a write
    /// transaction, what it read when it began.
    fn head(&self) -> Result<Option<(u64, Option<LogRetention>)>> {
        let known = self.txn.borrow().as_ref().and_then(|o| o.head.clone());
        let (version, log) = match known {
            Some(head) => head,
            None => {
                let agent = &self.agent;
                let head = self.read("cannot read the state's version", |conn| {
                    let s = conn.statement(HEAD)?;
                    Ok(conn
                        .client()
                        .query_opt(&s, &[agent])?
                        .map_or((0, None), |r| (r.get(0), r.get(1))))
                })?;
                if let Some(open) = self.txn.borrow_mut().as_mut() {
                    if open.kind == Kind::Read {
                        open.head = Some(head.clone());
                    }
                }
                head
            }
        };
        Ok(Some((version as u64, retention(log)?)))
    }

    fn optimistic(&self) -> bool {
        self.txn
            .borrow()
            .as_ref()
            .is_some_and(|o| o.kind == Kind::Optimistic)
    }

    /// Checks out a connection and sends nothing: the commit is one statement.
    fn begin_optimistic_write(&self) -> Result<()> {
        self.refuse_writes()?;
        self.begin(Kind::Optimistic, |_| Ok(()))
    }

    fn begin_read(&self) -> Result<()> {
        self.begin(Kind::Read, |open| {
            open.conn
                .client()
                .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        })
    }

    /// `BEGIN`, then the agent's row `FOR UPDATE` (inserted empty first when missing), kept for
    /// the transaction's reads.
    fn begin_write(&self) -> Result<()> {
        self.refuse_writes()?;
        let agent = &self.agent;
        self.begin(Kind::Locked, |open| {
            open.conn.client().batch_execute("BEGIN")?;
            let lock = open.conn.statement(ROW_FOR_UPDATE)?;
            let mut row = open.conn.client().query_opt(&lock, &[agent])?;
            if row.is_none() {
                let insert = open.conn.statement(ENSURE_ROW)?;
                open.conn.client().execute(&insert, &[agent])?;
                row = open.conn.client().query_opt(&lock, &[agent])?;
            }
            open.keep_row(row.as_ref());
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
                    .to_string(),
            ));
        }
        if open.kind == Kind::Optimistic {
            let Some((value, version)) = open.state.take() else {
                self.pool.checkin(open.conn);
                return Ok(());
            };
            let log = open.log.take();
            let result = self.commit_optimistic(&mut open.conn, &value, version, log.as_ref());
            return match result {
                Ok(true) => {
                    self.pool.checkin(open.conn);
                    Ok(())
                }
                Ok(false) => {
                    self.pool.checkin(open.conn);
                    Err(Error::Stale)
                }
                Err(e) if error::conflict(&e) => {
                    self.pool.checkin(open.conn);
                    Err(Error::Stale)
                }
                Err(e) => match classify(&e, "cannot commit") {
                    // Nothing reached the server (it closed the connection before): nothing
                    // was written, and the agent tries again under a lock, on a new connection.
                    Fault::Lost(_) if error::unsent(&e) => {
                        self.pool.discard(open.conn, true);
                        Err(Error::Stale)
                    }
                    Fault::Lost(_) => {
                        self.pool.discard(open.conn, true);
                        Err(Error::Unavailable(UNKNOWN_OUTCOME.to_string()))
                    }
                    Fault::Answered(err) => {
                        self.pool.checkin(open.conn);
                        Err(err)
                    }
                },
            };
        }
        match open.conn.client().batch_execute("COMMIT") {
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
                Fault::Lost(_) => {
                    self.pool.discard(open.conn, true);
                    Err(if open.kind == Kind::Read {
                        Error::Unavailable(
                            "the connection to the PostgreSQL server was lost".to_string(),
                        )
                    } else {
                        Error::Unavailable(UNKNOWN_OUTCOME.to_string())
                    })
                }
                Fault::Answered(err) => {
                    // A failed COMMIT ends the transaction: the connection is idle again.
                    self.pool.checkin(open.conn);
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

    fn read_state(&self) -> Result<Option<(Vec<u8>, u64)>> {
        let known = self.txn.borrow().as_ref().and_then(|o| {
            // An optimistic write reads afresh (its reads are not one snapshot).
            (o.kind != Kind::Optimistic)
                .then(|| o.value.clone().zip(o.head.as_ref().map(|h| h.0)))
                .flatten()
        });
        let (value, version) = match known {
            Some(known) => known,
            None => {
                let agent = &self.agent;
                let in_txn = self.txn.borrow().is_some();
                if in_txn {
                    self.in_txn("cannot read the state", |open| {
                        let s = open.conn.statement(ROW)?;
                        let row = open.conn.client().query_opt(&s, &[agent])?;
                        open.keep_row(row.as_ref());
                        Ok((
                            row.as_ref().and_then(|r| r.get(0)),
                            row.map_or(0, |r| r.get(1)),
                        ))
                    })?
                } else {
                    self.autocommit("cannot read the state", |conn| {
                        let s = conn.statement(ROW)?;
                        let row = conn.client().query_opt(&s, &[agent])?;
                        Ok((
                            row.as_ref().and_then(|r| r.get(0)),
                            row.map_or(0, |r| r.get(1)),
                        ))
                    })?
                }
            }
        };
        Ok(value.map(|v: String| (v.into_bytes(), version as u64)))
    }

    fn write_state(&self, value: &[u8], version: u64) -> Result<()> {
        let value = text(value)?;
        let kind = self.txn.borrow().as_ref().map(|o| o.kind);
        match kind {
            None => Err(no_transaction()),
            Some(Kind::Read) => Err(Error::Storage(
                "cannot write inside a read transaction (internal)".to_string(),
            )),
            Some(Kind::Optimistic) => {
                if let Some(open) = self.txn.borrow_mut().as_mut() {
                    open.state = Some((value.to_string(), version));
                }
                Ok(())
            }
            Some(Kind::Locked) => {
                let agent = &self.agent;
                let v = version as i64;
                self.in_txn("cannot write the state", |open| {
                    let s = open.conn.statement(WRITE_STATE)?;
                    open.conn.client().execute(&s, &[agent, &value, &v])?;
                    open.value = Some(Some(value.to_string()));
                    if let Some(head) = open.head.as_mut() {
                        head.0 = v;
                    }
                    Ok(())
                })
            }
        }
    }

    fn log_retention(&self) -> Result<Option<LogRetention>> {
        Ok(self.head()?.and_then(|(_, log)| log))
    }

    fn set_log_retention(&self, retention: Option<LogRetention>) -> Result<()> {
        let kind = self.txn.borrow().as_ref().map(|o| o.kind);
        if kind != Some(Kind::Locked) {
            return Err(Error::Storage(
                "the change log's setting is written only under the row's lock (internal)"
                    .to_string(),
            ));
        }
        let json = retention.map(|r| r.to_json());
        let setting = opt_text(json.as_deref())?;
        let agent = &self.agent;
        self.in_txn("cannot write the change log setting", |open| {
            let s = open.conn.statement(SET_LOG)?;
            open.conn.client().execute(&s, &[agent, &setting])?;
            if setting.is_none() {
                let s = open.conn.statement(CLEAR_LOG)?;
                open.conn.client().execute(&s, &[agent])?;
            }
            if let Some(head) = open.head.as_mut() {
                head.1 = setting.map(str::to_string);
            }
            Ok(())
        })
    }

    fn log_change(&self, change: &LoggedChange, retention: LogRetention) -> Result<()> {
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
                let next = text(&change.next)?;
                let patch = opt_text(change.patch.as_deref())?;
                let prev = opt_text(change.prev.as_deref())?;
                let (version, writer) = (change.version as i64, change.writer as i64);
                let agent = &self.agent;
                self.in_txn("cannot write the change log", |open| {
                    let s = open.conn.statement(LOG_CHANGE)?;
                    let params: [&(dyn ToSql + Sync); 9] = [
                        agent,
                        &version,
                        &change.at_ms,
                        &writer,
                        &patch,
                        &next,
                        &prev,
                        &below,
                        &since,
                    ];
                    open.conn.client().execute(&s, &params)?;
                    Ok(())
                })
            }
            Some(Kind::Read) => Err(Error::Storage(
                "cannot write inside a read transaction (internal)".to_string(),
            )),
            None => Err(no_transaction()),
        }
    }

    fn changes_after(&self, after: u64) -> Result<Vec<LoggedChange>> {
        let agent = &self.agent;
        let after = i64::try_from(after).unwrap_or(i64::MAX);
        let rows = self.read("cannot read the change log", |conn| {
            let s = conn.statement(CHANGES_AFTER)?;
            conn.client().query(&s, &[agent, &after])
        })?;
        Ok(rows.iter().map(row_to_change).collect())
    }

    fn change_at(&self, version: u64) -> Result<Option<LoggedChange>> {
        let agent = &self.agent;
        let Ok(version) = i64::try_from(version) else {
            return Ok(None);
        };
        let row = self.read("cannot read the change log", |conn| {
            let s = conn.statement(CHANGE_AT)?;
            conn.client().query_opt(&s, &[agent, &version])
        })?;
        Ok(row.as_ref().map(row_to_change))
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if let Some(open) = self.txn.get_mut().take() {
            if open.conn.belongs_here() {
                self.end(open);
            }
            // Otherwise dropping it forgets it (the parent's connection).
        }
    }
}
