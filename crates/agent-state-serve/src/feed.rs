//! The feeds of the watched agents: one watch of the store ([`agent_state::watch::Watch`]) for
//! the whole server, whose events a single dispatcher thread encodes once and broadcasts to the
//! streams of their agent.
//!
//! The library's watcher learns of commits from any process without a query per agent (on
//! SQLite a ring in shared memory beside the file, on PostgreSQL LISTEN/NOTIFY or one
//! store-wide query per `--watch-poll` interval), and reads the changes of the agents that
//! moved. So the server's threads and its idle work do not depend on how many agents are
//! watched: a watched agent costs an entry in the watch's list and a broadcast channel.
//!
//! An agent is followed from its first stream to its last: [`Feeds::get`] adds it to the watch
//! after the version its feed starts at, and the feed's drop removes it. A stream subscribes to
//! its feed before it reads where it starts (catch_up), so a change committed in between is
//! both in its start and broadcast, and the stream skips the copy (watch.rs).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, Weak};
use std::time::Duration;

use agent_state::watch::{Selector, Watch, WatchEvent, WatchKind, WatchOptions};
use agent_state::{Agent, Error, Result};
use axum::extract::ws::Utf8Bytes;
use tokio::sync::broadcast;

use crate::handles::Handles;
use crate::message;

/// How many messages a subscriber may fall behind before it is closed (code 4001).
pub const BACKLOG: usize = 256;
/// The most events the dispatcher takes from the watch at once, before it hands them out.
const BATCH: usize = 256;

/// What a feed broadcasts.
#[derive(Clone, Debug)]
pub enum Event {
    /// One change, `version` the one after the previous change's: the message text to send.
    Change { version: u64, text: Utf8Bytes },
    /// The whole state at `version` (changes were missed, or the agent keeps no log: the
    /// versions in between are not known).
    Snapshot { version: u64, text: Utf8Bytes },
    /// The agent was deleted: each subscriber sends what is stored now.
    Resync,
    /// The store's watch failed for good: the streams close (1011).
    Failed,
}

/// One agent's feed: lives while a stream holds it.
pub struct Feed {
    id: String,
    /// Which feed of its agent this is (an agent's next feed after this one ended gets another).
    generation: u64,
    events: broadcast::Sender<Event>,
    shared: Weak<Shared>,
}

impl Feed {
    /// A receiver of every event broadcast from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.events.subscribe()
    }

    /// The agent's id.
    pub fn id(&self) -> &str {
        &self.id
    }
}

impl Drop for Feed {
    /// The agent's last stream ended: the watch stops following it, unless a new feed took
    /// its place meanwhile (and continues the same follow).
    fn drop(&mut self) {
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        let _membership = shared.membership(&self.id);
        let mut live = shared.live.write().unwrap_or_else(|p| p.into_inner());
        if live
            .get(&self.id)
            .is_some_and(|slot| slot.generation == self.generation)
        {
            live.remove(&self.id);
            drop(live);
            // Fails only for an id the watch does not follow, or a closed watch: nothing to do.
            let _ = shared.watch.remove(&self.id);
        }
    }
}

/// The feeds of the agents being watched.
pub struct Feeds {
    handles: Arc<Handles>,
    /// `--watch-poll`: on PostgreSQL, one store-wide query per interval instead of
    /// notifications (for a connection through a transaction pooler).
    poll: Option<Duration>,
    /// The store's watch and what goes with it, started with the first stream (as the
    /// server starts without reading the store), and again after it failed for good.
    current: Mutex<Option<Arc<Shared>>>,
}

/// How many membership locks a watch has (see [`Shared::membership`]): more than the threads
/// that open streams at once (`MAX_BLOCKING_THREADS`), so that they seldom share one.
const MEMBERSHIP_STRIPES: usize = 256;

