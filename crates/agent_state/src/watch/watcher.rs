//! The store's watcher: one thread per store location per process, whatever the number of
//! watches and agents, that waits on the backend's commit signal and catches the changed agents
//! up for every watch of the store. It starts with the store's first watch and ends with its
//! last.
//!
//! A location is the canonical file of a SQLite store, the URI of a server's. A watcher holds
//! the backend's signal and store-wide reads (connections of its own) and a few per-agent
//! handles (the most recently caught up), through which it reads each changed agent's log.
//! Failures that may pass (a lock held too long, a server restarting) are retried with a
//! growing pause, then every watch is rescanned, so nothing committed meanwhile is missed;
//! any other failure ends every watch of the store with it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::catchup::{catch_up, Known};
use super::shared::{Request, Shared};
use super::types::Selector;
use crate::backends;
use crate::error::{Error, Result};
use crate::store::{id_hash, Backend, CommitSignal, Notice, Signal, StoreOptions, WatchReads};

/// The longest a watcher waits on its signal before it looks for new requests (a watch
/// opening, an agent added): what `open` and `add` may wait for, beyond the reads.
const TURN: Duration = Duration::from_millis(20);
/// How many per-agent handles a watcher keeps open (the most recently used).
const HANDLES: usize = 64;
/// The longest pause between attempts after a failure that may pass.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// The watchers of this process, by store location.
static REGISTRY: Mutex<Option<HashMap<String, Arc<Store>>>> = Mutex::new(None);

fn registry() -> MutexGuard<'static, Option<HashMap<String, Arc<Store>>>> {
    REGISTRY.lock().unwrap_or_else(|p| p.into_inner())
}

/// One store's watcher, as the watches attached to it see it.
pub(super) struct Store {
    key: String,
    generation: u64,
    watches: Mutex<Vec<Arc<Shared>>>,
    /// A watch asked for something (a start, an agent added).
    asked: AtomicBool,
}

impl Store {
    fn watches(&self) -> MutexGuard<'_, Vec<Arc<Shared>>> {
        self.watches.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Tells the watcher a watch asked for something.
    pub(super) fn wake(&self) {
        self.asked.store(true, Ordering::Release);
    }
}

/// The registry key of the store at `path`: its canonical file, or its URI.
fn location(path: &Path) -> Result<String> {
    if let Some(uri) = backends::server_uri(path) {
        return Ok(uri.to_string());
    }
    if path.as_os_str() == ":memory:" {
        return Err(Error::InvalidArgument(
            "an in-memory store is private to its handle: it cannot be watched".to_string(),
        ));
    }
    let file = std::fs::canonicalize(path).map_err(|e| {
        Error::Storage(format!("{}: no agent store here ({e})", path.display()).into())
    })?;
    Ok(file.to_string_lossy().into_owned())
}

/// Attaches `watch` to the watcher of the store at `path`, starting one (its signal and reads
/// opened here, so that their failures are the caller's) when the store has none.
pub(super) fn attach(
    path: &Path,
    options: &StoreOptions,
    poll_interval: Option<Duration>,
    watch: Arc<Shared>,
) -> Result<Arc<Store>> {
    let key = location(path)?;
    let generation = crate::work::fork_generation();
    let mut registry = registry();
    let stores = registry.get_or_insert_with(HashMap::new);
    if let Some(store) = stores.get(&key).filter(|s| s.generation == generation) {
        store.watches().push(watch);
        return Ok(Arc::clone(store));
    }
    let signal = backends::open_signal(path, options, poll_interval)?;
    let reads = backends::open_watch_reads(path, options)?;
    let store = Arc::new(Store {
        key: key.clone(),
        generation,
        watches: Mutex::new(vec![watch]),
        asked: AtomicBool::new(true),
    });
    let mut watcher = Watcher {
        store: Arc::clone(&store),
        path: path.to_path_buf(),
        options: options.clone(),
        signal,
        reads,
        handles: HashMap::new(),
        used: 0,
    };
    std::thread::Builder::new()
        .name("agent_state watch".to_string())
        .spawn(move || watcher.run())
        .map_err(|e| Error::Storage(format!("cannot start the store's watcher: {e}").into()))?;
    stores.insert(key, Arc::clone(&store));
    Ok(store)
}

