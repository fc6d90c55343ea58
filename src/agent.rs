//! One agent: one store, one state, its hooks. The safe Rust API the C boundary wraps.

use std::cell::RefCell;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;

use crate::codec;
use crate::error::{Error, Result};
use crate::ffi::wal_index::WalHeader;
use crate::hooks::{Hooks, InitialStateHook, Patch, StateChange, StateChangedHook};
use crate::options::OpenOptions;
use crate::snapshot::Snapshot;
use crate::store::{Store, STATE_KEY};

static NEXT_AGENT_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// Agents whose initial-state hook is running on this thread: their state lock is held, so a
    /// call into them from the hook would deadlock and is refused instead.
    static IN_INITIAL_HOOK: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// A persistent agent state on one store file. All methods take `&self` and are safe to call
/// from many threads at once; calls on one agent are serialized by an internal lock, which is
/// never held while an on_state_changed hook runs.
pub struct Agent {
    id: u64,
    inner: Mutex<Option<Inner>>,
    hooks: Arc<Hooks>,
    initial_hook: Mutex<Option<Arc<dyn InitialStateHook>>>,
    initial_state: Arc<Snapshot>,
    max_value_bytes: usize,
}

struct Inner {
    store: Store,
    /// The stored state as of `data_version`; `None` until first read.
    cache: Option<Cache>,
    /// Sequence number of the last committed change made through this agent.
    seq: u64,
}

struct Cache {
    /// The pager's data version when the cache was last confirmed (plus one after our own
    /// commit, which moves it by exactly one).
    pager_version: Option<u32>,
    /// The WAL-index header seen just before a version was last confirmed; while the header is
    /// unchanged, no connection has committed and the cache is current.
    header: Option<WalHeader>,
    /// `None`: nothing stored.
    stored: Option<Arc<Snapshot>>,
}

enum Change {
    Merge(Value),
    Replace(Value),
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Agent {
    /// Opens the store at `path` (created when absent unless `read_only`).
    pub fn open(path: &Path, options: &OpenOptions) -> Result<Agent> {
        let max = options.max_value_bytes;
        let initial = match &options.initial_state {
            None => Value::Object(Default::default()),
            Some(v) => v.clone(),
        };
        codec::validate(&initial, 1)?;
        let initial = check_state(initial, max, "initial_state")?;
        let store = Store::open(path, &options.store_options())?;
        Ok(Agent {
            id: NEXT_AGENT_ID.fetch_add(1, Ordering::Relaxed),
            inner: Mutex::new(Some(Inner {
                store,
                cache: None,
                seq: 0,
            })),
            hooks: Arc::new(Hooks::default()),
            initial_hook: Mutex::new(None),
            initial_state: Arc::new(initial),
            max_value_bytes: max,
        })
    }

    /// The stored state, or the initial state when nothing is stored. Never writes.
    pub fn get_state(&self) -> Result<Arc<Snapshot>> {
        let mut guard = self.lock_inner()?;
        let inner = guard.as_mut().ok_or(Error::Closed)?;
        match self.stored(inner, false)? {
            Some(state) => Ok(state),
            None => self.initial(),
        }
    }

    /// Merges `patch` (JSON text of an object) by RFC 7396 and returns the full merged state.
    pub fn set_state(&self, patch: &[u8]) -> Result<Arc<Snapshot>> {
        self.refuse_reentry()?;
        let patch = self.parse_input(patch, "patch")?;
        self.change(Change::Merge(patch))
    }

    /// Replaces the state with `next` (JSON text of an object) and returns it.
    pub fn replace_state(&self, next: &[u8]) -> Result<Arc<Snapshot>> {
        self.refuse_reentry()?;
        let next = self.parse_input(next, "state")?;
        self.change(Change::Replace(next))
    }

    /// Registers an on_state_changed hook; returns its id.
    pub fn on_state_changed(&self, hook: Arc<dyn StateChangedHook>) -> Result<u64> {
        let guard = self.lock_inner()?;
        guard.as_ref().ok_or(Error::Closed)?;
        Ok(self.hooks.add(hook))
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
        let old = {
            let guard = self.lock_inner()?;
            guard.as_ref().ok_or(Error::Closed)?;
            std::mem::replace(&mut *lock(&self.initial_hook), hook)
        };
        drop(old);
        Ok(())
    }

    /// Closes the store. Later calls fail with [`Error::Closed`]; hooks are dropped once no
    /// running delivery uses them.
    pub fn close(&self) -> Result<()> {
        let inner = self.lock_inner()?.take().ok_or(Error::Closed)?;
        drop(inner);
        self.hooks.clear();
        let initial_hook = lock(&self.initial_hook).take();
        drop(initial_hook);
        Ok(())
    }

    /// The largest encoded state this agent accepts.
    pub fn max_value_bytes(&self) -> usize {
        self.max_value_bytes
    }

    fn refuse_reentry(&self) -> Result<()> {
        if IN_INITIAL_HOOK.with(|ids| ids.borrow().contains(&self.id)) {
            return Err(Error::Busy(
                "called from inside this agent's own initial-state hook (which runs under its lock); \
                 the hook must not use its own handle"
                    .to_string(),
            ));
        }
        Ok(())
    }

    fn lock_inner(&self) -> Result<MutexGuard<'_, Option<Inner>>> {
        self.refuse_reentry()?;
        Ok(lock(&self.inner))
    }

