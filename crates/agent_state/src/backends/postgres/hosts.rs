//! Which of a URI's servers a new connection goes to: libpq's `target_session_attrs`, tried
//! host by host here (the client knows only `any`, `read-write` and `read-only`, and would
//! pick among the hosts itself), starting from the host that last took a connection.
//!
//! Why the last good host first, where libpq always starts from the first: after a failover
//! the old primary may come back as it was, writable (fencing it is the operator's part, but
//! until then two servers accept writes). The connections of this process then stay with the
//! promoted server as long as it answers, instead of each new connection going back to the
//! first host of the list. (A process that starts afresh does not know; the book's PostgreSQL guide says so.)

use tokio_postgres::Config;

use super::conn::{Conn, Limits};
use super::error::describe;
use super::tls::{self, Tls};
use super::uri::{host_lists_split, resolved, take_param, ExecMode};
use crate::error::{Error, Result};

/// libpq's `target_session_attrs`: what a server must be to take the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SessionAttrs {
    /// The first server that accepts the connection (libpq's default).
    Any,
    /// One that accepts writes: not a standby, `default_transaction_read_only` off.
    ReadWrite,
    /// One that refuses writes (a standby, or read-only by default).
    ReadOnly,
    /// One not in recovery (writable or not).
    Primary,
    /// One in recovery (a standby).
    Standby,
    /// A standby when one is up, else any.
    PreferStandby,
}

impl SessionAttrs {
    fn parse(value: &str) -> Option<SessionAttrs> {
        Some(match value {
            "any" => SessionAttrs::Any,
            "read-write" => SessionAttrs::ReadWrite,
            "read-only" => SessionAttrs::ReadOnly,
            "primary" => SessionAttrs::Primary,
            "standby" => SessionAttrs::Standby,
            "prefer-standby" => SessionAttrs::PreferStandby,
            _ => return None,
        })
    }

    /// True when a server `in_recovery` and `read_only` (its `transaction_read_only`) will do.
    fn accepts(self, in_recovery: bool, read_only: bool) -> bool {
        match self {
            SessionAttrs::Any => true,
            SessionAttrs::ReadWrite => !read_only && !in_recovery,
            SessionAttrs::ReadOnly => read_only || in_recovery,
            SessionAttrs::Primary => !in_recovery,
            SessionAttrs::Standby | SessionAttrs::PreferStandby => in_recovery,
        }
    }

    fn wanted(self) -> &'static str {
        match self {
            SessionAttrs::Any => "the PostgreSQL server",
            SessionAttrs::ReadWrite => {
                "a server that accepts writes (target_session_attrs=read-write)"
            }
            SessionAttrs::ReadOnly => "a read-only server (target_session_attrs=read-only)",
            SessionAttrs::Primary => "a primary (target_session_attrs=primary)",
            SessionAttrs::Standby => "a standby (target_session_attrs=standby)",
            SessionAttrs::PreferStandby => "a standby (target_session_attrs=prefer-standby)",
        }
    }
}

/// A parsed connection URI: the client's configuration, and what the library applies
/// itself: the hosts' requirement, how connections are secured and how statements are sent.
#[derive(Clone)]
pub(super) struct Target {
    pub config: Config,
    pub attrs: SessionAttrs,
    pub tls: Tls,
    /// `default_query_exec_mode` (see [`ExecMode`]): every connection of the URI's pool is in
    /// this mode.
    pub mode: ExecMode,
}

impl Target {
    /// Parses `uri` (`shown` in messages: without its password).
    pub fn parse(uri: &str, shown: &str) -> Result<Target> {
        let invalid = |why: String| {
            Error::InvalidArgument(format!(
                "{shown}: not a PostgreSQL connection URI this library understands: {why}"
            ))
        };
        // The TLS settings the client does not know come out first (`super::tls`).
        let (rest, tls) =
            tls::split(uri).map_err(|e| Error::InvalidArgument(format!("{shown}: {e}")))?;
        let tls = Tls::new(&tls).map_err(|e| Error::InvalidArgument(format!("{shown}: {e}")))?;
        let (rest, attrs) = take_param(&rest, "target_session_attrs")
            .map_err(|e| Error::InvalidArgument(format!("{shown}: {e}")))?;
        let (rest, mode) = ExecMode::take(&rest).map_err(invalid)?;
        let attrs = match attrs {
            None => SessionAttrs::Any,
            Some(v) => SessionAttrs::parse(&v).ok_or_else(|| {
                invalid(format!(
                    "target_session_attrs={v} (one of any, read-write, read-only, primary, \
                     standby, prefer-standby)"
                ))
            })?,
        };
        let config: Config = host_lists_split(&rest)
            .parse()
            .map_err(|e: tokio_postgres::Error| invalid(describe(&e)))?;
        Ok(Target {
            config,
            attrs,
            tls,
            mode,
        })
    }

    /// A new connection to a server that meets the requirement, trying the hosts in the URI's
    /// order from `first` on (then from the start), each within `limits.connect`. Returns it
    /// with the index of its host (for the next call's `first`). `Error::Unavailable` when none
    /// does, saying what each host answered; `Error::Auth` when a host answered but would not
    /// let us in (TLS or credentials: a setting to fix, not an outage to wait out).
    pub fn connect(&self, shown: &str, limits: Limits, first: usize) -> Result<(Conn, usize)> {
        let candidates = resolved(&self.config);
        let n = candidates.len();
        let mut why = Vec::new();
        let mut refused = false;
        // prefer-standby: a standby first; when none takes the connection, any server.
        let passes = match self.attrs {
            SessionAttrs::PreferStandby => vec![SessionAttrs::Standby, SessionAttrs::Any],
            attrs => vec![attrs],
        };
        for (pass, attrs) in passes.iter().enumerate() {
            for k in 0..n {
                let i = (first + k) % n.max(1);
                let candidate = &candidates[i];
                let config = match &candidate.config {
                    Ok(c) => c,
                    Err(e) => {
                        if pass == 0 {
                            why.push(format!("{}: {e}", candidate.label));
                        }
                        continue;
                    }
                };
                let mut conn = match Conn::connect(config, &self.tls, limits, self.mode) {
                    Ok(conn) => conn,
                    Err(e) if e.cancelled => {
                        return Err(crate::cancel::cancelled("while connecting to the server"))
                    }
                    Err(e) => {
                        if pass == 0 {
                            refused |= e.refused;
                            why.push(format!("{}: {}", candidate.label, e.why));
                        }
                        continue;
                    }
                };
                if *attrs == SessionAttrs::Any {
                    return Ok((conn, i));
                }
                match conn.session_kind() {
                    Ok((in_recovery, read_only)) if attrs.accepts(in_recovery, read_only) => {
                        return Ok((conn, i))
                    }
                    Ok((in_recovery, read_only)) => why.push(format!(
                        "{}: {}",
                        candidate.label,
                        match (in_recovery, read_only) {
                            (true, _) => "a standby (in recovery)",
                            (false, true) => "read-only (default_transaction_read_only)",
                            (false, false) => "a primary accepting writes",
                        }
                    )),
                    Err(e) => {
                        crate::cancel::check("while connecting to the server")?;
                        why.push(format!("{}: {e}", candidate.label))
                    }
                }
            }
        }
        if n == 0 {
            why.push("no host to connect to".to_string());
        }
        let message = format!(
            "cannot connect to {} of {shown}: {}",
            self.attrs.wanted(),
            why.join("; ")
        );
        Err(if refused {
            Error::Auth(message.into())
        } else {
            Error::Unavailable(message.into())
        })
    }
}
