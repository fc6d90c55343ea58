//! agent_state: one persistent, transactional JSON state value per agent, on an embedded
//! SQLite store, with the semantics of the Telnyx Agent SDK's State API (getState, setState as
//! RFC 7396 merge patch, replaceState, initialState, onStateChanged).
//!
//! The safe core lives in plain modules that know nothing of C:
//! [`value`] (JSON states: strict input, the codec, RFC 7396 merge, immutable shared
//! snapshots, and the accept pipeline every input takes), [`store`] (the `Backend` trait the agent
//! needs from storage, and its SQLite implementation), [`hooks`] (hook delivery in commit
//! order), [`options`] and [`agent`] (the API, split by job).
//! The C ABI is in `ffi`; `unsafe` is allowed there, in the SQLite backend's OS glue (its
//! WAL-index watcher) and in the fork watcher both backends use (`store::process`) only.

#[cfg(feature = "store")]
pub mod agent;
pub mod error;
pub mod hooks;
#[cfg(feature = "store")]
pub mod options;
#[cfg(feature = "store")]
pub mod store;
pub mod value;

#[cfg(feature = "store")]
pub use agent::{Agent, Versioned};
pub use error::{Error, Result};
pub use hooks::{InitialStateHook, Patch, StateChange, StateChangedHook, Validator};
#[cfg(feature = "store")]
pub use options::OpenOptions;
#[cfg(feature = "store")]
pub use store::Synchronous;
pub use value::snapshot::Snapshot;
