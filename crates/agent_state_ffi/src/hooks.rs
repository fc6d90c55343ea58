//! C hooks: function pointers with `user_data` and an optional finalizer, adapted to the core's
//! hook traits.

use std::ffi::c_void;
use std::sync::Arc;

use super::args::{with_agent, NumberOut};
use super::boundary;
use super::buffer::AgentBuffer;
use super::callback::{AgentFreeFn, Callback, UserData};
use super::handle::AgentHandle;
use super::status::AgentStatus;
use agent_state::Error;
use agent_state::{ChangeKind, InitialStateHook, StateChange, StateChangedHook, Validator};

/// One committed change, as an `on_state_changed` hook sees it: borrowed views of compact JSON
/// text, each NUL-terminated after its length, valid only until the hook returns (copy what you
/// keep).
#[repr(C)]
pub struct AgentStateChange {
    /// The state after the change.
    pub next: *const u8,
    /// Length of `next` in bytes.
    pub next_len: usize,
    /// The state before the change (the initial state if nothing was stored).
    pub prev: *const u8,
    /// Length of `prev` in bytes.
    pub prev_len: usize,
    /// The patch as applied: the merge patch (an object) of `agent_set_state`, the operations
    /// (an array) of `agent_patch_state` (see `kind`); NULL for `agent_replace_state`.
    pub patch: *const u8,
    /// Length of `patch` in bytes; 0 when `patch` is NULL.
    pub patch_len: usize,
    /// The state's version after the change (1 for a store's first write). Appended in 0.2:
    /// earlier callers that do not read it keep working.
    pub version: u64,
    /// What kind of change: `AGENT_CHANGE_MERGE`, `AGENT_CHANGE_REPLACE` (also a restore, and
    /// a deletion seen by `agent_poll`), `AGENT_CHANGE_MIGRATION` or `AGENT_CHANGE_JSON_PATCH`.
    /// Appended in 0.4, as are
    /// the two fields after it.
    pub kind: i32,
    /// The schema version of `next` (the writer's `schema_version` option; 0 when none).
    pub schema: u32,
    /// For `AGENT_CHANGE_MIGRATION`: the schema version the state was upgraded from; else 0.
    pub migrated_from: u32,
}

/// `AgentStateChange.kind` of a merge patch (`agent_set_state`, `agent_set_state_if`).
pub const AGENT_CHANGE_MERGE: i32 = 1;
/// `AgentStateChange.kind` of a replacement (`agent_replace_state`, `agent_restore_state`, a
/// deletion seen by `agent_poll`).
pub const AGENT_CHANGE_REPLACE: i32 = 2;
/// `AgentStateChange.kind` of a schema migration: a state stored under an older schema version
/// upgraded to the handle's (`migrated_from` to `schema`).
pub const AGENT_CHANGE_MIGRATION: i32 = 3;
/// `AgentStateChange.kind` of an RFC 6902 JSON Patch (`agent_patch_state`,
/// `agent_patch_state_if`): `patch` is the array of operations.
pub const AGENT_CHANGE_JSON_PATCH: i32 = 4;

/// An `on_state_changed` hook. Return 0 for success; any other value makes the call that made
/// the change return `AGENT_ERR_HOOK` (the change stays committed). `change` and the bytes it
/// points to are valid only during the call.
pub type AgentStateChangedFn =
    Option<unsafe extern "C" fn(user_data: *mut c_void, change: *const AgentStateChange) -> i32>;

/// An initial-state hook: fill `*out` with the JSON text of a plain object, normally with
/// `agent_buffer_copy` (the library then frees it), or point `out->data`/`out->len` at memory
/// that stays valid until the hook is called again or removed (a static string, say), leaving
/// `out->owner` NULL. Return 0 for success; any
/// other value makes the call that needed the initial state fail with `AGENT_ERR_HOOK`.
pub type AgentInitialStateFn =
    Option<unsafe extern "C" fn(user_data: *mut c_void, out: *mut AgentBuffer) -> i32>;

/// A validation gate: return 0 to let the change commit, anything else to reject it
/// (`AGENT_ERR_REJECTED`, nothing written). To explain why, fill `*message` with
/// `agent_buffer_copy` (UTF-8 text; the library frees it); the caller's `agent_last_error`
/// then includes it. `change` describes the change about to commit (`version` is the version
/// it would get) and is valid only during the call.
pub type AgentValidateFn = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        change: *const AgentStateChange,
        message: *mut AgentBuffer,
    ) -> i32,
>;

/// The three hook kinds, as callbacks (non-NULL function pointers).
type StateChangedFn = unsafe extern "C" fn(*mut c_void, *const AgentStateChange) -> i32;
type InitialStateFn = unsafe extern "C" fn(*mut c_void, *mut AgentBuffer) -> i32;
type ValidateFn =
    unsafe extern "C" fn(*mut c_void, *const AgentStateChange, *mut AgentBuffer) -> i32;

