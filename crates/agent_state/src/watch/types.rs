//! The values of the watch API: what to follow ([`Selector`]), how ([`WatchOptions`]), and
//! what is delivered ([`WatchEvent`], [`WatchKind`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::options::MAX_AGENT_ID_BYTES;

/// Which agents of a store a watch follows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// These ids (each validated as agent ids are: at most 255 bytes of UTF-8, no NUL). May
    /// start empty and grow with [`Watch::add`](super::Watch::add).
    Ids(Vec<String>),
    /// Every agent whose id starts with this prefix (`""`: every agent of the store), including
    /// agents created after the watch began.
    Prefix(String),
}

impl Selector {
    /// Refuses an id or prefix that no agent id can be or start with.
    pub(super) fn check(&self) -> Result<()> {
        match self {
            Selector::Ids(ids) => ids.iter().try_for_each(|id| check_id(id, "an agent id")),
            Selector::Prefix(prefix) => check_id(prefix, "the prefix"),
        }
    }

    /// True when `id` is one this selector follows.
    pub(super) fn follows(&self, id: &str) -> bool {
        match self {
            Selector::Ids(ids) => ids.iter().any(|i| i == id),
            Selector::Prefix(prefix) => id.starts_with(prefix.as_str()),
        }
    }
}

/// Refuses what cannot be an agent id (or the start of one): [`Error::InvalidArgument`].
pub(super) fn check_id(id: &str, what: &str) -> Result<()> {
    if id.len() > MAX_AGENT_ID_BYTES || id.contains('\0') {
        return Err(Error::InvalidArgument(format!(
            "{what} must be a string of at most {MAX_AGENT_ID_BYTES} bytes (UTF-8), without NUL"
        )));
    }
    Ok(())
}

/// How a watch behaves. [`Default`] gives the defaults described on each field; the setters
/// (`WatchOptions::default().states(true)`) change one each.
#[non_exhaustive]
#[derive(Debug, Clone)]
pub struct WatchOptions {
    /// Resume points: for an agent in this map, its changes after this version are delivered
    /// (caught up from the change log; if the log does not hold them, one
    /// [`WatchKind::Resync`]). Agents not in the map start at their version when the watch
    /// begins (only later changes are delivered).
    pub since: HashMap<String, u64>,
    /// Every event carries the agent's full state after the change ([`WatchEvent::state`]),
    /// at the cost of the watcher keeping the last state of each agent it delivered. Default
    /// false: `state` is only present where the event defines it.
    pub states: bool,
    /// Most events queued for a reader that does not keep up (default 10,000). Beyond it the
    /// queue drops that agent's queued events and delivers one [`WatchKind::Resync`] of its
    /// state instead: memory stays bounded, and a copy kept from the events stays right.
    pub max_pending: usize,
    /// PostgreSQL only: `Some(interval)` = no notifications (LISTEN); one store-wide query of
    /// the watched agents' versions per interval (for a connection through a transaction
    /// pooler, which cannot carry LISTEN). `None` (default): notifications. Ignored on SQLite.
    /// Also the open option `"watch_poll_ms"`. The watches of one store in one process share
    /// one watcher: the choice of the first holds for the others while any of them is open.
    pub poll_interval: Option<Duration>,
    /// How often the watcher also compares every watched agent's stored version (one
    /// store-wide query) as a safety net for commits it was not told of (a writer killed
    /// between its commit and its notice, a program that is not this library). Default 30 s.
    /// The watches of one store in one process share one watcher, which rescans them all at
    /// the shortest interval of those open.
    pub rescan_interval: Duration,
}

impl Default for WatchOptions {
    fn default() -> WatchOptions {
        WatchOptions {
            since: HashMap::new(),
            states: false,
            max_pending: 10_000,
            poll_interval: None,
            rescan_interval: Duration::from_secs(30),
        }
    }
}

impl WatchOptions {
    /// With these resume points (see [`WatchOptions::since`]).
    pub fn since(mut self, since: HashMap<String, u64>) -> WatchOptions {
        self.since = since;
        self
    }

