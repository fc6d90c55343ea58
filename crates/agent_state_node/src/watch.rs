//! `NativeWatch`: the core's [`Watch`] (changes of a store's agents, committed by any process) as
//! the package's `watch()` holds it.
//!
//! The events stay in the core's queue, bounded by `max_pending` (an agent whose reader fell
//! behind is dropped from it and resynced), until the JavaScript thread takes them, at most a
//! batch at a time and only while its consumer asks for more ([`NativeWatch::take`]): a slow
//! consumer costs no memory beyond that bound. When the queue is empty, `take` arms the watch,
//! and the addon's watches' thread ([`crate::ready`]) wakes the JavaScript thread through a
//! thread-safe function when the core signals the next event. The thread-safe function is
//! weak: a watch keeps the process alive only while the package says a consumer waits.
//!
//! Thread-safety: a `NativeWatch` is used from the JavaScript thread that made it; the core watch
//! inside is shared with the library's worker threads (open, add, remove, close run there) and
//! the watches' thread (which only wakes).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use agent_state::watch::{Selector, Watch, WatchEvent, WatchKind, WatchOptions};
use agent_state::OpenOptions;
use napi::bindgen_prelude::*;
use napi::threadsafe_function::ThreadsafeFunctionCallMode;
use napi_derive::napi;

use crate::cancel::{token, CancelToken};
use crate::error::{guarded, invalid, to_napi, IntoNapi};
use crate::hooks::JsWake;
use crate::ready::{register, Registration, Wake};
use crate::store::count;
use crate::task::spawn;

/// What the package asks of a watch, checked by the package first (the core checks again):
/// exactly one of `ids` and `prefix` (neither: every agent); `since` the resume points;
/// `max_pending`, `poll_interval_ms` and `rescan_interval_ms` positive when given.
#[napi(object)]
pub struct WatchSpec {
    pub ids: Option<Vec<String>>,
    pub prefix: Option<String>,
    pub since: Option<HashMap<String, f64>>,
    pub states: Option<bool>,
    pub max_pending: Option<f64>,
    pub poll_interval_ms: Option<f64>,
    pub rescan_interval_ms: Option<f64>,
}

/// One change as JavaScript takes it: `patch` and `state` the storage codec's JSON texts (null
/// where the event has none), `kind` the core's name of it, `migrated_from` set for a
/// migration, `at_ms` 0 when unknown (a resync).
#[napi(object)]
pub struct WatchChange {
    pub agent_id: String,
    pub version: f64,
    pub kind: String,
    pub migrated_from: Option<u32>,
    pub patch: Option<String>,
    pub state: Option<String>,
    pub schema: u32,
    pub at_ms: f64,
}

fn change(event: WatchEvent) -> WatchChange {
    WatchChange {
        migrated_from: match event.kind {
            WatchKind::Migration { from } => Some(from),
            _ => None,
        },
        kind: event.kind.name().to_string(),
        version: event.version as f64,
        patch: event.patch.as_deref().map(str::to_string),
        state: event.state.as_deref().map(str::to_string),
        schema: event.schema,
        at_ms: event.at_ms as f64,
        agent_id: event.agent_id,
    }
}

fn whole(what: &str, value: f64) -> Result<u64> {
    count(what, value).map(|n| n as u64)
}

fn millis(what: &str, value: f64) -> Result<Duration> {
    match whole(what, value)? {
        0 => Err(invalid(format!("{what} must be at least 1 millisecond"))),
        ms => Ok(Duration::from_millis(ms)),
    }
}

fn selector(spec: &mut WatchSpec) -> Result<Selector> {
    match (spec.ids.take(), spec.prefix.take()) {
        (Some(_), Some(_)) => Err(invalid(
            "a watch takes ids or prefix, not both (neither: every agent of the store)",
        )),
        (Some(ids), None) => Ok(Selector::Ids(ids)),
        (None, prefix) => Ok(Selector::Prefix(prefix.unwrap_or_default())),
    }
}

fn watch_options(spec: &WatchSpec) -> Result<WatchOptions> {
    let mut options = WatchOptions::default();
    if let Some(since) = &spec.since {
        for (id, version) in since {
            options
                .since
                .insert(id.clone(), whole(&format!("since[{id:?}]"), *version)?);
        }
    }
    options.states = spec.states.unwrap_or(false);
    if let Some(n) = spec.max_pending {
        options.max_pending = usize::try_from(whole("maxPending", n)?).unwrap_or(usize::MAX);
    }
    if let Some(ms) = spec.poll_interval_ms {
        options.poll_interval = Some(millis("pollIntervalMs", ms)?);
    }
    if let Some(ms) = spec.rescan_interval_ms {
        options.rescan_interval = millis("rescanIntervalMs", ms)?;
    }
    Ok(options)
}

/// Starts a watch on a pool thread (it reads the watched agents' versions before it resolves):
/// `path` a file or a `postgres://` URI, `options` the connection's open options as JSON
/// (snake_case, as in C), `spec` the watch's own.
#[napi]
pub fn open_watch<'env>(
    env: &'env Env,
    path: String,
    options: String,
    mut spec: WatchSpec,
    cancel: Option<&CancelToken>,
) -> Result<PromiseRaw<'env, OpenedWatch>> {
    let selector = selector(&mut spec)?;
    let watch = watch_options(&spec)?;
    spawn(env, token(cancel), move || {
        let options = OpenOptions::from_json(options.as_bytes()).into_napi()?;
        let watch = Watch::open(&PathBuf::from(path), &options, selector, watch).into_napi()?;
        Ok(OpenedWatch { watch: Some(watch) })
    })
}

