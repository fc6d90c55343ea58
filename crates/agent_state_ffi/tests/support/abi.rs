//! The C ABI as a C program declares it: `include/agent_state.h` written in Rust, its types,
//! status codes and every function, in the header's order and with its names. The tests, the
//! benchmarks and the ABI fuzz target include this one file (`#[path]`) and call the library
//! through it, as C links it, rather than through the crate's Rust items.
//!
//! `tests/abi_module.rs` checks it against the header (every declaration, its argument names
//! and types, its return type): when the header changes, change this file to match.
// Each user calls a part of the ABI.
#![allow(dead_code)]

use std::ffi::{c_char, c_int, c_void};

pub type AgentStatus = i32;

pub type AgentHandle = u64;

#[repr(C)]
pub struct AgentBuffer {
    pub data: *const u8,
    pub len: usize,
    pub owner: *mut c_void,
}

pub type AgentCancel = u64;

#[repr(C)]
pub struct AgentStateChange {
    pub next: *const u8,
    pub next_len: usize,
    pub prev: *const u8,
    pub prev_len: usize,
    pub patch: *const u8,
    pub patch_len: usize,
    pub version: u64,
    pub kind: i32,
    pub schema: u32,
    pub migrated_from: u32,
}

pub const AGENT_CHANGE_MERGE: i32 = 1;
pub const AGENT_CHANGE_REPLACE: i32 = 2;
pub const AGENT_CHANGE_MIGRATION: i32 = 3;
pub const AGENT_CHANGE_JSON_PATCH: i32 = 4;

pub const AGENT_OP_GET_STATE: i32 = 1;
pub const AGENT_OP_SET_STATE: i32 = 2;
pub const AGENT_OP_REPLACE_STATE: i32 = 3;
pub const AGENT_OP_PATCH_STATE: i32 = 4;
pub const AGENT_CALL_IF: u32 = 1;
pub const AGENT_CALL_NO_STATE: u32 = 2;

pub type AgentQueue = u64;

#[repr(C)]
pub struct AgentCall {
    pub op: i32,
    pub flags: u32,
    pub data: *const u8,
    pub len: usize,
    pub expected_version: u64,
    pub cancel: AgentCancel,
    pub tag: u64,
}

#[repr(C)]
pub struct AgentCompletion {
    pub tag: u64,
    pub status: AgentStatus,
    pub committed: u32,
    pub version: u64,
    pub state: AgentBuffer,
    pub message: AgentBuffer,
}

// The header's function pointer types; NULL (None) where a function takes one to mean "none".
pub type AgentStateChangedFn =
    Option<unsafe extern "C" fn(user_data: *mut c_void, change: *const AgentStateChange) -> i32>;

pub type AgentFreeFn = Option<unsafe extern "C" fn(user_data: *mut c_void)>;

pub type AgentInitialStateFn =
    Option<unsafe extern "C" fn(user_data: *mut c_void, out: *mut AgentBuffer) -> i32>;

pub type AgentValidateFn = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        change: *const AgentStateChange,
        message: *mut AgentBuffer,
    ) -> i32,
>;

pub type AgentSchemaStepFn = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        from: u32,
        state: *const u8,
        state_len: usize,
        out: *mut AgentBuffer,
        message: *mut AgentBuffer,
    ) -> i32,
>;

pub type AgentDoneFn =
    Option<unsafe extern "C" fn(context: *mut c_void, completion: *mut AgentCompletion)>;

pub type AgentWatch = u64;
pub type AgentWatchKind = i32;

pub const AGENT_WATCH_MERGE: AgentWatchKind = 1;
pub const AGENT_WATCH_JSON_PATCH: AgentWatchKind = 2;
pub const AGENT_WATCH_REPLACE: AgentWatchKind = 3;
pub const AGENT_WATCH_MIGRATION: AgentWatchKind = 4;
pub const AGENT_WATCH_DELETED: AgentWatchKind = 5;
pub const AGENT_WATCH_RESYNC: AgentWatchKind = 6;

#[repr(C)]
pub struct AgentWatchEvent {
    pub agent_id: *const c_char,
    pub agent_id_len: usize,
    pub version: u64,
    pub kind: AgentWatchKind,
    pub migrated_from: u32,
    pub schema: u32,
    pub at_ms: i64,
    pub patch: *const c_char,
    pub patch_len: usize,
    pub state: *const c_char,
    pub state_len: usize,
}

pub type AgentWatchFn =
    Option<unsafe extern "C" fn(context: *mut c_void, event: *const AgentWatchEvent)>;

