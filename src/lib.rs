//! agent_state: one persistent, transactional JSON state value per agent, on an embedded
//! SQLite store, with the semantics of the Telnyx Agent SDK's State API (getState, setState as
//! RFC 7396 merge patch, replaceState, initialState, onStateChanged).
//!
//! The safe core lives in plain modules that know nothing of C:
//! [`json`] (strict I-JSON input), [`codec`] (which values may be stored), [`merge`]
//! (RFC 7396), [`snapshot`] (immutable shared states), [`store`] (the SQLite key-value layer),
//! [`hooks`] (hook delivery in commit order), [`options`] and [`agent`] (the API).
//! The C ABI, and every `unsafe` block, is in `ffi`.

#[cfg(feature = "store")]
pub mod agent;
pub mod codec;
pub mod error;
#[cfg(feature = "store")]
pub mod fork;
pub mod hooks;
pub mod json;
pub mod merge;
#[cfg(feature = "store")]
pub mod options;
pub mod snapshot;
#[cfg(feature = "store")]
pub mod store;

#[cfg(feature = "store")]
#[allow(unsafe_code)] // the C boundary: every block has its SAFETY note
mod ffi;

#[cfg(feature = "store")]
pub use agent::{Agent, Versioned};
pub use error::{Error, Result};
pub use hooks::{InitialStateHook, Patch, StateChange, StateChangedHook, Validator};
#[cfg(feature = "store")]
pub use options::OpenOptions;
pub use snapshot::Snapshot;
#[cfg(feature = "store")]
pub use store::Synchronous;
