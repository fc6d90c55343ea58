//! The feed: changes that other handles or processes committed, delivered to this handle's
//! hooks in commit order (by `poll`, and ahead of this handle's own next change).

use std::sync::Arc;

use super::cache::{self, Context, Current};
use super::{Agent, Cursor, Inner, View};
use crate::error::{Error, Result};
use crate::hooks::{ChangeKind, StateChange};
use crate::replay;
use crate::store::{Backend, Txn};
use crate::value::{accept, operations};

/// Changes of other handles not yet delivered to this handle's hooks.
pub(super) struct Foreign {
    events: Vec<StateChange>,
    gap: Option<(u64, u64)>,
    /// Where the cursor goes once they are delivered.
    cursor: Cursor,
}

/// Change events numbered for the hooks' turnstile.
type Numbered = Vec<(u64, StateChange)>;

impl Agent {
    /// Delivers to this handle's hooks, in commit order, every change that other handles or
    /// processes committed since this handle's last delivery (needs the change log). Returns
    /// how many were delivered. If the log no longer holds some of them (pruned), they are
    /// skipped and [`Error::Gap`] says which; the next poll continues from the current state.
    pub fn poll(&self) -> Result<usize> {
        let (delivered, result) = self.poll_counted();
        result.map(|()| delivered)
    }

    /// [`Agent::poll`], also telling how many changes were delivered when it fails with a gap
    /// or a hook failure (the deliveries happened all the same).
    pub fn poll_counted(&self) -> (usize, Result<()>) {
        match self.poll_events() {
            Err(e) => (0, Err(e)),
            Ok((events, gap)) => {
                let delivered = events.len();
                let delivery = self.deliver_all(events);
                if let Some((from, to)) = gap {
                    return (
                        delivered,
                        Err(Error::Gap {
                            missing: from..=to,
                            message: format!(
                                "changes {from} to {to} were pruned from the change log before \
                                 this handle delivered them; the state is current, those \
                                 intermediate changes are lost"
                            ),
                        }),
                    );
                }
                (delivered, delivery)
            }
        }
    }

    /// The events a poll delivers, and the gap it reports.
    fn poll_events(&self) -> Result<(Numbered, Option<(u64, u64)>)> {
        let mut guard = self.lock_inner()?;
        let Inner { store, view } = guard.as_mut().ok_or(Error::Closed)?;
        let foreign = {
            let txn = Txn::snapshot(&**store)?;
            let current = cache::current(&*txn, &mut view.cache, Context::ReadTransaction)?;
            if current.log.is_none() {
                return Err(Error::InvalidArgument(
                    "the change log is off for this agent: open it with the change_log option"
                        .to_string(),
                ));
            }
            self.foreign_changes(&*txn, &view.cursor, &current)?
        };
        let events = view.take_foreign(foreign);
        Ok((events, view.gap.take()))
    }

    /// Changes of other handles committed after `cursor` and up to `current`, as hook events
    /// in commit order (the log must be on). A change whose predecessor the log no longer holds
    /// cannot be given its real `prev`: it is skipped and reported as a gap. Pure: the caller
    /// moves the cursor once the events are sure to be delivered.
    pub(super) fn foreign_changes(
        &self,
        store: &dyn Backend,
        cursor: &Cursor,
        current: &Current,
    ) -> Result<Foreign> {
        let mut foreign = Foreign {
            events: Vec::new(),
            gap: None,
            cursor: Cursor {
                version: cursor.version,
                state: Arc::clone(&cursor.state),
            },
        };
        if current.log.is_some() && current.version == 0 && cursor.version > 0 {
            // Deleted since this handle's last delivery (and not written since).
            foreign.events.push(self.deletion(&cursor.state));
            foreign.cursor = Cursor {
                version: 0,
                state: Arc::clone(&self.initial_state),
            };
            return Ok(foreign);
        }
        if current.version <= cursor.version {
            return Ok(foreign);
        }
        let Some(retention) = current.log else {
            return Ok(foreign);
        };
        // The state before the next change, when known (after a gap it is not).
        let mut prev = Some(Arc::clone(&cursor.state));
        let mut expected = cursor.version + 1;
        for c in store.changes_after(cursor.version, retention)? {
            if c.version > current.version {
                break;
            }
            if let Some(first_prev) = &c.prev {
                // The first change of an incarnation: its prev is the writer's initial state.
                // After one this handle saw, the agent was deleted in between.
                if expected > 1 {
                    if let Some(last) = prev.as_ref().filter(|_| c.version >= expected) {
                        foreign.events.push(self.deletion(last));
                    }
                }
                prev = Some(Arc::new(accept::stored(first_prev)?));
                expected = c.version;
            }
            let before = prev.take().filter(|_| c.version == expected);
            let next = match replay::next_state(&c, before.as_ref())? {
                Some(next) => Some(next),
                None => replay::rebuild(store, c.version)?,
            };
            match (before, &next) {
                (Some(before), Some(next)) if c.writer != self.writer => {
                    let patch = match &c.patch {
                        Some(p) => Some(operations::stored(p).map_err(|e| {
                            Error::Corrupt(format!("a logged patch: {}", Error::from(e)))
                        })?),
                        None => None,
                    };
                    let kind = match (c.migrated_from, &patch) {
                        (Some(from), _) => ChangeKind::Migration { from },
                        (None, Some(p)) if p.operations().is_some() => ChangeKind::JsonPatch,
                        (None, Some(_)) => ChangeKind::Merge,
                        (None, None) => ChangeKind::Replace,
                    };
                    foreign.events.push(StateChange {
                        next: Arc::clone(next),
                        prev: before,
                        patch,
                        version: c.version,
                        kind,
                        schema: c.schema,
                    });
                }
                (Some(_), Some(_)) => {} // this handle's own change, delivered when made
                // Its real prev is not retained (or it cannot be rebuilt): skipped, reported.
                _ => {
                    let from = foreign.gap.map_or(expected, |(from, _)| from);
                    foreign.gap = Some((from, c.version));
                }
            }
            prev = next;
            expected = c.version + 1;
        }
        if expected <= current.version {
            let from = foreign.gap.map_or(expected, |(from, _)| from);
            foreign.gap = Some((from, current.version));
        }
        foreign.cursor = Cursor {
            version: current.version,
            state: current
                .stored
                .clone()
                .unwrap_or_else(|| Arc::clone(&self.initial_state)),
        };
        Ok(foreign)
    }

    /// The event of a deletion, as this handle's hooks see it: from `last`, the last state it
    /// delivered, to its initial state, as a replacement, at version 0 (nothing stored).
    fn deletion(&self, last: &Arc<crate::value::snapshot::Snapshot>) -> StateChange {
        StateChange {
            next: Arc::clone(&self.initial_state),
            prev: Arc::clone(last),
            patch: None,
            version: 0,
            kind: ChangeKind::Replace,
            schema: self.schema.version,
        }
    }

    /// Runs this handle's hooks on `events`, in order.
    pub(super) fn deliver_all(&self, events: Numbered) -> Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        self.hooks.deliver_all(events)
    }
}

impl View {
    /// Moves the cursor past `foreign` and numbers its events for the turnstile (after which
    /// they must be delivered).
    pub(super) fn take_foreign(&mut self, foreign: Foreign) -> Numbered {
        self.cursor = foreign.cursor;
        if let Some((from, to)) = foreign.gap {
            let from = self.gap.map_or(from, |(f, _)| f);
            self.gap = Some((from, to));
        }
        foreign
            .events
            .into_iter()
            .map(|e| {
                self.seq += 1;
                (self.seq, e)
            })
            .collect()
    }
}
