//! This process's connections to one PostgreSQL server: a pool shared by every handle opened
//! with the same URI, written here (a `Mutex` and a `Condvar`) because the library starts no
//! thread, and the usual pools start some.
//!
//! A connection is a `tokio_postgres` client and its connection (the socket's I/O), on a
//! current-thread runtime of its own (a poller and a timer), driven only while a call waits
//! for its answer (`Runtime::block_on`, on the calling thread: no thread is started), as the
//! synchronous `postgres` client does.
//!
//! Two bounds, each for its own reason:
//! - `busy_timeout_ms` bounds waiting for what others hold: the session's `lock_timeout` (a
//!   row or table lock held by another connection: SQLSTATE 55P03, [`Error::Busy`], the
//!   connection still usable) and a checkout from this pool. It does not bound how long the
//!   server takes to run a statement nobody contends: with `busy_timeout_ms` 0 a 256 KiB
//!   write on a loaded machine must still succeed. (No `statement_timeout` is set.)
//! - `server_timeout_ms` bounds a server that does not answer at all (frozen, its host hung,
//!   the network partitioned: no server-side timeout can fire there). The client gives a
//!   round trip `busy_timeout_ms + server_timeout_ms` on its own clock (the lock wait it may
//!   include, then the answer), and a connection attempt `server_timeout_ms`; past that the
//!   call fails with [`Error::Unavailable`] and the connection, in a state no one can tell, is
//!   discarded. (The synchronous `postgres` client has no per-call timeout.)
//!
//! A connection remembers the process that opened it. After `fork()`, the child must never use
//! or close what it inherited: the socket is shared with the parent, and even closing a client
//! the ordinary way sends a Terminate message on it. Inherited connections are forgotten
//! (`mem::forget`), never dropped, and the child connects anew.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Condvar, LazyLock, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use std::net::{IpAddr, ToSocketAddrs};

use std::pin::pin;
use std::task::Poll;

use tokio::runtime::Runtime;
use tokio_postgres::config::Host;
use tokio_postgres::tls::NoTlsStream;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Config, NoTls, Row, Socket, Statement, ToStatement};

use super::error::{PgError, PgResult};
use crate::error::{Error, Result};
use crate::store::Synchronous;

/// Which process this is, as far as connections go: the fork generation, which changes in a
/// child right after `fork()` (one relaxed load, where `getpid` is a system call on every call).
pub(super) fn process() -> u64 {
    crate::store::process::generation()
}

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
    /// The process that opened it.
    pid: u64,
    /// The session settings last applied (`None`: the server's defaults).
    settings: Option<Settings>,
    statements: HashMap<&'static str, Statement>,
    /// True once it has served a checkout (an idle connection may have died meanwhile).
    pub reused: bool,
    /// When it was last returned to the pool.
    idle_since: Instant,
}

/// How long a connection sits idle before a checkout checks that the server still has it.
const PROBE_AFTER_IDLE: Duration = Duration::from_secs(1);