    /// With or without the full state in every event (see [`WatchOptions::states`]).
    pub fn states(mut self, states: bool) -> WatchOptions {
        self.states = states;
        self
    }

    /// With this queue bound (see [`WatchOptions::max_pending`]).
    pub fn max_pending(mut self, max_pending: usize) -> WatchOptions {
        self.max_pending = max_pending;
        self
    }

    /// With this polling interval on PostgreSQL (see [`WatchOptions::poll_interval`]).
    pub fn poll_interval(mut self, interval: Option<Duration>) -> WatchOptions {
        self.poll_interval = interval;
        self
    }

    /// With this safety-net rescan interval (see [`WatchOptions::rescan_interval`]).
    pub fn rescan_interval(mut self, interval: Duration) -> WatchOptions {
        self.rescan_interval = interval;
        self
    }

    /// Refuses options no watch can run with.
    pub(super) fn check(&self) -> Result<()> {
        if self.max_pending == 0 {
            return Err(Error::InvalidArgument(
                "max_pending must be at least 1".to_string(),
            ));
        }
        if self.rescan_interval.is_zero() || self.poll_interval.is_some_and(|p| p.is_zero()) {
            return Err(Error::InvalidArgument(
                "the rescan and poll intervals must be above zero".to_string(),
            ));
        }
        self.since
            .keys()
            .try_for_each(|id| check_id(id, "an agent id in since"))
    }
}

/// One change delivered to a watch. Cheap to clone (the texts are shared).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchEvent {
    /// The agent's id.
    pub agent_id: String,
    /// The version after the change (0 for [`WatchKind::Deleted`]).
    pub version: u64,
    /// What kind of change.
    pub kind: WatchKind,
    /// The change as stored, as JSON text (the encoding the C ABI's hooks hand out): the
    /// RFC 7396 merge patch of a [`WatchKind::Merge`], the RFC 6902 operations array of a
    /// [`WatchKind::JsonPatch`]; `None` for the other kinds.
    pub patch: Option<Arc<str>>,
    /// The full state after the change, as JSON text. Always present for
    /// [`WatchKind::Replace`], [`WatchKind::Migration`] and [`WatchKind::Resync`], and for the
    /// first change of an agent (its predecessor is the writer's initial state, which a watcher
    /// cannot know); for every event with [`WatchOptions::states`]; `None` for
    /// [`WatchKind::Deleted`] and otherwise.
    pub state: Option<Arc<str>>,
    /// The schema version the state was written under.
    pub schema: u32,
    /// When it was committed (ms since the Unix epoch, by the writer's clock); 0 when unknown
    /// ([`WatchKind::Resync`], [`WatchKind::Deleted`]).
    pub at_ms: i64,
}

/// What kind of change a [`WatchEvent`] is.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchKind {
    /// An RFC 7396 merge patch (`set_state`).
    Merge,
    /// An RFC 6902 JSON Patch.
    JsonPatch,
    /// A replacement of the whole state.
    Replace,
    /// A schema migration of the state, from schema version `from`.
    Migration {
        /// The schema version the state was upgraded from.
        from: u32,
    },
    /// The agent was deleted (version 0, no state).
    Deleted,
    /// Changes were missed (pruned from the change log before delivery, the log is off, or the
    /// reader fell more than `max_pending` behind): `state` is the current state at `version`;
    /// a copy kept from events is replaced by it.
    Resync,
}

impl WatchKind {
    /// The kind's name, the same word in every language: `"merge"`, `"json_patch"`,
    /// `"replace"`, `"migration"`, `"deleted"` or `"resync"`.
    pub fn name(&self) -> &'static str {
        match self {
            WatchKind::Merge => "merge",
            WatchKind::JsonPatch => "json_patch",
            WatchKind::Replace => "replace",
            WatchKind::Migration { .. } => "migration",
            WatchKind::Deleted => "deleted",
            WatchKind::Resync => "resync",
        }
    }
}
