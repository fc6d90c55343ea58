//! Watching a store's agents: `agent_watch_open`, `agent_watch_next`, `agent_watch_event_free`,
//! `agent_watch_add`, `agent_watch_remove`, `agent_watch_close`, over the core's
//! [`agent_state::watch::Watch`]. A watch follows agents by id or by prefix and hands over each
//! change any process commits to them, in commit order per agent, to a queue (taken with
//! `agent_watch_next`; its eventfd is readable while events wait) or to a C callback on the
//! store's watcher thread.
//!
//! An event crosses the boundary as an `AgentWatchEvent` whose texts (id, patch, state) are
//! copied into one allocation behind it, each NUL-terminated: a queue's event is the caller's
//! until `agent_watch_event_free`, a callback's lives on the watcher thread's stack for the call.

use std::cell::Cell;
use std::ffi::{c_char, c_void, CStr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_state::watch::{Selector, Watch, WatchEvent, WatchKind, WatchOptions};
use agent_state::{work, Error, OpenOptions, Result};
use serde_json::{Map, Value};

use super::args::{open_args, optional_text, NumberOut};
use super::boundary;
use super::handle::Registry;
use super::status::AgentStatus;

/// A watch, as C sees it: an opaque id, like `AgentQueue` (0 is never a watch).
pub type AgentWatch = u64;

/// What a change was (`AgentWatchEvent.kind`): one of the `AGENT_WATCH_*` kinds below. The same
/// words name them in every binding: "merge", "json_patch", "replace", "migration", "deleted",
/// "resync". (Numbers rather than a C enum, as the other kinds of the API: the field keeps its
/// size whatever the compiler makes of an enum, and a later release may add kinds.)
pub type AgentWatchKind = i32;

/// `AgentWatchEvent.kind` of an RFC 7396 merge patch (`agent_set_state`): `patch` is the object
/// merged.
pub const AGENT_WATCH_MERGE: AgentWatchKind = 1;
/// `AgentWatchEvent.kind` of an RFC 6902 JSON Patch (`agent_patch_state`): `patch` is the array
/// of operations.
pub const AGENT_WATCH_JSON_PATCH: AgentWatchKind = 2;
/// `AgentWatchEvent.kind` of a replacement (`agent_replace_state`, `agent_restore_state`):
/// `state` is the new state.
pub const AGENT_WATCH_REPLACE: AgentWatchKind = 3;
/// `AgentWatchEvent.kind` of a schema migration: the state was upgraded from schema
/// `migrated_from` to `schema`; `state` is the upgraded state.
pub const AGENT_WATCH_MIGRATION: AgentWatchKind = 4;
/// `AgentWatchEvent.kind` of a deletion (`agent_store_delete`, `agent_store_expire`): `version`
/// 0, no patch, no state. A later first write starts the agent again.
pub const AGENT_WATCH_DELETED: AgentWatchKind = 5;
/// `AgentWatchEvent.kind` when changes were missed (pruned from the change log before they were
/// handed over, the log is off for the agent, or the reader fell more than `max_pending` events
/// behind): `state` is the state at `version`; a copy kept from earlier events is replaced by
/// it. `at_ms` is 0.
pub const AGENT_WATCH_RESYNC: AgentWatchKind = 6;

/// One change handed over by a watch. The texts are compact JSON (the storage codec's, as the
/// hooks and the change log give them), each NUL-terminated after its length.
///
/// Ownership: from `agent_watch_next`, the caller's, released with `agent_watch_event_free`
/// (never with free(), and never a copy of the struct); handed to an `AgentWatchFn`, valid only
/// during the call (copy what you keep). Thread-safety: a queue's event may be read and freed
/// on any thread.
#[repr(C)]
pub struct AgentWatchEvent {
    /// The agent's id (UTF-8, no NUL inside).
    pub agent_id: *const c_char,
    /// Length of `agent_id` in bytes.
    pub agent_id_len: usize,
    /// The agent's version after the change; 0 for `AGENT_WATCH_DELETED`.
    pub version: u64,
    /// What the change was: an `AGENT_WATCH_*` kind.
    pub kind: AgentWatchKind,
    /// For `AGENT_WATCH_MIGRATION`: the schema version upgraded from; else 0.
    pub migrated_from: u32,
    /// The schema version the state was written under (the writer's `schema_version`; 0 when
    /// none).
    pub schema: u32,
    /// When the change was committed, in milliseconds since the Unix epoch by the writer's
    /// clock; 0 when unknown (`AGENT_WATCH_RESYNC`, and `AGENT_WATCH_DELETED`: a deletion keeps
    /// no time).
    pub at_ms: i64,
    /// The change as stored: the merge patch (an object) for `AGENT_WATCH_MERGE`, the
    /// operations (an array) for `AGENT_WATCH_JSON_PATCH`; NULL for the other kinds.
    pub patch: *const c_char,
    /// Length of `patch` in bytes; 0 when `patch` is NULL.
    pub patch_len: usize,
    /// The state after the change: always for `AGENT_WATCH_REPLACE`, `AGENT_WATCH_MIGRATION`
    /// and `AGENT_WATCH_RESYNC`, and for an agent's first change (a watcher cannot know the
    /// writer's initial state it was made from); for every change but a deletion with the
    /// watch option `"states": true`; else NULL.
    pub state: *const c_char,
    /// Length of `state` in bytes; 0 when `state` is NULL.
    pub state_len: usize,
}

/// A watch's callback: handed each event on the store's watcher thread, in commit order per
/// agent. `event` and the texts it points to are valid only during the call. It must return
/// normally (no longjmp, no C++ exception) and soon: while it runs, no other watch of that store
/// in this process is handed anything. It may call `agent_watch_close` on its own watch (which
/// then does not wait for it), `agent_watch_remove`, and the library's other functions, but not
/// `agent_watch_add` (`AGENT_ERR_BUSY`: it waits for the thread the callback runs on).
pub type AgentWatchFn =
    Option<unsafe extern "C" fn(context: *mut c_void, event: *const AgentWatchEvent)>;

/// The live watches.
static WATCHES: Registry<Entry> = Registry::new();

/// Watches inherited across fork() and closed in the child: the parent's objects, whose locks
/// another thread of the parent may have held at the fork and whose watcher thread the child
/// does not have, so they are never used or dropped there; kept here, reachable, until the
/// child exits.
static INHERITED: Mutex<Vec<Arc<Entry>>> = Mutex::new(Vec::new());

/// One watch.
struct Entry {
    /// The fork generation of the process that opened it: a child's copy is not used.
    generation: u64,
    watch: Watch,
}

/// The watch behind `w`, opened by this process. Errors: `Closed` (never opened, or closed),
/// `InvalidArgument` (opened by the parent before fork()).
fn live(w: AgentWatch) -> Result<Arc<Entry>> {
    let entry = WATCHES.get(w)?;
    if entry.generation != work::fork_generation() {
        return Err(Error::InvalidArgument(
            "the watch was opened before fork() by the parent process; a child opens its own \
             (agent_watch_open) and closes the inherited one with agent_watch_close"
                .into(),
        ));
    }
    Ok(entry)
}

/// An event and the bytes its views point into (`view` first, so that a pointer to the whole
/// is a pointer to the view C is handed).
#[repr(C)]
struct OwnedEvent {
    view: AgentWatchEvent,
    /// The id, patch and state, each followed by a NUL byte.
    _texts: Box<[u8]>,
}

impl OwnedEvent {
    fn new(event: &WatchEvent) -> OwnedEvent {
        let parts = [
            Some(event.agent_id.as_str()),
            event.patch.as_deref(),
            event.state.as_deref(),
        ];
        let size = parts.iter().flatten().map(|t| t.len() + 1).sum();
        let mut bytes = Vec::with_capacity(size);
        let spans = parts.map(|part| {
            part.map(|text| {
                let at = bytes.len();
                bytes.extend_from_slice(text.as_bytes());
                bytes.push(0);
                (at, text.len())
            })
        });
        let texts = bytes.into_boxed_slice();
        // The boxed bytes do not move when the box does: pointers into them stay valid.
        let view = |span: Option<(usize, usize)>| match span {
            Some((at, len)) => (texts[at..].as_ptr().cast::<c_char>(), len),
            None => (std::ptr::null(), 0),
        };
        let (agent_id, agent_id_len) = view(spans[0]);
        let (patch, patch_len) = view(spans[1]);
        let (state, state_len) = view(spans[2]);
        let (kind, migrated_from) = kind_of(event.kind);
        OwnedEvent {
            view: AgentWatchEvent {
                agent_id,
                agent_id_len,
                version: event.version,
                kind,
                migrated_from,
                schema: event.schema,
                at_ms: event.at_ms,
                patch,
                patch_len,
                state,
                state_len,
            },
            _texts: texts,
        }
    }
}

/// The C kind of a change, and the schema it was migrated from (0 unless a migration).
fn kind_of(kind: WatchKind) -> (AgentWatchKind, u32) {
    match kind {
        WatchKind::Merge => (AGENT_WATCH_MERGE, 0),
        WatchKind::JsonPatch => (AGENT_WATCH_JSON_PATCH, 0),
        WatchKind::Replace => (AGENT_WATCH_REPLACE, 0),
        WatchKind::Migration { from } => (AGENT_WATCH_MIGRATION, from),
        WatchKind::Deleted => (AGENT_WATCH_DELETED, 0),
        // A kind a later core adds is, to a program built against this header, a change it
        // cannot apply: what a resync tells it to do with the state.
        _ => (AGENT_WATCH_RESYNC, 0),
    }
}

/// The watch's own keys of `agent_watch_open`'s options (the others are the open options).
const WATCH_KEYS: &[&str] = &[
    "ids",
    "prefix",
    "since",
    "states",
    "max_pending",
    "watch_poll_ms",
    "rescan_ms",
];

/// The longest wait of the millisecond keys: a day (beyond it a watch would just not notice).
const MAX_MS: u64 = 86_400_000;

/// `options_json` of `agent_watch_open`: the open options (for the connection) and what the
/// watch follows and how.
///
/// # Safety
/// `options_json` must be NULL or point to a NUL-terminated string readable during the call.
unsafe fn watch_args(options_json: *const c_char) -> Result<(OpenOptions, Selector, WatchOptions)> {
    let mut map = if options_json.is_null() {
        Map::new()
    } else {
        // SAFETY: not NULL; the caller guarantees a NUL-terminated string.
        let text = unsafe { CStr::from_ptr(options_json) }.to_bytes();
        match agent_state::value::json::parse(text) {
            Ok(Value::Object(map)) => map,
            Ok(_) => {
                return Err(Error::InvalidArgument(
                    "options must be a JSON object".into(),
                ))
            }
            Err(e) => {
                return Err(match Error::from(e) {
                    Error::Json(m) => Error::Json(format!("options: {m}")),
                    other => other,
                })
            }
        }
    };
    let mut watch = WatchOptions::default();
    let ids = map.remove("ids");
    let prefix = map.remove("prefix");
    let selector = match (ids, prefix) {
        (Some(_), Some(_)) => {
            return Err(Error::InvalidArgument(
                "options \"ids\" and \"prefix\" are exclusive: give one (neither: every agent)"
                    .into(),
            ))
        }
        (Some(ids), None) => Selector::Ids(id_list(&ids)?),
        (None, Some(prefix)) => Selector::Prefix(
            prefix
                .as_str()
                .ok_or_else(|| bad("prefix", "a string"))?
                .to_string(),
        ),
        (None, None) => Selector::Prefix(String::new()),
    };
    if let Some(since) = map.remove("since") {
        let Value::Object(since) = since else {
            return Err(bad("since", "an object of agent ids to versions"));
        };
        for (id, version) in since {
            let version = version.as_u64().ok_or_else(|| {
                bad(
                    "since",
                    "an object of agent ids to versions (integers >= 0)",
                )
            })?;
            watch.since.insert(id, version);
        }
    }
    if let Some(states) = map.remove("states") {
        watch.states = states
            .as_bool()
            .ok_or_else(|| bad("states", "true or false"))?;
    }
    if let Some(n) = map.remove("max_pending") {
        watch.max_pending = n
            .as_u64()
            .filter(|n| *n >= 1)
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| bad("max_pending", "an integer >= 1"))?;
    }
    if let Some(ms) = map.remove("watch_poll_ms") {
        watch.poll_interval = Some(millis("watch_poll_ms", &ms)?);
    }
    if let Some(ms) = map.remove("rescan_ms") {
        watch.rescan_interval = millis("rescan_ms", &ms)?;
    }
    let rest = serde_json::to_vec(&Value::Object(map))
        .map_err(|e| Error::InvalidArgument(format!("options: {e}")))?;
    let options = OpenOptions::from_json(&rest).map_err(|e| match e {
        Error::InvalidArgument(m) if m.starts_with("unknown option") => {
            Error::InvalidArgument(format!("{m}; or a watch's own: {}", WATCH_KEYS.join(", ")))
        }
        other => other,
    })?;
    Ok((options, selector, watch))
}

