//! The agent's hooks: registering them, the initial state a hook may answer, and the guard
//! that refuses a call into the agent from a hook that runs under its lock.

use std::cell::RefCell;
use std::sync::{Arc, Mutex, Weak};

use super::{lock, Agent};
use crate::error::{Error, Result};
use crate::hooks::{Hooks, InitialStateHook, StateChangedHook, Validator};
use crate::value::accept::{self, StateInput};
use crate::value::snapshot::Snapshot;

thread_local! {
    /// Agents whose initial-state hook or validator is running on this thread: their state lock
    /// is held, so a call into them from the hook would deadlock and is refused instead.
    static IN_LOCKED_HOOK: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

impl Agent {
    /// Registers an on_state_changed hook; returns its id.
    pub fn on_state_changed(&self, hook: Arc<dyn StateChangedHook>) -> Result<u64> {
        let guard = self.lock_inner()?;
        guard.as_ref().ok_or(Error::Closed)?;
        Ok(self.hooks.add(hook))
    }

    /// The agent's hook list, weakly: what a closure hook's guard (`HookGuard`) removes
    /// its hook from, without keeping the agent's hooks alive after the agent.
    pub(crate) fn hooks_weak(&self) -> Weak<Hooks> {
        Arc::downgrade(&self.hooks)
    }

    /// Unregisters hook `id`.
    pub fn remove_hook(&self, id: u64) -> Result<()> {
        {
            let guard = self.lock_inner()?;
            guard.as_ref().ok_or(Error::Closed)?;
        }
        self.hooks.remove(id)
    }

    /// Sets (or, with `None`, removes) the initial-state hook; it takes precedence over the
    /// `initial_state` option.
    pub fn set_initial_state_hook(&self, hook: Option<Arc<dyn InitialStateHook>>) -> Result<()> {
        self.replace_slot(&self.initial_hook, hook)
    }

    /// Sets (or, with `None`, removes) the validation gate: it sees every change of this
    /// handle inside the write transaction, after the merge and the codec and size checks, and
    /// an `Err` rejects the change ([`Error::Rejected`], nothing written).
    pub fn set_validator(&self, validator: Option<Arc<dyn Validator>>) -> Result<()> {
        self.replace_slot(&self.validator, validator)
    }

    /// Puts `value` in one of the agent's hook slots (if open); the previous occupant is
    /// dropped outside every lock, since dropping may run its owner's finalizer.
    fn replace_slot<T: ?Sized>(
        &self,
        slot: &Mutex<Option<Arc<T>>>,
        value: Option<Arc<T>>,
    ) -> Result<()> {
        let old = {
            let guard = self.lock_inner()?;
            guard.as_ref().ok_or(Error::Closed)?;
            std::mem::replace(&mut *lock(slot), value)
        };
        drop(old);
        Ok(())
    }

    /// The initial state: the hook's answer when a hook is set, else the option's.
    pub(super) fn initial(&self) -> Result<Arc<Snapshot>> {
        let hook = lock(&self.initial_hook).clone();
        let Some(hook) = hook else {
            return Ok(Arc::clone(&self.initial_state));
        };
        let answer = self.locked_hook(|| hook.initial_state());
        let text = answer.map_err(|m| Error::Hook(format!("initial-state hook: {m}")))?;
        Ok(Arc::new(accept::state(
            StateInput::HookAnswer(&text),
            self.cap.bytes,
        )?))
    }

    pub(super) fn refuse_reentry(&self) -> Result<()> {
        if IN_LOCKED_HOOK.with(|ids| ids.borrow().contains(&self.id)) {
            return Err(Error::Busy(
                "called from inside this agent's own initial-state hook or validator (which run \
                 under its lock); they must not use their own handle"
                    .to_string()
                    .into(),
            ));
        }
        Ok(())
    }

    /// Runs `f` marked as a hook that holds this agent's lock (calls back into the agent from
    /// this thread are refused instead of deadlocking).
    pub(super) fn locked_hook<T>(&self, f: impl FnOnce() -> T) -> T {
        IN_LOCKED_HOOK.with(|ids| ids.borrow_mut().push(self.id));
        let result = f();
        IN_LOCKED_HOOK.with(|ids| {
            let mut ids = ids.borrow_mut();
            if let Some(pos) = ids.iter().rposition(|id| *id == self.id) {
                ids.remove(pos);
            }
        });
        result
    }
}
