//! The commands on a store's agents as a whole: `ls`, `rm`, `expire`, through the library's
//! `list_agents`, `delete_agent` and `expire_agents`, which open the store, not an agent.
//!
//! `ls` and `expire` print one JSON line per agent, the library's listing entry
//! (`agent_state::agents::entry_json`: `{"id","version","bytes","written_at"}`, `written_at` in
//! milliseconds since the Unix epoch, as the C ABI gives it). Each line is printed (and
//! flushed) as soon as its page or batch is read, so a store of any size streams, and a
//! reader that stops early (`| head`) ends the command quietly.

use std::path::Path;
use std::time::Duration;

use agent_state::agents::{self, AgentInfo, AgentQuery, MAX_LIST_LIMIT};
use serde_json::{json, Value};

use crate::args::Global;
use crate::failure::Failure;
use crate::open::{store_options, Access};
use crate::output::{write_line, Output};

/// How many ids one page of `ls` reads.
pub const PAGE: usize = 1000;

/// What `expire` does.
#[derive(Debug, Clone, Copy)]
pub struct Expiry {
    /// How long an agent must not have been written.
    pub idle: Duration,
    /// Delete nothing, print the first batch.
    pub dry_run: bool,
    /// The most agents deleted in all (`None`: every idle one).
    pub limit: Option<u64>,
    /// The most agents one call of the library (one transaction) deletes.
    pub batch: u64,
}

fn print(entry: &AgentInfo) -> Result<(), Failure> {
    write_line(&agent_state::value::json::to_vec(&agents::entry_json(
        entry,
    )))
}

/// The size of the next page or batch: `size`, or fewer when `limit` leaves fewer to print.
fn next_size(size: usize, limit: Option<u64>, done: u64) -> usize {
    match limit {
        Some(limit) => size.min(usize::try_from(limit - done).unwrap_or(usize::MAX)),
        None => size,
    }
}

/// `ls`: every agent (or those with `prefix`, after `after`, at most `limit`), page by page.
pub fn ls(
    store: &Path,
    global: &Global,
    prefix: Option<&str>,
    after: Option<&str>,
    limit: Option<u64>,
) -> Result<(), Failure> {
    let options = store_options(global, Access::Read, "ls", false)?;
    let mut query = AgentQuery {
        prefix: prefix.map(str::to_string),
        after: after.map(str::to_string),
        limit: PAGE,
    };
    let mut printed = 0u64;
    loop {
        query.limit = next_size(PAGE, limit, printed);
        if query.limit == 0 {
            return Ok(());
        }
        let page = agents::list_agents(store, &options, &query)?;
        for entry in &page {
            print(entry)?;
        }
        printed += page.len() as u64;
        match page.last() {
            Some(last) if page.len() == query.limit => query.after = Some(last.id.clone()),
            _ => return Ok(()),
        }
    }
}

/// `rm`: deletes agent `id`, prints `{"id":ID,"deleted_version":V}` (null: nothing stored).
pub fn rm(
    store: &Path,
    global: &Global,
    out: Output,
    id: &str,
    if_version: Option<u64>,
) -> Result<(), Failure> {
    let options = store_options(global, Access::Write, "rm", true)?;
    let deleted = agents::delete_agent(store, &options, id, if_version)?;
    let report = json!({ "id": id, "deleted_version": deleted.map_or(Value::Null, Value::from) });
    out.document(&agent_state::value::json::to_vec(&report))
}

/// `expire`: deletes the idle agents batch by batch, printing each; a dry run prints the
/// first batch only (it deletes nothing, so a second call would find the same agents).
pub fn expire(store: &Path, global: &Global, expiry: Expiry) -> Result<(), Failure> {
    let access = if expiry.dry_run {
        Access::Read
    } else {
        Access::Write
    };
    let options = store_options(global, access, "expire", false)?;
    let batch = usize::try_from(expiry.batch)
        .unwrap_or(MAX_LIST_LIMIT)
        .min(MAX_LIST_LIMIT);
    let mut deleted = 0u64;
    loop {
        let size = next_size(batch, expiry.limit, deleted);
        if size == 0 {
            return Ok(());
        }
        let expired = agents::expire_agents(store, &options, expiry.idle, size, expiry.dry_run)?;
        for entry in &expired {
            print(entry)?;
        }
        deleted += expired.len() as u64;
        if expired.len() < size {
            return Ok(());
        }
        if expiry.dry_run {
            if expiry.limit.is_none_or(|limit| limit > deleted) {
                eprintln!(
                    "agent-state: expire --dry-run: these are the first batch ({size} agents); \
                     more agents may be idle (a dry run deletes nothing, so it lists one batch: \
                     --batch takes up to {MAX_LIST_LIMIT})"
                );
            }
            return Ok(());
        }
    }
}
