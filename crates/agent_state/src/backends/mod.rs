//! The storage backends, each behind the traits of [`crate::store`], and the one place that
//! picks one for a path: a `postgres://` or `postgresql://` URI is a PostgreSQL server
//! (feature `postgres`), anything else a SQLite file. Neither backend uses the other.

#[cfg(feature = "postgres")]
pub mod postgres;
pub mod sqlite;

#[cfg(test)]
mod tests;

use std::path::Path;
use std::time::Duration;

use crate::error::Result;
use crate::store::{Agents, Backend, CommitSignal, Signal, StoreOptions, WatchReads};

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

/// Opens what tells the store's watcher that agents of the store at `path` may have changed
/// (see [`CommitSignal`]): on a SQLite file, its commit mark in shared memory; on a server,
/// with `poll_interval`, a query per interval (no notifications), else its notifications.
/// Never creates a store: a missing file is [`Error::Storage`](crate::Error::Storage), an
/// in-memory one [`Error::InvalidArgument`](crate::Error::InvalidArgument).
pub fn open_signal(
    path: &Path,
    options: &StoreOptions,
    poll_interval: Option<Duration>,
) -> Result<Box<dyn CommitSignal>> {
    if let Some(uri) = server_uri(path) {
        return open_server_signal(uri, options, poll_interval);
    }
    Ok(Box::new(sqlite::SqliteSignal::open(path, options)?))
}

/// Opens the store-wide reads of the store's watcher (see [`WatchReads`]), on a connection of
/// their own. Never creates a store (errors as [`open_signal`]'s).
pub fn open_watch_reads(path: &Path, options: &StoreOptions) -> Result<Box<dyn WatchReads>> {
    if let Some(uri) = server_uri(path) {
        return open_server_watch_reads(uri, options);
    }
    Ok(Box::new(sqlite::SqliteWatchReads::open(path, options)?))
}

#[cfg(feature = "postgres")]
fn open_server_signal(
    uri: &str,
    options: &StoreOptions,
    poll_interval: Option<Duration>,
) -> Result<Box<dyn CommitSignal>> {
    Ok(match poll_interval {
        // Through a transaction pooler, which cannot carry LISTEN: nothing registered, so
        // writers never notify for it.
        Some(interval) => Box::new(EveryInterval::new(interval)),
        None => Box::new(postgres::Listener::open(uri, options)?),
    })
}

#[cfg(not(feature = "postgres"))]
fn open_server_signal(
    _uri: &str,
    _options: &StoreOptions,
    _poll_interval: Option<Duration>,
) -> Result<Box<dyn CommitSignal>> {
    Err(no_postgres())
}

#[cfg(feature = "postgres")]
fn open_server_watch_reads(uri: &str, options: &StoreOptions) -> Result<Box<dyn WatchReads>> {
    Ok(Box::new(postgres::PgWatchReads::open(uri, options)?))
}

#[cfg(not(feature = "postgres"))]
fn open_server_watch_reads(_uri: &str, _options: &StoreOptions) -> Result<Box<dyn WatchReads>> {
    Err(no_postgres())
}

/// A signal that knows nothing but time: [`Signal::Unknown`] once per interval (a rescan).
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
struct EveryInterval {
    every: Duration,
    next: std::time::Instant,
}

impl EveryInterval {
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    fn new(every: Duration) -> EveryInterval {
        EveryInterval {
            every,
            next: std::time::Instant::now() + every,
        }
    }
}

impl CommitSignal for EveryInterval {
    fn wait(&mut self, timeout: Duration) -> Result<Signal> {
        let now = std::time::Instant::now();
        if now + timeout < self.next {
            std::thread::sleep(timeout);
            return Ok(Signal::Quiet);
        }
        std::thread::sleep(self.next.saturating_duration_since(now));
        self.next = std::time::Instant::now() + self.every;
        Ok(Signal::Unknown)
    }
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
