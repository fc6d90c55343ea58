//! A cheap test for "has any connection committed since I last looked?", for the read cache.
//!
//! `PRAGMA data_version` answers it, but costs a statement step and a read transaction
//! (about 1.3 µs here, as much as reading the whole state). SQLite itself answers it for every
//! transaction by reading the *WAL-index header* at the start of the shared-memory file
//! (`-shm`), which every committing connection, in any process, rewrites before its commit
//! becomes visible (format documented in SQLite's walformat.html: two copies of a 48-byte
//! header, written copy 2 first, then a barrier, then copy 1). We read that header from
//! SQLite's own mapping of the shared memory, obtained through the public VFS interface
//! (`SQLITE_FCNTL_FILE_POINTER`, then `xShmMap`), the same way: copy 1, a fence, copy 2, and
//! trust them only when equal. An unchanged header means no commit became visible since.
//!
//! This is the one place the store talks to SQLite's C interface directly (hence `unsafe`,
//! allowed in this module only); everything it exposes is safe.

use std::ffi::c_void;
use std::mem::ManuallyDrop;
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU32, Ordering};
use std::sync::Arc;

use rusqlite::{ffi, Connection};

use super::mark_watch::MarkWatch;

/// Words in one copy of the WAL-index header.
const HEADER_WORDS: usize = 12;

/// One copy of the WAL-index header, as an opaque value to compare.
pub type WalHeader = [u32; HEADER_WORDS];

/// A connection together with a view of its WAL-index header.
///
/// Invariant: the view points into SQLite's shared-memory mapping for this connection's main
/// database, which stays mapped while the connection is open in WAL mode. The connection is
/// only lent out by shared reference, and the store never leaves WAL mode, so the view cannot
/// outlive the mapping.
pub struct WatchedConnection {
    // Declared first: dropped (it owns nothing) before `conn` closes the mapping.
    header: Option<NonNull<AtomicU32>>,
    /// The same header for readers that hold no lock; retired (see `Drop`) before `conn` closes.
    watch: Option<Arc<MarkWatch>>,
    /// Closed by `Drop`, after the watch's retirement, unless that failed (then kept open).
    conn: ManuallyDrop<Connection>,
}

// SAFETY: `header` points into memory shared between processes that is only ever read here,
// with atomic loads; the Connection itself is Send.
unsafe impl Send for WatchedConnection {}

/// Lends the connection out by shared reference only (see the invariant above).
impl std::ops::Deref for WatchedConnection {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        &self.conn
    }
}

impl WatchedConnection {
    /// Wraps `conn` without a header view; [`WatchedConnection::watch_wal`] adds one.
    pub fn new(conn: Connection) -> WatchedConnection {
        WatchedConnection {
            header: None,
            watch: None,
            conn: ManuallyDrop::new(conn),
        }
    }

    /// Looks up the WAL-index header of the main database. Call only once the connection is in
    /// WAL mode and has run a transaction (so SQLite has mapped the shared memory); returns
    /// false, leaving the view unset, when the VFS offers no shared memory.
    pub fn watch_wal(&mut self) -> bool {
        if let Some(old) = self.watch.take() {
            // The connection stays open: its mapping stays, whatever the retirement says.
            let _ = old.retire();
        }
        self.header = self.find_header();
        self.watch = self.header.map(|h| Arc::new(MarkWatch::new(h)));
        self.header.is_some()
    }

    /// The header as any thread may read it without this connection (see [`MarkWatch`]).
    pub fn mark_watch(&self) -> Option<Arc<MarkWatch>> {
        self.watch.clone()
    }

