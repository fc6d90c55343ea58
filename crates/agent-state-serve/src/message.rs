//! The watch stream's messages (PROTOCOL.md), encoded once per change: states and patches are
//! spliced in as the library's exact text, never parsed again.

use agent_state::{Snapshot, StateChange};
use axum::extract::ws::Utf8Bytes;

/// `{"type":"patch","version":V,"patch":P}` or `{"type":"replace","version":V,"state":S}`.
pub fn change(change: &StateChange) -> Utf8Bytes {
    match &change.patch {
        Some(patch) => frame("patch", change.version, "patch", patch.json()),
        None => frame("replace", change.version, "state", change.next.json()),
    }
}

/// `{"type":"snapshot","version":V,"state":S}`.
pub fn snapshot(version: u64, state: &Snapshot) -> Utf8Bytes {
    frame("snapshot", version, "state", state.json())
}

/// A change read back from the log (`changes_since`'s entries): its patch, or its state for
/// a replacement, as JSON values.
pub fn logged(version: u64, patch: &serde_json::Value, next: &serde_json::Value) -> Utf8Bytes {
    if patch.is_null() {
        frame("replace", version, "state", next.to_string().as_bytes())
    } else {
        frame("patch", version, "patch", patch.to_string().as_bytes())
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
