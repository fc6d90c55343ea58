//! agent_state: one persistent, transactional JSON state value per agent, on an embedded
//! SQLite file or a PostgreSQL server, with the semantics of the Telnyx Agent SDK's State API:
//! getState, setState as an RFC 7396 merge patch in one transaction returning the merged state,
//! replaceState, an initial state that a read never persists, and onStateChanged hooks after
//! the commit. On top: versions and compare-and-set, a validation gate, a change log, many
//! agents per store.
//!
//! This crate is the safe core, and the whole of the semantics: C, C++, Python and Go reach the
//! same code through the C ABI crate built on it (`agent_state_ffi`, `libagent_state.so`).
//! A Rust program reads and writes its own types through serde ([`Agent::get`],
//! [`Agent::set`]), or JSON text (`&[u8]` in, [`Snapshot`] out: exactly the bytes the store
//! holds and every other language sees).
//!
//! # The reference's `Conversation`, typed
//!
//! The State API reference's example: a state type, its initial state, a hook after each
//! commit (`onStateChanged(next, prev)`), and a step of two merges. No JSON is written by hand.
//!
//! ```
//! use agent_state::{Agent, HookGuard, Result};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq)]
//! #[serde(rename_all = "lowercase")]
//! enum Status { Idle, Processing }
//!
//! #[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
//! #[serde(rename_all = "camelCase")]
//! struct ConvState { status: Status, last_reply: String, at: u64 }
//!
//! /// The fields to merge; `None` is left as stored.
//! #[derive(Serialize, Default)]
//! #[serde(rename_all = "camelCase")]
//! struct ConvPatch { status: Option<Status>, last_reply: Option<String>, at: Option<u64> }
//!
//! struct Conversation { agent: Agent, _transitions: HookGuard }
//!
//! impl Conversation {
//!     fn open(store: &str) -> Result<Conversation> {
//!         let init = ConvState { status: Status::Idle, last_reply: String::new(), at: 0 };
//!         let agent = Agent::builder().agent_id("c1").initial_state(&init).open(store)?;
//!         let transitions = agent.on_change_as(|next: &ConvState, prev: &ConvState| {
//!             println!("{:?} -> {:?}", prev.status, next.status); // after each commit, in order
//!         })?;
//!         Ok(Conversation { agent, _transitions: transitions })
//!     }
//!
//!     fn process(&self, now: u64) -> Result<()> {
//!         // An RFC 7396 merge in one transaction: the other members are untouched.
//!         self.agent.set(&ConvPatch { status: Some(Status::Processing), ..Default::default() })?;
//!         // ...
//!         self.agent.set(&ConvPatch { status: Some(Status::Idle), at: Some(now), ..Default::default() })?;
//!         Ok(())
//!     }
//! }
//!
//! # let dir = std::env::temp_dir().join(format!("agent_state_doc_conv_{}", std::process::id()));
//! # std::fs::create_dir_all(&dir).unwrap();
//! # let store = dir.join("conv.db").to_string_lossy().into_owned();
//! let conv = Conversation::open(&store)?;
//! let read = conv.agent.get_state_versioned()?;   // nothing stored: the initial state
//! assert_eq!((read.version, read.get::<ConvState>()?.status), (0, Status::Idle));
//! conv.process(1_796_008_004_123)?;
//! drop(conv);
//! let again = Conversation::open(&store)?;        // as a second run of the program would
//! let state: ConvState = again.agent.get()?;
//! assert_eq!((state.status, state.at), (Status::Idle, 1_796_008_004_123));
//! # std::fs::remove_dir_all(&dir).unwrap();
//! # Ok::<(), agent_state::Error>(())
//! ```
//!
//! # The Rust API in short
//!
//! - **Opening**: [`Agent::builder`] names each option with a Rust type and opens a
//!   [`Location`]: a file path or a `postgresql://` URI, as text or a path, read by its
//!   scheme ([`Location::file`]: a file, whatever its name). [`Agent::open_with`] takes the
//!   [`OpenOptions`] that [`OpenOptions::from_json`] reads (the C ABI's and the command's
//!   form).
//! - **Typed states**: [`Agent::get`], [`Agent::set`] (a merge that skips `None`),
//!   [`Agent::merge`] (a merge where `null` deletes), [`Agent::replace`], [`Agent::update`]
//!   (read, change, compare-and-set); `serde_json::Value` is one more type. The storage codec's
//!   dates, big integers, maps, sets, bytes, typed arrays and regular expressions are the types
//!   of [`types`].
//! - **Hooks as closures**: [`Agent::on_change`] and [`Agent::on_change_as`] return a
//!   [`HookGuard`] that unregisters the hook when dropped; [`Agent::validate_as`],
//!   [`Agent::initial_state_with`]; the traits ([`StateChangedHook`], [`Validator`]) stay.
//! - **Async**: [`AsyncAgent`], the same methods as `async fn`s on the library's worker pool,
//!   cancel-safe (see [`async_agent`]).
//! - **Errors**: one [`Error`] (`#[non_exhaustive]`), its [`ErrorKind`] a stable number, the
//!   backend's or serde's error as its [`source`](std::error::Error::source).
//!
//! The examples of the crate (`crates/agent_state/examples`, `cargo run -p agent_state
//! --example conversation`) are one program per concept.
//!
//! The sections below use the JSON-text form, the one the C ABI wraps.
//!
//! # A state, read and merged
//!
//! ```
//! use std::path::Path;
//! use agent_state::{Agent, OpenOptions};
//!
//! let dir = std::env::temp_dir().join(format!("agent_state_doc_{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let path = dir.join("support-bot.db");
//! # let _ = std::fs::remove_file(&path);
//! let options = OpenOptions::from_json(br#"{"initial_state": {"messages": [], "mood": "calm"}}"#)?;
//! let agent = Agent::open_with(&path, &options)?;
//! // A read shows the initial state and stores nothing.
//! assert_eq!(agent.get_state()?.json(), br#"{"messages":[],"mood":"calm"}"#);
//! // set_state merges (RFC 7396: objects merge, null deletes, the rest replaces) and returns
//! // the merged state, committed.
//! let next = agent.set_state(br#"{"mood": null, "user": {"name": "Ada"}}"#)?;
//! assert_eq!(next.json(), br#"{"messages":[],"user":{"name":"Ada"}}"#);
//! agent.close()?;
//! // It persists.
//! let again = Agent::open_with(&path, &OpenOptions::default())?;
//! assert_eq!(again.get_state()?.json(), br#"{"messages":[],"user":{"name":"Ada"}}"#);
//! # std::fs::remove_dir_all(&dir).unwrap();
//! # Ok::<(), agent_state::Error>(())
//! ```
//!
//! # Versions and compare-and-set
//!
//! Every commit gets the next version; the `_if` writes commit only at the version expected,
//! else [`Error::Conflict`] and nothing is written: read-modify-write loops that never
//! overwrite another writer.
//!
//! ```
//! # use agent_state::{Agent, Error, OpenOptions};
//! let agent = Agent::open_with(":memory:", &OpenOptions::default())?;
//! let v = agent.get_state_versioned()?;
//! assert_eq!(v.version, 0); // nothing stored yet
//! let v = agent.set_state_if(br#"{"n": 1}"#, Some(0))?;
//! assert_eq!(v.version, 1);
//! let stale = agent.replace_state_if(br#"{"n": 9}"#, Some(0));
//! assert!(matches!(stale, Err(Error::Conflict { .. })));
//! # Ok::<(), agent_state::Error>(())
//! ```
//!
//! # Hooks and the validation gate
//!
//! A [`StateChangedHook`] sees every committed change, `(next, prev, patch, version)`, after
//! the commit and in commit order; a [`Validator`] sees it inside the transaction and may
//! reject it; an [`InitialStateHook`] computes the state shown while nothing is stored.
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use agent_state::{Agent, Error, OpenOptions, StateChange, StateChangedHook, Validator};
//!
//! struct Log(Mutex<Vec<String>>);
//! impl StateChangedHook for Log {
//!     fn on_state_changed(&self, change: &StateChange) -> Result<(), String> {
//!         let next = String::from_utf8(change.next.json().to_vec()).unwrap();
//!         self.0.lock().unwrap().push(format!("v{}: {next}", change.version));
//!         Ok(())
//!     }
//! }
//! struct NoEmptyName;
//! impl Validator for NoEmptyName {
//!     fn validate(&self, change: &StateChange) -> Result<(), String> {
//!         match change.next.to_value().get("name") {
//!             Some(serde_json::Value::String(s)) if s.is_empty() => Err("name is empty".into()),
//!             _ => Ok(()),
//!         }
//!     }
//! }
//!
//! let agent = Agent::open_with(":memory:", &OpenOptions::default())?;
//! let log = Arc::new(Log(Mutex::new(Vec::new())));
//! agent.on_state_changed(log.clone())?;
//! agent.set_validator(Some(Arc::new(NoEmptyName)))?;
//! agent.set_state(br#"{"name": "Ada"}"#)?;
//! assert!(matches!(agent.set_state(br#"{"name": ""}"#), Err(Error::Rejected(_))));
//! assert_eq!(*log.0.lock().unwrap(), vec![r#"v1: {"name":"Ada"}"#.to_string()]);
//! # Ok::<(), agent_state::Error>(())
//! ```
//!
//! # The change log
//!
//! With `change_log` on, the store keeps recent changes: [`Agent::changes_since`],
//! [`Agent::state_at`], [`Agent::restore`], and [`Agent::poll`] delivers other handles' (and
//! processes') changes to this handle's hooks.
//!
//! ```
//! # use agent_state::{Agent, OpenOptions};
//! let options = OpenOptions::from_json(br#"{"change_log": {"keep_last": 100}}"#)?;
//! let agent = Agent::open_with(":memory:", &options)?;
//! agent.set_state(br#"{"step": 1}"#)?;
//! agent.set_state(br#"{"step": 2}"#)?;
//! assert_eq!(agent.state_at(1)?.json(), br#"{"step":1}"#);
//! let restored = agent.restore(1)?; // a new change (version 3) back to version 1's state
//! assert_eq!((restored.version, restored.state.json()), (3, &br#"{"step":1}"#[..]));
//! # Ok::<(), agent_state::Error>(())
//! ```
//!
//! # Stores
//!
//! A path is a SQLite file (`":memory:"`: private to the handle); a `postgres://` or
//! `postgresql://` URI is a PostgreSQL server, where `agent_id` is required and one database
//! holds any number of agents (the tables are created on first open):
//!
//! ```no_run
//! # use agent_state::{Agent, OpenOptions};
//! let options = OpenOptions::from_json(br#"{"agent_id": "support-bot-7", "max_connections": 8}"#)?;
//! let agent = Agent::open_with("postgresql://app@db.internal/agents", &options)?;
//! # Ok::<(), agent_state::Error>(())
//! ```
//!
//! Every option, its default and what it bounds is in [`OpenOptions::from_json`]'s
//! documentation and the book's reference page of open options (docs/src/reference/options.md).
//!
//! # Errors
//!
//! Every failure is an [`Error`], whose [`Error::kind`] is an [`ErrorKind`] with a stable
//! number (the C ABI's status). Bad input never changes the stored state.
//!
//! # The modules
//!
//! [`value`] (JSON states: strict input, the storage codec, RFC 7396 merge, immutable shared
//! snapshots), `store` (what the agent needs from storage, as traits that name no backend),
//! `backends` (the SQLite and PostgreSQL backends behind them, and the one place that picks
//! one for a path), [`hooks`] (hook delivery in commit order), [`options`] and [`agent`] (the
//! API, split by job), [`agents`] (a store's agents as a whole: list, delete, expire). The
//! Rust surface on top: [`location`] and [`builder`] (opening), `typed` (states through
//! serde, as methods of [`Agent`]), [`types`] (the codec's types), [`callbacks`] (closures as
//! hooks) and [`async_agent`]. `unsafe` is allowed only in the SQLite backend's OS glue (its
//! WAL-index watcher) and in the fork watcher every backend uses (`store::process`).