/// The C view of a change; it borrows from `change`.
fn change_view(change: &StateChange) -> AgentStateChange {
    let (patch, patch_len) = match &change.patch {
        Some(p) => (p.json_with_nul().as_ptr(), p.json().len()),
        None => (std::ptr::null(), 0),
    };
    AgentStateChange {
        next: change.next.json_with_nul().as_ptr(),
        next_len: change.next.json().len(),
        prev: change.prev.json_with_nul().as_ptr(),
        prev_len: change.prev.json().len(),
        patch,
        patch_len,
        version: change.version,
        kind: match change.kind {
            ChangeKind::Merge => AGENT_CHANGE_MERGE,
            ChangeKind::Migration { .. } => AGENT_CHANGE_MIGRATION,
            ChangeKind::JsonPatch => AGENT_CHANGE_JSON_PATCH,
            _ => AGENT_CHANGE_REPLACE,
        },
        schema: change.schema,
        migrated_from: match change.kind {
            ChangeKind::Migration { from } => from,
            _ => 0,
        },
    }
}

impl StateChangedHook for Callback<StateChangedFn> {
    fn on_state_changed(&self, change: &StateChange) -> Result<(), String> {
        let view = change_view(change);
        // SAFETY: `f` is the caller's hook; `view` and the snapshots it points into outlive the
        // call.
        let rc = unsafe { (self.f)(self.user_data(), &view) };
        if rc == 0 {
            Ok(())
        } else {
            Err(format!("returned {rc}"))
        }
    }
}

impl InitialStateHook for Callback<InitialStateFn> {
    fn initial_state(&self) -> Result<Vec<u8>, String> {
        let mut out = AgentBuffer::EMPTY;
        // SAFETY: `f` is the caller's hook, given a valid, empty buffer to fill.
        let rc = unsafe { (self.f)(self.user_data(), &mut out) };
        let bytes = if out.data.is_null() {
            None
        } else {
            // SAFETY: the hook's contract: `data` points at `len` readable bytes, owned either by
            // a library buffer (from agent_buffer_copy) or by the hook until it is next called.
            Some(unsafe { std::slice::from_raw_parts(out.data, out.len) }.to_vec())
        };
        // SAFETY: `owner` is NULL or came from agent_buffer_copy, per the hook contract.
        drop(unsafe { out.take_owner() });
        if rc != 0 {
            return Err(format!("returned {rc}"));
        }
        bytes.ok_or_else(|| "returned 0 but left *out empty".to_string())
    }
}

/// Registers `fn` to run after every committed change made through handle `h` (by
/// `agent_set_state` or `agent_replace_state`, from any thread), and stores its id in `*out_id`.
///
/// Delivery: on the thread that made the change, after the commit, with no lock of the library
/// held; in commit order (for a handle, each delivery's `prev` equals the previous delivery's
/// `next`, also with many writing threads). Only changes made through `h` are delivered: when
/// another handle or process commits in between, the next delivery's `prev` includes its change. Several hooks run in registration order. A hook may
/// call `agent_get_state`, `agent_set_state`, `agent_replace_state` (the nested change is
/// delivered after the running hook returns), register or remove hooks, and `agent_close` its
/// own handle. It must return normally: no longjmp, no C++ exception through the library.
///
/// Ownership: `free_user_data` (may be NULL) is called exactly once with `user_data` when the
/// library no longer needs it: after `agent_remove_hook` or `agent_close` and once no running
/// delivery uses it, or right away if this call fails.
/// Errors: `AGENT_ERR_INVALID_ARGUMENT` (NULL `fn` or `out_id`), `AGENT_ERR_BAD_HANDLE`,
/// `AGENT_ERR_BUSY` (called from inside `h`'s initial-state hook).
/// Thread-safety: any thread; `user_data` must be usable from every thread that writes.
#[no_mangle]
pub unsafe extern "C" fn agent_on_state_changed(
    h: AgentHandle,
    r#fn: AgentStateChangedFn,
    user_data: *mut c_void,
    free_user_data: AgentFreeFn,
    out_id: *mut u64,
) -> AgentStatus {
    let data = UserData::new(user_data, free_user_data);
    boundary::run("agent_on_state_changed", move || {
        // SAFETY: NULL or writable, per the caller.
        let out_id = unsafe { NumberOut::new(out_id) };
        let Some(hook) = data.attach(r#fn) else {
            return Err(Error::InvalidArgument("fn is NULL".into()));
        };
        out_id.required("out_id")?;
        let id = with_agent(h, |agent| agent.on_state_changed(Arc::new(hook)))?;
        out_id.set(id);
        Ok(())
    })
}

