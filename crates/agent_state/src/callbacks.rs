//! Hooks, the validator and the initial state as closures: the traits of [`crate::hooks`]
//! implemented for you. A closure hook comes with a [`HookGuard`] that unregisters it when
//! dropped; the typed forms read the states into a serde type first.
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use serde::{Deserialize, Serialize};
//! use agent_state::Agent;
//!
//! #[derive(Serialize, Deserialize, Clone, Debug)]
//! struct Conv { status: String }
//!
//! let agent = Agent::builder().initial_state(&Conv { status: "idle".into() }).open(":memory:")?;
//! let seen = Arc::new(Mutex::new(Vec::new()));
//! let log = Arc::clone(&seen);
//! let guard = agent.on_change_as(move |next: &Conv, prev: &Conv| {
//!     log.lock().unwrap().push(format!("{} -> {}", prev.status, next.status));
//! })?;
//! agent.validate_as(|next: &Conv| {
//!     if next.status.is_empty() { Err("status is empty".into()) } else { Ok(()) }
//! })?;
//! agent.set(&serde_json::json!({"status": "processing"}))?;
//! assert!(agent.set(&serde_json::json!({"status": ""})).is_err()); // rejected
//! drop(guard); // unregistered
//! agent.set(&serde_json::json!({"status": "idle"}))?;
//! assert_eq!(*seen.lock().unwrap(), ["idle -> processing"]);
//! # Ok::<(), agent_state::Error>(())
//! ```

use std::sync::{Arc, Weak};

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::agent::Agent;
use crate::error::Result;
use crate::hooks::{Hooks, InitialStateHook, StateChange, StateChangedHook, Validator};
use crate::typed::decode;

/// A hook registered by [`Agent::on_change`] and its kin: dropping the guard unregisters it
/// (a delivery already running finishes). [`HookGuard::keep`] lets it live as long as the
/// agent instead. `Send` and `Sync`; it does not keep the agent alive.
#[derive(Debug)]
#[must_use = "dropping the guard unregisters the hook at once; call keep() to keep it"]
pub struct HookGuard {
    hooks: Weak<Hooks>,
    id: u64,
}

impl HookGuard {
    /// The hook's id, as [`Agent::on_state_changed`] returns it (for [`Agent::remove_hook`]).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Keeps the hook registered until the agent closes (or [`Agent::remove_hook`] with the
    /// id returned), without a guard.
    pub fn keep(self) -> u64 {
        let id = self.id;
        std::mem::forget(self);
        id
    }
}

impl Drop for HookGuard {
    fn drop(&mut self) {
        if let Some(hooks) = self.hooks.upgrade() {
            // Already gone when the agent closed (its hooks were cleared): nothing to do.
            let _ = hooks.remove(self.id);
        }
    }
}

/// A closure as a hook.
struct FnHook<F>(F);

impl<F> StateChangedHook for FnHook<F>
where
    F: Fn(&StateChange) -> std::result::Result<(), String> + Send + Sync,
{
    fn on_state_changed(&self, change: &StateChange) -> std::result::Result<(), String> {
        (self.0)(change)
    }
}

impl<F> Validator for FnHook<F>
where
    F: Fn(&StateChange) -> std::result::Result<(), String> + Send + Sync,
{
    fn validate(&self, change: &StateChange) -> std::result::Result<(), String> {
        (self.0)(change)
    }
}

/// A closure as an initial-state hook.
struct FnInitial<F>(F);

impl<F> InitialStateHook for FnInitial<F>
where
    F: Fn() -> std::result::Result<Vec<u8>, String> + Send + Sync,
{
    fn initial_state(&self) -> std::result::Result<Vec<u8>, String> {
        (self.0)()
    }
}

/// `change`'s states read into `T`, or the message a hook reports.
fn states<T: DeserializeOwned>(change: &StateChange) -> std::result::Result<(T, T), String> {
    let next = decode(&change.next).map_err(|e| e.to_string())?;
    let prev = decode(&change.prev).map_err(|e| e.to_string())?;
    Ok((next, prev))
}

impl Agent {
    /// Runs `hook` after every committed change of this handle (and those [`Agent::poll`]
    /// delivers), in commit order, on the thread that made the change, with no lock held (see
    /// [`StateChangedHook`]). Returns a guard: the hook is unregistered when it is dropped.
    ///
    /// Errors: [`crate::Error::Closed`].
    pub fn on_change<F>(&self, hook: F) -> Result<HookGuard>
    where
        F: Fn(&StateChange) + Send + Sync + 'static,
    {
        self.try_on_change(move |change| {
            hook(change);
            Ok(())
        })
    }

    /// [`Agent::on_change`] for a hook that may fail: an `Err` is reported to the writer as
    /// [`crate::Error::Hook`] after the commit (the change stays).
    pub fn try_on_change<F>(&self, hook: F) -> Result<HookGuard>
    where
        F: Fn(&StateChange) -> std::result::Result<(), String> + Send + Sync + 'static,
    {
        let id = self.on_state_changed(Arc::new(FnHook(hook)))?;
        Ok(HookGuard {
            hooks: self.hooks_weak(),
            id,
        })
    }

    /// [`Agent::on_change`] with the states read into `T`: `hook(next, prev)`, the reference's
    /// `onStateChanged(next, prev)`. A state that does not fit `T` is reported to the writer
    /// as [`crate::Error::Hook`] (the change stays).
    pub fn on_change_as<T, F>(&self, hook: F) -> Result<HookGuard>
    where
        T: DeserializeOwned,
        F: Fn(&T, &T) + Send + Sync + 'static,
    {
        self.try_on_change(move |change| {
            let (next, prev) = states::<T>(change)?;
            hook(&next, &prev);
            Ok(())
        })
    }

    /// Sets the validation gate to `validate` (replacing any): it sees each change inside the
    /// write transaction, and an `Err(reason)` rejects it ([`crate::Error::Rejected`], nothing
    /// written). [`Agent::set_validator`]`(None)` removes it.
    pub fn validate_with<F>(&self, validate: F) -> Result<()>
    where
        F: Fn(&StateChange) -> std::result::Result<(), String> + Send + Sync + 'static,
    {
        self.set_validator(Some(Arc::new(FnHook(validate))))
    }

    /// [`Agent::validate_with`] on the state the change would commit, read into `T`; a state
    /// that does not fit `T` is rejected with serde's message.
    pub fn validate_as<T, F>(&self, validate: F) -> Result<()>
    where
        T: DeserializeOwned,
        F: Fn(&T) -> std::result::Result<(), String> + Send + Sync + 'static,
    {
        self.validate_with(move |change| {
            validate(&decode(&change.next).map_err(|e| e.to_string())?)
        })
    }

    /// Computes the state shown while nothing is stored, each time one is needed (replacing
    /// the `initial_state` option, as [`Agent::set_initial_state_hook`]): any value serde
    /// writes as an object. A value it cannot write fails the read with
    /// [`crate::Error::Hook`].
    pub fn initial_state_with<T, F>(&self, initial: F) -> Result<()>
    where
        T: Serialize,
        F: Fn() -> T + Send + Sync + 'static,
    {
        let hook = FnInitial(move || serde_json::to_vec(&initial()).map_err(|e| e.to_string()));
        self.set_initial_state_hook(Some(Arc::new(hook)))
    }
}
