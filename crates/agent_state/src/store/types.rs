//! The values that cross the [`Backend`](super::Backend) traits.

use std::time::Duration;

use serde_json::Value;

use crate::error::{Error, Result};

/// An opaque mark of the store's last commit (see
/// [`Freshness::commit_mark`](super::Freshness::commit_mark)): equal marks mean no commit in
/// between. Backends fill it with what identifies a commit for them (SQLite: its WAL-index
/// header, 48 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark(pub [u32; 12]);

/// One entry of the change log, as read back.
#[derive(Debug, Clone)]
pub struct LoggedChange {
    /// The state's version after this change.
    pub version: u64,
    /// When it was committed, in milliseconds since the Unix epoch.
    pub at_ms: i64,
    /// Which agent handle made it (an id unique to one open handle).
    pub writer: u64,
    /// The merge patch as applied (compact JSON), or `None` for a replacement.
    pub patch: Option<Vec<u8>>,
    /// The state before the change, kept only for a store's first change (version 1), whose
    /// `prev` is the writer's initial state, which other handles cannot know.
    pub prev: Option<Vec<u8>>,
    /// The state after the change (compact JSON), when the backend stored it: always for a
    /// replacement; for a merge, at least at every [`CHECKPOINT_EVERY`]th version and at the
    /// first change logged after a break, so that any logged state is rebuilt from a stored
    /// one by at most that many patches (see
    /// [`ChangeLog::replay_to`](super::ChangeLog::replay_to)).
    pub next: Option<Vec<u8>>,
}

/// A change to append to the log (borrowed: the state is not copied to be logged).
#[derive(Debug, Clone, Copy)]
pub struct NewChange<'a> {
    /// The caller knows that the log holds the change before this one (it logged it itself
    /// and nothing was committed since): the backend need not look.
    pub prev_logged: bool,
    /// The version the change committed as.
    pub version: u64,
    /// When it committed, in milliseconds since the Unix epoch.
    pub at_ms: i64,
    /// Which handle wrote it (so that `poll` can tell a handle's own changes from others').
    pub writer: u64,
    /// The merge patch (encoded); `None` for a replacement.
    pub patch: Option<&'a [u8]>,
    /// The state before (encoded), when the caller has it at hand.
    pub prev: Option<&'a [u8]>,
    /// The state after (encoded).
    pub next: &'a [u8],
}

/// A merge's full state is stored in the log at least at every this many versions: the most
/// patches replayed to rebuild a logged state.
pub const CHECKPOINT_EVERY: u64 = 32;

/// Durability of a commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Synchronous {
    /// fsync on every commit: an acknowledged write survives power loss.
    Full,
    /// fsync at checkpoints only: survives a process crash, may lose the last commits on power loss.
    Normal,
}

/// How to open a store.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// How durable a commit is.
    pub synchronous: Synchronous,
    /// Bounds every wait for what others hold: another connection's lock, a connection of a
    /// server's pool. Not the time a server takes to run an uncontended statement.
    pub busy_timeout: Duration,
    /// On a server: how long it may take to answer (connect, or one round trip beyond its lock
    /// waits) before the connection is given up as unreachable.
    pub server_timeout: Duration,
    /// Refuse every write; never modify the store.
    pub read_only: bool,
    /// Which agent of the store; `None`: a SQLite file's single agent (refused by servers).
    pub agent_id: Option<String>,
    /// On a server: the most connections this process keeps to it (shared by its handles).
    pub max_connections: usize,
}

/// The largest `keep_last` / `keep_seconds` (seconds are turned into milliseconds in an i64).
pub const MAX_RETENTION: u64 = i64::MAX as u64 / 1000;

/// How much the change log keeps: the last `keep_last` changes, and/or those of the last
/// `keep_seconds` seconds (the newest change is always kept). Stored with the log, so that
/// every handle on the store prunes alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogRetention {
    /// Keep the last this many changes.
    pub keep_last: Option<u64>,
    /// Keep the changes of the last this many seconds.
    pub keep_seconds: Option<u64>,
}

impl LogRetention {
    /// `{"keep_last": N, "keep_seconds": T}` (either may be absent, not both).
    pub fn from_json(text: &[u8]) -> Result<LogRetention> {
        let value = crate::value::json::parse(text)?;
        Self::from_value(&value)
    }

    pub(crate) fn from_value(value: &Value) -> Result<LogRetention> {
        let bad = || {
            Error::InvalidArgument(format!(
                "change_log must be false or {{\"keep_last\": N, \"keep_seconds\": T}} with \
                 integers from 1 to {MAX_RETENTION} (at least one of them), got {value}"
            ))
        };
        let Value::Object(map) = value else {
            return Err(bad());
        };
        let mut retention = LogRetention {
            keep_last: None,
            keep_seconds: None,
        };
        for (key, v) in map {
            let n = v
                .as_u64()
                .filter(|n| *n >= 1 && *n <= i64::MAX as u64 / 1000);
            match key.as_str() {
                "keep_last" => retention.keep_last = Some(n.ok_or_else(bad)?),
                "keep_seconds" => retention.keep_seconds = Some(n.ok_or_else(bad)?),
                _ => return Err(bad()),
            }
        }
        if retention.keep_last.is_none() && retention.keep_seconds.is_none() {
            return Err(bad());
        }
        Ok(retention)
    }

    /// The stored form.
    pub fn to_json(&self) -> Vec<u8> {
        let mut map = serde_json::Map::new();
        if let Some(n) = self.keep_last {
            map.insert("keep_last".into(), n.into());
        }
        if let Some(n) = self.keep_seconds {
            map.insert("keep_seconds".into(), n.into());
        }
        crate::value::json::to_vec(&Value::Object(map))
    }
}
