//! Cancelling one call ([`agent_state::Cancel`]) on a SQLite file: a call waiting for another
//! connection's write lock, or for its turn behind another call on the same handle, returns
//! `Cancelled` once its token fires or its deadline passes, having written nothing; the handle
//! stays usable, and calls without the token are not affected. (The PostgreSQL cases:
//! tests/postgres/cancel.rs.)

use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use agent_state::{Agent, Cancel, Error, ErrorKind, OpenOptions};
use serde_json::json;

use test_support::{fire_after, opts, text, TempDir};

fn open(path: &std::path::Path, busy_ms: u64) -> Agent {
    let options: OpenOptions = opts(json!({"busy_timeout_ms": busy_ms}));
    Agent::open_with(path, &options).unwrap()
}

/// Another connection's write transaction on the file, until dropped (the connection is held
/// only to be dropped).
struct WriteLock(#[allow(dead_code)] rusqlite::Connection);

impl WriteLock {
    fn hold(path: &std::path::Path) -> WriteLock {
        let c = rusqlite::Connection::open(path).unwrap();
        c.execute_batch("BEGIN IMMEDIATE").unwrap();
        WriteLock(c)
    }
}

#[test]
fn a_write_waiting_for_another_connections_lock_is_cancelled_and_writes_nothing() {
    let dir = TempDir::new("cancel_lock");
    let path = dir.file("a.db");
    let a = open(&path, 30_000);
    a.set_state(br#"{"n":1}"#).unwrap();
    let lock = WriteLock::hold(&path);
    let token = Cancel::new();
    // Fired while the call waits (the lock is held for the whole test: the call cannot end any
    // other way before busy_timeout_ms, 30 s).
    let fired = fire_after(&token, Duration::from_millis(200));
    let started = Instant::now();
    let err = token.scope(|| a.set_state(br#"{"n":2}"#)).unwrap_err();
    let returned = Instant::now();
    let fired = fired.join().unwrap();
    assert_eq!(err.kind(), ErrorKind::Cancelled, "{err}");
    assert!(
        matches!(&err, Error::Cancelled(m) if m.contains("lock")),
        "{err}"
    );
    assert!(returned.duration_since(started) < Duration::from_secs(20));
    eprintln!(
        "cancelled {} ms after the token fired",
        returned.saturating_duration_since(fired).as_millis()
    );
    drop(lock);
    // Nothing written; the handle carries on, without the token and with a fresh one.
    assert_eq!(text(&a.get_state().unwrap()), r#"{"n":1}"#);
    assert_eq!(a.get_state_versioned().unwrap().version, 1);
    let fresh = Cancel::new();
    fresh.scope(|| a.set_state(br#"{"n":3}"#)).unwrap();
    assert_eq!(a.get_state_versioned().unwrap().version, 2);
    // A fired token fails every later call under it at once.
    let err = token.scope(|| a.get_state()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Cancelled);
}

#[test]
fn a_deadline_ends_a_lock_wait_sooner_than_busy_timeout() {
    let dir = TempDir::new("cancel_deadline");
    let path = dir.file("a.db");
    let a = open(&path, 30_000);
    a.set_state(br#"{"n":1}"#).unwrap();
    let lock = WriteLock::hold(&path);
    let started = Instant::now();
    let token = Cancel::with_timeout(Duration::from_millis(300));
    let err = token.scope(|| a.replace_state(br#"{"n":2}"#)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Cancelled, "{err}");
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(300), "{took:?}");
    assert!(took < Duration::from_secs(20), "{took:?}");
    drop(lock);
    assert_eq!(text(&a.get_state().unwrap()), r#"{"n":1}"#);
}

#[test]
fn only_the_call_under_the_token_is_cancelled() {
    let dir = TempDir::new("cancel_one");
    let path = dir.file("a.db");
    let a = Arc::new(open(&path, 30_000));
    let lock = WriteLock::hold(&path);
    // Another thread's call on the same handle, without a token, waits for the lock too.
    let (started_tx, started_rx) = mpsc::channel();
    let other = {
        let a = a.clone();
        std::thread::spawn(move || {
            started_tx.send(()).unwrap();
            a.set_state(br#"{"other":1}"#)
        })
    };
    started_rx.recv().unwrap();
    let token = Cancel::new();
    let fired = fire_after(&token, Duration::from_millis(200));
    // This call waits for the other call's turn on the handle, or for the lock: either way
    // its token ends the wait.
    let err = token.scope(|| a.set_state(br#"{"mine":1}"#)).unwrap_err();
    fired.join().unwrap();
    assert_eq!(err.kind(), ErrorKind::Cancelled, "{err}");
    drop(lock);
    // The other call was not disturbed: it wrote once the lock was free.
    other.join().unwrap().unwrap();
    assert_eq!(text(&a.get_state().unwrap()), r#"{"other":1}"#);
}

#[test]
fn a_token_that_never_fires_changes_nothing() {
    let dir = TempDir::new("cancel_none");
    let a = open(&dir.file("a.db"), 1000);
    let token = Cancel::with_timeout(Duration::from_secs(3600));
    let v = token
        .scope(|| {
            a.set_state(br#"{"a":1}"#)?;
            a.set_state_if(br#"{"b":2}"#, Some(1))?;
            a.get_state_versioned()
        })
        .unwrap();
    assert_eq!(
        (text(&v.state).as_str(), v.version),
        (r#"{"a":1,"b":2}"#, 2)
    );
    // Nested scopes: the inner token applies inside, the outer one again after.
    let outer = Cancel::new();
    let inner = Cancel::new();
    inner.cancel();
    outer.scope(|| {
        assert!(inner.scope(|| a.get_state()).is_err());
        assert!(a.get_state().is_ok());
    });
}
