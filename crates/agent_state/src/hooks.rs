//! on_state_changed hooks and their delivery in commit order.
//!
//! Contract (the C header repeats it): after a change commits, every registered hook gets
//! `(next, prev, patch)`. Hooks run on the thread that made the change, with no internal lock
//! held, and deliveries are in commit order per agent: the `prev` of one delivery is the `next`
//! of the one before, also when several threads write at once.
//!
//! How: each commit gets the next sequence number while the agent's state lock is held; a
//! delivering thread waits until every earlier number has been delivered (a turnstile), then runs
//! the hooks and opens the turnstile for the next. A change made *from inside a hook* (on any agent)
//! is not delivered in place, which would deadlock on its own turnstile, but queued on the thread
//! and delivered by the outermost delivery loop after the running hook returns. Every thread
//! therefore delivers its changes in its own commit order, and waits only for changes that
//! committed earlier, so the turnstiles cannot deadlock unless a hook blocks on another thread.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::error::Error;
pub use crate::value::patch::Patch;
use crate::value::snapshot::Snapshot;

/// Which kind of change a [`StateChange`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ChangeKind {
    /// An RFC 7396 merge patch (the change's `patch`).
    Merge,
    /// A replacement of the whole state (also a restore, and a deletion's event at version 0).
    Replace,
    /// An RFC 6902 JSON Patch (the change's `patch`, an array of operations).
    JsonPatch,
    /// A schema migration: the stored state upgraded from schema version `from` to the
    /// change's `schema` by the handle's steps (see the open option `schema_version`).
    Migration {
        /// The schema version the state was stored under before.
        from: u32,
    },
}

impl ChangeKind {
    /// The kind's name: `"merge"`, `"replace"`, `"migration"` or `"json_patch"`.
    pub fn name(self) -> &'static str {
        match self {
            ChangeKind::Merge => "merge",
            ChangeKind::Replace => "replace",
            ChangeKind::Migration { .. } => "migration",
            ChangeKind::JsonPatch => "json_patch",
        }
    }
}

/// One committed change as hooks see it.
#[derive(Debug)]
pub struct StateChange {
    /// The state after the change.
    pub next: Arc<Snapshot>,
    /// The state before the change (the initial state when nothing was stored).
    pub prev: Arc<Snapshot>,
    /// The patch as applied: the merge patch (an object) of a [`ChangeKind::Merge`], the
    /// operations (an array) of a [`ChangeKind::JsonPatch`]; `None` for a replacement or a
    /// migration.
    pub patch: Option<Patch>,
    /// The state's version after the change (1 for the first write of a store).
    pub version: u64,
    /// What kind of change it is.
    pub kind: ChangeKind,
    /// The schema version of `next` (0 when the writer declared none).
    pub schema: u32,
}

/// A hook fired after every committed change. An `Err` is reported to the caller that made the
/// change, after the commit: the change stays.
pub trait StateChangedHook: Send + Sync {
    /// Called once per committed change, on the thread that made it, in commit order, with no
    /// lock of the library held (the hook may call the agent again).
    fn on_state_changed(&self, change: &StateChange) -> Result<(), String>;
}

/// The validation gate: sees a change inside the write transaction, before it commits; an
/// `Err` (whose text the caller sees) rejects it and nothing is written.
pub trait Validator: Send + Sync {
    /// Called with the change a write would commit (`next`, `prev`, `patch`, the version it
    /// would get), inside its transaction: `Ok` lets it commit, `Err(reason)` rejects it
    /// ([`crate::Error::Rejected`] with the reason).
    fn validate(&self, change: &StateChange) -> Result<(), String>;
}

/// A step of code that upgrades a state from one schema version to the next (see the open
/// option `schema_version`): registered with [`Agent::set_schema_step`](crate::Agent::set_schema_step)
/// for the version it upgrades from.
pub trait SchemaStep: Send + Sync {
    /// Called with the state as stored under schema version `from` (JSON text through
    /// [`Snapshot::json`]) inside the write transaction that upgrades it: returns the state at
    /// `from + 1` as JSON text of an object, checked like a replacement, or `Err(reason)`,
    /// which fails the upgrade ([`crate::Error::Migration`]) with nothing written. Runs under
    /// the handle's lock: calling the same handle from it fails with [`crate::Error::Busy`].
    fn upgrade(&self, from: u32, state: &Snapshot) -> Result<Vec<u8>, String>;
}

/// A hook that supplies the initial state, as JSON text, whenever one is needed.
pub trait InitialStateHook: Send + Sync {
    /// The state to show while nothing is stored: JSON text of an object, checked like a
    /// replacement; never stored by a read. `Err(reason)` fails the call with
    /// [`crate::Error::Hook`].
    fn initial_state(&self) -> Result<Vec<u8>, String>;
}

type HookList = Arc<Vec<(u64, Arc<dyn StateChangedHook>)>>;

/// The hooks of one agent and the turnstile that orders their deliveries.
pub struct Hooks {
    /// Copy-on-write, so a delivery takes a cheap snapshot and registration never waits for one.
    list: Mutex<HookList>,
    next_id: AtomicU64,
    turnstile: Mutex<Turnstile>,
    turn: Condvar,
}

struct Turnstile {
    /// Sequence number of the last change whose delivery finished.
    delivered: u64,
    /// Threads waiting for their turn; when none, finishing a turn wakes nobody (no syscall).
    waiting: usize,
}

struct Pending {
    hooks: Arc<Hooks>,
    seq: u64,
    change: StateChange,
}

