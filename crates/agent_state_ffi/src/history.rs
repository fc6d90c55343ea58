//! The change log: `agent_poll`, `agent_changes_since`, `agent_get_state_at`,
//! `agent_restore_state`.

use super::args::{with_agent, BufferOut, NumberOut};
use super::boundary;
use super::buffer::AgentBuffer;
use super::handle::AgentHandle;
use super::status::AgentStatus;

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
        // SAFETY: NULL or writable, per the caller.
        let out_delivered = unsafe { NumberOut::new(out_delivered) };
        let (n, result) = with_agent(h, |agent| Ok(agent.poll_counted()))?;
        out_delivered.set(n);
        result
    })
}

/// The changes committed after version `after` (by any handle), oldest first, as one JSON
/// array in `*out`: `[{"version":N,"at":MS,"kind":K,"schema":S,"migrated_from":F|null,
/// "patch":{...}|[...]|null,"next":{...}},...]` (`at`: milliseconds since the Unix epoch;
/// `kind`: `"merge"`, `"json_patch"`, `"replace"` or `"migration"`; `patch`: the merge patch,
/// the JSON Patch's operations, or null for a replacement or a migration; `schema`: the schema
/// version of `next`; `migrated_from`: for a migration, the version it upgraded from). For a
/// client that reconnects: send it the changes since the version it has.
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
        // SAFETY: NULL or writable, per the caller.
        let out = unsafe { BufferOut::new(out) };
        out.required()?;
        let mut json = with_agent(h, |agent| agent.changes_since(after))?;
        json.push(0);
        out.bytes_with_nul(json);
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
        // SAFETY: NULL or writable, per the caller.
        let out = unsafe { BufferOut::new(out) };
        out.required()?;
        out.snapshot(with_agent(h, |agent| agent.state_at(version))?);
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
        let (out, out_version) = unsafe { (BufferOut::new(out), NumberOut::new(out_version)) };
        let v = with_agent(h, |agent| agent.restore(version))?;
        out_version.set(v.version);
        out.snapshot(v.state);
        Ok(())
    })
}