/// The watcher thread's own.
struct Watcher {
    store: Arc<Store>,
    path: PathBuf,
    options: StoreOptions,
    signal: Box<dyn CommitSignal>,
    reads: Box<dyn WatchReads>,
    /// Per-agent handles, with when each was last used.
    handles: HashMap<String, (Box<dyn Backend>, u64)>,
    used: u64,
}

fn may_pass(e: &Error) -> bool {
    matches!(e, Error::Busy(_) | Error::Unavailable(_))
}

impl Watcher {
    fn run(&mut self) {
        let mut last_rescan = Instant::now();
        let mut backoff: Option<Duration> = None;
        while let Some(watches) = self.live_watches() {
            let outcome = self.turn(&watches, &mut last_rescan, backoff.is_some());
            match outcome {
                Ok(()) => backoff = None,
                Err(e) if may_pass(&e) => {
                    let pause = backoff.map_or(Duration::from_millis(50), |b| b * 2);
                    let pause = pause.min(MAX_BACKOFF);
                    backoff = Some(pause);
                    self.handles.clear();
                    std::thread::sleep(pause);
                }
                Err(e) => {
                    self.fail_all(e);
                    return;
                }
            }
        }
    }

    /// The shortest rescan interval of `watches`, as they are now: a watch attached to a
    /// running watcher with a shorter one than the others gets its rescans from the next turn,
    /// and the watcher goes back to the longer interval once that watch has ended.
    fn rescan_interval(watches: &[Arc<Shared>]) -> Duration {
        watches
            .iter()
            .map(|w| w.rescan)
            .min()
            .unwrap_or(Duration::MAX)
    }

    /// The watches still open; `None` (the store's entry removed) once there are none.
    fn live_watches(&self) -> Option<Vec<Arc<Shared>>> {
        {
            let mut watches = self.store.watches();
            watches.retain(|w| !w.ended());
            if !watches.is_empty() {
                return Some(watches.clone());
            }
        }
        // Lock order: the registry, then the store's list (as `attach` takes them).
        let mut registry = registry();
        let watches = self.store.watches();
        if !watches.is_empty() {
            return Some(watches.clone());
        }
        if let Some(stores) = registry.as_mut() {
            if stores
                .get(&self.store.key)
                .is_some_and(|s| Arc::ptr_eq(s, &self.store))
            {
                stores.remove(&self.store.key);
            }
        }
        None
    }

    /// Ends every watch with `e` and leaves the registry.
    fn fail_all(&self, e: Error) {
        let mut registry = registry();
        if let Some(stores) = registry.as_mut() {
            if stores
                .get(&self.store.key)
                .is_some_and(|s| Arc::ptr_eq(s, &self.store))
            {
                stores.remove(&self.store.key);
            }
        }
        for w in self.store.watches().drain(..) {
            w.end(Some(e.clone()));
        }
    }

    /// One turn: the requests asked, then a wait on the signal and what it says.
    fn turn(
        &mut self,
        watches: &[Arc<Shared>],
        last_rescan: &mut Instant,
        after_failure: bool,
    ) -> Result<()> {
        if self.store.asked.swap(false, Ordering::AcqRel) {
            for w in watches {
                self.apply_requests(w)?;
            }
        }
        if after_failure {
            *last_rescan = Instant::now();
            return self.rescan_all(watches);
        }
        let due = last_rescan.checked_add(Self::rescan_interval(watches));
        let wait = due.map_or(TURN, |due| {
            TURN.min(due.saturating_duration_since(Instant::now()))
        });
        match self.signal.wait(wait)? {
            Signal::Quiet if due.is_some_and(|due| Instant::now() >= due) => {
                *last_rescan = Instant::now();
                self.rescan_all(watches)
            }
            Signal::Quiet => Ok(()),
            Signal::Unknown => {
                *last_rescan = Instant::now();
                self.rescan_all(watches)
            }
            Signal::Changed(notices) => {
                for w in watches {
                    self.notified(w, &notices)?;
                }
                Ok(())
            }
        }
    }

