//! Opening a store: the one place where the command line becomes the library's open options.
//!
//! STORE goes to `Agent::open` as given (never canonicalized, joined or looked at first), so
//! whatever backends the library opens, the command opens too: a SQLite file, or a PostgreSQL
//! server named by a `postgres://` or `postgresql://` URI. `--agent` becomes the library's
//! `agent_id` open option in [`options`] and nowhere else.

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

/// Whether `store` names a PostgreSQL server rather than a SQLite file (the library's rule).
pub fn is_server(store: &Path) -> bool {
    agent_state::internals::server_uri(store).is_some()
}

/// `store` for reports and messages: a connection URI's password replaced by `***`.
pub fn shown(store: &Path) -> String {
    let text = store.display().to_string();
    if !is_server(store) {
        return text;
    }
    let (scheme, rest) = text.split_once("://").unwrap_or(("", &text));
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _password)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None => text,
        },
        None => text,
    }
}

/// The library's open options for this command line, checked by the library itself (so the
/// ranges and messages are its own).
fn options(global: &Global, access: Access, schema: Option<u64>) -> Result<OpenOptions, Failure> {
    let mut map = connection_options(global, access);
    if let Some(id) = &global.agent {
        map.insert("agent_id".into(), id.clone().into());
    }
    if let Some(bytes) = global.max_value_bytes {
        map.insert("max_value_bytes".into(), bytes.into());
    }
    if let Some(bytes) = global.store_max_value_bytes {
        if access == Access::Read {
            return Err(Failure::invalid(
                "--store-max-value-bytes changes the store's setting; only commands that write \
                 (set, replace, restore, import) take it",
            ));
        }
        map.insert("store_max_value_bytes".into(), bytes.into());
    }
    if let Some(spec) = &global.change_log {
        if access == Access::Read {
            return Err(Failure::invalid(
                "--change-log changes the agent's setting; only commands that write (set, \
                 replace, restore, import) take it",
            ));
        }
        let value = agent_state::value::json::parse(spec.as_bytes())
            .map_err(|e| Failure::context("--change-log", e.into()))?;
        map.insert("change_log".into(), value);
    }
    schema_options(&mut map, global, schema)?;
    from_map(map)
}

/// Adds `schema_version` (`version`) and `schema_steps` (the array in the file of `--steps`).
/// The library checks both (ranges, ops, one step per version below the version).
pub fn schema_options(
    map: &mut Map<String, Value>,
    global: &Global,
    version: Option<u64>,
) -> Result<(), Failure> {
    let mut schema = Map::new();
    if let Some(version) = version {
        schema.insert("schema_version".into(), version.into());
        from_map(schema.clone())?;
    }
    if let Some(path) = &global.steps {
        schema.insert("schema_steps".into(), read_steps(path)?);
        // Checked here, so that a refusal names the file.
        let text = agent_state::value::json::to_vec(&Value::Object(schema.clone()));
        OpenOptions::from_json(&text)
            .map_err(|e| Failure::context(&format!("--steps {}", path.display()), e))?;
    }
    map.extend(schema);
    Ok(())
}

/// The steps of a `--steps` file: a JSON array (the library checks each step).
fn read_steps(path: &Path) -> Result<Value, Failure> {
    let shown = path.display();
    let text = std::fs::read(path).map_err(|e| {
        Failure::invalid(format!("--steps {shown}: cannot read the steps file: {e}"))
    })?;
    match agent_state::value::json::parse(&text) {
        Ok(steps @ Value::Array(_)) => Ok(steps),
        Ok(other) => Err(Failure::invalid(format!(
            "--steps {shown}: expected a JSON array of steps ([{{\"from\": K, \"ops\": [...]}}, ...]), \
             not {}",
            kind(&other)
        ))),
        Err(e) => Err(Failure::invalid(format!(
            "--steps {shown}: not JSON: {}",
            agent_state::Error::from(e)
        ))),
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The open options of the connection itself, which the commands on a store's agents as a
/// whole (`ls`, `rm`, `expire`) use too.
pub fn connection_options(global: &Global, access: Access) -> Map<String, Value> {
    let mut map = Map::new();
    if let Some(n) = global.max_connections {
        map.insert("max_connections".into(), n.into());
    }
    map.insert(
        "read_only".into(),
        Value::Bool(access == Access::Read || global.read_only),
    );
    if let Some(ms) = global.busy_timeout_ms {
        map.insert("busy_timeout_ms".into(), ms.into());
    }
    if let Some(ms) = global.server_timeout_ms {
        map.insert("server_timeout_ms".into(), ms.into());
    }
    if let Some(sync) = global.synchronous {
        let name = match sync {
            Synchronous::Full => "full",
            Synchronous::Normal => "normal",
        };
        map.insert("synchronous".into(), name.into());
    }
    map
}

pub fn from_map(map: Map<String, Value>) -> Result<OpenOptions, Failure> {
    let text = agent_state::value::json::to_vec(&Value::Object(map));
    OpenOptions::from_json(&text).map_err(|e| Failure::context("options", e))
}

/// The open options of `ls`, `rm` and `expire` (`command`), which open the store, not one of
/// its agents: the connection's options. The agent's own are refused rather than ignored:
/// `--change-log` (the agent's setting, changed only by a command that writes an agent) and,
/// unless `agent_allowed` (`rm`, which names its agent with it), `--agent`.
pub fn store_options(
    global: &Global,
    access: Access,
    command: &str,
    agent_allowed: bool,
) -> Result<OpenOptions, Failure> {
    if let (Some(id), false) = (&global.agent, agent_allowed) {
        return Err(Failure::invalid(format!(
            "--agent {id:?}: `{command}` works on every agent of the store and takes no --agent \
             (`ls --prefix P` selects agents by id, `rm --agent ID` deletes one)"
        )));
    }
    if global.change_log.is_some() {
        return Err(Failure::invalid(format!(
            "--change-log is an agent's setting, which `{command}` never changes; only commands \
             that write a state (set, replace, restore, import) take it"
        )));
    }
    if global.store_max_value_bytes.is_some() {
        return Err(Failure::invalid(format!(
            "--store-max-value-bytes is recorded by the commands that write a state (set, \
             replace, restore, import), not by `{command}`"
        )));
    }
    if global.schema_version.is_some() || global.steps.is_some() {
        return Err(Failure::invalid(format!(
            "--schema-version and --steps are for the commands that read or write a state; \
             `{command}` works on the store's agents as stored (`migrate --to N --steps FILE` \
             upgrades them all)"
        )));
    }
    let mut map = connection_options(global, access);
    if let Some(bytes) = global.max_value_bytes {
        map.insert("max_value_bytes".into(), bytes.into());
    }
    from_map(map)
}

/// Opens `store` for `access` with the command line's options.
pub fn open(store: &Path, global: &Global, access: Access) -> Result<Agent, Failure> {
    open_under(store, global, access, global.schema_version)
}

/// [`open`] with the schema version `schema` instead of `--schema-version`'s (`import`, which
/// writes a state under the schema version its line gives).
pub fn open_under(
    store: &Path,
    global: &Global,
    access: Access,
    schema: Option<u64>,
) -> Result<Agent, Failure> {
    let options = options(global, access, schema)?;
    Agent::open_with(store, &options).map_err(Failure::from)
}
