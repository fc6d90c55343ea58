//! What each timeout bounds on PostgreSQL: `busy_timeout_ms` the wait for what another
//! connection holds (a row lock, a pool connection), never the time the server takes to run
//! an uncontended statement; `server_timeout_ms` a server that does not answer (freeze.rs).
//!
//! The uncontended test runs beside two busy-loop processes, as a loaded CI machine would:
//! before `busy_timeout_ms` stopped setting `statement_timeout`, a 256 KiB write with
//! `busy_timeout_ms: 0` was cancelled by the server (SQLSTATE 57014, `AGENT_ERR_BUSY`).

use std::process::{Child, Command};
use std::time::{Duration, Instant};

use agent_state::Error;
use serde_json::{json, Value};

use crate::{open, server_or_skip, unique, with_param, RowLock};

/// Processes that keep both cores busy while alive; killed (and reaped) when dropped, also
/// when the test panics.
struct Load(Vec<Child>);

impl Load {
    fn start(n: usize) -> Load {
        Load(
            (0..n)
                .map(|_| {
                    Command::new("sh")
                        .args(["-c", "while :; do :; done"])
                        .spawn()
                        .expect("start a busy loop")
                })
                .collect(),
        )
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A state of about 256 KiB: 256 members of a 1 KiB string each.
fn big_state(tag: usize) -> Vec<u8> {
    let members: serde_json::Map<String, Value> = (0..256)
        .map(|i| (format!("m{i:03}"), json!(format!("{tag:08}").repeat(128))))
        .collect();
    serde_json::to_vec(&Value::Object(members)).unwrap()
}

#[test]
fn busy_timeout_zero_never_fails_an_uncontended_call_on_a_loaded_machine() {
    let uri = server_or_skip!();
    let _load = Load::start(2);
    let zero = json!({"busy_timeout_ms": 0});
    let mut calls = 0usize;
    // Opens: new pools (an application name each) connect anew, so connecting is tried under
    // busy_timeout_ms 0 too, not only checkouts of idle connections.
    for i in 0..40 {
        let puri = with_param(
            &uri,
            &format!("application_name=t0_{}_{i}", std::process::id()),
        );
        let a = open(&puri, &unique("t0-open"), zero.clone()).unwrap();
        a.set_state(br#"{"opened":true}"#).unwrap();
        assert_eq!(a.get_state().unwrap().json(), br#"{"opened":true}"#);
        calls += 3;
    }
    // A 256 KiB state, replaced, patched and read back by another handle (no cache to serve
    // it: every read fetches the whole state from the server).
    // A pool of this test's own (an application name of its own): with busy_timeout_ms 0 a
    // checkout from the shared pool would be Busy whenever the tests running beside it hold
    // all its connections, which is contention, not what this test is about.
    let uri = with_param(
        &uri,
        &format!("application_name=t0big_{}", std::process::id()),
    );
    let id = unique("t0-big");
    let writer = open(&uri, &id, zero.clone()).unwrap();
    let reader = open(&uri, &id, zero.clone()).unwrap();
    let mut version = 0;
    for round in 0..100 {
        let state = big_state(round);
        writer.replace_state(&state).unwrap();
        version += 1;
        let patch = format!(r#"{{"m000":"round {round}","n":{round}}}"#);
        let merged = writer.set_state(patch.as_bytes()).unwrap();
        version += 1;
        assert!(merged.json().len() > 256 * 1024);
        let read = reader.get_state_versioned().unwrap();
        assert_eq!(read.version, version);
        let read: Value = serde_json::from_slice(read.state.json()).unwrap();
        assert_eq!(read["m000"], json!(format!("round {round}")));
        assert_eq!(read["m255"], json!(format!("{round:08}").repeat(128)));
        assert_eq!(read["n"], json!(round));
        calls += 3;
    }
    // Many small calls: opens of handles on the shared pool, writes and reads.
    for i in 0..1000 {
        let a = open(&uri, &format!("{id}/{}", i % 50), zero.clone()).unwrap();
        a.set_state(format!(r#"{{"i":{i}}}"#).as_bytes()).unwrap();
        let v: Value = serde_json::from_slice(a.get_state().unwrap().json()).unwrap();
        assert_eq!(v["i"], json!(i));
        calls += 3;
    }
    eprintln!("{calls} calls with busy_timeout_ms 0 beside two busy loops: 0 errors");
}

#[test]
fn busy_timeout_zero_is_busy_at_once_while_another_session_holds_the_row() {
    let uri = server_or_skip!();
    let id = unique("t0-locked");
    // A server timeout far longer than "at once": if the call waited for the lock instead,
    // the client's clock would end it after 30 s, with Unavailable, not Busy.
    let a = open(
        &uri,
        &id,
        json!({"busy_timeout_ms": 0, "server_timeout_ms": 30000, "change_log": {"keep_last": 10}}),
    )
    .unwrap();
    a.set_state(br#"{"x":1}"#).unwrap();
    let held = RowLock::hold(&uri, &id);
    let t0 = Instant::now();
    for attempt in 0..3 {
        let err = match attempt {
            0 => a.set_state(br#"{"x":2}"#).unwrap_err(),
            1 => a.replace_state(br#"{"y":1}"#).unwrap_err(),
            _ => a.set_state_if(br#"{"x":3}"#, Some(1)).unwrap_err(),
        };
        assert!(
            matches!(&err, Error::Busy(m) if m.contains("held the agent's row")),
            "{err}"
        );
        // The server's own error stays behind it, with its SQLSTATE's message.
        let source = std::error::Error::source(&err).expect("the server's error as the source");
        assert!(source.to_string().contains("lock timeout"), "{source}");
    }
    let took = t0.elapsed();
    // Reads take no row lock: served while the row is held, and nothing was written.
    let v = a.get_state_versioned().unwrap();
    assert_eq!((v.version, v.state.json()), (1, &br#"{"x":1}"#[..]));
    // Three refusals well within one server timeout: none of them waited for the lock.
    assert!(took < Duration::from_secs(15), "{took:?}");
    held.release();
    // Nothing reached the store or its log, by another handle's eyes too.
    let b = open(&uri, &id, json!({})).unwrap();
    let v = b.get_state_versioned().unwrap();
    assert_eq!((v.version, v.state.json()), (1, &br#"{"x":1}"#[..]));
    let log: Value = serde_json::from_slice(&b.changes_since(0).unwrap()).unwrap();
    assert_eq!(log.as_array().unwrap().len(), 1);
    assert_eq!(a.set_state(br#"{"x":2}"#).unwrap().json(), br#"{"x":2}"#);
}

#[test]
fn server_timeout_ms_is_an_open_option_with_a_range() {
    let uri = server_or_skip!();
    for bad in [
        json!(0),
        json!(-1),
        json!(2147483648u64),
        json!("5"),
        json!(1.5),
    ] {
        let err = open(&uri, &unique("t0-opt"), json!({"server_timeout_ms": bad})).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidArgument(m) if m.contains("server_timeout_ms")),
            "{bad}: {err}"
        );
    }
    for good in [60000u64, 2147483647] {
        let a = open(&uri, &unique("t0-opt"), json!({"server_timeout_ms": good})).unwrap();
        a.set_state(br#"{"ok":1}"#).unwrap();
    }
}
