//! The JSON Lines that `export` writes and `import` reads: one agent per line,
//! `{"agent":ID or null,"version":V,"schema":S,"state":{...}}`, the state exactly as the library
//! encodes it. `agent` is the id of the exported agent (`--agent`), or null for a SQLite file's
//! single agent; `schema` is the schema version the state is stored under (the library's
//! `schema_version` of the program that wrote it), so that an import stores it under the same
//! one. A line without `schema` (written before states had schema versions) is schema 0.

use agent_state::Snapshot;
use serde_json::Value;

use crate::failure::Failure;

/// One exported agent.
#[derive(Debug)]
pub struct Record {
    /// The state's version in the store it came from.
    pub version: u64,
    /// The schema version the state was written under (0 when the line gives none).
    pub schema: u32,
    /// The state, compact, as the exporting library encoded it.
    pub state: Vec<u8>,
}

/// The line of agent `agent` (`None`: a file's single agent), without the newline. The state's
/// bytes are copied, never re-encoded.
pub fn encode(agent: Option<&str>, version: u64, schema: u32, state: &Snapshot) -> Vec<u8> {
    let id = match agent {
        Some(id) => agent_state::value::json::to_vec(&Value::String(id.to_string())),
        None => b"null".to_vec(),
    };
    let mut line = b"{\"agent\":".to_vec();
    line.extend_from_slice(&id);
    line.extend_from_slice(
        format!(",\"version\":{version},\"schema\":{schema},\"state\":").as_bytes(),
    );
    line.extend_from_slice(state.json());
    line.push(b'}');
    line
}

/// Reads one line. The library's strict parser reads it, so a duplicate member name anywhere
/// (which a lenient parser would silently drop) is AGENT_ERR_CODEC, not a quietly changed
/// state; the state is then encoded back to compact JSON, which for a state the library
/// exported gives back its exact bytes, and the library checks it again when it is written.
pub fn decode(line: &[u8], number: usize) -> Result<Record, Failure> {
    let at = |e: agent_state::value::Error| Failure::context(&format!("line {number}"), e.into());
    let bad = |what: &str| Failure::invalid(format!("line {number}: {what}"));
    let Value::Object(mut map) = agent_state::value::json::parse(line).map_err(at)? else {
        return Err(bad(
            "not an agent: expected {\"agent\": ..., \"version\": ..., \"schema\": ..., \"state\": {...}}",
        ));
    };
    if let Some(key) = map
        .keys()
        .find(|k| !matches!(k.as_str(), "agent" | "version" | "schema" | "state"))
    {
        return Err(bad(&format!(
            "unknown member {key:?} (an agent line has agent, version, schema and state)"
        )));
    }
    // The agent the line was exported from: import writes into the one --agent selects,
    // whatever this says (so an agent can be copied to another id or store).
    match map.remove("agent") {
        Some(Value::Null | Value::String(_)) => {}
        Some(other) => return Err(bad(&format!("agent must be null or a string, not {other}"))),
        None => return Err(bad("no \"agent\" member (null for a store's single agent)")),
    }
    let version = match map.remove("version") {
        Some(v) => v
            .as_u64()
            .filter(|v| *v >= 1)
            .ok_or_else(|| bad(&format!("version must be an integer from 1, not {v}")))?,
        None => return Err(bad("no \"version\" member")),
    };
    // Absent in the lines of older exports, whose states were all written under schema 0.
    let max = agent_state::options::MAX_SCHEMA_VERSION;
    let schema = match map.remove("schema") {
        Some(v) => v
            .as_u64()
            .filter(|v| *v <= u64::from(max))
            .map(|v| v as u32)
            .ok_or_else(|| {
                bad(&format!(
                    "schema must be an integer from 0 to {max}, not {v}"
                ))
            })?,
        None => 0,
    };
    let state = match map.remove("state") {
        Some(state @ Value::Object(_)) => agent_state::value::json::to_vec(&state),
        Some(other) => return Err(bad(&format!("state must be a JSON object, not {other}"))),
        None => return Err(bad("no \"state\" member")),
    };
    Ok(Record {
        version,
        schema,
        state,
    })
}
