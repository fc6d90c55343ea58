//! Cancel tokens: `agent_cancel_new`, `agent_cancel_bind`, `agent_cancel_fire`,
//! `agent_cancel_free`. One call is cancelled by binding a token to the thread that makes it:
//! every `agent_*` call of that thread honours the bound token while it waits.

use agent_state::{Cancel, Error};

use super::args::NumberOut;
use super::boundary;
use super::handle::CANCELS;
use super::status::AgentStatus;

/// A cancel token, as C sees it: an opaque id, like `AgentHandle` (0 is never a token).
pub type AgentCancel = u64;

/// Makes a cancel token into `*out`. `timeout_ms` >= 0 gives it a deadline: the token fires by
/// itself that many milliseconds from now (0: already due); a negative `timeout_ms` gives it
/// none (it fires only by `agent_cancel_fire`).
///
/// Ownership: the token is the caller's until `agent_cancel_free`. Errors:
/// `AGENT_ERR_INVALID_ARGUMENT` (`out` is NULL). Thread-safety: any thread.
///
/// # Safety
/// `out` must be NULL or point to writable memory for one `AgentCancel`.
#[no_mangle]
pub unsafe extern "C" fn agent_cancel_new(timeout_ms: i64, out: *mut AgentCancel) -> AgentStatus {
    boundary::run("agent_cancel_new", || {
        // SAFETY: NULL or writable, per the caller.
        let out = unsafe { NumberOut::new(out) };
        out.required("out")?;
        let token = match u64::try_from(timeout_ms) {
            Ok(ms) => Cancel::with_timeout(std::time::Duration::from_millis(ms)),
            Err(_) => Cancel::new(),
        };
        out.set(CANCELS.insert(token));
        Ok(())
    })
}

/// Binds `token` to the calling thread: from now on, until another `agent_cancel_bind` on this
/// thread, each `agent_*` call this thread makes returns `AGENT_ERR_CANCELLED` as soon as the
/// token has fired (at once when it already has), within a few milliseconds while it waits
/// for a lock, a pooled connection, its turn on the handle or the server (see
/// `AGENT_ERR_CANCELLED`). Nothing is written by a cancelled call. `token` 0 unbinds.
///
/// To cancel one call: make a token, bind it, make the call, bind 0; fire the token from any
/// other thread (or let its deadline pass) to end the call's wait. Other threads' calls, on the
/// same handle or others, are not affected. A bound token stays alive while bound, even if
/// freed meanwhile.
///
/// Errors: `AGENT_ERR_BAD_HANDLE` (`token` is not 0 and was never made or is freed; the thread
/// keeps the token it had). Thread-safety: binds for the calling thread only. Not from inside
/// a hook (the hook's thread is the writer's: the binding would outlast the hook).
#[no_mangle]
pub extern "C" fn agent_cancel_bind(token: AgentCancel) -> AgentStatus {
    boundary::run("agent_cancel_bind", || {
        let bound = match token {
            0 => None,
            t => Some((*CANCELS.get(t)?).clone()),
        };
        agent_state::cancel::bind(bound);
        Ok(())
    })
}

/// Fires `token`: every call waiting under it returns `AGENT_ERR_CANCELLED` within a few
/// milliseconds, and later calls under it at once. Firing twice is harmless.
///
/// Errors: `AGENT_ERR_BAD_HANDLE` (never made, or freed). Thread-safety: any thread, while
/// other threads' calls run under the token (that is its use).
#[no_mangle]
pub extern "C" fn agent_cancel_fire(token: AgentCancel) -> AgentStatus {
    boundary::run("agent_cancel_fire", || {
        CANCELS.get(token)?.cancel();
        Ok(())
    })
}

/// Frees `token`: the id is never valid again. A thread that has it bound keeps honouring it
/// until it binds another (or 0).
///
/// Errors: `AGENT_ERR_BAD_HANDLE` (never made, or already freed). Thread-safety: any thread.
#[no_mangle]
pub extern "C" fn agent_cancel_free(token: AgentCancel) -> AgentStatus {
    boundary::run("agent_cancel_free", || {
        if token == 0 {
            return Err(Error::Closed);
        }
        CANCELS.remove(token).map(drop)
    })
}
