//! Queries of the change log: the changes after a version, and the state at a version.

use std::sync::Arc;

use super::cache::{self, Context};
use super::{Agent, Inner};
use crate::error::{Error, Result};
use crate::store::{LoggedChange, Txn};
use crate::value::accept;
use crate::value::snapshot::Snapshot;

impl Agent {
    /// The retained changes with a version above `after`, oldest first, as a JSON array of
    /// `{"version", "at" (ms since the epoch), "patch" (null for a replace), "next"}`.
    pub fn changes_since(&self, after: u64) -> Result<Vec<u8>> {
        let mut guard = self.lock_inner()?;
        let Inner { store, view } = guard.as_mut().ok_or(Error::Closed)?;
        let txn = Txn::snapshot(&**store)?;
        let current = cache::current(&*txn, &mut view.cache, Context::ReadTransaction)?;
        if current.log.is_none() {
            return Err(Error::InvalidArgument(
                "the change log is off: open the store with the change_log option".into(),
            ));
        }
        if after > current.version {
            return Err(Error::InvalidArgument(format!(
                "version {after} is in the future (the state is at version {})",
                current.version
            )));
        }
        let changes = txn.changes_after(after)?;
        if after < current.version && changes.first().map(|c| c.version) != Some(after + 1) {
            return Err(Error::Gap(format!(
                "the change log no longer holds the changes after version {after} (oldest retained: {})",
                changes.first().map(|c| c.version.to_string()).unwrap_or_else(|| "none".into())
            )));
        }
        Ok(changes_json(&changes))
    }

    /// The state at a version: the current one, one the change log retains, or version 0 (the
    /// initial state). [`Error::Gap`] when the log does not retain it.
    pub fn state_at(&self, version: u64) -> Result<Arc<Snapshot>> {
        let mut guard = self.lock_inner()?;
        let Inner { store, view } = guard.as_mut().ok_or(Error::Closed)?;
        let stored = {
            let txn = Txn::snapshot(&**store)?;
            let current = cache::current(&*txn, &mut view.cache, Context::ReadTransaction)?;
            if version == current.version {
                current.stored
            } else if version == 0 {
                None
            } else if version > current.version {
                return Err(Error::InvalidArgument(format!(
                    "version {version} is in the future (the state is at version {})",
                    current.version
                )));
            } else {
                let Some(c) = txn.change_at(version)? else {
                    return Err(Error::Gap(format!(
                        "version {version} is not retained by the change log"
                    )));
                };
                Some(Arc::new(accept::decode_stored(&c.next)?))
            }
        };
        // The read transaction is over; the initial-state hook runs under the handle's lock,
        // as it does for every read.
        match stored {
            Some(state) => Ok(state),
            None => self.initial(),
        }
    }
}

/// The JSON array of [`Agent::changes_since`]. The logged patch and state are compact JSON
/// already, so they are copied in as they are instead of being parsed and written again.
fn changes_json(changes: &[LoggedChange]) -> Vec<u8> {
    let mut out = b"[".to_vec();
    for (i, c) in changes.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(
            format!("{{\"version\":{},\"at\":{},\"patch\":", c.version, c.at_ms).as_bytes(),
        );
        out.extend_from_slice(c.patch.as_deref().unwrap_or(b"null"));
        out.extend_from_slice(b",\"next\":");
        out.extend_from_slice(&c.next);
        out.push(b'}');
    }
    out.push(b']');
    out
}
