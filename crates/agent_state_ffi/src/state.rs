//! Reading and writing the state: `agent_get_state`, `agent_get_state_versioned`,
//! `agent_set_state` (RFC 7396), `agent_patch_state` (RFC 6902), `agent_replace_state`, and the
//! compare-and-set forms `agent_set_state_if`, `agent_patch_state_if`,
//! `agent_replace_state_if`; reads of one place, `agent_get_path` and `agent_get_tail`.

use std::ffi::c_char;
use std::ptr::null_mut;

use super::args::{input, with_agent, BufferOut, NumberOut};
use super::boundary;
use super::buffer::AgentBuffer;
use super::handle::AgentHandle;
use super::status::AgentStatus;
use agent_state::Agent;

/// Reads the state: the stored object, or the initial state while nothing is stored (reading
/// never stores it). `*out` receives a view of compact JSON text.
///
/// Cost: O(1) when no other connection committed since the last read: the view shares the
/// handle's cached immutable snapshot instead of copying it. When nothing was committed since
/// this thread last read the handle (SQLite files opened for writing), no lock is taken and
/// threads reading one handle do not slow each other down.
/// Ownership: release `*out` with `agent_buffer_free`; it is empty on failure.
/// Errors: `AGENT_ERR_INVALID_ARGUMENT` (NULL `out`), `AGENT_ERR_BAD_HANDLE`,
/// `AGENT_ERR_STORAGE`, `AGENT_ERR_BUSY`; while nothing is stored and an initial-state hook is
/// set, also what its answer earns: `AGENT_ERR_HOOK` (non-zero return),
/// `AGENT_ERR_INVALID_ARGUMENT` (not an object), `AGENT_ERR_JSON`, `AGENT_ERR_CODEC`,
/// `AGENT_ERR_TOO_LARGE`.
/// Thread-safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn agent_get_state(h: AgentHandle, out: *mut AgentBuffer) -> AgentStatus {
    boundary::run("agent_get_state", || {
        // SAFETY: NULL or writable, per the caller.
        let out = unsafe { BufferOut::new(out) };
        out.required()?;
        out.held(with_agent(h, Agent::read)?);
        Ok(())
    })
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
        // SAFETY: NULL or writable, per the caller.
        let (out, out_version) = unsafe { (BufferOut::new(out), NumberOut::new(out_version)) };
        out.required()?;
        let held = with_agent(h, Agent::read)?;
        out_version.set(held.version());
        out.held(held);
        Ok(())
    })
}

/// Merges `patch` (`len` bytes of JSON text: an object) into the state by RFC 7396 — members
/// merge recursively, `null` deletes, everything else (arrays, scalars, tagged values) replaces —
/// in one `BEGIN IMMEDIATE` transaction that starts from the latest committed state. `*out`
/// (when `out` is not NULL) receives the full merged state. After the commit, the handle's
/// `on_state_changed` hooks run on this thread. A merge whose result is the stored state byte
/// for byte (`{}`, or members set to what they are) commits nothing: no new version, no hook,
/// no validator call, no change-log entry; `*out` is the stored state.
///
/// On any error but `AGENT_ERR_HOOK` nothing was written. `AGENT_ERR_HOOK` means the change
/// committed but a hook returned non-zero; `*out` is then empty (read the state again if needed).
/// Ownership: `patch` is only read during the call; release `*out` with `agent_buffer_free`.
/// Errors: `AGENT_ERR_INVALID_ARGUMENT` (NULL `patch`, not an object), `AGENT_ERR_BAD_HANDLE`,
/// `AGENT_ERR_JSON`, `AGENT_ERR_CODEC`, `AGENT_ERR_TOO_LARGE`, `AGENT_ERR_STORAGE` (also: the
/// handle is read-only), `AGENT_ERR_BUSY`, `AGENT_ERR_HOOK`; on the first write with an
/// initial-state hook set, also the errors its answer earns (see `agent_get_state`), with
/// nothing written.
/// Thread-safety: any thread; concurrent writers never lose each other's updates.
#[no_mangle]
pub unsafe extern "C" fn agent_set_state(
    h: AgentHandle,
    patch: *const u8,
    len: usize,
    out: *mut AgentBuffer,
) -> AgentStatus {
    // SAFETY: forwarded under this function's contract.
    unsafe {
        write(
            "agent_set_state",
            h,
            Write::Merge,
            (patch, len),
            None,
            out,
            null_mut(),
        )
    }
}

