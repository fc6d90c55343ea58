//! The PostgreSQL backend and the process: it starts no thread, and a child after `fork()`
//! neither uses nor closes the connections it inherited (alone in a process of its own,
//! `#[own_process]`: it counts the process's threads and forks).
#![allow(unsafe_code)] // fork() and _exit(), to test the child's behaviour

use std::path::Path;

use agent_state::{Agent, OpenOptions};
use serde_json::json;
use test_support::own_process;

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

fn open(uri: &str, id: &str, extra: serde_json::Value) -> Agent {
    let mut o = extra;
    o["agent_id"] = json!(id);
    Agent::open_with(
        Path::new(uri),
        &OpenOptions::from_json(o.to_string().as_bytes()).unwrap(),
    )
    .unwrap()
}

/// The server pids of this application's connections.
fn backends(uri: &str, app: &str) -> Vec<i32> {
    // The server itself (`AGENT_STATE_TEST_PG_SERVER_URI` when set: the URI the library is
    // given may carry parameters of the library's own, which this client refuses).
    let mut c = crate::admin(uri);
    let mut pids: Vec<i32> = c
        .query(
            "SELECT pid FROM pg_stat_activity WHERE application_name = $1",
            &[&app],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    pids.sort();
    pids
}

#[own_process]
fn no_thread_is_started_and_a_forked_child_reconnects_on_its_own() {
    let Ok(uri) = std::env::var("AGENT_STATE_TEST_PG_URI") else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "AGENT_STATE_TEST_PG_URI is unset under CI=true"
        );
        eprintln!("skipped: AGENT_STATE_TEST_PG_URI is unset (no PostgreSQL server)");
        return;
    };
    let app = format!("process_{}", std::process::id());
    let uri_app = format!("{uri}&application_name={app}");
    let id = format!("process-{}", std::process::id());

    // No thread: open, write, read, many handles, a change log.
    let before = threads();
    let handles: Vec<Agent> = (0..50)
        .map(|i| {
            open(
                &uri_app,
                &format!("{id}/{i}"),
                json!({"max_connections": 3, "change_log": {"keep_last": 5}}),
            )
        })
        .collect();
    for (i, a) in handles.iter().enumerate() {
        a.set_state(format!(r#"{{"i":{i}}}"#).as_bytes()).unwrap();
        a.get_state().unwrap();
        a.poll().unwrap();
    }
    assert_eq!(threads(), before, "the library started a thread");
    // A host name is resolved on the calling thread (the client would use a thread pool).
    let err = Agent::open_with(
        Path::new("postgresql://postgres@localhost:1/postgres"),
        &OpenOptions::from_json(br#"{"agent_id": "x", "busy_timeout_ms": 1000}"#).unwrap(),
    )
    .unwrap_err();
    assert!(matches!(err, agent_state::Error::Unavailable(_)), "{err}");
    assert_eq!(threads(), before, "resolving a host name started a thread");

    // fork(): the child writes through an inherited handle; the parent's connections are
    // untouched (the same server processes serve it before and after).
    let a = &handles[0];
    let parent_backends = backends(&uri, &app);
    assert!(!parent_backends.is_empty());
    // SAFETY: the child only runs the library (its own code is fork-safe: it forgets inherited
    // connections) and leaves with _exit, running no destructor of the parent's state.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let ok = a.set_state(br#"{"child":true}"#).is_ok()
            && handles[1].get_state().is_ok()
            && a.close().is_ok();
        // SAFETY: ends the child at once, as a child of fork() should.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    let mut status = 0;
    // SAFETY: waits for the child just forked.
    let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(waited, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the child failed: status {status}"
    );
    let v = a.get_state_versioned().unwrap();
    assert_eq!(v.version, 2);
    assert_eq!(v.state.json(), br#"{"i":0,"child":true}"#);
    for a in &handles {
        a.get_state().unwrap();
    }
    // Each of the parent's server connections is still there (a disturbed one would have been
    // replaced by a new backend). The child's own may linger in pg_stat_activity for a while
    // after its exit, until the server notices: not compared.
    let now = backends(&uri, &app);
    assert!(
        parent_backends.iter().all(|pid| now.contains(pid)),
        "the parent's connections were disturbed: {parent_backends:?} before, {now:?} after"
    );
    assert_eq!(threads(), before);
}
