//! The commands on one state: get, set, replace, version, at, restore.

use std::ffi::OsStr;
use std::path::Path;

use std::sync::Arc;

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

/// Whether a write merges a patch or replaces the state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    Merge,
    Replace,
}

/// `set` and `replace`: one write through the library, optionally compare-and-set.
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
        Write::Replace => "state",
    };
    let bytes = input::document(document, what, agent.max_value_bytes())?;
    let written = match kind {
        Write::Merge => agent.set_state_if(&bytes, if_version).map_err(explain)?,
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