#![deny(missing_docs)]

pub mod agent;
pub mod agents;
pub mod async_agent;
mod backends;
pub mod builder;
pub mod callbacks;
pub mod cancel;
pub mod error;
pub mod hooks;
pub mod location;
pub mod options;
mod replay;
mod store;
mod typed;
pub mod types;
pub mod watch;
pub mod work;

pub use agent::{Agent, Held, Ticket, Versioned, Written};
/// The state value (its own crate, `agent_state_value`): JSON, the codec, merge, snapshots.
pub use agent_state_value as value;
pub use agents::{delete_agent, expire_agents, list_agents, AgentInfo, AgentQuery};
pub use async_agent::AsyncAgent;
pub use builder::{AgentBuilder, ChangeLog};
pub use callbacks::HookGuard;
pub use cancel::Cancel;
pub use error::{Detail, Error, ErrorKind, Result};
pub use hooks::{
    ChangeKind, InitialStateHook, Patch, SchemaStep, StateChange, StateChangedHook, Validator,
};
pub use location::Location;
pub use options::OpenOptions;
pub use store::Synchronous;
pub use value::snapshot::Snapshot;
pub use watch::{Selector, Watch, WatchEvent, WatchKind, WatchOptions};

/// What the crate's own tests and tools need of its internals (the storage formats' version
/// numbers, the delta storage's bound, how a path names a server). Not part of the API: no
/// stability promise, hidden from the documentation.
#[doc(hidden)]
pub mod internals {
    #[cfg(feature = "postgres")]
    pub use crate::backends::postgres::SCHEMA_VERSION as POSTGRES_SCHEMA_VERSION;
    pub use crate::backends::server_uri;
    pub use crate::backends::sqlite::{APPLICATION_ID, SCHEMA_VERSION as SQLITE_SCHEMA_VERSION};
    pub use crate::store::{max_patches, MAX_PATCHES};
}

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// The book's pages (docs/src): their rust blocks run as doc tests, as the README's do, so an
/// example of the book that no longer compiles or runs fails `cargo test` (tests/readme/run.py
/// checks that every page with rust blocks is listed here).
#[cfg(doctest)]
mod book {
    #[doc = include_str!("../../../docs/src/architecture.md")]
    pub struct Architecture;
    #[doc = include_str!("../../../docs/src/concepts/change-log.md")]
    pub struct ConceptsChangeLog;
    #[doc = include_str!("../../../docs/src/concepts/codec.md")]
    pub struct ConceptsCodec;
    #[doc = include_str!("../../../docs/src/concepts/errors.md")]
    pub struct ConceptsErrors;
    #[doc = include_str!("../../../docs/src/concepts/hooks.md")]
    pub struct ConceptsHooks;
    #[doc = include_str!("../../../docs/src/concepts/lifecycle.md")]
    pub struct ConceptsLifecycle;
    #[doc = include_str!("../../../docs/src/concepts/many-agents.md")]
    pub struct ConceptsManyAgents;
    #[doc = include_str!("../../../docs/src/concepts/merge-and-replace.md")]
    pub struct ConceptsMergeAndReplace;
    #[doc = include_str!("../../../docs/src/concepts/state.md")]
    pub struct ConceptsState;
    #[doc = include_str!("../../../docs/src/concepts/versions.md")]
    pub struct ConceptsVersions;
    #[doc = include_str!("../../../docs/src/contributing.md")]
    pub struct Contributing;
    #[doc = include_str!("../../../docs/src/getting-started/c.md")]
    pub struct GettingStartedC;
    #[doc = include_str!("../../../docs/src/getting-started/cpp.md")]
    pub struct GettingStartedCpp;
    #[doc = include_str!("../../../docs/src/getting-started/cpp-in-depth.md")]
    pub struct GettingStartedCppInDepth;
    #[doc = include_str!("../../../docs/src/getting-started/go-in-depth.md")]
    pub struct GettingStartedGoInDepth;
    #[doc = include_str!("../../../docs/src/getting-started/node-in-depth.md")]
    pub struct GettingStartedNodeInDepth;
    #[doc = include_str!("../../../docs/src/getting-started/python-in-depth.md")]
    pub struct GettingStartedPythonInDepth;
    #[doc = include_str!("../../../docs/src/getting-started/go.md")]
    pub struct GettingStartedGo;
    #[doc = include_str!("../../../docs/src/getting-started/node.md")]
    pub struct GettingStartedNode;
    #[doc = include_str!("../../../docs/src/getting-started/python.md")]
    pub struct GettingStartedPython;
    #[doc = include_str!("../../../docs/src/getting-started/rust.md")]
    pub struct GettingStartedRust;
    #[doc = include_str!("../../../docs/src/guides/async.md")]
    pub struct GuidesAsync;
    #[doc = include_str!("../../../docs/src/guides/erasure-retention.md")]
    pub struct GuidesErasureRetention;
    #[doc = include_str!("../../../docs/src/guides/from-cloudflare-agents.md")]
    pub struct GuidesFromCloudflareAgents;
    #[doc = include_str!("../../../docs/src/guides/from-hand-rolled.md")]
    pub struct GuidesFromHandRolled;
    #[doc = include_str!("../../../docs/src/guides/from-langgraph.md")]
    pub struct GuidesFromLanggraph;
    #[doc = include_str!("../../../docs/src/guides/growing-collections.md")]
    pub struct GuidesGrowingCollections;
    #[doc = include_str!("../../../docs/src/guides/postgresql.md")]
    pub struct GuidesPostgresql;
    #[doc = include_str!("../../../docs/src/guides/schema-evolution.md")]
    pub struct GuidesSchemaEvolution;
    #[doc = include_str!("../../../docs/src/guides/serve.md")]
    pub struct GuidesServe;
    #[doc = include_str!("../../../docs/src/guides/watching.md")]
    pub struct GuidesWatching;
    #[doc = include_str!("../../../docs/src/introduction.md")]
    pub struct Introduction;
    #[doc = include_str!("../../../docs/src/operations/backup.md")]
    pub struct OperationsBackup;
    #[doc = include_str!("../../../docs/src/operations/integrity.md")]
    pub struct OperationsIntegrity;
    #[doc = include_str!("../../../docs/src/operations/monitoring.md")]
    pub struct OperationsMonitoring;
    #[doc = include_str!("../../../docs/src/operations/upgrades.md")]
    pub struct OperationsUpgrades;
    #[doc = include_str!("../../../docs/src/performance.md")]
    pub struct Performance;
    #[doc = include_str!("../../../docs/src/reference/api-docs.md")]
    pub struct ReferenceApiDocs;
    #[doc = include_str!("../../../docs/src/reference/c-api.md")]
    pub struct ReferenceCApi;
    #[doc = include_str!("../../../docs/src/reference/cli.md")]
    pub struct ReferenceCli;
    #[doc = include_str!("../../../docs/src/reference/options.md")]
    pub struct ReferenceOptions;
    #[doc = include_str!("../../../docs/src/reference/serve-protocol.md")]
    pub struct ReferenceServeProtocol;
    #[doc = include_str!("../../../docs/src/reference/statuses.md")]
    pub struct ReferenceStatuses;
}
