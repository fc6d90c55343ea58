//! One connection to a PostgreSQL server and the timed I/O that drives it: the library's
//! bound on every round trip.
//!
//! A connection is a `tokio_postgres` client and its connection (the socket's I/O), on a
//! current-thread runtime of its own (a poller and a timer), driven only while a call waits
//! for its answer (`Runtime::block_on`, on the calling thread: no thread is started), as the
//! synchronous `postgres` client does.
//!
//! Two bounds, each for its own reason:
//! - `busy_timeout_ms` bounds waiting for what others hold: the session's `lock_timeout` (a
//!   row or table lock held by another connection: SQLSTATE 55P03, [`Error::Busy`], the
//!   connection still usable) and a checkout from the pool (`super::pool`). It does not bound
//!   how long the server takes to run a statement nobody contends: with `busy_timeout_ms` 0 a
//!   256 KiB write on a loaded machine must still succeed. (No `statement_timeout` is set.)
//! - `server_timeout_ms` bounds a server that does not answer at all (frozen, its host hung,
//!   the network partitioned: no server-side timeout can fire there). The client gives a
//!   round trip `busy_timeout_ms + server_timeout_ms` on its own clock (the lock wait it may
//!   include, then the answer), and a connection attempt `server_timeout_ms`; past that the
//!   call fails with [`Error::Unavailable`] and the connection, in a state no one can tell, is
//!   discarded. (The synchronous `postgres` client has no per-call timeout.)
//!
//! A connection remembers the process that opened it ([`process::generation`]). After
//! `fork()`, the child must never use or close what it inherited: the socket is shared with
//! the parent, and even closing a client the ordinary way sends a Terminate message on it. An
//! inherited connection is forgotten (`mem::forget`) when dropped, never closed.

use std::collections::HashMap;
use std::future::Future;
use std::pin::pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use tokio::runtime::Runtime;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Config, Row, Socket, Statement, ToStatement};

use super::error::{self, PgError, PgResult};
use super::tls::{self, Tls};
use super::uri::resolved;
use crate::error::{Error, Result};
use crate::store::{process, Synchronous};

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

/// The session settings one handle needs on the connection it uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Settings {
    pub synchronous: Synchronous,
    /// `lock_timeout`, in milliseconds: `busy_timeout_ms`, at least 1 (PostgreSQL reads 0 as
    /// "wait forever"; 1 ms fails a contended lock at once, and an uncontended one never waits).
    pub lock_timeout_ms: u64,
}

/// One connection, with what was applied to its session and its prepared statements.
pub(super) struct Conn {
    /// `None` only while being dropped (the same for `io` and `runtime`).
    client: Option<Client>,
    /// The connection's I/O: it owns the socket, and moves the client's requests and the
    /// server's answers when polled (inside this connection's calls only).
    io: Option<Io>,
    /// The poller and timer `io` runs on.
    runtime: Option<Runtime>,
    /// `io` has ended (the server closed the connection, or it failed): not polled again.
    ended: bool,
    /// The bound on each round trip, of the handle using it ([`Limits::round_trip`]).
    limit: Duration,
    /// A round trip went unanswered: the connection's state is unknown (never reused).
    timed_out: bool,
    /// The process that opened it ([`process::generation`]).
    pid: u64,
    /// The session settings last applied (`None`: the server's defaults).
    settings: Option<Settings>,
    statements: HashMap<&'static str, Statement>,
    /// True once it has served a checkout (an idle connection may have died meanwhile).
    pub reused: bool,
    /// When it was last returned to the pool ([`Conn::set_idle`]).
    idle_since: Instant,
}

/// How long a connection sits idle before a checkout checks that the server still has it.
const PROBE_AFTER_IDLE: Duration = Duration::from_secs(1);

/// Plain or TLS (`super::tls`), as the URI's `sslmode` and the server decided.
type Io = tokio_postgres::Connection<Socket, tls::Stream>;

/// Polls `io` until it has nothing more to do now. An error or its end is terminal: `ended`
/// is set, and the error returned (the request in flight then fails as well).
fn drive(
    io: &mut Io,
    ended: &mut bool,
    cx: &mut std::task::Context<'_>,
) -> std::result::Result<(), tokio_postgres::Error> {
    while !*ended {
        match io.poll_message(cx) {
            // Notices (CREATE TABLE IF NOT EXISTS's "already exists, skipping") and
            // notifications (this library listens to none): ignored.
            Poll::Ready(Some(Ok(_))) => {}
            Poll::Ready(Some(Err(e))) => {
                *ended = true;
                return Err(e);
            }
            Poll::Ready(None) => *ended = true,
            Poll::Pending => break,
        }
    }
    Ok(())
}

