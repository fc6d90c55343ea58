//! Pushed changes (open option `watch`): a handle's on_state_changed hooks receive what other
//! handles and processes commit, in commit order and once each, without the program calling
//! `poll`; the store's watcher notices the commits.

use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_state::{Agent, AgentBuilder, Error, OpenOptions, StateChange, StateChangedHook};
use serde_json::{json, Value};
use test_support::{each_backend, opts, TempDir};

use crate::processes::{write_from_another_process, WRITES};
use crate::{Store, PATIENCE};

/// A hook that sends each delivery's version and state to the test.
struct Sent(Mutex<Sender<(u64, Value)>>);

impl StateChangedHook for Sent {
    fn on_state_changed(&self, c: &StateChange) -> Result<(), String> {
        let state = serde_json::from_slice(c.next.json()).unwrap();
        let _ = self.0.lock().unwrap().send((c.version, state));
        Ok(())
    }
}

/// The options of the test's agent `name` opened with `watch`.
fn pushed_options(store: &Store, name: &str, log: Value) -> OpenOptions {
    opts(json!({
        "agent_id": store.id(name),
        "change_log": log,
        "busy_timeout_ms": 30_000,
        "watch": true,
    }))
}

/// The test's agent `name` opened with `watch`, and what its hook receives.
fn pushed(store: &Store, name: &str) -> (Arc<Agent>, Receiver<(u64, Value)>) {
    let options = pushed_options(store, name, json!({"keep_last": 1000}));
    let agent = AgentBuilder::from_options(options)
        .open_shared(&store.location)
        .unwrap();
    let (tx, rx) = channel();
    agent
        .on_state_changed(Arc::new(Sent(Mutex::new(tx))))
        .unwrap();
    (agent, rx)
}

/// The next delivery, which must come.
fn delivered(rx: &Receiver<(u64, Value)>) -> (u64, Value) {
    rx.recv_timeout(PATIENCE)
        .expect("a delivery within the patience")
}

/// True when nothing is delivered for a short while (the watcher notices commits within
/// milliseconds).
fn nothing_more(rx: &Receiver<(u64, Value)>) -> bool {
    rx.recv_timeout(Duration::from_millis(500)).is_err()
}

#[each_backend]
fn another_handles_commits_reach_the_hooks_in_order_once_each_without_poll() {
    let store = Store::new("push_handle");
    let (agent, rx) = pushed(&store, "a");
    let other = store.agent("a", json!({}));
    for n in 1..=5 {
        other
            .set_state(format!(r#"{{"n": {n}}}"#).as_bytes())
            .unwrap();
    }
    for n in 1..=5 {
        assert_eq!(delivered(&rx), (n, json!({"n": n})));
    }
    // The handle's own write is delivered once, when made; the push it causes finds nothing.
    agent.set_state(br#"{"n": 6}"#).unwrap();
    assert_eq!(delivered(&rx), (6, json!({"n": 6})));
    other.set_state(br#"{"n": 7}"#).unwrap();
    assert_eq!(delivered(&rx), (7, json!({"n": 7})));
    assert!(nothing_more(&rx));
}

#[each_backend]
fn another_process_commits_reach_the_hooks_in_order_once_each_without_poll() {
    let store = Store::new("push_process");
    let (_agent, rx) = pushed(&store, "remote");
    write_from_another_process(&store, "remote");
    for n in 1..=WRITES {
        assert_eq!(delivered(&rx), (n, json!({"n": n})));
    }
    assert!(nothing_more(&rx));
}

#[each_backend]
fn pushing_is_refused_without_the_change_log_and_from_a_plain_open() {
    let store = Store::new("push_refused");
    let options = pushed_options(&store, "a", json!(false));
    let Err(e) = AgentBuilder::from_options(options).open_shared(&store.location) else {
        panic!("opened with watch and the change log off");
    };
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains("change_log")),
        "{e}"
    );
    // Agent's builder cannot push to a handle it does not share: refused, not ignored.
    let options = pushed_options(&store, "a", json!({"keep_last": 10}));
    let Err(e) = AgentBuilder::from_options(options.clone()).open(&store.location) else {
        panic!("open (not shared) accepted watch");
    };
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains("open_shared")),
        "{e}"
    );
    let Err(e) = Agent::open_with(&store.location, &options) else {
        panic!("open_with accepted watch");
    };
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains("open_shared_with")),
        "{e}"
    );
    // The shared open of the same options pushes.
    let agent = Agent::open_shared_with(&store.location, &options).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let _guard = agent
        .on_change(move |change| {
            let _ = tx.send(change.version);
        })
        .unwrap();
    store
        .agent("a", json!({}))
        .set_state(br#"{"n": 1}"#)
        .unwrap();
    assert_eq!(rx.recv_timeout(PATIENCE).unwrap(), 1);
}

#[each_backend]
fn closing_or_dropping_the_handle_stops_the_pushes() {
    let store = Store::new("push_close");
    let (agent, rx) = pushed(&store, "a");
    let other = store.agent("a", json!({}));
    other.set_state(br#"{"n": 1}"#).unwrap();
    assert_eq!(delivered(&rx), (1, json!({"n": 1})));
    agent.close().unwrap();
    other.set_state(br#"{"n": 2}"#).unwrap();
    assert!(nothing_more(&rx));

    let (agent, rx) = pushed(&store, "a");
    drop(agent);
    other.set_state(br#"{"n": 3}"#).unwrap();
    assert!(nothing_more(&rx));
}

/// A SQLite file's single agent (opened without agent_id) is pushed to like a named one.
#[test]
fn a_files_single_agent_is_pushed_to() {
    let dir = TempDir::new("push_single");
    let path = dir.file("single.db");
    let options = json!({"change_log": {"keep_last": 100}, "busy_timeout_ms": 30_000});
    let agent = AgentBuilder::from_options(opts(options.clone()))
        .watch(true)
        .open_shared(&path)
        .unwrap();
    let (tx, rx) = channel();
    agent
        .on_state_changed(Arc::new(Sent(Mutex::new(tx))))
        .unwrap();
    let other = Agent::open_with(&path, &opts(options)).unwrap();
    other.set_state(br#"{"n": 1}"#).unwrap();
    other.set_state(br#"{"n": 2}"#).unwrap();
    assert_eq!(delivered(&rx), (1, json!({"n": 1})));
    assert_eq!(delivered(&rx), (2, json!({"n": 2})));
    assert!(nothing_more(&rx));
}