pub const AGENT_OK: AgentStatus = 0;
pub const AGENT_ERR_INVALID_ARGUMENT: AgentStatus = 1;
pub const AGENT_ERR_BAD_HANDLE: AgentStatus = 2;
pub const AGENT_ERR_JSON: AgentStatus = 3;
pub const AGENT_ERR_CODEC: AgentStatus = 4;
pub const AGENT_ERR_TOO_LARGE: AgentStatus = 5;
pub const AGENT_ERR_STORAGE: AgentStatus = 6;
pub const AGENT_ERR_BUSY: AgentStatus = 7;
pub const AGENT_ERR_HOOK: AgentStatus = 8;
pub const AGENT_ERR_CONFLICT: AgentStatus = 9;
pub const AGENT_ERR_REJECTED: AgentStatus = 10;
pub const AGENT_ERR_GAP: AgentStatus = 11;
pub const AGENT_ERR_UNAVAILABLE: AgentStatus = 12;
pub const AGENT_ERR_AUTH: AgentStatus = 13;
pub const AGENT_ERR_CANCELLED: AgentStatus = 14;
pub const AGENT_ERR_NEWER_SCHEMA: AgentStatus = 15;
pub const AGENT_ERR_MIGRATION: AgentStatus = 16;
pub const AGENT_ERR_PATH: AgentStatus = 17;
pub const AGENT_ERR_TEST_FAILED: AgentStatus = 18;
pub const AGENT_ERR_PANIC: AgentStatus = 99;

