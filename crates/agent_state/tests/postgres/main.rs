//! The PostgreSQL backend against a real server: `AGENT_STATE_TEST_PG_URI` names it (`make
//! test` starts one, see tests/pg/with-server.sh). Without it the tests are skipped with a
//! notice, except under `CI=true`, where that is a failure.
//!
//! Tests share one database: each uses its own agent ids (process id and a counter).
//!
//! Through a connection pooler (tests/pg/pooler-suites.sh), `AGENT_STATE_TEST_PG_URI` names the
//! pooler, `AGENT_STATE_TEST_PG_POOLER` its pool mode and `AGENT_STATE_TEST_PG_SERVER_URI` the
//! server behind it, which [`admin`] connections reach directly. With prepared statements
//! (tests/pg/cache-statement.sh), `AGENT_STATE_TEST_PG_URI` carries
//! `default_query_exec_mode=cache_statement`, `AGENT_STATE_TEST_PG_SERVER_URI` the same server
//! without it (for [`admin`]), and `AGENT_STATE_TEST_PG_EXEC_MODE` the mode for the servers the
//! tests start themselves ([`in_exec_mode`]).
//!
//! These are the tests of the PostgreSQL backend itself (watching's notifications among them:
//! watch), those that start servers of their own too (crash, freeze, failover: a primary and
//! its standby) and the one that must be alone in its process (process: threads and `fork()`). The tests of the library's behaviour run on this
//! server too, each declared once for both backends (`#[each_backend]`, crates/test-support).

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use agent_state::{Agent, OpenOptions};
use serde_json::{json, Value};

mod basics;
mod bouncer;
mod cancel;
mod concurrency;
mod crash;
mod failover;
mod freeze;
mod log;
mod modes;
mod pool;
mod process;
mod timeouts;
mod watch;

/// The test server's URI, or `None` (with a notice) when there is none.
pub fn server() -> Option<String> {
    match std::env::var("AGENT_STATE_TEST_PG_URI") {
        Ok(uri) if !uri.is_empty() => Some(uri),
        _ => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "AGENT_STATE_TEST_PG_URI is unset under CI=true: the PostgreSQL tests cannot run"
            );
            eprintln!("skipped: AGENT_STATE_TEST_PG_URI is unset (no PostgreSQL server)");
            None
        }
    }
}

/// The server's URI, or returns from the test (skipped).
#[macro_export]
macro_rules! server_or_skip {
    () => {
        match $crate::server() {
            Some(uri) => uri,
            None => return,
        }
    };
}

/// An agent id no other test (or run) uses.
pub fn unique(name: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "{name}-{}-{}-{nanos}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Opens agent `id` at `uri` with the options in `extra` (a JSON object).
pub fn open(uri: &str, id: &str, extra: Value) -> agent_state::Result<Agent> {
    let mut o = extra;
    o["agent_id"] = json!(id);
    let options = OpenOptions::from_json(o.to_string().as_bytes())?;
    Agent::open_with(Path::new(uri), &options)
}

/// A separate connection, to look at the database behind the library's back: to the server
/// itself, also when the tests run through a pooler (`AGENT_STATE_TEST_PG_SERVER_URI`; `uri`'s
/// database).
pub fn admin(uri: &str) -> postgres::Client {
    let target = match std::env::var("AGENT_STATE_TEST_PG_SERVER_URI") {
        Ok(server) if !server.is_empty() => with_database(&server, database_of(uri)),
        _ => uri.to_string(),
    };
    postgres::Client::connect(&target, postgres::NoTls).unwrap()
}

/// The database `uri` names (its path).
fn database_of(uri: &str) -> &str {
    let rest = uri.split_once("://").map_or(uri, |(_, r)| r);
    let path = &rest[rest.find('/').unwrap_or(rest.len())..];
    let path = path.split('?').next().unwrap_or("");
    path.trim_start_matches('/')
}

/// Another session holding agent `id`'s row (`SELECT .. FOR UPDATE` in its open transaction)
/// until [`RowLock::release`], or until dropped (its connection closes, the server rolls back).
pub struct RowLock {
    client: postgres::Client,
    /// The server process holding the lock (pinned to this client while its transaction is
    /// open, also behind a pooler in transaction mode).
    pid: i32,
}

impl RowLock {
    pub fn hold(uri: &str, id: &str) -> RowLock {
        let mut c = admin(uri);
        c.batch_execute("BEGIN").unwrap();
        c.query(
            "SELECT 1 FROM agent_state WHERE agent = $1 FOR UPDATE",
            &[&id],
        )
        .unwrap();
        let pid = c.query_one("SELECT pg_backend_pid()", &[]).unwrap().get(0);
        RowLock { client: c, pid }
    }

    /// The server process holding the lock: the sessions waiting for it are those whose
    /// `pg_blocking_pids` hold this.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    pub fn release(mut self) {
        self.client.batch_execute("ROLLBACK").unwrap();
    }
}

/// `uri` with another database name.
pub fn with_database(uri: &str, db: &str) -> String {
    let (scheme, rest) = uri.split_once("://").unwrap();
    let path_start = rest.find('/').unwrap_or(rest.len());
    let authority = &rest[..path_start];
    let after = &rest[path_start..];
    let query = after.find('?').map_or("", |q| &after[q..]);
    format!("{scheme}://{authority}/{db}{query}")
}

/// `uri`, a server a test started itself, with the library's `default_query_exec_mode` the
/// suite runs in: `AGENT_STATE_TEST_PG_EXEC_MODE` when set (tests/pg/cache-statement.sh),
/// else the default. (The suite's own server is named with its mode in
/// `AGENT_STATE_TEST_PG_URI`.)
pub fn in_exec_mode(uri: String) -> String {
    match std::env::var("AGENT_STATE_TEST_PG_EXEC_MODE") {
        Ok(mode) if !mode.is_empty() => {
            with_param(&uri, &format!("default_query_exec_mode={mode}"))
        }
        _ => uri,
    }
}

/// `uri` without the library's `default_query_exec_mode` parameter, for a plain client of
/// the same server or pooler (which refuses it).
pub fn without_exec_mode(uri: &str) -> String {
    let Some((head, query)) = uri.split_once('?') else {
        return uri.to_string();
    };
    let kept: Vec<&str> = query
        .split('&')
        .filter(|p| !p.starts_with("default_query_exec_mode="))
        .collect();
    if kept.is_empty() {
        head.to_string()
    } else {
        format!("{head}?{}", kept.join("&"))
    }
}

/// `uri` with one more query parameter.
pub fn with_param(uri: &str, param: &str) -> String {
    if uri.contains('?') {
        format!("{uri}&{param}")
    } else {
        format!("{uri}?{param}")
    }
}
