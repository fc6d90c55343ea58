//! The two ways of sending statements (`default_query_exec_mode`, see `conn`) against the test
//! server (`AGENT_STATE_TEST_PG_URI`; skipped without one, a failure under `CI=true`): the
//! handle's settings are in effect where a write may wait for a lock and at its commit, in
//! both modes; and in `cache_statement` mode a session that forgot its prepared statements and
//! settings (`DISCARD ALL`) gets both again, and the calls on it go through.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::conn::{forgotten, text_param, Conn, ExecMode, Limits, Settings};
use super::hosts::Target;
use super::pool::Pool;
use super::uri::EXEC_MODE_PARAM;
use crate::store::Synchronous;
use crate::{Agent, OpenOptions};

/// The test server's URI without any `default_query_exec_mode` (each test names its own), or
/// `None` (skipped).
pub(super) fn server() -> Option<String> {
    let uri = std::env::var("AGENT_STATE_TEST_PG_URI")
        .ok()
        .filter(|u| !u.is_empty());
    let Some(uri) = uri else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "AGENT_STATE_TEST_PG_URI is unset under CI=true: the PostgreSQL tests cannot run"
        );
        eprintln!("skipped: AGENT_STATE_TEST_PG_URI is unset");
        return None;
    };
    Some(ExecMode::take(&uri).unwrap().0)
}

/// `uri` in `mode`, with a parameter no other test uses (so that its pool is its own).
pub(super) fn in_mode(uri: &str, mode: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let app = format!(
        "unit_modes_{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    );
    let sep = if uri.contains('?') { '&' } else { '?' };
    format!("{uri}{sep}application_name={app}&{EXEC_MODE_PARAM}={mode}")
}

pub(super) fn connect(uri: &str) -> Conn {
    let target = Target::parse(uri, uri).unwrap();
    let limits = Limits::new(Duration::from_secs(30), Duration::from_secs(30));
    target.connect(uri, limits, 0).unwrap().0
}

/// The session's setting `name` (asked again once, prepared again, when the session forgot
/// the statement: as the library's callers do).
fn setting(conn: &mut Conn, name: &str) -> String {
    let sql = format!("SELECT current_setting('{name}')");
    let rows = match conn.query(&sql, &[]) {
        Err(e) if forgotten(&e) => conn.query(&sql, &[]),
        rows => rows,
    };
    rows.unwrap()[0].get(0)
}

/// An optimistic commit's shape (an `UPDATE` whose condition starts as theirs do) that
/// returns the settings in effect after its condition was evaluated.
const SHOW_SETTINGS: &str = "UPDATE unit_modes_settings SET n = n + 1
    WHERE agent = $1 AND n >= 0
    RETURNING current_setting('lock_timeout'), current_setting('synchronous_commit')";

#[test]
fn a_transaction_of_one_statement_has_the_handles_settings_in_either_mode() {
    let Some(uri) = server() else { return };
    let mut admin = connect(&uri);
    admin
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS unit_modes_settings (agent text PRIMARY KEY, n bigint);
             INSERT INTO unit_modes_settings VALUES ('a', 0) ON CONFLICT DO NOTHING",
        )
        .unwrap();
    for mode in ["exec", "cache_statement"] {
        let mut conn = connect(&in_mode(&uri, mode));
        for (synchronous, shown) in [(Synchronous::Normal, "off"), (Synchronous::Full, "on")] {
            let settings = Settings {
                synchronous,
                lock_timeout_ms: 250,
            };
            conn.ensure_session(settings).unwrap();
            let rows = conn
                .commit_one(settings, SHOW_SETTINGS, &[text_param(&"a")])
                .unwrap();
            let (lock, sync): (String, String) = (rows[0].get(0), rows[0].get(1));
            assert_eq!((lock.as_str(), sync.as_str()), ("250ms", shown), "{mode}");
            // Outside the transaction: the session's own settings in `cache_statement` mode;
            // in `exec` mode nothing outlived the transaction.
            let session = (
                setting(&mut conn, "lock_timeout"),
                setting(&mut conn, "synchronous_commit"),
            );
            if mode == "exec" {
                assert_eq!(session, ("0".to_string(), "on".to_string()), "{mode}");
            } else {
                assert_eq!(session, ("250ms".to_string(), shown.to_string()), "{mode}");
            }
        }
    }
}

