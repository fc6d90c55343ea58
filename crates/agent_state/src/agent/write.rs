//! The write path: merge, replace, restore and schema migration, each one write transaction
//! that starts from the latest committed state, then delivery to this handle's hooks in commit
//! order.

use std::sync::Arc;

use serde_json::Value;

use super::cache::{self, Context, Current};
use super::feed::Foreign;
use super::schema::Fit;
use super::{lock, Agent, Cursor, Inner, Versioned, View, Written};
use crate::error::{Error, Result};
use crate::hooks::{ChangeKind, Patch, StateChange};
use crate::store::{Backend, LogRetention, NewChange, Txn};
use crate::value::accept::{self, StateInput};
use crate::value::snapshot::Snapshot;

/// A change to make, checked on the way in (its result is checked when it is applied).
#[derive(Clone)]
pub(super) enum Change {
    /// An RFC 7396 merge patch or an RFC 6902 JSON Patch (the patch says which).
    Patch(Patch),
    Replace(Arc<Snapshot>),
    /// Upgrade a state stored under an older schema version to the handle's (see `schema`);
    /// nothing to do when nothing is stored or the state is of the handle's version already.
    Migrate,
}

/// What a change came to inside the transaction.
enum Outcome {
    /// Written, waiting for the commit.
    Written(Applied),
    /// The change's result is the stored state, byte for byte: nothing is written, no version
    /// taken, no hook called, nothing logged (the reference's hook fires after every
    /// persistent state change, and a write that changes nothing changes nothing).
    Unchanged(Versioned),
}

/// A change written inside the transaction, waiting for the commit.
struct Applied {
    prev: Arc<Snapshot>,
    next: Arc<Snapshot>,
    patch: Option<Patch>,
    version: u64,
    kind: ChangeKind,
    log: Option<LogRetention>,
    /// With the log on: changes of other handles to deliver first.
    foreign: Option<Foreign>,
}

/// How many times a locked write aborted by the server to resolve a conflict is made again.
const SERIALIZATION_RETRIES: usize = 10;

impl Agent {
    /// Merges `patch` (JSON text of an object) by RFC 7396 and returns the full merged state.
    pub fn set_state(&self, patch: &[u8]) -> Result<Arc<Snapshot>> {
        self.set_state_if(patch, None).map(|v| v.state)
    }

    /// Like [`Agent::set_state`], but only when the stored version is `expected` (when given);
    /// otherwise [`Error::Conflict`] and nothing is written. Returns the new state and version.
    pub fn set_state_if(&self, patch: &[u8], expected: Option<u64>) -> Result<Versioned> {
        self.set_state_written(patch, expected)
            .map(Written::versioned)
    }

    /// [`Agent::set_state_if`], also saying whether the write committed a change (see
    /// [`Written`]): for a binding that keeps its own copy of the state and derives the next
    /// one from it and the patch.
    pub fn set_state_written(&self, patch: &[u8], expected: Option<u64>) -> Result<Written> {
        self.refuse_reentry()?;
        let patch = accept::patch(patch, self.cap.bytes).map_err(|e| self.cap.explain(e.into()))?;
        self.change(Change::Patch(patch), expected)
    }

    /// Applies an RFC 6902 JSON Patch (`operations`: JSON text of an array of operations:
    /// `add`, including `/-` to append to an array, `remove`, `replace`, `move`, `copy`,
    /// `test`) to the state, all or nothing, in one write transaction that starts from the
    /// latest committed state, and returns the new state. Hooks and the validator see the
    /// operations as the change's patch ([`ChangeKind::JsonPatch`]); the change log keeps them.
    ///
    /// Errors, with nothing written: [`Error::InvalidArgument`] for a malformed patch (not an
    /// array, an unknown `op`, a member missing, a pointer that does not parse; the message
    /// names the operation) or a result that is not a JSON object; [`Error::NoSuchPath`] when
    /// an operation's path does not exist in the state (or an index is out of range);
    /// [`Error::TestFailed`] when a `test` does not hold; [`Error::Json`], [`Error::Codec`],
    /// [`Error::TooLarge`] as for [`Agent::set_state`]. A patch whose result is the stored
    /// state byte for byte commits nothing.
    ///
    /// ```
    /// use agent_state::{Agent, OpenOptions};
    ///
    /// let agent = Agent::open_with(":memory:", &OpenOptions::default())?;
    /// agent.set_state(br#"{"messages":[]}"#)?;
    /// let state = agent.patch_state(
    ///     br#"[{"op":"add","path":"/messages/-","value":{"role":"user","text":"hi"}}]"#,
    /// )?;
    /// assert_eq!(state.json(), br#"{"messages":[{"role":"user","text":"hi"}]}"#);
    /// # Ok::<(), agent_state::Error>(())
    /// ```
    pub fn patch_state(&self, operations: &[u8]) -> Result<Arc<Snapshot>> {
        self.patch_state_if(operations, None).map(|v| v.state)
    }

