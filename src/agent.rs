//! One agent: one store, one state, its hooks. The safe Rust API the C boundary wraps.

use std::cell::RefCell;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::error::{Error, Result};
use crate::ffi::wal_index::WalHeader;
use crate::fork;
use crate::hooks::{Hooks, InitialStateHook, Patch, StateChange, StateChangedHook, Validator};
use crate::options::{LogRetention, OpenOptions};
use crate::store::{LoggedChange, Store, CHANGE_LOG_KEY};
use crate::value::snapshot::Snapshot;
use crate::value::{accept, json};

static NEXT_AGENT_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// Agents whose initial-state hook or validator is running on this thread: their state lock
    /// is held, so a call into them from the hook would deadlock and is refused instead.
    static IN_LOCKED_HOOK: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// A persistent agent state on one store file. All methods take `&self` and are safe to call
/// from many threads at once; calls on one agent are serialized by an internal lock, which is
/// never held while an on_state_changed hook runs.
pub struct Agent {
    id: u64,
    /// Written with each logged change, so `poll` can tell this handle's changes from others'.
    writer: u64,
    /// Shared with the fork registry (weakly), which may close an inherited connection.
    inner: Arc<Mutex<Option<Inner>>>,
    hooks: Arc<Hooks>,
    initial_hook: Mutex<Option<Arc<dyn InitialStateHook>>>,
    validator: Mutex<Option<Arc<dyn Validator>>>,
    initial_state: Arc<Snapshot>,
    max_value_bytes: usize,
}

struct Inner {
    store: Store,
    /// The stored state as last confirmed; `None` until first read.
    cache: Option<Cache>,
    /// Sequence number of the last change handed to the hooks' turnstile.
    seq: u64,
    /// The last change this handle's hooks were given (or the state when it opened).
    cursor: Cursor,
    /// Changes of other handles were pruned from the log before this handle could deliver
    /// them; reported by the next `poll`.
    gap: Option<(u64, u64)>,
}

struct Cursor {
    version: u64,
    state: Arc<Snapshot>,
}

#[derive(Clone)]
struct Cache {
    /// The pager's data version when the cache was last confirmed (plus one after our own
    /// commit, which moves it by exactly one).
    pager_version: Option<u32>,
    /// The WAL-index header seen just before a version was last confirmed; while the header is
    /// unchanged, no connection has committed and the cache is current.
    header: Option<WalHeader>,
    /// `None`: nothing stored.
    stored: Option<Arc<Snapshot>>,
    /// The stored state's version (0: nothing stored).
    version: u64,
    /// The change log's retention; `None` when the log is off.
    log: Option<LogRetention>,
}

/// What is committed right now, as seen by one handle.
struct Current {
    stored: Option<Arc<Snapshot>>,
    version: u64,
    log: Option<LogRetention>,
}

/// Where a check of the cache runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    /// Outside any transaction.
    Autocommit,
    /// Inside this connection's write transaction: no other connection can commit, so the
    /// live WAL-index header describes exactly what the transaction sees.
    WriteTransaction,
    /// Inside this connection's read transaction (which has already read): others may commit
    /// meanwhile, so the live header may be newer than what the transaction sees, and must not
    /// be recorded.
    ReadTransaction,
}

enum Change {
    Merge(Value),
    Replace(Value),
}

/// A state together with its version (0: nothing stored, this is the initial state).
#[derive(Debug, Clone)]
pub struct Versioned {
    pub state: Arc<Snapshot>,
    pub version: u64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A writer id unique to this handle among all processes (random per process, counted within).
fn new_writer_id(agent_id: u64) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u64(agent_id);
    h.finish()
}