thread_local! {
    /// `Some` while this thread runs a delivery loop: changes committed meanwhile queue here.
    static QUEUE: RefCell<Option<VecDeque<Pending>>> = const { RefCell::new(None) };
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Default for Hooks {
    fn default() -> Self {
        Hooks {
            list: Mutex::new(Arc::new(Vec::new())),
            next_id: AtomicU64::new(1),
            turnstile: Mutex::new(Turnstile {
                delivered: 0,
                waiting: 0,
            }),
            turn: Condvar::new(),
        }
    }
}

impl Hooks {
    /// Registers `hook` and returns its id (never 0, never reused within this agent).
    pub fn add(&self, hook: Arc<dyn StateChangedHook>) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut list = lock(&self.list);
        let mut next = Vec::clone(&list);
        next.push((id, hook));
        *list = Arc::new(next);
        id
    }

    /// Unregisters hook `id`; the hook is dropped once no running delivery uses it.
    pub fn remove(&self, id: u64) -> Result<(), Error> {
        let removed = {
            let mut list = lock(&self.list);
            let Some(pos) = list.iter().position(|(i, _)| *i == id) else {
                return Err(Error::InvalidArgument(format!(
                    "no hook with id {id} is registered on this agent"
                )));
            };
            let mut next = Vec::clone(&list);
            let removed = next.remove(pos);
            *list = Arc::new(next);
            removed
        };
        drop(removed); // outside the lock: dropping may run the owner's finalizer
        Ok(())
    }

    /// Unregisters every hook (on close).
    pub fn clear(&self) {
        let old = std::mem::replace(&mut *lock(&self.list), Arc::new(Vec::new()));
        drop(old);
    }

    /// Delivers changes (numbered consecutively from 1 per agent, in order) to every hook.
    /// Returns the first hook failure of this delivery and of the changes that hooks made while
    /// it ran (those are delivered here too, after the hook that made them returns).
    ///
    /// They are all queued before the
    /// first hook runs: a change a hook makes meanwhile is queued after them, never ahead of a
    /// change that must be delivered before it (which would wait for a turn only this thread
    /// can give).
    pub fn deliver_all(self: &Arc<Self>, changes: Vec<(u64, StateChange)>) -> Result<(), Error> {
        if self.pass_without_hooks(&changes) {
            return Ok(());
        }
        let pending = changes.into_iter().map(|(seq, change)| Pending {
            hooks: Arc::clone(self),
            seq,
            change,
        });
        let outermost = QUEUE.with(|q| {
            let mut q = q.borrow_mut();
            match q.as_mut() {
                Some(queue) => {
                    queue.extend(pending);
                    false
                }
                None => {
                    *q = Some(pending.collect());
                    true
                }
            }
        });
        if !outermost {
            return Ok(()); // the delivery loop further up this thread's stack will run them
        }
        let _reset = QueueReset;
        let mut failure: Option<String> = None;
        while let Some(p) = QUEUE.with(|q| q.borrow_mut().as_mut().and_then(VecDeque::pop_front)) {
            if let Err(msg) = p.hooks.run(p.seq, &p.change) {
                failure.get_or_insert(msg);
            }
        }
        match failure {
            None => Ok(()),
            Some(msg) => Err(Error::Hook(msg)),
        }
    }

    /// With no hook registered, no delivery loop running on this thread and these changes next
    /// in line, there is nothing to run: their turns are taken and given at once (two locks,
    /// no queue). Otherwise false, and nothing was done.
    fn pass_without_hooks(&self, changes: &[(u64, StateChange)]) -> bool {
        if QUEUE.with(|q| q.borrow().is_some()) {
            return false;
        }
        let mut t = lock(&self.turnstile);
        let in_line = changes
            .iter()
            .enumerate()
            .all(|(i, (seq, _))| *seq == t.delivered + 1 + i as u64);
        if !in_line || !lock(&self.list).is_empty() {
            return false;
        }
        t.delivered += changes.len() as u64;
        if t.waiting > 0 {
            self.turn.notify_all();
        }
        true
    }

    fn wait_turn(&self, seq: u64) {
        let mut t = lock(&self.turnstile);
        while t.delivered + 1 < seq {
            t.waiting += 1;
            t = self
                .turn
                .wait(t)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            t.waiting -= 1;
        }
    }

    fn finish_turn(&self, seq: u64) {
        let mut t = lock(&self.turnstile);
        if t.delivered < seq {
            t.delivered = seq;
        }
        if t.waiting > 0 {
            self.turn.notify_all();
        }
    }

    fn run(&self, seq: u64, change: &StateChange) -> Result<(), String> {
        self.wait_turn(seq);
        let _done = TurnDone { hooks: self, seq };
        let list = Arc::clone(&lock(&self.list));
        let mut failure = None;
        for (id, hook) in list.iter() {
            if let Err(msg) = hook.on_state_changed(change) {
                failure.get_or_insert(format!("on_state_changed hook {id}: {msg}"));
            }
        }
        failure.map_or(Ok(()), Err)
    }
}

/// Opens the turnstile for the next change even if a hook unwinds.
struct TurnDone<'a> {
    hooks: &'a Hooks,
    seq: u64,
}

impl Drop for TurnDone<'_> {
    fn drop(&mut self) {
        self.hooks.finish_turn(self.seq);
    }
}

/// Ends this thread's delivery loop. On an unwind, changes still queued are passed through
/// their turnstiles undelivered, so other threads are never left waiting for them.
struct QueueReset;

impl Drop for QueueReset {
    fn drop(&mut self) {
        let rest = QUEUE.with(|q| q.borrow_mut().take());
        for p in rest.into_iter().flatten() {
            p.hooks.wait_turn(p.seq);
            p.hooks.finish_turn(p.seq);
        }
    }
}