/// An ill-typed watch option.
fn bad(key: &str, want: &str) -> Error {
    Error::InvalidArgument(format!("option {key:?} must be {want}"))
}

/// The ids of option "ids" (each checked by the core as an agent id).
fn id_list(ids: &Value) -> Result<Vec<String>> {
    let want = "an array of agent ids (strings)";
    let Value::Array(ids) = ids else {
        return Err(bad("ids", want));
    };
    ids.iter()
        .map(|id| {
            id.as_str()
                .map(str::to_string)
                .ok_or_else(|| bad("ids", want))
        })
        .collect()
}

/// A millisecond option, 1 to [`MAX_MS`].
fn millis(key: &str, value: &Value) -> Result<Duration> {
    value
        .as_u64()
        .filter(|ms| (1..=MAX_MS).contains(ms))
        .map(Duration::from_millis)
        .ok_or_else(|| {
            bad(
                key,
                &format!("an integer from 1 to {MAX_MS} (milliseconds)"),
            )
        })
}

/// A callback and its context, handed to the watcher thread.
struct Target {
    f: unsafe extern "C" fn(*mut c_void, *const AgentWatchEvent),
    context: *mut c_void,
}

// SAFETY: `agent_watch_open` documents that the callback runs on the store's watcher thread,
// so the caller vouches that `context` may be used from it; the library only passes it back.
unsafe impl Send for Target {}
// SAFETY: as above; the watcher thread is the only one that calls it.
unsafe impl Sync for Target {}

