//! Sending a statement on a connection: unnamed (`exec`), or prepared once per server session
//! and kept (`cache_statement`), with what a server that forgot its statements makes the
//! connection forget.
//!
//! How statements are sent is the URI's `default_query_exec_mode` ([`ExecMode`]):
//! - `exec` (the default): nothing outlives the transaction that made it, so that a connection
//!   pooler in transaction mode (PgBouncer), which hands each transaction whatever server
//!   session is free, is as good as the server itself: every statement is unnamed
//!   (`query_typed`: parse, bind and execute in one round trip, the parameters' types given;
//!   nothing prepared to find again), and the settings a handle needs ([`Settings`](super::Settings)) are local
//!   to each transaction that writes or may wait for a lock: `SET LOCAL` in the batch that
//!   begins it ([`Settings::begin`](super::Settings::begin)), or, for a transaction of one statement, `set_config(..,
//!   true)` evaluated by the statement itself before it can wait for a row ([`Conn::commit_one`]);
//!   never `SET` for the session, which would vanish under us or stay behind for the pooler's
//!   next client.
//! - `cache_statement`: each statement is prepared once per server connection, named, and kept
//!   on the connection ([`Conn::query`]); the handle's settings are `SET` for the session when a
//!   checkout finds the session's differ ([`Conn::ensure_session`]), so a transaction of one
//!   statement is that statement alone, in autocommit. A server that forgot the statements
//!   (SQLSTATE 26000: `DISCARD ALL`, `DEALLOCATE`) forgets the session's settings too, as far
//!   as the connection knows: both are made again at the next use, and the caller (`super`)
//!   runs the statement again once. A new connection (a reconnect, a failover) starts with
//!   neither.

use tokio_postgres::types::Type;
use tokio_postgres::{Row, Statement};

use super::super::error::PgResult;
use super::super::params::{values, Param};
use super::super::session::SESSION_MARK;
use super::super::wait::{bounded, join};
use super::{forgotten, Conn, ExecMode};
use crate::cancel;

/// The most statements one connection keeps prepared (`cache_statement`); past it, statements
/// are sent unnamed. The library's statements are a few dozen (a listing's vary with its query).
const MOST_PREPARED: usize = 128;

impl Conn {
    /// The statement of `sql` prepared on this session (`cache_statement`): the one kept, or
    /// prepared now (one round trip) and kept; `None` in `exec` mode, or when the connection
    /// keeps as many as it may ([`MOST_PREPARED`]): the statement is then sent unnamed.
    pub(super) fn prepared(
        &mut self,
        sql: &str,
        params: &[Param<'_>],
    ) -> PgResult<Option<Statement>> {
        if self.mode == ExecMode::Exec {
            return Ok(None);
        }
        if let Some(statement) = self.prepared.get(sql) {
            return Ok(Some(statement.clone()));
        }
        if self.prepared.len() >= MOST_PREPARED {
            return Ok(None);
        }
        let types: Vec<Type> = params.iter().map(|(_, t)| t.clone()).collect();
        // With the statement, whether the session still has the settings the connection set
        // (pipelined: the same round trip): a session reset behind the library's back loses
        // the statements and the settings, and a new statement alone would not tell.
        let check = format!("SELECT current_setting('{SESSION_MARK}', true)");
        let (statement, mark) = round_trip!(self, |client| async {
            let (statement, mark) = join(
                client.prepare_typed(sql, &types),
                client.simple_query(&check),
            )
            .await;
            Ok((statement?, mark?))
        })?;
        let mark = mark.iter().find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_string),
            _ => None,
        });
        if self
            .session
            .is_some_and(|s| mark.as_deref() != Some(&s.mark()))
        {
            self.session = None;
        }
        self.prepared.insert(sql.to_string(), statement.clone());
        Ok(Some(statement))
    }

    /// After a failure: when the server forgot the session's statements ([`forgotten`]), so
    /// does the connection, and the session's settings with them (`DISCARD ALL` resets both);
    /// the next use prepares and sets them again.
    pub(super) fn forget_if_forgotten<T>(&mut self, result: PgResult<T>) -> PgResult<T> {
        if let Err(e) = &result {
            if forgotten(e) {
                self.prepared.clear();
                self.session = None;
            }
        }
        result
    }

    /// The rows of `sql`: an unnamed statement (`query_typed`: parse, bind and execute in one
    /// round trip), or in `cache_statement` mode the statement prepared on this session
    /// (prepared first when it is not yet: a round trip more, once per connection).
    pub fn query(&mut self, sql: &str, params: &[Param<'_>]) -> PgResult<Vec<Row>> {
        let Some(statement) = self.prepared(sql, params)? else {
            return round_trip!(self, |client| client.query_typed(sql, params));
        };
        let values = values(params);
        let result = round_trip!(self, |client| client.query(&statement, &values));
        self.forget_if_forgotten(result)
    }

    /// The row of `sql` (sent as by [`Conn::query`]), if any; more than one is an error.
    pub fn query_opt(&mut self, sql: &str, params: &[Param<'_>]) -> PgResult<Option<Row>> {
        let Some(statement) = self.prepared(sql, params)? else {
            return round_trip!(self, |client| client.query_typed_opt(sql, params));
        };
        let values = values(params);
        let result = round_trip!(self, |client| client.query_opt(&statement, &values));
        self.forget_if_forgotten(result)
    }

    /// Runs `sql` (sent as by [`Conn::query`]), its rows, if any, unread.
    pub fn execute(&mut self, sql: &str, params: &[Param<'_>]) -> PgResult<()> {
        self.query(sql, params).map(drop)
    }

    /// Statements in one simple query (no parameters).
    pub fn batch_execute(&mut self, sql: &str) -> PgResult<()> {
        round_trip!(self, |client| client.batch_execute(sql))
    }
}
