//! Reads of a hot handle: when nothing was committed since this thread last read the handle,
//! the state is handed out from the thread's own copy, without the handle's lock and without
//! writing a cache line that another thread reads.
//!
//! Each thread keeps, per handle it reads (a few at most, see [`SLOTS`]), a [`Kept`]: the state
//! and version it was last given, in a [`Held`] of its own, and the commit mark read before that
//! state was confirmed under the lock (the cache's invariant, see `cache.rs`). The next read
//! trusts the copy when (1) the handle's publication counter ([`Hot`]) is the one the copy was
//! made under: the handle is open, and none of its writes ended since; (2) the process has not
//! forked since (a child never trusts what its parent read); (3) the commit mark is still the
//! copy's ([`CommitWatch::unchanged`]): no connection, in any process, committed since the state
//! was confirmed. Every test only reads shared memory; the read hands out a clone of the
//! thread's own `Arc<Held>`, whose count only this thread and its buffers touch.
//!
//! Anything else (a miss, a backend without a commit watch, a store that offers none, nothing stored yet, another thread's slot in use) takes the locked path,
//! which leaves a fresh copy behind when the state it confirmed has a mark.
//!
//! Memory: a thread keeps at most [`SLOTS`] copies, each replaced by the next handle whose id
//! falls in its slot, and all of them dropped when the thread exits; a closed handle's copy
//! keeps its last state alive only until then. Buffers share the `Held`, so they outlive both.

use std::cell::RefCell;
use std::ops::Deref;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::store::{process, CommitWatch, Mark};
use crate::value::snapshot::Snapshot;

/// Copies one thread keeps, one per slot (a handle's slot is its id modulo this).
const SLOTS: usize = 8;

/// Publication bit 0: the handle is closed. The counter above it moves with each write.
const CLOSED: u64 = 1;

/// A handle's publication counter, on a cache line of its own: written by its writes and its
/// close, only read by its readers.
#[repr(align(128))]
#[derive(Default)]
pub(super) struct Hot {
    publication: AtomicU64,
}

impl Hot {
    /// The current publication (read under the handle's lock, it describes its cache).
    #[inline]
    pub(super) fn publication(&self) -> u64 {
        self.publication.load(Ordering::Acquire)
    }

    /// One of the handle's writes ended: copies made before it are not trusted again.
    pub(super) fn invalidate(&self) {
        self.publication.fetch_add(2, Ordering::AcqRel);
    }

    /// The handle closes: no copy is trusted again.
    pub(super) fn close(&self) {
        self.publication.fetch_or(CLOSED, Ordering::AcqRel);
    }

    #[inline]
    pub(super) fn is_open(&self) -> bool {
        self.publication() & CLOSED == 0
    }
}

/// A state and its version as one thread was given them. A buffer handed out on that thread
/// shares it, so that its reference count is the thread's alone (on a cache line of its own).
#[repr(align(128))]
#[derive(Debug)]
pub struct Held {
    state: Arc<Snapshot>,
    version: u64,
}

impl Held {
    /// The state (the initial state at version 0).
    #[inline]
    pub fn state(&self) -> &Arc<Snapshot> {
        &self.state
    }

    /// How many changes the store has committed: 1 after the first write.
    #[inline]
    pub fn version(&self) -> u64 {
        self.version
    }
}

impl Deref for Held {
    type Target = Snapshot;
    #[inline]
    fn deref(&self) -> &Snapshot {
        &self.state
    }
}

/// What a thread last read of one handle, and what it takes to trust it again.
struct Kept {
    ticket: Ticket,
    held: Arc<Held>,
}

/// What it takes to trust a state read earlier, carried away from the thread that read it: a
/// binding whose reads run on worker threads (the library's worker pool) keeps one beside its copy of
/// the state, and its JavaScript thread asks [`crate::Agent::is_current`] before handing the copy
/// out again, which reads only shared memory (the module's three tests).
#[derive(Clone)]
pub struct Ticket {
    agent: u64,
    publication: u64,
    generation: u64,
    mark: Mark,
    watch: Arc<dyn CommitWatch>,
}

impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticket")
            .field("agent", &self.agent)
            .field("publication", &self.publication)
            .finish_non_exhaustive()
    }
}

impl Ticket {
    /// True while the state it was issued with is still the handle's (see the module's tests).
    #[inline]
    pub(super) fn trusted(&self, agent: u64, hot: &Hot) -> bool {
        self.agent == agent
            && hot.publication() == self.publication
            && process::generation() == self.generation
            && self.watch.unchanged(&self.mark)
    }
}

/// One thread's copies.
struct Copies {
    kept: [Option<Kept>; SLOTS],
}

thread_local! {
    static COPIES: RefCell<Copies> = const {
        RefCell::new(Copies {
            kept: [const { None }; SLOTS],
        })
    };
}

fn slot(agent: u64) -> usize {
    (agent % SLOTS as u64) as usize
}

/// What `take` makes of this thread's copy of agent `agent`'s state, if the copy can be
/// trusted now (see the module's three tests); `None` sends the caller to the locked path.
#[inline]
fn with_trusted<R>(agent: u64, hot: &Hot, take: impl FnOnce(&Kept) -> R) -> Option<R> {
    COPIES
        .try_with(|copies| {
            let copies = copies.try_borrow().ok()?;
            let copy = copies.kept[slot(agent)].as_ref()?;
            copy.ticket.trusted(agent, hot).then(|| take(copy))
        })
        .ok()
        .flatten()
}

/// This thread's copy of agent `agent`'s state, if it can be trusted now.
#[inline]
pub(super) fn lookup(agent: u64, hot: &Hot) -> Option<Arc<Held>> {
    with_trusted(agent, hot, |copy| Arc::clone(&copy.held))
}

/// Wraps what the locked path confirmed in a `Held` of this thread, and keeps a copy for the
/// next read when the state can be validated later: `seen` is the commit mark read before the
/// state was confirmed, with its watch, and `publication` the handle's, both read under the
/// handle's lock.
/// Returns the copy's ticket too (`None` when the state cannot be validated later).
pub(super) fn keep(
    agent: u64,
    publication: u64,
    seen: Option<(Mark, Arc<dyn CommitWatch>)>,
    state: Arc<Snapshot>,
    version: u64,
) -> (Arc<Held>, Option<Ticket>) {
    let held = Arc::new(Held { state, version });
    let Some((mark, watch)) = seen else {
        return (held, None);
    };
    let ticket = Ticket {
        agent,
        publication,
        generation: process::generation(),
        mark,
        watch,
    };
    let copy = Kept {
        ticket: ticket.clone(),
        held: Arc::clone(&held),
    };
    // The copy it replaces is dropped after the borrow ends.
    let _replaced = COPIES.try_with(|copies| {
        let mut copies = copies.try_borrow_mut().ok()?;
        copies.kept[slot(agent)].replace(copy)
    });
    (held, Some(ticket))
}

/// This thread's copy with its ticket, when trusted now ([`lookup`], with the ticket).
pub(super) fn lookup_ticketed(agent: u64, hot: &Hot) -> Option<(Arc<Held>, Ticket)> {
    with_trusted(agent, hot, |copy| {
        (Arc::clone(&copy.held), copy.ticket.clone())
    })
}

/// Makes `held`, read and ticketed by another thread, this thread's copy of agent `agent`'s
/// state (in a `Held` of this thread's own), as if this thread had read it: for a thread whose
/// reads run on other threads (an event loop's, whose reads go to the worker pool), which would
/// otherwise never have a copy. The caller has checked that `ticket` is still trusted.
pub(super) fn adopt(agent: u64, held: &Held, ticket: Ticket) -> Arc<Held> {
    let mine = Arc::new(Held {
        state: Arc::clone(&held.state),
        version: held.version,
    });
    let copy = Kept {
        ticket,
        held: Arc::clone(&mine),
    };
    // The copy it replaces is dropped after the borrow ends.
    let _replaced = COPIES.try_with(|copies| {
        let mut copies = copies.try_borrow_mut().ok()?;
        copies.kept[slot(agent)].replace(copy)
    });
    mine
}
