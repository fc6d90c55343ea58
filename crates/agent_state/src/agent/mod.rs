//! One agent: one store, one state, its hooks. The safe Rust API the C boundary wraps.
//!
//! The handle's API is split by job: `cache` (the read cache and its freshness test), `hot`
//! (reads of a hot handle, from the thread's own copy, without the lock),
//! `write` (set, replace, restore: the write path), `feed` (other handles' changes to this
//! handle's hooks, `poll`), `history` (the change log's queries), `hooks` (hook slots and
//! the re-entry guard), `schema` (schema versions and the migration of older states). Storage is reached only through `store::Backend`; values come
//! in only through `value::accept` (a patch, a state, a stored state) and change only by
//! `Snapshot::merge`.

mod cache;
mod cap;
mod feed;
mod history;
mod hooks;
mod hot;
mod push;
mod schema;
mod write;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use serde_json::Value;

use self::cache::{Cache, Context};
use self::cap::Cap;
use self::hot::Hot;
pub use self::hot::{Held, Ticket};
use crate::backends;
use crate::error::{Error, Result};
use crate::hooks::{Hooks, InitialStateHook, Validator};
use crate::options::{LogRetention, OpenOptions, MAX_MAX_VALUE_BYTES};
use crate::store::{Backend, Retire, Txn};
use crate::value::accept::{self, StateInput};
use crate::value::snapshot::Snapshot;

static NEXT_AGENT_ID: AtomicU64 = AtomicU64::new(1);

/// A persistent agent state on one store file. All methods take `&self` and are safe to call
/// from many threads at once; calls on one agent are serialized by an internal lock, which is
/// never held while an on_state_changed hook runs.
pub struct Agent {
    id: u64,
    /// Written with each logged change, so `poll` can tell this handle's changes from others'.
    writer: u64,
    /// Shared with the store's fork registry (weakly), which may close an inherited connection.
    inner: Arc<Mutex<Option<Inner>>>,
    hooks: Arc<Hooks>,
    initial_hook: Mutex<Option<Arc<dyn InitialStateHook>>>,
    validator: Mutex<Option<Arc<dyn Validator>>>,
    initial_state: Arc<Snapshot>,
    /// The cap on an encoded state, and where it came from (see `cap`).
    cap: Cap,
    /// What readers check before they trust their own copy of the state, without the lock.
    hot: Hot,
    /// The schema version this handle declares and its steps (see `schema`).
    schema: schema::Plan,
    /// Opened `read_only`: states of every schema version are read as stored.
    read_only: bool,
    /// The state the last locked read confirmed, with its ticket, for [`Agent::read_now`] on
    /// threads that have no copy of their own (emptied by `close`).
    latest: Mutex<Option<(Arc<Held>, Ticket)>>,
    /// The store's watcher pushing other handles' changes to the hooks (see `push`); closed by
    /// `close`, and by drop with the handle.
    pushed: Mutex<Option<crate::watch::Watch>>,
}

/// What the agent's lock guards: the connection, and what this handle knows of the store.
struct Inner {
    store: Box<dyn Backend>,
    view: View,
}

