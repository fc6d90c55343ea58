//! Helpers of the tests of awaited calls (submit.rs, submit_fork.rs): a store, a handle, an
//! empty completion, the last error, as a C program would have them.
// Each user takes a part.
#![allow(dead_code)]

use std::ffi::{CStr, CString};

use super::abi::*;

/// A fresh directory for a test's stores (`name` tells the tests apart).
pub fn temp(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("agent_state_ffi_{name}_{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Opens the store at `path` with the default options.
pub fn open(path: &std::path::Path) -> u64 {
    let p = CString::new(path.to_str().unwrap()).unwrap();
    let mut h = 0;
    // SAFETY: valid NUL-terminated strings and out pointer.
    let rc = unsafe { agent_open(p.as_ptr(), std::ptr::null(), &mut h) };
    assert_eq!(rc, AGENT_OK);
    h
}

/// A completion with nothing in it, for an output parameter.
pub fn empty_completion() -> AgentCompletion {
    AgentCompletion {
        tag: 0,
        status: 0,
        committed: 0,
        version: 0,
        state: AgentBuffer::EMPTY,
        message: AgentBuffer::EMPTY,
    }
}

/// This thread's last error message.
pub fn last_error() -> String {
    // SAFETY: the library's NUL-terminated string, read at once.
    unsafe { CStr::from_ptr(agent_last_error()) }
        .to_string_lossy()
        .into_owned()
}
