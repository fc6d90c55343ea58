//! Opening a store: the one place where the command line becomes the library's open options.
//!
//! STORE goes to `Agent::open` as given, so whatever backends the library opens, the command
//! opens too. `--agent` belongs here as well: when the library gains its `agent_id` open option
//! (many agents per store), `--agent` becomes that option in [`options`] and nowhere else.

use std::path::Path;

use agent_state::{Agent, OpenOptions};
use serde_json::{Map, Value};

use crate::args::{Global, Synchronous};
use crate::failure::Failure;

/// What a command does with the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Only reads: always opened read-only, so reading never creates a store (a missing file
    /// is AGENT_ERR_STORAGE) and never changes one.
    Read,
    /// Writes through the library (the file is created when absent, unless `--read-only`).
    Write,
}

/// Why an agent id, or a second agent, is refused while stores hold a single agent.
pub const SINGLE_AGENT: &str =
    "this store holds a single agent; agent ids need agent_id support (many agents per store)";

/// Refuses `--agent` while the library has no agent ids (rather than ignoring it and showing
/// the wrong agent's state).
pub fn check_agent(global: &Global) -> Result<(), Failure> {
    match &global.agent {
        Some(id) => Err(Failure::invalid(format!(
            "--agent {id:?}: this store holds a single agent; --agent needs agent_id support \
             (many agents per store)"
        ))),
        None => Ok(()),
    }
}

/// The library's open options for this command line, checked by the library itself (so the
/// ranges and messages are its own).
fn options(global: &Global, access: Access) -> Result<OpenOptions, Failure> {
    check_agent(global)?;
    let mut map = Map::new();
    map.insert(
        "read_only".into(),
        Value::Bool(access == Access::Read || global.read_only),
    );
    if let Some(ms) = global.busy_timeout_ms {
        map.insert("busy_timeout_ms".into(), ms.into());
    }
    if let Some(sync) = global.synchronous {
        let name = match sync {
            Synchronous::Full => "full",
            Synchronous::Normal => "normal",
        };
        map.insert("synchronous".into(), name.into());
    }
    if let Some(bytes) = global.max_value_bytes {
        map.insert("max_value_bytes".into(), bytes.into());
    }
    if let Some(spec) = &global.change_log {
        if access == Access::Read {
            return Err(Failure::invalid(
                "--change-log changes the store's setting; only commands that write (set, \
                 replace, restore, import) take it",
            ));
        }
        let value = agent_state::json::parse(spec.as_bytes())
            .map_err(|e| Failure::context("--change-log", e))?;
        map.insert("change_log".into(), value);
    }
    let text = agent_state::json::to_vec(&Value::Object(map));
    OpenOptions::from_json(&text).map_err(|e| Failure::context("options", e))
}

/// Opens `store` for `access` with the command line's options.
pub fn open(store: &Path, global: &Global, access: Access) -> Result<Agent, Failure> {
    let options = options(global, access)?;
    Agent::open(store, &options).map_err(Failure::from)
}