/// What one handle knows of its store, apart from the connection (so that both can be
/// borrowed at once: a transaction borrows the connection while the view is updated).
struct View {
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

/// A state together with its version (0: nothing stored, this is the initial state).
#[derive(Debug, Clone)]
pub struct Versioned {
    /// The state (the initial state at version 0).
    pub state: Arc<Snapshot>,
    /// How many changes the store has committed: 1 after the first write.
    pub version: u64,
}

/// What a write did: the state and version after it, and whether it committed a change. A write
/// whose result is the stored state byte for byte commits nothing (`committed` false: the state
/// and version are the stored ones, which another handle may have written).
#[derive(Debug, Clone)]
pub struct Written {
    /// The state after the write.
    pub state: Arc<Snapshot>,
    /// Its version: the new one when `committed`, else the stored one.
    pub version: u64,
    /// True when this write committed a change (and `version` is the one it made).
    pub committed: bool,
}

impl Written {
    /// The state and version, without the flag.
    pub fn versioned(self) -> Versioned {
        Versioned {
            state: self.state,
            version: self.version,
        }
    }
}

/// What one locked read found: the state read, with its ticket, or the schema version of a
/// stored state the handle must upgrade (or refuse) before reading it.
type ReadOnce = std::result::Result<(Arc<Held>, Option<Ticket>), u32>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
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
    /// Opens the store at `path` (created when absent unless `read_only`); the store layer
    /// reads a `postgres://` path as a server. The API's forms are [`Agent::open`] and
    /// [`Agent::open_with`], which take a [`Location`](crate::Location).
    pub(crate) fn open_path(path: &Path, options: &OpenOptions) -> Result<Agent> {
        let initial = match &options.initial_state {
            None => Value::Object(Default::default()),
            Some(v) => v.clone(),
        };
        // Checked before anything is opened, against the handle's own cap when it has one
        // (the store's is known once the store is open, and checked then).
        let max = options.max_value_bytes.unwrap_or(MAX_MAX_VALUE_BYTES);
        let initial = Arc::new(accept::state(StateInput::InitialOption(initial), max)?);
        let mut store = backends::open(path, &options.store_options())?;
        let stored_cap = Self::store_cap(&mut *store, options);
        store.end_call();
        let cap = Cap::resolve(options, stored_cap?);
        if initial.len() > cap.bytes {
            return Err(Error::TooLarge(format!(
                "the initial state is {} bytes, over {}",
                initial.len(),
                cap.describe()
            )));
        }
        let id = NEXT_AGENT_ID.fetch_add(1, Ordering::Relaxed);
        let view = View {
            cache: None,
            seq: 0,
            cursor: Cursor {
                version: 0,
                state: Arc::clone(&initial),
            },
            gap: None,
        };
        // The store registers the cell (weakly) before anything can lock it.
        let inner = Arc::new_cyclic(|cell: &Weak<Mutex<Option<Inner>>>| {
            let owner: Weak<dyn Retire> = cell.clone();
            store.register_owner(owner);
            Mutex::new(Some(Inner { store, view }))
        });
        let agent = Agent {
            id,
            writer: new_writer_id(id),
            inner,
            hooks: Arc::new(Hooks::default()),
            initial_hook: Mutex::new(None),
            validator: Mutex::new(None),
            initial_state: initial,
            cap,
            hot: Hot::default(),
            schema: schema::Plan::new(options.schema_version, &options.schema_steps),
            read_only: options.read_only,
            latest: Mutex::new(None),
            pushed: Mutex::new(None),
        };
        {
            let mut guard = agent.lock_inner()?;
            let inner = guard.as_mut().ok_or(Error::Closed)?;
            if let Some(retention) = options.change_log {
                Self::configure_log(inner, retention)?;
            }
            // Changes committed before this handle opened are not delivered to its hooks. A
            // stored state that no longer decodes does not stop the open: reads report it, and
            // a replacement repairs it.
            let Inner { store, view } = inner;
            view.cursor = match cache::current(&**store, &mut view.cache, Context::Autocommit) {
                Ok(current) => Cursor {
                    version: current.version,
                    state: current
                        .stored
                        .unwrap_or_else(|| Arc::clone(&agent.initial_state)),
                },
                Err(Error::Corrupt(_)) => Cursor {
                    version: store.stored_version()?,
                    state: Arc::new(Snapshot::new(Value::Object(Default::default()))),
                },
                Err(e) => return Err(e),
            };
        }
        Ok(agent)
    }

    /// The store's cap: recorded first when `store_max_value_bytes` gives one that differs.
    fn store_cap(store: &mut dyn Backend, options: &OpenOptions) -> Result<Option<usize>> {
        let stored = store.stored_cap()?;
        match options.store_max_value_bytes {
            Some(bytes) if stored != Some(bytes) => {
                store.set_stored_cap(bytes)?;
                Ok(Some(bytes))
            }
            _ => Ok(stored),
        }
    }

