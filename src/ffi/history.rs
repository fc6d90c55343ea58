//! Versions, compare-and-set, and the change log: `agent_get_state_versioned`,
//! `agent_set_state_if`, `agent_replace_state_if`, `agent_poll`, `agent_changes_since`,
//! `agent_get_state_at`, `agent_restore_state`.

use super::boundary;
use super::buffer::{self, AgentBuffer, Owner};
use super::handle::{self, AgentHandle};
use super::status::AgentStatus;
use crate::error::Error;

/// Empties `*out` first, so that it is empty whatever happens next.
///
/// # Safety
/// `out` must be NULL or valid for writing one `AgentBuffer`.
unsafe fn clear(out: *mut AgentBuffer) {
    if !out.is_null() {
        // SAFETY: by this function's contract.
        unsafe { out.write(AgentBuffer::EMPTY) };
    }
}

/// Writes `value` to `out` when `out` is not NULL.
///
/// # Safety
/// `out` must be NULL or valid for writing a `u64`.
unsafe fn put(out: *mut u64, value: u64) {
    if !out.is_null() {
        // SAFETY: by this function's contract.
        unsafe { out.write(value) };
    }
}

/// Reads the state and its version together: `*out` as `agent_get_state`, `*out_version` the
/// number of committed changes of this store (0 while nothing is stored; then `*out` is the
/// initial state).
///
/// Ownership, errors and thread-safety as `agent_get_state`; `out_version` may be NULL.
#[no_mangle]
pub unsafe extern "C" fn agent_get_state_versioned(
    h: AgentHandle,
    out: *mut AgentBuffer,
    out_version: *mut u64,
) -> AgentStatus {
    boundary::run("agent_get_state_versioned", || {
        // SAFETY: `out_version` is NULL or writable, per the caller.
        unsafe { put(out_version, 0) };
        if out.is_null() {
            return Err(Error::InvalidArgument("out is NULL".into()));
        }
        // SAFETY: `out` is not NULL and writable.
        unsafe { clear(out) };
        let v = handle::get(h)?.get_state_versioned()?;
        // SAFETY: checked above.
        unsafe {
            buffer::store(out, AgentBuffer::from_snapshot(v.state));
            put(out_version, v.version);
        }
        Ok(())
    })
}

/// Compare-and-set merge: `agent_set_state`, but only if the store's version is still
/// `expected_version` (0: nothing stored yet) when the write transaction starts; otherwise
/// `AGENT_ERR_CONFLICT` and nothing is written. On success `*out_version` (may be NULL)
/// receives the new version. Use with `agent_get_state_versioned` for read-modify-write loops
/// that never overwrite another writer's change.
///
/// Ownership, hooks and the other errors as `agent_set_state`.
#[no_mangle]
pub unsafe extern "C" fn agent_set_state_if(
    h: AgentHandle,
    expected_version: u64,
    patch: *const u8,
    len: usize,
    out: *mut AgentBuffer,
    out_version: *mut u64,
) -> AgentStatus {
    // SAFETY: forwarded under the same contract.
    unsafe {
        write_if(
            "agent_set_state_if",
            h,
            expected_version,
            patch,
            len,
            out,
            out_version,
            false,
        )
    }
}

/// Compare-and-set replacement: `agent_replace_state`, but only if the store's version is still
/// `expected_version`; otherwise `AGENT_ERR_CONFLICT` and nothing is written. On success
/// `*out_version` (may be NULL) receives the new version.
#[no_mangle]
pub unsafe extern "C" fn agent_replace_state_if(
    h: AgentHandle,
    expected_version: u64,
    next: *const u8,
    len: usize,
    out: *mut AgentBuffer,
    out_version: *mut u64,
) -> AgentStatus {
    // SAFETY: forwarded under the same contract.
    unsafe {
        write_if(
            "agent_replace_state_if",
            h,
            expected_version,
            next,
            len,
            out,
            out_version,
            true,
        )
    }
}

/// # Safety
/// As the exports above.
#[allow(clippy::too_many_arguments)]
unsafe fn write_if(
    name: &str,
    h: AgentHandle,
    expected: u64,
    data: *const u8,
    len: usize,
    out: *mut AgentBuffer,
    out_version: *mut u64,
    replace: bool,
) -> AgentStatus {
    boundary::run(name, || {
        // SAFETY: `out` and `out_version` are NULL or writable, per the caller.
        unsafe {
            clear(out);
            put(out_version, 0);
        }
        if data.is_null() {
            return Err(Error::InvalidArgument(
                if replace {
                    "next is NULL"
                } else {
                    "patch is NULL"
                }
                .into(),
            ));
        }
        // SAFETY: not NULL; the caller guarantees `len` readable bytes.
        let input = unsafe { std::slice::from_raw_parts(data, len) };
        let agent = handle::get(h)?;
        let v = if replace {
            agent.replace_state_if(input, Some(expected))?
        } else {
            agent.set_state_if(input, Some(expected))?
        };
        // SAFETY: NULL or writable.
        unsafe {
            put(out_version, v.version);
            buffer::store(out, AgentBuffer::from_snapshot(v.state));
        }
        Ok(())
    })
}

