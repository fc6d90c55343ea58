//! The store's commit signal on PostgreSQL ([`CommitSignal`]): the server's notifications on a
//! connection of the watcher's own ([`Listener`]). (Through a transaction pooler, which cannot
//! carry `LISTEN`, the watcher rescans once per interval instead: see `crate::backends`.)
//!
//! **Listening.** One connection per watcher (one per store and process, see `crate::watch`),
//! not from the pool: `LISTEN` belongs to a server session, and a pooled connection serves
//! transactions of every handle. It is made like the pool's (the URI's hosts, TLS and
//! `target_session_attrs`: `super::hosts`), then:
//! 1. `LISTEN agent_state_changes` ([`CHANNEL`]);
//! 2. a row in `agent_listeners` whose `expires_ms` (the server's clock) the watcher renews
//!    every [`HEARTBEAT`] for [`EXPIRY`] more. Writers notify only while such a row is
//!    unexpired (`super::sql`), so a store nobody watches pays nothing, and a listener that
//!    died without unregistering (killed, cut off) stops costing the writers after at most
//!    [`EXPIRY`];
//! 3. a barrier ([`Listener::barrier`]): every write that may not have seen the row ends
//!    before the constructor returns, so that the versions the watcher reads next include each
//!    of them, and every later commit notifies.
//!
//! Losing the connection (a restart, a failover, a terminated backend) loses the
//! notifications sent meanwhile: the listener connects again (with a growing pause between
//! attempts), registers again and says [`Signal::Unknown`], on which the watcher rescans every
//! watched agent.

use std::time::{Duration, Instant};

use super::conn::{int8_param as int8, Conn, Limits};
use super::error::{classify, Fault, PgError};
use super::hosts::Target;
use super::schema;
use super::sql::{CHANNEL, LISTENERS_PRUNE, LISTENER_DROP, LISTENER_RENEW};
use super::uri::redact;
use crate::error::{Error, Result};
use crate::store::{CommitSignal, Notice, Signal, StoreOptions};

/// How often a listener renews its registration.
const HEARTBEAT: Duration = Duration::from_secs(30);
/// How long a registration lasts unrenewed: three heartbeats, so that a watcher thread held
/// up for a while (a slow callback, a loaded machine) does not lapse.
const EXPIRY: Duration = Duration::from_secs(90);
/// The longest pause between two attempts to connect again.
const MOST_BACKOFF: Duration = Duration::from_secs(5);
/// The first.
const FIRST_BACKOFF: Duration = Duration::from_millis(50);

/// The server's notifications on a connection of the watcher's own (see the module's doc).
pub struct Listener {
    target: Target,
    /// The URI without its password, for messages.
    shown: String,
    limits: Limits,
    /// `None` while disconnected (then `retry_at` says when to try again).
    conn: Option<Conn>,
    /// The index of the host of the last connection (tried first next time).
    host: usize,
    /// This listener's row in `agent_listeners` (random: processes share the table).
    id: i64,
    /// When the registration was last renewed.
    renewed: Instant,
    retry_at: Instant,
    backoff: Duration,
}

impl Listener {
    /// Connects, listens and registers (see the module's doc); returns once every write that
    /// could commit without notifying has ended. Errors: [`Error::Storage`] when the database
    /// holds no store (watching never creates one), [`Error::Unavailable`] or
    /// [`Error::Auth`] (the server), [`Error::Busy`] when writes kept the barrier waiting
    /// longer than `busy_timeout_ms + server_timeout_ms`.
    pub fn open(uri: &str, options: &StoreOptions) -> Result<Listener> {
        let shown = redact(uri);
        let target = Target::parse(uri, &shown)?;
        let mut listener = Listener {
            target,
            shown,
            limits: Limits::new(options.busy_timeout, options.server_timeout),
            conn: None,
            host: 0,
            id: super::stamp::random(),
            renewed: Instant::now(),
            retry_at: Instant::now(),
            backoff: FIRST_BACKOFF,
        };
        listener.connect()?;
        Ok(listener)
    }

    /// A new connection, listening and registered, past the barrier.
    fn connect(&mut self) -> Result<()> {
        let (mut conn, host) = self.target.connect(&self.shown, self.limits, self.host)?;
        self.host = host;
        match self.register(&mut conn) {
            Ok(()) => {
                self.conn = Some(conn);
                self.backoff = FIRST_BACKOFF;
                Ok(())
            }
            Err(Fault::Answered(e) | Fault::Lost(e)) => Err(e),
        }
    }

