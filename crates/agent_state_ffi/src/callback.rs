//! A C callback: a function pointer, the `user_data` it is called with, and the finalizer that
//! releases `user_data` exactly once. One type for all three hook kinds (on_state_changed,
//! initial state, validator); each kind is a trait impl for its function type in `hooks.rs`.

use std::ffi::c_void;

/// Finalizer for a hook's `user_data`; called exactly once, when the library no longer needs it.
pub type AgentFreeFn = Option<unsafe extern "C" fn(user_data: *mut c_void)>;

/// `user_data` plus the finalizer that releases it when dropped. Taken at the very start of a
/// registration, so that a registration that fails (or removes a hook) releases it too.
pub(crate) struct UserData {
    ptr: *mut c_void,
    free: AgentFreeFn,
}

// SAFETY: the registration functions document that hooks run on whichever thread makes a
// change (or needs an initial state), so the caller vouches that `user_data` may be used and
// finalized from any thread.
unsafe impl Send for UserData {}
// SAFETY: as above; the library never touches `ptr` itself, it only passes it back.
unsafe impl Sync for UserData {}

impl UserData {
    pub(crate) fn new(ptr: *mut c_void, free: AgentFreeFn) -> UserData {
        UserData { ptr, free }
    }

    /// The callback of `f` with this `user_data`; `None` when `f` is NULL (then `user_data` is
    /// released now).
    pub(crate) fn attach<F>(self, f: Option<F>) -> Option<Callback<F>> {
        f.map(|f| Callback { f, data: self })
    }
}

impl Drop for UserData {
    fn drop(&mut self) {
        if let Some(free) = self.free {
            // SAFETY: the caller registered `free` for `ptr`; Drop runs once, after the last
            // delivery that could use `ptr` has finished (hooks are held by Arc).
            unsafe { free(self.ptr) }
        }
    }
}

/// A registered C function `f` with its `user_data`.
pub(crate) struct Callback<F> {
    pub(crate) f: F,
    data: UserData,
}

impl<F> Callback<F> {
    /// What `f` is to be called with.
    pub(crate) fn user_data(&self) -> *mut c_void {
        self.data.ptr
    }
}
