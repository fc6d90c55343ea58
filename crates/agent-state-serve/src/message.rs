//! The watch stream's messages (PROTOCOL.md), encoded once per change: states and patches are
//! spliced in as the library's exact text, never parsed again.

use agent_state::{ChangeKind, Snapshot, StateChange};
use axum::extract::ws::Utf8Bytes;

/// `{"type":"patch","version":V,"patch":P}` for an RFC 7396 merge patch,
/// `{"type":"json_patch","version":V,"ops":[...]}` for an RFC 6902 JSON Patch, or
/// `{"type":"replace","version":V,"state":S}` for anything else (a replacement, a restore, a
/// schema migration).
pub fn change(change: &StateChange) -> Utf8Bytes {
    match (change.kind, &change.patch) {
        (ChangeKind::Merge, Some(patch)) => frame("patch", change.version, "patch", patch.json()),
        (ChangeKind::JsonPatch, Some(ops)) => {
            frame("json_patch", change.version, "ops", ops.json())
        }
        _ => frame("replace", change.version, "state", change.next.json()),
    }
}

/// `{"type":"snapshot","version":V,"state":S}`.
pub fn snapshot(version: u64, state: &Snapshot) -> Utf8Bytes {
    frame("snapshot", version, "state", state.json())
}

/// A change read back from the log (one of `changes_since`'s entries): the same message
/// [`change`] sends for it as it commits, chosen by the entry's `kind` (`"merge"`,
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

/// `{"type":"ping","version":V}`.
pub fn ping(version: u64) -> Utf8Bytes {
    Utf8Bytes::from(format!(r#"{{"type":"ping","version":{version}}}"#))
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
