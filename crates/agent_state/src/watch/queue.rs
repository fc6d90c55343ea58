//! Where a watch's events wait for its reader: a bounded queue with a readiness descriptor for
//! event loops, or a callback run on the watcher thread.
//!
//! The queue is bounded by `max_pending`: an event that would pass it drops every queued event
//! of its agent (and itself), and the agent is resynchronised instead (one
//! [`WatchKind::Resync`](super::WatchKind::Resync) of its current state, which the watcher reads
//! and queues). A reader that keeps a copy from the events stays right, and memory stays bounded
//! by `max_pending` plus one event per agent.

use std::collections::{HashSet, VecDeque};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use super::types::WatchEvent;
use crate::error::{Error, Result};

/// The queue of a watch read with `next` (see [`super::Watch::next`]).
pub(super) struct Queue {
    state: Mutex<QueueState>,
    ready: Condvar,
    /// A socket pair: `reader` is readable while events are queued (one byte written when the
    /// queue becomes non-empty, drained when it empties). A pair, not an eventfd, so that no
    /// `unsafe` is needed outside the C boundary.
    reader: UnixStream,
    writer: UnixStream,
    max_pending: usize,
}

pub(super) struct QueueState {
    events: VecDeque<WatchEvent>,
    /// The watch is closed: `next` says so.
    pub closed: bool,
    /// The watch failed for good: `next` returns this once, then says closed.
    pub failure: Option<Error>,
    /// The byte that makes `reader` readable was written and not drained.
    signalled: bool,
    /// The tasks waiting in [`Queue::poll_take`], woken (and forgotten) when an event is
    /// queued or the queue ends.
    wakers: Vec<Waker>,
}

impl Queue {
    pub(super) fn new(max_pending: usize) -> Result<Queue> {
        let (reader, writer) = UnixStream::pair().map_err(|e| {
            Error::Storage(format!("cannot create a watch's descriptor: {e}").into())
        })?;
        for s in [&reader, &writer] {
            s.set_nonblocking(true).map_err(|e| {
                Error::Storage(format!("cannot configure a watch's descriptor: {e}").into())
            })?;
        }
        Ok(Queue {
            state: Mutex::new(QueueState {
                events: VecDeque::new(),
                closed: false,
                failure: None,
                signalled: false,
                wakers: Vec::new(),
            }),
            ready: Condvar::new(),
            reader,
            writer,
            max_pending,
        })
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The descriptor readable while events are queued.
    pub(super) fn fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.reader.as_raw_fd()
    }

    /// The number of events queued now.
    pub(super) fn len(&self) -> usize {
        self.lock().events.len()
    }

    /// Queues `events` (of any agents, in the order given) and returns the agents whose events
    /// were dropped because the queue was full: the caller resynchronises them.
    pub(super) fn push(&self, events: Vec<WatchEvent>) -> HashSet<String> {
        let mut overflowed = HashSet::new();
        let mut state = self.lock();
        if state.closed {
            return overflowed;
        }
        for event in events {
            if overflowed.contains(&event.agent_id) {
                continue;
            }
            if state.events.len() >= self.max_pending {
                state.events.retain(|e| e.agent_id != event.agent_id);
                overflowed.insert(event.agent_id);
                continue;
            }
            state.events.push_back(event);
        }
        self.signal(&mut state);
        self.wake_readers(state);
        overflowed
    }

    /// Queues resynchronisations, which pass the bound (one per agent at most: memory stays
    /// bounded by the agents watched).
    pub(super) fn push_unbounded(&self, events: Vec<WatchEvent>) {
        let mut state = self.lock();
        if state.closed {
            return;
        }
        state.events.extend(events);
        self.signal(&mut state);
        self.wake_readers(state);
    }

    fn signal(&self, state: &mut QueueState) {
        if !state.events.is_empty() && !state.signalled {
            state.signalled = (&self.writer).write(&[1]).is_ok();
        }
    }

    /// Takes the next event, waiting until `deadline` (`None`: until one comes or the watch
    /// closes). A cancel token bound to the thread ends the wait within its poll.
    pub(super) fn take(&self, deadline: Option<Instant>) -> Result<Option<WatchEvent>> {
        let token = crate::cancel::current();
        let mut state = self.lock();
        loop {
            if let Some(taken) = self.pop(&mut state) {
                return taken.map(Some);
            }
            if token.as_ref().is_some_and(|t| t.is_cancelled()) {
                return Err(crate::cancel::cancelled("while waiting for a change"));
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                return Ok(None);
            }
            let mut wait = deadline.map_or(Duration::from_secs(3600), |d| d - now);
            if token.is_some() {
                wait = wait.min(crate::cancel::POLL);
            }
            state = self
                .ready
                .wait_timeout(state, wait)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// The next event, or the end (the failure once, then [`Error::Closed`]); `None` while the
    /// queue is open and empty.
    fn pop(&self, state: &mut QueueState) -> Option<Result<WatchEvent>> {
        if let Some(e) = state.failure.take() {
            state.closed = true;
            return Some(Err(e));
        }
        if state.closed {
            return Some(Err(Error::Closed));
        }
        let event = state.events.pop_front()?;
        if state.events.is_empty() && state.signalled {
            let mut drain = [0u8; 16];
            while matches!((&self.reader).read(&mut drain), Ok(n) if n > 0) {}
            state.signalled = false;
        }
        Some(Ok(event))
    }

    /// Takes the next event if one is queued (or the end, as [`Queue::pop`]); else registers
    /// the task's waker, woken by the next push or by the end, and is pending.
    pub(super) fn poll_take(&self, cx: &mut Context<'_>) -> Poll<Result<WatchEvent>> {
        let mut state = self.lock();
        if let Some(taken) = self.pop(&mut state) {
            return Poll::Ready(taken);
        }
        let waker = cx.waker();
        if !state.wakers.iter().any(|w| w.will_wake(waker)) {
            state.wakers.push(waker.clone());
        }
        Poll::Pending
    }

    /// Ends the queue: queued events are dropped, a waiting `take` returns. With `failure`, the
    /// next `take` returns it once.
    pub(super) fn end(&self, failure: Option<Error>) {
        let mut state = self.lock();
        if state.closed {
            return;
        }
        state.events.clear();
        if failure.is_some() {
            state.failure = failure;
        } else {
            state.closed = true;
        }
        // Readable, so that an event loop waiting on the descriptor wakes and sees the end.
        if !state.signalled {
            state.signalled = (&self.writer).write(&[1]).is_ok();
        }
        self.wake_readers(state);
    }

    /// Releases the queue's lock and wakes every reader waiting: the threads in `take` and
    /// the tasks in `poll_take` (each waker once; they register again if they still wait).
    fn wake_readers(&self, mut state: MutexGuard<'_, QueueState>) {
        let wakers = std::mem::take(&mut state.wakers);
        drop(state);
        self.ready.notify_all();
        wakers.into_iter().for_each(Waker::wake);
    }
}
