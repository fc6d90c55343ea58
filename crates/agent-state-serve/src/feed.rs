//! The feed of one agent: a thread that looks for new changes every [`POLL`] and broadcasts
//! each, already encoded, to that agent's watch streams.
//!
//! The library starts no thread and has no push from other processes: a handle's `poll`
//! delivers to its hooks the changes committed elsewhere since its last delivery, in commit
//! order, each once (with the change log on). One feed per watched agent polls, however many
//! subscribers it has, and lives while one does. A store with no log has nothing to poll: the
//! feed then reads the version and broadcasts a snapshot when it moved.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread;
use std::time::Duration;

use agent_state::{Agent, Error, StateChange, StateChangedHook};
use axum::extract::ws::Utf8Bytes;
use tokio::sync::broadcast;

use crate::handles::Handles;
use crate::message;
use crate::reply::is_log_off;

/// How often a feed looks for changes: a commit reaches the subscribers within about this
/// long (the contract is 100 ms).
pub const POLL: Duration = Duration::from_millis(25);
/// How many messages a subscriber may fall behind before it is closed (code 4001).
pub const BACKLOG: usize = 256;

/// What a feed broadcasts.
#[derive(Clone, Debug)]
pub enum Event {
    /// One change, `version` the one after the previous change's: the message text to send.
    Change { version: u64, text: Utf8Bytes },
    /// The whole state at `version` (no log: versions in between are not known).
    Snapshot { version: u64, text: Utf8Bytes },
    /// Changes were lost to the feed (pruned before it read them, or the agent was deleted):
    /// each subscriber sends a fresh snapshot.
    Resync,
}

/// One agent's feed.
pub struct Feed {
    pub agent: Arc<Agent>,
    events: broadcast::Sender<Event>,
}

impl Feed {
    /// A receiver of every event broadcast from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.events.subscribe()
    }
}

/// The feeds of the agents being watched.
pub struct Feeds {
    handles: Arc<Handles>,
    live: Mutex<HashMap<String, Weak<Feed>>>,
}

impl Feeds {
    pub fn new(handles: Arc<Handles>) -> Feeds {
        Feeds {
            handles,
            live: Mutex::new(HashMap::new()),
        }
    }

    /// Agent `id`'s feed, started when it has none. Blocking (it may open the agent).
    pub fn get(&self, id: &str) -> agent_state::Result<Arc<Feed>> {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(feed) = live.get(id).and_then(Weak::upgrade) {
            return Ok(feed);
        }
        live.retain(|_, feed| feed.strong_count() > 0);
        let agent = self.handles.get(id)?;
        let (events, _) = broadcast::channel(BACKLOG);
        let feed = Arc::new(Feed {
            agent: Arc::clone(&agent),
            events: events.clone(),
        });
        live.insert(id.to_string(), Arc::downgrade(&feed));
        let last = Arc::new(AtomicU64::new(agent.get_state_versioned()?.version));
        let hook = Arc::new(Broadcast {
            events: events.clone(),
            last: Arc::clone(&last),
        });
        let hook_id = agent.on_state_changed(hook)?;
        let weak = Arc::downgrade(&feed);
        thread::Builder::new()
            .name(format!("feed {id}"))
            .spawn(move || run(agent, hook_id, weak, events, last))
            .map_err(|e| Error::Storage(format!("cannot start a feed thread: {e}").into()))?;
        Ok(feed)
    }
}

/// The feed's hook: encodes each delivered change once, for every subscriber.
struct Broadcast {
    events: broadcast::Sender<Event>,
    /// The last version broadcast (also read by the no-log path).
    last: Arc<AtomicU64>,
}

impl StateChangedHook for Broadcast {
    fn on_state_changed(&self, change: &StateChange) -> Result<(), String> {
        let event = if change.version == 0 {
            // The agent was deleted: its history is gone; subscribers resynchronise.
            Event::Resync
        } else {
            Event::Change {
                version: change.version,
                text: message::change(change),
            }
        };
        self.last.store(change.version, Ordering::SeqCst);
        // No receiver is not an error: the feed stops at its next poll.
        let _ = self.events.send(event);
        Ok(())
    }
}

/// The feed's loop, until no subscriber holds the feed.
fn run(
    agent: Arc<Agent>,
    hook_id: u64,
    feed: Weak<Feed>,
    events: broadcast::Sender<Event>,
    last: Arc<AtomicU64>,
) {
    while feed.strong_count() > 0 {
        match agent.poll() {
            Ok(_) => {}
            Err(Error::Gap { .. }) => {
                let _ = events.send(Event::Resync);
            }
            Err(e) if is_log_off(&e.to_string()) => snapshot_if_moved(&agent, &events, &last),
            // A store that is unreachable for a moment (busy, a server restarting): try again
            // at the next poll; the subscribers keep their copies meanwhile.
            Err(_) => {}
        }
        thread::sleep(POLL);
    }
    let _ = agent.remove_hook(hook_id);
}

/// Without a log: a snapshot whenever the version differs from the last one broadcast.
fn snapshot_if_moved(agent: &Agent, events: &broadcast::Sender<Event>, last: &AtomicU64) {
    if let Ok(current) = agent.get_state_versioned() {
        if current.version != last.swap(current.version, Ordering::SeqCst) {
            let _ = events.send(Event::Snapshot {
                version: current.version,
                text: message::snapshot(current.version, &current.state),
            });
        }
    }
}