/// Waits for `future` (a request of the client of `io`) on `runtime`, driving `io`, at most
/// `limit`; `timed_out` is set when it did not finish. An error of the connection itself (a
/// closed socket, say) is the request's error, as with the synchronous client.
fn bounded<T>(
    runtime: &Runtime,
    io: &mut Io,
    ended: &mut bool,
    limit: Duration,
    timed_out: &mut bool,
    future: impl Future<Output = std::result::Result<T, tokio_postgres::Error>>,
) -> PgResult<T> {
    runtime.block_on(async {
        // Made here: a timer needs the runtime's context.
        let mut sleep = pin!(tokio::time::sleep(limit));
        let mut future = pin!(future);
        std::future::poll_fn(|cx| {
            if let Err(e) = drive(io, ended, cx) {
                return Poll::Ready(Err(PgError::Client(e)));
            }
            if let Poll::Ready(result) = future.as_mut().poll(cx) {
                return Poll::Ready(result.map_err(PgError::Client));
            }
            if sleep.as_mut().poll(cx).is_ready() {
                *timed_out = true;
                return Poll::Ready(Err(PgError::TimedOut(limit)));
            }
            Poll::Pending
        })
        .await
    })
}

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
        bounded(
            runtime,
            io,
            &mut conn.ended,
            conn.limit,
            &mut conn.timed_out,
            $call,
        )
    }};
}

