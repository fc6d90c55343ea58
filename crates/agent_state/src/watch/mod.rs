//! Watching a store: the changes of any of its agents (chosen by id or by prefix), committed by
//! any process, pushed to a subscriber as they commit.
//!
//! ```no_run
//! use std::path::Path;
//! use agent_state::{OpenOptions, Selector, Watch, WatchOptions};
//!
//! let watch = Watch::open(
//!     Path::new("agents.db"),
//!     &OpenOptions::default(),
//!     Selector::Prefix("support-".into()),
//!     WatchOptions::default(),
//! )?;
//! for change in &watch {
//!     let change = change?;
//!     println!("{} v{} {}", change.agent_id, change.version, change.kind.name());
//! }
//! # Ok::<(), agent_state::Error>(())
//! ```
//!
//! # What is delivered
//!
//! - Per agent, every change in commit order, versions strictly increasing within an
//!   incarnation, none twice, none missed: a change the change log no longer holds (pruned, or
//!   the log is off for that agent) becomes one [`WatchKind::Resync`] carrying the current
//!   state, which replaces a copy kept from the events. A deletion is one
//!   [`WatchKind::Deleted`]; a later first write starts the agent again (its first event
//!   carries its state).
//! - Across agents, no order is promised.
//! - Commits of any process: other processes, other handles of this one, the CLI.
//! - Every change committed after [`Watch::open`] returns; with [`WatchOptions::since`], also
//!   those after a resume point (caught up from the change log).
//!
//! # Cost
//!
//! One watcher thread per store location per process, whatever the number of watches and
//! agents; it exits with the store's last watch. It learns which agents changed from the
//! backend's commit signal (on SQLite, shared memory next to the store: no query while
//! nothing is committed; on PostgreSQL, the server's notifications, or with
//! [`WatchOptions::poll_interval`] one store-wide query per interval), reads the changed
//! agents' logs, and, as a safety net for commits it was not told of, compares every watched
//! agent's version once per [`WatchOptions::rescan_interval`] (one store-wide query).
//!
//! # Threads and processes
//!
//! A [`Watch`] is `Send + Sync`: any thread may call [`Watch::next`] (each event goes to one
//! caller) and [`Watch::close`]. A watch belongs to the process that opened it: after
//! `fork()`, the child's copy has no watcher ([`Watch::next`] there is
//! [`Error::InvalidArgument`]); the child opens its own.

mod catchup;
mod queue;
mod shared;
mod types;
mod watcher;

use std::path::Path;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use self::queue::Queue;
use self::shared::{Callback, Request, Shared, Sink};
pub use self::types::{Selector, WatchEvent, WatchKind, WatchOptions};
use self::watcher::Store;
use crate::error::{Error, Result};
use crate::options::OpenOptions;

/// A subscription to the changes of agents of one store. `Send + Sync`; share it by `Arc`.
/// Dropping it closes it.
pub struct Watch {
    shared: Arc<Shared>,
    store: Arc<Store>,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch").finish_non_exhaustive()
    }
}

impl Watch {
    /// Starts watching the store at `location` (a SQLite file path or a `postgres://` URI, as
    /// [`Agent::open`](crate::Agent::open) takes it) with the connection options of `options`
    /// (its `agent_id` and the agent's own options are not used). Returns once the start
    /// versions are read: every change committed after it returns is delivered, queued for
    /// [`Watch::next`].
    ///
    /// Errors: [`Error::InvalidArgument`] (a bad id or prefix, `max_pending` 0, an in-memory
    /// store), [`Error::Storage`] (no store there: watching never creates one),
    /// [`Error::Unavailable`] / [`Error::Auth`] (a server), [`Error::Busy`].
    pub fn open(
        location: &Path,
        options: &OpenOptions,
        selector: Selector,
        watch: WatchOptions,
    ) -> Result<Watch> {
        let queue = Queue::new(watch.max_pending)?;
        Self::start(location, options, selector, watch, Sink::Queue(queue))
    }

    /// As [`Watch::open`], but each event is handed to `callback` on the store's watcher
    /// thread instead of a queue (no [`Watch::next`], no [`Watch::ready_fd`]). The callback
    /// must not block long: it delays every watch of that store in this process, and must not
    /// call [`Watch::add`] (which waits for that thread). A panic in it is caught: the watch is
    /// then closed with [`Error::Hook`], which [`Watch::error`] and [`Watch::next`] report.
    pub fn with_callback(
        location: &Path,
        options: &OpenOptions,
        selector: Selector,
        watch: WatchOptions,
        callback: Box<dyn Fn(&WatchEvent) + Send + Sync>,
    ) -> Result<Watch> {
        let callback: Callback = callback;
        let sink = Sink::Callback {
            callback,
            running: std::sync::Mutex::new(()),
        };
        Self::start(location, options, selector, watch, sink)
    }

