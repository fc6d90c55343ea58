//! Cancelling one call on PostgreSQL: a write waiting for the agent's row (held by another
//! session) and a read waiting for a frozen server return `Cancelled` once the token fires,
//! having written nothing, and the handle carries on.

use std::time::{Duration, Instant};

use agent_state::{Cancel, Error, ErrorKind};
use serde_json::json;
use test_support::fire_after;

use crate::crash::Server;
use crate::freeze::Frozen;
use crate::{open, server_or_skip, unique, RowLock};

#[test]
fn a_write_waiting_for_the_row_lock_is_cancelled_and_writes_nothing() {
    let uri = server_or_skip!();
    let id = unique("cancel-row");
    let a = open(&uri, &id, json!({"busy_timeout_ms": 30000})).unwrap();
    a.set_state(br#"{"n":1}"#).unwrap();
    let lock = RowLock::hold(&uri, &id);
    let token = Cancel::new();
    let fired = fire_after(&token, Duration::from_millis(200));
    let started = Instant::now();
    let err = token.scope(|| a.set_state(br#"{"n":2}"#)).unwrap_err();
    let returned = Instant::now();
    let fired = fired.join().unwrap();
    assert_eq!(err.kind(), ErrorKind::Cancelled, "{err}");
    assert!(returned.duration_since(started) < Duration::from_secs(20));
    eprintln!(
        "row lock: cancelled {} ms after the token fired",
        returned.saturating_duration_since(fired).as_millis()
    );
    lock.release();
    let v = a.get_state_versioned().unwrap();
    assert_eq!((v.state.json(), v.version), (&br#"{"n":1}"#[..], 1));
    // The same handle, under a deadline that does not pass, and without a token.
    Cancel::with_timeout(Duration::from_secs(60))
        .scope(|| a.set_state(br#"{"n":3}"#))
        .unwrap();
    a.set_state(br#"{"n":4}"#).unwrap();
    assert_eq!(a.get_state_versioned().unwrap().version, 3);
}

#[test]
fn a_call_waiting_for_a_frozen_server_is_cancelled_and_the_handle_recovers() {
    let _shared = server_or_skip!();
    let Some((server, uri)) = Server::start() else {
        return;
    };
    // Long client bounds: only the token can end the waits below.
    let a = open(
        &uri,
        &unique("cancel-freeze"),
        json!({"busy_timeout_ms": 30000, "server_timeout_ms": 30000}),
    )
    .unwrap();
    a.set_state(br#"{"n":1}"#).unwrap();
    let frozen = Frozen::freeze(&server);
    // Another handle's write makes the cache's freshness test go to the server.
    for call in 0..2 {
        let token = Cancel::with_timeout(Duration::from_millis(300));
        let started = Instant::now();
        let err = token
            .scope(|| match call {
                0 => a.get_state().map(drop),
                _ => a.set_state(br#"{"n":2}"#).map(drop),
            })
            .unwrap_err();
        assert!(matches!(&err, Error::Cancelled(_)), "{err}");
        assert!(started.elapsed() < Duration::from_secs(20));
    }
    drop(frozen);
    // Nothing was written; the handle reconnects by itself.
    let v = a.get_state_versioned().unwrap();
    assert_eq!((v.state.json(), v.version), (&br#"{"n":1}"#[..], 1));
    a.set_state(br#"{"n":5}"#).unwrap();
}