    fn register(&mut self, conn: &mut Conn) -> std::result::Result<(), Fault> {
        if !schema::exists(conn, &self.shown)? {
            schema::add_listeners(conn)?;
        }
        // Listening first: a write that sees the row commits after the LISTEN did, and its
        // notification comes to this session.
        conn.batch_execute(&format!("LISTEN {CHANNEL}; {LISTENERS_PRUNE}"))
            .map_err(|e| classify(&e, "cannot listen for the store's changes"))?;
        self.renew(conn)
            .map_err(|e| classify(&e, "cannot register the store's watcher"))?;
        self.barrier(conn)
    }

    /// Renews (or makes) the registration, for [`EXPIRY`] more; true when it had not lapsed.
    fn renew(&mut self, conn: &mut Conn) -> std::result::Result<bool, PgError> {
        let expiry = EXPIRY.as_millis() as i64;
        let row = conn.query_opt(LISTENER_RENEW, &[int8(&self.id), int8(&expiry)])?;
        self.renewed = Instant::now();
        Ok(row.is_some_and(|r| r.get::<_, bool>(0)))
    }

    /// Waits until no write that may have missed the registration is in flight: the
    /// transactions that hold a lock on `agent_state` once the registration has committed
    /// (every write of an agent's row holds its ROW EXCLUSIVE lock until its transaction
    /// ends) are waited for, by their virtual transaction ids, which every transaction holds
    /// as a lock of its own until it ends (read from `pg_locks`, as `CREATE INDEX
    /// CONCURRENTLY` waits for its lockers).
    ///
    /// Why these, and not the transaction ids running at registration: a writer notifies
    /// when its statement's snapshot shows the row, and that snapshot can be older than the
    /// transaction id the statement gets when it first changes a row (an optimistic write
    /// waiting for the row's lock has its snapshot and no id yet). The server takes a
    /// statement's table locks before its snapshot (at parse, or when a prepared plan is
    /// checked), so a write not holding its lock when `pg_locks` is read takes its snapshot
    /// after the registration committed and sees the row; those holding it then have
    /// committed once waited for (their versions are in the watcher's next read) or rolled
    /// back. Nothing waits for the watcher: an earlier version took the table's SHARE lock,
    /// which queued every write of the store behind it (and failed those with
    /// `busy_timeout_ms` 0).
    ///
    /// Waits until `busy_timeout_ms + server_timeout_ms` have passed, then [`Error::Busy`].
    fn barrier(&self, conn: &mut Conn) -> std::result::Result<(), Fault> {
        let deadline = Instant::now() + self.limits.round_trip;
        let failed = |e: PgError| classify(&e, "cannot wait for the writes in flight");
        let lockers: Vec<String> = conn
            .query(
                "SELECT DISTINCT virtualtransaction FROM pg_locks \
                 WHERE relation = 'agent_state'::regclass AND pid <> pg_backend_pid()",
                &[],
            )
            .map_err(failed)?
            .iter()
            .map(|row| row.get::<_, String>(0))
            // A virtual transaction id is "backend/local", both numbers: anything else is
            // not one, and is never written into the statement below.
            .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit() || b == b'/'))
            .collect();
        if lockers.is_empty() {
            return Ok(());
        }
        let list = lockers
            .iter()
            .map(|v| format!("'{v}'"))
            .collect::<Vec<_>>()
            .join(",");
        let sql = format!(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'virtualxid' AND virtualxid IN ({list})"
        );
        let mut pause = Duration::from_millis(2);
        loop {
            let left: i64 = conn
                .query_opt(&sql, &[])
                .map_err(failed)?
                .map_or(0, |row| row.get(0));
            if left == 0 {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(Fault::Answered(Error::Busy(
                    format!(
                        "{}: writes of the store kept the watcher from starting for more than \
                         busy_timeout_ms + server_timeout_ms ({} ms): it waits for the writes \
                         in flight when it starts, so as to miss none",
                        self.shown,
                        self.limits.round_trip.as_millis()
                    )
                    .into(),
                )));
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(50));
        }
    }

    /// After the connection was lost: tries again at once, then after growing pauses.
    /// `Ok(true)`: connected again (the watcher must rescan); `Ok(false)`: not yet. Errors
    /// that will not pass by waiting ([`Error::Auth`], [`Error::Storage`]) end the watch.
    fn reconnect(&mut self) -> Result<bool> {
        match self.connect() {
            Ok(()) => Ok(true),
            Err(e @ (Error::Auth(_) | Error::Storage(_) | Error::InvalidArgument(_))) => Err(e),
            Err(_) => {
                self.retry_at = Instant::now() + self.backoff;
                self.backoff = (self.backoff * 2).min(MOST_BACKOFF);
                Ok(false)
            }
        }
    }
}