    fn parse_input(&self, text: &[u8], what: &str) -> Result<Value> {
        if text.len() > self.max_value_bytes {
            return Err(Error::TooLarge(format!(
                "the {what} is {} bytes, over max_value_bytes ({})",
                text.len(),
                self.max_value_bytes
            )));
        }
        let value = crate::json::parse(text)?;
        if !codec::is_plain_object(&value) {
            return Err(Error::InvalidArgument(format!(
                "the {what} must be a JSON object, not {}",
                describe(&value)
            )));
        }
        codec::validate(&value, 1)?;
        Ok(value)
    }

    /// The stored state, from the cache when no other connection has committed since it was
    /// filled. `in_transaction`: called inside this connection's write transaction.
    ///
    /// Two tests, cheapest first: the WAL-index header is unchanged (no commit anywhere, a few
    /// loads); else the pager's data version is unchanged (a function call, current inside a
    /// transaction; outside one, `PRAGMA data_version` runs first to bring it up to date);
    /// else the entry is read and decoded again.
    fn stored(&self, inner: &mut Inner, in_transaction: bool) -> Result<Option<Arc<Snapshot>>> {
        // Read the header *before* the version: a commit landing in between then shows up as a
        // header change next time, never as a missed update.
        let header = inner.store.wal_header();
        if let Some(cache) = &inner.cache {
            if header.is_some() && cache.header == header {
                return Ok(cache.stored.clone());
            }
        }
        if !in_transaction {
            inner.store.data_version()?; // a read transaction: refreshes the pager's version
        }
        let version = inner.store.data_version_in_transaction();
        if let Some(cache) = &mut inner.cache {
            if version.is_some() && cache.pager_version == version {
                cache.header = header;
                return Ok(cache.stored.clone());
            }
        }
        let stored = match inner.store.read(STATE_KEY)? {
            None => None,
            Some(bytes) => Some(Arc::new(decode_stored(bytes)?)),
        };
        inner.cache = Some(Cache {
            pager_version: version,
            header,
            stored: stored.clone(),
        });
        Ok(stored)
    }

    /// The initial state: the hook's answer when a hook is set, else the option's.
    fn initial(&self) -> Result<Arc<Snapshot>> {
        let hook = lock(&self.initial_hook).clone();
        let Some(hook) = hook else {
            return Ok(Arc::clone(&self.initial_state));
        };
        IN_INITIAL_HOOK.with(|ids| ids.borrow_mut().push(self.id));
        let answer = hook.initial_state();
        IN_INITIAL_HOOK.with(|ids| {
            let mut ids = ids.borrow_mut();
            if let Some(pos) = ids.iter().rposition(|id| *id == self.id) {
                ids.remove(pos);
            }
        });
        let text = answer.map_err(|m| Error::Hook(format!("initial-state hook: {m}")))?;
        let value = self
            .parse_input(&text, "initial-state hook's state")
            .map_err(|e| prefix(e, "initial-state hook"))?;
        check_state(value, self.max_value_bytes, "initial-state hook's answer").map(Arc::new)
    }