#[test]
fn a_session_that_forgot_its_statements_and_settings_gets_them_again() {
    let Some(uri) = server() else { return };
    let uri = in_mode(&uri, "cache_statement");
    let options = |id: &str, log: &str| {
        OpenOptions::from_json(
            format!(
                r#"{{"agent_id":"{id}","max_connections":1,"busy_timeout_ms":700,"synchronous":"normal","change_log":{log}}}"#
            )
            .as_bytes(),
        )
        .unwrap()
    };
    let id = format!("unit-forgot-{}", std::process::id());
    let a = Agent::open_with(Path::new(&uri), &options(&id, "false")).unwrap();
    let logged = Agent::open_with(
        Path::new(&uri),
        &options(&format!("{id}-log"), r#"{"keep_last":5}"#),
    )
    .unwrap();
    // The handles' pool (the same URI): one connection, which their calls prepared.
    let pool = Pool::get(&uri, Target::parse(&uri, &uri).unwrap(), 1);
    let limits = Limits::new(Duration::from_secs(30), Duration::from_secs(30));
    let forget = || {
        let mut conn = pool.checkout(Duration::from_secs(30), limits).unwrap();
        assert_eq!(setting(&mut conn, "lock_timeout"), "700ms");
        conn.batch_execute("DISCARD ALL").unwrap();
        // A statement the connection has not prepared yet: the others it keeps are gone from
        // the server, and the connection does not know it (the next call finds out).
        let sql = "SELECT current_setting('lock_timeout') AS after_discard";
        let after: String = conn.query(sql, &[]).unwrap()[0].get(0);
        assert_eq!(after, "0");
        pool.checkin(conn);
    };
    for i in 0..3 {
        a.set_state(format!(r#"{{"i":{i}}}"#).as_bytes()).unwrap();
        logged
            .set_state(format!(r#"{{"i":{i}}}"#).as_bytes())
            .unwrap();
    }
    // Each kind of call, first on a session that forgot everything: an optimistic write, with
    // the log off and on, a read of a current cache (the freshness query, in autocommit), a
    // read of a state changed behind the handle's back, a write under the row's lock (a
    // replacement) and a conditional one.
    forget();
    a.set_state(br#"{"i":10}"#).unwrap();
    forget();
    logged.set_state(br#"{"i":10}"#).unwrap();
    forget();
    assert_eq!(a.get_state().unwrap().json(), br#"{"i":10}"#);
    let b = Agent::open_with(Path::new(&uri), &options(&id, "false")).unwrap();
    b.set_state(br#"{"j":1}"#).unwrap();
    forget();
    assert_eq!(a.get_state().unwrap().json(), br#"{"i":10,"j":1}"#);
    forget();
    a.replace_state(br#"{"k":1}"#).unwrap();
    forget();
    a.set_state_if(
        br#"{"k":2}"#,
        Some(a.get_state_versioned().unwrap().version),
    )
    .unwrap();
    forget();
    let log: serde_json::Value = serde_json::from_slice(&logged.changes_since(0).unwrap()).unwrap();
    assert_eq!(log.as_array().unwrap().len(), 4);
    // And the session has the handle's settings again.
    let mut conn = pool.checkout(Duration::from_secs(30), limits).unwrap();
    assert_eq!(setting(&mut conn, "synchronous_commit"), "off");
    assert_eq!(setting(&mut conn, "lock_timeout"), "700ms");
    pool.checkin(conn);
    assert_eq!(a.get_state().unwrap().json(), br#"{"k":2}"#);
}
