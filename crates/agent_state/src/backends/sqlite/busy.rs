//! SQLite's wait for another connection's lock, done here instead of by SQLite's own busy
//! handler (`sqlite3_busy_timeout`), so that a fired cancel token ([`crate::Cancel`]) ends it
//! within [`cancel::POLL`], and so that each call waits its own handle's `busy_timeout_ms` (a
//! connection is shared by the handles of one file).
//!
//! The handler is a plain function (SQLite's callback): what it needs of the call comes from
//! the calling thread, set by [`during`] around each call on the connection.

use std::cell::Cell;
use std::time::{Duration, Instant};

use crate::cancel;
use crate::error::{Error, Result};

thread_local! {
    /// The running call's `busy_timeout_ms`.
    static TIMEOUT: Cell<Duration> = const { Cell::new(Duration::from_secs(5)) };
    /// When the current lock wait began (SQLite counts the handler's calls per wait from 0).
    static STARTED: Cell<Option<Instant>> = const { Cell::new(None) };
    /// The current call's wait ended because its cancel token fired.
    static CANCELLED: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` (a call on the connection) with `timeout` as its lock wait; a lock wait it gives up
/// because the thread's cancel token fired is [`Error::Cancelled`] rather than busy.
pub(super) fn during<T>(timeout: Duration, f: impl FnOnce() -> Result<T>) -> Result<T> {
    let before = TIMEOUT.with(|t| t.replace(timeout));
    CANCELLED.with(|c| c.set(false));
    let result = f();
    TIMEOUT.with(|t| t.set(before));
    match result {
        Err(Error::Busy(_)) if CANCELLED.with(|c| c.replace(false)) => Err(cancel::cancelled(
            "while waiting for another connection's lock on the store",
        )),
        other => other,
    }
}

/// SQLite's busy handler: `true` to try the lock again (after a short sleep), `false` to give
/// up (SQLITE_BUSY). The sleeps grow as SQLite's own do, and never pass the call's timeout.
pub(super) fn handler(count: i32) -> bool {
    let now = Instant::now();
    if count == 0 {
        STARTED.with(|s| s.set(Some(now)));
    }
    let started = STARTED.with(|s| s.get()).unwrap_or(now);
    let token = cancel::current();
    if token.as_ref().is_some_and(|t| t.is_cancelled()) {
        CANCELLED.with(|c| c.set(true));
        return false;
    }
    let end = started + TIMEOUT.with(|t| t.get());
    if now >= end {
        return false;
    }
    // SQLite's schedule (1, 2, 5, 10, 15, 20, 25 ms, then 25, 50, 100), shorter with a token.
    const DELAYS: [u64; 12] = [1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100];
    let mut step = Duration::from_millis(DELAYS[(count.max(0) as usize).min(DELAYS.len() - 1)]);
    if token.is_some() {
        step = step.min(cancel::POLL);
    }
    std::thread::sleep(step.min(end - now));
    true
}
