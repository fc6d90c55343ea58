//! The watch ring: a small file in shared memory next to a store (`<db>-watch`, mode 0600)
//! where the library's writers, in every process, append which agent they committed to (the
//! hash of its id and the version) right after each commit, deletion and expiry. A watcher
//! (`watch::SqliteSignal`) notices its counter move with one load and reads the new slots, so
//! it reads only the agents that changed, never the store's every agent per commit.
//!
//! Layout (little-endian `u64`s, each used atomically): `[0]` the magic, `[1]` the slot count,
//! `[2]` the count of appends ever made; from byte 64, `SLOTS` slots of three: a sequence word
//! (`2n + 2` once append `n` is complete there, odd while it is written), the id hash and the
//! version. A reader that falls a whole ring behind, or finds a slot rewritten under it, says
//! it cannot tell what changed (the watcher then rescans); a writer killed between taking a
//! slot and filling it leaves a slot that never completes, which the reader skips after a
//! while, also with a rescan. A commit by a program that is not this library appends nothing:
//! the watcher's periodic rescan catches it.
//!
//! Mapping the file is the module's `unsafe` (`mmap`, and atomics over the mapping); the
//! mapping lives as long as the [`Ring`].

use std::fs::OpenOptions;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// "agstwat1": the file is a watch ring of this layout.
const MAGIC: u64 = 0x6167_7374_7761_7431;
/// Slots in the ring: how many commits a watcher may fall behind before it rescans.
const SLOTS: u64 = 4096;
const HEADER_WORDS: usize = 8;
const SIZE: usize = (HEADER_WORDS + 3 * SLOTS as usize) * 8;
/// How long a slot may stay unfinished before the reader gives up on it (a writer killed
/// between taking it and filling it).
const STUCK: Duration = Duration::from_millis(200);

/// The ring's file for the store at `db`.
pub(super) fn path_of(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_os_string();
    name.push("-watch");
    PathBuf::from(name)
}

/// A mapping of a store's watch ring.
pub(crate) struct Ring {
    base: std::ptr::NonNull<AtomicU64>,
}

// SAFETY: the mapping is shared memory used only through atomics; it is unmapped once, in Drop.
unsafe impl Send for Ring {}
// SAFETY: as above: every access is an atomic operation.
unsafe impl Sync for Ring {}

impl Ring {
    /// Opens (creating, mode 0600) and maps the ring of the store at `db`. `None` when it
    /// cannot (a read-only directory, a file of another layout): writers then append nothing
    /// and watchers fall back to the commit mark.
    pub(crate) fn open(db: &Path) -> Option<Ring> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path_of(db))
            .ok()?;
        if file.metadata().ok()?.len() < SIZE as u64 {
            // Growing an empty file zero-fills it; two processes growing it at once agree.
            file.set_len(SIZE as u64).ok()?;
        }
        // SAFETY: maps SIZE bytes of a file at least that long, shared, readable and
        // writable; the result is checked against MAP_FAILED. The file may be closed after.
        let mapped = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if mapped == libc::MAP_FAILED {
            return None;
        }
        let ring = Ring {
            base: std::ptr::NonNull::new(mapped.cast::<AtomicU64>())?,
        };
        // A new file is all zeros: the first to look stamps it.
        let _ = ring
            .word(0)
            .compare_exchange(0, MAGIC, Ordering::AcqRel, Ordering::Acquire);
        let _ = ring
            .word(1)
            .compare_exchange(0, SLOTS, Ordering::AcqRel, Ordering::Acquire);
        let ours = ring.word(0).load(Ordering::Acquire) == MAGIC
            && ring.word(1).load(Ordering::Acquire) == SLOTS;
        ours.then_some(ring)
    }

    fn word(&self, i: usize) -> &AtomicU64 {
        debug_assert!(i < SIZE / 8);
        // SAFETY: `i` is within the SIZE-byte mapping, which is 8-byte aligned (page aligned)
        // and lives as long as `self`; AtomicU64 has the layout of a u64.
        unsafe { &*self.base.as_ptr().add(i) }
    }

    fn slot(&self, n: u64) -> [&AtomicU64; 3] {
        let at = HEADER_WORDS + 3 * (n % SLOTS) as usize;
        [self.word(at), self.word(at + 1), self.word(at + 2)]
    }

    /// The count of appends ever made.
    pub(crate) fn counter(&self) -> u64 {
        self.word(2).load(Ordering::Acquire)
    }

    /// Appends that the agent of `id_hash` was committed to at `version` (0: deleted).
    pub(crate) fn append(&self, id_hash: i64, version: u64) {
        let n = self.word(2).fetch_add(1, Ordering::AcqRel);
        let [seq, hash, ver] = self.slot(n);
        seq.store(2 * n + 1, Ordering::Relaxed);
        fence(Ordering::Release);
        hash.store(id_hash as u64, Ordering::Relaxed);
        ver.store(version, Ordering::Relaxed);
        seq.store(2 * n + 2, Ordering::Release);
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `open`, once; nothing refers to it after.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), SIZE);
        }
    }
}

/// What a reader found in the ring since its last look.
pub(crate) enum Found {
    /// These `(id hash, version)` appends, oldest first (maybe none).
    Appends(Vec<(i64, u64)>),
    /// It cannot tell what changed (lapped, a slot rewritten or stuck): rescan.
    Lost,
}

/// A reader's place in a ring.
pub(crate) struct Reader {
    seen: u64,
    /// Since when the next slot has been unfinished.
    stuck_since: Option<Instant>,
}

impl Reader {
    /// A reader from now on (what was appended before is not its concern).
    pub(crate) fn new(ring: &Ring) -> Reader {
        Reader {
            seen: ring.counter(),
            stuck_since: None,
        }
    }

    /// True when something was appended since the last [`Reader::read`].
    pub(crate) fn moved(&self, ring: &Ring) -> bool {
        ring.counter() != self.seen
    }

    /// The appends since the last read, up to the first still being written.
    pub(crate) fn read(&mut self, ring: &Ring) -> Found {
        let end = ring.counter();
        if end.wrapping_sub(self.seen) > SLOTS {
            self.seen = end;
            return Found::Lost;
        }
        let mut out = Vec::new();
        while self.seen < end {
            let n = self.seen;
            let [seq, hash, ver] = ring.slot(n);
            let before = seq.load(Ordering::Acquire);
            if before != 2 * n + 2 {
                if before > 2 * n + 2 {
                    // Rewritten by a later lap.
                    self.seen = end;
                    return Found::Lost;
                }
                let since = *self.stuck_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= STUCK {
                    self.seen = n + 1;
                    self.stuck_since = None;
                    return Found::Lost;
                }
                break; // being written: the next look takes it
            }
            let (h, v) = (hash.load(Ordering::Relaxed), ver.load(Ordering::Relaxed));
            fence(Ordering::Acquire);
            if seq.load(Ordering::Relaxed) != before {
                self.seen = end;
                return Found::Lost;
            }
            out.push((h as i64, v));
            self.seen = n + 1;
            self.stuck_since = None;
        }
        Found::Appends(out)
    }
}
