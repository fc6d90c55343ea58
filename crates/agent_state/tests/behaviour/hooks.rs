//! Hooks through the safe Rust API: what `on_state_changed` hooks see, in which order, what a
//! hook may do (write, close, fail after the commit), and the initial-state hook. On either
//! backend (`#[each_backend]`, crates/test-support).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use agent_state::{Agent, Error, InitialStateHook, OpenOptions, StateChange, StateChangedHook};
use serde_json::json;

use test_support::{each_backend, open, opts, text, Recorder, TempDir};

#[each_backend]
fn hooks_see_next_prev_patch_and_can_fail_after_commit() {
    let dir = TempDir::new("hooks");
    let a = open(
        &dir.store("a.db"),
        &opts(json!({"initial_state": {"n": 0}})),
    )
    .unwrap();
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

#[each_backend]
fn nested_changes_from_a_hook_are_delivered_after_it_returns() {
    let dir = TempDir::new("nested");
    let a = Arc::new(open(&dir.store("a.db"), &OpenOptions::default()).unwrap());
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

#[each_backend]
fn closing_from_inside_a_hook_is_safe() {
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
    let a = Arc::new(open(&dir.store("a.db"), &OpenOptions::default()).unwrap());
    a.on_state_changed(Arc::new(Closer(Mutex::new(Some(a.clone())))))
        .unwrap();
    a.set_state(br#"{"x":1}"#).unwrap();
    assert_eq!(a.set_state(br#"{"x":2}"#).unwrap_err(), Error::Closed);
}

#[each_backend]
fn initial_state_hook_is_called_each_time_and_cannot_reenter() {
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
        open(
            &dir.store("a.db"),
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
