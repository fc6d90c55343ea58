//! The agent for async code: [`AsyncAgent`] has the agent's methods as `async fn`s, each run on
//! the library's worker pool ([`crate::work`]) so that an executor's thread never waits for a
//! lock, the store or a sync to disk. It needs no runtime of its own: its futures complete by
//! their waker, on tokio, async-std, smol or any other executor. (The synchronous [`Agent`]
//! works from async code too, on every backend, but blocks the executor's thread while it
//! waits.)
//!
//! # Cancel safety
//!
//! A call starts when its future is first polled (a future never polled does nothing).
//! Dropping the future before it completes fires the call's [`Cancel`] token: a call that has
//! not begun, or is still waiting (for the handle's lock, another connection's write lock, a
//! pooled connection, the server before the commit), ends with nothing written; a call past
//! its waits (one whose wait ended as the token fired, or whose commit is under way) finishes.
//! So a dropped write has written nothing or everything, never part, and the state's version
//! tells which; its hooks run as usual when it committed.
//!
//! ```
//! use serde::{Deserialize, Serialize};
//! use agent_state::{Agent, AsyncAgent};
//!
//! #[derive(Serialize, Deserialize, Default)]
//! #[serde(default)]
//! struct Counter { n: u64 }
//!
//! # let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
//! # runtime.block_on(async {
//! let agent = AsyncAgent::from(Agent::builder().open(":memory:")?);
//! let tasks: Vec<_> = (0..8)
//!     .map(|_| {
//!         let agent = agent.clone();
//!         tokio::spawn(async move { agent.update(|c: &mut Counter| c.n += 1).await })
//!     })
//!     .collect();
//! for task in tasks {
//!     task.await.unwrap()?;
//! }
//! assert_eq!(agent.get::<Counter>().await?.n, 8);
//! # Ok::<(), agent_state::Error>(())
//! # }).unwrap();
//! ```

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::agent::{Agent, Versioned};
use crate::builder::AgentBuilder;
use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::location::Location;
use crate::options::OpenOptions;
use crate::typed::{decode, skipping_none, to_json};
use crate::value::snapshot::Snapshot;
use crate::work;

/// An [`Agent`] for async code (see the module's text): cheap to clone (clones share the
/// agent), `Send` and `Sync`. Each method is the agent's method of the same name, run on the
/// library's worker pool; reads that this thread can answer without waiting (the handle's hot
/// copy) complete at once, without a hop.
#[derive(Debug, Clone)]
pub struct AsyncAgent {
    agent: Arc<Agent>,
}

impl From<Agent> for AsyncAgent {
    fn from(agent: Agent) -> AsyncAgent {
        AsyncAgent {
            agent: Arc::new(agent),
        }
    }
}

impl From<Arc<Agent>> for AsyncAgent {
    fn from(agent: Arc<Agent>) -> AsyncAgent {
        AsyncAgent { agent }
    }
}

impl AgentBuilder {
    /// [`AgentBuilder::open`] on the worker pool, as an [`AsyncAgent`].
    pub async fn open_async(self, location: impl Into<Location>) -> Result<AsyncAgent> {
        let location = location.into();
        run(move || self.open(location)).await.map(AsyncAgent::from)
    }
}

impl AsyncAgent {
    /// [`Agent::open_with`] on the worker pool.
    pub async fn open(location: impl Into<Location>, options: &OpenOptions) -> Result<AsyncAgent> {
        AgentBuilder::from_options(options.clone())
            .open_async(location)
            .await
    }

    /// The agent, for its synchronous methods (which block the calling thread).
    pub fn agent(&self) -> &Arc<Agent> {
        &self.agent
    }

    /// [`Agent::get_state`].
    pub async fn get_state(&self) -> Result<Arc<Snapshot>> {
        Ok(self.get_state_versioned().await?.state)
    }

