//! `export`: the store's agents as JSON Lines on stdout (see `transfer`).

use std::path::Path;

use std::sync::Arc;

use agent_state::{Agent, Error, Snapshot};

use crate::args::Global;
use crate::failure::Failure;
use crate::open::{open, Access};
use crate::output::write_line;
use crate::progress::Progress;
use crate::transfer;

pub fn export(store: &Path, global: &Global) -> Result<(), Failure> {
    let agent = open(store, global, Access::Read)?;
    // One agent: the one --agent selects, or a file's single agent. While nothing is stored
    // (version 0) it has no state of its own, only the initial state of whoever opens it:
    // nothing to export, and an import of the empty output leaves the target as it was.
    let agents = match stored(&agent)? {
        None => vec![],
        Some(current) => vec![current],
    };
    let progress = Progress::new("export", agents.len() as u64);
    for (version, state, schema) in &agents {
        write_line(&transfer::encode(
            global.agent.as_deref(),
            *version,
            *schema,
            state,
        ))?;
        progress.advance();
    }
    progress.finish();
    Ok(())
}

/// The agent's current state as stored, with its version and the schema version it was written
/// under, or `None` while nothing is stored. The handle is read-only, so a state of any schema
/// is read as it is, never upgraded. The state and its schema are read together; a write that
/// lands between reading the version and the state (with the change log off, the old version
/// is gone: AGENT_ERR_GAP) is met by reading again.
fn stored(agent: &Agent) -> Result<Option<(u64, Arc<Snapshot>, u32)>, Failure> {
    let mut tries = 0;
    loop {
        let version = agent.get_state_versioned()?.version;
        if version == 0 {
            return Ok(None);
        }
        match agent.state_at_stored(version) {
            Ok((state, schema)) => return Ok(Some((version, state, schema))),
            Err(Error::Gap { .. }) if tries < 8 => tries += 1,
            Err(e) => return Err(e.into()),
        }
    }
}
