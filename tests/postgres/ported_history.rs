//! Ported from tests/history.rs: versions, compare-and-set, the validation gate and the change log, on PostgreSQL
//! (the tests of SQLite files and of migration are left out).
#![allow(unused_imports, dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use agent_state::{Agent, Error, OpenOptions, StateChange, StateChangedHook, Validator};
use serde_json::{json, Value};

use super::shim::{pg_open, TempDir};
use crate::common::{opts, text};

/// One delivery: (version, prev, next, patch).
type Delivery = (u64, String, String, Option<String>);

/// Records every delivery.
#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<Delivery>>,
}

impl StateChangedHook for Recorder {
    fn on_state_changed(&self, c: &StateChange) -> Result<(), String> {
        self.seen.lock().unwrap().push((
            c.version,
            text(&c.prev),
            text(&c.next),
            c.patch
                .as_ref()
                .map(|p| String::from_utf8(p.json().to_vec()).unwrap()),
        ));
        Ok(())
    }
}

#[test]
fn every_commit_gets_the_next_version_and_it_persists() {
    crate::server_or_skip!();
    let dir = TempDir::new("versions");
    let path = dir.file("a.db");
    let a = pg_open(&path, &opts(json!({"initial_state": {"n": 0}}))).unwrap();
    let v = a.get_state_versioned().unwrap();
    assert_eq!((v.version, text(&v.state)), (0, r#"{"n":0}"#.to_string()));
    assert_eq!(a.set_state_if(br#"{"n":1}"#, None).unwrap().version, 1);
    assert_eq!(a.replace_state_if(br#"{"m":2}"#, None).unwrap().version, 2);
    let rec = Arc::new(Recorder::default());
    a.on_state_changed(rec.clone()).unwrap();
    a.set_state(br#"{"m":3}"#).unwrap();
    assert_eq!(rec.seen.lock().unwrap()[0].0, 3);
    a.close().unwrap();
    let b = pg_open(&path, &OpenOptions::default()).unwrap();
    assert_eq!(b.get_state_versioned().unwrap().version, 3);
}

#[test]
fn compare_and_set_writes_only_at_the_expected_version() {
    crate::server_or_skip!();
    let dir = TempDir::new("cas");
    let a = pg_open(&dir.file("a.db"), &OpenOptions::default()).unwrap();
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
    crate::server_or_skip!();
    const HANDLES: usize = 4;
    const EACH: usize = 60;
    let dir = TempDir::new("rmw");
    let path = dir.file("a.db");
    let successes = Arc::new(AtomicUsize::new(0));
    let conflicts = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..HANDLES)
        .map(|_| {
            let path = path.clone();
            let successes = successes.clone();
            let conflicts = conflicts.clone();
            std::thread::spawn(move || {
                let a = pg_open(&path, &opts(json!({"synchronous": "normal"}))).unwrap();
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
    let a = pg_open(&path, &OpenOptions::default()).unwrap();
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
    crate::server_or_skip!();
    let dir = TempDir::new("gate");
    let a = Arc::new(pg_open(&dir.file("a.db"), &OpenOptions::default()).unwrap());
    let rec = Arc::new(Recorder::default());
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

#[test]
fn poll_delivers_other_handles_changes_once_in_commit_order() {
    crate::server_or_skip!();
    let dir = TempDir::new("poll");
    let path = dir.file("a.db");
    let log = json!({"change_log": {"keep_last": 100}, "synchronous": "normal"});
    let a = pg_open(&path, &opts(log.clone())).unwrap();
    let b = pg_open(&path, &OpenOptions::default()).unwrap(); // logs: the store says so
    let rec = Arc::new(Recorder::default());
    a.on_state_changed(rec.clone()).unwrap();
    b.set_state(br#"{"x":1}"#).unwrap();
    b.replace_state(br#"{"y":2}"#).unwrap();
    assert_eq!(a.poll().unwrap(), 2);
    assert_eq!(a.poll().unwrap(), 0, "each change once");
    // A write through `a` first delivers what `b` committed before it.
    b.set_state(br#"{"z":3}"#).unwrap();
    a.set_state(br#"{"w":4}"#).unwrap();
    b.set_state(br#"{"y":null}"#).unwrap();
    assert_eq!(a.poll().unwrap(), 1);
    let seen = rec.seen.lock().unwrap().clone();
    let expected = vec![
        (
            1,
            "{}".to_string(),
            r#"{"x":1}"#.to_string(),
            Some(r#"{"x":1}"#.to_string()),
        ),
        (2, r#"{"x":1}"#.into(), r#"{"y":2}"#.into(), None),
        (
            3,
            r#"{"y":2}"#.into(),
            r#"{"y":2,"z":3}"#.into(),
            Some(r#"{"z":3}"#.into()),
        ),
        (
            4,
            r#"{"y":2,"z":3}"#.into(),
            r#"{"y":2,"z":3,"w":4}"#.into(),
            Some(r#"{"w":4}"#.into()),
        ),
        (
            5,
            r#"{"y":2,"z":3,"w":4}"#.into(),
            r#"{"z":3,"w":4}"#.into(),
            Some(r#"{"y":null}"#.into()),
        ),
    ];
    assert_eq!(seen, expected);
    for pair in seen.windows(2) {
        assert_eq!(
            pair[1].1, pair[0].2,
            "prev of each delivery is the next of the one before"
        );
    }
    // Without the log, poll says so.
    let dir2 = TempDir::new("nolog");
    let c = pg_open(&dir2.file("c.db"), &OpenOptions::default()).unwrap();
    assert!(matches!(c.poll(), Err(Error::InvalidArgument(_))));
}

#[test]
fn changes_since_state_at_and_restore() {
    crate::server_or_skip!();
    let dir = TempDir::new("pitr");
    let a = pg_open(
        &dir.file("a.db"),
        &opts(json!({"change_log": {"keep_last": 3}})),
    )
    .unwrap();
    for n in 1..=5 {
        a.set_state(format!(r#"{{"n":{n}}}"#).as_bytes()).unwrap();
    }
    // Versions 3, 4, 5 are retained.
    let since: Value = serde_json::from_slice(&a.changes_since(3).unwrap()).unwrap();
    assert_eq!(since.as_array().unwrap().len(), 2);
    assert_eq!(since[0]["version"], json!(4));
    assert_eq!(since[0]["patch"], json!({"n": 4}));
    assert_eq!(since[1]["next"], json!({"n": 5}));
    assert!(since[1]["at"].as_i64().unwrap() > 1_700_000_000_000);
    assert_eq!(a.changes_since(5).unwrap(), b"[]");
    assert!(matches!(a.changes_since(1), Err(Error::Gap(_))));
    assert!(matches!(a.changes_since(9), Err(Error::InvalidArgument(_))));
    assert_eq!(text(&a.state_at(3).unwrap()), r#"{"n":3}"#);
    assert_eq!(text(&a.state_at(5).unwrap()), r#"{"n":5}"#);
    assert_eq!(text(&a.state_at(0).unwrap()), "{}");
    assert!(matches!(a.state_at(2), Err(Error::Gap(_))));
    let restored = a.restore(3).unwrap();
    assert_eq!(
        (restored.version, text(&restored.state)),
        (6, r#"{"n":3}"#.to_string())
    );
    let last: Value = serde_json::from_slice(&a.changes_since(5).unwrap()).unwrap();
    assert_eq!(last[0]["patch"], Value::Null, "a restore is a replacement");
}

#[test]
fn pruned_changes_are_reported_as_a_gap_and_the_rest_delivered() {
    crate::server_or_skip!();
    let dir = TempDir::new("gap");
    let path = dir.file("a.db");
    let a = pg_open(&path, &opts(json!({"change_log": {"keep_last": 2}}))).unwrap();
    let b = pg_open(&path, &OpenOptions::default()).unwrap();
    let rec = Arc::new(Recorder::default());
    a.on_state_changed(rec.clone()).unwrap();
    for n in 1..=5 {
        b.set_state(format!(r#"{{"n":{n}}}"#).as_bytes()).unwrap();
    }
    // Retained: 4 and 5. 4's predecessor is gone, so only 5 can be delivered exactly.
    let err = a.poll().unwrap_err();
    assert!(
        matches!(&err, Error::Gap(m) if m.contains("changes 1 to 4")),
        "{err}"
    );
    assert_eq!(rec.seen.lock().unwrap().len(), 1);
    assert_eq!(rec.seen.lock().unwrap()[0].0, 5);
    assert_eq!(a.poll().unwrap(), 0);
}

#[test]
fn a_write_delivers_pending_changes_before_its_own_pruning() {
    crate::server_or_skip!();
    let dir = TempDir::new("prune_order");
    let path = dir.file("a.db");
    let a = pg_open(&path, &opts(json!({"change_log": {"keep_last": 2}}))).unwrap();
    let b = pg_open(&path, &OpenOptions::default()).unwrap();
    let rec = Arc::new(Recorder::default());
    a.on_state_changed(rec.clone()).unwrap();
    for n in 1..=3 {
        b.set_state(format!(r#"{{"b":{n}}}"#).as_bytes()).unwrap();
    }
    // The log holds 2 and 3; `a` last saw version 0. Its write (4) prunes 2, but 3 (whose
    // predecessor 2 was still there) is delivered first.
    a.set_state(br#"{"a":1}"#).unwrap();
    let versions: Vec<u64> = rec.seen.lock().unwrap().iter().map(|d| d.0).collect();
    assert_eq!(versions, vec![3, 4]);
    let err = a.poll().unwrap_err();
    assert!(
        matches!(&err, Error::Gap(m) if m.contains("changes 1 to 2")),
        "{err}"
    );
}

#[test]
fn the_first_change_is_delivered_with_the_writers_initial_state() {
    crate::server_or_skip!();
    let dir = TempDir::new("first");
    let path = dir.file("a.db");
    let a = pg_open(
        &path,
        &opts(json!({"change_log": {"keep_last": 10}, "initial_state": {"mine": 1}})),
    )
    .unwrap();
    let b = pg_open(&path, &opts(json!({"initial_state": {"theirs": 1}}))).unwrap();
    let rec = Arc::new(Recorder::default());
    a.on_state_changed(rec.clone()).unwrap();
    b.set_state(br#"{"x":1}"#).unwrap();
    assert_eq!(a.poll().unwrap(), 1);
    let seen = rec.seen.lock().unwrap();
    assert_eq!(seen[0].1, r#"{"theirs":1}"#);
    assert_eq!(seen[0].2, r#"{"theirs":1,"x":1}"#);
}

#[test]
fn a_handle_reading_in_transactions_while_others_commit_stays_current() {
    crate::server_or_skip!();
    // Poll, changes_since and state_at read inside a read transaction while other handles
    // commit; what they see must never be taken for the newest state afterwards.
    let dir = TempDir::new("stays_current");
    let path = dir.file("a.db");
    let log = json!({"change_log": {"keep_last": 1000}, "synchronous": "normal"});
    let a = Arc::new(pg_open(&path, &opts(log)).unwrap());
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let path = path.clone();
            std::thread::spawn(move || {
                let b = pg_open(&path, &opts(json!({"synchronous": "normal"}))).unwrap();
                for n in 0..120 {
                    b.set_state(format!(r#"{{"w{w}":{n}}}"#).as_bytes())
                        .unwrap();
                }
            })
        })
        .collect();
    let mut rounds = 0;
    while writers.iter().any(|w| !w.is_finished()) {
        a.poll().unwrap();
        let v = a.get_state_versioned().unwrap().version;
        a.changes_since(v.saturating_sub(1)).unwrap();
        a.state_at(0).unwrap();
        rounds += 1;
    }
    for w in writers {
        w.join().unwrap();
    }
    assert!(rounds > 0);
    let fresh = pg_open(&path, &OpenOptions::default()).unwrap();
    assert_eq!(a.get_state_versioned().unwrap().version, 480);
    assert_eq!(fresh.get_state_versioned().unwrap().version, 480);
    assert!(matches!(
        a.set_state_if(br#"{"late":1}"#, Some(479)),
        Err(Error::Conflict(_))
    ));
}

/// Writes once through its own agent from inside its first delivery.
struct WritesOnce {
    agent: Mutex<Option<Arc<Agent>>>,
    versions: Mutex<Vec<u64>>,
}

impl StateChangedHook for WritesOnce {
    fn on_state_changed(&self, c: &StateChange) -> Result<(), String> {
        self.versions.lock().unwrap().push(c.version);
        if let Some(a) = self.agent.lock().unwrap().take() {
            a.set_state(br#"{"nested":1}"#).map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

#[test]
fn a_hook_writing_during_a_batch_of_deliveries_does_not_deadlock() {
    crate::server_or_skip!();
    for poll in [false, true] {
        let dir = TempDir::new("batch_nested");
        let path = dir.file("a.db");
        let log = json!({"change_log": {"keep_last": 100}});
        let a = Arc::new(pg_open(&path, &opts(log)).unwrap());
        let b = pg_open(&path, &OpenOptions::default()).unwrap();
        let hook = Arc::new(WritesOnce {
            agent: Mutex::new(Some(a.clone())),
            versions: Mutex::new(Vec::new()),
        });
        a.on_state_changed(hook.clone()).unwrap();
        b.set_state(br#"{"b":1}"#).unwrap();
        b.set_state(br#"{"b":2}"#).unwrap();
        // Versions 1 and 2 are delivered in one batch; the hook's nested write (3) follows them.
        if poll {
            assert_eq!(a.poll().unwrap(), 2);
            assert_eq!(*hook.versions.lock().unwrap(), vec![1, 2, 3]);
        } else {
            a.set_state(br#"{"a":1}"#).unwrap();
            assert_eq!(*hook.versions.lock().unwrap(), vec![1, 2, 3, 4]);
        }
    }
}
