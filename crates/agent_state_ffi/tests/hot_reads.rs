//! Hot reads through the C ABI: the per-thread handle cache and the buffers that share a
//! thread's copy of the state. A handle closed on one thread fails the reads that start after
//! on every other thread with AGENT_ERR_BAD_HANDLE; a buffer stays valid after the close and
//! after the thread that read it exits.
// It calls the C ABI as a C program would, which takes `unsafe` (each block has its SAFETY note).
#![allow(unsafe_code)]

use std::ffi::CString;
use std::sync::{Arc, Barrier};

// Links the library, whose exported `agent_*` symbols the declarations resolve to.
extern crate agent_state_ffi;

#[path = "support/abi.rs"]
mod abi;
use abi::*;

// SAFETY: a buffer may be read and freed from any thread (its contract in the header).
unsafe impl Send for AgentBuffer {}

const THREADS: usize = 4;

fn bytes(b: &AgentBuffer) -> Vec<u8> {
    // SAFETY: a filled buffer has `len` readable bytes at `data`.
    unsafe { std::slice::from_raw_parts(b.data, b.len) }.to_vec()
}

fn open(path: &std::path::Path) -> u64 {
    let p = CString::new(path.to_str().unwrap()).unwrap();
    let mut h = 0;
    // SAFETY: valid NUL-terminated strings and out pointer.
    let rc = unsafe { agent_open(p.as_ptr(), std::ptr::null(), &mut h) };
    assert_eq!(rc, AGENT_OK);
    h
}

fn replace(h: u64, next: &[u8]) {
    // SAFETY: `next` is valid for its length; no output requested.
    let rc = unsafe { agent_replace_state(h, next.as_ptr(), next.len(), std::ptr::null_mut()) };
    assert_eq!(rc, AGENT_OK);
}

fn read(h: u64) -> (i32, AgentBuffer) {
    let mut b = AgentBuffer::EMPTY;
    // SAFETY: a valid out pointer.
    let rc = unsafe { agent_get_state(h, &mut b) };
    (rc, b)
}

fn temp(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("agent_state_ffi_{name}_{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn a_close_on_one_thread_fails_later_reads_on_every_thread_and_buffers_stay() {
    let dir = temp("close");
    let h = open(&dir.join("s.db"));
    replace(h, br#"{"a":1}"#);
    let hot = Arc::new(Barrier::new(THREADS + 1));
    let closed = Arc::new(Barrier::new(THREADS + 1));
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            let (hot, closed) = (hot.clone(), closed.clone());
            std::thread::spawn(move || {
                let (rc, first) = read(h);
                assert_eq!(rc, AGENT_OK);
                let (rc, mut second) = read(h);
                assert_eq!(rc, AGENT_OK);
                // SAFETY: a buffer this test filled, freed once.
                unsafe { agent_buffer_free(&mut second) };
                hot.wait();
                // Reads racing the close succeed or fail with AGENT_ERR_BAD_HANDLE, nothing else.
                loop {
                    let (rc, mut b) = read(h);
                    // SAFETY: a buffer this test filled (or left empty), freed once.
                    unsafe { agent_buffer_free(&mut b) };
                    match rc {
                        AGENT_OK => continue,
                        AGENT_ERR_BAD_HANDLE => break,
                        rc => panic!("a read racing close failed with {rc}"),
                    }
                }
                closed.wait();
                let (rc, b) = read(h);
                assert_eq!(rc, AGENT_ERR_BAD_HANDLE);
                assert!(b.data.is_null() && b.owner.is_null());
                let mut version = 7;
                let mut b = AgentBuffer::EMPTY;
                // SAFETY: valid out pointers.
                let rc = unsafe { agent_get_state_versioned(h, &mut b, &mut version) };
                assert_eq!((rc, version), (AGENT_ERR_BAD_HANDLE, 0));
                // Handed to the main thread, which reads and frees it after this one exits.
                first
            })
        })
        .collect();
    hot.wait();
    // SAFETY: closing a handle this test opened.
    assert_eq!(unsafe { agent_close(h) }, AGENT_OK);
    closed.wait();
    for t in threads {
        let mut b = t.join().unwrap();
        assert_eq!(bytes(&b), br#"{"a":1}"#);
        // SAFETY: a buffer a thread of this test filled, freed once, here.
        unsafe { agent_buffer_free(&mut b) };
    }
    // SAFETY: closing twice is refused, never undefined.
    assert_eq!(unsafe { agent_close(h) }, AGENT_ERR_BAD_HANDLE);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn buffers_of_one_thread_keep_their_bytes_across_writes_and_frees_elsewhere() {
    let dir = temp("buffers");
    let h = open(&dir.join("s.db"));
    replace(h, br#"{"v":1}"#);
    let (rc, old) = read(h);
    assert_eq!(rc, AGENT_OK);
    let (rc, hot) = read(h);
    assert_eq!(rc, AGENT_OK);
    replace(h, br#"{"v":2}"#);
    let (rc, new) = read(h);
    assert_eq!(rc, AGENT_OK);
    assert_eq!(bytes(&new), br#"{"v":2}"#);
    // Freed on another thread, read there first.
    std::thread::spawn(move || {
        let mut buffers = [old, hot, new];
        for (b, want) in buffers
            .iter_mut()
            .zip([&br#"{"v":1}"#[..], br#"{"v":1}"#, br#"{"v":2}"#])
        {
            assert_eq!(bytes(b), want);
            // SAFETY: a buffer this test filled, freed once.
            unsafe { agent_buffer_free(b) };
        }
    })
    .join()
    .unwrap();
    // SAFETY: closing a handle this test opened.
    assert_eq!(unsafe { agent_close(h) }, AGENT_OK);
    let _ = std::fs::remove_dir_all(&dir);
}