/// Delivers to `h`'s `on_state_changed` hooks, on this thread and in commit order, every change
/// that other handles or processes committed since `h`'s last delivery, each once, with its
/// real `prev`, `next`, `patch` and `version`. Needs the change log (open option
/// `change_log`). The library starts no thread: call it when convenient (a timer, an event
/// loop). `*out_delivered` (may be NULL) receives how many changes were delivered, also when
/// the call returns `AGENT_ERR_GAP` or `AGENT_ERR_HOOK`.
///
/// Changes committed before `h` was opened are not delivered. The first change of a store
/// (version 1) is delivered with the writer's initial state as `prev`. A write through `h` first
/// delivers the other handles' pending changes, so `h`'s hooks always see one ordered history.
/// If the log's retention dropped changes before `h` delivered them, they are skipped and the
/// call returns `AGENT_ERR_GAP` (once) after delivering the rest; the state is current.
/// Errors: `AGENT_ERR_INVALID_ARGUMENT` (the log is off), `AGENT_ERR_BAD_HANDLE`,
/// `AGENT_ERR_STORAGE`, `AGENT_ERR_BUSY`, `AGENT_ERR_GAP`, `AGENT_ERR_HOOK` (a hook returned
/// non-zero; the deliveries still all happened).
/// Thread-safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn agent_poll(h: AgentHandle, out_delivered: *mut usize) -> AgentStatus {
    boundary::run("agent_poll", || {
        if !out_delivered.is_null() {
            // SAFETY: not NULL; the caller guarantees it is writable.
            unsafe { out_delivered.write(0) };
        }
        let (n, result) = handle::get(h)?.poll_counted();
        if !out_delivered.is_null() {
            // SAFETY: as above.
            unsafe { out_delivered.write(n) };
        }
        result
    })
}

/// The changes committed after version `after` (by any handle), oldest first, as one JSON
/// array in `*out`: `[{"version":N,"at":MS,"patch":{...}|null,"next":{...}},...]` (`at`:
/// milliseconds since the Unix epoch; `patch` null for a replacement). For a client that
/// reconnects: send it the changes since the version it has.
///
/// Errors: `AGENT_ERR_INVALID_ARGUMENT` (NULL `out`, the log is off, `after` is in the future),
/// `AGENT_ERR_GAP` (the log no longer holds all of them: send the whole state instead),
/// `AGENT_ERR_BAD_HANDLE`, `AGENT_ERR_STORAGE`.
/// Ownership: release `*out` with `agent_buffer_free`. Thread-safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn agent_changes_since(
    h: AgentHandle,
    after: u64,
    out: *mut AgentBuffer,
) -> AgentStatus {
    boundary::run("agent_changes_since", || {
        if out.is_null() {
            return Err(Error::InvalidArgument("out is NULL".into()));
        }
        // SAFETY: not NULL and writable.
        unsafe { clear(out) };
        let mut json = handle::get(h)?.changes_since(after)?;
        json.push(0);
        // SAFETY: not NULL and writable.
        unsafe {
            buffer::store(
                out,
                AgentBuffer::from_owner(Owner::Bytes(json.into_boxed_slice())),
            )
        };
        Ok(())
    })
}

/// The state at `version`: the current one, one the change log retains, or 0 (the initial
/// state). Errors: `AGENT_ERR_GAP` (not retained), `AGENT_ERR_INVALID_ARGUMENT` (NULL `out`, a
/// future version), `AGENT_ERR_BAD_HANDLE`, `AGENT_ERR_STORAGE`.
/// Ownership: release `*out` with `agent_buffer_free`. Thread-safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn agent_get_state_at(
    h: AgentHandle,
    version: u64,
    out: *mut AgentBuffer,
) -> AgentStatus {
    boundary::run("agent_get_state_at", || {
        if out.is_null() {
            return Err(Error::InvalidArgument("out is NULL".into()));
        }
        // SAFETY: not NULL and writable.
        unsafe { clear(out) };
        let state = handle::get(h)?.state_at(version)?;
        // SAFETY: not NULL and writable.
        unsafe { buffer::store(out, AgentBuffer::from_snapshot(state)) };
        Ok(())
    })
}

/// Point-in-time recovery: replaces the state with the state at `version` (as
/// `agent_get_state_at` finds it), as a new change with a new version; hooks see it as a
/// replacement. `*out` (may be NULL) receives the restored state, `*out_version` (may be NULL)
/// its new version. Errors: those of `agent_get_state_at` and `agent_replace_state`.
#[no_mangle]
pub unsafe extern "C" fn agent_restore_state(
    h: AgentHandle,
    version: u64,
    out: *mut AgentBuffer,
    out_version: *mut u64,
) -> AgentStatus {
    boundary::run("agent_restore_state", || {
        // SAFETY: NULL or writable, per the caller.
        unsafe {
            clear(out);
            put(out_version, 0);
        }
        let v = handle::get(h)?.restore(version)?;
        // SAFETY: NULL or writable.
        unsafe {
            put(out_version, v.version);
            buffer::store(out, AgentBuffer::from_snapshot(v.state));
        }
        Ok(())
    })
}
