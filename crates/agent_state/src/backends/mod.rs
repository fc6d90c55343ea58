//! The storage backends, each behind the traits of [`crate::store`], and the one place that
//! picks one for a path: a `postgres://` or `postgresql://` URI is a PostgreSQL server
//! (feature `postgres`), anything else a SQLite file. Neither backend uses the other.

#[cfg(feature = "postgres")]
pub mod postgres;
pub mod sqlite;

#[cfg(test)]
mod tests;

use std::path::Path;

use crate::error::Result;
use crate::store::{Agents, Backend, StoreOptions};

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
