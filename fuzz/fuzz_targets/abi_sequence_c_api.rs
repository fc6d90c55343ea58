//! The C ABI as abi_sequence calls it: the header's types and functions declared as C sees
//! them (include/agent_state.h), not the library's Rust items, so that the fuzzer goes through
//! exactly what a C program links.

use std::ffi::{c_char, c_void};

#[repr(C)]
pub(crate) struct AgentBuffer {
    pub(crate) data: *const u8,
    pub(crate) len: usize,
    pub(crate) owner: *mut c_void,
}

pub(crate) const EMPTY: AgentBuffer = AgentBuffer { data: std::ptr::null(), len: 0, owner: std::ptr::null_mut() };

#[repr(C)]
pub(crate) struct AgentStateChange {
    pub(crate) next: *const u8,
    pub(crate) next_len: usize,
    pub(crate) prev: *const u8,
    pub(crate) prev_len: usize,
    pub(crate) patch: *const u8,
    pub(crate) patch_len: usize,
    pub(crate) version: u64,
}

pub(crate) type ChangedFn = Option<unsafe extern "C" fn(*mut c_void, *const AgentStateChange) -> i32>;
pub(crate) type InitialFn = Option<unsafe extern "C" fn(*mut c_void, *mut AgentBuffer) -> i32>;
pub(crate) type FreeFn = Option<unsafe extern "C" fn(*mut c_void)>;
pub(crate) type ValidateFn = Option<unsafe extern "C" fn(*mut c_void, *const AgentStateChange, *mut AgentBuffer) -> i32>;

extern "C" {
    pub(crate) fn agent_open(path: *const c_char, options: *const c_char, out: *mut u64) -> i32;
    pub(crate) fn agent_close(h: u64) -> i32;
    pub(crate) fn agent_get_state(h: u64, out: *mut AgentBuffer) -> i32;
    pub(crate) fn agent_set_state(h: u64, patch: *const u8, len: usize, out: *mut AgentBuffer) -> i32;
    pub(crate) fn agent_replace_state(h: u64, next: *const u8, len: usize, out: *mut AgentBuffer) -> i32;
    pub(crate) fn agent_last_error() -> *const c_char;
    pub(crate) fn agent_version() -> *const c_char;
    pub(crate) fn agent_buffer_copy(data: *const u8, len: usize, out: *mut AgentBuffer) -> i32;
    pub(crate) fn agent_buffer_free(buf: *mut AgentBuffer);
    pub(crate) fn agent_on_state_changed(h: u64, f: ChangedFn, ud: *mut c_void, free: FreeFn, out_id: *mut u64) -> i32;
    pub(crate) fn agent_remove_hook(h: u64, id: u64) -> i32;
    pub(crate) fn agent_set_initial_state_hook(h: u64, f: InitialFn, ud: *mut c_void, free: FreeFn) -> i32;
    pub(crate) fn agent_status_name(status: i32) -> *const c_char;
    pub(crate) fn agent_get_state_versioned(h: u64, out: *mut AgentBuffer, out_version: *mut u64) -> i32;
    pub(crate) fn agent_set_state_if(h: u64, expected: u64, patch: *const u8, len: usize, out: *mut AgentBuffer, out_version: *mut u64) -> i32;
    pub(crate) fn agent_replace_state_if(h: u64, expected: u64, next: *const u8, len: usize, out: *mut AgentBuffer, out_version: *mut u64) -> i32;
    pub(crate) fn agent_poll(h: u64, out_delivered: *mut usize) -> i32;
    pub(crate) fn agent_changes_since(h: u64, after: u64, out: *mut AgentBuffer) -> i32;
    pub(crate) fn agent_get_state_at(h: u64, version: u64, out: *mut AgentBuffer) -> i32;
    pub(crate) fn agent_restore_state(h: u64, version: u64, out: *mut AgentBuffer, out_version: *mut u64) -> i32;
    pub(crate) fn agent_set_validator(h: u64, f: ValidateFn, ud: *mut c_void, free: FreeFn) -> i32;
}

pub(crate) const AGENT_OK: i32 = 0;
pub(crate) const AGENT_ERR_BUSY: i32 = 7;
pub(crate) const AGENT_ERR_GAP: i32 = 11;
pub(crate) const AGENT_ERR_PANIC: i32 = 99;
