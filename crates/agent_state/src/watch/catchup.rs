//! Catching one agent up: what it committed after the version a watch last delivered, read from
//! the store in one read transaction and turned into events, in commit order, none twice, none
//! missed (what the log no longer holds becomes one [`WatchKind::Resync`]).

use std::sync::Arc;

use super::types::{WatchEvent, WatchKind};
use crate::error::Result;
use crate::replay;
use crate::store::{Backend, LoggedChange, Txn};
use crate::value::accept;
use crate::value::snapshot::Snapshot;

/// What a watch last delivered of one agent.
#[derive(Debug, Clone, Default)]
pub(super) struct Known {
    /// The version (0: nothing stored, or never seen).
    pub version: u64,
    /// The state at `version`, kept only with [`super::WatchOptions::states`].
    pub state: Option<Arc<Snapshot>>,
}

/// The agent's head as one read transaction sees it.
struct Head {
    version: u64,
    log: Option<crate::store::LogRetention>,
}

/// Appends to `out` the events of agent `id` after `known` (moving `known` to the stored
/// version), read through `store`, the agent's own handle. With `resync`, one
/// [`WatchKind::Resync`] of the current state whatever happened (a reader that fell behind).
/// `keep` keeps the state in `known` (and in every event).
pub(super) fn catch_up(
    store: &mut dyn Backend,
    id: &str,
    known: &mut Known,
    keep: bool,
    resync: bool,
    out: &mut Vec<WatchEvent>,
) -> Result<()> {
    store.ensure_current()?;
    let result = read(&*store, id, known, keep, resync, out);
    store.end_call();
    result
}

fn read(
    store: &dyn Backend,
    id: &str,
    known: &mut Known,
    keep: bool,
    resync: bool,
    out: &mut Vec<WatchEvent>,
) -> Result<()> {
    let txn = Txn::snapshot(store)?;
    let head = match txn.head()? {
        Some(h) => Head {
            version: h.version,
            log: h.log,
        },
        None => Head {
            version: txn.stored_version()?,
            log: txn.log_retention()?,
        },
    };
    if head.version == 0 {
        if known.version > 0 {
            out.push(deleted(id));
        }
        *known = Known::default();
        return Ok(());
    }
    if head.version == known.version && !resync {
        return Ok(());
    }
    let Some(retention) = head.log.filter(|_| !resync) else {
        return resync_now(&txn, id, known, keep, out);
    };
    let start = out.len();
    let mut walk = Walk {
        id,
        keep,
        seen: known.version,
        state: known.state.clone(),
        expected: known.version + 1,
    };
    for change in txn.changes_after(known.version, retention)? {
        if change.version > head.version {
            break;
        }
        if !walk.step(&*txn, &change, out)? {
            // Missed changes: what was gathered is superseded by one resync.
            out.truncate(start);
            return resync_now(&txn, id, known, keep, out);
        }
    }
    if walk.seen != head.version {
        out.truncate(start);
        return resync_now(&txn, id, known, keep, out);
    }
    known.version = walk.seen;
    known.state = walk.state.filter(|_| keep);
    Ok(())
}

/// Walking the log forward from a known version.
struct Walk<'a> {
    id: &'a str,
    keep: bool,
    /// The last version turned into an event (0: none in this incarnation).
    seen: u64,
    /// The state at `seen`, when known.
    state: Option<Arc<Snapshot>>,
    expected: u64,
}

impl Walk<'_> {
    /// Turns `change` into events; false when it cannot follow what came before (a gap).
    fn step(
        &mut self,
        store: &dyn Backend,
        change: &LoggedChange,
        out: &mut Vec<WatchEvent>,
    ) -> Result<bool> {
        let first = change.prev.is_some();
        let before = match &change.prev {
            Some(initial) => {
                // A first change: after one this watch saw, the agent was deleted in between.
                if self.seen > 0 {
                    out.push(deleted(self.id));
                }
                Some(Arc::new(accept::stored(initial)?))
            }
            None if self.seen == 0 || change.version != self.expected => return Ok(false),
            None => self.state.take(),
        };
        let kind = kind_of(change);
        let wants_state = first || self.keep || change.patch.is_none();
        let next = if wants_state {
            let next = match replay::next_state(change, before.as_ref())? {
                Some(next) => Some(next),
                None => replay::rebuild(store, change.version)?,
            };
            if next.is_none() {
                return Ok(false);
            }
            next
        } else {
            None
        };
        out.push(WatchEvent {
            agent_id: self.id.to_string(),
            version: change.version,
            kind,
            patch: change.patch.as_deref().map(text),
            state: next.as_deref().map(|s| text(s.json())),
            schema: change.schema,
            at_ms: change.at_ms,
        });
        self.state = next.filter(|_| self.keep);
        self.seen = change.version;
        self.expected = change.version + 1;
        Ok(true)
    }
}

fn kind_of(change: &LoggedChange) -> WatchKind {
    match (change.migrated_from, &change.patch) {
        (Some(from), _) => WatchKind::Migration { from },
        (None, Some(p)) if p.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') => {
            WatchKind::JsonPatch
        }
        (None, Some(_)) => WatchKind::Merge,
        (None, None) => WatchKind::Replace,
    }
}

/// One [`WatchKind::Resync`] of the state `txn` reads (nothing when nothing is stored).
fn resync_now(
    txn: &Txn<'_>,
    id: &str,
    known: &mut Known,
    keep: bool,
    out: &mut Vec<WatchEvent>,
) -> Result<()> {
    let Some(read) = txn.read_stored(None)? else {
        if known.version > 0 {
            out.push(deleted(id));
        }
        *known = Known::default();
        return Ok(());
    };
    let (version, schema) = (read.version, read.schema);
    let state = replay::stored_state(read, None)?;
    out.push(WatchEvent {
        agent_id: id.to_string(),
        version,
        kind: WatchKind::Resync,
        patch: None,
        state: Some(text(state.json())),
        schema,
        at_ms: 0,
    });
    known.version = version;
    known.state = keep.then_some(state);
    Ok(())
}

fn deleted(id: &str) -> WatchEvent {
    WatchEvent {
        agent_id: id.to_string(),
        version: 0,
        kind: WatchKind::Deleted,
        patch: None,
        state: None,
        schema: 0,
        at_ms: 0,
    }
}

/// Stored JSON text as shared text (the store holds UTF-8; anything else is replaced, never
/// refused, since the change is committed).
fn text(bytes: &[u8]) -> Arc<str> {
    Arc::from(String::from_utf8_lossy(bytes).as_ref())
}