    /// Switches the change log on (with this retention), off (`None`), or leaves it when the
    /// store already has this setting.
    fn configure_log(inner: &mut Inner, retention: Option<LogRetention>) -> Result<()> {
        let Inner { store, view } = inner;
        let unchanged = match cache::current(&**store, &mut view.cache, Context::Autocommit) {
            Ok(current) => current.log == retention,
            Err(Error::Corrupt(_)) => false, // write the setting all the same
            Err(e) => return Err(e),
        };
        if unchanged {
            return Ok(());
        }
        let written = Txn::write(&**store).and_then(|txn| {
            // The state as the transaction sees it becomes its base, so that the patches
            // stored while the log was off never become log entries, nor are those the
            // state needs dropped with the log (a state that no longer decodes stays as it
            // is: a replacement repairs it).
            match cache::current(&*txn, &mut view.cache, Context::WriteTransaction) {
                Ok(current) => {
                    if let Some(state) = &current.stored {
                        txn.rebase(state.json(), current.version)?;
                    }
                }
                Err(Error::Corrupt(_)) => {}
                Err(e) => return Err(e),
            }
            txn.set_log_retention(retention)?;
            txn.commit()
        });
        view.cache = None;
        written.map_err(|e| match e {
            // The server aborted the transaction to resolve a conflict (write::locked_write):
            // nothing was written; the caller may try again.
            Error::Stale(_) => Error::Busy(
                "the server aborted the change log's setting to resolve a conflict with \
                 another transaction; nothing was written, try again"
                    .to_string()
                    .into(),
            ),
            e => e,
        })
    }

    /// The stored state, or the initial state when nothing is stored. Never writes.
    pub fn get_state(&self) -> Result<Arc<Snapshot>> {
        self.read().map(|held| Arc::clone(held.state()))
    }

    /// The state with its version, read together (version 0: nothing stored).
    pub fn get_state_versioned(&self) -> Result<Versioned> {
        self.read().map(|held| Versioned {
            state: Arc::clone(held.state()),
            version: held.version(),
        })
    }

    /// The value at one place of the state, by an RFC 6901 JSON Pointer (`/messages/0/text`;
    /// `""` is the whole state), as compact JSON text: only that part is encoded, whatever the
    /// state's size. Read as [`Agent::get_state`] reads (the initial state while nothing is
    /// stored; never writes).
    ///
    /// Errors: [`Error::InvalidArgument`] when `pointer` is not a JSON Pointer (a bad escape
    /// such as `~2`, no leading `/`); [`Error::NoSuchPath`] when the state has nothing there
    /// (a member that does not exist, an index out of range or with a leading zero, `-`);
    /// those of [`Agent::get_state`].
    ///
    /// ```
    /// use agent_state::{Agent, OpenOptions};
    ///
    /// let agent = Agent::open_with(":memory:", &OpenOptions::default())?;
    /// agent.set_state(br#"{"messages":[{"text":"hi"},{"text":"there"}]}"#)?;
    /// assert_eq!(agent.get_path("/messages/1/text")?, br#""there""#);
    /// # Ok::<(), agent_state::Error>(())
    /// ```
    pub fn get_path(&self, pointer: &str) -> Result<Vec<u8>> {
        let parsed = parse_pointer(pointer)?;
        let held = self.read()?;
        held.state()
            .path_json(&parsed)
            .map_err(|e| at_path(e.into(), pointer))
    }

    /// The last `n` elements of the array at `pointer` (an RFC 6901 JSON Pointer), as a JSON
    /// array of at most `n` elements, oldest first: the spelling of "the last message" is
    /// `get_tail("/messages", 1)`. Only those elements are encoded.
    ///
    /// Errors: those of [`Agent::get_path`], and [`Error::InvalidArgument`] when the value
    /// there is not an array.
    pub fn get_tail(&self, pointer: &str, n: usize) -> Result<Vec<u8>> {
        let parsed = parse_pointer(pointer)?;
        let held = self.read()?;
        held.state()
            .tail_json(&parsed, n)
            .map_err(|e| at_path(e.into(), pointer))
    }

    /// The state with its version, as [`Agent::get_state_versioned`], in a holder of this
    /// thread's: when nothing was committed since this thread's last read of the handle, it
    /// takes no lock and writes no memory another thread reads (see the `hot` module). For callers that
    /// hand out many reads of one handle on several threads (the C ABI's buffers share it).
    pub fn read(&self) -> Result<Arc<Held>> {
        self.refuse_reentry()?;
        crate::cancel::check("before it began")?;
        if let Some(held) = hot::lookup(self.id, &self.hot) {
            return Ok(held);
        }
        self.read_locked().map(|(held, _)| held)
    }