    /// [`Agent::get_state_versioned`].
    pub async fn get_state_versioned(&self) -> Result<Versioned> {
        if let Some(held) = self.agent.read_now() {
            return Ok(Versioned {
                state: Arc::clone(held.state()),
                version: held.version(),
            });
        }
        self.call(|agent| agent.get_state_versioned()).await
    }

    /// [`Agent::get`]: the state read into `T`.
    pub async fn get<T: DeserializeOwned>(&self) -> Result<T> {
        decode(&*self.get_state().await?)
    }

    /// [`Agent::get_value`].
    pub async fn get_value(&self) -> Result<Value> {
        Ok(self.get_state().await?.to_value())
    }

    /// [`Agent::set`]: a merge that skips `None` (the patch is serialized before the call
    /// starts, on the caller's thread).
    pub async fn set<P: Serialize + ?Sized>(&self, patch: &P) -> Result<Versioned> {
        self.set_if(patch, None).await
    }

    /// [`Agent::set_if`].
    pub async fn set_if<P: Serialize + ?Sized>(
        &self,
        patch: &P,
        expected: Option<u64>,
    ) -> Result<Versioned> {
        let json = skipping_none(patch)?;
        self.call(move |agent| agent.set_state_if(&json, expected))
            .await
    }

    /// [`Agent::merge`]: a merge where `null` (a `None` field) deletes.
    pub async fn merge<P: Serialize + ?Sized>(&self, patch: &P) -> Result<Versioned> {
        self.merge_if(patch, None).await
    }

    /// [`Agent::merge_if`].
    pub async fn merge_if<P: Serialize + ?Sized>(
        &self,
        patch: &P,
        expected: Option<u64>,
    ) -> Result<Versioned> {
        let json = to_json("the patch", patch)?;
        self.call(move |agent| agent.set_state_if(&json, expected))
            .await
    }

    /// [`Agent::replace`].
    pub async fn replace<S: Serialize + ?Sized>(&self, state: &S) -> Result<Versioned> {
        self.replace_if(state, None).await
    }

    /// [`Agent::replace_if`].
    pub async fn replace_if<S: Serialize + ?Sized>(
        &self,
        state: &S,
        expected: Option<u64>,
    ) -> Result<Versioned> {
        let json = to_json("the state", state)?;
        self.call(move |agent| agent.replace_state_if(&json, expected))
            .await
    }

    /// [`Agent::set_state`]: a merge patch as JSON text.
    pub async fn set_state(&self, patch: &[u8]) -> Result<Arc<Snapshot>> {
        let patch = patch.to_vec();
        self.call(move |agent| agent.set_state(&patch)).await
    }

    /// [`Agent::set_state_if`].
    pub async fn set_state_if(&self, patch: &[u8], expected: Option<u64>) -> Result<Versioned> {
        let patch = patch.to_vec();
        self.call(move |agent| agent.set_state_if(&patch, expected))
            .await
    }

    /// [`Agent::replace_state`]: a state as JSON text.
    pub async fn replace_state(&self, next: &[u8]) -> Result<Arc<Snapshot>> {
        let next = next.to_vec();
        self.call(move |agent| agent.replace_state(&next)).await
    }

    /// [`Agent::replace_state_if`].
    pub async fn replace_state_if(&self, next: &[u8], expected: Option<u64>) -> Result<Versioned> {
        let next = next.to_vec();
        self.call(move |agent| agent.replace_state_if(&next, expected))
            .await
    }

    /// [`Agent::patch_state_if`]: an RFC 6902 JSON Patch (`None`: at any version).
    pub async fn patch_state_if(
        &self,
        operations: &[u8],
        expected: Option<u64>,
    ) -> Result<Versioned> {
        let operations = operations.to_vec();
        self.call(move |agent| agent.patch_state_if(&operations, expected))
            .await
    }

    /// [`Agent::get_path`]: the value at an RFC 6901 JSON Pointer, as JSON text.
    pub async fn get_path(&self, pointer: &str) -> Result<Vec<u8>> {
        let pointer = pointer.to_string();
        self.call(move |agent| agent.get_path(&pointer)).await
    }

