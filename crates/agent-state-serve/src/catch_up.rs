//! Where a new watch stream begins: a snapshot, or exactly the changes after the client's
//! `since`. Decided before the upgrade, so a bad `since` or an unknown agent is an HTTP error.

use agent_state::{Agent, Error};
use axum::extract::ws::Utf8Bytes;
use serde_json::Value;

use crate::message;
use crate::reply::{is_log_off, Failure};

/// The most changes a stream starts with; a client further behind gets a snapshot (as many as
/// a subscriber may fall behind before it is closed: the same bound on the work and memory).
pub const MAX_CHANGES: u64 = crate::feed::BACKLOG as u64;

/// The first messages of a stream, and the version they leave the client at.
pub struct Start {
    pub messages: Vec<Utf8Bytes>,
    pub version: u64,
}

/// Blocking: reads through `agent`.
pub fn start(agent: &Agent, since: Option<u64>) -> Result<Start, Failure> {
    let current = agent.get_state_versioned()?;
    if current.version == 0 {
        return Err(Failure::not_found("this agent has no state stored"));
    }
    let Some(since) = since else {
        return Ok(snapshot_of(agent)?);
    };
    if since > current.version {
        return Err(Failure::bad_request(format!(
            "since={since} is in the future (the state is at version {})",
            current.version
        )));
    }
    if current.version - since > MAX_CHANGES {
        // Further behind than a subscriber may fall: the state costs less than the changes.
        return Ok(snapshot_of(agent)?);
    }
    if since == current.version {
        return Ok(Start {
            messages: Vec::new(),
            version: since,
        });
    }
    match agent.changes_since(since) {
        Ok(text) => match from_log(&text, since)? {
            Some(start) => Ok(start),
            // A deleted agent's new history does not follow the old versions.
            None => Ok(snapshot_of(agent)?),
        },
        // Older than the log keeps, or no log: the whole state.
        Err(Error::Gap { .. }) => Ok(snapshot_of(agent)?),
        Err(e) if is_log_off(&e.to_string()) => Ok(snapshot_of(agent)?),
        Err(e) => Err(e.into()),
    }
}

/// The current state as one snapshot message.
pub fn snapshot_of(agent: &Agent) -> agent_state::Result<Start> {
    let current = agent.get_state_versioned()?;
    Ok(Start {
        messages: vec![message::snapshot(current.version, &current.state)],
        version: current.version,
    })
}

/// `changes_since`'s array as messages, or `None` when they do not follow `since` one by one.
fn from_log(text: &[u8], since: u64) -> Result<Option<Start>, Failure> {
    let entries: Vec<Value> = serde_json::from_slice(text)
        .map_err(|e| Failure::internal(format!("the change log's entries: {e}")))?;
    let mut start = Start {
        messages: Vec::with_capacity(entries.len()),
        version: since,
    };
    for entry in &entries {
        let version = entry["version"].as_u64().unwrap_or(0);
        if version != start.version + 1 {
            return Ok(None);
        }
        start.messages.push(message::logged(entry));
        start.version = version;
    }
    Ok(Some(start))
}
