//! One connection to a PostgreSQL server and the timed I/O that drives it: the library's
//! bound on every round trip.
//!
//! A connection is a `tokio_postgres` client and its connection (the socket's I/O), on a
//! current-thread runtime of its own (a poller and a timer), driven only while a call waits
//! for its answer (`Runtime::block_on`, on the calling thread: no thread is started), as the
//! synchronous `postgres` client does. (A caller inside a tokio runtime, where tokio refuses to
//! block, has the wait done on a thread of its own: see [`lifecycle`].)
//!
//! How statements are sent, as the URI's `default_query_exec_mode` says ([`ExecMode`]), is
//! the business of [`send`].
//!
//! Two bounds, each for its own reason:
//! - `busy_timeout_ms` bounds waiting for what others hold: the transaction's `lock_timeout`
//!   (`busy_timeout_ms`, at least 1 ms; a row or table lock held by another connection:
//!   SQLSTATE 55P03, [`Error::Busy`], the connection still usable) and a checkout from the pool
//!   (`super::pool`). It does not bound how long the server takes to run a statement nobody
//!   contends: with `busy_timeout_ms` 0 a 256 KiB write on a loaded machine must still succeed.
//!   (No `statement_timeout` is set.)
//! - `server_timeout_ms` bounds a server that does not answer at all (frozen, its host hung,
//!   the network partitioned: no server-side timeout can fire there). The client gives a
//!   round trip `busy_timeout_ms + server_timeout_ms` on its own clock (the lock wait it may
//!   include, then the answer), and a connection attempt `server_timeout_ms` per host; past that the
//!   call fails with [`Error::Unavailable`] and the connection, in a state no one can tell, is
//!   discarded. (The synchronous `postgres` client has no per-call timeout.)
//!
//! A connection remembers the process that opened it ([`process::generation`]). After
//! `fork()`, the child must never use or close what it inherited: the socket is shared with
//! the parent, and even closing a client the ordinary way sends a Terminate message on it. An
//! inherited connection is forgotten (`mem::forget`) when dropped, never closed.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use tokio::runtime::Runtime;
use tokio_postgres::{Client, Row, Statement};

use super::error::{self, PgError, PgResult};
use super::params::values;
pub(super) use super::params::{bool_param, int4_param, int8_param, text_param, Param};
pub(super) use super::session::Settings;
use super::tls::Tls;
pub(super) use super::uri::ExecMode;
use crate::store::process;

/// How long dropping a healthy connection waits for its Terminate message to be written
/// (normally at once: it only fills the socket's buffer).
const CLOSE_WAIT: Duration = Duration::from_millis(100);

/// The client's bounds for one handle: how long a round trip may go unanswered, and a
/// connection attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Limits {
    /// `busy_timeout_ms + server_timeout_ms`: a lock wait the server may do for the request,
    /// then its answer.
    pub round_trip: Duration,
    /// `server_timeout_ms`: connecting waits for no one's lock.
    pub connect: Duration,
}

impl Limits {
    pub fn new(busy: Duration, server: Duration) -> Limits {
        Limits {
            round_trip: busy.saturating_add(server),
            connect: server,
        }
    }
}

/// One connection to the server.
pub(super) struct Conn {
    /// `None` only while being dropped (the same for `io` and `runtime`).
    client: Option<Client>,
    /// The connection's I/O: it owns the socket, and moves the client's requests and the
    /// server's answers when polled (inside this connection's calls only).
    io: Option<Io>,
    /// The poller and timer `io` runs on.
    runtime: Option<Runtime>,
    /// Whether `io` has ended, and the notifications it read (see [`Heard`]).
    heard: Heard,
    /// The bound on each round trip, of the handle using it ([`Limits::round_trip`]).
    limit: Duration,
    /// A round trip went unanswered or was cancelled: the connection's state is unknown (never
    /// reused).
    timed_out: bool,
    /// A commit is in flight: the calling thread's cancel token is not honoured (a commit
    /// under way finishes, or its outcome is unknown; see [`crate::Cancel`]).
    committing: bool,
    /// The process that opened it ([`process::generation`]).
    pid: u64,
    /// True once it has served a checkout (an idle connection may have died meanwhile).
    pub reused: bool,
    /// When it was last returned to the pool ([`Conn::set_idle`]).
    idle_since: Instant,
    /// How its statements are sent (the URI's `default_query_exec_mode`).
    mode: ExecMode,
    /// `cache_statement`: the statements prepared on this server session, by their SQL.
    prepared: HashMap<String, Statement>,
    /// `cache_statement`: the settings `SET` for this server session (`None`: the server's
    /// own, or not known).
    session: Option<Settings>,
}