    /// Like [`Agent::patch_state`], but only when the stored version is `expected` (when
    /// given); otherwise [`Error::Conflict`] and nothing is written.
    pub fn patch_state_if(&self, operations: &[u8], expected: Option<u64>) -> Result<Versioned> {
        self.patch_state_written(operations, expected)
            .map(Written::versioned)
    }

    /// [`Agent::patch_state_if`], also saying whether the write committed a change.
    pub fn patch_state_written(&self, operations: &[u8], expected: Option<u64>) -> Result<Written> {
        self.refuse_reentry()?;
        let patch = agent_state_value::operations::accept(operations, self.cap.bytes)
            .map_err(|e| self.cap.explain(e.into()))?;
        self.change(Change::Patch(patch), expected)
    }

    /// Replaces the state with `next` (JSON text of an object) and returns it.
    pub fn replace_state(&self, next: &[u8]) -> Result<Arc<Snapshot>> {
        self.replace_state_if(next, None).map(|v| v.state)
    }

    /// Like [`Agent::replace_state`], but only when the stored version is `expected` (when
    /// given); otherwise [`Error::Conflict`] and nothing is written.
    pub fn replace_state_if(&self, next: &[u8], expected: Option<u64>) -> Result<Versioned> {
        self.replace_state_written(next, expected)
            .map(Written::versioned)
    }

    /// [`Agent::replace_state_if`], also saying whether the write committed a change.
    pub fn replace_state_written(&self, next: &[u8], expected: Option<u64>) -> Result<Written> {
        self.refuse_reentry()?;
        // The encoded size is checked in `apply`, after the expected version, as always.
        let next = accept::state(StateInput::Replacement(next), self.cap.bytes)
            .map_err(|e| self.cap.explain(e.into()))?;
        self.change(Change::Replace(Arc::new(next)), expected)
    }

    /// Commits `change` (when the stored version is `expected`, if given), then delivers it,
    /// after any undelivered changes of other handles, to this handle's hooks.
    ///
    /// Where the backend offers optimistic writes (a server, see [`Backend::optimistic`]), the
    /// change is first computed from this handle's cache and committed only if the stored
    /// version is still the cached one (one round trip). If it moved, or the attempt failed
    /// and the store no longer confirms the cache it was computed from (so a stale cache could
    /// explain a conflict, a rejection, a codec or size error), nothing was written and the
    /// change is made again under the row's lock from the latest state: what a call returns
    /// never depends on a stale cache.
    ///
    /// A state stored under an older schema version is migrated first, as a change of its own
    /// (see `schema`), and the write is then made from the upgraded state.
    pub(super) fn change(&self, change: Change, expected: Option<u64>) -> Result<Written> {
        // Twice at most: a state migrated by this call cannot be older again, unless another
        // process keeps writing older states, which the next call sees.
        for _ in 0..2 {
            match self.change_once(change.clone(), expected) {
                Err(Error::Outdated(_)) => {
                    self.change_once(Change::Migrate, None)?;
                }
                other => return other,
            }
        }
        self.change_once(change, expected).map_err(|e| match e {
            Error::Outdated(_) => Error::Busy(
                "the state was written under an older schema version again while this call \
                 upgraded it; nothing was written, try again"
                    .to_string()
                    .into(),
            ),
            e => e,
        })
    }