/// One watch of the store, the feeds of the agents it follows, and its dispatcher thread.
struct Shared {
    watch: Arc<Watch>,
    /// Each followed agent's feed and sender. The dispatcher reads it for every batch of
    /// events; it is written only when a feed starts or ends, for a moment.
    live: RwLock<HashMap<String, Slot>>,
    /// One of them held while the watch's list of agents changes for an agent (an add, a
    /// remove, and the entry in `live` that goes with it), so that a feed ending and one
    /// starting for the same agent do not cross. Striped by the agent's id: the adds of
    /// different agents wait for the watcher together and are applied in one of its turns (one
    /// lock made 10,000 streams open one turn after another, in minutes). Never taken by the
    /// dispatcher: an add that waits for the watcher does not hold up the events of others.
    membership: Vec<Mutex<()>>,
    generations: AtomicU64,
    /// The watch failed for good: no feed starts on it any more.
    failed: AtomicBool,
}

impl Shared {
    /// Opens the store's watch, following no agent yet, and starts its dispatcher. Blocking.
    fn start(handles: &Handles, poll: Option<Duration>) -> Result<Arc<Shared>> {
        let options = WatchOptions::default().poll_interval(poll);
        let watch = Arc::new(Watch::open(
            handles.store(),
            handles.options(),
            Selector::Ids(Vec::new()),
            options,
        )?);
        let shared = Arc::new(Shared {
            watch: Arc::clone(&watch),
            live: RwLock::new(HashMap::new()),
            membership: (0..MEMBERSHIP_STRIPES).map(|_| Mutex::new(())).collect(),
            generations: AtomicU64::new(0),
            failed: AtomicBool::new(false),
        });
        let weak = Arc::downgrade(&shared);
        std::thread::Builder::new()
            .name("serve watch".into())
            .spawn(move || dispatch(&watch, &weak))
            .map_err(|e| Error::Storage(format!("cannot start the watch's thread: {e}").into()))?;
        Ok(shared)
    }

    /// The membership lock of agent `id`.
    fn membership(&self, id: &str) -> MutexGuard<'_, ()> {
        use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
        let hash = BuildHasherDefault::<DefaultHasher>::default().hash_one(id);
        let stripe = (hash % self.membership.len() as u64) as usize;
        self.membership[stripe]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Agent `id`'s feed on this watch, started when it has none (see [`Feeds::get`]).
    fn feed(self: &Arc<Shared>, id: &str, agent: &Agent) -> Result<Arc<Feed>> {
        if let Some(feed) = self.live(id) {
            return Ok(feed);
        }
        // Read before the follow begins, without a lock held: the watch delivers every change
        // after it. A version read earlier than needed only brings changes the stream skips.
        let version = agent.get_state_versioned()?.version;
        let membership = self.membership(id);
        let mut live = self.live.write().unwrap_or_else(|p| p.into_inner());
        if let Some(feed) = live.get(id).and_then(|slot| slot.feed.upgrade()) {
            return Ok(feed);
        }
        // An entry whose feed is gone but not yet dropped: the watch still follows the agent,
        // and the new feed continues that follow (the old one's drop sees another generation).
        let followed = live.contains_key(id);
        let (events, _) = broadcast::channel(BACKLOG);
        let generation = self.generations.fetch_add(1, Ordering::Relaxed);
        let feed = Arc::new(Feed {
            id: id.to_string(),
            generation,
            events: events.clone(),
            shared: Arc::downgrade(self),
        });
        live.insert(
            id.to_string(),
            Slot {
                feed: Arc::downgrade(&feed),
                generation,
                events,
            },
        );
        drop(live);
        if !followed {
            if let Err(e) = self.watch.add(id, Some(version)) {
                self.live
                    .write()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(id);
                // The feed's drop takes the membership lock: released first.
                drop(membership);
                drop(feed);
                return Err(e);
            }
        }
        Ok(feed)
    }

    fn live(&self, id: &str) -> Option<Arc<Feed>> {
        let live = self.live.read().unwrap_or_else(|p| p.into_inner());
        live.get(id).and_then(|slot| slot.feed.upgrade())
    }
}

