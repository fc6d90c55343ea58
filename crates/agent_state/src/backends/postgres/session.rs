//! The settings one handle needs on the server: `synchronous_commit` and `lock_timeout`, local
//! to each transaction (`exec` mode) or set once for the session (`cache_statement`), and the
//! mark that tells whether a session still has the ones set.

use crate::store::Synchronous;

/// A setting of the library's own, set with the session's settings (`cache_statement`) to
/// the values they were set to: `DISCARD ALL` or `RESET ALL` behind the library's back resets
/// it with them, which a connection that prepares a statement finds out in the same round trip
/// ([`Conn::prepared`](super::conn::Conn::prepared)).
pub(super) const SESSION_MARK: &str = "agent_state.session_settings";

/// The settings one handle needs in each transaction that writes or may wait for a lock
/// (`SET LOCAL`: they end with it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Settings {
    pub synchronous: Synchronous,
    /// `lock_timeout`, in milliseconds: `busy_timeout_ms`, at least 1 (PostgreSQL reads 0 as
    /// "wait forever"; 1 ms fails a contended lock at once, and an uncontended one never waits).
    pub lock_timeout_ms: u64,
}

impl Settings {
    /// `synchronous_commit`'s value.
    pub(super) fn synchronous_commit(&self) -> &'static str {
        match self.synchronous {
            Synchronous::Full => "on",
            Synchronous::Normal => "off",
        }
    }

    /// `lock_timeout`'s value, in milliseconds.
    pub(super) fn lock_timeout(&self) -> String {
        self.lock_timeout_ms.max(1).to_string()
    }

    /// The settings as `SET LOCAL` statements, for a batch inside a transaction (explicit, or
    /// the implicit one of a simple query of several statements).
    pub fn set_local(&self) -> String {
        format!(
            "SET LOCAL lock_timeout = {}; SET LOCAL synchronous_commit = {}",
            self.lock_timeout(),
            self.synchronous_commit()
        )
    }

    /// The settings as `SET` statements, for the session (`cache_statement`: outside any
    /// transaction, so that no rollback undoes them), with [`SESSION_MARK`] saying which.
    pub(super) fn set_session(&self) -> String {
        format!(
            "SET lock_timeout = {}; SET synchronous_commit = {}; SET {SESSION_MARK} = '{}'",
            self.lock_timeout(),
            self.synchronous_commit(),
            self.mark()
        )
    }

    /// What [`SESSION_MARK`] holds in a session that has these settings.
    pub(super) fn mark(&self) -> String {
        format!("{} {}", self.lock_timeout(), self.synchronous_commit())
    }

    /// The batch that begins a transaction with these settings: one simple query, one round
    /// trip, as `BEGIN` alone.
    pub fn begin(&self) -> String {
        format!("BEGIN; {}", self.set_local())
    }
}