/// The notices of the notifications' payloads (`"<version> <id>"`, see `super::sql`); `None`
/// when one is not of that form (another program's notification on the channel): the watcher
/// then rescans.
fn notices(payloads: impl Iterator<Item = String>) -> Option<Vec<Notice>> {
    let mut out: Vec<Notice> = Vec::new();
    for payload in payloads {
        let (version, id) = payload.split_once(' ')?;
        let version: u64 = version.parse().ok()?;
        // One notice per agent, its latest version (a burst of writes of one agent).
        match out.iter_mut().find(|n| n.id.as_deref() == Some(id)) {
            Some(n) => n.version = n.version.max(version),
            None => out.push(Notice::of(id, version)),
        }
    }
    Some(out)
}

impl CommitSignal for Listener {
    fn wait(&mut self, timeout: Duration) -> Result<Signal> {
        if self.conn.is_none() {
            let now = Instant::now();
            if self.retry_at > now {
                std::thread::sleep(timeout.min(self.retry_at - now));
                if Instant::now() < self.retry_at {
                    return Ok(Signal::Quiet);
                }
            }
            return Ok(if self.reconnect()? {
                Signal::Unknown
            } else {
                Signal::Quiet
            });
        }
        let Some(mut conn) = self.conn.take() else {
            return Ok(Signal::Quiet);
        };
        if self.renewed.elapsed() >= HEARTBEAT {
            let renewed = match self.renew(&mut conn) {
                Ok(true) => Some(true),
                // It lapsed (the watcher was held up longer than EXPIRY): writes may have
                // committed without notifying since; the watcher rescans (after the barrier:
                // a write that missed the renewed row may still be in flight).
                Ok(false) => match self.barrier(&mut conn) {
                    Ok(()) | Err(Fault::Answered(Error::Busy(_))) => Some(false),
                    Err(_) => None,
                },
                Err(_) => None,
            };
            match renewed {
                Some(true) => {}
                Some(false) => {
                    self.conn = Some(conn);
                    return Ok(Signal::Unknown);
                }
                // The connection was lost, or the server refused (a standby after a
                // failover, say): a new connection, registered again, from the next wait.
                None => {
                    drop(conn);
                    self.retry_at = Instant::now();
                    return Ok(Signal::Quiet);
                }
            }
        }
        let until_heartbeat = HEARTBEAT.saturating_sub(self.renewed.elapsed());
        match conn.notifications(timeout.min(until_heartbeat)) {
            Ok(list) => {
                self.conn = Some(conn);
                if list.is_empty() {
                    return Ok(Signal::Quiet);
                }
                Ok(
                    match notices(list.into_iter().map(|n| n.payload().to_string())) {
                        Some(notices) => Signal::Changed(notices),
                        None => Signal::Unknown,
                    },
                )
            }
            Err(_) => {
                drop(conn);
                Ok(if self.reconnect()? {
                    Signal::Unknown
                } else {
                    Signal::Quiet
                })
            }
        }
    }
}

impl Drop for Listener {
    /// Unregisters (best effort, briefly: a server that does not answer lets the row expire)
    /// and closes the connection. A connection inherited across `fork()` is left alone: it
    /// is the parent's (see `Conn`).
    fn drop(&mut self) {
        if let Some(mut conn) = self.conn.take() {
            if conn.belongs_here() && conn.reusable() {
                conn.set_limit(self.limits.round_trip.min(Duration::from_secs(2)));
                let _ = conn.execute(LISTENER_DROP, &[int8(&self.id)]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_become_one_notice_per_agent_at_its_latest_version() {
        let got = notices(
            ["3 a", "4 a b", "0 c", "2 a"]
                .into_iter()
                .map(str::to_string),
        )
        .unwrap();
        assert_eq!(
            got,
            vec![Notice::of("a", 3), Notice::of("a b", 4), Notice::of("c", 0)]
        );
        assert_eq!(notices(["x y".to_string()].into_iter()), None);
        assert_eq!(notices(["5".to_string()].into_iter()), None);
    }
}