    fn change_once(&self, change: Change, expected: Option<u64>) -> Result<Written> {
        let (events, result) = {
            let mut guard = self.lock_inner()?;
            let Inner { store, view } = guard.as_mut().ok_or(Error::Closed)?;
            let txn = Txn::optimistic_write(&**store)?;
            let outcome = if txn.optimistic() {
                let again = change.clone();
                let first = match self.apply(&*txn, view, change, expected) {
                    Ok(Outcome::Written(applied)) => {
                        txn.commit().map(|()| Outcome::Written(applied))
                    }
                    other => {
                        drop(txn);
                        other
                    }
                };
                match first {
                    Ok(Outcome::Written(applied)) => Outcome::Written(applied),
                    // Nothing to write, by the cache: true only if the store still holds what
                    // the cache says (no commit checked it); otherwise decided again under the
                    // row's lock from the latest state.
                    Ok(unchanged) => {
                        if cache::confirmed(&**store, &view.cache)? {
                            unchanged
                        } else {
                            view.cache = None;
                            self.locked_write(&**store, view, again, expected)?
                        }
                    }
                    // The server is gone (a commit's outcome may be unknown), or a wait
                    // already timed out: trying again would not help, and could write twice.
                    Err(e @ (Error::Unavailable(_) | Error::Busy(_) | Error::Closed)) => {
                        return Err(e)
                    }
                    // Computed from a cache the store still confirms: the failure stands (the
                    // validator or initial-state hook is not asked twice).
                    Err(e)
                        if !matches!(e, Error::Stale(_))
                            && cache::confirmed(&**store, &view.cache)? =>
                    {
                        return Err(e)
                    }
                    Err(_) => {
                        view.cache = None;
                        self.locked_write(&**store, view, again, expected)?
                    }
                }
            } else {
                let outcome = self.apply(&*txn, view, change, expected)?;
                txn.commit()?;
                outcome
            };
            let applied = match outcome {
                Outcome::Written(applied) => applied,
                Outcome::Unchanged(current) => {
                    return Ok(Written {
                        state: current.state,
                        version: current.version,
                        committed: false,
                    })
                }
            };
            let Applied {
                prev,
                next,
                patch,
                version,
                kind,
                log,
                foreign,
            } = applied;
            let mut events = match foreign {
                Some(foreign) => view.take_foreign(foreign),
                None => Vec::new(),
            };
            if let Some(cache) = view.cache.as_mut() {
                cache.committed(
                    Arc::clone(&next),
                    version,
                    self.schema.version,
                    log,
                    store.stamp(),
                );
            }
            self.hot.invalidate(); // no thread trusts its copy of the state before this write
            view.cursor = Cursor {
                version,
                state: Arc::clone(&next),
            };
            view.seq += 1;
            events.push((
                view.seq,
                StateChange {
                    next: Arc::clone(&next),
                    prev,
                    patch,
                    version,
                    kind,
                    schema: self.schema.version,
                },
            ));
            (
                events,
                Written {
                    state: next,
                    version,
                    committed: true,
                },
            )
        };
        self.deliver_all(events)?;
        Ok(result)
    }

    /// The change made under the row's lock from the latest state. A server that serializes
    /// transactions optimistically (CockroachDB; others above READ COMMITTED) may abort it
    /// to resolve a conflict with another (`Error::Stale` from the backend: nothing written);
    /// it is made again, at most [`SERIALIZATION_RETRIES`] times, then fails with
    /// [`Error::Busy`].
    fn locked_write(
        &self,
        store: &dyn Backend,
        view: &mut View,
        change: Change,
        expected: Option<u64>,
    ) -> Result<Outcome> {
        for _ in 0..SERIALIZATION_RETRIES {
            let attempt = Txn::write(store).and_then(|txn| {
                let outcome = self.apply(&*txn, view, change.clone(), expected)?;
                txn.commit()?;
                Ok(outcome)
            });
            match attempt {
                Err(Error::Stale(_)) => view.cache = None,
                other => return other,
            }
        }
        Err(Error::Busy(
            format!(
                "the server aborted the write {SERIALIZATION_RETRIES} times in a row to resolve \
             conflicts with other transactions (SQLSTATE 40001 or 40P01); nothing was written, \
             try again"
            )
            .into(),
        ))
    }

