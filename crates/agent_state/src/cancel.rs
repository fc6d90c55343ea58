//! Cancelling one call: a [`Cancel`] token, fired from any thread or by its deadline, that the
//! calls made inside [`Cancel::scope`] on this thread honour while they wait.
//!
//! What a call waits for, and so what a fired token ends (with [`Error::Cancelled`], nothing
//! written): another connection's write lock (SQLite's busy wait, a PostgreSQL row lock), its
//! turn on a shared SQLite connection, a connection of the PostgreSQL pool, connecting to the
//! server, and the server's answer to a statement before the commit. What it does not end: a
//! commit under way. A call that has sent its commit finishes it (or, on PostgreSQL, reports
//! the outcome unknown as it does without a token): a fired token never leaves a write half
//! known. Hooks after the commit run as usual.
//!
//! Why a token bound to the thread rather than an argument of every call: every call that can
//! wait honours it without a second version of each function, and a binding wraps any call the
//! same way (bind, call, unbind). Other calls, on the same handle from other threads or on other
//! handles, are not affected.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Waker;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// A cancel token: cheap to clone (clones are the same token), `Send` and `Sync`.
#[derive(Clone, Debug)]
pub struct Cancel(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    fired: AtomicBool,
    deadline: Option<Instant>,
    /// Waiters to wake when fired (PostgreSQL round trips waiting on their runtime).
    wakers: Mutex<Vec<Waker>>,
}

thread_local! {
    /// The token the calls of this thread honour ([`Cancel::scope`]).
    static CURRENT: RefCell<Option<Cancel>> = const { RefCell::new(None) };
}

impl Default for Cancel {
    fn default() -> Self {
        Cancel::new()
    }
}

impl Cancel {
    /// A token that fires only when [`Cancel::cancel`] is called.
    pub fn new() -> Cancel {
        Cancel::with_deadline_at(None)
    }

    /// A token that also fires by itself once `timeout` has passed from now.
    pub fn with_timeout(timeout: Duration) -> Cancel {
        Cancel::with_deadline_at(Instant::now().checked_add(timeout))
    }

    fn with_deadline_at(deadline: Option<Instant>) -> Cancel {
        Cancel(Arc::new(Inner {
            fired: AtomicBool::new(false),
            deadline,
            wakers: Mutex::new(Vec::new()),
        }))
    }

    /// Fires the token: the calls waiting under it return [`Error::Cancelled`] (within a few
    /// milliseconds), and later calls under it fail at once. Thread-safe; firing twice is
    /// harmless.
    pub fn cancel(&self) {
        self.0.fired.store(true, Ordering::SeqCst);
        let wakers = std::mem::take(&mut *self.0.wakers.lock().unwrap_or_else(|p| p.into_inner()));
        for w in wakers {
            w.wake();
        }
    }

    /// True once fired or past its deadline.
    pub fn is_cancelled(&self) -> bool {
        self.0.fired.load(Ordering::SeqCst) || self.0.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// Its deadline, if it has one.
    pub fn deadline(&self) -> Option<Instant> {
        self.0.deadline
    }

    /// Runs `f` with this token bound to the calling thread: the library's calls inside it
    /// honour the token. Scopes nest (the inner token applies; the outer one is bound again
    /// after).
    pub fn scope<T>(&self, f: impl FnOnce() -> T) -> T {
        let previous = bind(Some(self.clone()));
        struct Restore(Option<Cancel>);
        impl Drop for Restore {
            fn drop(&mut self) {
                bind(self.0.take());
            }
        }
        let _restore = Restore(previous);
        f()
    }

    /// Registers `waker` to be woken when the token is fired (a PostgreSQL round trip waiting
    /// on its runtime); wakes it at once if already fired.
    pub(crate) fn wake_on_cancel(&self, waker: &Waker) {
        let mut wakers = self.0.wakers.lock().unwrap_or_else(|p| p.into_inner());
        if self.0.fired.load(Ordering::SeqCst) {
            drop(wakers);
            waker.wake_by_ref();
            return;
        }
        if !wakers.iter().any(|w| w.will_wake(waker)) {
            wakers.push(waker.clone());
        }
    }
}

/// Binds `token` to the calling thread (`None`: none), returning the one bound before. For the
/// C boundary's `agent_cancel_bind`; Rust callers use [`Cancel::scope`].
pub fn bind(token: Option<Cancel>) -> Option<Cancel> {
    CURRENT.with(|c| std::mem::replace(&mut *c.borrow_mut(), token))
}

/// The token bound to this thread, if any.
pub(crate) fn current() -> Option<Cancel> {
    CURRENT.with(|c| c.borrow().clone())
}

/// [`Error::Cancelled`] when this thread's token has fired; `what` says what the call was
/// waiting for.
pub(crate) fn check(what: &str) -> Result<()> {
    // Borrowed, not cloned: a clone would write the token's count, shared with other threads.
    let fired = CURRENT.with(|c| c.borrow().as_ref().is_some_and(Cancel::is_cancelled));
    if fired {
        return Err(cancelled(what));
    }
    Ok(())
}

/// The error of a call cancelled while `what`.
pub(crate) fn cancelled(what: &str) -> Error {
    Error::Cancelled(format!(
        "the call was cancelled (its cancel token fired, or its deadline passed) {what}; nothing \
         was written"
    ))
}

/// How long a wait that polls the token sleeps at most between looks (the bound on how late
/// a cancel is noticed by a polling wait).
pub(crate) const POLL: Duration = Duration::from_millis(5);