thread_local! {
    /// Set on a watcher thread while it runs a C callback: `agent_watch_add` waits for that
    /// thread, so from inside a callback it would wait for ever.
    static IN_CALLBACK: Cell<bool> = const { Cell::new(false) };
}

impl Target {
    fn deliver(&self, event: &WatchEvent) {
        let event = OwnedEvent::new(event);
        IN_CALLBACK.with(|inside| inside.set(true));
        // SAFETY: the caller's callback, handed its context and a view that outlives the call.
        unsafe { (self.f)(self.context, &event.view) };
        IN_CALLBACK.with(|inside| inside.set(false));
    }
}

/// Opens a watch of the agents of the store at `path` (a SQLite file or a PostgreSQL URI, as
/// for `agent_open`) into `*out`. Returns once the start versions are read: every change
/// committed after this returns is handed over, each once, in commit order per agent (across
/// agents no order is promised), whichever process, handle or program committed it.
///
/// `options_json`: NULL (every agent of the store, from now on), or a JSON object of the open
/// options of `agent_open` (the connection's are used: `busy_timeout_ms`, `server_timeout_ms`,
/// `max_connections`; the agent's own, such as `agent_id`, are not) and the watch's own:
/// - `"ids": ["a", ...]` (the agents to follow; `agent_watch_add` adds more) or
///   `"prefix": "p"` (every agent whose id starts with `p`, also those created later; `""`:
///   every agent), not both; neither is `"prefix": ""`.
/// - `"since": {"a": 7, ...}`: for these agents, hand over the changes after that version,
///   caught up from the change log (where it no longer holds them, or is off, one
///   `AGENT_WATCH_RESYNC`). Other agents start at their version when the watch opens.
/// - `"states": true`: every event but a deletion carries the agent's whole state (the watch
///   then keeps the last state of each agent it handed over). Default false.
/// - `"max_pending": n`: the most events queued for a reader that does not keep up (default
///   10000); beyond it the agent's queued events are dropped for one `AGENT_WATCH_RESYNC`.
/// - `"watch_poll_ms": n` (PostgreSQL): instead of LISTEN, one store-wide query per `n` ms (a
///   connection through a transaction pooler, which cannot carry LISTEN). Ignored on SQLite.
/// - `"rescan_ms": n`: how often the watcher also compares every watched agent's version with
///   the store's, for commits it was not told of (default 30000). The watches of a store in
///   one process share one watcher, which rescans at the shortest of their intervals.
///
/// `callback` NULL: the events queue up for `agent_watch_next`, and `*out_fd` (when `out_fd`
/// is not NULL) receives a descriptor (an eventfd) readable while events are queued: watch it
/// for reading (epoll, poll, an event loop's reader); never read, write or close it
/// (`agent_watch_close` closes it). Otherwise each event is handed to `callback` with
/// `context` on the store's watcher thread (see `AgentWatchFn`), possibly before this
/// returns (a `since` catch-up), and `*out_fd` is -1.
///
/// One watcher thread per store per process serves every watch of it, whatever the number of
/// agents: on SQLite it notices commits in a small shared-memory file next to the store
/// (`<path>-watch`, private to its owner: mode 0600, as the store), on PostgreSQL by LISTEN on one
/// connection (or `watch_poll_ms`). Watching never creates a store.
///
/// fork(): a watch belongs to the process that opened it. In a child, the inherited watch is
/// refused (`AGENT_ERR_INVALID_ARGUMENT`) except by `agent_watch_close`, which closes the
/// child's copy of the descriptor; its events are the parent's.
///
/// Ownership: the strings are only read during the call; the watch is the caller's until
/// `agent_watch_close`; `context` must stay valid until then.
/// Errors: `AGENT_ERR_INVALID_ARGUMENT` (NULL or empty `path`, NULL `out`, an unknown or
/// ill-typed option, both `ids` and `prefix`, an id or prefix longer than 255 bytes or with a
/// NUL, `max_pending` 0, an in-memory store, which is its handle's alone), `AGENT_ERR_JSON`,
/// `AGENT_ERR_STORAGE` (no store there), `AGENT_ERR_BUSY`, `AGENT_ERR_UNAVAILABLE`,
/// `AGENT_ERR_AUTH`. On error `*out` is 0 and `*out_fd` -1.
/// Thread-safety: any thread; `context` must be usable from the watcher thread.
///
/// # Safety
/// `path` and `options_json` NULL or NUL-terminated; `out` NULL or writable for one
/// `AgentWatch`; `out_fd` NULL or writable for one `int32_t`.
#[no_mangle]
pub unsafe extern "C" fn agent_watch_open(
    path: *const c_char,
    options_json: *const c_char,
    callback: AgentWatchFn,
    context: *mut c_void,
    out: *mut AgentWatch,
    out_fd: *mut i32,
) -> AgentStatus {
    boundary::run("agent_watch_open", || {
        // SAFETY: NULL or writable, per the caller.
        let (out, out_fd) = unsafe { (NumberOut::new(out), NumberOut::new(out_fd)) };
        out_fd.set(-1);
        out.required("out")?;
        // SAFETY: NULL or NUL-terminated, per the caller (no options: only the path is read).
        let (path, _) = unsafe { open_args(path, std::ptr::null()) }?;
        // SAFETY: NULL or NUL-terminated, per the caller.
        let (options, selector, watch_options) = unsafe { watch_args(options_json) }?;
        let watch = match callback {
            None => Watch::open(&path, &options, selector, watch_options)?,
            Some(f) => {
                let target = Target { f, context };
                let deliver = move |event: &WatchEvent| target.deliver(event);
                Watch::with_callback(&path, &options, selector, watch_options, Box::new(deliver))?
            }
        };
        let fd = watch.ready_fd().unwrap_or(-1);
        out.set(WATCHES.insert(Entry {
            generation: work::fork_generation(),
            watch,
        }));
        out_fd.set(fd);
        Ok(())
    })
}

