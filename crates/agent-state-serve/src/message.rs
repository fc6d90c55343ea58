//! The watch stream's messages (PROTOCOL.md), encoded once per change: states and patches are
//! spliced in as the library's exact text, never parsed again.

use agent_state::Snapshot;
use axum::extract::ws::Utf8Bytes;

/// `{"type":"patch","version":V,"patch":P}`: an RFC 7396 merge patch, as the watch delivered it.
pub fn merge(version: u64, patch: &str) -> Utf8Bytes {
    frame("patch", version, "patch", patch.as_bytes())
}

/// `{"type":"json_patch","version":V,"ops":[...]}`: an RFC 6902 JSON Patch's operations.
pub fn json_patch(version: u64, ops: &str) -> Utf8Bytes {
    frame("json_patch", version, "ops", ops.as_bytes())
}

/// `{"type":"replace","version":V,"state":S}`: anything else that follows the previous
/// version (a replacement, a restore, a schema migration), as the whole state.
pub fn replace(version: u64, state: &str) -> Utf8Bytes {
    frame("replace", version, "state", state.as_bytes())
}

/// `{"type":"snapshot","version":V,"state":S}`.
pub fn snapshot(version: u64, state: &Snapshot) -> Utf8Bytes {
    frame("snapshot", version, "state", state.json())
}

/// [`snapshot`] of a state the watch delivered as text.
pub fn snapshot_text(version: u64, state: &str) -> Utf8Bytes {
    frame("snapshot", version, "state", state.as_bytes())
}

/// A change read back from the log (one of `changes_since`'s entries): the same message the
/// watch's event of it is sent as when it commits, chosen by the entry's `kind` (`"merge"`,
/// `"json_patch"`, `"replace"` or `"migration"`).
pub fn logged(entry: &serde_json::Value) -> Utf8Bytes {
    let version = entry["version"].as_u64().unwrap_or(0);
    let patch = &entry["patch"];
    match entry["kind"].as_str() {
        Some("merge") if patch.is_object() => {
            frame("patch", version, "patch", patch.to_string().as_bytes())
        }
        Some("json_patch") if patch.is_array() => {
            frame("json_patch", version, "ops", patch.to_string().as_bytes())
        }
        // A replacement or a migration, or a kind this server does not know: the whole state
        // is right whatever the change was.
        _ => frame(
            "replace",
            version,
            "state",
            entry["next"].to_string().as_bytes(),
        ),
    }
}

/// `{"type":"ping","version":V,"interval_ms":N}`: N tells the client when to take the stream
/// as dead (three intervals without a message).
pub fn ping(version: u64, every: std::time::Duration) -> Utf8Bytes {
    let interval_ms = every.as_millis();
    Utf8Bytes::from(format!(
        r#"{{"type":"ping","version":{version},"interval_ms":{interval_ms}}}"#
    ))
}

fn frame(kind: &str, version: u64, field: &str, json: &[u8]) -> Utf8Bytes {
    let mut text = String::with_capacity(json.len() + 48);
    text.push_str(r#"{"type":""#);
    text.push_str(kind);
    text.push_str(r#"","version":"#);
    text.push_str(&version.to_string());
    text.push_str(r#",""#);
    text.push_str(field);
    text.push_str(r#"":"#);
    // The library's JSON is UTF-8 (its input is checked strictly, its output is serde_json's).
    text.push_str(&String::from_utf8_lossy(json));
    text.push('}');
    Utf8Bytes::from(text)
}
