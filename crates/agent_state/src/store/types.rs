//! The values that cross the [`Backend`](super::Backend) traits.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::error::{Error, Result};
use crate::value::snapshot::Snapshot;

/// An opaque mark of the store's last commit (see
/// [`Freshness::commit_mark`](super::Freshness::commit_mark)): equal marks mean no commit in
/// between. A backend fills it with what identifies a commit for it (up to 48 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark(pub [u32; 12]);

/// Milliseconds since the Unix epoch, by this machine's clock: the time written with a change
/// (`at_ms`) and with a state (its last write, which expiry compares).
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The granularity of the indexed time of a state's last write (see
/// [`Agents::expire_agents`](super::Agents::expire_agents)): the index is rewritten at most once per this many ms per
/// handle and agent, not at every write.
pub const WRITTEN_GRAIN_MS: i64 = 60_000;

/// `at_ms` rounded down to [`WRITTEN_GRAIN_MS`]: the indexed time of a last write.
pub fn grain_of(at_ms: i64) -> i64 {
    at_ms - at_ms.rem_euclid(WRITTEN_GRAIN_MS)
}

/// The key of an agent's tombstone (see [`Agents::delete_agent`](super::Agents::delete_agent)):
/// the 64-bit FNV-1a hash of its id, so that a deleted agent's id is not kept. Two ids with
/// the same hash share a tombstone, which can only make a first write's version higher, never
/// one that was used.
pub fn id_hash(id: &str) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h as i64
}

/// One agent of a store, as a listing shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentInfo {
    /// Its `agent_id` (`""`: a file's single agent, opened without one).
    pub id: String,
    /// Its state's version.
    pub version: u64,
    /// Its stored (encoded) state's size in bytes.
    pub bytes: u64,
    /// When its state was last written, in milliseconds since the Unix epoch (by the writer's
    /// clock; a store upgraded from before this was recorded counts its upgrade as the write).
    pub written_ms: i64,
}

/// Which agents of a store to list: those with a state stored, ordered by id (byte order),
/// from after `after`, at most `limit`, only those whose id starts with `prefix` when given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentQuery {
    /// Only ids starting with this.
    pub prefix: Option<String>,
    /// Only ids after this one (the last id of the previous page).
    pub after: Option<String>,
    /// At most this many (at least 1; see [`MAX_LIST_LIMIT`]).
    pub limit: usize,
}

/// The most agents one page of a listing (or one batch of expiry) holds.
pub const MAX_LIST_LIMIT: usize = 10_000;

impl AgentQuery {
    /// The smallest id above every id that starts with the prefix (`None`: no bound, also for
    /// a prefix of only U+10FFFF). Ids compare by their UTF-8 bytes, where code point order is
    /// byte order, so the prefix with its last character incremented is that bound.
    pub fn prefix_end(&self) -> Option<String> {
        let mut chars: Vec<char> = self.prefix.as_deref()?.chars().collect();
        while let Some(last) = chars.pop() {
            let mut next = last as u32 + 1;
            if (0xD800..0xE000).contains(&next) {
                next = 0xE000;
            }
            if let Some(c) = char::from_u32(next) {
                chars.push(c);
                return Some(chars.into_iter().collect());
            }
        }
        None
    }

    /// The lower bound of the ids listed, and whether it is exclusive: the later of `after`
    /// (exclusive) and the prefix (inclusive).
    pub fn start(&self) -> Option<(&str, bool)> {
        match (self.after.as_deref(), self.prefix.as_deref()) {
            (Some(a), Some(p)) if p > a => Some((p, false)),
            (Some(a), _) => Some((a, true)),
            (None, Some(p)) => Some((p, false)),
            (None, None) => None,
        }
    }
}

