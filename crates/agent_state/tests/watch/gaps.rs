//! What a watch delivers when it cannot deliver every change: a deletion, a change log that is
//! off or pruned, a reader that falls behind (each a Resync of the current state), and resuming
//! from a version (caught up from the log).

use std::collections::HashMap;

use agent_state::{delete_agent, WatchKind, WatchOptions};
use serde_json::json;
use test_support::{each_backend, write_behind_the_back};

use crate::{brief, connection, next, quiet, value, Store};

#[each_backend]
fn a_deletion_is_one_deleted_event_and_a_later_first_write_starts_again() {
    let store = Store::new("deleted");
    let a = store.agent("a", json!({}));
    a.set_state(br#"{"n": 1}"#).unwrap();
    let w = store.watch_ids(&["a"], WatchOptions::default());
    let deleted = delete_agent(&store.location, &connection(), &store.id("a"), None).unwrap();
    assert_eq!(deleted, Some(1));
    let e = next(&w);
    assert_eq!(brief(&store, &e), ("a".into(), 0, WatchKind::Deleted));
    assert!(e.state.is_none() && e.patch.is_none());
    let again = store.agent("a", json!({}));
    again.set_state(br#"{"back": true}"#).unwrap();
    let e = next(&w);
    assert_eq!(e.kind, WatchKind::Merge);
    assert!(e.version > 1, "a version after the deleted one: {e:?}");
    assert_eq!(value(&e.state), json!({"back": true}));
}

#[each_backend]
fn with_the_log_off_each_change_noticed_is_a_resync_of_the_state() {
    let store = Store::new("log_off");
    let a = store.agent("a", json!({"change_log": false}));
    a.set_state(br#"{"n": 1}"#).unwrap();
    let w = store.watch_ids(&["a"], WatchOptions::default());
    a.set_state(br#"{"n": 2}"#).unwrap();
    let e = next(&w);
    assert_eq!(brief(&store, &e), ("a".into(), 2, WatchKind::Resync));
    assert_eq!(value(&e.state), json!({"n": 2}));
    assert_eq!(e.at_ms, 0);
}

#[each_backend]
fn resuming_from_a_version_catches_up_from_the_log() {
    let store = Store::new("since");
    let a = store.agent("a", json!({}));
    for n in 1..=6 {
        a.set_state(format!(r#"{{"n": {n}}}"#).as_bytes()).unwrap();
    }
    let since = HashMap::from([(store.id("a"), 3)]);
    let w = store.watch_ids(&["a"], WatchOptions::default().since(since));
    for version in 4..=6 {
        let e = next(&w);
        assert_eq!(brief(&store, &e), ("a".into(), version, WatchKind::Merge));
        assert_eq!(value(&e.patch), json!({"n": version}));
    }
    assert!(quiet(&w));
}

#[each_backend]
fn resuming_from_a_pruned_version_is_one_resync() {
    let store = Store::new("pruned");
    let a = store.agent("a", json!({"change_log": {"keep_last": 2}}));
    for n in 1..=10 {
        a.set_state(format!(r#"{{"n": {n}}}"#).as_bytes()).unwrap();
    }
    let since = HashMap::from([(store.id("a"), 1)]);
    let w = store.watch_ids(&["a"], WatchOptions::default().since(since));
    let e = next(&w);
    assert_eq!(brief(&store, &e), ("a".into(), 10, WatchKind::Resync));
    assert_eq!(value(&e.state), json!({"n": 10}));
    a.set_state(br#"{"n": 11}"#).unwrap();
    let e = next(&w);
    assert_eq!(brief(&store, &e), ("a".into(), 11, WatchKind::Merge));
}

#[each_backend]
fn a_reader_that_falls_behind_gets_one_resync_and_bounded_memory() {
    let store = Store::new("behind");
    let a = store.agent("a", json!({}));
    let b = store.agent("b", json!({}));
    a.set_state(br#"{"n": 0}"#).unwrap();
    b.set_state(br#"{"n": 0}"#).unwrap();
    let w = store.watch_all(WatchOptions::default().max_pending(5));
    // Unbounded, it tells when the watcher has read a's last change.
    let marker = store.watch_ids(&["a"], WatchOptions::default());
    b.set_state(br#"{"n": 1}"#).unwrap();
    let bound = 5 + 2; // max_pending and a resync per agent
    for n in 1..=40 {
        a.set_state(format!(r#"{{"n": {n}}}"#).as_bytes()).unwrap();
        assert!(
            w.pending() <= bound,
            "queue past its bound: {}",
            w.pending()
        );
    }
    while next(&marker).version < 41 {}
    assert!(
        w.pending() <= bound,
        "queue past its bound: {}",
        w.pending()
    );
    // Read only now: a reader draining while the watcher still delivers may take any number
    // of events in all; what is bounded is what waits at once.
    let mut queued = Vec::new();
    while let Some(e) = w.next(Some(std::time::Duration::from_secs(2))).unwrap() {
        queued.push(e);
    }
    assert!(
        queued.iter().any(|e| e.agent_id == store.id("b")),
        "another agent's events stay"
    );
    let last_a = queued
        .iter()
        .rev()
        .find(|e| e.agent_id == store.id("a"))
        .unwrap();
    // Whatever was dropped, a's copy ends right: the last event of a is a resync or its
    // latest change, and a resync came if any change of a was dropped.
    let a_events: Vec<_> = queued
        .iter()
        .filter(|e| e.agent_id == store.id("a"))
        .collect();
    if a_events.len() < 40 {
        assert!(a_events.iter().any(|e| e.kind == WatchKind::Resync));
    }
    assert_eq!(last_a.version, 41);
    if last_a.kind == WatchKind::Resync {
        assert_eq!(value(&last_a.state), json!({"n": 40}));
    }
}

#[each_backend]
fn a_commit_the_watcher_was_not_told_of_is_caught_by_its_rescan() {
    let store = Store::new("behind_back");
    let a = store.agent("a", json!({}));
    a.set_state(br#"{"n": 1}"#).unwrap();
    // A watch of the store that rescans hourly runs first: the watcher, which the watches of
    // a store share, rescans at the shortest interval of those open, from its next turn.
    let hourly = std::time::Duration::from_secs(3600);
    let _first = store.watch_all(WatchOptions::default().rescan_interval(hourly));
    let rescan = std::time::Duration::from_millis(200);
    let w = store.watch_ids(&["a"], WatchOptions::default().rescan_interval(rescan));
    // Another program's commit: no notice, nothing logged.
    write_behind_the_back(&store.place_of("a"), r#"{"n": 2}"#);
    let e = next(&w);
    assert_eq!(brief(&store, &e), ("a".into(), 2, WatchKind::Resync));
    assert_eq!(value(&e.state), json!({"n": 2}));
}