impl Conn {
    /// A new connection to the server of `config` (`shown` in messages: its URI without the
    /// password), secured as `tls` says, within `limits.connect` in all; its round trips are
    /// then bounded by `limits.round_trip`. A connection that could not be secured or whose
    /// credentials the server refused is [`Error::Auth`]; otherwise [`Error::Unavailable`].
    pub fn connect(config: &Config, tls: &Tls, shown: &str, limits: Limits) -> Result<Conn> {
        let whole = limits.connect;
        let deadline = Instant::now() + whole;
        let unavailable = |e: String| {
            Error::Unavailable(format!(
                "cannot connect to the PostgreSQL server {shown}: {e}"
            ))
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(|e| unavailable(format!("cannot set up the connection's I/O: {e}")))?;
        let mut config = config.clone();
        config.connect_timeout(whole);
        let mut last = None;
        let mut refused = false;
        for candidate in resolved(&config).map_err(unavailable)? {
            let left = deadline.saturating_duration_since(Instant::now());
            match runtime
                .block_on(async { tokio::time::timeout(left, tls.connect(&candidate)).await })
            {
                Ok(Ok((client, io))) => {
                    return Ok(Conn {
                        client: Some(client),
                        io: Some(io),
                        runtime: Some(runtime),
                        ended: false,
                        limit: limits.round_trip,
                        timed_out: false,
                        pid: process::generation(),
                        settings: None,
                        statements: HashMap::new(),
                        reused: false,
                        idle_since: Instant::now(),
                    });
                }
                Ok(Err(e)) => {
                    refused = error::refused(&e);
                    last = Some(error::describe_connect(&e));
                }
                Err(_) => {
                    refused = false;
                    last = Some(format!(
                        "the server did not answer within server_timeout_ms ({} ms)",
                        whole.as_millis()
                    ));
                    break;
                }
            }
        }
        let last = last.unwrap_or_else(|| "no address to connect to".into());
        Err(if refused {
            Error::Auth(format!(
                "cannot connect to the PostgreSQL server {shown}: {last}"
            ))
        } else {
            unavailable(last)
        })
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

    /// False when the server closed the connection while it sat idle (a restart, an idle
    /// timeout), or a round trip on it went unanswered. No round trip: the runtime's poller
    /// turns for a millisecond while the connection is polled, which reads the end of a closed
    /// socket. Only worth it for a connection idle for a while: a dead one is also caught when
    /// used (see the retries in `super`).
    pub fn alive(&mut self) -> bool {
        if self.timed_out || !self.reusable() {
            return false;
        }
        if self.idle_since.elapsed() < PROBE_AFTER_IDLE {
            return true;
        }
        if let (Some(runtime), Some(io)) = (self.runtime.as_ref(), self.io.as_mut()) {
            let ended = &mut self.ended;
            runtime.block_on(async {
                let mut sleep = pin!(tokio::time::sleep(Duration::from_millis(1)));
                std::future::poll_fn(|cx| {
                    // The connection first: when the socket's end and the timer come in the
                    // same turn, the end is read.
                    if drive(io, ended, cx).is_err() || *ended {
                        return Poll::Ready(());
                    }
                    sleep.as_mut().poll(cx)
                })
                .await
            });
        }
        self.reusable()
    }

    pub fn query<T: ?Sized + ToStatement>(
        &mut self,
        statement: &T,
        params: &[&(dyn ToSql + Sync)],
    ) -> PgResult<Vec<Row>> {
        round_trip!(self, |client| client.query(statement, params))
    }

    pub fn query_opt<T: ?Sized + ToStatement>(
        &mut self,
        statement: &T,
        params: &[&(dyn ToSql + Sync)],
    ) -> PgResult<Option<Row>> {
        round_trip!(self, |client| client.query_opt(statement, params))
    }

    pub fn query_one<T: ?Sized + ToStatement>(
        &mut self,
        statement: &T,
        params: &[&(dyn ToSql + Sync)],
    ) -> PgResult<Row> {
        round_trip!(self, |client| client.query_one(statement, params))
    }

    pub fn execute<T: ?Sized + ToStatement>(
        &mut self,
        statement: &T,
        params: &[&(dyn ToSql + Sync)],
    ) -> PgResult<u64> {
        round_trip!(self, |client| client.execute(statement, params))
    }

    /// Statements in one simple query (no parameters).
    pub fn batch_execute(&mut self, sql: &str) -> PgResult<()> {
        round_trip!(self, |client| client.batch_execute(sql))
    }

    /// The prepared statement for `sql` on this connection (prepared on first use).
    pub fn statement(&mut self, sql: &'static str) -> PgResult<Statement> {
        if let Some(s) = self.statements.get(sql) {
            return Ok(s.clone());
        }
        let s = round_trip!(self, |client| client.prepare(sql))?;
        self.statements.insert(sql, s.clone());
        Ok(s)
    }

    /// Applies `wanted` to the session, in one batch, unless it already is; from now on the
    /// connection's round trips are bounded by `limit`.
    pub fn apply(&mut self, wanted: Settings, limit: Duration) -> PgResult<()> {
        self.limit = limit;
        if self.settings == Some(wanted) {
            return Ok(());
        }
        let mut batch = String::new();
        let before = self.settings;
        if before.map(|s| s.synchronous) != Some(wanted.synchronous) {
            batch.push_str(match wanted.synchronous {
                Synchronous::Full => "SET synchronous_commit = on;",
                Synchronous::Normal => "SET synchronous_commit = off;",
            });
        }
        if before.map(|s| s.lock_timeout_ms) != Some(wanted.lock_timeout_ms) {
            let ms = wanted.lock_timeout_ms.max(1);
            batch.push_str(&format!("SET lock_timeout = {ms};"));
        }
        // Unknown until the batch is through (a failure may have applied part of it).
        self.settings = None;
        self.batch_execute(&batch)?;
        self.settings = Some(wanted);
        Ok(())
    }

    /// True when the connection can go back to the pool as it is.
    pub fn reusable(&self) -> bool {
        !self.timed_out && !self.ended && self.client.as_ref().is_some_and(|c| !c.is_closed())
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        let client = self.client.take();
        let io = self.io.take();
        let runtime = self.runtime.take();
        if !self.belongs_here() {
            // Inherited: the socket is the parent's, and so are the runtime's own descriptors
            // (its epoll and wake-up ones). Leak it all rather than send Terminate on it or
            // wake the parent's runtime; the prepared statements too (dropping one queues a
            // message to close it).
            std::mem::forget(std::mem::take(&mut self.statements));
            std::mem::forget(client);
            std::mem::forget(io);
            std::mem::forget(runtime);
            return;
        }
        // Without its client, the connection sends Terminate and ends (at once: the message
        // only fills the socket's buffer). After a round trip that went unanswered, the socket
        // is simply closed.
        drop(client);
        if let (Some(mut io), Some(runtime)) = (io, runtime) {
            if !self.timed_out && !self.ended {
                let ended = &mut self.ended;
                runtime.block_on(async {
                    let mut sleep = pin!(tokio::time::sleep(CLOSE_WAIT));
                    std::future::poll_fn(|cx| {
                        if drive(&mut io, ended, cx).is_err() || *ended {
                            return Poll::Ready(());
                        }
                        sleep.as_mut().poll(cx)
                    })
                    .await
                });
            }
            // The socket is deregistered from the runtime's poller before the poller goes.
            drop(io);
            drop(runtime);
        }
    }
}
