//! Storage: what an agent needs from the place its state lives, as one trait per concern.
//!
//! [`Backend`] is the sum of six small traits (in `backend.rs`), each with one reason to
//! exist: [`Ownership`] (the connection belongs to this process, across `fork()`, for one
//! call), [`Freshness`] (cheap tests that the read cache is still current), [`Transactions`]
//! (taken through [`Txn`], which rolls back unless committed, so an early return or a `?` can
//! never leave one open), [`StoredState`] (the state and its version), [`ChangeLog`] (the
//! log, whose retention is the agent's policy) and [`StoreSettings`] (what the store
//! remembers for every handle).
//!
//! This module names no backend: the backends live in `crate::backends`, each behind these
//! traits and converting its own errors, and `backends::open` is the one place that picks
//! one. What every backend needs about processes, the fork count, is [`process`] (which
//! allows `unsafe`, for `pthread_atfork`). The agent never sees SQL, storage keys or how the
//! log is pruned. What the store's watcher needs of a backend ([`CommitSignal`], [`WatchReads`])
//! is in `watch.rs`. `tests/layers.rs` fails on an import cycle between modules, on one backend
//! importing another, and on this module importing a backend.

mod backend;
// The fork watcher: a `pthread_atfork` handler, registered through C.
#[allow(unsafe_code)]
pub mod process;
mod txn;
mod types;
mod watch;

pub use backend::{
    Agents, Backend, ChangeLog, CommitWatch, Freshness, Head, Ownership, Retire, StoreSettings,
    StoredRead, StoredState, Transactions,
};
pub use txn::Txn;
pub use types::{
    grain_of, id_hash, max_patches, now_ms, AgentInfo, AgentQuery, LogRetention, LoggedChange,
    Mark, NewChange, StoreOptions, Synchronous, MAX_LIST_LIMIT, MAX_PATCHES, MAX_RETENTION,
    SMALL_STATE,
};
pub use watch::{CommitSignal, Notice, Signal, WatchReads};
