//! A store file as the watcher sees it (see [`crate::store::watch`]): the versions of its
//! agents, read store-wide on a connection of the watcher's own ([`SqliteWatchReads`]), and the
//! signal that agents may have changed ([`SqliteSignal`]).
//!
//! The signal reads the store's watch ring (`watch_ring`: which agents the library's writers
//! committed to, in every process) every few milliseconds: one load of its counter while
//! nothing is committed, no statement, no lock. What it finds is [`Signal::Changed`] with the
//! agents' id hashes; a ring it fell behind is [`Signal::Unknown`] (the watcher rescans).
//! Without a ring (a store the library cannot write beside), it reads the WAL-index header
//! instead (the commit mark that every commit changes) and says [`Signal::Unknown`] when it
//! moves.

use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::OptionalExtension;

use super::agents::open_existing;
use super::watch_ring::{Found, Reader, Ring};
use super::{busy, Sqlite};
use crate::error::Result;
use crate::store::{
    AgentQuery, CommitSignal, Mark, Notice, Signal, StoreOptions, WatchReads, MAX_LIST_LIMIT,
};

/// How often the signal looks at the commit mark while the store is busy: a commit is noticed
/// within this (a load and a comparison each time).
const LOOK_EVERY: Duration = Duration::from_millis(3);

/// How often it looks once nothing has moved for [`LIVELY`]: an idle watcher wakes 50 times a
/// second instead of 333 (about a sixth of a fleet server's idle CPU went to looking), and the
/// first commit after a quiet second is noticed within this instead.
const IDLE_LOOK_EVERY: Duration = Duration::from_millis(20);

/// How long after the last commit noticed the signal keeps looking every [`LOOK_EVERY`].
const LIVELY: Duration = Duration::from_secs(1);

/// The store-wide reads of a watcher, on a connection of its own to an existing store file.
pub struct SqliteWatchReads {
    conn: Sqlite,
    busy_timeout: Duration,
}

impl SqliteWatchReads {
    /// Opens the existing store file at `path` (never creating one; see `open_existing`).
    pub fn open(path: &Path, options: &StoreOptions) -> Result<SqliteWatchReads> {
        Ok(SqliteWatchReads {
            conn: open_existing(path, options, "watch")?,
            busy_timeout: options.busy_timeout,
        })
    }

    /// Runs `f` in one read transaction (so that what it reads is of one commit).
    fn in_read<T>(&mut self, f: impl FnOnce(&Sqlite) -> Result<T>) -> Result<T> {
        self.conn.ensure_current()?;
        let conn = &self.conn;
        busy::during(self.busy_timeout, || {
            conn.begin_read()?;
            let out = f(conn);
            conn.rollback();
            out
        })
    }
}

impl WatchReads for SqliteWatchReads {
    fn versions_with_prefix(&mut self, prefix: &str) -> Result<Vec<(String, u64)>> {
        self.in_read(|c| {
            let mut out: Vec<(String, u64)> = Vec::new();
            loop {
                let page = c.list_agents(&AgentQuery {
                    prefix: Some(prefix.to_string()),
                    after: out.last().map(|(id, _)| id.clone()),
                    limit: MAX_LIST_LIMIT,
                })?;
                let full = page.len() == MAX_LIST_LIMIT;
                out.extend(page.into_iter().map(|a| (a.id, a.version)));
                if !full {
                    return Ok(out);
                }
            }
        })
    }

    fn versions_of(&mut self, ids: &[&str]) -> Result<Vec<(String, u64)>> {
        self.in_read(|c| {
            // One lookup of the primary key per id, in one transaction: an index probe each,
            // without a statement as long as the list.
            let mut stmt = c.conn()?.prepare_cached(
                "SELECT version FROM agent_state WHERE agent = ?1 AND version > 0",
            )?;
            let mut out = Vec::with_capacity(ids.len());
            for id in ids {
                let version: Option<i64> = stmt.query_row([id], |r| r.get(0)).optional()?;
                if let Some(v) = version {
                    out.push((id.to_string(), v as u64));
                }
            }
            Ok(out)
        })
    }
}

