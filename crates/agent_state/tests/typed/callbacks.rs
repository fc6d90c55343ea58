//! Hooks, the validator and the initial state as closures.

use std::sync::{Arc, Mutex};

use agent_state::{Error, OpenOptions};
use serde::{Deserialize, Serialize};
use serde_json::json;
use test_support::{each_backend, open, TempDir};

#[derive(Serialize, Deserialize, Debug, PartialEq, Clone)]
struct Conv {
    status: String,
    at: u64,
}

fn conv(status: &str, at: u64) -> Conv {
    Conv {
        status: status.into(),
        at,
    }
}

#[each_backend]
fn a_closure_hook_sees_each_commit_until_its_guard_drops() {
    let dir = TempDir::new("closure_hook");
    let agent = open(&dir.store("a"), &OpenOptions::default()).unwrap();
    agent.initial_state_with(|| conv("idle", 0)).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let typed = agent
        .on_change_as(move |next: &Conv, prev: &Conv| {
            log.lock().unwrap().push((prev.clone(), next.clone()));
        })
        .unwrap();
    let versions = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&versions);
    let raw = agent
        .on_change(move |change| log.lock().unwrap().push(change.version))
        .unwrap();
    agent.set(&json!({"status": "processing"})).unwrap();
    agent.set(&json!({"status": "idle", "at": 5})).unwrap();
    drop(typed);
    agent.set(&json!({"at": 6})).unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        [
            (conv("idle", 0), conv("processing", 0)),
            (conv("processing", 0), conv("idle", 5))
        ],
        "in commit order, prev chaining to next, none after the guard dropped"
    );
    // The other guard is still there; keep() lets it live on without a guard.
    let id = raw.keep();
    agent.set(&json!({"at": 7})).unwrap();
    assert_eq!(*versions.lock().unwrap(), [1, 2, 3, 4]);
    agent.remove_hook(id).unwrap();
    agent.set(&json!({"at": 8})).unwrap();
    assert_eq!(versions.lock().unwrap().len(), 4);
}

#[each_backend]
fn a_failing_or_misfit_hook_is_reported_after_the_commit() {
    let dir = TempDir::new("closure_hook_fails");
    let agent = open(&dir.store("a"), &OpenOptions::default()).unwrap();
    let _failing = agent.try_on_change(|_| Err("no thanks".into())).unwrap();
    let e = agent.set(&json!({"status": "x", "at": 1})).unwrap_err();
    assert!(
        matches!(&e, Error::Hook(m) if m.contains("no thanks")),
        "{e:?}"
    );
    drop(_failing);
    // A hook whose type the state does not fit.
    let _misfit = agent.on_change_as(|_: &Conv, _: &Conv| ()).unwrap();
    let e = agent.set(&json!({"at": "not a number"})).unwrap_err();
    assert!(matches!(e, Error::Hook(_)), "{e:?}");
    assert_eq!(
        agent.get_state_versioned().unwrap().version,
        2,
        "both committed"
    );
}

#[each_backend]
fn closure_validators_reject_with_nothing_written() {
    let dir = TempDir::new("closure_validator");
    let agent = open(&dir.store("a"), &OpenOptions::default()).unwrap();
    agent
        .validate_as(|next: &Conv| match next.status.as_str() {
            "" => Err("status is empty".into()),
            _ => Ok(()),
        })
        .unwrap();
    agent.replace(&conv("idle", 1)).unwrap();
    let e = agent.set(&json!({"status": ""})).unwrap_err();
    assert!(
        matches!(&e, Error::Rejected(m) if m.contains("status is empty")),
        "{e:?}"
    );
    let e = agent.set(&json!({"at": -1})).unwrap_err();
    assert!(
        matches!(e, Error::Rejected(_)),
        "misfit states are rejected: {e:?}"
    );
    agent
        .validate_with(|change| match change.version {
            3.. => Err("two changes are enough".into()),
            _ => Ok(()),
        })
        .unwrap();
    agent.set(&json!({"at": 2})).unwrap();
    assert!(matches!(
        agent.set(&json!({"at": 3})),
        Err(Error::Rejected(_))
    ));
    agent.set_validator(None).unwrap();
    agent.set(&json!({"at": 3})).unwrap();
    assert_eq!(agent.get::<Conv>().unwrap(), conv("idle", 3));
}

#[each_backend]
fn a_guard_outliving_its_agent_does_nothing() {
    let dir = TempDir::new("closure_guard_outlives");
    let agent = open(&dir.store("a"), &OpenOptions::default()).unwrap();
    let guard = agent.on_change(|_| ()).unwrap();
    agent.close().unwrap();
    drop(guard);
    let agent = open(&dir.store("b"), &OpenOptions::default()).unwrap();
    let guard = agent.on_change(|_| ()).unwrap();
    drop(agent);
    drop(guard);
}