impl Agent {
    /// Opens the store at `path` (created when absent unless `read_only`).
    pub fn open(path: &Path, options: &OpenOptions) -> Result<Agent> {
        let max = options.max_value_bytes;
        let initial = match &options.initial_state {
            None => Value::Object(Default::default()),
            Some(v) => v.clone(),
        };
        let initial = Arc::new(accept::state_from_value(initial, max, "initial_state")?);
        let store = Store::open(path, &options.store_options())?;
        let tracker = store.tracker();
        let id = NEXT_AGENT_ID.fetch_add(1, Ordering::Relaxed);
        let agent = Agent {
            id,
            writer: new_writer_id(id),
            inner: Arc::new(Mutex::new(Some(Inner {
                store,
                cache: None,
                seq: 0,
                cursor: Cursor {
                    version: 0,
                    state: Arc::clone(&initial),
                },
                gap: None,
            }))),
            hooks: Arc::new(Hooks::default()),
            initial_hook: Mutex::new(None),
            validator: Mutex::new(None),
            initial_state: initial,
            max_value_bytes: max,
        };
        if let Some(tracker) = tracker {
            let owner: Arc<dyn fork::Retire> = agent.inner.clone();
            fork::register(tracker, Arc::downgrade(&owner));
        }
        {
            let mut guard = agent.lock_inner()?;
            let inner = guard.as_mut().ok_or(Error::Closed)?;
            if let Some(retention) = options.change_log {
                agent.configure_log(inner, retention)?;
            }
            // Changes committed before this handle opened are not delivered to its hooks. A
            // stored state that no longer decodes does not stop the open: reads report it, and
            // a replacement repairs it.
            inner.cursor = match agent.current(inner, Context::Autocommit) {
                Ok(current) => Cursor {
                    version: current.version,
                    state: current
                        .stored
                        .unwrap_or_else(|| Arc::clone(&agent.initial_state)),
                },
                Err(Error::Corrupt(_)) => Cursor {
                    version: inner.store.read_state()?.map_or(0, |(_, v)| v),
                    state: Arc::new(Snapshot::new(Value::Object(Default::default()))),
                },
                Err(e) => return Err(e),
            };
        }
        Ok(agent)
    }

    /// Switches the change log on (with this retention), off (`None`), or leaves it when the
    /// store already has this setting.
    fn configure_log(&self, inner: &mut Inner, retention: Option<LogRetention>) -> Result<()> {
        let unchanged = match self.current(inner, Context::Autocommit) {
            Ok(current) => current.log == retention,
            Err(Error::Corrupt(_)) => false, // write the setting all the same
            Err(e) => return Err(e),
        };
        if unchanged {
            return Ok(());
        }
        inner.store.begin_immediate()?;
        let result = (|| {
            match retention {
                Some(r) => inner.store.write(CHANGE_LOG_KEY, &r.to_json())?,
                None => {
                    inner.store.delete(CHANGE_LOG_KEY)?;
                    inner.store.clear_log()?;
                }
            }
            Ok(())
        })();
        match result {
            Ok(()) => inner.store.commit()?,
            Err(e) => {
                inner.store.rollback();
                return Err(e);
            }
        }
        inner.cache = None;
        Ok(())
    }

    /// The stored state, or the initial state when nothing is stored. Never writes.
    pub fn get_state(&self) -> Result<Arc<Snapshot>> {
        self.get_state_versioned().map(|v| v.state)
    }

    /// The state with its version, read together (version 0: nothing stored).
    pub fn get_state_versioned(&self) -> Result<Versioned> {
        let mut guard = self.lock_inner()?;
        let inner = guard.as_mut().ok_or(Error::Closed)?;
        let current = self.current(inner, Context::Autocommit)?;
        Ok(Versioned {
            state: match current.stored {
                Some(state) => state,
                None => self.initial()?,
            },
            version: current.version,
        })
    }

    /// Merges `patch` (JSON text of an object) by RFC 7396 and returns the full merged state.
    pub fn set_state(&self, patch: &[u8]) -> Result<Arc<Snapshot>> {
        self.set_state_if(patch, None).map(|v| v.state)
    }

    /// Like [`Agent::set_state`], but only when the stored version is `expected` (when given);
    /// otherwise [`Error::Conflict`] and nothing is written. Returns the new state and version.
    pub fn set_state_if(&self, patch: &[u8], expected: Option<u64>) -> Result<Versioned> {
        self.refuse_reentry()?;
        let patch = self.parse_input(patch, "patch")?;
        self.change(Change::Merge(patch), expected)
    }

    /// Replaces the state with `next` (JSON text of an object) and returns it.
    pub fn replace_state(&self, next: &[u8]) -> Result<Arc<Snapshot>> {
        self.replace_state_if(next, None).map(|v| v.state)
    }