    /// [`Agent::read`], with a [`Ticket`] that tells another thread, without the handle's lock
    /// or the store, whether the state read is still the handle's ([`Agent::is_current`]);
    /// `None` when that cannot be known later (nothing stored, a backend without a commit
    /// watch). For bindings whose reads run on worker threads and whose caller's thread must
    /// never wait (Node's JavaScript thread).
    pub fn read_ticketed(&self) -> Result<(Arc<Held>, Option<Ticket>)> {
        self.refuse_reentry()?;
        crate::cancel::check("before it began")?;
        if let Some((held, ticket)) = hot::lookup_ticketed(self.id, &self.hot) {
            return Ok((held, Some(ticket)));
        }
        self.read_locked()
    }

    /// True while nothing was committed since `ticket`'s read, by this handle or any other
    /// connection, and the handle is open: the state read with it is still the stored one.
    /// Reads only shared memory; never waits.
    #[inline]
    pub fn is_current(&self, ticket: &Ticket) -> bool {
        ticket.trusted(self.id, &self.hot)
    }

    /// The state with its version when it is known without waiting: this thread's own copy
    /// ([`Agent::read`]'s hot path: no lock, no I/O, nothing written that another thread reads),
    /// or else the state the handle's last locked read confirmed, on any thread, while its
    /// ticket says it is still current (it then becomes this thread's copy: a thread whose reads
    /// all run on worker threads gets one too). `None` when neither can be trusted now (nothing
    /// read yet, something committed since, the handle closed, the process forked, a backend
    /// without a commit watch): then a read must take [`Agent::read`]'s locked path, which may
    /// wait. For callers that complete a read at once when they can and hand it to a worker
    /// thread otherwise (the C ABI's `agent_submit`). Never waits for I/O or for another call
    /// (the fallback takes a lock held only to copy two pointers). Thread-safe; never fails.
    #[inline]
    pub fn read_now(&self) -> Option<Arc<Held>> {
        if let Some(held) = hot::lookup(self.id, &self.hot) {
            return Some(held);
        }
        let (held, ticket) = lock(&self.latest)
            .as_ref()
            .filter(|(_, ticket)| self.is_current(ticket))
            .cloned()?;
        Some(hot::adopt(self.id, &held, ticket))
    }

    fn read_locked(&self) -> Result<(Arc<Held>, Option<Ticket>)> {
        // A state of an older schema version is migrated on first touch (once: the migration
        // commits only from the state it was computed from), then read again; a newer one is
        // refused. A read-only handle reads every state as stored.
        let mut migrated = false;
        loop {
            let read = self.read_once()?;
            match read {
                Ok(held) => return Ok(held),
                Err(stored) if self.fit(stored) == schema::Fit::Newer => {
                    return Err(self.newer(stored))
                }
                Err(stored) if migrated => {
                    return Err(Error::Busy(
                        format!(
                            "the state was stored under the older schema version {stored} \
                             again while this read upgraded it (another program rewrote it); \
                             try again"
                        )
                        .into(),
                    ))
                }
                Err(_) => {
                    self.change(write::Change::Migrate, None)?;
                    migrated = true;
                }
            }
        }
    }

    /// One locked read: the state kept for this thread, or (`Err`) the schema version of a
    /// stored state this handle must not read as it is.
    fn read_once(&self) -> Result<ReadOnce> {
        let mut guard = self.lock_inner()?;
        let Inner { store, view } = guard.as_mut().ok_or(Error::Closed)?;
        let current = cache::current(&**store, &mut view.cache, Context::Autocommit)?;
        if current.stored.is_some()
            && !self.read_only
            && self.fit(current.schema) != schema::Fit::Current
        {
            return Ok(Err(current.schema));
        }
        let Some(state) = current.stored else {
            // The initial state (a hook may answer differently each time): never kept.
            let state = self.initial()?;
            return Ok(Ok(hot::keep(self.id, 0, None, state, current.version)));
        };
        // The mark the cache recorded was read before its state was confirmed: while it is
        // unchanged, so is the state (cache.rs). Copies are made only from such a mark.
        let seen = view.cache.as_ref().and_then(Cache::mark);
        let seen = seen.zip(seen.and_then(|_| store.commit_watch()));
        let publication = self.hot.publication();
        let (held, ticket) = hot::keep(self.id, publication, seen, state, current.version);
        if let Some(ticket) = &ticket {
            *lock(&self.latest) = Some((Arc::clone(&held), ticket.clone()));
        }
        Ok(Ok((held, ticket)))
    }

