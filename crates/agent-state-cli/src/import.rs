//! `import`: agents from `export`'s JSON Lines into a store, through the library.
//!
//! Versions: a version belongs to the store that counted it, so the library gives each
//! imported state the target's next version (1 in a fresh store), as for any write; the
//! report prints both. Each state is written by a replacement, so the target's change log (if
//! on) records it and its watchers see it. A target that already holds a state is left alone
//! (AGENT_ERR_CONFLICT) unless `--force`: the check is the library's compare-and-set on
//! version 0, so no other writer can slip in between the check and the write.
//!
//! Schema versions: a state is written under the schema version its line gives (`"schema"`,
//! 0 when absent, as in the lines of older exports), so the program of that version finds it
//! current and a newer one migrates it once, as in the store it came from. With
//! `--schema-version N` the state is written under N: a line of an older schema is upgraded
//! with the steps of `--steps` (the library's `upgrade_state`) before anything is opened, and
//! a line of a newer one is refused (AGENT_ERR_NEWER_SCHEMA). Under `--force`, the target's
//! own state is the library's to judge, as for any write: one stored under a newer schema than
//! the one written is refused (AGENT_ERR_NEWER_SCHEMA), one under an older schema is migrated
//! first (a migration of its own, so it needs `--steps` from its version: else
//! AGENT_ERR_MIGRATION), then replaced. Without `--force` a target that holds a state is
//! refused (AGENT_ERR_CONFLICT) before any write, so not even a migration is committed.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

use agent_state::options::DEFAULT_MAX_VALUE_BYTES;
use agent_state::{Agent, Error, ErrorKind};
use serde_json::{json, Value};

use crate::args::Global;
use crate::failure::{Failure, Status};
use crate::open::{self, open, open_under, Access};
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
    // Each line's state as it will be written, with the schema version it is written under:
    // upgraded (or refused) before the store is opened, like any other bad input.
    let mut writes = Vec::with_capacity(records.len());
    for (number, record) in records {
        let (state, schema) = under_schema(record.state.clone(), record.schema, number, global)?;
        writes.push((number, record, state, schema));
    }
    // One line at most: the target is opened under that line's schema version (or, with no
    // line, as any other command would open it).
    let agent = match writes.first() {
        Some((.., schema)) => open_under(store, global, Access::Write, Some(u64::from(*schema)))?,
        None => open(store, global, Access::Write)?,
    };
    let progress = Progress::new("import", writes.len() as u64);
    let mut agents = Vec::with_capacity(writes.len());
    for (number, record, state, _) in writes {
        if !force {
            refuse_a_held_state(store, global, number)?;
        }
        let expected = if force { None } else { Some(0) };
        let written = agent
            .replace_state_if(&state, expected)
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

/// The state of line `number` (of schema version `schema`) as it is written, with the schema
/// version it is written under: as given under its own version, or, with `--schema-version N`,
/// under N: upgraded from an older one by the steps of `--steps` (AGENT_ERR_MIGRATION when a
/// step is missing or fails), refused from a newer one (AGENT_ERR_NEWER_SCHEMA). The upgrade
/// runs on a private in-memory handle, so nothing is opened or written on the target.
fn under_schema(
    state: Vec<u8>,
    schema: u32,
    number: usize,
    global: &Global,
) -> Result<(Vec<u8>, u32), Failure> {
    let Some(declared) = global.schema_version else {
        return Ok((state, schema));
    };
    // The library checks the range when the store is opened; a value past it is refused here
    // with the library's own message.
    let mut map = serde_json::Map::new();
    if let Some(bytes) = global.max_value_bytes {
        map.insert("max_value_bytes".into(), bytes.into());
    }
    open::schema_options(&mut map, global, Some(declared))?;
    let declared = declared as u32; // checked by schema_options: at most 1000000
    if schema == declared {
        return Ok((state, schema));
    }
    if schema > declared {
        return Err(Failure::new(
            Status::Kind(ErrorKind::NewerSchema),
            format!(
                "line {number}: the state is stored under schema version {schema}, newer than \
                 --schema-version {declared}: a newer program wrote it, and an import never \
                 writes it back in an older shape (import it without --schema-version to keep \
                 its schema version); nothing was written"
            ),
        ));
    }
    let upgrader = Agent::open_with(std::path::Path::new(":memory:"), &open::from_map(map)?)?;
    let upgraded = upgrader
        .upgrade_state(&state, schema)
        .map_err(|e| Failure::context(&format!("line {number}"), e))?;
    Ok((upgraded.json().to_vec(), declared))
}

/// Without `--force`: AGENT_ERR_CONFLICT when the target already holds a state, found by a
/// read-only handle, which reads a state of any schema as stored. A writing handle would first
/// migrate a state of an older schema (committing a migration an import that is then refused
/// must not leave behind) or refuse a newer one with AGENT_ERR_NEWER_SCHEMA instead. The
/// write's compare-and-set on version 0 still covers a writer that comes in after this check.
fn refuse_a_held_state(store: &Path, global: &Global, number: usize) -> Result<(), Failure> {
    let mut map = open::connection_options(global, Access::Read);
    if let Some(id) = &global.agent {
        map.insert("agent_id".into(), id.clone().into());
    }
    let reader = Agent::open_with(store, &open::from_map(map)?)?;
    let version = reader.get_state_versioned()?.version;
    if version != 0 {
        return Err(Failure::new(
            Status::CONFLICT,
            format!(
                "line {number}: the store already holds a state (at version {version}); \
                 nothing was written; --force replaces it"
            ),
        ));
    }
    Ok(())
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
