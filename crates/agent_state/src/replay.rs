//! Rebuilding logged states (for an agent's history and feed, and for the store's watcher,
//! which delivers the same changes to watches). The change log holds a merge's patch, and the full state only at
//! checkpoints (see [`crate::store::LoggedChange::next`]): a logged state is its change's stored
//! `next`, or the state before it merged with its patch, exactly as the writer merged it.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::store::{Backend, LoggedChange};
use crate::value::snapshot::Snapshot;
use crate::value::{accept, operations};

/// The state after `change`, from its stored state or from `prev` (the state before it) and
/// its patch; `None` when neither is at hand.
pub(crate) fn next_state(
    change: &LoggedChange,
    prev: Option<&Arc<Snapshot>>,
) -> Result<Option<Arc<Snapshot>>> {
    if let Some(next) = &change.next {
        return Ok(Some(Arc::new(accept::stored(next)?)));
    }
    let (Some(prev), Some(patch)) = (prev, &change.patch) else {
        return Ok(None);
    };
    merge_stored(prev, patch, change.version).map(Some)
}

/// `prev` merged with the stored patch that made `version`, exactly as its writer merged it.
pub(crate) fn merge_stored(
    prev: &Arc<Snapshot>,
    patch: &[u8],
    version: u64,
) -> Result<Arc<Snapshot>> {
    let corrupt = |e: Error| Error::Corrupt(format!("the stored patch of version {version}: {e}"));
    // A merge patch (an object) or a JSON Patch (an array).
    let patch = operations::stored(patch).map_err(|e| corrupt(e.into()))?;
    // The writer's size cap held when it merged; a replay never refuses what was committed.
    let next = prev
        .apply(&patch, usize::MAX)
        .map_err(|e| corrupt(e.into()))?;
    Ok(Arc::new(next))
}

/// The stored state `read` describes: its base (or `have`, the caller's copy at the version
/// the patches follow) merged with each patch in order.
pub(crate) fn stored_state(
    read: crate::store::StoredRead,
    have: Option<&Arc<Snapshot>>,
) -> Result<Arc<Snapshot>> {
    let (mut state, mut version) = match (read.base, have) {
        (Some((bytes, version)), _) => (Arc::new(accept::stored(&bytes)?), version),
        (None, Some(have)) => (Arc::clone(have), read.version - read.patches.len() as u64),
        (None, None) => {
            return Err(Error::Corrupt(
                "the store returned patches without the state they apply to".to_string(),
            ))
        }
    };
    if version + read.patches.len() as u64 != read.version {
        return Err(Error::Corrupt(format!(
            "version {} is stored as the state of version {version} and {} patches",
            read.version,
            read.patches.len()
        )));
    }
    for patch in &read.patches {
        version += 1;
        state = merge_stored(&state, patch, version)?;
    }
    Ok(state)
}

/// The state at `version`, rebuilt from the newest stored state at or below it and the
/// patches after that; `None` when the log cannot rebuild it.
pub(crate) fn rebuild(store: &dyn Backend, version: u64) -> Result<Option<Arc<Snapshot>>> {
    let mut state: Option<Arc<Snapshot>> = None;
    let mut expected = None;
    for change in store.replay_to(version)? {
        if expected.is_some_and(|e| e != change.version) {
            return Ok(None);
        }
        state = next_state(&change, state.as_ref())?;
        if state.is_none() {
            return Ok(None);
        }
        expected = Some(change.version + 1);
    }
    Ok(state.filter(|_| expected == Some(version + 1)))
}
