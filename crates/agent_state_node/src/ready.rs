//! The addon's one thread that waits on the ready descriptors of every open watch (the core's
//! [`agent_state::watch::Watch::ready_fd`], an eventfd readable while events are queued) and
//! wakes the JavaScript thread of a watch whose consumer waits for its next event.
//!
//! Why a thread of the addon: Node gives an addon no way to add a descriptor to libuv's loop
//! through Node-API, and a thread per watch (or a worker-pool job blocked in `next`) would make
//! the number of threads grow with the number of watches. One thread waiting in `epoll` (through
//! `mio`, which has a safe interface to it) serves every watch of the process: idle, it sleeps in
//! the kernel and costs nothing.
//!
//! The events themselves stay in the core's queue (bounded by `max_pending`, with its Resync of
//! an agent whose reader fell behind), and the JavaScript side takes them, a few at a time, only
//! when its consumer asks: a slow consumer cannot make memory grow.
//!
//! Thread-safety: [`register`] and dropping a [`Registration`] may be called from any thread.

use std::collections::HashMap;
use std::os::fd::RawFd;
use std::sync::{Mutex, OnceLock, PoisonError, Weak};

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Registry, Token};

/// What the thread calls when a watch's descriptor signals (on the thread itself: it must not
/// block; waking the JavaScript thread is a non-blocking thread-safe call).
pub trait Wake: Send + Sync {
    fn wake(&self);
}

struct Waiter {
    registry: Registry,
    targets: Mutex<Targets>,
}

#[derive(Default)]
struct Targets {
    next: usize,
    by_token: HashMap<usize, Weak<dyn Wake>>,
}

/// The thread and its registry, started at the first watch (or why it could not start).
static WAITER: OnceLock<std::result::Result<Waiter, String>> = OnceLock::new();

fn waiter() -> std::result::Result<&'static Waiter, String> {
    WAITER
        .get_or_init(|| {
            let poll =
                Poll::new().map_err(|e| format!("could not create an epoll instance: {e}"))?;
            let registry = poll
                .registry()
                .try_clone()
                .map_err(|e| format!("could not share the epoll instance: {e}"))?;
            std::thread::Builder::new()
                .name("agent-state-node-watch".to_string())
                .spawn(move || run(poll))
                .map_err(|e| format!("could not start the watches' thread: {e}"))?;
            Ok(Waiter {
                registry,
                targets: Mutex::default(),
            })
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// The thread's loop: wait for any descriptor, wake its watch. mio registers edge-triggered, so
/// a descriptor that stays readable (a consumer that does not take its events) wakes nothing
/// more until the core signals it again.
fn run(mut poll: Poll) {
    let mut events = Events::with_capacity(256);
    loop {
        if let Err(error) = poll.poll(&mut events, None) {
            if error.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            // Nothing to report to: the watches' consumers would wait for ever, so say why once.
            eprintln!("agent-state: the Node.js watches' thread stopped: {error}");
            return;
        }
        let Ok(waiter) = waiter() else { return };
        for event in events.iter() {
            let target = waiter
                .targets
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .by_token
                .get(&event.token().0)
                .and_then(Weak::upgrade);
            if let Some(target) = target {
                // A panic here would end the thread and every watch's wake-ups with it.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| target.wake()));
            }
        }
    }
}

/// A watch's descriptor, registered until this is dropped. Drop it before the descriptor is
/// closed (before the core watch closes), so that a number reused by another file is never
/// removed in its place.
pub struct Registration {
    token: usize,
    fd: RawFd,
}

/// Wakes `target` whenever `fd` signals, until the returned registration is dropped.
///
/// Errors: the thread or the registration could not be made (the message says why).
pub fn register(fd: RawFd, target: Weak<dyn Wake>) -> std::result::Result<Registration, String> {
    let waiter = waiter()?;
    let token = {
        let mut targets = waiter
            .targets
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        targets.next += 1;
        let token = targets.next;
        targets.by_token.insert(token, target);
        token
    };
    if let Err(error) =
        waiter
            .registry
            .register(&mut SourceFd(&fd), Token(token), Interest::READABLE)
    {
        forget(waiter, token);
        return Err(format!("could not wait on the watch's descriptor: {error}"));
    }
    Ok(Registration { token, fd })
}

fn forget(waiter: &Waiter, token: usize) {
    waiter
        .targets
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .by_token
        .remove(&token);
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Ok(waiter) = waiter() {
            // A descriptor closed already left epoll by itself: nothing to undo then.
            let _ = waiter.registry.deregister(&mut SourceFd(&self.fd));
            forget(waiter, self.token);
        }
    }
}