    /// Applies what `w` asked for, in order, and wakes whoever waits for it.
    fn apply_requests(&mut self, w: &Arc<Shared>) -> Result<()> {
        loop {
            let Some((ticket, request)) = w.following().requests.pop_front() else {
                return Ok(());
            };
            let outcome = self.apply(w, request);
            let retry = matches!(&outcome, Err(e) if may_pass(e));
            {
                let mut following = w.following();
                following.applied = ticket;
                if let Err(e) = &outcome {
                    following.refused = Some((ticket, e.clone()));
                }
            }
            w.applied.notify_all();
            if retry {
                return outcome;
            }
        }
    }

    fn apply(&mut self, w: &Arc<Shared>, request: Request) -> Result<()> {
        let (ids, since) = match request {
            Request::Start(since) => {
                let selector = w.following().selector.clone();
                let stored = match &selector {
                    Selector::Prefix(prefix) => self.reads.versions_with_prefix(prefix)?,
                    Selector::Ids(ids) => {
                        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
                        self.reads.versions_of(&ids)?
                    }
                };
                let mut following = w.following();
                if let Selector::Ids(ids) = &selector {
                    for id in ids {
                        following.known.entry(id.clone()).or_default();
                    }
                }
                for (id, version) in stored {
                    following.known.insert(
                        id,
                        Known {
                            version,
                            state: None,
                        },
                    );
                }
                following.started = true;
                let ids: Vec<String> = since.keys().cloned().collect();
                (ids, since)
            }
            Request::Add(id, since) => {
                if since.is_none() && w.following().selector.follows(&id) {
                    return Ok(()); // already followed: nothing to start
                }
                let version = match since {
                    Some(v) => v,
                    None => self
                        .reads
                        .versions_of(&[id.as_str()])?
                        .first()
                        .map_or(0, |(_, v)| *v),
                };
                let mut following = w.following();
                if let Selector::Ids(ids) = &mut following.selector {
                    if !ids.contains(&id) {
                        ids.push(id.clone());
                    }
                }
                let since = HashMap::from([(id.clone(), version)]);
                (vec![id], since)
            }
        };
        for id in &ids {
            w.following().known.insert(
                id.clone(),
                Known {
                    version: since[id],
                    state: None,
                },
            );
            self.catch_up(w, id, false)?;
        }
        Ok(())
    }

    /// Compares every agent `w` follows with its stored version (one store-wide read) and
    /// catches up those that differ.
    fn rescan(&mut self, w: &Arc<Shared>) -> Result<()> {
        let selector = {
            let following = w.following();
            if !following.started {
                return Ok(()); // its start reads where it begins
            }
            following.selector.clone()
        };
        let stored: HashMap<String, u64> = match &selector {
            Selector::Prefix(prefix) => self.reads.versions_with_prefix(prefix)?,
            Selector::Ids(ids) => {
                let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
                self.reads.versions_of(&ids)?
            }
        }
        .into_iter()
        .collect();
        let changed: Vec<String> = {
            let following = w.following();
            let gone = following
                .known
                .iter()
                .filter(|(id, k)| k.version > 0 && !stored.contains_key(*id))
                .map(|(id, _)| id.clone());
            let moved = stored
                .iter()
                .filter(|(id, v)| following.known.get(*id).map_or(0, |k| k.version) != **v)
                .map(|(id, _)| id.clone());
            gone.chain(moved).collect()
        };
        for id in changed {
            self.catch_up(w, &id, false)?;
        }
        Ok(())
    }

    fn rescan_all(&mut self, watches: &[Arc<Shared>]) -> Result<()> {
        for w in watches {
            self.guarded(w, |me| me.rescan(w))?;
        }
        Ok(())
    }

