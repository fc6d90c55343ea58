//! The process's connections: shared by handles, bounded, waited for, timed out; a connection
//! lost in mid-commit.

use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use agent_state::{Error, StateChange, Validator};
use serde_json::json;

use crate::{admin, open, server_or_skip, unique, with_param, RowLock};

/// Client connections to the server with this application name.
fn connections(uri: &str, app: &str) -> i64 {
    admin(uri)
        .query_one(
            "SELECT count(*) FROM pg_stat_activity
             WHERE backend_type = 'client backend' AND application_name = $1",
            &[&app],
        )
        .unwrap()
        .get(0)
}

#[test]
fn two_hundred_handles_share_at_most_max_connections() {
    let uri = server_or_skip!();
    let app = unique("pool200").replace('-', "_");
    let puri = with_param(&uri, &format!("application_name={app}"));
    let handles: Vec<_> = (0..200)
        .map(|i| {
            Arc::new(open(&puri, &format!("{app}/{i}"), json!({"max_connections": 2})).unwrap())
        })
        .collect();
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let hs: Vec<_> = handles.iter().skip(t).step_by(8).cloned().collect();
            std::thread::spawn(move || {
                for a in hs {
                    a.set_state(br#"{"x":1}"#).unwrap();
                    a.get_state().unwrap();
                }
            })
        })
        .collect();
    let mut most = 0;
    while !threads.iter().all(|t| t.is_finished()) {
        most = most.max(connections(&uri, &app));
        std::thread::sleep(Duration::from_millis(5));
    }
    for t in threads {
        t.join().unwrap();
    }
    most = most.max(connections(&uri, &app));
    assert!((1..=2).contains(&most), "{most} connections");
    for a in &handles {
        assert_eq!(a.get_state_versioned().unwrap().version, 1);
    }
}

/// Holds its handle's connection (the validator runs inside the write): says so on `entered`,
/// then waits until `release` is sent or dropped. A real signal both ways, so that the test
/// knows the connection is held, however slowly a loaded machine schedules the writer.
struct Holding {
    entered: Mutex<mpsc::Sender<()>>,
    release: Mutex<mpsc::Receiver<()>>,
}

impl Validator for Holding {
    fn validate(&self, _: &StateChange) -> Result<(), String> {
        let _ = self.entered.lock().unwrap().send(());
        let _ = self.release.lock().unwrap().recv();
        Ok(())
    }
}

