//! `import`: agents from `export`'s JSON Lines into a store, through the library.
//!
//! Versions: a version belongs to the store that counted it, so the library gives each
//! imported state the target's next version (1 in a fresh store), as for any write; the
//! report prints both. Each state is written by a replacement, so the target's change log (if
//! on) records it and its watchers see it. A target that already holds a state is left alone
//! (AGENT_ERR_CONFLICT) unless `--force`: the check is the library's compare-and-set on
//! version 0, so no other writer can slip in between the check and the write.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

use agent_state::options::DEFAULT_MAX_VALUE_BYTES;
use agent_state::Error;
use serde_json::{json, Value};

use crate::args::Global;
use crate::failure::{Failure, Status};
use crate::open::{open, Access};
use crate::output::Output;
use crate::progress::Progress;
use crate::transfer::{self, Record};

/// Room for a line's `agent` and `version` around a state of `max_value_bytes`.
const LINE_OVERHEAD: usize = 64 * 1024;

pub fn import(
    store: &Path,
    global: &Global,
    out: Output,
    input: &Path,
    force: bool,
) -> Result<(), Failure> {
    // Every line is read and checked before the store is opened, so bad input neither creates
    // the target nor leaves half an import in it.
    let records = if input.as_os_str() == "-" {
        read_records(io::stdin().lock(), "standard input", global)?
    } else {
        let what = input.display().to_string();
        let file = File::open(input).map_err(|e| Failure::input(&what, e))?;
        read_records(BufReader::new(file), &what, global)?
    };
    let agent = open(store, global, Access::Write)?;
    let progress = Progress::new("import", records.len() as u64);
    let mut agents = Vec::with_capacity(records.len());
    for (number, record) in records {
        let expected = if force { None } else { Some(0) };
        let written = agent
            .replace_state_if(&record.state, expected)
            .map_err(|e| match e {
                Error::Conflict { message: m, .. } => Failure::new(
                    Status::CONFLICT,
                    format!(
                        "line {number}: the store already holds a state ({m}); --force replaces it"
                    ),
                ),
                e => Failure::context(&format!("line {number}"), e),
            })?;
        agents.push(json!({
            "agent": global.agent.as_ref().map_or(Value::Null, |id| Value::String(id.clone())),
            "source_version": record.version,
            "version": written.version,
        }));
        progress.advance();
    }
    progress.finish();
    let report = json!({ "imported": agents.len(), "agents": agents });
    out.document(&agent_state::value::json::to_vec(&report))
}

/// The non-blank lines of `reader`, numbered from 1, decoded. An import writes one agent (the
/// one `--agent` selects), so a second line is refused as soon as it is seen.
fn read_records(
    mut reader: impl BufRead,
    what: &str,
    global: &Global,
) -> Result<Vec<(usize, Record)>, Failure> {
    let max_line = global
        .max_value_bytes
        .map_or(DEFAULT_MAX_VALUE_BYTES, |n| n as usize)
        .saturating_add(LINE_OVERHEAD);
    let mut records = Vec::new();
    let mut line = Vec::new();
    for number in 1.. {
        line.clear();
        // At most one byte over the cap is read: a runaway line is refused, not buffered.
        let read = reader
            .by_ref()
            .take(max_line as u64 + 1)
            .read_until(b'\n', &mut line)
            .map_err(|e| Failure::input(what, e))?;
        if read == 0 {
            break;
        }
        if line.len() > max_line {
            return Err(Failure::new(
                Status::TOO_LARGE,
                format!("{what}: line {number} is over {max_line} bytes (max_value_bytes and room for the agent line)"),
            ));
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if !records.is_empty() {
            return Err(Failure::invalid(format!(
                "{what}: line {number} is a second agent: an import writes one agent, the one \
                 --agent selects (or a file's single agent)"
            )));
        }
        records.push((number, transfer::decode(&line, number)?));
    }
    Ok(records)
}