    fn start(
        location: &Path,
        options: &OpenOptions,
        selector: Selector,
        watch: WatchOptions,
        sink: Sink,
    ) -> Result<Watch> {
        selector.check()?;
        watch.check()?;
        if let Some(id) = watch.since.keys().find(|id| !selector.follows(id)) {
            // An id watch grows with `add`; `since` names agents the selector follows.
            return Err(Error::InvalidArgument(format!(
                "since names {id:?}, which the watch's selector does not follow"
            )));
        }
        let generation = crate::work::fork_generation();
        let shared = Arc::new(Shared::new(
            selector,
            sink,
            watch.states,
            watch.rescan_interval,
            generation,
        ));
        let store = watcher::attach(
            location,
            &options.store_options(),
            watch.poll_interval,
            Arc::clone(&shared),
        )?;
        let watch_handle = Watch {
            shared: Arc::clone(&shared),
            store: Arc::clone(&store),
        };
        shared.ask(Request::Start(watch.since), || store.wake())?;
        Ok(watch_handle)
    }

    fn check_process(&self) -> Result<()> {
        if crate::work::fork_generation() != self.shared.generation {
            return Err(Error::InvalidArgument(
                "this watch was opened by the parent process; a watch belongs to the process \
                 that opened it (open another in this one)"
                    .to_string(),
            ));
        }
        Ok(())
    }

    fn queue(&self) -> Result<&Queue> {
        match &self.shared.sink {
            Sink::Queue(q) => Ok(q),
            Sink::Callback { .. } => Err(self.shared.failure().unwrap_or_else(|| {
                Error::InvalidArgument(
                    "this watch hands its events to its callback: it has no queue to read"
                        .to_string(),
                )
            })),
        }
    }

    /// The next event, waiting up to `timeout` (`None`: until one comes or the watch closes).
    /// `Ok(None)`: timed out. [`Error::Closed`] once the watch is closed (queued events are
    /// dropped by `close`); the failure that ended the watch, once, if one did (a failure that
    /// may pass, like a server restarting, is retried by the watcher, which catches up after
    /// it, and never reported). Honours the calling thread's cancel token
    /// ([`Error::Cancelled`]). Any thread may call it.
    pub fn next(&self, timeout: Option<Duration>) -> Result<Option<WatchEvent>> {
        self.check_process()?;
        let deadline = timeout.map(|t| Instant::now() + t);
        self.queue()?.take(deadline)
    }

    /// The next event if one is queued, without waiting (`Ok(None)`: none).
    pub fn try_next(&self) -> Result<Option<WatchEvent>> {
        self.check_process()?;
        self.queue()?.take(Some(Instant::now()))
    }

