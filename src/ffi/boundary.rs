//! The panic boundary every export runs in, and the per-thread last-error message.

use std::cell::RefCell;
use std::ffi::{c_char, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use super::status::{status_of, AgentStatus, AGENT_ERR_PANIC, AGENT_OK};
use crate::error::Error;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
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

/// Runs the body of export `name`: maps its error to a status and a last-error message, and
/// turns a panic into `AGENT_ERR_PANIC` instead of unwinding into C.
pub(crate) fn run(name: &str, body: impl FnOnce() -> Result<(), Error>) -> AgentStatus {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => AGENT_OK,
        Ok(Err(e)) => {
            set_last_error(format!("{name}: {e}"));
            status_of(&e)
        }
        Err(payload) => {
            set_last_error(format!(
                "{name}: internal error (a bug in agent_state, please report it): {}",
                panic_message(&*payload)
            ));
            AGENT_ERR_PANIC
        }
    }
}

/// Like [`run`] for exports that return a value instead of a status: a panic yields `fallback`.
pub(crate) fn run_value<T>(name: &str, fallback: T, body: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(v) => v,
        Err(payload) => {
            set_last_error(format!(
                "{name}: internal error (a bug in agent_state, please report it): {}",
                panic_message(&*payload)
            ));
            fallback
        }
    }
}