    fn change(&self, change: Change) -> Result<Arc<Snapshot>> {
        let (seq, event) = {
            let mut guard = self.lock_inner()?;
            let inner = guard.as_mut().ok_or(Error::Closed)?;
            inner.store.begin_immediate()?;
            let (prev, next, patch) = match self.apply(inner, change) {
                Ok(done) => done,
                Err(e) => {
                    inner.store.rollback();
                    return Err(e);
                }
            };
            inner.store.commit()?;
            if let Some(cache) = inner.cache.as_mut() {
                // Our own commit moves the pager's version by exactly one. The header changed too; it is recorded again on the
                // next check (recording it now could hide a commit that another process makes
                // right after ours).
                cache.stored = Some(Arc::clone(&next));
                cache.pager_version = cache.pager_version.map(|v| v.wrapping_add(1));
                cache.header = None;
            }
            inner.seq += 1;
            let patch = patch.map(Patch::new);
            (inner.seq, StateChange { next, prev, patch })
        };
        let next = Arc::clone(&event.next);
        self.hooks.deliver(seq, event)?;
        Ok(next)
    }

    /// Inside the write transaction: read the latest state, compute the next one, check and
    /// write it.
    fn apply(
        &self,
        inner: &mut Inner,
        change: Change,
    ) -> Result<(Arc<Snapshot>, Arc<Snapshot>, Option<Value>)> {
        let prev = match (self.stored(inner, true), &change) {
            (Ok(Some(state)), _) => state,
            (Ok(None), _) => self.initial()?,
            // A replacement needs nothing of the previous state, so it can repair an entry that
            // no longer decodes; hooks then see `{}` as prev.
            (Err(Error::Corrupt(_)), Change::Replace(_)) => {
                Arc::new(Snapshot::new(Value::Object(Default::default())))
            }
            (Err(e), _) => return Err(e),
        };
        let (next, patch) = match change {
            Change::Merge(Value::Object(patch)) => {
                let next = prev.merge(&patch, self.max_value_bytes)?;
                (next, Some(Value::Object(patch)))
            }
            Change::Merge(_) => unreachable!("patches are checked to be objects"),
            Change::Replace(next) => (check_state(next, self.max_value_bytes, "state")?, None),
        };
        inner.store.write(STATE_KEY, next.json())?;
        Ok((prev, Arc::new(next), patch))
    }
}

/// Encodes a codec-checked state and enforces the size cap.
fn check_state(value: Value, max: usize, what: &str) -> Result<Snapshot> {
    if !codec::is_plain_object(&value) {
        return Err(Error::InvalidArgument(format!(
            "the {what} must be a JSON object, not {}",
            describe(&value)
        )));
    }
    let snapshot = Snapshot::new(value);
    if snapshot.json().len() > max {
        return Err(Error::TooLarge(format!(
            "the encoded {what} would be {} bytes, over max_value_bytes ({max}); nothing was written",
            snapshot.json().len()
        )));
    }
    Ok(snapshot)
}

fn decode_stored(bytes: Vec<u8>) -> Result<Snapshot> {
    let corrupt = |e: Error| Error::Corrupt(e.to_string());
    let value = crate::json::parse(&bytes).map_err(corrupt)?;
    if !codec::is_plain_object(&value) {
        return Err(corrupt(Error::InvalidArgument(
            "not a JSON object".to_string(),
        )));
    }
    codec::validate(&value, 1).map_err(corrupt)?;
    Ok(Snapshot::new(value))
}

fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "a tagged value",
    }
}

fn prefix(e: Error, context: &str) -> Error {
    match e {
        Error::InvalidArgument(m) => Error::InvalidArgument(format!("{context}: {m}")),
        Error::Json(m) => Error::Json(format!("{context}: {m}")),
        Error::Codec(m) => Error::Codec(format!("{context}: {m}")),
        Error::TooLarge(m) => Error::TooLarge(format!("{context}: {m}")),
        other => other,
    }
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let open = lock(&self.inner).is_some();
        f.debug_struct("Agent")
            .field("id", &self.id)
            .field("open", &open)
            .finish_non_exhaustive()
    }
}
