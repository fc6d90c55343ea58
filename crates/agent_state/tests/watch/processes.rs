//! Commits of another process are delivered: the writer is this test binary run again as a
//! child process (`writer_child`), on either backend.

use std::path::PathBuf;
use std::process::Command;

use agent_state::{WatchKind, WatchOptions};
use serde_json::{json, Value};
use test_support::{each_backend, open, opts, test_name, Place};

use crate::{brief, next, quiet, Store};

/// How many changes `writer_child` commits.
pub const WRITES: u64 = 50;

/// The child's part: `WRITES` merges to the agent its environment names. A no-op in an
/// ordinary test run.
#[test]
fn writer_child() {
    let Ok(spec) = std::env::var("AGENT_STATE_WATCH_CHILD") else {
        return;
    };
    let spec: Value = serde_json::from_str(&spec).unwrap();
    let (path, agent) = (
        spec["path"].as_str().unwrap(),
        spec["agent"].as_str().unwrap(),
    );
    let place = match spec["kind"].as_str().unwrap() {
        "sqlite" => Place::Sqlite {
            path: PathBuf::from(path),
            agent: Some(agent.to_string()),
        },
        _ => Place::Postgres {
            uri: path.to_string(),
            agent: agent.to_string(),
        },
    };
    let options = json!({"busy_timeout_ms": 30_000, "change_log": {"keep_last": 1000}});
    let a = open(&place, &opts(options)).unwrap();
    for n in 1..=WRITES {
        a.set_state(format!(r#"{{"n": {n}}}"#).as_bytes()).unwrap();
    }
}

/// Runs `writer_child` in another process: `WRITES` merges to the test's agent `name`, each
/// its own commit; returns once the child has ended (successfully).
pub fn write_from_another_process(store: &Store, name: &str) {
    let kind = match store.place {
        Place::Sqlite { .. } => "sqlite",
        Place::Postgres { .. } => "postgres",
    };
    let spec = json!({
        "kind": kind,
        "path": store.location.to_str().unwrap(),
        "agent": store.id(name),
    });
    let status = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &test_name(module_path!(), "writer_child"),
            "--nocapture",
        ])
        .env("AGENT_STATE_WATCH_CHILD", spec.to_string())
        .status()
        .unwrap();
    assert!(status.success());
}

#[each_backend]
fn the_commits_of_another_process_are_delivered_in_order() {
    let store = Store::new("child");
    let w = store.watch_all(WatchOptions::default());
    write_from_another_process(&store, "remote");
    for version in 1..=WRITES {
        let e = next(&w);
        assert_eq!(
            brief(&store, &e),
            ("remote".into(), version, WatchKind::Merge)
        );
    }
    assert!(quiet(&w));
}
