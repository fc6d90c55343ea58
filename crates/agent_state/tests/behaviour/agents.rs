//! Many agents in one SQLite file (`agent_id`): isolation, the file's single agent beside
//! them, shared connections (10,000 handles under 1,024 file descriptors), no lost updates
//! across agents sharing a connection, calls between agents from a validator, and the upgrade
//! of older files. The tests of SQLite files alone say so; the rest run on PostgreSQL too, where
//! the agents are those of one database (`#[each_backend]`, crates/test-support).

use std::sync::{Arc, Mutex};

use agent_state::{Agent, Error, StateChange, StateChangedHook, Validator};
use serde_json::json;

use test_support::{each_backend, open, opts, sqlite_only, test_name, text, Place, TempDir};

#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<(u64, String, String)>>,
}

impl StateChangedHook for Recorder {
    fn on_state_changed(&self, c: &StateChange) -> Result<(), String> {
        self.seen
            .lock()
            .unwrap()
            .push((c.version, text(&c.next), text(&c.prev)));
        Ok(())
    }
}

/// The agent `id` of `store`, opened with the options in `extra`.
fn agent(store: &Place, id: &str, extra: serde_json::Value) -> Agent {
    open(&store.agent(id), &opts(extra)).unwrap()
}

/// The agent `id` of the SQLite file `path`, opened with the options in `extra`.
fn file_agent(path: &std::path::Path, id: &str, extra: serde_json::Value) -> Agent {
    let mut o = json!({"agent_id": id});
    if let serde_json::Value::Object(m) = extra {
        o.as_object_mut().unwrap().extend(m);
    }
    Agent::open_with(path, &opts(o)).unwrap()
}

