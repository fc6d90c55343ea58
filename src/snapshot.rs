//! An immutable, shareable copy of one state: its parsed tree and its encoded bytes.
//!
//! Snapshots are handed out behind `Arc`, so a read costs a reference-count increment whatever
//! the state's size, and a reader's view never changes under it.

use serde_json::Value;

/// One state value, parsed and encoded. Never mutated after construction.
#[derive(Debug)]
pub struct Snapshot {
    /// Compact JSON followed by one NUL byte, so C callers may treat it as a C string.
    encoded: Box<[u8]>,
    value: Value,
}

impl Snapshot {
    /// Encodes `value` (compact JSON, member order preserved).
    pub fn new(value: Value) -> Snapshot {
        let mut encoded = crate::json::to_vec(&value);
        encoded.push(0);
        Snapshot {
            encoded: encoded.into_boxed_slice(),
            value,
        }
    }

    /// Builds a snapshot from bytes known to be the compact encoding of `value`.
    pub fn from_parts(mut encoded: Vec<u8>, value: Value) -> Snapshot {
        encoded.push(0);
        Snapshot {
            encoded: encoded.into_boxed_slice(),
            value,
        }
    }

    /// The compact JSON encoding, without the trailing NUL.
    pub fn json(&self) -> &[u8] {
        &self.encoded[..self.encoded.len() - 1]
    }

    /// The compact JSON encoding followed by a NUL byte.
    pub fn json_with_nul(&self) -> &[u8] {
        &self.encoded
    }

    /// The parsed state.
    pub fn value(&self) -> &Value {
        &self.value
    }
}