    /// Like [`Agent::replace_state`], but only when the stored version is `expected` (when
    /// given); otherwise [`Error::Conflict`] and nothing is written.
    pub fn replace_state_if(&self, next: &[u8], expected: Option<u64>) -> Result<Versioned> {
        self.refuse_reentry()?;
        let next = self.parse_input(next, "state")?;
        self.change(Change::Replace(next), expected)
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
        self.replace_slot(&self.initial_hook, hook)
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

    /// Sets (or, with `None`, removes) the validation gate: it sees every change of this
    /// handle inside the write transaction, after the merge and the codec and size checks, and
    /// an `Err` rejects the change ([`Error::Rejected`], nothing written).
    pub fn set_validator(&self, validator: Option<Arc<dyn Validator>>) -> Result<()> {
        self.replace_slot(&self.validator, validator)
    }

    /// Delivers to this handle's hooks, in commit order, every change that other handles or
    /// processes committed since this handle's last delivery (needs the change log). Returns
    /// how many were delivered. If the log no longer holds some of them (pruned), they are
    /// skipped and [`Error::Gap`] says which; the next poll continues from the current state.
    pub fn poll(&self) -> Result<usize> {
        let (delivered, result) = self.poll_counted();
        result.map(|()| delivered)
    }

    /// [`Agent::poll`], also telling how many changes were delivered when it fails with a gap
    /// or a hook failure (the deliveries happened all the same).
    pub fn poll_counted(&self) -> (usize, Result<()>) {
        match self.poll_events() {
            Err(e) => (0, Err(e)),
            Ok((events, gap)) => {
                let delivered = events.len();
                let delivery = self.deliver_all(events);
                if let Some((from, to)) = gap {
                    return (
                        delivered,
                        Err(Error::Gap(format!(
                            "changes {from} to {to} were pruned from the change log before this \
                             handle delivered them; the state is current, those intermediate \
                             changes are lost"
                        ))),
                    );
                }
                (delivered, delivery)
            }
        }
    }

    /// The events a poll delivers, and the gap it reports.
    #[allow(clippy::type_complexity)]
    fn poll_events(&self) -> Result<(Vec<(u64, StateChange)>, Option<(u64, u64)>)> {
        let (events, gap) = {
            let mut guard = self.lock_inner()?;
            let inner = guard.as_mut().ok_or(Error::Closed)?;
            inner.store.begin_read()?;
            let result = (|| {
                inner.store.data_version()?; // starts the read transaction
                let current = self.current(inner, Context::ReadTransaction)?;
                if current.log.is_none() {
                    return Err(Error::InvalidArgument(
                        "the change log is off: open the store with the change_log option"
                            .to_string(),
                    ));
                }
                self.foreign_changes(&inner.store, &inner.cursor, &current)
            })();
            inner.store.rollback();
            let events = Self::take_foreign(inner, result?);
            (events, inner.gap.take())
        };
        Ok((events, gap))
    }

    /// The retained changes with a version above `after`, oldest first, as a JSON array of
    /// `{"version", "at" (ms since the epoch), "patch" (null for a replace), "next"}`.
    pub fn changes_since(&self, after: u64) -> Result<Vec<u8>> {
        let mut guard = self.lock_inner()?;
        let inner = guard.as_mut().ok_or(Error::Closed)?;
        inner.store.begin_read()?;
        let result = (|| {
            inner.store.data_version()?;
            let current = self.current(inner, Context::ReadTransaction)?;
            if current.log.is_none() {
                return Err(Error::InvalidArgument(
                    "the change log is off: open the store with the change_log option".into(),
                ));
            }
            if after > current.version {
                return Err(Error::InvalidArgument(format!(
                    "version {after} is in the future (the state is at version {})",
                    current.version
                )));
            }
            let changes = inner.store.changes_after(after)?;
            if after < current.version && changes.first().map(|c| c.version) != Some(after + 1) {
                return Err(Error::Gap(format!(
                    "the change log no longer holds the changes after version {after} (oldest retained: {})",
                    changes.first().map(|c| c.version.to_string()).unwrap_or_else(|| "none".into())
                )));
            }
            let mut out = b"[".to_vec();
            for (i, c) in changes.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(
                    format!("{{\"version\":{},\"at\":{},\"patch\":", c.version, c.at_ms).as_bytes(),
                );
                out.extend_from_slice(c.patch.as_deref().unwrap_or(b"null"));
                out.extend_from_slice(b",\"next\":");
                out.extend_from_slice(&c.next);
                out.push(b'}');
            }
            out.push(b']');
            Ok(out)
        })();
        inner.store.rollback();
        result
    }

