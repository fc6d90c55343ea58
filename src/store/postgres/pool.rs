//! This process's connections to one PostgreSQL server: a pool shared by every handle opened
//! with the same URI, written here (a `Mutex` and a `Condvar`) because the library starts no
//! thread, and the usual pools start some.
//!
//! A connection remembers the process that opened it. After `fork()`, the child must never use
//! or close what it inherited: the socket is shared with the parent, and even closing a client
//! the ordinary way sends a Terminate message on it. Inherited connections are forgotten
//! (`mem::forget`), never dropped, and the child connects anew.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, LazyLock, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use std::net::{IpAddr, ToSocketAddrs};

use postgres::config::Host;
use postgres::{Client, Config, NoTls, Statement};

use crate::error::{Error, Result};
use crate::store::Synchronous;

/// The session settings one handle needs on the connection it uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Settings {
    pub synchronous: Synchronous,
    /// `statement_timeout` and `lock_timeout`, in milliseconds (at least 1: 0 means "none").
    pub timeout_ms: u64,
}

/// One connection, with what was applied to its session and its prepared statements.
pub(super) struct Conn {
    /// `None` only while being dropped.
    client: Option<Client>,
    /// The process that opened it.
    pid: u32,
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

impl Conn {
    pub fn client(&mut self) -> &mut Client {
        self.client
            .as_mut()
            .expect("a connection has its client until dropped")
    }

    pub fn belongs_here(&self) -> bool {
        self.pid == std::process::id()
    }

    /// False when the server closed the connection while it sat idle (a restart, an idle
    /// timeout). No round trip: the client's event loop turns once (at most a millisecond
    /// when there is nothing to read), which reads the end of a closed socket. Only worth it
    /// for a connection idle for a while: a dead one is also caught when used (see the
    /// retries in `super`).
    pub fn alive(&mut self) -> bool {
        use postgres::fallible_iterator::FallibleIterator;
        if self.idle_since.elapsed() < PROBE_AFTER_IDLE {
            return !self.client().is_closed();
        }
        let client = self.client();
        !client.is_closed()
            && client
                .notifications()
                .timeout_iter(Duration::from_micros(1))
                .next()
                .is_ok()
            && !client.is_closed()
    }

    /// The prepared statement for `sql` on this connection (prepared on first use).
    pub fn statement(
        &mut self,
        sql: &'static str,
    ) -> std::result::Result<Statement, postgres::Error> {
        if let Some(s) = self.statements.get(sql) {
            return Ok(s.clone());
        }
        let s = self.client().prepare(sql)?;
        self.statements.insert(sql, s.clone());
        Ok(s)
    }

    /// Applies `wanted` to the session, in one batch, unless it already is.
    pub fn apply(&mut self, wanted: Settings) -> std::result::Result<(), postgres::Error> {
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
        if before.map(|s| s.timeout_ms) != Some(wanted.timeout_ms) {
            let ms = wanted.timeout_ms.max(1);
            batch.push_str(&format!(
                "SET statement_timeout = {ms}; SET lock_timeout = {ms};"
            ));
        }
        // Unknown until the batch is through (a failure may have applied part of it).
        self.settings = None;
        self.client().batch_execute(&batch)?;
        self.settings = Some(wanted);
        Ok(())
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        if !self.belongs_here() {
            // Inherited: the socket is the parent's; leak the client rather than send
            // Terminate on it (its prepared statements then only queue messages no one sends).
            if let Some(client) = self.client.take() {
                std::mem::forget(client);
            }
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
    pid: u32,
    /// The schema was checked by a connection of this pool (once per process is enough).
    pub schema_checked: bool,
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
                pid: std::process::id(),
                schema_checked: false,
            }),
            freed: Condvar::new(),
        });
        pools.insert(uri.to_string(), Arc::downgrade(&pool));
        pool
    }

    /// Forgets connections inherited from a parent process (in the pool's lock). True when
    /// there were counts of another process to drop.
    fn adopt(state: &mut State) -> bool {
        let now = std::process::id();
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

    /// A connection: an idle one, a new one while fewer than the capacity are open, or the
    /// first one freed within `wait`; then [`Error::Busy`].
    pub fn checkout(&self, wait: Duration) -> Result<Conn> {
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
                return self.connect(wait).inspect_err(|_| {
                    let mut state = lock(&self.state);
                    if state.pid == std::process::id() {
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
            state = self
                .freed
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
            Self::adopt(&mut state);
        }
    }

    fn connect(&self, wait: Duration) -> Result<Conn> {
        let mut config = self.config.clone();
        config.connect_timeout(wait.max(Duration::from_secs(1)));
        let unavailable = |e: String| {
            Error::Unavailable(format!(
                "cannot connect to the PostgreSQL server {}: {e}",
                self.shown
            ))
        };
        let mut last = None;
        for candidate in resolved(&config).map_err(unavailable)? {
            match candidate.connect(NoTls) {
                Ok(client) => {
                    return Ok(Conn {
                        client: Some(client),
                        pid: std::process::id(),
                        settings: None,
                        statements: HashMap::new(),
                        reused: false,
                        idle_since: Instant::now(),
                    })
                }
                Err(e) => last = Some(super::error::describe(&e)),
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
        if conn.client.as_ref().is_none_or(Client::is_closed) {
            state.open -= 1;
        } else {
            state.idle.push(conn);
        }
        drop(state);
        self.freed.notify_one();
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