/// Takes the next event of queue watch `w` into `*out`, waiting up to `timeout_ms`
/// milliseconds for one (-1: until one comes or the watch is closed; 0: not at all). `AGENT_OK`
/// with `*out` NULL: none came in time. When the queue is left empty, the watch's descriptor
/// stops being readable.
///
/// Ownership: `*out` is the caller's: release it with `agent_watch_event_free`.
/// Errors: `AGENT_ERR_INVALID_ARGUMENT` (NULL `out`, `timeout_ms` below -1, a callback watch,
/// a watch inherited across fork()), `AGENT_ERR_BAD_HANDLE` (never opened, closed, also by
/// `agent_watch_close` on another thread while this waited: it then returns at once),
/// `AGENT_ERR_CANCELLED` (the thread's cancel token, see `agent_cancel_bind`, fired while it
/// waited). When the watch failed for good (its store gone or unreadable, an error that does not
/// pass: failures that pass, such as a server restarting, are retried by the watcher, which
/// then catches up), that error's status once (`AGENT_ERR_STORAGE`, `AGENT_ERR_AUTH`, ...),
/// then `AGENT_ERR_BAD_HANDLE`; close it.
/// Thread-safety: any thread; two threads taking from one watch each get different events.
///
/// # Safety
/// `out` NULL or writable for one `AgentWatchEvent *`.
#[no_mangle]
pub unsafe extern "C" fn agent_watch_next(
    w: AgentWatch,
    timeout_ms: i64,
    out: *mut *mut AgentWatchEvent,
) -> AgentStatus {
    boundary::run("agent_watch_next", || {
        if out.is_null() {
            return Err(Error::InvalidArgument("out is NULL".into()));
        }
        // SAFETY: not NULL, writable per the caller; NULL until an event is taken.
        unsafe { out.write(std::ptr::null_mut()) };
        let timeout = match timeout_ms {
            -1 => None,
            ms if ms >= 0 => Some(Duration::from_millis(ms as u64)),
            ms => {
                return Err(Error::InvalidArgument(format!(
                    "timeout_ms must be -1 (no limit) or a number of milliseconds, got {ms}"
                )))
            }
        };
        let entry = live(w)?;
        let event = match timeout {
            Some(Duration::ZERO) => entry.watch.try_next()?,
            timeout => entry.watch.next(timeout)?,
        };
        if let Some(event) = event {
            let owned = Box::into_raw(Box::new(OwnedEvent::new(&event)));
            // SAFETY: not NULL, writable per the caller. `view` is the first field of the
            // `#[repr(C)]` OwnedEvent, so the pointers are the same.
            unsafe { out.write(owned.cast::<AgentWatchEvent>()) };
        }
        Ok(())
    })
}