    /// The state at a version: the current one, one the change log retains, or version 0 (the
    /// initial state). [`Error::Gap`] when the log does not retain it.
    pub fn state_at(&self, version: u64) -> Result<Arc<Snapshot>> {
        let mut guard = self.lock_inner()?;
        let inner = guard.as_mut().ok_or(Error::Closed)?;
        self.state_at_locked(inner, version)
    }

    fn state_at_locked(&self, inner: &mut Inner, version: u64) -> Result<Arc<Snapshot>> {
        inner.store.begin_read()?;
        let result = (|| {
            inner.store.data_version()?;
            let current = self.current(inner, Context::ReadTransaction)?;
            if version == current.version {
                return Ok(current.stored);
            }
            if version == 0 {
                return Ok(None);
            }
            if version > current.version {
                return Err(Error::InvalidArgument(format!(
                    "version {version} is in the future (the state is at version {})",
                    current.version
                )));
            }
            match inner.store.change_at(version)? {
                Some(c) => Ok(Some(Arc::new(accept::decode_stored(&c.next)?))),
                None => Err(Error::Gap(format!(
                    "version {version} is not retained by the change log"
                ))),
            }
        })();
        inner.store.rollback();
        match result? {
            Some(state) => Ok(state),
            None => self.initial(),
        }
    }

    /// Point-in-time recovery: replaces the state with the state at `version` (see
    /// [`Agent::state_at`]), as a new change.
    pub fn restore(&self, version: u64) -> Result<Versioned> {
        let old = {
            let mut guard = self.lock_inner()?;
            let inner = guard.as_mut().ok_or(Error::Closed)?;
            self.state_at_locked(inner, version)?
        };
        self.change(Change::Replace(old.to_value()), None)
    }

    /// Closes the store. Later calls fail with [`Error::Closed`]; hooks are dropped once no
    /// running delivery uses them.
    pub fn close(&self) -> Result<()> {
        let inner = self.lock_inner()?.take().ok_or(Error::Closed)?;
        drop(inner);
        self.hooks.clear();
        let initial_hook = lock(&self.initial_hook).take();
        drop(initial_hook);
        let validator = lock(&self.validator).take();
        drop(validator);
        Ok(())
    }

    /// The largest encoded state this agent accepts.
    pub fn max_value_bytes(&self) -> usize {
        self.max_value_bytes
    }

    fn refuse_reentry(&self) -> Result<()> {
        if IN_LOCKED_HOOK.with(|ids| ids.borrow().contains(&self.id)) {
            return Err(Error::Busy(
                "called from inside this agent's own initial-state hook or validator (which run \
                 under its lock); they must not use their own handle"
                    .to_string(),
            ));
        }
        Ok(())
    }

