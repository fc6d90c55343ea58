//! The change log through the safe Rust API: poll, changes_since, state_at, restore, pruning
//! and its gaps, switching the log, and histories long enough to cross its checkpoints. On
//! either backend (`#[each_backend]`, crates/test-support), but for the tests of SQLite files,
//! which say so.

use std::sync::{Arc, Mutex};

use agent_state::{Agent, Error, OpenOptions, StateChange, StateChangedHook};
use serde_json::{json, Value};

use test_support::{
    each_backend, open, opts, sqlite_only, text, write_behind_the_back, Place, TempDir,
    VersionRecorder,
};

#[each_backend]
fn poll_delivers_other_handles_changes_once_in_commit_order() {
    let dir = TempDir::new("poll");
    let store = dir.store("a.db");
    let log = json!({"change_log": {"keep_last": 100}, "synchronous": "normal"});
    let a = open(&store, &opts(log.clone())).unwrap();
    let b = open(&store, &OpenOptions::default()).unwrap(); // logs: the store says so
    let rec = Arc::new(VersionRecorder::default());
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
    let c = open(&dir2.store("c.db"), &OpenOptions::default()).unwrap();
    assert!(matches!(c.poll(), Err(Error::InvalidArgument(_))));
}

#[each_backend]
fn changes_since_state_at_and_restore() {
    let dir = TempDir::new("pitr");
    let a = open(
        &dir.store("a.db"),
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
    assert!(matches!(a.changes_since(1), Err(Error::Gap { .. })));
    assert!(matches!(a.changes_since(9), Err(Error::InvalidArgument(_))));
    assert_eq!(text(&a.state_at(3).unwrap()), r#"{"n":3}"#);
    assert_eq!(text(&a.state_at(5).unwrap()), r#"{"n":5}"#);
    assert_eq!(text(&a.state_at(0).unwrap()), "{}");
    assert!(matches!(a.state_at(2), Err(Error::Gap { .. })));
    let restored = a.restore(3).unwrap();
    assert_eq!(
        (restored.version, text(&restored.state)),
        (6, r#"{"n":3}"#.to_string())
    );
    let last: Value = serde_json::from_slice(&a.changes_since(5).unwrap()).unwrap();
    assert_eq!(last[0]["patch"], Value::Null, "a restore is a replacement");
}

#[each_backend]
fn pruned_changes_are_reported_as_a_gap_and_the_rest_delivered() {
    let dir = TempDir::new("gap");
    let store = dir.store("a.db");
    let a = open(&store, &opts(json!({"change_log": {"keep_last": 2}}))).unwrap();
    let b = open(&store, &OpenOptions::default()).unwrap();
    let rec = Arc::new(VersionRecorder::default());
    a.on_state_changed(rec.clone()).unwrap();
    for n in 1..=5 {
        b.set_state(format!(r#"{{"n":{n}}}"#).as_bytes()).unwrap();
    }
    // Retained: 4 and 5. 4's predecessor is gone, so only 5 can be delivered exactly.
    let err = a.poll().unwrap_err();
    assert!(
        matches!(&err, Error::Gap { message: m, missing } if m.contains("changes 1 to 4") && *missing == (1..=4)),
        "{err}"
    );
    assert_eq!(rec.seen.lock().unwrap().len(), 1);
    assert_eq!(rec.seen.lock().unwrap()[0].0, 5);
    assert_eq!(a.poll().unwrap(), 0);
}

#[test]
fn the_log_can_be_switched_off_and_old_stores_are_migrated() {
    sqlite_only!("the migration of old SQLite schemas");
    let dir = TempDir::new("migrate");
    let path = dir.file("v1.db");
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch(
            "PRAGMA journal_mode=WAL;
             CREATE TABLE agent_kv (key TEXT PRIMARY KEY NOT NULL, value BLOB NOT NULL);
             INSERT INTO agent_kv VALUES ('__agent_state', '{\"old\":true}');
             PRAGMA application_id = 1097290612; PRAGMA user_version = 1;",
        )
        .unwrap();
    }
    let ro = Agent::open_with(&path, &opts(json!({"read_only": true}))).unwrap();
    assert_eq!(ro.get_state_versioned().unwrap().version, 1);
    ro.close().unwrap();
    let a = Agent::open_with(&path, &opts(json!({"change_log": {"keep_seconds": 60}}))).unwrap();
    let v = a.get_state_versioned().unwrap();
    assert_eq!(
        (v.version, text(&v.state)),
        (1, r#"{"old":true}"#.to_string())
    );
    assert_eq!(a.set_state(br#"{"new":1}"#).map(|_| ()).ok(), Some(()));
    assert!(a.changes_since(1).unwrap().len() > 2);
    a.close().unwrap();
    let version: i32 = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, agent_state::internals::SQLITE_SCHEMA_VERSION);
    let b = Agent::open_with(&path, &opts(json!({"change_log": false}))).unwrap();
    assert!(matches!(b.changes_since(0), Err(Error::InvalidArgument(_))));
    b.set_state(br#"{"after":1}"#).unwrap();
    let logged: i64 = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row("SELECT count(*) FROM agent_changes", [], |r| r.get(0))
        .unwrap();
    assert_eq!(logged, 0);
}

#[each_backend]
fn a_write_delivers_pending_changes_before_its_own_pruning() {
    let dir = TempDir::new("prune_order");
    let store = dir.store("a.db");
    let a = open(&store, &opts(json!({"change_log": {"keep_last": 2}}))).unwrap();
    let b = open(&store, &OpenOptions::default()).unwrap();
    let rec = Arc::new(VersionRecorder::default());
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
        matches!(&err, Error::Gap { message: m, .. } if m.contains("changes 1 to 2")),
        "{err}"
    );
}

#[each_backend]
fn the_first_change_is_delivered_with_the_writers_initial_state() {
    let dir = TempDir::new("first");
    let store = dir.store("a.db");
    let a = open(
        &store,
        &opts(json!({"change_log": {"keep_last": 10}, "initial_state": {"mine": 1}})),
    )
    .unwrap();
    let b = open(&store, &opts(json!({"initial_state": {"theirs": 1}}))).unwrap();
    let rec = Arc::new(VersionRecorder::default());
    a.on_state_changed(rec.clone()).unwrap();
    b.set_state(br#"{"x":1}"#).unwrap();
    assert_eq!(a.poll().unwrap(), 1);
    let seen = rec.seen.lock().unwrap();
    assert_eq!(seen[0].1, r#"{"theirs":1}"#);
    assert_eq!(seen[0].2, r#"{"theirs":1,"x":1}"#);
}

#[each_backend]
fn a_handle_reading_in_transactions_while_others_commit_stays_current() {
    // Poll, changes_since and state_at read inside a read transaction while other handles
    // commit; what they see must never be taken for the newest state afterwards.
    let dir = TempDir::new("stays_current");
    let store = dir.store("a.db");
    let log = json!({"change_log": {"keep_last": 1000}, "synchronous": "normal"});
    let a = Arc::new(open(&store, &opts(log)).unwrap());
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let store = store.clone();
            std::thread::spawn(move || {
                let b = open(
                    &store,
                    &opts(json!({"synchronous": "normal", "busy_timeout_ms": 60000})),
                )
                .unwrap();
                for n in 0..120 {
                    b.set_state(format!(r#"{{"w{w}":{n}}}"#).as_bytes())
                        .unwrap();
                }
            })
        })
        .collect();
    // At least one round, however fast the writers finish (a loop guarded by "writers still
    // running" could run none).
    let mut rounds = 0;
    loop {
        let done = writers.iter().all(|w| w.is_finished());
        a.poll().unwrap();
        let v = a.get_state_versioned().unwrap().version;
        a.changes_since(v.saturating_sub(1)).unwrap();
        a.state_at(0).unwrap();
        rounds += 1;
        if done {
            break;
        }
    }
    for w in writers {
        w.join().unwrap();
    }
    assert!(rounds > 0);
    let fresh = open(&store, &OpenOptions::default()).unwrap();
    assert_eq!(a.get_state_versioned().unwrap().version, 480);
    assert_eq!(fresh.get_state_versioned().unwrap().version, 480);
    assert!(matches!(
        a.set_state_if(br#"{"late":1}"#, Some(479)),
        Err(Error::Conflict { .. })
    ));
}

#[each_backend]
fn repairing_a_corrupt_state_is_logged_like_any_replacement() {
    let dir = TempDir::new("repair_logged");
    let store = dir.store("a.db");
    let a = open(&store, &opts(json!({"change_log": {"keep_last": 100}}))).unwrap();
    a.set_state(br#"{"n":1}"#).unwrap();
    a.set_state(br#"{"n":2}"#).unwrap();
    // Version 3, written behind the library's back (so not logged), does not decode.
    write_behind_the_back(&store, "{");
    let b = open(&store, &OpenOptions::default()).unwrap();
    let rec = Arc::new(VersionRecorder::default());
    b.on_state_changed(rec.clone()).unwrap();
    assert_eq!(
        a.replace_state_if(br#"{"fixed":true}"#, None)
            .unwrap()
            .version,
        4
    );
    let since: Value = serde_json::from_slice(&a.changes_since(3).unwrap()).unwrap();
    assert_eq!(since[0]["version"], json!(4));
    assert_eq!(since[0]["next"], json!({"fixed": true}));
    assert_eq!(b.poll().unwrap(), 1);
    assert_eq!(rec.seen.lock().unwrap()[0].2, r#"{"fixed":true}"#);
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

#[each_backend]
fn a_hook_writing_during_a_batch_of_deliveries_does_not_deadlock() {
    for poll in [false, true] {
        let dir = TempDir::new("batch_nested");
        let store = dir.store("a.db");
        let log = json!({"change_log": {"keep_last": 100}});
        let a = Arc::new(open(&store, &opts(log)).unwrap());
        let b = open(&store, &OpenOptions::default()).unwrap();
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

/// The log holds patches, with a full state at checkpoints, and prunes in batches: over a
/// history much longer than both periods, every retained version's state, every delivery and
/// every `changes_since` is exactly what the writer committed, pruned versions are gaps, and
/// the file holds few full states.
#[each_backend]
fn a_long_history_of_patches_rebuilds_every_retained_state_exactly() {
    const KEEP: u64 = 45;
    const WRITES: u64 = 300;
    let dir = TempDir::new("patch_log");
    let store = dir.store("a.db");
    let log = json!({"change_log": {"keep_last": KEEP}, "synchronous": "normal",
                     "initial_state": {"big": "x".repeat(2000)}});
    let writer = open(&store, &opts(log.clone())).unwrap();
    let poller = open(&store, &opts(log)).unwrap();
    let rec = Arc::new(VersionRecorder::default());
    poller.on_state_changed(rec.clone()).unwrap();
    let mut committed = vec![text(&writer.get_state().unwrap())];
    for i in 1..=WRITES {
        let next = if i % 97 == 0 {
            writer.replace_state(format!(r#"{{"replaced":{i}}}"#).as_bytes())
        } else {
            writer.set_state(
                format!(
                    r#"{{"n":{i},"k{}":{{"i":{i}}},"k{}":null}}"#,
                    i % 7,
                    (i + 3) % 7
                )
                .as_bytes(),
            )
        };
        committed.push(text(&next.unwrap()));
        // The poller falls behind by up to 40 changes (within the retention), then catches up.
        if i % 40 == 0 {
            poller.poll().unwrap();
        }
    }
    poller.poll().unwrap();
    let seen = rec.seen.lock().unwrap().clone();
    assert_eq!(seen.len() as u64, WRITES);
    for (k, (version, prev, next, _)) in seen.iter().enumerate() {
        assert_eq!(*version, k as u64 + 1);
        assert_eq!(prev, &committed[k], "prev of version {version}");
        assert_eq!(next, &committed[k + 1], "next of version {version}");
    }
    // Every retained version, through the API and through a fresh handle.
    let fresh = open(&store, &OpenOptions::default()).unwrap();
    for v in 0..=WRITES {
        let kept = v == 0 || v > WRITES - KEEP || v == WRITES;
        // (Version 0 is the asking handle's initial state: the fresh handle has another.)
        for a in [&writer, &fresh]
            .into_iter()
            .take(if v == 0 { 1 } else { 2 })
        {
            match a.state_at(v) {
                Ok(s) if kept => assert_eq!(text(&s), committed[v as usize], "version {v}"),
                Err(Error::Gap { .. }) if !kept => {}
                other => panic!("version {v} (kept: {kept}): {other:?}"),
            }
        }
    }
    let since: Value =
        serde_json::from_slice(&fresh.changes_since(WRITES - KEEP).unwrap()).unwrap();
    let since = since.as_array().unwrap();
    assert_eq!(since.len() as u64, KEEP);
    for c in since {
        let v = c["version"].as_u64().unwrap();
        assert_eq!(
            c["next"].to_string(),
            committed[v as usize],
            "changes_since: version {v}"
        );
    }
    assert!(matches!(
        fresh.changes_since(WRITES - KEEP - 1),
        Err(Error::Gap { .. })
    ));
    // What a SQLite file holds: at most the retained changes plus the pruning slack (16) and
    // the base they are rebuilt from (32), and full states only at checkpoints and replacements.
    if let Place::Sqlite { path, .. } = &store {
        let c = rusqlite::Connection::open(path).unwrap();
        let (rows, full): (i64, i64) = c
            .query_row("SELECT count(*), count(next) FROM agent_changes", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        assert!(rows as u64 <= KEEP + 16 + 32, "{rows} rows");
        assert!(
            full as u64 <= rows as u64 / 32 + 4,
            "{full} full states in {rows} rows"
        );
    }
}

/// A lower retention, set by a later open, takes effect at once, before any new write.
#[each_backend]
fn a_lower_retention_hides_older_changes_at_once() {
    let dir = TempDir::new("retention_change");
    let store = dir.store("a.db");
    let a = open(&store, &opts(json!({"change_log": {"keep_last": 50}}))).unwrap();
    for i in 0..20 {
        a.set_state(format!(r#"{{"i":{i}}}"#).as_bytes()).unwrap();
    }
    let b = open(&store, &opts(json!({"change_log": {"keep_last": 5}}))).unwrap();
    assert!(matches!(b.changes_since(10), Err(Error::Gap { .. })));
    let since: Value = serde_json::from_slice(&b.changes_since(15).unwrap()).unwrap();
    assert_eq!(since.as_array().unwrap().len(), 5);
    assert_eq!(text(&b.state_at(16).unwrap()), r#"{"i":15}"#);
}

/// A handle that logged the last change does not assume the log still holds it when the log
/// was switched off and on again meanwhile (which dropped it): its next change is stored in
/// full, and is rebuilt exactly.
#[each_backend]
fn a_log_switched_off_and_on_behind_a_writers_back_still_rebuilds_its_next_change() {
    let dir = TempDir::new("log_off_on");
    let store = dir.store("a.db");
    let log = json!({"change_log": {"keep_last": 100}});
    let a = open(&store, &opts(log.clone())).unwrap();
    for i in 0..5 {
        a.set_state(format!(r#"{{"i":{i}}}"#).as_bytes()).unwrap();
    }
    drop(open(&store, &opts(json!({"change_log": false}))).unwrap());
    drop(open(&store, &opts(log)).unwrap());
    let next = a.set_state(br#"{"j":1}"#).unwrap();
    assert_eq!(text(&a.state_at(6).unwrap()), text(&next));
    assert!(matches!(a.state_at(5), Err(Error::Gap { .. })));
    let fresh = open(&store, &OpenOptions::default()).unwrap();
    let since: Value = serde_json::from_slice(&fresh.changes_since(5).unwrap()).unwrap();
    assert_eq!(since[0]["next"].to_string(), text(&next));
}
