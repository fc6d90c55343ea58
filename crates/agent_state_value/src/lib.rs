//! The state value of agent_state: everything about JSON states that needs no storage.
//!
//! A crate of its own so that what a state is can be read, tested and fuzzed without a store:
//! the core (`agent_state`) and the fuzz targets depend on it; it knows nothing of storage, C
//! or Node.
//!
//! [`json`] (strict I-JSON input), [`codec`] (which values may be stored), [`merge`]
//! (RFC 7396 on values), [`pointer`](mod@pointer) (RFC 6901 JSON Pointers) and [`json_patch`]
//! (RFC 6902 on values, the reference any faster path is held to), [`snapshot`] (immutable
//! shared states, and [`Snapshot::merge`], the one way a patch is applied), [`patch`] (the one patch type: what is merged, and what hooks
//! receive), and `accept`, the one way bytes from outside (a caller's patch or state, an
//! initial-state hook's answer, an entry read back from the store) become a checked patch or
//! state, or a precise error ([`error::Error`]). [`schema_steps`] holds the declarative schema
//! steps (data in the open options that upgrade a state from one schema version to the next).
//!
//! A write goes `accept::patch` → [`Patch`] → [`Snapshot::merge`] → [`Snapshot::json`].
//! Behind those, the scanner (`scan`: checks and encodes a document's text in one pass, without
//! building a value) and the member-wise merge on its encodings are this module's business
//! only; the slow steps they must agree with are kept as the references they are tested
//! against, and the fuzz targets reach both through one door, `testing` (feature `fuzzing`).
//!
//! [`Snapshot::merge`]: snapshot::Snapshot::merge
//! [`Snapshot::json`]: snapshot::Snapshot::json
//! [`Patch`]: patch::Patch

#[doc(hidden)]
pub mod accept;
pub mod codec;
pub mod error;
pub mod json;
pub mod json_patch;
pub mod merge;
pub mod operations;
pub mod patch;
pub mod pointer;
mod scan;
pub mod schema_steps;
pub mod snapshot;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod testing;

pub use error::{Error, Result};
pub use patch::Patch;
pub use snapshot::Snapshot;
