//! One open handle per agent, shared by the requests and the watch streams of that agent.
//!
//! Opening a handle costs a file open or a server connection, and a handle keeps its state
//! cached, so requests reuse it. The cache is bounded: past [`MAX_OPEN`] handles, those no
//! request or stream is using are closed.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use agent_state::{Agent, OpenOptions, Result};

/// The most handles kept open while unused.
const MAX_OPEN: usize = 64;

pub struct Handles {
    store: PathBuf,
    /// The connection's options, read-only; `agent_id` is set per agent.
    options: OpenOptions,
    open: Mutex<HashMap<String, Arc<Agent>>>,
}

impl Handles {
    pub fn new(store: PathBuf, mut options: OpenOptions) -> Handles {
        options.read_only = true;
        options.change_log = None;
        Handles {
            store,
            options,
            open: Mutex::new(HashMap::new()),
        }
    }

    pub fn store(&self) -> &PathBuf {
        &self.store
    }

    /// The connection's options (for the listing, which opens the store, not an agent).
    pub fn options(&self) -> &OpenOptions {
        &self.options
    }

    /// The handle of agent `id` (`""`: a SQLite file's single agent), opened when none is.
    /// Blocking: call it off the async workers.
    pub fn get(&self, id: &str) -> Result<Arc<Agent>> {
        if let Some(agent) = self.lock().get(id) {
            return Ok(Arc::clone(agent));
        }
        // Opened without the lock held: another agent's requests need not wait for it. Two
        // requests racing to open one agent both open it; the first one kept wins.
        let mut options = self.options.clone();
        options.agent_id = (!id.is_empty()).then(|| id.to_string());
        let agent = Arc::new(Agent::open_with(&self.store, &options)?);
        let mut open = self.lock();
        if open.len() >= MAX_OPEN {
            open.retain(|_, agent| Arc::strong_count(agent) > 1);
        }
        Ok(Arc::clone(open.entry(id.to_string()).or_insert(agent)))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Agent>>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }
}