extern "C" {
    // 1. Version and errors.
    pub fn agent_status_name(status: AgentStatus) -> *const c_char;
    pub fn agent_last_error() -> *const c_char;
    pub fn agent_version() -> *const c_char;
    // 2. Buffers.
    pub fn agent_buffer_copy(data: *const u8, len: usize, out: *mut AgentBuffer) -> AgentStatus;
    pub fn agent_buffer_free(buf: *mut AgentBuffer);
    // 3. Opening and closing.
    pub fn agent_open(
        path: *const c_char,
        options_json: *const c_char,
        out: *mut AgentHandle,
    ) -> AgentStatus;
    pub fn agent_close(h: AgentHandle) -> AgentStatus;
    // 4. Reading and writing the state.
    pub fn agent_get_state(h: AgentHandle, out: *mut AgentBuffer) -> AgentStatus;
    pub fn agent_get_state_versioned(
        h: AgentHandle,
        out: *mut AgentBuffer,
        out_version: *mut u64,
    ) -> AgentStatus;
    pub fn agent_set_state(
        h: AgentHandle,
        patch: *const u8,
        len: usize,
        out: *mut AgentBuffer,
    ) -> AgentStatus;
    pub fn agent_replace_state(
        h: AgentHandle,
        next: *const u8,
        len: usize,
        out: *mut AgentBuffer,
    ) -> AgentStatus;
    pub fn agent_set_state_if(
        h: AgentHandle,
        expected_version: u64,
        patch: *const u8,
        len: usize,
        out: *mut AgentBuffer,
        out_version: *mut u64,
    ) -> AgentStatus;
    pub fn agent_replace_state_if(
        h: AgentHandle,
        expected_version: u64,
        next: *const u8,
        len: usize,
        out: *mut AgentBuffer,
        out_version: *mut u64,
    ) -> AgentStatus;
    // 5. Hooks.
    pub fn agent_on_state_changed(
        h: AgentHandle,
        r#fn: AgentStateChangedFn,
        user_data: *mut c_void,
        free_user_data: AgentFreeFn,
        out_id: *mut u64,
    ) -> AgentStatus;
    pub fn agent_remove_hook(h: AgentHandle, id: u64) -> AgentStatus;
    pub fn agent_set_initial_state_hook(
        h: AgentHandle,
        r#fn: AgentInitialStateFn,
        user_data: *mut c_void,
        free_user_data: AgentFreeFn,
    ) -> AgentStatus;
    pub fn agent_set_validator(
        h: AgentHandle,
        r#fn: AgentValidateFn,
        user_data: *mut c_void,
        free_user_data: AgentFreeFn,
    ) -> AgentStatus;
    // 6. The change log.
    pub fn agent_poll(h: AgentHandle, out_delivered: *mut usize) -> AgentStatus;
    pub fn agent_changes_since(h: AgentHandle, after: u64, out: *mut AgentBuffer) -> AgentStatus;
    pub fn agent_get_state_at(h: AgentHandle, version: u64, out: *mut AgentBuffer) -> AgentStatus;
    pub fn agent_restore_state(
        h: AgentHandle,
        version: u64,
        out: *mut AgentBuffer,
        out_version: *mut u64,
    ) -> AgentStatus;
    // 7. Cancelling a call.
    pub fn agent_cancel_new(timeout_ms: i64, out: *mut AgentCancel) -> AgentStatus;
    pub fn agent_cancel_bind(token: AgentCancel) -> AgentStatus;
    pub fn agent_cancel_fire(token: AgentCancel) -> AgentStatus;
    pub fn agent_cancel_free(token: AgentCancel) -> AgentStatus;
    // 8. A store's agents.
    pub fn agent_store_list(
        path: *const c_char,
        options_json: *const c_char,
        prefix: *const c_char,
        after: *const c_char,
        limit: u32,
        out: *mut AgentBuffer,
    ) -> AgentStatus;
    pub fn agent_store_delete(
        path: *const c_char,
        options_json: *const c_char,
        agent_id: *const c_char,
        if_version: i64,
        out_deleted_version: *mut u64,
    ) -> AgentStatus;
    pub fn agent_store_expire(
        path: *const c_char,
        options_json: *const c_char,
        idle_ms: u64,
        limit: u32,
        dry_run: c_int,
        out: *mut AgentBuffer,
    ) -> AgentStatus;
    pub fn agent_set_schema_step(
        h: AgentHandle,
        from: u32,
        r#fn: AgentSchemaStepFn,
        user_data: *mut c_void,
        free_user_data: AgentFreeFn,
    ) -> AgentStatus;
    pub fn agent_schema_version(h: AgentHandle, out: *mut u32) -> AgentStatus;
    pub fn agent_get_state_at_stored(
        h: AgentHandle,
        version: u64,
        out: *mut AgentBuffer,
        out_schema: *mut u32,
    ) -> AgentStatus;
    pub fn agent_upgrade_state(
        h: AgentHandle,
        state: *const u8,
        len: usize,
        from: u32,
        out: *mut AgentBuffer,
    ) -> AgentStatus;
    // 10. JSON Patch and reads of one place.
    pub fn agent_patch_state(
        h: AgentHandle,
        operations: *const u8,
        len: usize,
        out: *mut AgentBuffer,
    ) -> AgentStatus;
    pub fn agent_patch_state_if(
        h: AgentHandle,
        expected_version: u64,
        operations: *const u8,
        len: usize,
        out: *mut AgentBuffer,
        out_version: *mut u64,
    ) -> AgentStatus;
    pub fn agent_get_path(
        h: AgentHandle,
        pointer: *const c_char,
        len: usize,
        out: *mut AgentBuffer,
    ) -> AgentStatus;
    pub fn agent_get_tail(
        h: AgentHandle,
        pointer: *const c_char,
        len: usize,
        n: usize,
        out: *mut AgentBuffer,
    ) -> AgentStatus;
    // 11. Awaited calls.
    pub fn agent_submit(
        h: AgentHandle,
        call: *const AgentCall,
        done: AgentDoneFn,
        context: *mut c_void,
    ) -> AgentStatus;
    pub fn agent_queue_new(out: *mut AgentQueue, out_fd: *mut i32) -> AgentStatus;
    pub fn agent_queue_submit(
        q: AgentQueue,
        h: AgentHandle,
        call: *const AgentCall,
        now: *mut AgentCompletion,
        out_done: *mut i32,
    ) -> AgentStatus;
    pub fn agent_queue_take(
        q: AgentQueue,
        out: *mut AgentCompletion,
        cap: usize,
        out_n: *mut usize,
    ) -> AgentStatus;
    pub fn agent_queue_free(q: AgentQueue) -> AgentStatus;
    pub fn agent_watch_open(
        path: *const c_char,
        options_json: *const c_char,
        callback: AgentWatchFn,
        context: *mut c_void,
        out: *mut AgentWatch,
        out_fd: *mut i32,
    ) -> AgentStatus;
    pub fn agent_watch_next(
        w: AgentWatch,
        timeout_ms: i64,
        out: *mut *mut AgentWatchEvent,
    ) -> AgentStatus;
    pub fn agent_watch_event_free(event: *mut AgentWatchEvent);
    pub fn agent_watch_add(w: AgentWatch, id: *const c_char, since: i64) -> AgentStatus;
    pub fn agent_watch_remove(w: AgentWatch, id: *const c_char) -> AgentStatus;
    pub fn agent_watch_close(w: AgentWatch) -> AgentStatus;
}

// Not a declaration of the header: what its prose says an empty buffer is.
impl AgentBuffer {
    /// The empty buffer, `{NULL, 0, NULL}`: what an output buffer starts as, and what every
    /// failed call leaves in it.
    pub const EMPTY: AgentBuffer = AgentBuffer {
        data: std::ptr::null(),
        len: 0,
        owner: std::ptr::null_mut(),
    };
}