/// Releases an event taken with `agent_watch_next`. NULL-safe. Passing anything else (an event
/// handed to a callback, a copy, one already freed) is undefined behaviour.
/// Thread-safety: any thread.
///
/// # Safety
/// `event` NULL or an event `agent_watch_next` returned and not yet freed.
#[no_mangle]
pub unsafe extern "C" fn agent_watch_event_free(event: *mut AgentWatchEvent) {
    boundary::guard("agent_watch_event_free", || {
        if !event.is_null() {
            // SAFETY: per the caller, a pointer agent_watch_next made with Box::into_raw of an
            // OwnedEvent (whose first field the pointer is), not freed since.
            drop(unsafe { Box::from_raw(event.cast::<OwnedEvent>()) });
        }
    })
}

/// Follows agent `id` too (a watch opened with `"ids"`), from after version `since` (caught up
/// from the change log as `"since"` is) or, with -1, from its version now. Already followed:
/// its start moves to `since` when given, else nothing changes.
///
/// Errors: `AGENT_ERR_INVALID_ARGUMENT` (NULL `id`, not UTF-8, longer than 255 bytes; `since`
/// below -1; a watch opened with a prefix; a watch inherited across fork()),
/// `AGENT_ERR_BAD_HANDLE` (never opened, closed, or the watch ended), `AGENT_ERR_BUSY` (called
/// from inside a watch's callback: this waits for the watcher thread that runs it), and the
/// failure that ended the watch, if one did.
/// Thread-safety: any thread but a watch callback's. Returns once the watcher has read the
/// agent's version.
///
/// # Safety
/// `id` NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn agent_watch_add(
    w: AgentWatch,
    id: *const c_char,
    since: i64,
) -> AgentStatus {
    boundary::run("agent_watch_add", || {
        // SAFETY: NULL or NUL-terminated, per the caller.
        let id = unsafe { required_id(id) }?;
        if IN_CALLBACK.with(Cell::get) {
            return Err(Error::Busy(
                "agent_watch_add waits for the store's watcher thread, which is running this \
                 callback: add agents from another thread"
                    .into(),
            ));
        }
        let since = match since {
            -1 => None,
            v if v >= 0 => Some(v as u64),
            v => {
                return Err(Error::InvalidArgument(format!(
                    "since must be -1 (from now) or a version, got {v}"
                )))
            }
        };
        live(w)?.watch.add(&id, since)
    })
}

