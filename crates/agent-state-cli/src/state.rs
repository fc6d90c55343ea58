//! The commands on one state: get (whole, or one place), set, patch, replace, version, at,
//! restore.

use std::ffi::OsStr;
use std::path::Path;

use std::sync::Arc;

use agent_state::value::pointer::Pointer;
use agent_state::{Agent, Error, Snapshot};

use crate::args::Global;
use crate::failure::Failure;
use crate::input;
use crate::open::{open, Access};
use crate::output::Output;

pub fn get(store: &Path, global: &Global, out: Output, versioned: bool) -> Result<(), Failure> {
    let agent = open(store, global, Access::Read)?;
    let mut current = agent.get_state_versioned()?;
    if global.schema_version.is_some() {
        // Opened read-only, the handle reads the state as stored: held to the declared
        // version here (a newer one refused, an older one shown upgraded, nothing written).
        let (version, state, schema) = stored(&agent)?;
        current.version = version;
        current.state = agent.upgrade_state(state.json(), schema).map_err(explain)?;
    }
    if versioned {
        out.versioned(current.version, &current.state)
    } else {
        out.state(&current.state)
    }
}

/// `get --path POINTER [--tail N]`: the value at one place of the state, or the last `n`
/// elements of the array there, as compact JSON (pretty on a terminal).
///
/// Through the library's `get_path` / `get_tail`, which encode only that part. With
/// --schema-version the place is read in the state upgraded to that version, as `get` shows
/// it (the stored state is never written).
pub fn get_part(
    store: &Path,
    global: &Global,
    out: Output,
    pointer: &str,
    tail: Option<usize>,
) -> Result<(), Failure> {
    let agent = open(store, global, Access::Read)?;
    let part = if global.schema_version.is_some() {
        let (_, state, schema) = stored(&agent)?;
        let upgraded = agent.upgrade_state(state.json(), schema).map_err(explain)?;
        let parsed = Pointer::parse(pointer).map_err(|e| Failure::invalid(e.to_string()))?;
        match tail {
            Some(n) => upgraded.tail_json(&parsed, n),
            None => upgraded.path_json(&parsed),
        }
        .map_err(|e| Failure::from(Error::from(e)))?
    } else {
        match tail {
            Some(n) => agent.get_tail(pointer, n)?,
            None => agent.get_path(pointer)?,
        }
    };
    out.document(&part)
}

/// Which write a command makes: merge a patch, apply a JSON Patch, or replace the state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    /// `set`: an RFC 7396 merge patch.
    Merge,
    /// `patch`: an RFC 6902 JSON Patch (an array of operations).
    JsonPatch,
    /// `replace`: the whole state.
    Replace,
}

/// `set`, `patch` and `replace`: one write through the library, optionally compare-and-set.
pub fn write(
    kind: Write,
    store: &Path,
    global: &Global,
    out: Output,
    document: &OsStr,
    if_version: Option<u64>,
    versioned: bool,
) -> Result<(), Failure> {
    let agent = open(store, global, Access::Write)?;
    let what = match kind {
        Write::Merge => "patch",
        Write::JsonPatch => "JSON Patch",
        Write::Replace => "state",
    };
    let bytes = input::document(document, what, agent.max_value_bytes())?;
    let written = match kind {
        Write::Merge => agent.set_state_if(&bytes, if_version).map_err(explain)?,
        Write::JsonPatch => agent.patch_state_if(&bytes, if_version).map_err(explain)?,
        Write::Replace => agent
            .replace_state_if(&bytes, if_version)
            .map_err(explain)?,
    };
    if versioned {
        out.versioned(written.version, &written.state)
    } else {
        out.state(&written.state)
    }
}

/// `version`: the state's version with a store, else the program's (which is the library's:
/// both are this crate).
pub fn version(store: Option<&Path>, global: &Global, out: Output) -> Result<(), Failure> {
    let Some(store) = store else {
        // --agent without a store selects nothing: refused rather than ignored.
        if let Some(id) = &global.agent {
            return Err(Failure::invalid(format!(
                "--agent {id:?}: `version` without STORE prints the program's version; an agent \
                 is selected in a store"
            )));
        }
        let text = format!("{{\"agent_state\":\"{}\"}}", env!("CARGO_PKG_VERSION"));
        return out.document(text.as_bytes());
    };
    let agent = open(store, global, Access::Read)?;
    let current = agent.get_state_versioned()?;
    out.document(current.version.to_string().as_bytes())
}

pub fn at(store: &Path, global: &Global, out: Output, version: u64) -> Result<(), Failure> {
    let agent = open(store, global, Access::Read)?;
    let state = if global.schema_version.is_some() {
        agent.state_at_upgraded(version).map_err(explain)?
    } else {
        agent.state_at(version)?
    };
    out.state(&state)
}

pub fn restore(
    store: &Path,
    global: &Global,
    out: Output,
    version: u64,
    versioned: bool,
) -> Result<(), Failure> {
    let agent = open(store, global, Access::Write)?;
    let written = agent.restore(version).map_err(explain)?;
    if versioned {
        out.versioned(written.version, &written.state)
    } else {
        out.state(&written.state)
    }
}

/// The current state as stored, with its version and the schema version it was stored under.
/// The version and the state are read in two calls: when another process writes in between
/// (the version read is no longer the current one, nor retained), they are read again.
pub fn stored(agent: &Agent) -> Result<(u64, Arc<Snapshot>, u32), Error> {
    let mut attempt = 0;
    loop {
        let result = agent.get_state_versioned().and_then(|current| {
            agent
                .state_at_stored(current.version)
                .map(|(state, schema)| (current.version, state, schema))
        });
        match result {
            Err(Error::Gap { .. } | Error::InvalidArgument(_)) if attempt < 3 => attempt += 1,
            other => return other,
        }
    }
}

/// A library error, with how the command declares a schema version when the state is newer.
pub fn explain(e: Error) -> Failure {
    match e {
        Error::NewerSchema { declared, .. } => Failure::new(
            crate::failure::Status::of(&e),
            format!(
                "{e} [agent-state declared schema version {declared}: --schema-version N, default \
                 0; `get` without it prints any state as stored]"
            ),
        ),
        e => Failure::from(e),
    }
}
