//! Which process this is, as far as store connections go: a count of the forks this process
//! descends from, so that every backend can tell cheaply, on every call, whether a connection
//! was opened by this process or inherited from a parent.
//!
//! No backend may use a connection inherited across `fork()`: an embedded file's POSIX
//! advisory locks belong to the parent (each backend says what its child must do), and a
//! server connection's socket is shared with the parent, where any message the child sends
//! (even the Terminate of an ordinary close) lands in the parent's session. This is the part
//! every backend needs, so it lives here, in the generic store, and no backend depends on
//! another.
//!
//! Comparing process ids would cost a system call per call (`getpid` is not cached by glibc);
//! instead a `pthread_atfork` child handler bumps a counter, and a connection compares the
//! counter it saw when it connected with the current one: one relaxed atomic load.
//!
//! Registering the handler is a call into C (the module's one `unsafe` block, the reason this
//! module alone in `store` allows `unsafe`); everything it exposes is safe.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;

/// How many forks separate this process from the one that loaded the library.
static GENERATION: AtomicU64 = AtomicU64::new(0);
static REGISTER: Once = Once::new();

/// Runs in the child, in its only thread, right after `fork()` returns there: only an atomic
/// add, which is async-signal-safe as POSIX requires of code running at that point.
extern "C" fn forked_child() {
    GENERATION.fetch_add(1, Ordering::Relaxed);
}

/// Registers the fork handler, once per process; every backend calls it before opening a
/// connection (any later fork is then counted).
pub fn watch() {
    REGISTER.call_once(|| {
        // SAFETY: `forked_child` is a plain `extern "C"` function that stays valid for the life of
        // the process (the library is never unloaded while its handlers could run: glibc
        // unregisters atfork handlers of a dlclose'd object). No prepare or parent handler.
        let rc = unsafe { libc::pthread_atfork(None, None, Some(forked_child)) };
        // pthread_atfork fails only with ENOMEM; then forks go unnoticed, as before this
        // module existed. Nothing better can be done here than to keep working.
        debug_assert_eq!(rc, 0, "pthread_atfork failed");
    });
}

/// The current fork generation: one relaxed load, on every call's path (no `Once` check here).
///
/// Relaxed ordering is enough: the counter only changes in a child's single thread before any
/// other thread of that child exists, and creating a thread orders everything before it.
pub fn generation() -> u64 {
    GENERATION.load(Ordering::Relaxed)
}
