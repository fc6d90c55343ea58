//! The commit mark, read by any thread without the connection or its lock: the test that a
//! hot read (`agent::hot`) makes before it trusts a snapshot.
//!
//! The mark is the WAL-index header in SQLite's mapping of the shared memory (see
//! [`super::wal_index`]). That mapping lives as long as the connection: reading it from a thread
//! that holds no lock could race with the connection closing (and SQLite unmapping the memory).
//! So each reader announces, in a slot of its own thread (a `Reader`, one per thread, made at its
//! first read), which watch it is reading, and
//! [`MarkWatch::retire`], which runs before the connection closes, marks the watch dead and
//! waits until no slot names it. A reader writes only its own slot (its own cache line): two
//! threads reading one handle never write a line the other reads.
//!
//! The announcement and the check of `live` are a Dekker pair: either the reader sees the watch
//! dead and reads nothing, or the retirer sees the reader's announcement and waits for it to
//! finish. A pair needs a full fence on each side, between its store and its load. Reads are
//! the hot path and retirements (a connection closing) are rare, so on Linux the fence is
//! asymmetric: the retirer issues `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`, which makes
//! every running thread of the process execute a full fence, and the reader needs only to keep
//! the compiler from reordering its store and load. This saves the reader a serializing
//! instruction (an `xchg` on x86) on every hot read, for one system call at each connection's
//! close (about 3 µs on the project's machine, against some 200 µs for open, read and close).
//! Where the process cannot register for it (another system, a kernel without it, a sandbox
//! that refuses the call), or for a watch made in a parent process before a `fork()`, both
//! sides use sequentially consistent operations instead. After a `fork()`, the child's copies
//! of the slots of threads that do not exist in the child say so by their fork generation, and
//! are ignored.
//!
//! Like `wal_index`, this module talks to memory that SQLite owns, hence `unsafe`: the reads of
//! the header, and the `membarrier` system calls.

use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::{compiler_fence, AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use std::cell::OnceCell;

use crate::store::{process, CommitWatch, Mark};

/// A lock-free view of one connection's commit mark, shared (by `Arc`) with the threads that
/// copied a snapshot validated against it; it owns nothing of the connection.
pub struct MarkWatch {
    /// The first copy of the WAL-index header, in SQLite's shared-memory mapping.
    header: NonNull<AtomicU32>,
    /// False once the connection is about to close: the header may no longer be mapped.
    live: AtomicBool,
    /// The fork generation in which the watch was made with the process registered for
    /// asymmetric fences (see the module's doc), or `u64::MAX`: its readers and its retirer
    /// then use sequentially consistent operations. Fixed at creation, so that a reader and the
    /// retirer always agree on the protocol.
    asymmetric: u64,
}

// SAFETY: `header` is only read, with atomic loads, and only while `live` and announced (see
// `unchanged`), which `retire` guarantees to mean "still mapped".
unsafe impl Send for MarkWatch {}
// SAFETY: as for Send; every field is read or written atomically.
unsafe impl Sync for MarkWatch {}

/// One thread's announcement: the watch it is reading (0: none), and the fork generation the
/// thread last read in (a slot copied into a child from a thread of the parent has an older one).
#[repr(align(128))] // its own cache lines: the reader writes it on every read
#[derive(Default)]
struct Slot {
    reading: AtomicUsize,
    generation: AtomicU64,
}

/// Every thread's slot, for `retire` to scan.
static SLOTS: Mutex<Vec<Arc<Slot>>> = Mutex::new(Vec::new());

fn slots() -> MutexGuard<'static, Vec<Arc<Slot>>> {
    SLOTS.lock().unwrap_or_else(|p| p.into_inner())
}

/// A thread's slot, registered for as long as it lives. It must stay on its thread (it is
/// neither `Send` nor `Sync`): two threads announcing in one slot would hide each other.
struct Reader {
    slot: Arc<Slot>,
    _one_thread: PhantomData<*const ()>,
}

impl Reader {
    /// A new slot, registered (takes a lock: once per thread, not once per read).
    fn new() -> Reader {
        let slot = Arc::new(Slot::default());
        slots().push(Arc::clone(&slot));
        Reader {
            slot,
            _one_thread: PhantomData,
        }
    }
}

impl Default for Reader {
    fn default() -> Reader {
        Reader::new()
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        slots().retain(|s| !Arc::ptr_eq(s, &self.slot));
    }
}

thread_local! {
    /// This thread's slot, made at its first read of a watch and unregistered when it exits.
    static READER: OnceCell<Reader> = const { OnceCell::new() };
}

impl CommitWatch for MarkWatch {
    #[inline]
    fn unchanged(&self, mark: &Mark) -> bool {
        READER
            .try_with(|reader| self.unchanged_for(reader.get_or_init(Reader::new), mark))
            .unwrap_or(false) // the thread is exiting: take the locked path
    }
}