    /// Closes the store. Later calls fail with [`Error::Closed`]; hooks are dropped once no
    /// running delivery uses them.
    pub fn close(&self) -> Result<()> {
        // Not `lock_inner`: a handle inherited across fork() need not reconnect just to close;
        // dropping its store lets go of the inherited connection without touching the parent's.
        self.refuse_reentry()?;
        // First, so that no pushed poll starts on a handle that is closing.
        self.stop_pushing();
        let inner = {
            let mut guard = lock(&self.inner);
            // Before the connection goes: a read that starts after this returns takes the lock.
            self.hot.close();
            guard.take().ok_or(Error::Closed)?
        };
        drop(inner);
        drop(lock(&self.latest).take());
        self.hooks.clear();
        let initial_hook = lock(&self.initial_hook).take();
        drop(initial_hook);
        let validator = lock(&self.validator).take();
        drop(validator);
        Ok(())
    }

    /// False once [`Agent::close`] has begun (one load of memory only closes and writes change).
    #[inline]
    pub fn is_open(&self) -> bool {
        self.hot.is_open()
    }

    /// The largest encoded state this agent accepts.
    pub fn max_value_bytes(&self) -> usize {
        self.cap.bytes
    }

    /// Locks the handle's state, first making sure its connection belongs to this process
    /// (after a `fork()`, the child's first call reconnects, with an empty read cache).
    fn lock_inner(&self) -> Result<Call<'_>> {
        self.refuse_reentry()?;
        crate::cancel::check("before it began")?;
        let mut call = Call(self.lock_cancellable()?);
        if let Some(inner) = call.as_mut() {
            if inner.store.ensure_current()? {
                inner.view.cache = None;
            }
        }
        Ok(call)
    }
}

impl Agent {
    /// The handle's lock. Calls on one handle take turns; with a cancel token bound to this
    /// thread the turn is waited for in short sleeps, so that a fired token ends the wait
    /// (another thread's call on the handle may run for as long as its own waits last).
    fn lock_cancellable(&self) -> Result<MutexGuard<'_, Option<Inner>>> {
        let Some(token) = crate::cancel::current() else {
            return Ok(lock(&self.inner));
        };
        loop {
            match self.inner.try_lock() {
                Ok(guard) => return Ok(guard),
                Err(std::sync::TryLockError::Poisoned(p)) => return Ok(p.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) => {
                    if token.is_cancelled() {
                        return Err(crate::cancel::cancelled(
                            "while waiting for another call on the same handle",
                        ));
                    }
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
        }
    }
}

/// One call's hold on the handle: its lock, and through the store whatever the call took of a
/// connection it shares with other handles, given back when the call ends (see
/// [`Ownership::end_call`](crate::store::Ownership::end_call)).
struct Call<'a>(MutexGuard<'a, Option<Inner>>);

impl std::ops::Deref for Call<'_> {
    type Target = Option<Inner>;
    fn deref(&self) -> &Option<Inner> {
        &self.0
    }
}

impl std::ops::DerefMut for Call<'_> {
    fn deref_mut(&mut self) -> &mut Option<Inner> {
        &mut self.0
    }
}

impl Drop for Call<'_> {
    fn drop(&mut self) {
        if let Some(inner) = self.0.as_mut() {
            inner.store.end_call();
        }
    }
}

/// The store's way in after a `fork()`: an inherited connection is closed (safely, see
/// the backend's fork handling) when no call holds the handle's lock.
impl Retire for Mutex<Option<Inner>> {
    fn try_retire(&self) -> bool {
        let mut guard = match self.try_lock() {
            Ok(guard) => guard,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return false,
        };
        if let Some(inner) = guard.as_mut() {
            inner.store.retire_inherited();
            inner.view.cache = None;
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

/// `pointer` parsed as an RFC 6901 JSON Pointer, or [`Error::InvalidArgument`] saying why not.
fn parse_pointer(pointer: &str) -> Result<agent_state_value::pointer::Pointer> {
    agent_state_value::pointer::Pointer::parse(pointer)
        .map_err(|e| Error::InvalidArgument(e.to_string()))
}

/// A read's [`Error::NoSuchPath`] with the pointer it was given.
fn at_path(e: Error, pointer: &str) -> Error {
    match e {
        Error::NoSuchPath {
            operation, message, ..
        } => Error::NoSuchPath {
            operation,
            path: pointer.to_string(),
            message,
        },
        e => e,
    }
}