    fn find_header(&self) -> Option<NonNull<AtomicU32>> {
        // SAFETY: the handle is only passed to sqlite3_file_control while `self.conn` is open.
        let db = unsafe { self.conn.handle() };
        let mut file: *mut ffi::sqlite3_file = std::ptr::null_mut();
        // SAFETY: FILE_POINTER writes one `sqlite3_file *` to the pointer we pass.
        let rc = unsafe {
            ffi::sqlite3_file_control(
                db,
                c"main".as_ptr(),
                ffi::SQLITE_FCNTL_FILE_POINTER,
                (&mut file as *mut *mut ffi::sqlite3_file).cast::<c_void>(),
            )
        };
        if rc != ffi::SQLITE_OK || file.is_null() {
            return None;
        }
        // SAFETY: `file` is the open main-database file of `db`; its methods table is static.
        let methods = unsafe { (*file).pMethods };
        if methods.is_null() {
            return None;
        }
        // SAFETY: `methods` is non-NULL and points at the VFS's static methods table.
        let (version, shm_map) = unsafe { ((*methods).iVersion, (*methods).xShmMap) };
        let shm_map = shm_map.filter(|_| version >= 2)?;
        let mut region: *mut c_void = std::ptr::null_mut();
        // SAFETY: region 0 with the standard region size (32 KiB) and bExtend = 0 only looks up
        // the mapping SQLite already made for this connection; it never creates or resizes one.
        let rc = unsafe { shm_map(file, 0, 32 * 1024, 0, &mut region) };
        if rc != ffi::SQLITE_OK {
            return None;
        }
        NonNull::new(region.cast::<AtomicU32>())
    }

    /// The pager's data version (`SQLITE_FCNTL_DATA_VERSION`), a function call instead of a
    /// statement. It is brought up to date when a transaction starts, so it is only meaningful
    /// inside one; it changes with every commit, this connection's own included (by exactly
    /// one).
    pub fn pager_data_version(&self) -> Option<u32> {
        // SAFETY: the handle is only used while `self.conn` is open.
        let db = unsafe { self.conn.handle() };
        let mut version: u32 = 0;
        // SAFETY: DATA_VERSION writes one unsigned int to the pointer we pass.
        let rc = unsafe {
            ffi::sqlite3_file_control(
                db,
                c"main".as_ptr(),
                ffi::SQLITE_FCNTL_DATA_VERSION,
                (&mut version as *mut u32).cast::<c_void>(),
            )
        };
        (rc == ffi::SQLITE_OK).then_some(version)
    }

    /// True when the database file was deleted, renamed or replaced since it was opened
    /// (`SQLITE_FCNTL_HAS_MOVED`): a write would go to a file no one can open again.
    pub fn has_moved(&self) -> bool {
        // SAFETY: the handle is only used while `self.conn` is open.
        let db = unsafe { self.conn.handle() };
        let mut moved: std::ffi::c_int = 0;
        // SAFETY: HAS_MOVED writes one int to the pointer we pass.
        let rc = unsafe {
            ffi::sqlite3_file_control(
                db,
                c"main".as_ptr(),
                ffi::SQLITE_FCNTL_HAS_MOVED,
                (&mut moved as *mut std::ffi::c_int).cast::<c_void>(),
            )
        };
        rc == ffi::SQLITE_OK && moved != 0
    }

    /// The current WAL-index header, or `None` when there is no view or a writer is updating
    /// it right now (the two copies differ) or it is not initialized.
    pub fn wal_header(&self) -> Option<WalHeader> {
        let base = self.header?;
        let mut first = [0u32; HEADER_WORDS];
        let mut second = [0u32; HEADER_WORDS];
        for (i, word) in first.iter_mut().enumerate() {
            // SAFETY: region 0 is at least 32 KiB, so words 0..24 are inside the mapping; the
            // mapping is 4-byte aligned (page aligned) and valid (see the type's invariant).
            *word = unsafe { (*base.as_ptr().add(i)).load(Ordering::Acquire) };
        }
        fence(Ordering::SeqCst);
        for (i, word) in second.iter_mut().enumerate() {
            // SAFETY: as above, for the second copy at words 12..24.
            *word = unsafe { (*base.as_ptr().add(HEADER_WORDS + i)).load(Ordering::Acquire) };
        }
        // Byte 12 is isInit; words 0..12 of each copy are the whole header.
        let initialized = first[3].to_ne_bytes()[0] == 1;
        (initialized && first == second).then_some(first)
    }
}

/// Readers without a lock stop reading the header before the connection unmaps it.
impl Drop for WatchedConnection {
    fn drop(&mut self) {
        if let Some(watch) = self.watch.take() {
            if !watch.retire() {
                // A reader may still be reading the header: closing would unmap it under the
                // reader. Kept open instead (a file descriptor and SQLite's memory), for the
                // life of the process; see `MarkWatch::retire`.
                return;
            }
        }
        // SAFETY: `conn` is dropped once, here, and never used after.
        unsafe { ManuallyDrop::drop(&mut self.conn) };
    }
}