/// Notices commits to a store file from its commit mark in shared memory.
pub struct SqliteSignal {
    /// The store's watch ring and this reader's place in it, when there is one.
    ring: Option<(Ring, Reader)>,
    conn: Sqlite,
    last: Option<Mark>,
    /// Where there is no commit mark (a read-only connection may have a private copy of the
    /// shared memory): the data version, asked with a statement at a slower pace.
    last_version: Option<u32>,
    /// When a commit was last noticed: the pace of looking follows it.
    last_moved: Instant,
}

/// Without a commit mark, the data version is asked this often (a statement each).
const ASK_EVERY: Duration = Duration::from_millis(50);

impl SqliteSignal {
    /// Opens the existing store file at `path` (never creating one).
    pub fn open(path: &Path, options: &StoreOptions) -> Result<SqliteSignal> {
        let conn = open_existing(path, options, "watch")?;
        let last = conn.commit_mark();
        let ring = Ring::open(path).map(|ring| {
            let reader = Reader::new(&ring);
            (ring, reader)
        });
        Ok(SqliteSignal {
            ring,
            conn,
            last,
            last_version: None,
            last_moved: Instant::now(),
        })
    }
}

impl SqliteSignal {
    /// The pause before the next look: short while commits come, longer once they stopped.
    fn look_every(&self) -> Duration {
        if self.last_moved.elapsed() < LIVELY {
            LOOK_EVERY
        } else {
            IDLE_LOOK_EVERY
        }
    }

    /// Waits on the ring: one load per look while nothing is appended.
    fn wait_ring(&mut self, timeout: Duration) -> Option<Signal> {
        self.ring.as_ref()?;
        let end = Instant::now() + timeout;
        loop {
            let (ring, reader) = self.ring.as_mut()?;
            if reader.moved(ring) {
                self.last_moved = Instant::now();
                match reader.read(ring) {
                    Found::Lost => return Some(Signal::Unknown),
                    Found::Appends(appends) if !appends.is_empty() => {
                        let notices = appends
                            .into_iter()
                            .map(|(id_hash, version)| Notice {
                                id: None,
                                id_hash,
                                version,
                            })
                            .collect();
                        return Some(Signal::Changed(notices));
                    }
                    Found::Appends(_) => {} // a slot still being written: look again soon
                }
            }
            let now = Instant::now();
            if now >= end {
                return Some(Signal::Quiet);
            }
            std::thread::sleep(self.look_every().min(end - now));
        }
    }
}

impl CommitSignal for SqliteSignal {
    fn wait(&mut self, timeout: Duration) -> Result<Signal> {
        if let Some(signal) = self.wait_ring(timeout) {
            return Ok(signal);
        }
        if self.conn.ensure_current()? {
            self.last = None;
        }
        let end = Instant::now() + timeout;
        loop {
            let mark = self.conn.commit_mark();
            let step = match mark {
                Some(_) if mark == self.last => self.look_every(),
                Some(_) => {
                    self.last = mark;
                    self.last_moved = Instant::now();
                    return Ok(Signal::Unknown);
                }
                None => {
                    // A commit under way, or no mark on this connection: the data version
                    // decides (it changes with every other connection's commit).
                    self.conn.refresh()?;
                    let version = self.conn.data_version();
                    if version.is_none() || version != self.last_version {
                        self.last_version = version;
                        self.last = None;
                        self.last_moved = Instant::now();
                        return Ok(Signal::Unknown);
                    }
                    ASK_EVERY
                }
            };
            let now = Instant::now();
            if now >= end {
                return Ok(Signal::Quiet);
            }
            std::thread::sleep(step.min(end - now));
        }
    }
}
