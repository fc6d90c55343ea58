//! One pool job: a closure run on libuv's worker pool under the call's cancel token, its result
//! turned into a JavaScript value back on the JavaScript thread. Every asynchronous method of the
//! addon is one of these, so none of them blocks the event loop.

use napi::bindgen_prelude::*;
use napi::Env;

use crate::cancel::scoped;
use crate::error::guarded;

/// A job: `work` runs on a pool thread; `Output` is handed to JavaScript (`ToNapiValue`).
pub struct Job<O: Send + 'static> {
    work: Option<Box<dyn FnOnce() -> Result<O> + Send>>,
    cancel: Option<agent_state::Cancel>,
}

impl<O: Send + ToNapiValue + TypeName + 'static> Job<O> {
    pub fn new(
        cancel: Option<agent_state::Cancel>,
        work: impl FnOnce() -> Result<O> + Send + 'static,
    ) -> AsyncTask<Job<O>> {
        AsyncTask::new(Job {
            work: Some(Box::new(work)),
            cancel,
        })
    }
}

impl<O: Send + ToNapiValue + TypeName + 'static> Task for Job<O> {
    type Output = O;
    type JsValue = O;

    fn compute(&mut self) -> Result<O> {
        let work = self
            .work
            .take()
            .ok_or_else(|| Error::from_reason("a job ran twice"))?;
        guarded("a call on the pool", || scoped(&self.cancel, work))
    }

    fn resolve(&mut self, _env: Env, output: O) -> Result<O> {
        Ok(output)
    }
}