    /// Locks the handle's state, first making sure its connection belongs to this process
    /// (after a `fork()`, the child's first call reconnects, with an empty read cache).
    fn lock_inner(&self) -> Result<MutexGuard<'_, Option<Inner>>> {
        self.refuse_reentry()?;
        let mut guard = lock(&self.inner);
        if let Some(inner) = guard.as_mut() {
            if inner.store.ensure_current()? {
                inner.cache = None;
            }
        }
        Ok(guard)
    }

    /// Runs `f` marked as a hook that holds this agent's lock (calls back into the agent from
    /// this thread are refused instead of deadlocking).
    fn locked_hook<T>(&self, f: impl FnOnce() -> T) -> T {
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

    fn parse_input(&self, text: &[u8], what: &str) -> Result<Value> {
        accept::parse_object(text, self.max_value_bytes, what)
    }

    /// What is committed now, from the cache when no connection has committed since it was
    /// filled.
    ///
    /// Two tests, cheapest first: the WAL-index header is unchanged (no commit anywhere, a few
    /// loads); else the pager's data version is unchanged (a function call, current inside a
    /// transaction; outside one, `PRAGMA data_version` runs first to bring it up to date);
    /// else the entries are read and decoded again (in one read transaction).
    fn current(&self, inner: &mut Inner, context: Context) -> Result<Current> {
        // Read the header *before* the version: a commit landing in between then shows up as a
        // header change next time, never as a missed update.
        let header = inner.store.wal_header();
        if let Some(cache) = &inner.cache {
            if header.is_some() && cache.header == header {
                return Ok(cache.current());
            }
        }
        if context == Context::Autocommit {
            inner.store.data_version()?; // a read transaction: refreshes the pager's version
        }
        // A header read before the transaction's snapshot (autocommit: the snapshot is taken
        // after it) or while no one else can commit (write transaction) may be recorded with
        // what the snapshot shows; one read during a read transaction may be newer than it.
        let header = match context {
            Context::ReadTransaction => None,
            Context::Autocommit | Context::WriteTransaction => header,
        };
        let version = inner.store.data_version_in_transaction();
        if let Some(cache) = &mut inner.cache {
            if version.is_some() && cache.pager_version == version {
                cache.header = header;
                return Ok(cache.current());
            }
        }
        let cache = match context {
            Context::WriteTransaction | Context::ReadTransaction => {
                Self::reread(&inner.store, header)?
            }
            Context::Autocommit => {
                inner.store.begin_read()?;
                let result = Self::reread(&inner.store, header);
                inner.store.rollback();
                result?
            }
        };
        let current = cache.current();
        inner.cache = Some(cache);
        Ok(current)
    }

    /// Reads the state, its version and the log's retention (inside a transaction).
    fn reread(store: &Store, header: Option<WalHeader>) -> Result<Cache> {
        let (stored, version) = match store.read_state()? {
            None => (None, 0),
            Some((bytes, version)) => (Some(Arc::new(accept::decode_stored(&bytes)?)), version),
        };
        let log = Self::read_retention(store)?;
        Ok(Cache {
            pager_version: store.data_version_in_transaction(),
            header,
            stored,
            version,
            log,
        })
    }

    /// The change log's retention as stored (`None`: the log is off).
    fn read_retention(store: &Store) -> Result<Option<LogRetention>> {
        match store.read(CHANGE_LOG_KEY)? {
            None => Ok(None),
            Some(text) => LogRetention::from_json(&text)
                .map(Some)
                .map_err(|e| Error::Corrupt(format!("the change log settings: {e}"))),
        }
    }

    /// The initial state: the hook's answer when a hook is set, else the option's.
    fn initial(&self) -> Result<Arc<Snapshot>> {
        let hook = lock(&self.initial_hook).clone();
        let Some(hook) = hook else {
            return Ok(Arc::clone(&self.initial_state));
        };
        let answer = self.locked_hook(|| hook.initial_state());
        let text = answer.map_err(|m| Error::Hook(format!("initial-state hook: {m}")))?;
        let value = self
            .parse_input(&text, "answer")
            .map_err(|e| accept::in_context(e, "initial-state hook"))?;
        accept::encode_state(value, self.max_value_bytes, "initial-state hook's answer")
            .map(Arc::new)
    }

    /// Changes of other handles committed after this handle's cursor and up to `current`,
    /// as hook events in commit order (the log must be on). A change whose predecessor the log
    /// no longer holds cannot be given its real `prev`: it is skipped and reported as a gap.
    /// Pure: the caller moves the cursor once the events are sure to be delivered.
    fn foreign_changes(
        &self,
        store: &Store,
        cursor: &Cursor,
        current: &Current,
    ) -> Result<Foreign> {
        let mut foreign = Foreign {
            events: Vec::new(),
            gap: None,
            cursor: Cursor {
                version: cursor.version,
                state: Arc::clone(&cursor.state),
            },
        };
        if current.version <= cursor.version {
            return Ok(foreign);
        }
        let mut prev = Arc::clone(&cursor.state);
        let mut expected = cursor.version + 1;
        for c in store.changes_after(cursor.version)? {
            if c.version > current.version {
                break;
            }
            let next = Arc::new(accept::decode_stored(&c.next)?);
            if let (Some(first_prev), true) = (c.prev, c.version == expected) {
                // The first change of a store: its prev is the writer's initial state.
                prev = Arc::new(accept::decode_stored(&first_prev)?);
            }
            if c.version != expected {
                let from = foreign.gap.map_or(expected, |(from, _)| from);
                foreign.gap = Some((from, c.version));
            } else if c.writer != self.writer {
                let patch = match c.patch {
                    Some(p) => {
                        Some(Patch::new(json::parse(&p).map_err(|e| {
                            Error::Corrupt(format!("a logged patch: {e}"))
                        })?))
                    }
                    None => None,
                };
                foreign.events.push(StateChange {
                    next: Arc::clone(&next),
                    prev,
                    patch,
                    version: c.version,
                });
            }
            prev = next;
            expected = c.version + 1;
        }
        if expected <= current.version {
            let from = foreign.gap.map_or(expected, |(from, _)| from);
            foreign.gap = Some((from, current.version));
        }
        foreign.cursor = Cursor {
            version: current.version,
            state: current
                .stored
                .clone()
                .unwrap_or_else(|| Arc::clone(&self.initial_state)),
        };
        Ok(foreign)
    }

    /// Moves the cursor past `foreign` and numbers its events for the turnstile (after which
    /// they must be delivered).
    fn take_foreign(inner: &mut Inner, foreign: Foreign) -> Vec<(u64, StateChange)> {
        inner.cursor = foreign.cursor;
        if let Some((from, to)) = foreign.gap {
            let from = inner.gap.map_or(from, |(f, _)| f);
            inner.gap = Some((from, to));
        }
        foreign
            .events
            .into_iter()
            .map(|e| {
                inner.seq += 1;
                (inner.seq, e)
            })
            .collect()
    }

    fn deliver_all(&self, events: Vec<(u64, StateChange)>) -> Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        self.hooks.deliver_all(events)
    }

    fn change(&self, change: Change, expected: Option<u64>) -> Result<Versioned> {
        let (events, result) = {
            let mut guard = self.lock_inner()?;
            let inner = guard.as_mut().ok_or(Error::Closed)?;
            inner.store.begin_immediate()?;
            let applied = match self.apply(inner, change, expected) {
                Ok(applied) => applied,
                Err(e) => {
                    inner.store.rollback();
                    return Err(e);
                }
            };
            inner.store.commit()?;
            let Applied {
                prev,
                next,
                patch,
                version,
                log,
                foreign,
            } = applied;
            let mut events = match foreign {
                Some(foreign) => Self::take_foreign(inner, foreign),
                None => Vec::new(),
            };
            if let Some(cache) = inner.cache.as_mut() {
                // Our own commit moves the pager's version by exactly one. The header changed
                // too; it is recorded again on the next check (recording it now could hide a
                // commit that another process makes right after ours).
                cache.stored = Some(Arc::clone(&next));
                cache.version = version;
                cache.log = log;
                cache.pager_version = cache.pager_version.map(|v| v.wrapping_add(1));
                cache.header = None;
            }
            inner.cursor = Cursor {
                version,
                state: Arc::clone(&next),
            };
            inner.seq += 1;
            events.push((
                inner.seq,
                StateChange {
                    next: Arc::clone(&next),
                    prev,
                    patch,
                    version,
                },
            ));
            (
                events,
                Versioned {
                    state: next,
                    version,
                },
            )
        };
        self.deliver_all(events)?;
        Ok(result)
    }

    /// Inside the write transaction: read the latest state, compute the next one, check it
    /// (codec and size, then the validator) and write it, with its log entry when the log is
    /// on. Changes of other handles not yet delivered to this handle's hooks come first in
    /// `events`, so hooks see every logged change in commit order.
    fn apply(&self, inner: &mut Inner, change: Change, expected: Option<u64>) -> Result<Applied> {
        let (prev, version, log) = match (self.current(inner, Context::WriteTransaction), &change) {
            (Ok(current), _) => {
                let prev = match &current.stored {
                    Some(state) => Arc::clone(state),
                    None => self.initial()?,
                };
                (prev, current.version, current.log)
            }
            // A replacement needs nothing of the previous state, so it can repair an entry that
            // no longer decodes; hooks then see `{}` as prev.
            (Err(Error::Corrupt(_)), Change::Replace(_)) => {
                let version = inner.store.read_state()?.map_or(0, |(_, v)| v);
                (
                    Arc::new(Snapshot::new(Value::Object(Default::default()))),
                    version,
                    Self::read_retention(&inner.store)?,
                )
            }
            (Err(e), _) => return Err(e),
        };
        if let Some(expected) = expected {
            if expected != version {
                return Err(Error::Conflict(format!(
                    "expected version {expected}, but the state is at version {version}; nothing was written"
                )));
            }
        }
        let (next, patch) = match change {
            Change::Merge(Value::Object(patch)) => {
                let next = prev.merge(&patch, self.max_value_bytes)?;
                (next, Some(Value::Object(patch)))
            }
            Change::Merge(_) => unreachable!("patches are checked to be objects"),
            Change::Replace(next) => (
                accept::encode_state(next, self.max_value_bytes, "state")?,
                None,
            ),
        };
        let next = Arc::new(next);
        let version = version + 1;
        let patch = patch.map(Patch::new);
        let validator = lock(&self.validator).clone();
        if let Some(validator) = validator {
            let proposed = StateChange {
                next: Arc::clone(&next),
                prev: Arc::clone(&prev),
                patch,
                version,
            };
            self.locked_hook(|| validator.validate(&proposed))
                .map_err(|m| Error::Rejected(format!("the validator rejected the change: {m}")))?;
            return self.write_applied(inner, prev, next, proposed.patch, version, log);
        }
        self.write_applied(inner, prev, next, patch, version, log)
    }

    fn write_applied(
        &self,
        inner: &mut Inner,
        prev: Arc<Snapshot>,
        next: Arc<Snapshot>,
        patch: Option<Patch>,
        version: u64,
        log: Option<LogRetention>,
    ) -> Result<Applied> {
        inner.store.write_state(next.json(), version)?;
        let mut foreign = None;
        if let Some(retention) = log {
            // Other handles' pending changes are read before this change is logged: logging
            // prunes, and could drop the predecessor of one of them.
            let before = Current {
                stored: Some(Arc::clone(&prev)),
                version: version - 1,
                log,
            };
            foreign = Some(self.foreign_changes(&inner.store, &inner.cursor, &before)?);
            let now = now_ms();
            inner.store.log_change(
                &LoggedChange {
                    version,
                    at_ms: now,
                    writer: self.writer,
                    patch: patch.as_ref().map(|p| p.json().to_vec()),
                    next: next.json().to_vec(),
                    prev: (version == 1).then(|| prev.json().to_vec()),
                },
                retention.keep_last,
                retention
                    .keep_seconds
                    .map(|s| now.saturating_sub(s.saturating_mul(1000) as i64)),
            )?;
        }
        Ok(Applied {
            prev,
            next,
            patch,
            version,
            log,
            foreign,
        })
    }
}

/// A change written inside the transaction, waiting for the commit.
struct Applied {
    prev: Arc<Snapshot>,
    next: Arc<Snapshot>,
    patch: Option<Patch>,
    version: u64,
    log: Option<LogRetention>,
    /// With the log on: changes of other handles to deliver first.
    foreign: Option<Foreign>,
}

/// Changes of other handles not yet delivered to this handle's hooks.
struct Foreign {
    events: Vec<StateChange>,
    gap: Option<(u64, u64)>,
    /// Where the cursor goes once they are delivered.
    cursor: Cursor,
}

impl Cache {
    fn current(&self) -> Current {
        Current {
            stored: self.stored.clone(),
            version: self.version,
            log: self.log,
        }
    }
}

/// The fork registry's way in: an inherited connection is closed (safely, see [`fork`]) when
/// no call holds the handle's lock.
impl fork::Retire for Mutex<Option<Inner>> {
    fn try_retire(&self) -> bool {
        let mut guard = match self.try_lock() {
            Ok(guard) => guard,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return false,
        };
        if let Some(inner) = guard.as_mut() {
            inner.store.retire_inherited();
            inner.cache = None;
        }
        true
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
