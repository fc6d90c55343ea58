//! Handles: opaque 64-bit ids looked up in a process-wide registry, one per kind of object
//! (agents, cancel tokens).
//!
//! A handle is a random per-process tag in the top 16 bits over a counter that only grows (one
//! counter for every registry), so a handle is never reused, 0 is never valid, small forged
//! numbers never name an object, and a handle of one kind never names an object of another.
//! Looking up a closed, forged or double-closed handle is an error, never a dangling pointer.
//! Agents are found first among the few this thread used lately ([`with`]): the registry's
//! lock and the agent's count are shared by every thread, and writing them on every call
//! would make threads that read one handle take turns.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, RwLock};

use agent_state::Agent;
use agent_state::Cancel;
use agent_state::Error;

/// An open agent, as C sees it. 0 is never a valid handle.
pub type AgentHandle = u64;

const COUNTER_BITS: u32 = 48;

static NEXT: AtomicU64 = AtomicU64::new(1);
static TAG: LazyLock<u64> = LazyLock::new(|| {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    (h.finish() & 0x7fff) | 0x8000 // never 0
});

/// The objects of one kind that C holds handles to.
pub(crate) struct Registry<T>(LazyLock<RwLock<HashMap<u64, Arc<T>>>>);

impl<T> Registry<T> {
    pub(crate) const fn new() -> Registry<T> {
        Registry(LazyLock::new(|| RwLock::new(HashMap::new())))
    }

    /// Registers `object` (owned, or already shared: an agent that pushes changes is held
    /// weakly by its store's watcher) and returns its new handle.
    pub(crate) fn insert(&self, object: impl Into<Arc<T>>) -> u64 {
        let counter = NEXT.fetch_add(1, Ordering::Relaxed) & ((1 << COUNTER_BITS) - 1);
        let handle = (*TAG << COUNTER_BITS) | counter;
        self.0
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(handle, object.into());
        handle
    }

    pub(crate) fn get(&self, handle: u64) -> Result<Arc<T>, Error> {
        self.0
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&handle)
            .cloned()
            .ok_or(Error::Closed)
    }

    pub(crate) fn remove(&self, handle: u64) -> Result<Arc<T>, Error> {
        self.0
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&handle)
            .ok_or(Error::Closed)
    }
}

/// The open agents.
pub(crate) static AGENTS: Registry<Agent> = Registry::new();
/// The live cancel tokens.
pub(crate) static CANCELS: Registry<Cancel> = Registry::new();

pub(crate) fn insert(agent: impl Into<Arc<Agent>>) -> AgentHandle {
    AGENTS.insert(agent)
}

/// Agents this thread used lately, by handle, so that a call finds its agent without the
/// registry's lock or a count shared with other threads. A handle's slot is its counter modulo
/// this; an entry is trusted only while its agent is open (`Agent::is_open`, one load). A
/// closed agent's entry is dropped when its slot is next used, by `remove` on the closing
/// thread, or when the thread exits: at most this many closed agents per thread stay alive.
const LOCAL_SLOTS: usize = 8;

/// One thread's entries: a handle and its agent, per slot.
type Local = [Option<(AgentHandle, Arc<Agent>)>; LOCAL_SLOTS];

thread_local! {
    static LOCAL: RefCell<Local> = const { RefCell::new([const { None }; LOCAL_SLOTS]) };
}

fn slot(handle: AgentHandle) -> usize {
    (handle % LOCAL_SLOTS as u64) as usize
}

/// Runs `f` on the agent behind `handle` ([`Error::Closed`] for a closed or unknown one).
///
/// While `f` runs, this thread's entries are borrowed (shared): a call made from inside it (a
/// hook's) finds its agent the same way, or in the registry, but changes no entry.
pub(crate) fn with<T>(
    handle: AgentHandle,
    f: impl FnOnce(&Agent) -> Result<T, Error>,
) -> Result<T, Error> {
    let mut f = Some(f);
    let local = LOCAL.try_with(|local| {
        let local = local.try_borrow().ok()?;
        match &local[slot(handle)] {
            Some((h, agent)) if *h == handle && agent.is_open() => f.take().map(|f| f(agent)),
            _ => None,
        }
    });
    if let Ok(Some(result)) = local {
        return result;
    }
    let f = f.expect("f runs at most once, and only where it returns");
    let agent = AGENTS.get(handle)?;
    if agent.is_open() {
        let entry = Some((handle, Arc::clone(&agent)));
        // What it replaces is dropped once the borrow has ended.
        let _replaced = LOCAL.try_with(|local| {
            let mut local = local.try_borrow_mut().ok()?;
            std::mem::replace(&mut local[slot(handle)], entry)
        });
    }
    f(&agent)
}

pub(crate) fn remove(handle: AgentHandle) -> Result<Arc<Agent>, Error> {
    let _forgotten = LOCAL.try_with(|local| {
        let mut local = local.try_borrow_mut().ok()?;
        let entry = &mut local[slot(handle)];
        match entry {
            Some((h, _)) if *h == handle => entry.take(),
            _ => None,
        }
    });
    AGENTS.remove(handle)
}