/// What `open_watch`'s job hands back; `NativeWatch::start` takes it on the JavaScript thread.
#[napi]
pub struct OpenedWatch {
    watch: Option<Watch>,
}

struct Shared {
    watch: Watch,
    /// Set by `take` when it found the queue empty: the next signal wakes JavaScript (once).
    armed: AtomicBool,
    wake: JsWake,
}

impl Wake for Shared {
    fn wake(&self) {
        if self.armed.swap(false, Ordering::SeqCst) {
            // Non-blocking: the queue of a thread-safe function without a limit never refuses
            // for being full; it refuses once Node is exiting, when nobody waits any more.
            let _ = self.wake.call(0, ThreadsafeFunctionCallMode::NonBlocking);
        }
    }
}

/// One open watch. Closed by `close()` or when JavaScript collects it.
#[napi]
pub struct NativeWatch {
    // Declared first, so dropped first: the descriptor leaves epoll before the watch closes it.
    registration: Mutex<Option<Registration>>,
    shared: Arc<Shared>,
    /// A failure of the watch met while events were taken: reported by the next `take`.
    failure: Mutex<Option<agent_state::Error>>,
}

#[napi]
impl NativeWatch {
    /// The watch an `open_watch` job opened (once), waking JavaScript through `wake` when events
    /// were queued after `take` armed it.
    #[napi(factory)]
    pub fn start(opened: &mut OpenedWatch, wake: JsWake) -> Result<NativeWatch> {
        guarded("watch start", || {
            let watch = opened
                .watch
                .take()
                .ok_or_else(|| invalid("this opened watch was taken already"))?;
            let fd = watch
                .ready_fd()
                .ok_or_else(|| invalid("the watch has no ready descriptor"))?;
            let shared = Arc::new(Shared {
                watch,
                armed: AtomicBool::new(false),
                wake,
            });
            let target: Arc<dyn Wake> = shared.clone();
            let registration = match register(fd, Arc::downgrade(&target)) {
                Ok(registration) => registration,
                Err(message) => {
                    shared.watch.close();
                    return Err(to_napi(agent_state::Error::Storage(message.into())));
                }
            };
            Ok(NativeWatch {
                registration: Mutex::new(Some(registration)),
                shared,
                failure: Mutex::new(None),
            })
        })
    }

    /// Up to `max` queued events, oldest first, without waiting. With `arm` and none queued, the
    /// next event wakes the package (once). Errors: the watch failed (its store's error, once),
    /// then `AGENT_ERR_BAD_HANDLE` (closed), as the core's `next` reports them.
    #[napi]
    pub fn take(&self, max: u32, arm: bool) -> Result<Vec<WatchChange>> {
        guarded("watch take", || {
            if let Some(error) = self
                .failure
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take()
            {
                return Err(to_napi(error));
            }
            let mut out = Vec::new();
            if let Err(error) = self.fill(&mut out, max as usize) {
                if out.is_empty() {
                    return Err(to_napi(error));
                }
                *self.failure.lock().unwrap_or_else(PoisonError::into_inner) = Some(error);
                return Ok(out);
            }
            if out.is_empty() && arm {
                self.shared.armed.store(true, Ordering::SeqCst);
                // An event queued after the look above signalled before the watch was armed:
                // look once more, so that it wakes nobody in vain and waits for nobody.
                let again = self.fill(&mut out, max as usize);
                if !out.is_empty() || again.is_err() {
                    self.shared.armed.store(false, Ordering::SeqCst);
                }
                if let Err(error) = again {
                    if out.is_empty() {
                        return Err(to_napi(error));
                    }
                    *self.failure.lock().unwrap_or_else(PoisonError::into_inner) = Some(error);
                }
            }
            Ok(out)
        })
    }

    /// Follows one more agent (an ids watch), from after version `since` (null: from its
    /// current version), on a pool thread.
    #[napi]
    pub fn add<'env>(
        &self,
        env: &'env Env,
        id: String,
        since: Option<f64>,
    ) -> Result<PromiseRaw<'env, ()>> {
        let since = since.map(|v| whole("since", v)).transpose()?;
        let shared = Arc::clone(&self.shared);
        spawn(env, None, move || shared.watch.add(&id, since).into_napi())
    }

    /// Stops following an agent (its queued events stay queued), on a pool thread.
    #[napi]
    pub fn remove<'env>(&self, env: &'env Env, id: String) -> Result<PromiseRaw<'env, ()>> {
        let shared = Arc::clone(&self.shared);
        spawn(env, None, move || shared.watch.remove(&id).into_napi())
    }

    /// Closes the watch (its queued events are dropped); the descriptor leaves the watches'
    /// thread at once, the core watch closes on a pool thread. Idempotent.
    #[napi]
    pub fn close<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, ()>> {
        drop(
            self.registration
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        let shared = Arc::clone(&self.shared);
        spawn(env, None, move || {
            shared.watch.close();
            Ok(())
        })
    }
}

impl NativeWatch {
    fn fill(&self, out: &mut Vec<WatchChange>, max: usize) -> agent_state::Result<()> {
        while out.len() < max {
            match self.shared.watch.try_next()? {
                Some(event) => out.push(change(event)),
                None => break,
            }
        }
        Ok(())
    }
}
