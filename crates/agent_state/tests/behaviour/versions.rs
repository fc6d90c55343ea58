//! Versions, compare-and-set and the validation gate (the change log: change_log.rs). On either
//! backend (`#[each_backend]`, crates/test-support).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use agent_state::{Agent, Error, OpenOptions, StateChange, Validator};
use serde_json::{json, Value};

use test_support::{each_backend, open, opts, text, TempDir, VersionRecorder};

#[each_backend]
fn every_commit_gets_the_next_version_and_it_persists() {
    let dir = TempDir::new("versions");
    let store = dir.store("a.db");
    let a = open(&store, &opts(json!({"initial_state": {"n": 0}}))).unwrap();
    let v = a.get_state_versioned().unwrap();
    assert_eq!((v.version, text(&v.state)), (0, r#"{"n":0}"#.to_string()));
    assert_eq!(a.set_state_if(br#"{"n":1}"#, None).unwrap().version, 1);
    assert_eq!(a.replace_state_if(br#"{"m":2}"#, None).unwrap().version, 2);
    let rec = Arc::new(VersionRecorder::default());
    a.on_state_changed(rec.clone()).unwrap();
    a.set_state(br#"{"m":3}"#).unwrap();
    assert_eq!(rec.seen.lock().unwrap()[0].0, 3);
    a.close().unwrap();
    let b = open(&store, &OpenOptions::default()).unwrap();
    assert_eq!(b.get_state_versioned().unwrap().version, 3);
}

#[each_backend]
fn compare_and_set_writes_only_at_the_expected_version() {
    let dir = TempDir::new("cas");
    let a = open(&dir.store("a.db"), &OpenOptions::default()).unwrap();
    assert!(matches!(
        a.set_state_if(br#"{"x":1}"#, Some(5)),
        Err(Error::Conflict { .. })
    ));
    assert_eq!(
        a.get_state_versioned().unwrap().version,
        0,
        "nothing written"
    );
    assert_eq!(a.set_state_if(br#"{"x":1}"#, Some(0)).unwrap().version, 1);
    assert!(matches!(
        a.replace_state_if(br#"{"y":1}"#, Some(0)),
        Err(Error::Conflict { .. })
    ));
    assert_eq!(text(&a.get_state().unwrap()), r#"{"x":1}"#);
    assert_eq!(
        a.replace_state_if(br#"{"y":1}"#, Some(1)).unwrap().version,
        2
    );
}

#[each_backend]
fn read_modify_write_loops_on_many_handles_count_exactly() {
    const HANDLES: usize = 4;
    const EACH: usize = 60;
    let dir = TempDir::new("rmw");
    let store = dir.store("a.db");
    let successes = Arc::new(AtomicUsize::new(0));
    let conflicts = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..HANDLES)
        .map(|_| {
            let store = store.clone();
            let successes = successes.clone();
            let conflicts = conflicts.clone();
            std::thread::spawn(move || {
                let a = open(
                    &store,
                    &opts(json!({"synchronous": "normal", "busy_timeout_ms": 60000})),
                )
                .unwrap();
                for _ in 0..EACH {
                    let v = a.get_state_versioned().unwrap();
                    let state: Value = serde_json::from_slice(v.state.json()).unwrap();
                    let n = state["count"].as_u64().unwrap_or(0);
                    match a.set_state_if(
                        format!(r#"{{"count":{}}}"#, n + 1).as_bytes(),
                        Some(v.version),
                    ) {
                        Ok(_) => {
                            successes.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(Error::Conflict { .. }) => {
                            conflicts.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => panic!("{e}"),
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let a = open(&store, &OpenOptions::default()).unwrap();
    let state: Value = serde_json::from_slice(a.get_state().unwrap().json()).unwrap();
    let ok = successes.load(Ordering::Relaxed) as u64;
    assert_eq!(state["count"], json!(ok));
    assert_eq!(a.get_state_versioned().unwrap().version, ok);
    assert_eq!(
        ok as usize + conflicts.load(Ordering::Relaxed),
        HANDLES * EACH
    );
}

struct NoNegative;

impl Validator for NoNegative {
    fn validate(&self, c: &StateChange) -> Result<(), String> {
        let next: Value = serde_json::from_slice(c.next.json()).unwrap();
        match next["balance"].as_i64() {
            Some(b) if b < 0 => Err(format!("balance would be {b} at version {}", c.version)),
            _ => Ok(()),
        }
    }
}

#[each_backend]
fn the_validator_gates_changes_before_commit() {
    let dir = TempDir::new("gate");
    let a = Arc::new(open(&dir.store("a.db"), &OpenOptions::default()).unwrap());
    let rec = Arc::new(VersionRecorder::default());
    a.on_state_changed(rec.clone()).unwrap();
    a.set_validator(Some(Arc::new(NoNegative))).unwrap();
    a.set_state(br#"{"balance":10}"#).unwrap();
    let err = a.set_state(br#"{"balance":-5}"#).unwrap_err();
    assert!(
        matches!(&err, Error::Rejected(m) if m.contains("balance would be -5 at version 2")),
        "{err}"
    );
    assert_eq!(text(&a.get_state().unwrap()), r#"{"balance":10}"#);
    assert_eq!(a.get_state_versioned().unwrap().version, 1);
    assert_eq!(
        rec.seen.lock().unwrap().len(),
        1,
        "no hook for a rejected change"
    );
    // Codec and size checks come first: a malformed value never reaches the gate.
    assert!(matches!(
        a.set_state(br#"{"d":{"$date":"x"}}"#),
        Err(Error::Codec(_))
    ));
    // The gate may not call its own handle.
    struct Reenter(Mutex<Option<Arc<Agent>>>, Mutex<Option<Error>>);
    impl Validator for Reenter {
        fn validate(&self, _: &StateChange) -> Result<(), String> {
            if let Some(a) = self.0.lock().unwrap().clone() {
                *self.1.lock().unwrap() = a.get_state().err();
            }
            Ok(())
        }
    }
    let gate = Arc::new(Reenter(Mutex::new(Some(a.clone())), Mutex::new(None)));
    a.set_validator(Some(gate.clone())).unwrap();
    a.set_state(br#"{"balance":1}"#).unwrap();
    assert!(matches!(*gate.1.lock().unwrap(), Some(Error::Busy(_))));
    *gate.0.lock().unwrap() = None;
    a.set_validator(None).unwrap();
    a.set_state(br#"{"balance":-1}"#).unwrap();
}

/// Counts the validator's calls, accepting everything.
#[derive(Default)]
struct CountingGate(AtomicUsize);

impl Validator for CountingGate {
    fn validate(&self, _: &StateChange) -> Result<(), String> {
        self.0.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// A write whose result is the stored state, byte for byte, changes nothing: no commit, no
/// version, no hook, no validator call, no change-log entry; it returns the current state and
/// version, and compare-and-set still checks the version first.
#[each_backend]
fn a_write_that_changes_nothing_commits_nothing() {
    let dir = TempDir::new("noop");
    let store = dir.store("a.db");
    let a = open(
        &store,
        &opts(json!({"initial_state": {"n": 0}, "change_log": {"keep_last": 100}})),
    )
    .unwrap();
    let rec = Arc::new(VersionRecorder::default());
    a.on_state_changed(rec.clone()).unwrap();
    let gate = Arc::new(CountingGate::default());
    a.set_validator(Some(gate.clone())).unwrap();
    // Nothing stored yet: an empty patch stores the initial state (a first write is a change).
    assert_eq!(a.set_state_if(b"{}", None).unwrap().version, 1);
    assert_eq!(rec.seen.lock().unwrap().len(), 1);
    a.set_state(br#"{"user":{"name":"Ada"},"list":[1,2]}"#)
        .unwrap();
    let stored = r#"{"n":0,"user":{"name":"Ada"},"list":[1,2]}"#;
    let (calls, hooks) = (
        gate.0.load(Ordering::Relaxed),
        rec.seen.lock().unwrap().len(),
    );
    for patch in [
        "{}",
        r#"{"n":0}"#,
        r#"{"user":{"name":"Ada"}}"#,
        r#"{"list":[1,2],"gone":null}"#,
    ] {
        let v = a.set_state_if(patch.as_bytes(), None).unwrap();
        assert_eq!(
            (v.version, text(&v.state)),
            (2, stored.to_string()),
            "{patch}"
        );
        let v = a.set_state_if(patch.as_bytes(), Some(2)).unwrap();
        assert_eq!(v.version, 2, "{patch}");
        assert!(
            matches!(
                a.set_state_if(patch.as_bytes(), Some(1)),
                Err(Error::Conflict { .. })
            ),
            "{patch}: compare-and-set is checked before anything else"
        );
    }
    let v = a.replace_state_if(stored.as_bytes(), Some(2)).unwrap();
    assert_eq!((v.version, text(&v.state)), (2, stored.to_string()));
    assert_eq!(
        gate.0.load(Ordering::Relaxed),
        calls,
        "the validator was not asked"
    );
    assert_eq!(rec.seen.lock().unwrap().len(), hooks, "no hook fired");
    let log: Value = serde_json::from_slice(&a.changes_since(0).unwrap()).unwrap();
    assert_eq!(log.as_array().unwrap().len(), 2, "nothing logged: {log}");
    // The same members in another order encode differently: that is a change.
    let v = a
        .replace_state(br#"{"list":[1,2],"n":0,"user":{"name":"Ada"}}"#)
        .unwrap();
    assert_eq!(text(&v), r#"{"list":[1,2],"n":0,"user":{"name":"Ada"}}"#);
    assert_eq!(a.get_state_versioned().unwrap().version, 3);
    a.close().unwrap();
    let b = open(&store, &OpenOptions::default()).unwrap();
    assert_eq!(b.get_state_versioned().unwrap().version, 3);
}

/// Whether a write changes anything is decided against the latest stored state, never a stale
/// copy: a write that would change nothing by what this handle last saw, after another handle
/// changed the state, is a change.
#[each_backend]
fn a_write_that_changes_nothing_is_judged_against_the_latest_state() {
    let dir = TempDir::new("noop_latest");
    let store = dir.store("a.db");
    let a = open(&store, &OpenOptions::default()).unwrap();
    let b = open(&store, &OpenOptions::default()).unwrap();
    a.set_state(br#"{"x":1}"#).unwrap();
    assert_eq!(b.get_state_versioned().unwrap().version, 1);
    a.set_state(br#"{"x":2}"#).unwrap();
    // By b's copy, x is already 1.
    let v = b.set_state_if(br#"{"x":1}"#, None).unwrap();
    assert_eq!((v.version, text(&v.state)), (3, r#"{"x":1}"#.to_string()));
    // And by b's copy, x is 1 while another handle's write made it 2: a change again.
    a.set_state(br#"{"x":2}"#).unwrap();
    let v = b.replace_state_if(br#"{"x":1}"#, None).unwrap();
    assert_eq!((v.version, text(&v.state)), (5, r#"{"x":1}"#.to_string()));
    // A write of what the latest state holds, after another handle's change: nothing.
    a.set_state(br#"{"y":0}"#).unwrap();
    let v = b.set_state_if(br#"{"y":0}"#, None).unwrap();
    assert_eq!(v.version, 6);
    assert_eq!(text(&v.state), r#"{"x":1,"y":0}"#);
}

/// A conflict carries the versions a caller acts on, and a store's failure keeps the backend's
/// own error as its source.
#[each_backend]
fn errors_carry_what_callers_act_on() {
    let dir = TempDir::new("errors");
    let a = open(&dir.store("a.db"), &OpenOptions::default()).unwrap();
    a.set_state(br#"{"x":1}"#).unwrap();
    match a.set_state_if(br#"{"x":2}"#, Some(7)) {
        Err(Error::Conflict {
            expected, actual, ..
        }) => assert_eq!((expected, actual), (7, 1)),
        other => panic!("{other:?}"),
    }
    if test_support::sqlite() {
        let missing = dir.file("no-such-dir").join("a.db");
        let err = Agent::open_with(&missing, &OpenOptions::default()).unwrap_err();
        assert!(matches!(err, Error::Storage(_)), "{err:?}");
        let source =
            std::error::Error::source(&err).unwrap_or_else(|| panic!("no source: {err:?}"));
        assert!(!source.to_string().is_empty());
    }
}

/// A write says whether it committed: a change does (at the next version); a write whose result
/// is the stored state commits nothing and returns the stored state and version, which another
/// handle may have written (a binding that keeps its own copy must then take that state).
#[each_backend]
fn a_write_says_whether_it_committed() {
    let dir = TempDir::new("written");
    let place = dir.store("s.db");
    let a = open(&place, &OpenOptions::default()).unwrap();
    let b = open(&place, &OpenOptions::default()).unwrap();

    let first = a.set_state_written(br#"{"n":1}"#, None).unwrap();
    assert!(first.committed);
    assert_eq!(first.version, 1);

    let same = a.set_state_written(br#"{"n":1}"#, None).unwrap();
    assert!(!same.committed, "nothing changed");
    assert_eq!(same.version, 1);

    // Another handle commits; a's write changes nothing of the new state.
    b.set_state(br#"{"m":2}"#).unwrap();
    let after_other = a.set_state_written(br#"{"n":1}"#, None).unwrap();
    assert!(!after_other.committed);
    assert_eq!(after_other.version, 2);
    assert_eq!(after_other.state.json(), br#"{"n":1,"m":2}"#);

    let replaced = a.replace_state_written(br#"{"k":3}"#, Some(2)).unwrap();
    assert!(replaced.committed);
    assert_eq!(replaced.version, 3);
    let again = a.replace_state_written(br#"{"k":3}"#, None).unwrap();
    assert!(!again.committed);
    assert_eq!(again.version, 3);
}