#[test]
fn a_checkout_waits_up_to_busy_timeout_then_is_busy() {
    let uri = server_or_skip!();
    let app = unique("poolbusy").replace('-', "_");
    let puri = with_param(&uri, &format!("application_name={app}"));
    let o = json!({"max_connections": 1, "busy_timeout_ms": 300});
    let a = Arc::new(open(&puri, &unique("busy-a"), o.clone()).unwrap());
    let b = open(&puri, &unique("busy-b"), o).unwrap();
    let (entered_tx, entered) = mpsc::channel();
    let (release, release_rx) = mpsc::channel();
    a.set_validator(Some(Arc::new(Holding {
        entered: Mutex::new(entered_tx),
        release: Mutex::new(release_rx),
    })))
    .unwrap();
    let holder = {
        let a = a.clone();
        std::thread::spawn(move || a.set_state(br#"{"x":1}"#).unwrap())
    };
    // The holder has the pool's only connection (its validator runs inside the write).
    entered.recv().unwrap();
    let t0 = Instant::now();
    let err = b.get_state().unwrap_err();
    let waited = t0.elapsed();
    assert!(
        matches!(&err, Error::Busy(m) if m.contains("all 1 connections")),
        "{err}"
    );
    // It waited (the pool's condvar with a deadline of busy_timeout_ms), and gave up while
    // the connection was still held: the release comes only now.
    assert!(waited >= Duration::from_millis(250), "{waited:?}");
    drop(release);
    holder.join().unwrap();
    b.set_state(br#"{"y":1}"#).unwrap();
}

#[test]
fn a_row_locked_longer_than_busy_timeout_is_busy() {
    let uri = server_or_skip!();
    let id = unique("locked");
    let a = open(&uri, &id, json!({"busy_timeout_ms": 300})).unwrap();
    a.set_state(br#"{"x":1}"#).unwrap();
    let held = RowLock::hold(&uri, &id);
    // Busy while the lock is still held (the rollback comes after): the lock_timeout fired,
    // not the client's clock (that would be Unavailable).
    let err = a.set_state(br#"{"x":2}"#).unwrap_err();
    assert!(
        matches!(&err, Error::Busy(m) if m.contains("held the agent's row")),
        "{err}"
    );
    held.release();
    assert_eq!(a.set_state_if(br#"{"x":2}"#, Some(1)).unwrap().version, 2);
}

#[test]
fn a_connection_lost_while_committing_says_the_outcome_is_unknown() {
    let uri = server_or_skip!();
    let app = unique("lost").replace('-', "_");
    let puri = with_param(&uri, &format!("application_name={app}"));
    let id = unique("lost");
    // A lock wait far longer than the test needs: the commit must still be waiting when its
    // connection is ended, however slowly a loaded machine gets there.
    let a = Arc::new(open(&puri, &id, json!({"busy_timeout_ms": 120000})).unwrap());
    a.set_state(br#"{"x":1}"#).unwrap();
    let held = RowLock::hold(&uri, &id);
    let writer = {
        let a = a.clone();
        std::thread::spawn(move || a.set_state(br#"{"x":2}"#))
    };
    // Wait until the commit waits for the row, then end its connection from the server. Only
    // a session blocked by this test's lock: behind a pooler, a server connection can keep
    // the application_name of its last client while it serves another test.
    let mut killer = admin(&uri);
    let holder = held.pid();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let n: i64 = killer
            .query_one(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
                 WHERE application_name = $1 AND wait_event_type = 'Lock'
                   AND $2 = ANY(pg_blocking_pids(pid))",
                &[&app, &holder],
            )
            .unwrap()
            .get(0);
        if n > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "the commit never waited");
        std::thread::sleep(Duration::from_millis(10));
    }
    let err = writer.join().unwrap().unwrap_err();
    assert!(
        matches!(&err, Error::Unavailable(m) if m.contains("outcome is unknown")),
        "{err}"
    );
    held.release();
    // The same handle carries on, on a new connection.
    let v = a.get_state_versioned().unwrap();
    assert_eq!(v.version, 1);
    assert_eq!(a.set_state(br#"{"x":3}"#).unwrap().json(), br#"{"x":3}"#);
}

/// Statements the server logged for the backend `pid` (log_statement=all; the default
/// log_line_prefix names the backend's pid), and how many of them were named (prepared)
/// statements.
fn logged_statements(dir: &str, pid: i32) -> (usize, usize) {
    let log = std::fs::read_to_string(format!("{dir}/log")).unwrap_or_default();
    let tag = format!("[{pid}] LOG:  ");
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(&tag))
        .filter(|l| l.contains("statement: ") || l.contains("execute "))
        // With `cache_statement`, a statement prepared for the first time is checked for with
        // the session's settings, once per connection: not a statement of the call's.
        .filter(|l| !l.contains("agent_state.session_settings"))
        .collect();
    let named = lines
        .iter()
        .filter(|l| l.contains("execute ") && !l.contains("execute <unnamed>"))
        .count();
    (lines.len(), named)
}

fn logged(dir: &str, pid: i32) -> usize {
    logged_statements(dir, pid).0
}

#[test]
fn round_trips_of_a_write_and_of_a_read_of_a_current_cache() {
    let uri = server_or_skip!();
    let Ok(dir) = std::env::var("AGENT_STATE_TEST_PG_DIR") else {
        eprintln!("skipped: AGENT_STATE_TEST_PG_DIR is unset (no server log to count in)");
        return;
    };
    let app = unique("rt").replace('-', "_");
    let puri = with_param(
        &uri,
        &format!("application_name={app}&options=-c%20log_statement%3Dall"),
    );
    let a = open(
        &puri,
        &unique("rt"),
        json!({"change_log": {"keep_last": 3}, "max_connections": 1}),
    )
    .unwrap();
    // Warm up: the connection exists and its statements are prepared.
    for _ in 0..3 {
        a.set_state(br#"{"w":1}"#).unwrap();
        a.get_state().unwrap();
    }
    let pid: i32 = admin(&uri)
        .query_one(
            "SELECT pid FROM pg_stat_activity WHERE application_name = $1",
            &[&app],
        )
        .unwrap()
        .get(0);
    std::thread::sleep(Duration::from_millis(200));
    let before = logged(&dir, pid);
    for i in 0..10 {
        a.set_state(format!(r#"{{"i":{i}}}"#).as_bytes()).unwrap();
    }
    std::thread::sleep(Duration::from_millis(200));
    let writes = logged(&dir, pid) - before;
    for _ in 0..10 {
        a.get_state().unwrap();
    }
    std::thread::sleep(Duration::from_millis(200));
    let reads = logged(&dir, pid) - before - writes;
    eprintln!("statements: {writes} for 10 set_state, {reads} for 10 get_state");
    if before == 0 {
        eprintln!("skipped: the server log has no statements of this test (not readable?)");
        return;
    }
    // A write is one statement in autocommit, in one round trip: in `exec` mode an unnamed
    // one that sets the handle's settings for its own transaction, in `cache_statement` mode a
    // prepared one (the session has the settings).
    assert_eq!(writes, 10, "one statement per set_state (log on)");
    assert_eq!(reads, 10, "one statement per get_state of a current cache");
    let named = logged_statements(&dir, pid).1;
    if cache_statement(&uri) {
        assert!(named >= 20, "{named} named statements: not prepared");
    } else {
        // Nothing prepared: every statement is unnamed (pooler-safe).
        assert_eq!(named, 0, "named statements were used");
    }
}

/// Whether `uri` asks for prepared statements (`default_query_exec_mode=cache_statement`).
pub fn cache_statement(uri: &str) -> bool {
    uri.contains("default_query_exec_mode=cache_statement")
}
