//! `export`: the store's agents as JSON Lines on stdout (see `transfer`).

use std::path::Path;

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
    let current = agent.get_state_versioned()?;
    let agents = if current.version == 0 {
        vec![]
    } else {
        vec![current]
    };
    let progress = Progress::new("export", agents.len() as u64);
    for current in &agents {
        write_line(&transfer::encode(
            global.agent.as_deref(),
            current.version,
            &current.state,
        ))?;
        progress.advance();
    }
    progress.finish();
    Ok(())
}
