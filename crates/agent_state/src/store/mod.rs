//! Storage: what an agent needs from the place its state lives, as one trait per concern.
//!
//! [`Backend`] is the sum of five small traits (in `backend.rs`), each with one reason to
//! exist: [`Ownership`] (the connection belongs to this process, across `fork()`, for one
//! call), [`Freshness`] (cheap tests that the read cache is still current), [`Transactions`]
//! (taken through [`Txn`], which rolls back unless committed, so an early return or a `?` can
//! never leave one open), [`StoredState`] (the state and its version) and [`ChangeLog`] (the
//! log, whose retention is the store's policy).
//!
//! Two backends: [`sqlite`] (an embedded SQLite file, one agent or several) and [`postgres`]
//! (a server, one row per agent, feature `postgres`), sibling modules behind the same traits,
//! each converting its own errors; nothing above the traits changes. Neither backend uses the
//! other: what both need about processes, the fork count, is [`process`] (the one module of
//! `store` outside the SQLite backend's OS glue that allows `unsafe`, for `pthread_atfork`).
//! The agent never sees SQL, storage keys or how the log is pruned. `tests/layers.rs` fails
//! on an import cycle between modules and on one backend importing the other.

mod backend;
#[cfg(feature = "postgres")]
pub mod postgres;
// The fork watcher: a `pthread_atfork` handler, registered through C.
#[allow(unsafe_code)]
pub mod process;
pub mod sqlite;
mod txn;
mod types;

use std::path::Path;

use crate::error::Result;

pub use backend::{
    Agents, Backend, ChangeLog, Freshness, Head, Ownership, Retire, StoreSettings, StoredRead,
    StoredState, Transactions,
};
pub use sqlite::{MarkWatch, Reader};
pub use txn::Txn;
pub use types::{
    grain_of, id_hash, now_ms, AgentInfo, AgentQuery, LogRetention, LoggedChange, Mark, NewChange,
    StoreOptions, Synchronous, CHECKPOINT_EVERY, MAX_LIST_LIMIT, MAX_PATCHES, MAX_RETENTION,
    SMALL_STATE, WRITTEN_GRAIN_MS,
};

/// Opens the store at `path` with the backend it names: a `postgres://` or `postgresql://`
/// connection URI is a PostgreSQL server, anything else a SQLite file.
pub fn open(path: &Path, options: &StoreOptions) -> Result<Box<dyn Backend>> {
    if let Some(uri) = server_uri(path) {
        return open_server(uri, options);
    }
    Ok(Box::new(sqlite::open(path, options)?))
}

/// Opens the store at `path` for its agents as a whole ([`Agents`]): listing, deletion,
/// expiry. `options.agent_id` is not used.
pub fn open_agents(path: &Path, options: &StoreOptions) -> Result<Box<dyn Agents>> {
    if let Some(uri) = server_uri(path) {
        return open_server_agents(uri, options);
    }
    Ok(Box::new(sqlite::SqliteAgents::open(path, options)?))
}

#[cfg(feature = "postgres")]
fn open_server_agents(uri: &str, options: &StoreOptions) -> Result<Box<dyn Agents>> {
    Ok(Box::new(postgres::Postgres::open_agents(uri, options)?))
}

#[cfg(not(feature = "postgres"))]
fn open_server_agents(_uri: &str, _options: &StoreOptions) -> Result<Box<dyn Agents>> {
    Err(no_postgres())
}

/// `path` as a PostgreSQL connection URI, when it is one.
pub fn server_uri(path: &Path) -> Option<&str> {
    let text = path.to_str()?;
    let scheme = text.split_once("://")?.0;
    (scheme == "postgres" || scheme == "postgresql").then_some(text)
}

#[cfg(feature = "postgres")]
fn open_server(uri: &str, options: &StoreOptions) -> Result<Box<dyn Backend>> {
    Ok(Box::new(postgres::Postgres::open(uri, options)?))
}

#[cfg(not(feature = "postgres"))]
fn open_server(_uri: &str, _options: &StoreOptions) -> Result<Box<dyn Backend>> {
    Err(no_postgres())
}

#[cfg(not(feature = "postgres"))]
fn no_postgres() -> crate::error::Error {
    crate::error::Error::InvalidArgument(
        "this build of agent_state has no PostgreSQL support (cargo feature `postgres`)"
            .to_string(),
    )
}