    /// Catches up the agents of `notices` that `w` follows; a hash it cannot place in a prefix
    /// watch (an agent it has not seen) costs a rescan of that watch.
    fn notified(&mut self, w: &Arc<Shared>, notices: &[Notice]) -> Result<()> {
        let (ids, unplaced) = {
            let following = w.following();
            if !following.started {
                return Ok(()); // its start reads where it begins
            }
            let mut ids = Vec::new();
            let mut unplaced = false;
            for notice in notices {
                match &notice.id {
                    Some(id) if following.selector.follows(id) => ids.push(id.clone()),
                    Some(_) => {}
                    None => {
                        let before = ids.len();
                        ids.extend(
                            following
                                .known
                                .keys()
                                .filter(|id| id_hash(id) == notice.id_hash)
                                .cloned(),
                        );
                        let known_one = ids.len() > before;
                        unplaced |= !known_one && matches!(following.selector, Selector::Prefix(_));
                    }
                }
            }
            (ids, unplaced)
        };
        if unplaced {
            return self.guarded(w, |me| me.rescan(w));
        }
        for id in ids {
            self.guarded(w, |me| me.catch_up(w, &id, false))?;
        }
        Ok(())
    }

    /// Runs `f` for `w`; a failure that may pass is the caller's (retried), any other ends `w`
    /// alone.
    fn guarded(&mut self, w: &Arc<Shared>, f: impl FnOnce(&mut Self) -> Result<()>) -> Result<()> {
        match f(self) {
            Err(e) if !may_pass(&e) => {
                w.end(Some(e));
                Ok(())
            }
            other => other,
        }
    }

    /// Catches agent `id` up for `w` and delivers what it read (with `resync`: one resync).
    fn catch_up(&mut self, w: &Arc<Shared>, id: &str, resync: bool) -> Result<()> {
        let current = w.following().known.get(id).cloned();
        let Some(mut known) = current else {
            let follows = w.following().selector.follows(id);
            return if follows {
                self.catch_up_new(w, id)
            } else {
                Ok(())
            };
        };
        let mut events = Vec::new();
        let before = known.clone();
        let outcome = {
            let handle = self.handle(id)?;
            catch_up(&mut **handle, id, &mut known, w.states, resync, &mut events)
        };
        if let Err(e) = outcome {
            self.handles.remove(id);
            return Err(e);
        }
        {
            let mut following = w.following();
            // Removed meanwhile (or re-added from elsewhere): what was read is not delivered.
            match following.known.get_mut(id) {
                Some(k) if k.version == before.version => *k = known,
                _ => return Ok(()),
            }
        }
        for dropped in w.deliver(events) {
            let mut resyncs = Vec::new();
            let mut known = w
                .following()
                .known
                .get(&dropped)
                .cloned()
                .unwrap_or_default();
            let handle = self.handle(&dropped)?;
            catch_up(
                &mut **handle,
                &dropped,
                &mut known,
                w.states,
                true,
                &mut resyncs,
            )?;
            if let Some(k) = w.following().known.get_mut(&dropped) {
                *k = known;
            }
            w.deliver_resyncs(resyncs);
        }
        Ok(())
    }

    /// An agent of a prefix watch seen for the first time: every change it has is new.
    fn catch_up_new(&mut self, w: &Arc<Shared>, id: &str) -> Result<()> {
        w.following().known.insert(id.to_string(), Known::default());
        self.catch_up(w, id, false)
    }

    /// The handle of agent `id`, opened when none is kept (the least recently used one closed
    /// to make room).
    fn handle(&mut self, id: &str) -> Result<&mut Box<dyn Backend>> {
        self.used += 1;
        let used = self.used;
        if !self.handles.contains_key(id) {
            if self.handles.len() >= HANDLES {
                let oldest = self
                    .handles
                    .iter()
                    .min_by_key(|(_, (_, t))| *t)
                    .map(|(k, _)| k.clone());
                if let Some(oldest) = oldest {
                    self.handles.remove(&oldest);
                }
            }
            let mut options = self.options.clone();
            options.agent_id = Some(id.to_string());
            let handle = backends::open(&self.path, &options)?;
            self.handles.insert(id.to_string(), (handle, used));
        }
        let entry = self.handles.get_mut(id).expect("inserted above");
        entry.1 = used;
        Ok(&mut entry.0)
    }
}

#[cfg(test)]
mod tests;
