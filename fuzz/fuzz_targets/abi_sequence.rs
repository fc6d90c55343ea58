//! Random sequences of C ABI calls: open/close/get/set/replace, state-changed and initial-state
//! hooks (which re-enter the library), buffers, status names; with live, closed, forged and zero
//! handles, NULL pointers, JSON cut at random lengths, raw fuzz bytes as documents, hostile open
//! options. Calls go through the exported `extern "C"` functions exactly as C would make them.
//!
//! Properties: every status is documented and never AGENT_ERR_PANIC (a panic inside the library
//! aborts the fuzzer anyway: libFuzzer's panic hook); a failed call leaves its output buffer
//! empty; a filled buffer is NUL-terminated compact JSON of the stated length; a failed open
//! leaves 0 in `*out`; every hook's user_data is finalized exactly once by the time all handles
//! are closed (checked at the end of every input); hooks see NUL-terminated views.
//!
//! Build: `cargo +nightly fuzz run abi_sequence --features abi` (compiles the bundled SQLite).
#![no_main]

use std::cell::Cell;
use std::ffi::{c_char, c_void, CStr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

use agent_state_fuzz::Bytes;
use libfuzzer_sys::fuzz_target;

// Link the library: its #[no_mangle] exports are the C ABI under test.
extern crate agent_state_ffi;

// The header's declarations, shared with the ABI crate's tests and benchmarks.
#[path = "../../crates/agent_state_ffi/tests/support/abi.rs"]
mod c_api;
use c_api::*;

const DOCS: [&[u8]; 20] = [
    b"{}",
    b"{\"a\":1}",
    b"{\"a\":null}",
    b"{\"a\":{\"b\":[1,2,{\"c\":true}]}}",
    b"{\"s\":{\"$set\":[1,2]}}",
    b"{\"s\":{\"$set\":[1,1]}}",
    b"{\"d\":{\"$date\":\"2026-11-30T03:06:44.123Z\"}}",
    b"{\"n\":1e400}",
    b"{\"a\":1,\"a\":2}",
    b"[1,2]",
    b"null",
    b"{\"a\":",
    b"{\"a\":\"\\ud800\"}",
    b"{\"a\":\"\xff\"}",
    b"{\"x\":{\"$set\":5,\"y\":1}}",
    b"{\"x\":{\"y\":null}}",
    b"{\"$bigint\":\"12\"}",
    b"  {\"ws\" : [ ] }  ",
    b"{\"a\":1}x",
    b"{\"big\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}",
];

const OPTIONS: [Option<&CStr>; 15] = [
    None,
    Some(c"{}"),
    Some(c"{\"read_only\":true}"),
    Some(c"{\"initial_state\":{\"init\":1}}"),
    Some(c"{bad"),
    Some(c"{\"unknown\":1}"),
    Some(c"{\"max_value_bytes\":64}"),
    Some(c"{\"synchronous\":\"normal\",\"busy_timeout_ms\":10}"),
    Some(c"[]"),
    Some(c"{\"initial_state\":{\"$set\":[1]}}"),
    Some(c"{\"max_value_bytes\":1}"),
    Some(c"{\"synchronous\":\"normal\"}"),
    Some(c"{\"change_log\":{\"keep_last\":3}}"),
    Some(c"{\"change_log\":{\"keep_seconds\":1,\"keep_last\":2}}"),
    Some(c"{\"change_log\":false}"),
];

/// Per-registration user_data: how many times the library finalized it.
struct Ud {
    kind: u8,
    h: u64,
    id: Cell<u64>,
    writes: Cell<u32>,
    freed: AtomicU32,
}

thread_local! {
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

fn check_status(st: i32, what: &str) {
    assert_ne!(st, AGENT_ERR_PANIC, "{what}: AGENT_ERR_PANIC: {}", last_error());
    assert!((0..=AGENT_ERR_GAP).contains(&st), "{what}: undocumented status {st}");
}

fn last_error() -> String {
    // SAFETY: a static or thread-owned NUL-terminated string.
    unsafe { CStr::from_ptr(agent_last_error()) }.to_string_lossy().into_owned()
}

fn check_buffer(st: i32, b: &mut AgentBuffer, what: &str) {
    check_buffer_as(st, b, what, b'{');
}

fn check_buffer_as(st: i32, b: &mut AgentBuffer, what: &str, first: u8) {
    if st == AGENT_OK {
        assert!(!b.data.is_null(), "{what}: OK but no data");
        // SAFETY: the library promises len bytes plus a NUL.
        let bytes = unsafe { std::slice::from_raw_parts(b.data, b.len + 1) };
        assert_eq!(bytes[b.len], 0, "{what}: not NUL-terminated");
        assert_eq!(bytes[0], first, "{what}: output does not start with {}", first as char);
        assert!(!bytes[..b.len].contains(&0), "{what}: NUL inside the JSON text");
        assert!(serde_json::from_slice::<serde_json::Value>(&bytes[..b.len]).is_ok(), "{what}: output is not JSON");
    } else {
        assert!(b.data.is_null() && b.len == 0 && b.owner.is_null(), "{what}: failed call left a buffer");
    }
    // SAFETY: a buffer the library filled (or empty); freeing twice is documented as harmless.
    unsafe {
        agent_buffer_free(b);
        agent_buffer_free(b);
    }
}

unsafe extern "C" fn free_ud(p: *mut c_void) {
    let ud = &*(p as *const Ud);
    ud.freed.fetch_add(1, Ordering::SeqCst);
}

unsafe extern "C" fn on_changed(p: *mut c_void, c: *const AgentStateChange) -> i32 {
    let ud = &*(p as *const Ud);
    let c = &*c;
    assert!(!c.next.is_null() && *c.next.add(c.next_len) == 0, "hook: next not NUL-terminated");
    assert!(!c.prev.is_null() && *c.prev.add(c.prev_len) == 0, "hook: prev not NUL-terminated");
    assert_eq!(c.patch.is_null(), c.patch_len == 0, "hook: patch and patch_len disagree");
    if DEPTH.with(|d| d.get()) > 2 {
        return 0;
    }
    DEPTH.with(|d| d.set(d.get() + 1));
    let mut b = AgentBuffer::EMPTY;
    let rc = match ud.kind % 6 {
        1 => 7,
        2 => {
            let st = agent_get_state(ud.h, &mut b);
            check_status(st, "hook get");
            check_buffer(st, &mut b, "hook get");
            0
        }
        3 if ud.writes.get() < 2 => {
            ud.writes.set(ud.writes.get() + 1);
            let st = agent_set_state(ud.h, b"{\"nested\":1}".as_ptr(), 12, &mut b);
            check_status(st, "hook set");
            check_buffer(st, &mut b, "hook set");
            0
        }
        4 => {
            check_status(agent_remove_hook(ud.h, ud.id.get()), "hook remove self");
            0
        }
        5 => {
            check_status(agent_close(ud.h), "hook close own handle");
            0
        }
        _ => 0,
    };
    DEPTH.with(|d| d.set(d.get() - 1));
    rc
}

unsafe extern "C" fn validator(p: *mut c_void, c: *const AgentStateChange, message: *mut AgentBuffer) -> i32 {
    let ud = &*(p as *const Ud);
    let c = &*c;
    assert!(!c.next.is_null() && *c.next.add(c.next_len) == 0, "validator: next not NUL-terminated");
    assert!(c.version > 0, "validator: version 0");
    match ud.kind % 5 {
        1 => {
            agent_buffer_copy(b"no, because".as_ptr(), 11, message);
            1
        }
        2 => 3,
        3 => {
            let mut b = AgentBuffer::EMPTY;
            let st = agent_get_state(ud.h, &mut b);
            assert_eq!(st, AGENT_ERR_BUSY, "own handle from its validator must be BUSY");
            agent_buffer_free(&mut b);
            0
        }
        _ => 0,
    }
}

unsafe extern "C" fn initial(p: *mut c_void, out: *mut AgentBuffer) -> i32 {
    static ANSWER: &[u8] = b"{\"from\":\"static\"}";
    let ud = &*(p as *const Ud);
    match ud.kind % 7 {
        0 => agent_buffer_copy(b"{\"from\":\"hook\"}".as_ptr(), 15, out),
        1 => {
            (*out).data = ANSWER.as_ptr();
            (*out).len = ANSWER.len();
            0
        }
        2 => agent_buffer_copy(b"[not json".as_ptr(), 9, out),
        3 => 5,
        4 => 0,
        5 => {
            let mut b = AgentBuffer::EMPTY;
            let st = agent_get_state(ud.h, &mut b);
            assert_eq!(st, AGENT_ERR_BUSY, "own handle from its initial-state hook must be BUSY");
            agent_buffer_free(&mut b);
            agent_buffer_copy(b"{}".as_ptr(), 2, out)
        }
        _ => agent_buffer_copy(b"{\"a\":{\"$set\":[1,1]}}".as_ptr(), 20, out),
    }
}

fn scratch() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("agent_state_fuzz_{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    })
}

fn remove_store(p: &std::path::Path) {
    for suffix in ["", "-wal", "-shm"] {
        let mut s = p.as_os_str().to_owned();
        s.push(suffix);
        let _ = std::fs::remove_file(s);
    }
}

struct Run<'a> {
    b: Bytes<'a>,
    data: &'a [u8],
    slots: [u64; 6],
    uds: Vec<Box<Ud>>,
    paths: Vec<std::ffi::CString>,
}

impl Run<'_> {
    fn handle(&mut self) -> u64 {
        match self.b.below(8) {
            0 => 0,
            1 => u64::from_le_bytes([self.b.byte(), self.b.byte(), 0, 0, 0, 0, 0, 0x80]),
            2 => self.slots[self.b.below(6) as usize].wrapping_add(1),
            _ => self.slots[self.b.below(6) as usize],
        }
    }

    /// A document: a known one, cut at a random length, or raw bytes of the input.
    fn doc(&mut self) -> (*const u8, usize) {
        match self.b.below(10) {
            0 => (std::ptr::null(), self.b.below(3) as usize),
            1 | 2 => {
                let start = self.b.byte() as usize % self.data.len().max(1);
                let len = (self.b.byte() as usize).min(self.data.len().saturating_sub(start));
                (self.data[start..].as_ptr(), len)
            }
            n => {
                let d = DOCS[self.b.below(DOCS.len() as u8) as usize];
                let len = if n == 3 { self.b.byte() as usize % (d.len() + 1) } else { d.len() };
                (d.as_ptr(), len)
            }
        }
    }

    fn ud(&mut self, h: u64) -> *mut c_void {
        let ud = Box::new(Ud { kind: self.b.byte(), h, id: Cell::new(0), writes: Cell::new(0), freed: AtomicU32::new(0) });
        let p = &*ud as *const Ud as *mut c_void;
        self.uds.push(ud);
        p
    }

    unsafe fn step(&mut self) {
        let mut buf = AgentBuffer::EMPTY;
        let with_out = self.b.below(5) != 0;
        let out: *mut AgentBuffer = if with_out { &mut buf } else { std::ptr::null_mut() };
        let version = if self.b.below(4) == 0 { u64::from(self.b.byte()) << 40 } else { u64::from(self.b.below(12)) };
        let mut got_version = 0u64;
        match self.b.below(21) {
            0 | 1 => {
                let path: *const c_char = match self.b.below(7) {
                    0 => std::ptr::null(),
                    1 => c"".as_ptr(),
                    2 => self.paths[2].as_ptr(),
                    3 | 4 => c":memory:".as_ptr(),
                    n => self.paths[(n - 5) as usize].as_ptr(),
                };
                let opts = OPTIONS[self.b.below(OPTIONS.len() as u8) as usize].map_or(std::ptr::null(), |c| c.as_ptr());
                let mut h: u64 = 12345;
                let out_h: *mut u64 = if self.b.below(20) == 0 { std::ptr::null_mut() } else { &mut h };
                let st = agent_open(path, opts, out_h);
                check_status(st, "open");
                if st == AGENT_OK {
                    assert_ne!(h, 0, "open returned handle 0");
                    let slot = self.b.below(6) as usize;
                    let old = std::mem::replace(&mut self.slots[slot], h);
                    if old != 0 {
                        check_status(agent_close(old), "close replaced");
                    }
                } else if !out_h.is_null() {
                    assert_eq!(h, 0, "failed open must leave 0 in *out");
                }
            }
            2 => {
                let h = self.handle();
                check_status(agent_close(h), "close");
            }
            3 | 4 => {
                let h = self.handle();
                let st = agent_get_state(h, out);
                check_status(st, "get");
                if with_out {
                    check_buffer(st, &mut buf, "get");
                }
            }
            5..=7 => {
                let h = self.handle();
                let (p, len) = self.doc();
                let st = agent_set_state(h, p, len, out);
                check_status(st, "set");
                if with_out {
                    check_buffer(st, &mut buf, "set");
                }
            }
            8 => {
                let h = self.handle();
                let (p, len) = self.doc();
                let st = agent_replace_state(h, p, len, out);
                check_status(st, "replace");
                if with_out {
                    check_buffer(st, &mut buf, "replace");
                }
            }
            9 => {
                let h = self.handle();
                let ud = self.ud(h);
                let f: AgentStateChangedFn = if self.b.below(16) == 0 { None } else { Some(on_changed) };
                let mut id = 777u64;
                let out_id: *mut u64 = if self.b.below(16) == 0 { std::ptr::null_mut() } else { &mut id };
                let st = agent_on_state_changed(h, f, ud, Some(free_ud), out_id);
                check_status(st, "on_state_changed");
                if st == AGENT_OK {
                    (*(ud as *const Ud)).id.set(id);
                }
            }
            10 => {
                let h = self.handle();
                let id = self.b.below(6) as u64;
                check_status(agent_remove_hook(h, id), "remove_hook");
            }
            11 => {
                let h = self.handle();
                let ud = self.ud(h);
                let f: AgentInitialStateFn = if self.b.below(6) == 0 { None } else { Some(initial) };
                check_status(agent_set_initial_state_hook(h, f, ud, Some(free_ud)), "set_initial_state_hook");
            }
            12 => {
                let (p, len) = self.doc();
                let out: *mut AgentBuffer = if self.b.below(10) == 0 { std::ptr::null_mut() } else { &mut buf };
                let st = agent_buffer_copy(p, len, out);
                check_status(st, "buffer_copy");
                if st == AGENT_OK {
                    assert_eq!(buf.len, len);
                    assert_eq!(*buf.data.add(len), 0);
                    if len > 0 {
                        assert_eq!(std::slice::from_raw_parts(buf.data, len), std::slice::from_raw_parts(p, len));
                    }
                }
                agent_buffer_free(&mut buf);
                agent_buffer_free(std::ptr::null_mut());
            }
            14 => {
                let h = self.handle();
                let st = agent_get_state_versioned(h, out, if self.b.below(3) == 0 { std::ptr::null_mut() } else { &mut got_version });
                check_status(st, "get_versioned");
                if with_out {
                    check_buffer(st, &mut buf, "get_versioned");
                }
            }
            15 | 16 => {
                let h = self.handle();
                let mut expected = version;
                if self.b.below(2) == 0 {
                    let mut cur = AgentBuffer::EMPTY;
                    if agent_get_state_versioned(h, &mut cur, &mut expected) != AGENT_OK {
                        expected = 0;
                    }
                    agent_buffer_free(&mut cur);
                }
                let (p, len) = self.doc();
                let st = if self.b.below(3) != 0 {
                    agent_set_state_if(h, expected, p, len, out, &mut got_version)
                } else {
                    agent_replace_state_if(h, expected, p, len, out, std::ptr::null_mut())
                };
                check_status(st, "set/replace_if");
                if with_out {
                    check_buffer(st, &mut buf, "set/replace_if");
                }
            }
            17 => {
                let h = self.handle();
                let mut n = 0usize;
                check_status(agent_poll(h, if self.b.below(4) == 0 { std::ptr::null_mut() } else { &mut n }), "poll");
            }
            18 => {
                let h = self.handle();
                let st = agent_changes_since(h, version, out);
                check_status(st, "changes_since");
                if with_out {
                    check_buffer_as(st, &mut buf, "changes_since", b'[');
                }
            }
            19 => {
                let h = self.handle();
                let st = if self.b.below(2) == 0 {
                    agent_get_state_at(h, version, out)
                } else {
                    agent_restore_state(h, version, out, &mut got_version)
                };
                check_status(st, "state_at/restore");
                if with_out {
                    check_buffer(st, &mut buf, "state_at/restore");
                }
            }
            20 => {
                let h = self.handle();
                let ud = self.ud(h);
                let f: AgentValidateFn = if self.b.below(6) == 0 { None } else { Some(validator) };
                check_status(agent_set_validator(h, f, ud, Some(free_ud)), "set_validator");
            }
            _ => {
                let code = i32::from_le_bytes([self.b.byte(), self.b.byte(), 0, self.b.byte()]);
                let name = CStr::from_ptr(agent_status_name(code)).to_str().unwrap();
                assert!(name.starts_with("AGENT_"));
                let _ = last_error();
                assert!(!CStr::from_ptr(agent_version()).to_bytes().is_empty());
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let dir = scratch();
    let files: Vec<PathBuf> = ["a.db", "b.db"].iter().map(|f| dir.join(f)).collect();
    for f in &files {
        remove_store(f);
    }
    let mut paths: Vec<std::ffi::CString> =
        files.iter().map(|f| std::ffi::CString::new(f.to_str().unwrap()).unwrap()).collect();
    paths.push(std::ffi::CString::new(dir.join("missing").join("x.db").to_str().unwrap()).unwrap());
    let mut run = Run { b: Bytes::new(data), data, slots: [0; 6], uds: Vec::new(), paths };
    let mut steps = 0;
    while !run.b.exhausted() && steps < 200 {
        // SAFETY: every pointer passed is valid for what the header asks, or NULL on purpose.
        unsafe { run.step() };
        steps += 1;
    }
    for h in run.slots {
        if h != 0 {
            // SAFETY: plain call; already-closed handles are refused.
            check_status(unsafe { agent_close(h) }, "final close");
        }
    }
    for ud in &run.uds {
        assert_eq!(ud.freed.load(Ordering::SeqCst), 1, "a hook's user_data was finalized {} times", ud.freed.load(Ordering::SeqCst));
    }
});