    /// Inside the write transaction: read the latest state, compute the next one, check it
    /// (codec and size, then the validator) and write it, with its log entry when the log is
    /// on. Changes of other handles not yet delivered to this handle's hooks are collected
    /// too, so hooks see every logged change in commit order.
    fn apply(
        &self,
        store: &dyn Backend,
        view: &mut View,
        change: Change,
        expected: Option<u64>,
    ) -> Result<Outcome> {
        let (prev, version, log, logged, stored, schema) = match (
            cache::current(store, &mut view.cache, Context::WriteTransaction),
            &change,
        ) {
            (Ok(current), _) => {
                if current.version == 0 && store.optimistic() {
                    // A first write's version depends on the agent's tombstone: it is made
                    // under the row's lock, before the initial-state hook is asked (once).
                    return Err(Error::stale());
                }
                let (prev, stored) = match &current.stored {
                    Some(state) => (Arc::clone(state), true),
                    None => (self.initial()?, false),
                };
                let schema = match (stored, self.fit(current.schema), &change) {
                    // Nothing stored, or stored as this handle writes it: nothing to migrate.
                    (false, ..) | (true, Fit::Current, _) => None,
                    (true, Fit::Newer, _) => return Err(self.newer(current.schema)),
                    (true, Fit::Older, Change::Migrate) => Some(current.schema),
                    // Migrated first, then written (`change`); a compare-and-set that cannot
                    // hold fails before anything is committed, a migration included.
                    (true, Fit::Older, _) => match expected {
                        Some(expected) if expected != current.version => None,
                        _ => return Err(Error::outdated()),
                    },
                };
                if matches!(change, Change::Migrate) && schema.is_none() {
                    return Ok(Outcome::Unchanged(Versioned {
                        state: prev,
                        version: current.version,
                    }));
                }
                (
                    prev,
                    current.version,
                    current.log,
                    current.logged,
                    stored,
                    schema,
                )
            }
            // A replacement needs nothing of the previous state, so it can repair an entry
            // that no longer decodes; hooks then see `{}` as prev.
            (Err(Error::Corrupt(_)), Change::Replace(_)) => {
                let version = store.stored_version()?;
                (
                    Arc::new(Snapshot::new(Value::Object(Default::default()))),
                    version,
                    store.log_retention()?,
                    false,
                    false,
                    None,
                )
            }
            (Err(e), _) => return Err(e),
        };
        if let Some(expected) = expected {
            if expected != version {
                return Err(Error::Conflict {
                    expected,
                    actual: version,
                    message: format!(
                        "expected version {expected}, but the state is at version {version}; \
                         nothing was written"
                    ),
                });
            }
        }
        // Merged without a cap first: a change that leaves the stored state as it is writes
        // nothing, so it cannot be too large, even when another handle's larger cap let the
        // stored state grow past this one's.
        let (next, patch, kind) = match (change, schema) {
            (Change::Patch(patch), _) => {
                let kind = match patch.operations() {
                    Some(_) => ChangeKind::JsonPatch,
                    None => ChangeKind::Merge,
                };
                (Arc::new(prev.apply(&patch, usize::MAX)?), Some(patch), kind)
            }
            (Change::Replace(next), _) => (next, None, ChangeKind::Replace),
            // The upgrade checks its result against the codec and the cap, step by step.
            (Change::Migrate, Some(from)) => (
                self.upgrade(from, &prev)?,
                None,
                ChangeKind::Migration { from },
            ),
            (Change::Migrate, None) => unreachable!("returned above: nothing to migrate"),
        };
        // A migration that leaves the state's bytes as they were still records the new schema.
        let migration = matches!(kind, ChangeKind::Migration { .. });
        if stored && !migration && next.same_encoding(&prev) {
            return Ok(Outcome::Unchanged(Versioned {
                state: prev,
                version,
            }));
        }
        if next.len() > self.cap.bytes {
            return Err(self
                .cap
                .refuses_state(next.len(), stored.then(|| prev.len())));
        }
        // A first write (nothing stored: never written, or deleted) takes the version after
        // every deleted one, so that a version read before a deletion never matches again.
        let first = version == 0;
        let version = if first {
            store.first_version()?
        } else {
            version + 1
        };
        let mut patch = patch;
        let validator = lock(&self.validator).clone();
        if let Some(validator) = validator {
            let proposed = StateChange {
                next: Arc::clone(&next),
                prev: Arc::clone(&prev),
                patch,
                version,
                kind,
                schema: self.schema.version,
            };
            self.locked_hook(|| validator.validate(&proposed))
                .map_err(|m| match kind {
                    ChangeKind::Migration { from } => Error::Migration {
                        from,
                        message: format!(
                            "the validator rejected the state upgraded from schema version \
                             {from} to {}: {m}",
                            self.schema.version
                        ),
                    },
                    _ => Error::Rejected(format!("the validator rejected the change: {m}")),
                })?;
            patch = proposed.patch;
        }
        let mut foreign = None;
        if log.is_some() {
            // Other handles' pending changes are read before this change is written: logging
            // prunes, and could drop the predecessor of one of them.
            let before = Current {
                stored: (!first).then(|| Arc::clone(&prev)),
                version: if first { 0 } else { version - 1 },
                schema: schema.unwrap_or(self.schema.version),
                log,
                logged,
            };
            foreign = Some(self.foreign_changes(store, &view.cursor, &before)?);
        }
        store.write_change(
            &NewChange {
                prev_logged: logged,
                first,
                version,
                at_ms: crate::store::now_ms(),
                writer: self.writer,
                patch: patch.as_ref().map(|p| p.json()),
                schema: self.schema.version,
                migrated_from: match kind {
                    ChangeKind::Migration { from } => Some(from),
                    _ => None,
                },
                // The first change of an incarnation: its prev is the writer's initial
                // state, which other handles cannot know.
                prev: first.then(|| prev.json()),
                next: &next,
            },
            log,
        )?;
        Ok(Outcome::Written(Applied {
            prev,
            next,
            patch,
            version,
            kind,
            log,
            foreign,
        }))
    }

    /// Point-in-time recovery: replaces the state with the state at `version` (see
    /// [`Agent::state_at`]), as a new change.
    pub fn restore(&self, version: u64) -> Result<Versioned> {
        // A stored state is a checked one, encoded: it is the replacement as it is. Its size
        // (a smaller max_value_bytes may now refuse it) is checked before anything is written.
        // Upgraded to this handle's schema version: a state of an older one is never written
        // back as if it were of the current one.
        let old = self.state_at_upgraded(version)?;
        if old.len() > self.cap.bytes {
            return Err(self.cap.refuses_state(old.len(), None));
        }
        self.change(Change::Replace(old), None)
            .map(Written::versioned)
    }
}
