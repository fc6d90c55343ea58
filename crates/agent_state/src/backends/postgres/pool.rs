//! This process's connections to one PostgreSQL server: a pool shared by every handle opened
//! with the same URI, written here (a `Mutex` and a `Condvar`) because the library starts no
//! thread, and the usual pools start some. What a connection is, and how each of its round
//! trips is bounded, is `super::conn`.
//!
//! A checkout waits for a free connection at most `busy_timeout_ms` ([`Error::Busy`] then).
//! The pool counts the connections of one process: in a child after `fork()`, the counts and
//! idle connections inherited from the parent are dropped (the connections forgotten, never
//! closed: their sockets are the parent's), and the child connects anew.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, LazyLock, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use super::conn::{Conn, Limits};
use super::hosts::Target;
use super::uri::redact;
use crate::cancel;
use crate::error::{Error, Result};
use crate::store::process;

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
    /// The host (its index among the URI's candidates) that took the last new connection:
    /// the next one starts there (see `super::hosts`).
    host: usize,
}

/// This process's connections to one server URI.
pub(super) struct Pool {
    /// The URI without its password, for messages.
    pub shown: String,
    target: Target,
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
    pub fn get(uri: &str, target: Target, max_connections: usize) -> Arc<Pool> {
        process::watch();
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
            target,
            state: Mutex::new(State {
                idle: Vec::new(),
                open: 0,
                capacity: max_connections.max(1),
                pid: process::generation(),
                schema_checked: false,
                waiting: 0,
                host: 0,
            }),
            freed: Condvar::new(),
        });
        pools.insert(uri.to_string(), Arc::downgrade(&pool));
        pool
    }

    /// Forgets connections inherited from a parent process (in the pool's lock). True when
    /// there were counts of another process to drop.
    fn adopt(state: &mut State) -> bool {
        let now = process::generation();
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
                let first = state.host;
                drop(state);
                return match self.target.connect(&self.shown, limits, first) {
                    Ok((conn, host)) => {
                        lock(&self.state).host = host;
                        Ok(conn)
                    }
                    Err(e) => {
                        let mut state = lock(&self.state);
                        if state.pid == process::generation() {
                            state.open -= 1;
                        }
                        drop(state);
                        self.freed.notify_one();
                        Err(e)
                    }
                };
            }
            cancel::check("while waiting for a connection of the pool")?;
            let now = Instant::now();
            if now >= deadline {
                return Err(Error::Busy(
                    format!(
                        "all {} connections of this process to the server are in use (option \
                     max_connections); waited {} ms (busy_timeout_ms)",
                        state.capacity,
                        wait.as_millis()
                    )
                    .into(),
                ));
            }
            state.waiting += 1;
            // In slices, so that a fired cancel token is seen within cancel::POLL.
            state = self
                .freed
                .wait_timeout(state, (deadline - now).min(cancel::POLL))
                .unwrap_or_else(|p| p.into_inner())
                .0;
            state.waiting -= 1;
            Self::adopt(&mut state);
        }
    }

    /// Returns a connection that is idle (no transaction open) and healthy.
    pub fn checkin(&self, mut conn: Conn) {
        conn.set_idle();
        let mut state = lock(&self.state);
        if !conn.belongs_here() || state.pid != conn.pid() {
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
        if !conn.belongs_here() || state.pid != conn.pid() {
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
