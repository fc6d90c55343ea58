//! The change log across handles and pools.

use std::sync::{Arc, Mutex};

use agent_state::{Error, StateChange, StateChangedHook};
use serde_json::{json, Value};
use test_support::text;

use crate::{admin, open, server_or_skip, unique, with_param};

#[derive(Default)]
struct Seen(Mutex<Vec<(u64, String, String)>>);

impl StateChangedHook for Seen {
    fn on_state_changed(&self, c: &StateChange) -> Result<(), String> {
        self.0
            .lock()
            .unwrap()
            .push((c.version, text(&c.prev), text(&c.next)));
        Ok(())
    }
}

#[test]
fn poll_delivers_changes_made_through_another_pool() {
    let uri = server_or_skip!();
    let id = unique("poll");
    let a = open(&uri, &id, json!({"change_log": {"keep_last": 10}})).unwrap();
    // Another URI string: another pool, as another process would have.
    let b = open(&with_param(&uri, "application_name=poller"), &id, json!({})).unwrap();
    let seen = Arc::new(Seen::default());
    a.on_state_changed(seen.clone()).unwrap();
    b.set_state(br#"{"x":1}"#).unwrap();
    b.set_state(br#"{"y":2}"#).unwrap();
    assert_eq!(a.poll().unwrap(), 2);
    assert_eq!(
        *seen.0.lock().unwrap(),
        vec![
            (1, "{}".into(), r#"{"x":1}"#.into()),
            (2, r#"{"x":1}"#.into(), r#"{"x":1,"y":2}"#.into())
        ]
    );
    let since: Value = serde_json::from_slice(&a.changes_since(0).unwrap()).unwrap();
    assert_eq!(since.as_array().unwrap().len(), 2);
    assert_eq!(text(&a.state_at(1).unwrap()), r#"{"x":1}"#);
}

#[test]
fn a_handle_that_saw_the_log_off_still_logs_once_another_switched_it_on() {
    let uri = server_or_skip!();
    let id = unique("switch");
    let a = open(&uri, &id, json!({})).unwrap();
    a.set_state(br#"{"n":1}"#).unwrap(); // a's cache: version 1, log off
    let b = open(&uri, &id, json!({"change_log": {"keep_last": 5}})).unwrap();
    a.set_state(br#"{"n":2}"#).unwrap(); // must not commit unlogged
    let since: Value = serde_json::from_slice(&b.changes_since(1).unwrap()).unwrap();
    assert_eq!(since[0]["version"], json!(2));
    assert_eq!(since[0]["next"], json!({"n": 2}));
    // Switching it off drops the agent's log rows, and only its own.
    let other = unique("switch-other");
    let c = open(&uri, &other, json!({"change_log": {"keep_last": 5}})).unwrap();
    c.set_state(br#"{"o":1}"#).unwrap();
    let _off = open(&uri, &id, json!({"change_log": false})).unwrap();
    let mut adm = admin(&uri);
    let count = |adm: &mut postgres::Client, agent: &str| -> i64 {
        adm.query_one(
            "SELECT count(*) FROM agent_changes WHERE agent = $1",
            &[&agent],
        )
        .unwrap()
        .get(0)
    };
    assert_eq!(count(&mut adm, &id), 0);
    assert_eq!(count(&mut adm, &other), 1);
    assert!(matches!(a.poll(), Err(Error::InvalidArgument(_))));
}

#[test]
fn keep_seconds_prunes_old_entries_but_never_the_newest() {
    let uri = server_or_skip!();
    let id = unique("seconds");
    let a = open(&uri, &id, json!({"change_log": {"keep_seconds": 1}})).unwrap();
    a.set_state(br#"{"n":1}"#).unwrap();
    a.set_state(br#"{"n":2}"#).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1100));
    a.set_state(br#"{"n":3}"#).unwrap();
    let versions: Vec<i64> = admin(&uri)
        .query(
            "SELECT version FROM agent_changes WHERE agent = $1 ORDER BY version",
            &[&id],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(versions, vec![3]);
    assert!(matches!(a.changes_since(1), Err(Error::Gap { .. })));
}
