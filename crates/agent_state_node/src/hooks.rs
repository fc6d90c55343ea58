//! The core's hooks as the addon serves them to JavaScript:
//! - [`ChangeQueue`]: committed changes are queued (on the writing pool thread, in commit order,
//!   as the core delivers them) and taken by the package on the JavaScript thread, which calls
//!   `onStateChanged` there, awaiting each in turn.
//! - [`InitialSource`]: the initial state's text, which the package refreshes from
//!   `initialState()` before a write that may need it.
//! - [`Validate`]: the validator, a JavaScript function called on the JavaScript thread while the
//!   pool thread that writes waits for its answer inside the write's transaction.
//! - [`Step`]: a schema step of code, a JavaScript function called the same way (on the
//!   JavaScript thread, the pool thread that migrates waiting inside the transaction).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Mutex};

use agent_state::{
    ChangeKind, InitialStateHook, SchemaStep, Snapshot, StateChange, StateChangedHook, Validator,
};
use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;

/// One committed change as JavaScript takes it: JSON texts, `patch` null for a replacement or
/// a migration (a JSON Patch's is the array of its operations); `kind` `"merge"`,
/// `"json_patch"`, `"replace"` or `"migration"`; `schema` the schema version of
/// `next`; `migrated_from` the version a migration upgraded from (else null).
#[napi(object)]
pub struct PendingChange {
    pub version: f64,
    pub next: String,
    pub prev: String,
    pub patch: Option<String>,
    pub kind: String,
    pub schema: u32,
    pub migrated_from: Option<u32>,
}

struct Queued {
    version: u64,
    next: std::sync::Arc<agent_state::Snapshot>,
    prev: std::sync::Arc<agent_state::Snapshot>,
    patch: Option<Vec<u8>>,
    kind: ChangeKind,
    schema: u32,
}

/// A wake-up the package passes: called on the JavaScript thread (with a number it ignores)
/// when something it waits for happened on another thread. Weak: it does not keep the process
/// alive.
pub type JsWake = ThreadsafeFunction<u32, (), u32, Status, false, true>;

/// Changes committed through the handle, waiting for the JavaScript thread.
#[derive(Default)]
pub struct ChangeQueue {
    queue: Mutex<Vec<Queued>>,
    /// With the open option `watch`, the store's watcher delivers other handles' changes on its
    /// own thread, when no call of the package will take them: this wakes the package then.
    wake: Mutex<Option<JsWake>>,
    /// A wake-up is on its way and the queue not taken since: no need for another.
    woken: AtomicBool,
}

fn text(bytes: &[u8]) -> Result<String> {
    String::from_utf8(bytes.to_vec()).map_err(|_| Error::from_reason("a change is not UTF-8"))
}

impl ChangeQueue {
    /// Wakes the package through `wake` whenever changes are queued (the open option `watch`).
    pub fn set_wake(&self, wake: JsWake) {
        *self.wake.lock().unwrap_or_else(|p| p.into_inner()) = Some(wake);
    }

    pub fn take(&self) -> Result<Vec<PendingChange>> {
        // Before taking: a change queued after this wakes the package again.
        self.woken.store(false, Ordering::SeqCst);
        let taken = std::mem::take(&mut *self.queue.lock().unwrap_or_else(|p| p.into_inner()));
        taken
            .into_iter()
            .map(|q| {
                Ok(PendingChange {
                    version: q.version as f64,
                    next: text(q.next.json())?,
                    prev: text(q.prev.json())?,
                    patch: q.patch.as_deref().map(text).transpose()?,
                    kind: q.kind.name().to_string(),
                    schema: q.schema,
                    migrated_from: match q.kind {
                        ChangeKind::Migration { from } => Some(from),
                        _ => None,
                    },
                })
            })
            .collect()
    }
}

impl StateChangedHook for ChangeQueue {
    fn on_state_changed(&self, change: &StateChange) -> std::result::Result<(), String> {
        self.queue
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Queued {
                version: change.version,
                next: change.next.clone(),
                prev: change.prev.clone(),
                patch: change.patch.as_ref().map(|p| p.json().to_vec()),
                kind: change.kind,
                schema: change.schema,
            });
        if !self.woken.swap(true, Ordering::SeqCst) {
            if let Some(wake) = &*self.wake.lock().unwrap_or_else(|p| p.into_inner()) {
                // Non-blocking: refused only while Node exits, when nobody waits any more.
                let _ = wake.call(0, ThreadsafeFunctionCallMode::NonBlocking);
            }
        }
        Ok(())
    }
}