/// True when the server no longer has a statement prepared on the session (SQLSTATE 26000,
/// invalid_sql_statement_name: `DISCARD ALL` or `DEALLOCATE` ran on it, or a pooler handed the
/// client another server session).
pub(super) fn forgotten(e: &PgError) -> bool {
    matches!(e.code().map(|c| c.code()), Some("26000"))
}

/// Why a connection attempt failed.
pub(super) struct ConnectError {
    /// The server answered but would not let us in: the TLS handshake failed (certificate,
    /// name, the server offers no TLS while sslmode requires it) or it refused the
    /// credentials. [`crate::Error::Auth`], rather than unreachable.
    pub refused: bool,
    /// The calling thread's cancel token fired while connecting.
    pub cancelled: bool,
    /// What happened, for the message (never the password).
    pub why: String,
}

/// How long a connection sits idle before a checkout checks that the server still has it.
const PROBE_AFTER_IDLE: Duration = Duration::from_secs(1);

/// Plain or TLS (`super::tls`), as the URI's `sslmode` and the server decided.
use super::wait::{bounded, join, join3, Heard, Io};
use crate::cancel;

/// A round trip on `$conn`'s client: `$call` is the client's future, given the client as
/// `$client`; waited for at most the connection's limit.
macro_rules! round_trip {
    ($conn:expr, |$client:ident| $call:expr) => {{
        let conn: &mut Conn = $conn;
        let $client = conn
            .client
            .as_ref()
            .expect("a connection has its client until dropped");
        let runtime = conn
            .runtime
            .as_ref()
            .expect("a connection has its runtime until dropped");
        let io = conn
            .io
            .as_mut()
            .expect("a connection has its I/O until dropped");
        // A commit under way is never cancelled (it finishes, or its outcome is unknown).
        let cancel = if conn.committing {
            None
        } else {
            cancel::current()
        };
        bounded(
            runtime,
            io,
            &mut conn.heard,
            conn.limit,
            &mut conn.timed_out,
            cancel.as_ref(),
            $call,
        )
    }};
}

mod lifecycle;
mod listen;
mod send;

impl Conn {
    /// Whether the server is in recovery (a standby) and read-only (`transaction_read_only`,
    /// which a standby always is), for `target_session_attrs`: one simple query (no prepared
    /// statement: safe behind a pooler).
    pub fn session_kind(&mut self) -> std::result::Result<(bool, bool), String> {
        let rows = round_trip!(self, |client| client.simple_query(
            "SELECT pg_is_in_recovery(), current_setting('transaction_read_only')"
        ))
        .map_err(|e| e.describe())?;
        for message in rows {
            if let tokio_postgres::SimpleQueryMessage::Row(row) = message {
                let recovery = row.get(0) == Some("t");
                let read_only = row.get(1) == Some("on");
                return Ok((recovery, read_only));
            }
        }
        Err("no answer to the session's check".to_string())
    }

    pub fn belongs_here(&self) -> bool {
        self.pid == process::generation()
    }

    /// The process that opened it.
    pub fn pid(&self) -> u64 {
        self.pid
    }

    /// Records that it is idle from now on (returned to the pool).
    pub fn set_idle(&mut self) {
        self.idle_since = Instant::now();
    }

    /// `cache_statement`: `SET`s `settings` for the session when they are not what it has (one
    /// round trip then; none when they are). Called outside any transaction, at checkout. Does
    /// nothing in `exec` mode, where each transaction carries its settings.
    pub fn ensure_session(&mut self, settings: Settings) -> PgResult<()> {
        if self.mode == ExecMode::Exec || self.session == Some(settings) {
            return Ok(());
        }
        self.session = None;
        self.batch_execute(&settings.set_session())?;
        self.session = Some(settings);
        Ok(())
    }

    /// Begins a transaction with `settings` (one round trip: [`Settings::begin`]). In either
    /// mode its batch sets them `LOCAL` too: it costs no round trip, and a transaction of
    /// several statements then has them whatever happened to the session.
    pub fn begin(&mut self, settings: Settings) -> PgResult<()> {
        self.batch_execute(&settings.begin())
    }

