//! A store's agents as a whole: list them, delete one (its state, versions and change log, in
//! one transaction, erased), expire the idle ones in bounded batches.
//!
//! Each function opens a connection of its own to the store at `path` with the open options
//! (`busy_timeout_ms`, `server_timeout_ms`, `max_connections`, `read_only`; `agent_id` and the
//! agent's own options are not used; on PostgreSQL the process's pool is shared with its
//! handles), makes its call and closes it. They may run on any thread, under a
//! [`Cancel`](crate::Cancel) like the agent's calls: one already fired ends the call before it
//! begins; one fired while it waits (for a lock, a pooled connection, the server) ends the
//! wait, nothing deleted.
//!
//! **What a deletion does to open handles** (in this process or another): at its next call a
//! handle finds nothing stored: a read returns its initial state at version 0. With the change
//! log on, its hooks get the deletion as one change (by [`Agent::poll`](crate::Agent::poll),
//! or ahead of its next write): from the last state they saw to the handle's initial state, a
//! replacement (`patch` `None`), at version 0. The agent's next first write takes the version
//! after the one it was deleted at (a tombstone keeps a 64-bit hash of the id, not the id, and
//! that version), so a compare-and-set against a version read before the deletion never
//! succeeds after it.

use std::path::Path;
use std::time::Duration;

use crate::backends;
use crate::error::{Error, Result};
use crate::options::{OpenOptions, MAX_AGENT_ID_BYTES};
use crate::store::now_ms;
pub use crate::store::{AgentInfo, AgentQuery, MAX_LIST_LIMIT};

/// The agents with a state stored in the store at `path` that `query` selects, ordered by id
/// (byte order of the UTF-8), at most `query.limit` (1 to [`MAX_LIST_LIMIT`]). For the next
/// page, pass the last id as `query.after`. A SQLite file's single agent, opened without an
/// `agent_id`, is listed with the id `""` (first). A page costs what it holds, not what the
/// store holds.
pub fn list_agents(
    path: &Path,
    options: &OpenOptions,
    query: &AgentQuery,
) -> Result<Vec<AgentInfo>> {
    check_limit(query.limit)?;
    if let Some(prefix) = &query.prefix {
        check_text(prefix, "prefix")?;
    }
    if let Some(after) = &query.after {
        check_text(after, "after")?;
    }
    crate::cancel::check("before it began")?;
    backends::open_agents(path, &options.store_options())?.list_agents(query)
}

/// Deletes the agent `id` of the store at `path`: its state, its versions and its change log
/// go in one transaction (its change-log setting stays). Returns the version it had, or
/// `None` when nothing was stored. With `if_version`, only if its state is still at that
/// version (0: nothing stored), else [`Error::Conflict`], nothing deleted.
///
/// On SQLite, once it returns, no byte of the deleted state or of its history is left in the
/// database file or its WAL (freed pages are zeroed, the WAL is emptied; a read in another
/// connection that outlasts the busy timeout makes it fail with [`Error::Busy`] after the
/// deletion: call it again to finish the erasure). `id` `""` is a SQLite file's single agent.
pub fn delete_agent(
    path: &Path,
    options: &OpenOptions,
    id: &str,
    if_version: Option<u64>,
) -> Result<Option<u64>> {
    if id.len() > MAX_AGENT_ID_BYTES || id.contains('\0') {
        return Err(Error::InvalidArgument(
            "the agent id must be a string of at most 255 bytes (UTF-8), without NUL".to_string(),
        ));
    }
    crate::cancel::check("before it began")?;
    let allow = |stored: u64| match if_version {
        Some(expected) if expected != stored => Err(Error::Conflict {
            expected,
            actual: stored,
            message: format!(
                "expected version {expected}, but the agent is at version {stored}; nothing was \
                 deleted"
            ),
        }),
        _ => Ok(()),
    };
    backends::open_agents(path, &options.store_options())?.delete_agent(id, &allow)
}

/// Deletes, as [`delete_agent`] does, at most `limit` agents (1 to [`MAX_LIST_LIMIT`]) of the
/// store at `path` whose state was last written more than `idle` ago, the longest idle first,
/// and returns them; with `dry_run`, deletes nothing and returns those it would delete. An
/// agent written during the call is not deleted. A call costs what it deletes, whatever the
/// store holds: run it until it returns fewer than `limit` (a cron job, a timer).
pub fn expire_agents(
    path: &Path,
    options: &OpenOptions,
    idle: Duration,
    limit: usize,
    dry_run: bool,
) -> Result<Vec<AgentInfo>> {
    check_limit(limit)?;
    let idle_ms = i64::try_from(idle.as_millis()).unwrap_or(i64::MAX);
    crate::cancel::check("before it began")?;
    let before = now_ms().saturating_sub(idle_ms);
    backends::open_agents(path, &options.store_options())?.expire_agents(before, limit, dry_run)
}

fn check_limit(limit: usize) -> Result<()> {
    if !(1..=MAX_LIST_LIMIT).contains(&limit) {
        return Err(Error::InvalidArgument(format!(
            "limit must be from 1 to {MAX_LIST_LIMIT}, got {limit}"
        )));
    }
    Ok(())
}

fn check_text(text: &str, what: &str) -> Result<()> {
    if text.len() > MAX_AGENT_ID_BYTES || text.contains('\0') {
        return Err(Error::InvalidArgument(format!(
            "{what} must be a string of at most 255 bytes (UTF-8), without NUL"
        )));
    }
    Ok(())
}

/// `entries` as one JSON array, as the C ABI and the CLI give them:
/// `[{"id":"...","version":N,"bytes":N,"written_at":MS},...]` (`written_at`: milliseconds since
/// the Unix epoch).
pub fn entries_json(entries: &[AgentInfo]) -> Vec<u8> {
    let array: Vec<serde_json::Value> = entries.iter().map(entry_json).collect();
    crate::value::json::to_vec(&serde_json::Value::Array(array))
}

/// One entry as a JSON object (see [`entries_json`]).
pub fn entry_json(entry: &AgentInfo) -> serde_json::Value {
    serde_json::json!({
        "id": entry.id,
        "version": entry.version,
        "bytes": entry.bytes,
        "written_at": entry.written_ms,
    })
}
