//! The fuzz targets' door into the value layer's insides (feature `fuzzing`, not part of the
//! API): the fast paths and the slow references they are checked against, side by side.

use serde_json::{Map, Value};

use super::{accept, scan};
use crate::error::Result;
use crate::patch::Patch;
use crate::snapshot::Snapshot;

/// The scanner's compact encoding of `input`, or `None` when it leaves it to the steps.
pub fn scan(input: &[u8]) -> Option<Vec<u8>> {
    scan::scan(input).map(|scanned| scanned.out)
}

/// A caller's whole state as `replace_state` accepts it (the scanner when it can), its
/// encoded size checked against `max`.
pub fn state(text: &[u8], max: usize) -> Result<Snapshot> {
    accept::reference::fast_state(text, max)
}

/// [`state`] by the steps alone, without the scanner.
pub fn reference_state(text: &[u8], max: usize) -> Result<Snapshot> {
    accept::reference::state(text, max)
}

/// A state read back from the store (the scanner when it can).
pub fn stored(bytes: &[u8]) -> Result<Snapshot> {
    accept::stored(bytes)
}

/// A caller's merge patch as `set_state` accepts it; the bool says whether the scanner took
/// it (so [`Snapshot::merge`] merges it member-wise on its encodings).
pub fn patch(text: &[u8], max: usize) -> Result<(Patch, bool)> {
    accept::patch(text, max).map(|p| {
        let scanned = p.as_scanned().is_some();
        (p, scanned)
    })
}

/// A patch given as a value: [`Snapshot::merge`] merges it on values (the reference for the
/// member-wise merge).
pub fn value_patch(patch: Map<String, Value>) -> Patch {
    Patch::from_value(Value::Object(patch))
}
