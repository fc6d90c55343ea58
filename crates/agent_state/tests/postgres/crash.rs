//! The server goes away and comes back: calls fail with Unavailable at once (nothing listens),
//! then the same handle carries on, with every acknowledged write there.
//!
//! On a server of its own (tests/pg/server.sh on another port): killing the shared one would
//! break the tests running alongside.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use agent_state::Error;
use serde_json::{json, Value};

use crate::{open, server_or_skip, unique};

/// A throwaway server, stopped and removed when dropped.
pub(crate) struct Server {
    pub dir: String,
    port: String,
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/pg/server.sh")
}

impl Server {
    pub fn run(&self, what: &str) -> std::process::Output {
        Command::new("bash")
            .arg(script())
            .arg(what)
            .arg(&self.dir)
            .env("AGENT_STATE_PG_PORT", &self.port)
            .output()
            .unwrap()
    }

    pub fn start() -> Option<(Server, String)> {
        let server = Server {
            dir: format!("/tmp/agent-state-crash-{}", unique("pg")),
            port: (5433 + std::process::id() % 500).to_string(),
        };
        let out = server.run("start");
        if !out.status.success() {
            let message = String::from_utf8_lossy(&out.stderr).to_string();
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "cannot start a second server: {message}"
            );
            eprintln!("skipped: cannot start a second server: {message}");
            return None;
        }
        let uri = String::from_utf8(out.stdout).unwrap().trim().to_string();
        Some((server, crate::in_exec_mode(uri)))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.run("stop");
    }
}

#[test]
fn a_server_crash_is_unavailable_and_the_handle_recovers_after_restart() {
    let _shared = server_or_skip!(); // a server is there to be had
    let Some((server, uri)) = Server::start() else {
        return;
    };
    let id = unique("crash");
    let a = open(
        &uri,
        &id,
        json!({"busy_timeout_ms": 2000, "change_log": {"keep_last": 100}}),
    )
    .unwrap();
    let b = open(&uri, &unique("crash-b"), json!({"busy_timeout_ms": 2000})).unwrap();
    for i in 1..=5 {
        a.set_state(format!(r#"{{"n{i}":{i}}}"#).as_bytes())
            .unwrap();
    }
    b.set_state(br#"{"b":1}"#).unwrap();
    assert!(server.run("kill").status.success());
    for call in 0..3 {
        let t0 = Instant::now();
        let err = match call {
            0 => a.get_state().unwrap_err(),
            1 => a.set_state(br#"{"lost":true}"#).unwrap_err(),
            _ => b.changes_since(0).map(|_| ()).unwrap_err(),
        };
        assert!(matches!(err, Error::Unavailable(_)), "{err}");
        // A dead server refuses at once; at worst the client's bound (2000 ms busy + the
        // default 10 s server timeout) ends the call. Well below it, with room for a loaded
        // machine: the call did not wait for the server to come back.
        assert!(t0.elapsed() < Duration::from_secs(8), "{:?}", t0.elapsed());
    }
    assert!(server.run("restart").status.success());
    // The same handles, without reopening.
    let v = a.get_state_versioned().unwrap();
    assert_eq!(v.version, 5);
    let state: Value = serde_json::from_slice(v.state.json()).unwrap();
    assert_eq!(state, json!({"n1": 1, "n2": 2, "n3": 3, "n4": 4, "n5": 5}));
    assert_eq!(a.set_state(br#"{"n6":6}"#).unwrap().json().len(), 43);
    assert_eq!(b.get_state_versioned().unwrap().version, 1);
    let since: Value = serde_json::from_slice(&a.changes_since(0).unwrap()).unwrap();
    assert_eq!(since.as_array().unwrap().len(), 6);
}

#[test]
fn a_restart_between_calls_costs_no_call() {
    let _shared = server_or_skip!();
    let Some((server, uri)) = Server::start() else {
        return;
    };
    let id = unique("restart");
    let a = open(&uri, &id, json!({"busy_timeout_ms": 2000})).unwrap();
    a.set_state(br#"{"x":1}"#).unwrap();
    assert!(server.run("kill").status.success());
    assert!(server.run("restart").status.success());
    // The idle connection died with the server: it is noticed without a round trip and
    // replaced, so neither call fails (and no write's outcome is ever unknown here).
    assert_eq!(a.get_state_versioned().unwrap().version, 1);
    assert!(server.run("kill").status.success());
    assert!(server.run("restart").status.success());
    assert_eq!(a.set_state(br#"{"x":2}"#).unwrap().json(), br#"{"x":2}"#);
}
