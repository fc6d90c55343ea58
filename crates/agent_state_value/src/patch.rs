//! A checked patch: what `accept::patch` (an RFC 7396 merge patch) or `accept::json_patch` (an
//! RFC 6902 JSON Patch) makes of a caller's bytes, what [`Snapshot::apply`] applies, and what
//! hooks receive (its JSON text, its value). Which of the two it is, [`Patch::operations`]
//! says: a merge patch is always an object, a JSON Patch always an array, so the stored text
//! says it too.
//!
//! How the patch was checked stays inside: when the scanner vouched for it, it keeps the
//! scanner's encoding, members and all, so the merge can work member by member on encodings
//! and the text hooks and the change log see is at hand; otherwise it holds the parsed value,
//! encoded on first use. Either way the merge's result, the text and the value are the same.
//! A `Patch` is cheap to clone (one reference count), so a write that is made again (see
//! `Agent::change`) does not copy it.

use std::sync::{Arc, OnceLock};

use serde_json::Value;

use serde_json::Map;

use super::json_patch::JsonPatch;
use super::snapshot::{Entry, Snapshot};
use crate::error::Result;

/// A patch as applied: an RFC 7396 merge patch, or an RFC 6902 JSON Patch
/// ([`Patch::operations`]). Its compact encoding and its value are made on first use when
/// they are not at hand: most changes are never looked at by a hook, and making them anyway
/// would tax every write.
#[derive(Debug, Clone)]
pub struct Patch(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    /// The patch as the scanner encoded it, when it came that way.
    scanned: Option<Snapshot>,
    /// The patch as a value: given, or parsed from `scanned` on first use.
    value: OnceLock<Value>,
    /// The encoding of `value` (when there is no `scanned`), with a NUL, on first use.
    encoded: OnceLock<Box<[u8]>>,
    /// A JSON Patch's operations, checked (then `value` is the array they came from).
    operations: Option<JsonPatch>,
}

impl Patch {
    /// A patch the scanner accepted (a plain, codec-checked object).
    pub(super) fn scanned(scanned: Snapshot) -> Patch {
        Patch(Arc::new(Inner {
            scanned: Some(scanned),
            value: OnceLock::new(),
            encoded: OnceLock::new(),
            operations: None,
        }))
    }

    /// A JSON Patch: its `operations`, checked from `value` (the array as given).
    pub fn json_patch(operations: JsonPatch, value: Value) -> Patch {
        Patch(Arc::new(Inner {
            scanned: None,
            value: OnceLock::from(value),
            encoded: OnceLock::new(),
            operations: Some(operations),
        }))
    }

    /// A JSON Patch's operations; `None` for a merge patch.
    pub fn operations(&self) -> Option<&JsonPatch> {
        self.0.operations.as_ref()
    }

    /// A patch given as a value: one checked by the accept pipeline (a plain, codec-checked
    /// object), or one the change log holds, as its writer applied it.
    pub fn from_value(value: Value) -> Patch {
        Patch(Arc::new(Inner {
            scanned: None,
            value: OnceLock::from(value),
            encoded: OnceLock::new(),
            operations: None,
        }))
    }

    /// The scanner's encoding of the patch, when it has one (for the member-wise merge).
    pub(super) fn as_scanned(&self) -> Option<&Snapshot> {
        self.0.scanned.as_ref()
    }

    /// The patch.
    pub fn value(&self) -> &Value {
        self.0.value.get_or_init(|| match &self.0.scanned {
            Some(scanned) => scanned.to_value(),
            None => Value::Null, // unreachable: one of the two is always set
        })
    }

    /// [`Patch::json`] followed by one NUL byte. Not part of the Rust API: for the C ABI
    /// crate's terminated views, as [`Snapshot::json_with_nul`](crate::Snapshot::json_with_nul).
    #[doc(hidden)]
    pub fn json_with_nul(&self) -> &[u8] {
        if let Some(scanned) = &self.0.scanned {
            return scanned.json_with_nul();
        }
        self.0.encoded.get_or_init(|| {
            let mut bytes = super::json::to_vec(self.value());
            bytes.push(0);
            bytes.into_boxed_slice()
        })
    }

    /// Compact JSON.
    pub fn json(&self) -> &[u8] {
        let with_nul = self.json_with_nul();
        &with_nul[..with_nul.len() - 1]
    }
}

// The merge is written here, beside the patch it takes, and not in snapshot.rs: the snapshot
// does not know the patch type (which holds a snapshot), so the two modules use each other in
// one direction only.
impl Snapshot {
    /// Applies an RFC 7396 merge `patch` and returns the next state, or a codec error when the
    /// result would hold a malformed tagged value or would itself be shaped like a tagged
    /// value. `self` is unchanged either way. `max_bytes` bounds the encoded result
    /// ([`Error::TooLarge`](crate::Error::TooLarge)), checked before it is built.
    ///
    /// Only the members the patch names are merged and re-encoded; the others are shared with
    /// `self`. A patch the scanner encoded is merged on its members' encodings where that is
    /// safe (see `Entry::as_is`); the result is byte for byte the value merge's.
    pub fn merge(&self, patch: &Patch, max_bytes: usize) -> Result<Snapshot> {
        match patch.as_scanned() {
            Some(scanned) => self.merge_entries(
                scanned.members().iter().map(Entry::Encoded),
                scanned.members().len(),
                max_bytes,
            ),
            None => {
                // Patches are objects (checked on the way in, or logged by their writer).
                let empty = Map::new();
                let map = patch.value().as_object().unwrap_or(&empty);
                self.merge_entries(
                    map.iter().map(|(name, value)| Entry::Value(name, value)),
                    map.len(),
                    max_bytes,
                )
            }
        }
    }
}
