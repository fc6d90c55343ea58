//! Ported from tests/agent.rs: persistence, initial state, hooks, concurrency, on PostgreSQL
//! (the tests of SQLite files themselves are left out).
#![allow(unused_imports, dead_code)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use agent_state::{Agent, Error, InitialStateHook, OpenOptions, StateChange, StateChangedHook};
use serde_json::{json, Value};

use super::shim::{pg_open, TempDir};
use crate::common::{opts, text};

#[test]
fn reference_page_flow_and_persistence() {
    crate::server_or_skip!();
    let dir = TempDir::new("flow");
    let path = dir.file("conv.db");
    let o = opts(json!({"initial_state": {"status": "idle", "lastReply": "", "at": 0}}));
    {
        let a = pg_open(&path, &o).unwrap();
        assert_eq!(
            text(&a.get_state().unwrap()),
            r#"{"status":"idle","lastReply":"","at":0}"#
        );
        let s = a.set_state(br#"{"status":"processing"}"#).unwrap();
        assert_eq!(text(&s), r#"{"status":"processing","lastReply":"","at":0}"#);
        let s = a
            .set_state(br#"{"status":"idle","at":1764471600123}"#)
            .unwrap();
        assert_eq!(
            text(&s),
            r#"{"status":"idle","lastReply":"","at":1764471600123}"#
        );
        a.close().unwrap();
        assert_eq!(a.get_state().unwrap_err(), Error::Closed);
    }
    let a = pg_open(&path, &OpenOptions::default()).unwrap();
    assert_eq!(
        text(&a.get_state().unwrap()),
        r#"{"status":"idle","lastReply":"","at":1764471600123}"#
    );
    let s = a.replace_state(br#"{"fresh":true}"#).unwrap();
    assert_eq!(text(&s), r#"{"fresh":true}"#);
}

#[test]
fn reading_never_persists_the_default() {
    crate::server_or_skip!();
    let dir = TempDir::new("default");
    let path = dir.file("a.db");
    let a = pg_open(&path, &opts(json!({"initial_state": {"v": 1}}))).unwrap();
    assert_eq!(text(&a.get_state().unwrap()), r#"{"v":1}"#);
    a.close().unwrap();
    let b = pg_open(&path, &opts(json!({"initial_state": {"v": 2}}))).unwrap();
    assert_eq!(text(&b.get_state().unwrap()), r#"{"v":2}"#);
    // The first write persists initial state merged with the patch.
    assert_eq!(
        text(&b.set_state(br#"{"w":3}"#).unwrap()),
        r#"{"v":2,"w":3}"#
    );
    b.close().unwrap();
    let c = pg_open(&path, &opts(json!({"initial_state": {"v": 9}}))).unwrap();
    assert_eq!(text(&c.get_state().unwrap()), r#"{"v":2,"w":3}"#);
}

#[test]
fn failed_writes_change_nothing() {
    crate::server_or_skip!();
    let dir = TempDir::new("failed");
    let path = dir.file("a.db");
    let a = pg_open(&path, &opts(json!({"max_value_bytes": 64}))).unwrap();
    a.set_state(br#"{"keep":1}"#).unwrap();
    let big = format!(r#"{{"s":"{}"}}"#, "x".repeat(60));
    assert!(matches!(
        a.set_state(big.as_bytes()),
        Err(Error::TooLarge(_))
    ));
    assert!(matches!(a.set_state(b"{\"a\":"), Err(Error::Json(_))));
    assert!(matches!(
        a.set_state(br#"{"a":1,"a":2}"#),
        Err(Error::Codec(_))
    ));
    assert!(matches!(
        a.set_state(br#"{"d":{"$date":"yesterday"}}"#),
        Err(Error::Codec(_))
    ));
    assert!(matches!(
        a.set_state(b"[1]"),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        a.replace_state(br#"{"$set":[1]}"#),
        Err(Error::InvalidArgument(_))
    ));
    // A merge that would leave the top level shaped like a tagged value.
    a.replace_state(br#"{"$bigint":"5","x":1}"#).unwrap();
    assert!(matches!(
        a.set_state(br#"{"x":null}"#),
        Err(Error::Codec(_))
    ));
    a.close().unwrap();
    let b = pg_open(&path, &OpenOptions::default()).unwrap();
    assert_eq!(text(&b.get_state().unwrap()), r#"{"$bigint":"5","x":1}"#);
}

/// Records every delivery; checks prev/next chaining.
#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<(String, String, Option<String>)>>,
}

impl StateChangedHook for Recorder {
    fn on_state_changed(&self, c: &StateChange) -> Result<(), String> {
        self.seen.lock().unwrap().push((
            text(&c.next),
            text(&c.prev),
            c.patch
                .as_ref()
                .map(|p| String::from_utf8(p.json().to_vec()).unwrap()),
        ));
        Ok(())
    }
}

#[test]
fn hooks_see_next_prev_patch_and_can_fail_after_commit() {
    crate::server_or_skip!();
    let dir = TempDir::new("hooks");
    let a = pg_open(&dir.file("a.db"), &opts(json!({"initial_state": {"n": 0}}))).unwrap();
    let rec = Arc::new(Recorder::default());
    let id = a.on_state_changed(rec.clone()).unwrap();
    a.set_state(br#"{"n":1}"#).unwrap();
    a.replace_state(br#"{"m":2}"#).unwrap();
    assert_eq!(
        *rec.seen.lock().unwrap(),
        vec![
            (
                r#"{"n":1}"#.into(),
                r#"{"n":0}"#.into(),
                Some(r#"{"n":1}"#.into())
            ),
            (r#"{"m":2}"#.into(), r#"{"n":1}"#.into(), None),
        ]
    );
    struct Fails;
    impl StateChangedHook for Fails {
        fn on_state_changed(&self, _: &StateChange) -> Result<(), String> {
            Err("nope".into())
        }
    }
    let fid = a.on_state_changed(Arc::new(Fails)).unwrap();
    assert!(matches!(a.set_state(br#"{"m":3}"#), Err(Error::Hook(_))));
    assert_eq!(
        text(&a.get_state().unwrap()),
        r#"{"m":3}"#,
        "committed anyway"
    );
    a.remove_hook(fid).unwrap();
    a.remove_hook(id).unwrap();
    assert!(matches!(a.remove_hook(id), Err(Error::InvalidArgument(_))));
    a.set_state(br#"{"m":4}"#).unwrap();
    assert_eq!(rec.seen.lock().unwrap().len(), 3);
}

/// A hook that writes again from inside itself, once.
struct Echo {
    agent: Mutex<Option<Arc<Agent>>>,
    log: Mutex<Vec<String>>,
}

impl StateChangedHook for Echo {
    fn on_state_changed(&self, c: &StateChange) -> Result<(), String> {
        let next = text(&c.next);
        self.log.lock().unwrap().push(next.clone());
        let agent = self.agent.lock().unwrap().clone();
        if let Some(agent) = agent {
            if next == r#"{"step":1}"# {
                // Nested change: committed now, delivered after this hook returns.
                let s = agent
                    .set_state(br#"{"step":2}"#)
                    .map_err(|e| e.to_string())?;
                assert_eq!(text(&s), r#"{"step":2}"#);
                self.log.lock().unwrap().push("nested returned".into());
            }
        }
        Ok(())
    }
}

#[test]
fn nested_changes_from_a_hook_are_delivered_after_it_returns() {
    crate::server_or_skip!();
    let dir = TempDir::new("nested");
    let a = Arc::new(pg_open(&dir.file("a.db"), &OpenOptions::default()).unwrap());
    let echo = Arc::new(Echo {
        agent: Mutex::new(Some(a.clone())),
        log: Mutex::new(Vec::new()),
    });
    a.on_state_changed(echo.clone()).unwrap();
    a.set_state(br#"{"step":1}"#).unwrap();
    assert_eq!(
        *echo.log.lock().unwrap(),
        vec![
            r#"{"step":1}"#.to_string(),
            "nested returned".to_string(),
            r#"{"step":2}"#.to_string()
        ]
    );
    *echo.agent.lock().unwrap() = None; // break the cycle
    a.close().unwrap();
}

#[test]
fn closing_from_inside_a_hook_is_safe() {
    crate::server_or_skip!();
    struct Closer(Mutex<Option<Arc<Agent>>>);
    impl StateChangedHook for Closer {
        fn on_state_changed(&self, _: &StateChange) -> Result<(), String> {
            if let Some(a) = self.0.lock().unwrap().take() {
                a.close().map_err(|e| e.to_string())?;
                assert_eq!(a.get_state().unwrap_err(), Error::Closed);
            }
            Ok(())
        }
    }
    let dir = TempDir::new("closer");
    let a = Arc::new(pg_open(&dir.file("a.db"), &OpenOptions::default()).unwrap());
    a.on_state_changed(Arc::new(Closer(Mutex::new(Some(a.clone())))))
        .unwrap();
    a.set_state(br#"{"x":1}"#).unwrap();
    assert_eq!(a.set_state(br#"{"x":2}"#).unwrap_err(), Error::Closed);
}

#[test]
fn initial_state_hook_is_called_each_time_and_cannot_reenter() {
    crate::server_or_skip!();
    struct Counter {
        calls: AtomicUsize,
        agent: Mutex<Option<Arc<Agent>>>,
        reentry: Mutex<Option<Error>>,
    }
    impl InitialStateHook for Counter {
        fn initial_state(&self) -> Result<Vec<u8>, String> {
            let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
            if let Some(a) = self.agent.lock().unwrap().clone() {
                *self.reentry.lock().unwrap() = a.get_state().err();
            }
            Ok(format!(r#"{{"calls":{n}}}"#).into_bytes())
        }
    }
    let dir = TempDir::new("initial");
    let a = Arc::new(
        pg_open(
            &dir.file("a.db"),
            &opts(json!({"initial_state": {"opt": 1}})),
        )
        .unwrap(),
    );
    let hook = Arc::new(Counter {
        calls: AtomicUsize::new(0),
        agent: Mutex::new(None),
        reentry: Mutex::new(None),
    });
    a.set_initial_state_hook(Some(hook.clone())).unwrap();
    assert_eq!(text(&a.get_state().unwrap()), r#"{"calls":1}"#);
    assert_eq!(text(&a.get_state().unwrap()), r#"{"calls":2}"#);
    *hook.agent.lock().unwrap() = Some(a.clone());
    a.get_state().unwrap();
    assert!(matches!(
        *hook.reentry.lock().unwrap(),
        Some(Error::Busy(_))
    ));
    *hook.agent.lock().unwrap() = None;
    assert_eq!(
        text(&a.set_state(br#"{"x":1}"#).unwrap()),
        r#"{"calls":4,"x":1}"#
    );
    // Stored now: the hook is not consulted any more.
    a.get_state().unwrap();
    assert_eq!(hook.calls.load(Ordering::SeqCst), 4);
    a.set_initial_state_hook(None).unwrap();
}

#[test]
fn threads_on_one_agent_lose_nothing_and_hooks_chain_in_commit_order() {
    crate::server_or_skip!();
    const THREADS: usize = 8;
    const EACH: usize = 150;
    let dir = TempDir::new("threads");
    let a = Arc::new(pg_open(&dir.file("a.db"), &opts(json!({"synchronous": "normal"}))).unwrap());
    let rec = Arc::new(Recorder::default());
    a.on_state_changed(rec.clone()).unwrap();
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let a = a.clone();
            std::thread::spawn(move || {
                for n in 1..=EACH {
                    a.set_state(format!(r#"{{"t{t}":{n}}}"#).as_bytes())
                        .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let state: Value = serde_json::from_slice(a.get_state().unwrap().json()).unwrap();
    for t in 0..THREADS {
        assert_eq!(state[format!("t{t}")], json!(EACH));
    }
    let seen = rec.seen.lock().unwrap();
    assert_eq!(seen.len(), THREADS * EACH);
    assert_eq!(seen[0].1, "{}");
    for pair in seen.windows(2) {
        assert_eq!(
            pair[1].1, pair[0].0,
            "prev of a delivery is next of the one before"
        );
    }
}

#[test]
fn two_handles_on_one_file_see_each_others_commits() {
    crate::server_or_skip!();
    let dir = TempDir::new("two");
    let path = dir.file("a.db");
    let a = Arc::new(pg_open(&path, &opts(json!({"synchronous": "normal"}))).unwrap());
    let b = Arc::new(pg_open(&path, &opts(json!({"synchronous": "normal"}))).unwrap());
    a.set_state(br#"{"a":1}"#).unwrap();
    assert_eq!(text(&b.get_state().unwrap()), r#"{"a":1}"#);
    b.set_state(br#"{"b":1}"#).unwrap();
    assert_eq!(text(&a.get_state().unwrap()), r#"{"a":1,"b":1}"#);
    let writers: Vec<_> = [(a.clone(), "a"), (b.clone(), "b")]
        .into_iter()
        .map(|(agent, key)| {
            std::thread::spawn(move || {
                for n in 2..=300 {
                    agent
                        .set_state(format!(r#"{{"{key}":{n}}}"#).as_bytes())
                        .unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let expect = r#"{"a":300,"b":300}"#;
    assert_eq!(text(&a.get_state().unwrap()), expect);
    assert_eq!(text(&b.get_state().unwrap()), expect);
}

#[test]
fn snapshots_outlive_changes_and_close() {
    crate::server_or_skip!();
    let dir = TempDir::new("snap");
    let a = pg_open(&dir.file("a.db"), &OpenOptions::default()).unwrap();
    a.set_state(br#"{"v":1}"#).unwrap();
    let old = a.get_state().unwrap();
    a.set_state(br#"{"v":2}"#).unwrap();
    a.close().unwrap();
    assert_eq!(text(&old), r#"{"v":1}"#);
    assert_eq!(*old.json_with_nul().last().unwrap(), 0);
}