    /// [`Agent::get_tail`]: the last `n` elements of the array at `pointer`, as JSON text.
    pub async fn get_tail(&self, pointer: &str, n: usize) -> Result<Vec<u8>> {
        let pointer = pointer.to_string();
        self.call(move |agent| agent.get_tail(&pointer, n)).await
    }

    /// [`Agent::state_at`]: the state at `version`, from the change log.
    pub async fn state_at(&self, version: u64) -> Result<Arc<Snapshot>> {
        self.call(move |agent| agent.state_at(version)).await
    }

    /// [`Agent::restore`]: a new change back to the state at `version`.
    pub async fn restore(&self, version: u64) -> Result<Versioned> {
        self.call(move |agent| agent.restore(version)).await
    }

    /// [`Agent::update`]: read into `T`, `change`, write back as a compare-and-set, again
    /// after a conflict (all of it on a worker thread, `change` included).
    pub async fn update<T, F>(&self, change: F) -> Result<Versioned>
    where
        T: Serialize + DeserializeOwned,
        F: FnMut(&mut T) + Send + 'static,
    {
        self.call(move |agent| agent.update(change)).await
    }

    /// [`Agent::changes_since`]: the change log after version `after`, as JSON text.
    pub async fn changes_since(&self, after: u64) -> Result<Vec<u8>> {
        self.call(move |agent| agent.changes_since(after)).await
    }

    /// [`Agent::poll`]: delivers other handles' changes to this handle's hooks.
    pub async fn poll(&self) -> Result<usize> {
        self.call(|agent| agent.poll()).await
    }

    /// [`Agent::close`].
    pub async fn close(&self) -> Result<()> {
        self.call(|agent| agent.close()).await
    }

    /// Runs `f` with the agent on the worker pool.
    async fn call<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Agent) -> Result<T> + Send + 'static,
    {
        let agent = Arc::clone(&self.agent);
        run(move || f(&agent)).await
    }
}

/// Runs `job` on the worker pool with a cancel token of its own, which dropping the returned
/// future fires (see the module's text).
async fn run<T, F>(job: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T> + Send + 'static,
{
    let slot = Arc::new(Slot {
        inner: Mutex::new(SlotInner {
            result: None,
            waker: None,
        }),
    });
    let cancel = Cancel::new();
    let filled = Arc::clone(&slot);
    work::spawn(Some(cancel.clone()), move || {
        // A panic in the job is reported, never left as a future that waits for ever.
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job))
            .unwrap_or_else(|_| Err(Error::Hook("the call panicked on its worker thread".into())));
        filled.fill(result);
    })?;
    Pending {
        slot,
        cancel,
        done: false,
    }
    .await
}

/// Where a job's result waits for its future.
struct Slot<T> {
    inner: Mutex<SlotInner<T>>,
}

struct SlotInner<T> {
    result: Option<Result<T>>,
    waker: Option<Waker>,
}

impl<T> Slot<T> {
    fn lock(&self) -> std::sync::MutexGuard<'_, SlotInner<T>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn fill(&self, result: Result<T>) {
        let waker = {
            let mut inner = self.lock();
            inner.result = Some(result);
            inner.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// The future of one job: ready once the job filled its slot; fires the job's token when
/// dropped before that.
struct Pending<T> {
    slot: Arc<Slot<T>>,
    cancel: Cancel,
    done: bool,
}

impl<T> Future for Pending<T> {
    type Output = Result<T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T>> {
        let mut inner = self.slot.lock();
        if let Some(result) = inner.result.take() {
            drop(inner);
            self.done = true;
            return Poll::Ready(result);
        }
        match &mut inner.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            slot => *slot = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

impl<T> Drop for Pending<T> {
    fn drop(&mut self) {
        if !self.done {
            self.cancel.cancel();
        }
    }
}