/// One entry of the change log, as read back.
#[derive(Debug, Clone)]
pub struct LoggedChange {
    /// The state's version after this change.
    pub version: u64,
    /// When it was committed, in milliseconds since the Unix epoch.
    pub at_ms: i64,
    /// Which agent handle made it (an id unique to one open handle).
    pub writer: u64,
    /// The merge patch as applied (compact JSON), or `None` for a replacement (or a schema
    /// migration, see `migrated_from`).
    pub patch: Option<Vec<u8>>,
    /// The schema version of the state after this change (see the open option
    /// `schema_version`; 0 for what was written before schema versions were stored).
    pub schema: u32,
    /// For a schema migration (a change that upgraded the state to `schema`): the schema
    /// version it upgraded from. `None` for a merge or a replacement.
    pub migrated_from: Option<u32>,
    /// The state before the change, kept only for an agent's first change (version 1, or the
    /// first after a deletion), whose `prev` is the writer's initial state, which other
    /// handles cannot know. It also marks where an incarnation of the agent begins.
    pub prev: Option<Vec<u8>>,
    /// The state after the change (compact JSON), when the backend stored it: always for a
    /// replacement; for a merge, at least every few versions, as the backend chooses (a large
    /// state's: at its bases, at most [`MAX_PATCHES`] apart) and at the
    /// first change logged after a break, so that any logged state is rebuilt from a stored
    /// one by at most that many patches (see
    /// [`ChangeLog::replay_to`](super::ChangeLog::replay_to)).
    pub next: Option<Vec<u8>>,
}

/// A change to write (borrowed: the state is not copied to be written).
#[derive(Clone, Copy)]
pub struct NewChange<'a> {
    /// The caller knows that the log holds the change before this one (it logged it itself
    /// and nothing was committed since): the backend need not look.
    pub prev_logged: bool,
    /// The first change of an incarnation of the agent (nothing was stored before it).
    pub first: bool,
    /// The version the change commits as.
    pub version: u64,
    /// When it committed, in milliseconds since the Unix epoch.
    pub at_ms: i64,
    /// Which handle wrote it (so that `poll` can tell a handle's own changes from others').
    pub writer: u64,
    /// The merge patch (encoded); `None` for a replacement.
    pub patch: Option<&'a [u8]>,
    /// The schema version of the state after the change, written with the state (its head)
    /// and with the change's log entry.
    pub schema: u32,
    /// For a schema migration: the schema version the state was upgraded from (written with
    /// the log entry); `None` otherwise.
    pub migrated_from: Option<u32>,
    /// The state before (encoded), for the first change of an incarnation.
    pub prev: Option<&'a [u8]>,
    /// The state after. Its encoding ([`Snapshot::json`]) is assembled only when a backend
    /// asks for it: a write that stores only its patch never copies the whole state.
    pub next: &'a Snapshot,
}

impl std::fmt::Debug for NewChange<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewChange")
            .field("version", &self.version)
            .field("first", &self.first)
            .field("patch", &self.patch.map(<[u8]>::len))
            .field("next", &self.next.len())
            .finish()
    }
}

/// A state of at most this many bytes is written whole at every write: below a page, storing
/// a patch costs as much as the state.
pub const SMALL_STATE: usize = 2048;

/// The fewest patches a state's base (its newest full copy) may be followed by before the full
/// state is written again (see [`max_patches`]). The full state is also written again as soon
/// as the patches since the base outweigh it.
pub const MAX_PATCHES: u64 = 128;

/// How many patches may follow the base of a state of `state_len` bytes: [`MAX_PATCHES`], or
/// one per KiB of the state when that is more. A new base costs a write of the whole state;
/// with a fixed count, an append of 200 bytes to a 300 KiB conversation paid a tenth of a
/// full write on average (a new base every 128 appends), several times what the same append
/// costs to a small state. Scaled so, the full writes cost each patch about a KiB's write,
/// whatever the state's size, and a cold read merges at most a patch per KiB of the state it
/// reads (each costs what its own path does, not what the state does).
pub fn max_patches(state_len: usize) -> u64 {
    MAX_PATCHES.max(state_len as u64 / 1024)
}

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
    /// Which agent of the store; `None`: a file's single agent (refused by servers).
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