    /// Begins a transaction with `settings` ([`Conn::begin`]) and runs `sql` in it (sent as by
    /// [`Conn::query`]), pipelined: one round trip. Its row, if any; more than one is an error.
    /// When the `BEGIN` batch fails, that is the error (the statement, then run outside the
    /// transaction, is a read: `sql` must write nothing).
    pub fn begin_with(
        &mut self,
        settings: Settings,
        sql: &str,
        params: &[Param<'_>],
    ) -> PgResult<Option<Row>> {
        let begin = settings.begin();
        let statement = self.prepared(sql, params)?;
        let values = values(params);
        let result = round_trip!(self, |client| async {
            let (begun, row) = match &statement {
                Some(statement) => {
                    join(
                        client.batch_execute(&begin),
                        client.query_opt(statement, &values),
                    )
                    .await
                }
                None => {
                    join(
                        client.batch_execute(&begin),
                        client.query_typed_opt(sql, params),
                    )
                    .await
                }
            };
            begun?;
            row
        });
        self.forget_if_forgotten(result)
    }

    /// A transaction of one statement, `sql` with `params`, its `settings` in effect, in one
    /// round trip, never cancelled once sent (see [`Conn::commit`]). Returns the statement's
    /// rows; after a failure, nothing was written (or, the connection lost, the outcome is
    /// unknown, as for any commit):
    /// - the session has the settings (`cache_statement`, [`Conn::ensure_session`]): the
    ///   prepared statement alone, in autocommit;
    /// - `exec` mode: the statement alone, unnamed, in autocommit, made by
    ///   [`super::sql::with_settings`] to set the settings for its own transaction
    ///   (`set_config(.., true)`) in its `UPDATE`'s condition, evaluated on the row before the
    ///   write can wait for the row's lock: `lock_timeout` bounds that wait, and
    ///   `synchronous_commit` is the transaction's at its commit (at the end of the round
    ///   trip). `sql` is one of the optimistic commits of `super::sql`;
    /// - otherwise (a session whose settings are not these): `BEGIN` with `SET LOCAL` of them,
    ///   the statement and `COMMIT`, pipelined (the client sends its requests in the order
    ///   they are first polled, and the server answers them in order); a failed `BEGIN` batch
    ///   fails the statement too (in a transaction already aborted), and after a failed
    ///   statement the server answers the `COMMIT` of the aborted transaction with a rollback.
    pub fn commit_one(
        &mut self,
        settings: Settings,
        sql: &'static str,
        params: &[Param<'_>],
    ) -> PgResult<Vec<Row>> {
        self.committing = true;
        let result = self.commit_one_sent(settings, sql, params);
        self.committing = false;
        result
    }

    fn commit_one_sent(
        &mut self,
        settings: Settings,
        sql: &'static str,
        params: &[Param<'_>],
    ) -> PgResult<Vec<Row>> {
        let statement = self.prepared(sql, params)?;
        if self.session == Some(settings) {
            if let Some(statement) = statement {
                let values = values(params);
                let result = round_trip!(self, |client| client.query(&statement, &values));
                return self.forget_if_forgotten(result);
            }
        }
        if self.mode == ExecMode::Exec {
            let (lock_timeout, synchronous_commit) =
                (settings.lock_timeout(), settings.synchronous_commit());
            let mut all = params.to_vec();
            all.push(text_param(&lock_timeout));
            all.push(text_param(&synchronous_commit));
            let sql = super::sql::with_settings(sql);
            return round_trip!(self, |client| client.query_typed(sql, &all));
        }
        let begin = settings.begin();
        let values = values(params);
        let result = round_trip!(self, |client| async {
            let (begun, rows, committed) = match &statement {
                Some(statement) => {
                    join3(
                        client.batch_execute(&begin),
                        client.query(statement, &values),
                        client.batch_execute("COMMIT"),
                    )
                    .await
                }
                None => {
                    join3(
                        client.batch_execute(&begin),
                        client.query_typed(sql, params),
                        client.batch_execute("COMMIT"),
                    )
                    .await
                }
            };
            begun?;
            let rows = rows?;
            committed?;
            Ok(rows)
        });
        self.forget_if_forgotten(result)
    }

    /// `COMMIT` of the open transaction, never cancelled (see [`Conn::commit_one`]).
    pub fn commit(&mut self) -> PgResult<()> {
        self.committing = true;
        let result = self.batch_execute("COMMIT");
        self.committing = false;
        result
    }

    /// From now on the connection's round trips are bounded by `limit` (the handle's).
    pub fn set_limit(&mut self, limit: Duration) {
        self.limit = limit;
    }

    /// True when the connection can go back to the pool as it is.
    pub fn reusable(&self) -> bool {
        !self.timed_out && !self.heard.ended && self.client.as_ref().is_some_and(|c| !c.is_closed())
    }
}