impl Feeds {
    /// No watch yet: the first stream starts it. `poll`: see [`Feeds::poll`].
    pub fn new(handles: Arc<Handles>, poll: Option<Duration>) -> Feeds {
        Feeds {
            handles,
            poll,
            current: Mutex::new(None),
        }
    }

    /// Agent `id`'s feed, started when it has none; `agent` is its handle. Blocking: it may
    /// open the store's watch and read the agent's version. Errors: those of opening the
    /// watch (`Watch::open`) and of the read.
    pub fn get(&self, id: &str, agent: &Agent) -> Result<Arc<Feed>> {
        let shared = {
            let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
            match &*current {
                Some(shared) if !shared.failed.load(Ordering::SeqCst) => Arc::clone(shared),
                _ => {
                    let shared = Shared::start(&self.handles, self.poll)?;
                    *current = Some(Arc::clone(&shared));
                    shared
                }
            }
        };
        shared.feed(id, agent)
    }
}

impl Drop for Feeds {
    /// The server stops: the watch closes, and its dispatcher thread ends.
    fn drop(&mut self) {
        if let Some(shared) = &*self.current.lock().unwrap_or_else(|p| p.into_inner()) {
            shared.watch.close();
        }
    }
}

/// A followed agent.
struct Slot {
    feed: Weak<Feed>,
    generation: u64,
    events: broadcast::Sender<Event>,
}

/// The dispatcher's loop: every event of the watch, to its agent's streams, until the watch
/// closes or fails.
fn dispatch(watch: &Watch, shared: &Weak<Shared>) {
    let mut batch = Vec::with_capacity(BATCH);
    loop {
        match watch.next(None) {
            Ok(Some(event)) => batch.push(event),
            Ok(None) => continue,
            Err(Error::Closed) => return,
            Err(e) => return fail(shared, &e),
        }
        // What else is queued goes out with it: one lock of the feeds per batch.
        while batch.len() < BATCH {
            match watch.try_next() {
                Ok(Some(event)) => batch.push(event),
                _ => break,
            }
        }
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let live = shared.live.read().unwrap_or_else(|p| p.into_inner());
        for event in batch.drain(..) {
            if let Some(slot) = live.get(&event.agent_id) {
                // No receiver is not an error: the feed is ending.
                let _ = slot.events.send(encode(&event));
            }
        }
    }
}

/// The watch failed for good (a failure that passes, such as a server restarting, is retried
/// by the library's watcher, which catches up after it): its streams close, and the next
/// stream opens a new watch. The detail goes to standard error, as a failed request's does.
fn fail(shared: &Weak<Shared>, error: &Error) {
    eprintln!("agent-state serve: the store's watch failed: {error}");
    let Some(shared) = shared.upgrade() else {
        return;
    };
    shared.failed.store(true, Ordering::SeqCst);
    let live = shared.live.read().unwrap_or_else(|p| p.into_inner());
    for slot in live.values() {
        let _ = slot.events.send(Event::Failed);
    }
}

/// An event of the watch as what its streams send, encoded once for all of them.
fn encode(event: &WatchEvent) -> Event {
    let version = event.version;
    let state = event.state.as_deref();
    let change = |text| Event::Change { version, text };
    match (event.kind, event.patch.as_deref(), state) {
        (WatchKind::Merge, Some(patch), _) => change(message::merge(version, patch)),
        (WatchKind::JsonPatch, Some(ops), _) => change(message::json_patch(version, ops)),
        (WatchKind::Replace | WatchKind::Migration { .. }, _, Some(state)) => {
            change(message::replace(version, state))
        }
        // A deleted agent's history is gone: its streams send what is stored now.
        (WatchKind::Deleted, _, _) => Event::Resync,
        // Changes that were missed, or an agent without a change log: the state.
        (_, _, Some(state)) => Event::Snapshot {
            version,
            text: message::snapshot_text(version, state),
        },
        // A kind this server does not know, without a state: the streams read it.
        _ => Event::Resync,
    }
}