/// Stops following agent `id` (events of it already queued stay queued). Not followed: nothing
/// happens.
///
/// Errors: `AGENT_ERR_INVALID_ARGUMENT` (NULL `id`, not UTF-8; a watch opened with a prefix; a
/// watch inherited across fork()), `AGENT_ERR_BAD_HANDLE`.
/// Thread-safety: any thread, also from inside the watch's callback.
///
/// # Safety
/// `id` NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn agent_watch_remove(w: AgentWatch, id: *const c_char) -> AgentStatus {
    boundary::run("agent_watch_remove", || {
        // SAFETY: NULL or NUL-terminated, per the caller.
        let id = unsafe { required_id(id) }?;
        live(w)?.watch.remove(&id)
    })
}

/// An agent id argument: not NULL, UTF-8.
///
/// # Safety
/// `id` NULL or NUL-terminated.
unsafe fn required_id(id: *const c_char) -> Result<String> {
    // SAFETY: NULL or NUL-terminated, per the caller.
    unsafe { optional_text(id, "id") }?.ok_or_else(|| Error::InvalidArgument("id is NULL".into()))
}

/// Closes watch `w`: the events still queued are released, its descriptor is closed (stop
/// watching it first), a thread waiting in `agent_watch_next` returns `AGENT_ERR_BAD_HANDLE`,
/// and the id is never valid again. A callback running on the watcher thread finishes before
/// this returns (so `context` may be released after it), unless this is called from inside
/// that callback. In a child after fork(), closing the inherited watch closes the child's copy
/// of the descriptor only.
///
/// Errors: `AGENT_ERR_BAD_HANDLE` (never opened, or already closed). Thread-safety: any thread,
/// also from inside the watch's callback.
#[no_mangle]
pub extern "C" fn agent_watch_close(w: AgentWatch) -> AgentStatus {
    boundary::run("agent_watch_close", || {
        if w == 0 {
            return Err(Error::Closed);
        }
        let entry = WATCHES.remove(w)?;
        if entry.generation != work::fork_generation() {
            // The parent's: its locks may have been held at the fork, and its watcher thread
            // is not in this process. Only this process's copy of the descriptor goes.
            if let Some(fd) = entry.watch.ready_fd() {
                // SAFETY: the child's copy of the watch's descriptor, closed once: the entry
                // just left the registry and is never used or dropped in this process.
                unsafe { libc::close(fd) };
            }
            INHERITED
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(entry);
            return Ok(());
        }
        entry.watch.close();
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(json: &str) -> Result<(OpenOptions, Selector, WatchOptions)> {
        let text = std::ffi::CString::new(json).unwrap();
        // SAFETY: a NUL-terminated string that lives through the call.
        unsafe { watch_args(text.as_ptr()) }
    }

    #[test]
    fn watch_keys_are_read_and_the_rest_are_open_options() {
        let (options, selector, watch) = args(
            r#"{"ids":["a","b"],"since":{"a":3},"states":true,"max_pending":5,
                "watch_poll_ms":250,"rescan_ms":1000,"busy_timeout_ms":7}"#,
        )
        .unwrap();
        assert!(matches!(selector, Selector::Ids(ids) if ids == ["a", "b"]));
        assert_eq!(
            watch.since,
            std::collections::HashMap::from([("a".to_string(), 3)])
        );
        assert!(watch.states);
        assert_eq!(watch.max_pending, 5);
        assert_eq!(watch.poll_interval, Some(Duration::from_millis(250)));
        assert_eq!(watch.rescan_interval, Duration::from_millis(1000));
        assert_eq!(options.busy_timeout_ms, 7);
        let (_, selector, _) = args("{}").unwrap();
        assert!(matches!(selector, Selector::Prefix(p) if p.is_empty()));
    }

    #[test]
    fn bad_watch_options_are_refused_by_name() {
        for (json, names) in [
            (r#"{"ids":[],"prefix":""}"#, "exclusive"),
            (r#"{"ids":[1]}"#, "\"ids\""),
            (r#"{"since":{"a":-1}}"#, "\"since\""),
            (r#"{"max_pending":0}"#, "\"max_pending\""),
            (r#"{"rescan_ms":0}"#, "\"rescan_ms\""),
            (r#"{"nope":1}"#, "rescan_ms"),
        ] {
            match args(json) {
                Err(Error::InvalidArgument(m)) => assert!(m.contains(names), "{json}: {m}"),
                other => panic!("{json}: {:?}", other.map(|_| ())),
            }
        }
        assert!(matches!(args("{"), Err(Error::Json(m)) if m.starts_with("options: ")));
    }
}