type Io = tokio_postgres::Connection<Socket, NoTlsStream>;

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
    pub fn belongs_here(&self) -> bool {
        self.pid == process()
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
    fn reusable(&self) -> bool {
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

/// What the pool's lock guards.
struct State {
    idle: Vec<Conn>,
    /// Connections of this process: idle, checked out, or being opened.
    open: usize,
    /// The most connections at once: the largest `max_connections` any open asked for.
    capacity: usize,
    /// The process `open` counts for.
    pid: u64,
    /// The schema was checked by a connection of this pool (once per process is enough).
    pub schema_checked: bool,
    /// Threads waiting in `checkout` for a connection (a checkin wakes one only then).
    waiting: usize,
}

/// This process's connections to one server URI.
pub(super) struct Pool {
    /// The URI without its password, for messages.
    pub shown: String,
    config: Config,
    state: Mutex<State>,
    freed: Condvar,
}

static POOLS: LazyLock<Mutex<HashMap<String, Weak<Pool>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Pool {
    /// The pool for `uri`, shared by every handle of this process that opened it; its
    /// capacity grows to `max_connections` when that is more than it had.
    pub fn get(uri: &str, config: Config, max_connections: usize) -> Arc<Pool> {
        crate::store::process::watch();
        let mut pools = lock(&POOLS);
        pools.retain(|_, p| p.strong_count() > 0);
        if let Some(pool) = pools.get(uri).and_then(Weak::upgrade) {
            let mut state = lock(&pool.state);
            state.capacity = state.capacity.max(max_connections);
            drop(state);
            return pool;
        }
        let pool = Arc::new(Pool {
            shown: redact(uri),
            config,
            state: Mutex::new(State {
                idle: Vec::new(),
                open: 0,
                capacity: max_connections.max(1),
                pid: process(),
                schema_checked: false,
                waiting: 0,
            }),
            freed: Condvar::new(),
        });
        pools.insert(uri.to_string(), Arc::downgrade(&pool));
        pool
    }

    /// Forgets connections inherited from a parent process (in the pool's lock). True when
    /// there were counts of another process to drop.
    fn adopt(state: &mut State) -> bool {
        let now = process();
        if state.pid == now {
            return false;
        }
        for conn in state.idle.drain(..) {
            std::mem::forget(conn);
        }
        state.open = 0;
        state.pid = now;
        true
    }

    /// Drops counts inherited across `fork()` (the caller's own connection is its business).
    pub fn ensure_current(&self) -> bool {
        Self::adopt(&mut lock(&self.state))
    }

    pub fn schema_checked(&self) -> bool {
        lock(&self.state).schema_checked
    }

    pub fn set_schema_checked(&self) {
        lock(&self.state).schema_checked = true;
    }

    /// A connection: an idle one, a new one while fewer than the capacity are open (connected
    /// within `limits`), or the first one freed within `wait`; then [`Error::Busy`].
    pub fn checkout(&self, wait: Duration, limits: Limits) -> Result<Conn> {
        let deadline = Instant::now() + wait;
        let mut state = lock(&self.state);
        Self::adopt(&mut state);
        loop {
            if let Some(mut conn) = state.idle.pop() {
                conn.reused = true;
                return Ok(conn);
            }
            if state.open < state.capacity {
                state.open += 1;
                drop(state);
                return self.connect(limits).inspect_err(|_| {
                    let mut state = lock(&self.state);
                    if state.pid == process() {
                        state.open -= 1;
                    }
                    self.freed.notify_one();
                });
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(Error::Busy(format!(
                    "all {} connections of this process to the server are in use (option \
                     max_connections); waited {} ms (busy_timeout_ms)",
                    state.capacity,
                    wait.as_millis()
                )));
            }
            state.waiting += 1;
            state = self
                .freed
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
            state.waiting -= 1;
            Self::adopt(&mut state);
        }
    }

    /// A new connection, within `limits.connect` in all.
    fn connect(&self, limits: Limits) -> Result<Conn> {
        let whole = limits.connect;
        let deadline = Instant::now() + whole;
        let unavailable = |e: String| {
            Error::Unavailable(format!(
                "cannot connect to the PostgreSQL server {}: {e}",
                self.shown
            ))
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(|e| unavailable(format!("cannot set up the connection's I/O: {e}")))?;
        let mut config = self.config.clone();
        config.connect_timeout(whole);
        let mut last = None;
        for candidate in resolved(&config).map_err(unavailable)? {
            let left = deadline.saturating_duration_since(Instant::now());
            match runtime
                .block_on(async { tokio::time::timeout(left, candidate.connect(NoTls)).await })
            {
                Ok(Ok((client, io))) => {
                    return Ok(Conn {
                        client: Some(client),
                        io: Some(io),
                        runtime: Some(runtime),
                        ended: false,
                        limit: limits.round_trip,
                        timed_out: false,
                        pid: process(),
                        settings: None,
                        statements: HashMap::new(),
                        reused: false,
                        idle_since: Instant::now(),
                    });
                }
                Ok(Err(e)) => last = Some(super::error::describe(&e)),
                Err(_) => {
                    last = Some(format!(
                        "the server did not answer within server_timeout_ms ({} ms)",
                        whole.as_millis()
                    ));
                    break;
                }
            }
        }
        Err(unavailable(
            last.unwrap_or_else(|| "no address to connect to".into()),
        ))
    }

    /// Returns a connection that is idle (no transaction open) and healthy.
    pub fn checkin(&self, mut conn: Conn) {
        conn.idle_since = Instant::now();
        let mut state = lock(&self.state);
        if !conn.belongs_here() || state.pid != conn.pid {
            drop(state);
            std::mem::forget(conn);
            return;
        }
        if !conn.reusable() {
            state.open -= 1;
        } else {
            state.idle.push(conn);
        }
        let waiting = state.waiting > 0;
        drop(state);
        if waiting {
            self.freed.notify_one();
        }
    }

    /// Drops a connection that is broken or in an unknown state. When it was `lost` (the
    /// server went away), the idle ones are dropped too: after a restart they are all dead,
    /// and each would fail one call.
    pub fn discard(&self, conn: Conn, lost: bool) {
        let mut state = lock(&self.state);
        if !conn.belongs_here() || state.pid != conn.pid {
            drop(state);
            std::mem::forget(conn);
            return;
        }
        state.open -= 1;
        let idle = if lost {
            std::mem::take(&mut state.idle)
        } else {
            Vec::new()
        };
        state.open -= idle.len();
        drop(state);
        self.freed.notify_all();
        drop(conn);
        drop(idle);
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // Conn::drop forgets inherited connections and closes this process's own.
        let state = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        state.idle.clear();
    }
}

/// The configurations to try in turn, with host names resolved here, on the calling thread:
/// the client would resolve them on a thread of its runtime's blocking pool, and the library
/// starts no thread. One host name: one configuration per address it resolves to (tried in
/// order, as the client would); several hosts: each at its first address (the client then
/// tries the hosts in order). Unix sockets and IP addresses need nothing.
fn resolved(config: &Config) -> std::result::Result<Vec<Config>, String> {
    let hosts = config.get_hosts();
    let named = |h: &Host| matches!(h, Host::Tcp(name) if name.parse::<IpAddr>().is_err());
    if !config.get_hostaddrs().is_empty() || !hosts.iter().any(named) {
        return Ok(vec![config.clone()]);
    }
    let ports = config.get_ports();
    let port = |i: usize| ports.get(i).or(ports.first()).copied().unwrap_or(5432);
    let lookup = |name: &str, port: u16| -> std::result::Result<Vec<IpAddr>, String> {
        let addrs: Vec<IpAddr> = (name, port)
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve {name}: {e}"))?
            .map(|a| a.ip())
            .collect();
        if addrs.is_empty() {
            return Err(format!("{name} resolves to no address"));
        }
        Ok(addrs)
    };
    if hosts.len() == 1 {
        let Host::Tcp(name) = &hosts[0] else {
            return Ok(vec![config.clone()]);
        };
        return Ok(lookup(name, port(0))?
            .into_iter()
            .map(|ip| {
                let mut c = config.clone();
                c.hostaddr(ip);
                c
            })
            .collect());
    }
    let mut c = config.clone();
    for (i, host) in hosts.iter().enumerate() {
        match host {
            Host::Tcp(name) => match name.parse::<IpAddr>() {
                Ok(ip) => c.hostaddr(ip),
                Err(_) => c.hostaddr(lookup(name, port(i))?[0]),
            },
            // A Unix socket among TCP hosts: hostaddr cannot be given for it; let the
            // client resolve (on its blocking pool) rather than refuse the URI.
            #[allow(unreachable_patterns)]
            _ => return Ok(vec![config.clone()]),
        };
    }
    Ok(vec![c])
}

/// `uri` with any password replaced by `***`, for messages.
pub(super) fn redact(uri: &str) -> String {
    let mut out = uri.to_string();
    // user:password@host
    if let Some((scheme, rest)) = uri.split_once("://") {
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        let authority = &rest[..end];
        if let Some(at) = authority.rfind('@') {
            if let Some(colon) = authority[..at].find(':') {
                out = format!("{scheme}://{}:***{}", &authority[..colon], &rest[at..]);
            }
        }
    }
    // ?password=... in the query string
    if let Some(q) = out.find('?') {
        let (head, query) = out.split_at(q + 1);
        let parts: Vec<String> = query
            .split('&')
            .map(|p| match p.split_once('=') {
                Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                _ => p.to_string(),
            })
            .collect();
        out = format!("{head}{}", parts.join("&"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn passwords_are_not_shown() {
        assert_eq!(
            redact("postgres://u:secret@h:5432/db?x=1"),
            "postgres://u:***@h:5432/db?x=1"
        );
        assert_eq!(
            redact("postgresql:///db?host=/tmp&password=secret&user=u"),
            "postgresql:///db?host=/tmp&password=***&user=u"
        );
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
    }
}
