//! Handles: opaque 64-bit ids looked up in a process-wide registry, one per kind of object
//! (agents, cancel tokens).
//!
//! A handle is a random per-process tag in the top 16 bits over a counter that only grows (one
//! counter for every registry), so a handle is never reused, 0 is never valid, small forged
//! numbers never name an object, and a handle of one kind never names an object of another.
//! Looking up a closed, forged or double-closed handle is an error, never a dangling pointer.

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

    pub(crate) fn insert(&self, object: T) -> u64 {
        let counter = NEXT.fetch_add(1, Ordering::Relaxed) & ((1 << COUNTER_BITS) - 1);
        let handle = (*TAG << COUNTER_BITS) | counter;
        self.0
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(handle, Arc::new(object));
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

pub(crate) fn insert(agent: Agent) -> AgentHandle {
    AGENTS.insert(agent)
}

pub(crate) fn get(handle: AgentHandle) -> Result<Arc<Agent>, Error> {
    AGENTS.get(handle)
}

pub(crate) fn remove(handle: AgentHandle) -> Result<Arc<Agent>, Error> {
    AGENTS.remove(handle)
}
