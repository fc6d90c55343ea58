//! One watch as its reader and the store's watcher thread share it: what it follows and what it
//! last delivered of each agent ([`Following`]), the requests the watcher has yet to apply
//! (the start, `add`), and where its events go ([`Sink`]).

use std::cell::Cell;
use std::collections::{HashMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

use super::catchup::Known;
use super::queue::Queue;
use super::types::{Selector, WatchEvent};
use crate::error::{Error, Result};

/// A callback given each event on the watcher thread.
pub(super) type Callback = Box<dyn Fn(&WatchEvent) + Send + Sync>;

thread_local! {
    /// Set while this thread runs a watch's callback: a `close` from inside it must not wait
    /// for the callback to finish.
    static IN_CALLBACK: Cell<bool> = const { Cell::new(false) };
}

/// What the watcher has yet to do for a watch, in the order asked.
#[derive(Debug)]
pub(super) enum Request {
    /// Read the start versions (and catch up the agents of `since`).
    Start(HashMap<String, u64>),
    /// Follow one more agent, from `since` (`None`: from its current version).
    Add(String, Option<u64>),
}

/// What a watch follows, and what it last delivered of each agent.
pub(super) struct Following {
    pub selector: Selector,
    pub known: HashMap<String, Known>,
    /// The watch's start was applied (its agents' versions at the opening read into `known`).
    /// The watcher neither rescans nor catches up a watch before: it sees the watch from the
    /// moment it is attached, which comes before its start is asked, and would take each of
    /// its agents for new, delivering changes committed before the opening.
    pub started: bool,
    pub requests: VecDeque<(u64, Request)>,
    /// Requests are numbered from 1; the last one asked and the last one applied.
    pub asked: u64,
    pub applied: u64,
    /// The failure of the last request applied, for the caller waiting for it.
    pub refused: Option<(u64, Error)>,
}

/// Where a watch's events go.
pub(super) enum Sink {
    Queue(Queue),
    Callback {
        callback: Callback,
        /// Held while the callback runs: `close` waits for it.
        running: Mutex<()>,
    },
}

/// One watch, shared by its [`Watch`](super::Watch) and the store's watcher thread.
pub(super) struct Shared {
    pub following: Mutex<Following>,
    /// Signalled when a request was applied.
    pub applied: Condvar,
    pub sink: Sink,
    /// Keep each agent's state and put it in every event.
    pub states: bool,
    /// Its safety-net rescan interval ([`WatchOptions::rescan_interval`](super::WatchOptions)):
    /// the watcher rescans at the shortest of its watches'.
    pub rescan: Duration,
    /// The fork generation the watch was opened in: it belongs to that process.
    pub generation: u64,
    ended: AtomicBool,
    /// Why the watch ended, when it failed.
    failure: Mutex<Option<Error>>,
}

impl Shared {
    pub(super) fn new(
        selector: Selector,
        sink: Sink,
        states: bool,
        rescan: Duration,
        generation: u64,
    ) -> Shared {
        Shared {
            following: Mutex::new(Following {
                selector,
                known: HashMap::new(),
                started: false,
                requests: VecDeque::new(),
                asked: 0,
                applied: 0,
                refused: None,
            }),
            applied: Condvar::new(),
            sink,
            states,
            rescan,
            generation,
            ended: AtomicBool::new(false),
            failure: Mutex::new(None),
        }
    }

    pub(super) fn following(&self) -> MutexGuard<'_, Following> {
        self.following.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// True once closed or failed: the watcher drops it.
    pub(super) fn ended(&self) -> bool {
        self.ended.load(Ordering::Acquire)
    }

    /// The failure that ended the watch, if one did.
    pub(super) fn failure(&self) -> Option<Error> {
        self.failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Asks the watcher for `request` and waits until it was applied; its failure, if any.
    /// `wake` tells the watcher there is work.
    pub(super) fn ask(&self, request: Request, wake: impl FnOnce()) -> Result<()> {
        let mut following = self.following();
        following.asked += 1;
        let ticket = following.asked;
        following.requests.push_back((ticket, request));
        wake();
        loop {
            if following.applied >= ticket {
                return match following.refused.take() {
                    Some((t, e)) if t == ticket => Err(e),
                    other => {
                        following.refused = other;
                        Ok(())
                    }
                };
            }
            if self.ended() {
                return Err(self.failure().unwrap_or(Error::Closed));
            }
            following = self
                .applied
                .wait_timeout(following, crate::cancel::POLL * 4)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Ends the watch: closed (`failure` `None`) or failed. Queued events are dropped; a
    /// waiting reader returns. Waits for a running callback to finish, unless called from it.
    pub(super) fn end(&self, failure: Option<Error>) {
        if let Some(e) = &failure {
            let mut slot = self.failure.lock().unwrap_or_else(|p| p.into_inner());
            if slot.is_none() && !self.ended() {
                *slot = Some(e.clone());
            }
        }
        self.ended.store(true, Ordering::Release);
        self.applied.notify_all();
        match &self.sink {
            Sink::Queue(queue) => queue.end(failure),
            Sink::Callback { running, .. } => {
                if !IN_CALLBACK.with(Cell::get) {
                    drop(running.lock().unwrap_or_else(|p| p.into_inner()));
                }
            }
        }
    }

    /// Hands `events` to the reader. Returns the agents whose events the queue dropped (it was
    /// full): the caller resynchronises them with [`Shared::deliver_resyncs`].
    pub(super) fn deliver(&self, events: Vec<WatchEvent>) -> Vec<String> {
        if events.is_empty() || self.ended() {
            return Vec::new();
        }
        match &self.sink {
            Sink::Queue(queue) => queue.push(events).into_iter().collect(),
            Sink::Callback { callback, running } => {
                for event in events {
                    let _turn = running.lock().unwrap_or_else(|p| p.into_inner());
                    if self.ended() {
                        break;
                    }
                    IN_CALLBACK.with(|c| c.set(true));
                    let outcome = catch_unwind(AssertUnwindSafe(|| callback(&event)));
                    IN_CALLBACK.with(|c| c.set(false));
                    if outcome.is_err() {
                        drop(_turn);
                        self.end(Some(Error::Hook(
                            "the watch's callback panicked; the watch was closed".to_string(),
                        )));
                        break;
                    }
                }
                Vec::new()
            }
        }
    }

    /// Queues resynchronisations past the queue's bound (see [`Queue::push_unbounded`]).
    pub(super) fn deliver_resyncs(&self, events: Vec<WatchEvent>) {
        match &self.sink {
            Sink::Queue(queue) => queue.push_unbounded(events),
            Sink::Callback { .. } => {
                self.deliver(events);
            }
        }
    }
}
