//! Versions, compare-and-set and the validation gate (the change log: change_log.rs). On either
//! backend (see tests/common).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use agent_state::{Agent, Error, OpenOptions, StateChange, Validator};
use serde_json::{json, Value};

mod common;
use common::{open, opts, text, TempDir, VersionRecorder};

#[test]
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

#[test]
fn compare_and_set_writes_only_at_the_expected_version() {
    let dir = TempDir::new("cas");
    let a = open(&dir.store("a.db"), &OpenOptions::default()).unwrap();
    assert!(matches!(
        a.set_state_if(br#"{"x":1}"#, Some(5)),
        Err(Error::Conflict(_))
    ));
    assert_eq!(
        a.get_state_versioned().unwrap().version,
        0,
        "nothing written"
    );
    assert_eq!(a.set_state_if(br#"{"x":1}"#, Some(0)).unwrap().version, 1);
    assert!(matches!(
        a.replace_state_if(br#"{"y":1}"#, Some(0)),
        Err(Error::Conflict(_))
    ));
    assert_eq!(text(&a.get_state().unwrap()), r#"{"x":1}"#);
    assert_eq!(
        a.replace_state_if(br#"{"y":1}"#, Some(1)).unwrap().version,
        2
    );
}

#[test]
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
                        Err(Error::Conflict(_)) => {
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

#[test]
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