#[each_backend]
fn agents_of_one_file_are_isolated_in_state_version_initial_state_log_and_hooks() {
    let dir = TempDir::new("agents_isolated");
    let store = dir.store("many.db");
    let a = agent(
        &store,
        "alice",
        json!({"initial_state": {"who": "a"}, "change_log": {"keep_last": 10}}),
    );
    let b = agent(&store, "bob", json!({"initial_state": {"who": "b"}}));
    let single = open(&store, &opts(json!({}))).unwrap();
    let (ra, rb) = (Arc::new(Recorder::default()), Arc::new(Recorder::default()));
    a.on_state_changed(ra.clone()).unwrap();
    b.on_state_changed(rb.clone()).unwrap();

    assert_eq!(text(&a.get_state().unwrap()), r#"{"who":"a"}"#);
    assert_eq!(text(&b.get_state().unwrap()), r#"{"who":"b"}"#);
    assert_eq!(
        text(&a.set_state(br#"{"n":1}"#).unwrap()),
        r#"{"who":"a","n":1}"#
    );
    assert_eq!(
        text(&a.set_state(br#"{"n":2}"#).unwrap()),
        r#"{"who":"a","n":2}"#
    );
    assert_eq!(
        text(&b.set_state(br#"{"m":1}"#).unwrap()),
        r#"{"who":"b","m":1}"#
    );
    single.set_state(br#"{"single":true}"#).unwrap();

    assert_eq!(a.get_state_versioned().unwrap().version, 2);
    assert_eq!(b.get_state_versioned().unwrap().version, 1);
    assert_eq!(single.get_state_versioned().unwrap().version, 1);
    assert_eq!(
        ra.seen.lock().unwrap().clone(),
        vec![
            (1, r#"{"who":"a","n":1}"#.into(), r#"{"who":"a"}"#.into()),
            (
                2,
                r#"{"who":"a","n":2}"#.into(),
                r#"{"who":"a","n":1}"#.into()
            ),
        ]
    );
    assert_eq!(rb.seen.lock().unwrap().len(), 1);
    // The log is alice's alone: bob's and the single agent's changes are not in it, and bob
    // has no log.
    let log: serde_json::Value = serde_json::from_slice(&a.changes_since(0).unwrap()).unwrap();
    assert_eq!(log.as_array().unwrap().len(), 2, "{log}");
    assert!(matches!(b.changes_since(0), Err(Error::InvalidArgument(_))));
    assert!(matches!(
        single.changes_since(0),
        Err(Error::InvalidArgument(_))
    ));
    // A CAS on one agent is judged by that agent's version only.
    assert!(matches!(
        b.set_state_if(br#"{"x":1}"#, Some(2)),
        Err(Error::Conflict { .. })
    ));
    assert_eq!(b.set_state_if(br#"{"x":1}"#, Some(1)).unwrap().version, 2);
    drop((a, b, single));

    // Persisted, each apart; a new agent of the file starts from its own initial state, and a
    // read does not store it.
    let a = agent(&store, "alice", json!({}));
    let b = agent(&store, "bob", json!({}));
    let c = agent(&store, "carol", json!({"initial_state": {"new": true}}));
    assert_eq!(text(&a.get_state().unwrap()), r#"{"who":"a","n":2}"#);
    assert_eq!(text(&b.get_state().unwrap()), r#"{"who":"b","m":1,"x":1}"#);
    assert_eq!(text(&c.get_state().unwrap()), r#"{"new":true}"#);
    assert_eq!(c.get_state_versioned().unwrap().version, 0);
    if let Place::Sqlite { path, .. } = &store {
        let stored: i64 = rusqlite::Connection::open(path)
            .unwrap()
            .query_row(
                "SELECT count(*) FROM agent_state WHERE value IS NOT NULL",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(stored, 3, "alice, bob and the single agent; not carol");
    }
}

#[each_backend]
fn another_handles_write_to_the_same_agent_is_seen_and_others_do_not_disturb_it() {
    let dir = TempDir::new("agents_fresh");
    let store = dir.store("many.db");
    let a1 = agent(&store, "a", json!({}));
    let a2 = agent(&store, "a", json!({}));
    let b = agent(&store, "b", json!({}));
    for n in 0..50 {
        a1.set_state(format!(r#"{{"n":{n}}}"#).as_bytes()).unwrap();
        assert_eq!(text(&a2.get_state().unwrap()), format!(r#"{{"n":{n}}}"#));
        b.set_state(format!(r#"{{"b":{n}}}"#).as_bytes()).unwrap();
        assert_eq!(text(&a2.get_state().unwrap()), format!(r#"{{"n":{n}}}"#));
        assert_eq!(text(&a1.get_state().unwrap()), format!(r#"{{"n":{n}}}"#));
    }
    // And from another connection (another set of options does not share a connection).
    let other = agent(&store, "a", json!({"busy_timeout_ms": 1234}));
    other.set_state(br#"{"n":"other"}"#).unwrap();
    assert_eq!(text(&a1.get_state().unwrap()), r#"{"n":"other"}"#);
}

#[each_backend]
fn threads_writing_agents_that_share_a_connection_lose_no_update() {
    let dir = TempDir::new("agents_threads");
    let store = Arc::new(dir.store("many.db"));
    const THREADS: usize = 4;
    const WRITES: usize = 150;
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                let own = agent(&store, &format!("t{t}"), json!({}));
                let common = agent(&store, "common", json!({}));
                for i in 0..WRITES {
                    own.set_state(format!(r#"{{"k{i}":{i}}}"#).as_bytes())
                        .unwrap();
                    // A read-modify-write of a counter through CAS: every success counts.
                    loop {
                        let v = common.get_state_versioned().unwrap();
                        let n = v.state.to_value()["n"].as_u64().unwrap_or(0);
                        let patch = format!(r#"{{"n":{}}}"#, n + 1);
                        match common.set_state_if(patch.as_bytes(), Some(v.version)) {
                            Ok(_) => break,
                            Err(Error::Conflict { .. }) => continue,
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let common = agent(&store, "common", json!({}));
    let v = common.get_state_versioned().unwrap();
    assert_eq!(v.state.to_value()["n"], json!(THREADS * WRITES));
    assert_eq!(v.version, (THREADS * WRITES) as u64);
    for t in 0..THREADS {
        let own = agent(&store, &format!("t{t}"), json!({}));
        let v = own.get_state_versioned().unwrap();
        assert_eq!(v.version, WRITES as u64);
        assert_eq!(v.state.to_value().as_object().unwrap().len(), WRITES);
    }
}

/// A validator of one agent that reads another agent of the same file (whose handle shares the
/// connection the validator's transaction holds).
struct ReadsOther {
    other: Arc<Agent>,
    seen: Mutex<Vec<Result<String, String>>>,
}

impl Validator for ReadsOther {
    fn validate(&self, _change: &StateChange) -> Result<(), String> {
        let got = self
            .other
            .get_state()
            .map(|s| text(&s))
            .map_err(|e| e.to_string());
        self.seen.lock().unwrap().push(got);
        Ok(())
    }
}

#[test]
fn a_validator_calling_an_agent_that_shares_its_connection_gets_a_cached_read_or_busy_never_a_deadlock(
) {
    sqlite_only!("the agents of one SQLite file share its connection");
    let dir = TempDir::new("agents_validator");
    let path = dir.file("many.db");
    // The same options: one shared connection (with a wait that would show as a hang).
    let a = file_agent(&path, "a", json!({"busy_timeout_ms": 60000}));
    let b = Arc::new(file_agent(&path, "b", json!({"busy_timeout_ms": 60000})));
    b.set_state(br#"{"b":1}"#).unwrap();
    b.get_state().unwrap(); // cached
    let v = Arc::new(ReadsOther {
        other: Arc::clone(&b),
        seen: Mutex::new(Vec::new()),
    });
    a.set_validator(Some(v.clone())).unwrap();
    a.set_state(br#"{"a":1}"#).unwrap();
    // b's cache is current (only a's transaction is open, uncommitted): served from it.
    assert_eq!(v.seen.lock().unwrap()[0], Ok(r#"{"b":1}"#.to_string()));
    // Now b's cache is stale (a committed): b needs a statement on the connection a's next
    // transaction holds, on this very thread: refused at once, not after 60 s.
    let started = std::time::Instant::now();
    a.set_state(br#"{"a":2}"#).unwrap();
    let second = v.seen.lock().unwrap()[1].clone();
    assert!(
        matches!(&second, Err(m) if m.starts_with("busy:") && m.contains("same file")),
        "{second:?}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    assert_eq!(text(&b.get_state().unwrap()), r#"{"b":1}"#);
}

#[test]
fn ten_thousand_handles_to_agents_of_one_file_fit_under_1024_file_descriptors() {
    sqlite_only!("the file descriptors of SQLite files");
    const CHILD: &str = "AGENT_STATE_TEST_FD_CHILD";
    if let Ok(dir) = std::env::var(CHILD) {
        let path = std::path::Path::new(&dir).join("many.db");
        let fds = || std::fs::read_dir("/proc/self/fd").unwrap().count();
        let before = fds();
        let agents: Vec<Agent> = (0..10_000)
            .map(|i| {
                file_agent(
                    &path,
                    &format!("agent-{i}"),
                    json!({"synchronous": "normal"}),
                )
            })
            .collect();
        for (i, a) in agents.iter().enumerate() {
            a.set_state(format!(r#"{{"i":{i}}}"#).as_bytes()).unwrap();
        }
        for (i, a) in agents.iter().enumerate() {
            assert_eq!(text(&a.get_state().unwrap()), format!(r#"{{"i":{i}}}"#));
        }
        let opened = fds() - before;
        assert!(opened <= 4, "10,000 handles hold {opened} file descriptors");
        return;
    }
    // The real limit, in a child process: the test binary run again under `ulimit -n 1024`.
    let dir = TempDir::new("agents_fds");
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(r#"ulimit -n 1024 && exec "$0" "$@""#)
        .arg(exe)
        .args([
            "--exact",
            test_name(
                module_path!(),
                "ten_thousand_handles_to_agents_of_one_file_fit_under_1024_file_descriptors",
            )
            .as_str(),
            "--nocapture",
        ])
        .env(CHILD, dir.file(""))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 passed"));
}

#[test]
fn a_schema_2_file_is_upgraded_in_place_keeping_state_version_and_log() {
    sqlite_only!("the upgrade of an old SQLite schema");
    let dir = TempDir::new("agents_upgrade");
    let path = dir.file("v2.db");
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch(
            "PRAGMA journal_mode=WAL;
             CREATE TABLE agent_kv (key TEXT PRIMARY KEY NOT NULL, value BLOB NOT NULL,
                                    version INTEGER NOT NULL DEFAULT 0);
             CREATE TABLE agent_changes (version INTEGER PRIMARY KEY NOT NULL,
                 at_ms INTEGER NOT NULL, writer INTEGER NOT NULL, patch BLOB,
                 next BLOB NOT NULL, prev BLOB);
             INSERT INTO agent_kv VALUES ('__agent_state', '{\"n\":7}', 7);
             INSERT INTO agent_kv VALUES ('__agent_change_log', '{\"keep_last\":5}', 0);
             INSERT INTO agent_changes VALUES (6, 1, 9, '{\"n\":6}', '{\"n\":6}', NULL);
             INSERT INTO agent_changes VALUES (7, 2, 9, '{\"n\":7}', '{\"n\":7}', NULL);
             PRAGMA application_id = 1097290612; PRAGMA user_version = 2;",
        )
        .unwrap();
    }
    // Read-only: the old layout is read as it is, and named agents are refused.
    let ro = Agent::open_with(&path, &opts(json!({"read_only": true}))).unwrap();
    assert_eq!(ro.get_state_versioned().unwrap().version, 7);
    ro.close().unwrap();
    let named = Agent::open_with(&path, &opts(json!({"read_only": true, "agent_id": "x"})));
    assert!(
        matches!(&named, Err(Error::Storage(m)) if m.contains("predates agent ids")),
        "{named:?}"
    );
    // For writing: upgraded, nothing lost.
    let a = Agent::open_with(&path, &opts(json!({}))).unwrap();
    let v = a.get_state_versioned().unwrap();
    assert_eq!((v.version, text(&v.state)), (7, r#"{"n":7}"#.to_string()));
    let log: serde_json::Value = serde_json::from_slice(&a.changes_since(5).unwrap()).unwrap();
    assert_eq!(log.as_array().unwrap().len(), 2, "{log}");
    assert_eq!(
        a.set_state(br#"{"n":8}"#).unwrap().to_value(),
        json!({"n": 8})
    );
    assert_eq!(text(&a.state_at(7).unwrap()), r#"{"n":7}"#);
    let x = file_agent(&path, "x", json!({}));
    x.set_state(br#"{"x":1}"#).unwrap();
    assert_eq!(a.get_state_versioned().unwrap().version, 8);
    let version: i32 = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, agent_state::internals::SQLITE_SCHEMA_VERSION);
}

#[each_backend]
fn agent_id_must_be_a_non_empty_string_of_at_most_255_bytes() {
    let dir = TempDir::new("agents_ids");
    let store = dir.store("many.db");
    for bad in [
        json!(""),
        json!(7),
        json!(null),
        json!("x".repeat(256)),
        json!("a\0b"),
    ] {
        let r =
            agent_state::OpenOptions::from_json(json!({"agent_id": bad}).to_string().as_bytes());
        assert!(matches!(r, Err(Error::InvalidArgument(_))), "{bad}: {r:?}");
    }
    // 254 bytes; on PostgreSQL the test's namespace comes before the ids, so less there.
    let long = "é".repeat(if test_support::sqlite() { 127 } else { 80 });
    let a = agent(&store, &long, json!({}));
    a.set_state(br#"{"ok":1}"#).unwrap();
    // Ids are exact: no folding of case or normalization.
    let other = agent(&store, &long.to_uppercase(), json!({}));
    assert_eq!(other.get_state_versioned().unwrap().version, 0);
}
