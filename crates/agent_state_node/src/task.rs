//! One asynchronous call: a closure run on the library's worker pool
//! ([`agent_state::work::spawn`]) under the call's cancel token, and a Promise settled with its
//! result back on the JavaScript thread. Every asynchronous method of the addon is one of these,
//! so none of them blocks the event loop, and none of them takes a thread of libuv's pool
//! (4 threads by default, which fs, dns, zlib and crypto share): a call waiting for a busy store
//! waits on the library's own thread.

use std::sync::{Arc, Mutex, PoisonError};

use napi::bindgen_prelude::*;
use napi::{Env, JsDeferred};

use crate::error::{guarded, to_napi};

/// What settles one Promise, from the thread the call ends on.
type Deferred<O> = JsDeferred<O, Box<dyn FnOnce(Env) -> Result<O>>>;

/// Runs `work` on the library's worker pool with `cancel` bound to the worker thread while it
/// runs, and returns a Promise of its output. The output is turned into a JavaScript value on
/// the JavaScript thread (`ToNapiValue`), and an error (or a panic in `work`, caught by
/// [`guarded`]) rejects the Promise with the addon's coded error. Must be called on the
/// JavaScript thread that owns `env`.
///
/// Errors: creating the Promise fails (Node-API refused it). When the pool refuses the call (an
/// invalid `AGENT_STATE_WORKERS`, no thread could be started), the Promise is returned rejected
/// with the library's error.
pub fn spawn<'env, O: ToNapiValue + Send + 'static>(
    env: &'env Env,
    cancel: Option<agent_state::Cancel>,
    work: impl FnOnce() -> Result<O> + Send + 'static,
) -> Result<PromiseRaw<'env, O>> {
    let (deferred, promise) = env.create_deferred::<O, Box<dyn FnOnce(Env) -> Result<O>>>()?;
    // The deferred goes to whichever settles the call: the job when it runs, or this thread
    // when the pool refuses the job (and drops it unrun). A deferred never settled would keep
    // the Promise pending and the event loop alive for ever.
    let slot: Arc<Mutex<Option<Deferred<O>>>> = Arc::new(Mutex::new(Some(deferred)));
    let job_slot = Arc::clone(&slot);
    let queued = agent_state::work::spawn(cancel, move || {
        let result = guarded("a call on the worker pool", work);
        if let Some(deferred) = take(&job_slot) {
            settle(deferred, result);
        }
    });
    if let Err(refused) = queued {
        if let Some(deferred) = take(&slot) {
            deferred.reject(to_napi(refused));
        }
    }
    Ok(PromiseRaw::new(env.raw(), promise.raw()))
}

fn take<O: ToNapiValue>(slot: &Mutex<Option<Deferred<O>>>) -> Option<Deferred<O>> {
    slot.lock().unwrap_or_else(PoisonError::into_inner).take()
}

/// Settles the Promise with `result`: the value is made on the JavaScript thread.
fn settle<O: ToNapiValue + Send + 'static>(deferred: Deferred<O>, result: Result<O>) {
    match result {
        Ok(output) => deferred.resolve(Box::new(move |_env| Ok(output))),
        Err(error) => deferred.reject(error),
    }
}
