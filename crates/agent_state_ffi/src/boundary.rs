//! The panic boundary every export runs in, and the per-thread last-error message.
//!
//! One generic entry, [`guard`]: the export's body runs under `catch_unwind`, and a panic
//! becomes the fallback value of the export's return type ([`PanicOrDefault`]: a status
//! becomes `AGENT_ERR_PANIC`, a string the empty string, nothing nothing), with a last-error
//! message. [`run`] is the same for the usual shape, a body returning `Result<(), Error>`
//! mapped to a status. No Rust panic ever unwinds into C.

use std::cell::RefCell;
use std::ffi::{c_char, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use super::status::{status_of, AgentStatus, AGENT_ERR_PANIC, AGENT_OK};
use agent_state::Error;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// What an export returns when its body panicked.
pub(crate) trait PanicOrDefault {
    fn panic_value() -> Self;
}

impl PanicOrDefault for AgentStatus {
    fn panic_value() -> Self {
        AGENT_ERR_PANIC
    }
}

impl PanicOrDefault for () {
    fn panic_value() -> Self {}
}

/// Strings returned by exports are static or owned by the library; the fallback is `""`.
impl PanicOrDefault for *const c_char {
    fn panic_value() -> Self {
        c"".as_ptr()
    }
}

/// Records `message` as this thread's last error (interior NULs are replaced).
pub(crate) fn set_last_error(message: String) {
    let message = CString::new(message.replace('\0', "\\0")).unwrap_or_default();
    LAST_ERROR.with(|m| *m.borrow_mut() = message);
}

/// The calling thread's last error message (see `agent_last_error`).
pub(crate) fn last_error_ptr() -> *const c_char {
    // The CString lives in this thread's slot until the next failure on this thread replaces it.
    LAST_ERROR.with(|m| m.borrow().as_ptr())
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic payload".to_string()
    }
}

/// The message of a panic caught in export `name`.
fn panic_report(name: &str, payload: &(dyn std::any::Any + Send)) -> String {
    format!(
        "{name}: internal error (a bug in agent_state, please report it): {}",
        panic_message(payload)
    )
}

/// Runs the body of export `name`; a panic yields the return type's fallback and sets the
/// last-error message, instead of unwinding into C.
pub(crate) fn guard<T: PanicOrDefault>(name: &str, body: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(v) => v,
        Err(payload) => {
            set_last_error(panic_report(name, &*payload));
            T::panic_value()
        }
    }
}

/// [`guard`] for a body that fails with an [`Error`]: maps it to its status and sets the
/// last-error message (`"name: message"`).
pub(crate) fn run(name: &str, body: impl FnOnce() -> Result<(), Error>) -> AgentStatus {
    guard(name, || match body() {
        Ok(()) => AGENT_OK,
        Err(e) => {
            set_last_error(format!("{name}: {e}"));
            status_of(&e)
        }
    })
}

/// [`run`] for work whose outcome travels elsewhere than the calling thread's last error (a
/// submitted call's completion): the body's value, or its status with the message
/// `agent_last_error` would have given (`"name: message"`); a panic is caught as in [`guard`].
/// Sets no last error.
pub(crate) fn outcome<T>(
    name: &str,
    body: impl FnOnce() -> Result<T, Error>,
) -> Result<T, (AgentStatus, String)> {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err((status_of(&e), format!("{name}: {e}"))),
        Err(payload) => Err((AGENT_ERR_PANIC, panic_report(name, &*payload))),
    }
}