impl MarkWatch {
    /// A watch of the header at `header`, which must stay mapped until [`MarkWatch::retire`].
    pub(super) fn new(header: NonNull<AtomicU32>) -> MarkWatch {
        MarkWatch {
            header,
            live: AtomicBool::new(true),
            asymmetric: fences::register(),
        }
    }

    /// True when the connection is open and the header's first copy is `mark`: no commit
    /// became visible since `mark` was read. False when unsure (a commit under way, the
    /// connection closing): the caller then takes the locked path. `reader` is the calling
    /// thread's slot.
    ///
    /// The first copy alone is enough to confirm a known mark: SQLite writes it last, so while
    /// every word still reads as before, the commit that changes it has not finished.
    #[inline]
    fn unchanged_for(&self, reader: &Reader, mark: &Mark) -> bool {
        let slot = &reader.slot;
        let now = process::generation();
        if slot.generation.load(Ordering::Relaxed) != now {
            slot.generation.store(now, Ordering::Relaxed);
        }
        let me = self as *const MarkWatch as usize;
        let live = if self.asymmetric == now {
            // The retirer's membarrier stands for the fence between the two.
            slot.reading.store(me, Ordering::Relaxed);
            compiler_fence(Ordering::SeqCst);
            self.live.load(Ordering::Relaxed)
        } else {
            slot.reading.store(me, Ordering::SeqCst);
            self.live.load(Ordering::SeqCst)
        };
        let same = live
            && mark.0.iter().enumerate().all(|(i, want)| {
                // SAFETY: `live` was true after this thread announced itself, so `retire`
                // (and the connection's close after it) waits for the announcement to be
                // withdrawn below; until then the mapping is there. Word `i` < 12 (a mark's length) lies in
                // region 0 (32 KiB), 4-byte aligned.
                let word = unsafe { &*self.header.as_ptr().add(i) };
                word.load(Ordering::Acquire) == *want
            });
        slot.reading.store(0, Ordering::Release);
        same
    }

    /// Marks the watch dead and waits until no thread is reading it: after this, the
    /// connection may close. Called once per watch, before its connection closes.
    ///
    /// Returns false, for a watch whose readers rely on asymmetric fences, when the process's
    /// fence could not be issued: a reader may then still be reading the header, and the
    /// caller must keep the connection (and its mapping) open for the life of the process.
    /// Never expected once the process registered for it.
    #[must_use]
    pub(super) fn retire(&self) -> bool {
        self.live.store(false, Ordering::SeqCst);
        let me = self as *const MarkWatch as usize;
        let now = process::generation();
        if self.asymmetric == now && !fences::heavy() {
            return false;
        }
        for slot in slots().iter() {
            // A reader announced before it saw `live` false: it is a few loads from done.
            while slot.reading.load(Ordering::SeqCst) == me
                && slot.generation.load(Ordering::Acquire) == now
            {
                std::thread::yield_now();
            }
        }
        true
    }
}

/// The heavy side of the asymmetric fences, with `membarrier(2)` on Linux.
#[cfg(target_os = "linux")]
mod fences {
    use std::sync::atomic::{AtomicU64, Ordering};

    use crate::store::process;

    /// `MEMBARRIER_CMD_PRIVATE_EXPEDITED` and its registration, from `linux/membarrier.h`.
    const PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
    const REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;

    /// The fork generation the process registered in (`u64::MAX`: none yet; a failed
    /// registration is tried again by the next watch, a system call per connection at most).
    static REGISTERED: AtomicU64 = AtomicU64::new(u64::MAX);

    /// Registers the process (once per fork generation) and returns the generation, or
    /// `u64::MAX` when the kernel refuses.
    pub(super) fn register() -> u64 {
        let now = process::generation();
        if REGISTERED.load(Ordering::Acquire) == now {
            return now;
        }
        // SAFETY: membarrier takes two integers and a CPU id and touches no memory of ours;
        // registering only enables the expedited command for this process.
        let rc = unsafe { libc::syscall(libc::SYS_membarrier, REGISTER_PRIVATE_EXPEDITED, 0, 0) };
        if rc != 0 {
            return u64::MAX;
        }
        REGISTERED.store(now, Ordering::Release);
        now
    }

    /// A full fence on every running thread of the process; false if the kernel refused.
    pub(super) fn heavy() -> bool {
        // SAFETY: as in `register`; the process registered in this generation (the caller's
        // watch says so), which this command requires.
        unsafe { libc::syscall(libc::SYS_membarrier, PRIVATE_EXPEDITED, 0, 0) == 0 }
    }
}

/// Elsewhere, no asymmetric fence: every watch uses sequentially consistent operations.
#[cfg(not(target_os = "linux"))]
mod fences {
    pub(super) fn register() -> u64 {
        u64::MAX
    }

    pub(super) fn heavy() -> bool {
        false
    }
}