    /// The next event, for async code: `Some(Ok(event))`, `None` once the watch is closed (as
    /// the iteration ends), or the failure that ended it, once. No thread waits: the future
    /// completes by its waker, on any executor (tokio, async-std, smol). Cancel-safe: a future
    /// dropped before it completes takes no event (the next call gets it). For a time limit,
    /// wrap it (`tokio::time::timeout`). Several tasks may wait on one watch; each event goes
    /// to one of them. A callback watch, or a copy of a watch after `fork()`, answers
    /// [`Error::InvalidArgument`].
    ///
    /// ```
    /// use agent_state::{Agent, OpenOptions, Selector, Watch, WatchOptions};
    ///
    /// # let dir = std::env::temp_dir().join(format!("agent_state_doc_recv_{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// let path = dir.join("fleet.db");
    /// let agent = Agent::builder()
    ///     .agent_id("support/1")
    ///     .change_log(agent_state::ChangeLog::KeepLast(100))
    ///     .open(&path)?;
    /// let watch = Watch::open(
    ///     &path,
    ///     &OpenOptions::default(),
    ///     Selector::Prefix("support/".into()),
    ///     WatchOptions::default(),
    /// )?;
    /// # let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    /// # runtime.block_on(async {
    /// agent.set_state(br#"{"turns": 1}"#)?;
    /// let change = watch.recv().await.expect("open")?;
    /// assert_eq!((change.agent_id.as_str(), change.version), ("support/1", 1));
    /// watch.close();
    /// assert!(watch.recv().await.is_none());
    /// # Ok::<(), agent_state::Error>(())
    /// # })?;
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), agent_state::Error>(())
    /// ```
    pub async fn recv(&self) -> Option<Result<WatchEvent>> {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// [`Watch::recv`] as a poll function, to make a `Stream` of the watch
    /// (`futures::stream::poll_fn(|cx| watch.poll_recv(cx))`): `Ready(None)` once closed.
    pub fn poll_recv(&self, cx: &mut Context<'_>) -> Poll<Option<Result<WatchEvent>>> {
        let queue = match self.check_process().and_then(|()| self.queue()) {
            Ok(queue) => queue,
            Err(e) => return Poll::Ready(Some(Err(e))),
        };
        match queue.poll_take(cx) {
            Poll::Ready(Ok(event)) => Poll::Ready(Some(Ok(event))),
            Poll::Ready(Err(Error::Closed)) => Poll::Ready(None),
            Poll::Ready(Err(e)) => Poll::Ready(Some(Err(e))),
            Poll::Pending => Poll::Pending,
        }
    }

    /// How many events wait in the queue now (at most `max_pending` plus one resync per agent);
    /// 0 for a callback watch. A reader's backlog, for metrics or to decide to catch up by
    /// reading the states instead; another thread may change it at any moment.
    pub fn pending(&self) -> usize {
        match &self.shared.sink {
            Sink::Queue(q) => q.len(),
            _ => 0,
        }
    }

    /// A file descriptor readable while events are queued (and once the watch has ended), for
    /// event loops (Python's `add_reader`, Go's netpoller, Node). Owned by the watch, valid
    /// until it is dropped: never read it or close it; call [`Watch::try_next`] until `None`
    /// when it is readable. `None` for a callback watch.
    pub fn ready_fd(&self) -> Option<std::os::fd::RawFd> {
        match &self.shared.sink {
            Sink::Queue(q) => Some(q.fd()),
            Sink::Callback { .. } => None,
        }
    }

    /// Follows one more agent, from after version `since` (`None`: from its current version,
    /// read before this returns). Only for a [`Selector::Ids`] watch
    /// ([`Error::InvalidArgument`] on a prefix watch, or for a bad id). Waits for the watcher
    /// to read its version; do not call it from the watch's own callback.
    pub fn add(&self, id: &str, since: Option<u64>) -> Result<()> {
        self.check_process()?;
        types::check_id(id, "an agent id")?;
        if matches!(self.shared.following().selector, Selector::Prefix(_)) {
            return Err(Error::InvalidArgument(
                "add follows one more agent of an id watch; a prefix watch follows every \
                 agent its prefix matches"
                    .to_string(),
            ));
        }
        if self.shared.ended() {
            return Err(self.shared.failure().unwrap_or(Error::Closed));
        }
        let store = Arc::clone(&self.store);
        self.shared
            .ask(Request::Add(id.to_string(), since), || store.wake())
    }

    /// Stops following an agent (its events already queued stay queued). Only for a
    /// [`Selector::Ids`] watch; an id not followed is no error.
    pub fn remove(&self, id: &str) -> Result<()> {
        self.check_process()?;
        let mut following = self.shared.following();
        let Selector::Ids(ids) = &mut following.selector else {
            return Err(Error::InvalidArgument(
                "remove stops following an agent of an id watch; a prefix watch follows every \
                 agent its prefix matches"
                    .to_string(),
            ));
        };
        ids.retain(|i| i != id);
        following.known.remove(id);
        Ok(())
    }

    /// The failure that ended the watch, if one did (a callback's panic, a store that can no
    /// longer be read); `None` while it runs or after an ordinary close.
    pub fn error(&self) -> Option<Error> {
        self.shared.failure()
    }

    /// Closes the watch: queued events are dropped, a [`Watch::next`] waiting returns
    /// [`Error::Closed`], a callback running finishes first (unless `close` is called from it).
    /// Idempotent.
    pub fn close(&self) {
        self.shared.end(None);
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.close();
    }
}

/// Blocking iteration: each item is [`Watch::next`] without a timeout; the iteration ends
/// (`None`) once the watch is closed, after yielding the failure that ended it, if any.
impl Iterator for &Watch {
    type Item = Result<WatchEvent>;

    fn next(&mut self) -> Option<Result<WatchEvent>> {
        match Watch::next(self, None) {
            Ok(Some(event)) => Some(Ok(event)),
            Ok(None) | Err(Error::Closed) => None,
            Err(e) => Some(Err(e)),
        }
    }
}