/// Replaces the state with `next` (`len` bytes of JSON text: an object); nothing of the
/// previous state survives. Same transaction, hook, ownership and error rules as
/// `agent_set_state` (a replacement by the stored state's own bytes commits nothing); hooks see
/// a NULL patch. A stored state that no longer decodes (changed
/// behind the library's back: reads and merges fail with `AGENT_ERR_STORAGE`) is repaired by a
/// replacement; hooks then see `{}` as `prev`.
#[no_mangle]
pub unsafe extern "C" fn agent_replace_state(
    h: AgentHandle,
    next: *const u8,
    len: usize,
    out: *mut AgentBuffer,
) -> AgentStatus {
    // SAFETY: forwarded under this function's contract.
    unsafe {
        write(
            "agent_replace_state",
            h,
            Write::Replace,
            (next, len),
            None,
            out,
            null_mut(),
        )
    }
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
    let input = (patch, len);
    // SAFETY: forwarded under this function's contract.
    unsafe {
        write(
            "agent_set_state_if",
            h,
            Write::Merge,
            input,
            Some(expected_version),
            out,
            out_version,
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
    let input = (next, len);
    // SAFETY: forwarded under this function's contract.
    unsafe {
        write(
            "agent_replace_state_if",
            h,
            Write::Replace,
            input,
            Some(expected_version),
            out,
            out_version,
        )
    }
}

/// Applies an RFC 6902 JSON Patch to the state: `operations` (`len` bytes of JSON text) is an
/// array of operations, each an object with `op` (`add`, `remove`, `replace`, `move`, `copy`,
/// `test`), `path` (an RFC 6901 JSON Pointer; `/messages/-` is the place after an array's last
/// element, where `add` appends) and `value` or `from` as the operation needs. They apply in
/// order, all or nothing, in one write transaction that starts from the latest committed
/// state; `*out` (when `out` is not NULL) receives the new state. Hooks and the validator see
/// the operations as the change's `patch`, with `kind` `AGENT_CHANGE_JSON_PATCH`; the change
/// log keeps them. A patch whose result is the stored state byte for byte commits nothing.
///
/// On any error but `AGENT_ERR_HOOK` nothing was written; `agent_last_error` names the
/// operation at fault (its index from 0, its `op` and `path`).
/// Ownership: `operations` is only read during the call; release `*out` with
/// `agent_buffer_free`.
/// Errors: `AGENT_ERR_INVALID_ARGUMENT` (NULL `operations`; a malformed patch: not an array,
/// an unknown `op`, a missing member, a pointer with a bad escape such as `~2`; a result that
/// is not a JSON object), `AGENT_ERR_PATH` (a path or `from` that does not exist, an index out
/// of range or with a leading zero, a move into its own child), `AGENT_ERR_TEST_FAILED` (a
/// `test` that does not hold), `AGENT_ERR_JSON`, `AGENT_ERR_CODEC` (also: a duplicate member in
/// an operation, a result with a malformed tagged value), `AGENT_ERR_TOO_LARGE` (the patch or
/// the result over `max_value_bytes`), and the others of `agent_set_state`.
/// Thread-safety: any thread; concurrent writers never lose each other's updates.
#[no_mangle]
pub unsafe extern "C" fn agent_patch_state(
    h: AgentHandle,
    operations: *const u8,
    len: usize,
    out: *mut AgentBuffer,
) -> AgentStatus {
    // SAFETY: forwarded under this function's contract.
    unsafe {
        write(
            "agent_patch_state",
            h,
            Write::JsonPatch,
            (operations, len),
            None,
            out,
            null_mut(),
        )
    }
}

/// Compare-and-set JSON Patch: `agent_patch_state`, but only if the store's version is still
/// `expected_version` when the write transaction starts; otherwise `AGENT_ERR_CONFLICT` and
/// nothing is written. On success `*out_version` (may be NULL) receives the new version.
/// (A `test` operation checks a value; this checks the whole state's version.)
#[no_mangle]
pub unsafe extern "C" fn agent_patch_state_if(
    h: AgentHandle,
    expected_version: u64,
    operations: *const u8,
    len: usize,
    out: *mut AgentBuffer,
    out_version: *mut u64,
) -> AgentStatus {
    let input = (operations, len);
    // SAFETY: forwarded under this function's contract.
    unsafe {
        write(
            "agent_patch_state_if",
            h,
            Write::JsonPatch,
            input,
            Some(expected_version),
            out,
            out_version,
        )
    }
}

/// Reads one place of the state: `*out` receives the compact JSON text of the value at
/// `pointer` (`len` bytes of UTF-8: an RFC 6901 JSON Pointer such as `/messages/0/text`; the
/// empty pointer is the whole state). Only that part is encoded, whatever the state's size.
/// Reads as `agent_get_state` does (the initial state while nothing is stored; never writes).
///
/// Ownership: `pointer` is only read during the call; release `*out` with
/// `agent_buffer_free`; it is empty on failure.
/// Errors: `AGENT_ERR_INVALID_ARGUMENT` (NULL `pointer` or `out`; not a JSON Pointer: no
/// leading `/`, a bad escape such as `~2`, invalid UTF-8), `AGENT_ERR_PATH` (nothing there: a
/// member that does not exist, an index out of range or with a leading zero, `-`), and those of
/// `agent_get_state`.
/// Thread-safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn agent_get_path(
    h: AgentHandle,
    pointer: *const c_char,
    len: usize,
    out: *mut AgentBuffer,
) -> AgentStatus {
    boundary::run("agent_get_path", || {
        // SAFETY: NULL or writable, per the caller.
        let out = unsafe { BufferOut::new(out) };
        out.required()?;
        // SAFETY: NULL or readable for `len` bytes, per the caller.
        let pointer = unsafe { pointer_arg(pointer, len) }?;
        let mut bytes = with_agent(h, |agent| agent.get_path(pointer))?;
        bytes.push(0);
        out.bytes_with_nul(bytes);
        Ok(())
    })
}

/// Reads the last `n` elements of the array at `pointer` (as `agent_get_path`): `*out`
/// receives a JSON array of at most `n` elements, oldest first (all of them when there are
/// fewer). The last message of a conversation is `agent_get_tail(h, "/messages", 9, 1, &out)`.
///
/// Ownership and thread-safety as `agent_get_path`.
/// Errors: those of `agent_get_path`, and `AGENT_ERR_INVALID_ARGUMENT` when the value there is
/// not an array.
#[no_mangle]
pub unsafe extern "C" fn agent_get_tail(
    h: AgentHandle,
    pointer: *const c_char,
    len: usize,
    n: usize,
    out: *mut AgentBuffer,
) -> AgentStatus {
    boundary::run("agent_get_tail", || {
        // SAFETY: NULL or writable, per the caller.
        let out = unsafe { BufferOut::new(out) };
        out.required()?;
        // SAFETY: NULL or readable for `len` bytes, per the caller.
        let pointer = unsafe { pointer_arg(pointer, len) }?;
        let mut bytes = with_agent(h, |agent| agent.get_tail(pointer, n))?;
        bytes.push(0);
        out.bytes_with_nul(bytes);
        Ok(())
    })
}

/// A JSON Pointer argument: `len` bytes of UTF-8 at `ptr`.
///
/// # Safety
/// `ptr` NULL or readable for `len` bytes during the call.
unsafe fn pointer_arg<'a>(ptr: *const c_char, len: usize) -> agent_state::Result<&'a str> {
    // SAFETY: forwarded under this function's contract.
    let bytes = unsafe { input(ptr.cast(), len, "pointer") }?;
    std::str::from_utf8(bytes).map_err(|e| {
        agent_state::Error::InvalidArgument(format!(
            "the pointer is not UTF-8 (invalid byte at {})",
            e.valid_up_to()
        ))
    })
}

/// The three kinds of write.
enum Write {
    /// RFC 7396 merge of a patch (argument `patch`).
    Merge,
    /// RFC 6902 JSON Patch (argument `operations`).
    JsonPatch,
    /// Replacement (argument `next`).
    Replace,
}

/// The body of the four writes (`agent_set_state`, `agent_replace_state` and their `_if`
/// forms): `kind` with the `len` bytes at `data`, when the version is `expected` (if given).
///
/// # Safety
/// As the exports: `data` NULL or readable for `len` bytes; `out` and `out_version` NULL or
/// writable.
unsafe fn write(
    name: &str,
    h: AgentHandle,
    kind: Write,
    (data, len): (*const u8, usize),
    expected: Option<u64>,
    out: *mut AgentBuffer,
    out_version: *mut u64,
) -> AgentStatus {
    boundary::run(name, || {
        // SAFETY: NULL or writable, per the caller.
        let (out, out_version) = unsafe { (BufferOut::new(out), NumberOut::new(out_version)) };
        let arg = match kind {
            Write::Merge => "patch",
            Write::JsonPatch => "operations",
            Write::Replace => "next",
        };
        // SAFETY: NULL or readable for `len` bytes, per the caller.
        let input = unsafe { input(data, len, arg) }?;
        let v = with_agent(h, |agent| match kind {
            Write::Merge => agent.set_state_if(input, expected),
            Write::JsonPatch => agent.patch_state_if(input, expected),
            Write::Replace => agent.replace_state_if(input, expected),
        })?;
        out_version.set(v.version);
        out.snapshot(v.state);
        Ok(())
    })
}
