//! Handles: opaque 64-bit ids looked up in a process-wide registry.
//!
//! A handle is a random per-process tag in the top 16 bits over a counter that only grows, so
//! a handle is never reused, 0 is never valid, and small forged numbers never name an agent.
//! Looking up a closed, forged or double-closed handle is an error, never a dangling pointer.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, RwLock};

use agent_state::Agent;
use agent_state::Error;

/// An open agent, as C sees it. 0 is never a valid handle.
pub type AgentHandle = u64;

const COUNTER_BITS: u32 = 48;

static REGISTRY: LazyLock<RwLock<HashMap<AgentHandle, Arc<Agent>>>> =
    LazyLock::new(|| RwLock::new(HashMap::new()));
static NEXT: AtomicU64 = AtomicU64::new(1);
static TAG: LazyLock<u64> = LazyLock::new(|| {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    (h.finish() & 0x7fff) | 0x8000 // never 0
});

pub(crate) fn insert(agent: Agent) -> AgentHandle {
    let counter = NEXT.fetch_add(1, Ordering::Relaxed) & ((1 << COUNTER_BITS) - 1);
    let handle = (*TAG << COUNTER_BITS) | counter;
    REGISTRY
        .write()
        .unwrap_or_else(|p| p.into_inner())
        .insert(handle, Arc::new(agent));
    handle
}

pub(crate) fn get(handle: AgentHandle) -> Result<Arc<Agent>, Error> {
    REGISTRY
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .get(&handle)
        .cloned()
        .ok_or(Error::Closed)
}

pub(crate) fn remove(handle: AgentHandle) -> Result<Arc<Agent>, Error> {
    REGISTRY
        .write()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&handle)
        .ok_or(Error::Closed)
}