/// Unregisters hook `id` of handle `h`. After this returns the hook is not called for changes
/// delivered later; a delivery already running on another thread may still be inside it, and
/// its `free_user_data` runs when that delivery finishes.
///
/// Errors: `AGENT_ERR_INVALID_ARGUMENT` (no such hook on this handle), `AGENT_ERR_BAD_HANDLE`,
/// `AGENT_ERR_BUSY` (called from inside `h`'s initial-state hook).
/// Thread-safety: any thread, including from inside a hook.
#[no_mangle]
pub extern "C" fn agent_remove_hook(h: AgentHandle, id: u64) -> AgentStatus {
    boundary::run("agent_remove_hook", || {
        with_agent(h, |agent| agent.remove_hook(id))
    })
}

/// Sets the initial-state hook of handle `h` (`fn` NULL removes it). The hook takes precedence
/// over the `initial_state` open option and is called every time a default state is needed:
/// by `agent_get_state` while nothing is stored, and by the first write. Its answer goes through
/// the same JSON, codec and size checks as any input.
///
/// The hook runs with the handle's lock held: a call into the same handle from inside it fails
/// with `AGENT_ERR_BUSY` instead of deadlocking. Other handles may be used.
///
/// Ownership: `free_user_data` (may be NULL) is called exactly once with `user_data`: when the
/// hook is replaced or removed, when the handle is closed, or right away if this call fails (or
/// `fn` is NULL).
/// Errors: `AGENT_ERR_BAD_HANDLE`, `AGENT_ERR_BUSY` (called from inside `h`'s own
/// initial-state hook).
/// Thread-safety: any thread; `user_data` must be usable from every thread that reads or writes.
#[no_mangle]
pub unsafe extern "C" fn agent_set_initial_state_hook(
    h: AgentHandle,
    r#fn: AgentInitialStateFn,
    user_data: *mut c_void,
    free_user_data: AgentFreeFn,
) -> AgentStatus {
    let data = UserData::new(user_data, free_user_data);
    boundary::run("agent_set_initial_state_hook", move || {
        with_agent(h, |agent| {
            let hook = data
                .attach(r#fn)
                .map(|c| Arc::new(c) as Arc<dyn InitialStateHook>);
            agent.set_initial_state_hook(hook)
        })
    })
}

impl Validator for Callback<ValidateFn> {
    fn validate(&self, change: &StateChange) -> Result<(), String> {
        let view = change_view(change);
        let mut message = AgentBuffer::EMPTY;
        // SAFETY: `f` is the caller's gate; `view` (and what it points into) and `message`
        // outlive the call.
        let rc = unsafe { (self.f)(self.user_data(), &view, &mut message) };
        let text = if message.data.is_null() {
            None
        } else {
            // SAFETY: the gate's contract: `data` points at `len` readable bytes, from
            // agent_buffer_copy (or memory valid until the gate is called again).
            let bytes = unsafe { std::slice::from_raw_parts(message.data, message.len) };
            Some(String::from_utf8_lossy(bytes).into_owned())
        };
        // SAFETY: `owner` is NULL or came from agent_buffer_copy, per the contract.
        drop(unsafe { message.take_owner() });
        if rc == 0 {
            Ok(())
        } else {
            Err(text.unwrap_or_else(|| format!("returned {rc}")))
        }
    }
}

/// Sets the validation gate of handle `h` (`fn` NULL removes it). The gate runs for every
/// change made through `h` (set, replace, restore, and their `_if` forms) inside the write
/// transaction, after the merge and the codec and size checks and before the commit, on the
/// writing thread. A non-zero return rejects the change: the call returns `AGENT_ERR_REJECTED`,
/// nothing is written, no hook runs. Changes made through other handles are not gated by it.
///
/// The gate runs with the handle's lock held and the store's write lock taken: it must be
/// quick, and a call into the same handle from inside it fails with `AGENT_ERR_BUSY` instead of
/// deadlocking.
///
/// Ownership: `free_user_data` (may be NULL) is called exactly once with `user_data`: when the
/// gate is replaced or removed, when the handle is closed, or right away if this call fails (or
/// `fn` is NULL).
/// Errors: `AGENT_ERR_BAD_HANDLE`, `AGENT_ERR_BUSY` (from inside `h`'s initial-state hook or
/// gate).
/// Thread-safety: any thread; `user_data` must be usable from every thread that writes.
#[no_mangle]
pub unsafe extern "C" fn agent_set_validator(
    h: AgentHandle,
    r#fn: AgentValidateFn,
    user_data: *mut c_void,
    free_user_data: AgentFreeFn,
) -> AgentStatus {
    let data = UserData::new(user_data, free_user_data);
    boundary::run("agent_set_validator", move || {
        with_agent(h, |agent| {
            let hook = data.attach(r#fn).map(|c| Arc::new(c) as Arc<dyn Validator>);
            agent.set_validator(hook)
        })
    })
}
