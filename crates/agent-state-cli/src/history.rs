//! `history`: the change log, as the library's `changes_since` gives it.

use std::path::Path;

use agent_state::Error;

use crate::args::Global;
use crate::changelog;
use crate::failure::Failure;
use crate::open::{open, Access};
use crate::output::Output;

/// How often "everything retained" is asked again when the retention pruned the oldest change
/// between finding it and reading from it (another process writing fast).
const ATTEMPTS: usize = 3;

pub fn history(
    store: &Path,
    global: &Global,
    out: Output,
    since: Option<u64>,
) -> Result<(), Failure> {
    let agent = open(store, global, Access::Read)?;
    if let Some(after) = since {
        // The library's own answer, errors included (log off, future version, gap).
        let changes = agent.changes_since(after).map_err(changelog::explain)?;
        return out.document(&changes);
    }
    let mut attempt = 0;
    loop {
        attempt += 1;
        let version = agent.get_state_versioned()?.version;
        // Nothing after the current version: cheap, and the library's own refusal when the
        // log is off.
        agent.changes_since(version).map_err(changelog::explain)?;
        let after = match version {
            0 => 0,
            v => changelog::oldest_retained(&agent, v)? - 1,
        };
        match agent.changes_since(after) {
            Ok(changes) => return out.document(&changes),
            Err(Error::Gap { .. }) if attempt < ATTEMPTS => continue,
            Err(e) => return Err(changelog::explain(e)),
        }
    }
}