/// The initial state's JSON text, as `initialState()` last gave it.
pub struct InitialSource {
    text: Mutex<Vec<u8>>,
}

impl InitialSource {
    pub fn new(text: Vec<u8>) -> Self {
        InitialSource {
            text: Mutex::new(text),
        }
    }
    pub fn set(&self, text: Vec<u8>) {
        *self.text.lock().unwrap_or_else(|p| p.into_inner()) = text;
    }
}

impl InitialStateHook for InitialSource {
    fn initial_state(&self) -> std::result::Result<Vec<u8>, String> {
        Ok(self.text.lock().unwrap_or_else(|p| p.into_inner()).clone())
    }
}

/// `(next, prev, patch, version, kind)`: JSON texts (patch null for a replacement; a JSON
/// Patch's operations as an array), the version the change would commit, and the change's kind
/// (`"merge"`, `"json_patch"`, `"replace"`, `"migration"`).
type ValidatorArgs = (String, String, Option<String>, f64, String);

/// The validator as the package passes it: called on the JavaScript thread, answering `""` (let
/// it commit) or the reason to reject.
pub type JsValidator =
    ThreadsafeFunction<ValidatorArgs, String, ValidatorArgs, Status, false, true>;

pub struct Validate {
    function: JsValidator,
}

impl Validate {
    pub fn new(function: JsValidator) -> Self {
        Validate { function }
    }
}

impl Validator for Validate {
    fn validate(&self, change: &StateChange) -> std::result::Result<(), String> {
        let args = (
            text(change.next.json()).map_err(|e| e.reason.clone())?,
            text(change.prev.json()).map_err(|e| e.reason.clone())?,
            change
                .patch
                .as_ref()
                .map(|p| text(p.json()))
                .transpose()
                .map_err(|e| e.reason.clone())?,
            change.version as f64,
            change.kind.name().to_string(),
        );
        let (send, receive) = mpsc::channel::<std::result::Result<String, String>>();
        let status = self.function.call_with_return_value(
            args,
            ThreadsafeFunctionCallMode::Blocking,
            move |answer: Result<String>, _env| {
                let _ = send.send(answer.map_err(|e| e.reason.clone()));
                Ok(())
            },
        );
        if status != Status::Ok {
            return Err(format!(
                "the validator could not be called on the JavaScript thread ({status}); the \
                 change was not written"
            ));
        }
        match receive.recv() {
            Ok(Ok(reason)) if reason.is_empty() => Ok(()),
            Ok(Ok(reason)) => Err(reason),
            Ok(Err(error)) => Err(format!("the validator failed: {error}")),
            Err(_) => Err(
                "the validator did not answer (Node is exiting); the change was not written"
                    .to_string(),
            ),
        }
    }
}

/// `(state, from)`: the state's JSON text as stored under schema version `from`.
type StepArgs = (String, u32);

/// What a JavaScript schema step answers: the upgraded state's JSON text, or why it failed.
#[napi(object)]
pub struct StepAnswer {
    pub state: Option<String>,
    pub error: Option<String>,
}

/// A schema step of code as the package passes it: called on the JavaScript thread with
/// `[state, from]`, answering a [`StepAnswer`].
pub type JsStep = ThreadsafeFunction<StepArgs, StepAnswer, StepArgs, Status, false, true>;

pub struct Step {
    function: JsStep,
}

impl Step {
    pub fn new(function: JsStep) -> Self {
        Step { function }
    }
}

impl SchemaStep for Step {
    fn upgrade(&self, from: u32, state: &Snapshot) -> std::result::Result<Vec<u8>, String> {
        let args = (text(state.json()).map_err(|e| e.reason.clone())?, from);
        let (send, receive) = mpsc::channel::<std::result::Result<StepAnswer, String>>();
        let status = self.function.call_with_return_value(
            args,
            ThreadsafeFunctionCallMode::Blocking,
            move |answer: Result<StepAnswer>, _env| {
                let _ = send.send(answer.map_err(|e| e.reason.clone()));
                Ok(())
            },
        );
        if status != Status::Ok {
            return Err(format!(
                "the step could not be called on the JavaScript thread ({status})"
            ));
        }
        match receive.recv() {
            Ok(Ok(StepAnswer {
                state: Some(state), ..
            })) => Ok(state.into_bytes()),
            Ok(Ok(StepAnswer {
                error: Some(error), ..
            })) => Err(error),
            Ok(Ok(_)) => Err("the step answered nothing".to_string()),
            Ok(Err(error)) => Err(error),
            Err(_) => Err("the step did not answer (Node is exiting)".to_string()),
        }
    }
}
