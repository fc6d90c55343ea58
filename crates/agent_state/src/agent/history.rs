//! Queries of the change log: the changes after a version, and the state at a version.

use std::sync::Arc;

use super::cache::{self, Context};
use super::{Agent, Inner};
use crate::error::{Error, Result};
use crate::replay;
use crate::store::{LoggedChange, Txn};
use crate::value::snapshot::Snapshot;

impl Agent {
    /// The retained changes with a version above `after`, oldest first, as a JSON array of
    /// `{"version", "at" (ms since the epoch), "kind" ("merge", "json_patch", "replace" or
    /// "migration"), "schema" (the schema version of `next`), "migrated_from" (for a schema
    /// migration, the version it upgraded from; else null), "patch" (the merge patch, or the
    /// JSON Patch's operations; null for a replace or a migration), "next"}`. States are as stored: a caller
    /// that wants one in the handle's current shape upgrades it ([`Agent::upgrade_state`]).
    pub fn changes_since(&self, after: u64) -> Result<Vec<u8>> {
        let mut guard = self.lock_inner()?;
        let Inner { store, view } = guard.as_mut().ok_or(Error::Closed)?;
        let txn = Txn::snapshot(&**store)?;
        let current = cache::current(&*txn, &mut view.cache, Context::ReadTransaction)?;
        if current.log.is_none() {
            return Err(Error::InvalidArgument(
                "the change log is off for this agent: open it with the change_log option".into(),
            ));
        }
        if after > current.version {
            if after < txn.first_version()? {
                return Err(Error::Gap {
                    missing: after + 1..=current.version.max(after + 1),
                    message: format!(
                        "version {after} was the agent's before it was deleted; the history of \
                         a deleted agent is gone (the state is at version {})",
                        current.version
                    ),
                });
            }
            return Err(Error::InvalidArgument(format!(
                "version {after} is in the future (the state is at version {})",
                current.version
            )));
        }
        let Some(retention) = current.log else {
            unreachable!("checked above")
        };
        let changes = txn.changes_after(after, retention)?;
        // From 0, the history starts at the agent's first change: after a deletion, the first
        // of its new incarnation (the one that logged its prev).
        let from_start = after == 0 && changes.first().is_some_and(|c| c.prev.is_some());
        if after < current.version
            && !from_start
            && changes.first().map(|c| c.version) != Some(after + 1)
        {
            // Missing: the changes after `after` up to the oldest one retained (or all of them).
            let last_missing = changes.first().map_or(current.version, |c| c.version - 1);
            return Err(Error::Gap {
                missing: after + 1..=last_missing.max(after + 1),
                message: format!(
                    "the change log no longer holds the changes after version {after} (oldest \
                     retained: {})",
                    changes
                        .first()
                        .map(|c| c.version.to_string())
                        .unwrap_or_else(|| "none".into())
                ),
            });
        }
        // Each change's state: stored, or the previous one merged with its patch (the first
        // one's predecessor rebuilt from the log when needed).
        let mut states = Vec::with_capacity(changes.len());
        let mut prev: Option<Arc<Snapshot>> = None;
        for c in &changes {
            let next = match replay::next_state(c, prev.as_ref())? {
                Some(next) => next,
                None => {
                    replay::rebuild(&*txn, c.version)?.ok_or_else(|| unrebuildable(c.version))?
                }
            };
            states.push(Arc::clone(&next));
            prev = Some(next);
        }
        Ok(changes_json(&changes, &states))
    }

    /// The state at a version: the current one, one the change log retains, or version 0 (the
    /// initial state), as stored (see [`Agent::state_at_stored`] for its schema version, and
    /// [`Agent::state_at_upgraded`]). [`Error::Gap`] when the log does not retain it.
    pub fn state_at(&self, version: u64) -> Result<Arc<Snapshot>> {
        self.state_at_stored(version).map(|(state, _)| state)
    }

    /// [`Agent::state_at`] upgraded to this handle's schema version by its steps (nothing is
    /// written): what [`Agent::restore`] writes back. [`Error::NewerSchema`] for a state of a
    /// newer version; [`Error::Migration`] as a migration would fail.
    pub fn state_at_upgraded(&self, version: u64) -> Result<Arc<Snapshot>> {
        let (state, schema) = self.state_at_stored(version)?;
        match self.fit(schema) {
            super::schema::Fit::Current => Ok(state),
            super::schema::Fit::Newer => Err(self.newer(schema)),
            super::schema::Fit::Older => self.upgrade(schema, &state),
        }
    }

    /// [`Agent::state_at`] with the schema version the state was written under (the handle's
    /// own for version 0, the initial state).
    pub fn state_at_stored(&self, version: u64) -> Result<(Arc<Snapshot>, u32)> {
        let mut guard = self.lock_inner()?;
        let Inner { store, view } = guard.as_mut().ok_or(Error::Closed)?;
        let stored = {
            let txn = Txn::snapshot(&**store)?;
            let current = cache::current(&*txn, &mut view.cache, Context::ReadTransaction)?;
            if version == current.version {
                current.stored.map(|s| (s, current.schema))
            } else if version == 0 {
                None
            } else if version > current.version {
                return Err(Error::InvalidArgument(format!(
                    "version {version} is in the future (the state is at version {})",
                    current.version
                )));
            } else {
                let retained = match current.log {
                    Some(retention) => txn.change_at(version, retention)?,
                    None => None, // the log is off: it retains nothing
                };
                let Some(entry) = retained else {
                    return Err(Error::Gap {
                        missing: version..=version,
                        message: format!("version {version} is not retained by the change log"),
                    });
                };
                let state =
                    replay::rebuild(&*txn, version)?.ok_or_else(|| unrebuildable(version))?;
                Some((state, entry.schema))
            }
        };
        // The read transaction is over; the initial-state hook runs under the handle's lock,
        // as it does for every read.
        match stored {
            Some(stored) => Ok(stored),
            None => Ok((self.initial()?, self.schema.version)),
        }
    }
}

/// A retained change whose state the log cannot rebuild: the log was changed behind the
/// library's back.
fn unrebuildable(version: u64) -> Error {
    Error::Corrupt(format!(
        "the change log keeps version {version} but not what rebuilds its state"
    ))
}

/// The JSON array of [`Agent::changes_since`]. The logged patch and the states are compact
/// JSON already, so they are copied in as they are instead of being parsed and written again.
fn changes_json(changes: &[LoggedChange], states: &[Arc<Snapshot>]) -> Vec<u8> {
    let mut out = b"[".to_vec();
    for (i, (c, next)) in changes.iter().zip(states).enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let migrated_from = c
            .migrated_from
            .map_or_else(|| "null".to_string(), |f| f.to_string());
        // The kind, as hooks name it: a merge patch is an object, a JSON Patch an array.
        let kind = match (c.migrated_from, c.patch.as_deref()) {
            (Some(_), _) => "migration",
            (None, Some([b'[', ..])) => "json_patch",
            (None, Some(_)) => "merge",
            (None, None) => "replace",
        };
        out.extend_from_slice(
            format!(
                "{{\"version\":{},\"at\":{},\"kind\":\"{kind}\",\"schema\":{},\"migrated_from\":{migrated_from},\"patch\":",
                c.version, c.at_ms, c.schema
            )
            .as_bytes(),
        );
        out.extend_from_slice(c.patch.as_deref().unwrap_or(b"null"));
        out.extend_from_slice(b",\"next\":");
        out.extend_from_slice(next.json());
        out.push(b'}');
    }
    out.push(b']');
    out
}
