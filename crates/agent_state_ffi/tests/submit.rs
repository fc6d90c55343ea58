//! Awaited calls through the C ABI, as C calls them: `agent_submit` completes a read the
//! handle's validated copy answers on the calling thread before it returns, and every other
//! call on a worker thread; `agent_queue_*` puts completions in a queue whose eventfd is
//! readable exactly while some wait; bad input is refused with its status and `done` is never
//! called; a queue freed with calls in flight and a handle closed under them complete as the
//! header says; a submitted write's hooks run on its worker, before `done`. (The C suite,
//! tests/c/, runs every op on both backends; submit_fork.rs, the child of a fork.)
// It calls the C ABI as a C program would, which takes `unsafe` (each block has its SAFETY note).
#![allow(unsafe_code)]

use std::ffi::c_void;
use std::sync::{mpsc, Mutex};

// Links the library, whose exported `agent_*` symbols the declarations resolve to.
extern crate agent_state_ffi;

#[path = "support/abi.rs"]
mod abi;
use abi::*;
#[path = "support/calls.rs"]
mod calls;
use calls::*;

/// A completion as the tests keep it: owned copies of its buffers (which are freed).
#[derive(Debug, Clone, PartialEq)]
struct Got {
    tag: u64,
    status: i32,
    committed: u32,
    version: u64,
    state: String,
    message: String,
    thread: std::thread::ThreadId,
}

/// Copies and frees a completion's buffers.
fn got(c: &mut AgentCompletion) -> Got {
    let text = |b: &mut AgentBuffer| {
        let s = if b.data.is_null() {
            String::new()
        } else {
            // SAFETY: a filled buffer has `len` readable bytes at `data`.
            String::from_utf8(unsafe { std::slice::from_raw_parts(b.data, b.len) }.to_vec())
                .unwrap()
        };
        // SAFETY: the buffer is the receiver's, freed once here.
        unsafe { agent_buffer_free(b) };
        s
    };
    Got {
        tag: c.tag,
        status: c.status,
        committed: c.committed,
        version: c.version,
        state: text(&mut c.state),
        message: text(&mut c.message),
        thread: std::thread::current().id(),
    }
}

/// The `done` callback: sends the completion to the channel `context` points to.
unsafe extern "C" fn send(context: *mut c_void, c: *mut AgentCompletion) {
    // SAFETY: `context` is the `mpsc::Sender` the test passed, alive until it received every
    // completion; `c` is valid during the call.
    let (tx, c) = unsafe { (&*context.cast::<mpsc::Sender<Got>>(), &mut *c) };
    let _ = tx.send(got(c));
}

fn call(op: i32, flags: u32, data: &[u8], tag: u64) -> AgentCall {
    AgentCall {
        op,
        flags,
        data: data.as_ptr(),
        len: data.len(),
        expected_version: 0,
        cancel: 0,
        tag,
    }
}

/// Submits `c` with the `send` callback; returns the status and the completions' channel.
fn submit(h: u64, c: &AgentCall, tx: &mpsc::Sender<Got>) -> i32 {
    let context = std::ptr::from_ref(tx).cast_mut().cast::<c_void>();
    // SAFETY: a valid call and callback; the sender outlives the completion (each test waits
    // for it).
    unsafe { agent_submit(h, c, Some(send), context) }
}

#[test]
fn a_write_completes_on_a_worker_and_a_hot_read_before_submit_returns() {
    let dir = temp("submit_callback");
    let h = open(&dir.join("s.db"));
    let (tx, rx) = mpsc::channel();
    let patch = br#"{"n":1}"#;
    assert_eq!(
        submit(h, &call(AGENT_OP_SET_STATE, 0, patch, 7), &tx),
        AGENT_OK
    );
    let w = rx.recv().unwrap();
    assert_ne!(
        w.thread,
        std::thread::current().id(),
        "a write runs on a worker"
    );
    assert_eq!(
        (w.tag, w.status, w.committed, w.version, w.state.as_str()),
        (7, AGENT_OK, 1, 1, r#"{"n":1}"#)
    );
    // The first read goes to a worker (nothing was read since the write): this thread never
    // reads the handle itself, as an event loop's would not.
    assert_eq!(
        submit(h, &call(AGENT_OP_GET_STATE, 0, b"", 8), &tx),
        AGENT_OK
    );
    let r = rx.recv().unwrap();
    assert_ne!(r.thread, std::thread::current().id());
    assert_eq!(
        (r.status, r.version, r.state.as_str()),
        (AGENT_OK, 1, r#"{"n":1}"#)
    );
    // The worker's read is still current: the next one completes inline, on this thread.
    assert_eq!(
        submit(h, &call(AGENT_OP_GET_STATE, 0, b"", 9), &tx),
        AGENT_OK
    );
    let r = rx
        .try_recv()
        .expect("completed before agent_submit returned");
    assert_eq!(r.thread, std::thread::current().id());
    assert_eq!((r.tag, r.version, r.state.as_str()), (9, 1, r#"{"n":1}"#));
    // Without the state.
    let flags = AGENT_CALL_NO_STATE;
    assert_eq!(
        submit(h, &call(AGENT_OP_GET_STATE, flags, b"", 10), &tx),
        AGENT_OK
    );
    let r = rx.try_recv().unwrap();
    assert_eq!((r.version, r.state.as_str()), (1, ""));
    // SAFETY: an open handle.
    assert_eq!(unsafe { agent_close(h) }, AGENT_OK);
}

#[test]
fn errors_complete_with_the_sync_calls_status_and_message() {
    let dir = temp("submit_errors");
    let h = open(&dir.join("s.db"));
    let (tx, rx) = mpsc::channel();
    assert_eq!(
        submit(h, &call(AGENT_OP_SET_STATE, 0, b"{", 1), &tx),
        AGENT_OK
    );
    let e = rx.recv().unwrap();
    assert_eq!(
        (e.status, e.version, e.state.as_str()),
        (AGENT_ERR_JSON, 0, "")
    );
    assert!(e.message.starts_with("agent_set_state: "), "{}", e.message);
    let mut c = call(AGENT_OP_REPLACE_STATE, AGENT_CALL_IF, br#"{"a":1}"#, 2);
    c.expected_version = 5;
    assert_eq!(submit(h, &c, &tx), AGENT_OK);
    let e = rx.recv().unwrap();
    assert_eq!(e.status, AGENT_ERR_CONFLICT);
    assert!(
        e.message.starts_with("agent_replace_state_if: "),
        "{}",
        e.message
    );
    // SAFETY: an open handle.
    assert_eq!(unsafe { agent_close(h) }, AGENT_OK);
}

#[test]
fn bad_input_is_refused_and_done_never_called() {
    let dir = temp("submit_bad");
    let h = open(&dir.join("s.db"));
    let (tx, rx) = mpsc::channel();
    let ok = call(AGENT_OP_SET_STATE, 0, b"{}", 1);
    let cases: Vec<(AgentCall, u64, &str, i32)> = vec![
        (call(0, 0, b"{}", 1), h, "op", AGENT_ERR_INVALID_ARGUMENT),
        (call(5, 0, b"{}", 1), h, "op", AGENT_ERR_INVALID_ARGUMENT),
        (
            call(AGENT_OP_SET_STATE, 4, b"{}", 1),
            h,
            "flags",
            AGENT_ERR_INVALID_ARGUMENT,
        ),
        (
            call(AGENT_OP_GET_STATE, AGENT_CALL_IF, b"", 1),
            h,
            "AGENT_CALL_IF",
            AGENT_ERR_INVALID_ARGUMENT,
        ),
        (
            AgentCall {
                data: std::ptr::null(),
                ..call(AGENT_OP_SET_STATE, 0, b"{}", 1)
            },
            h,
            "data",
            AGENT_ERR_INVALID_ARGUMENT,
        ),
        (
            AgentCall {
                cancel: 12345,
                ..call(AGENT_OP_SET_STATE, 0, b"{}", 1)
            },
            h,
            "cancel",
            AGENT_ERR_INVALID_ARGUMENT,
        ),
        (
            call(AGENT_OP_SET_STATE, 0, b"{}", 1),
            12345,
            "agent_submit",
            AGENT_ERR_BAD_HANDLE,
        ),
    ];
    for (c, handle, says, status) in &cases {
        assert_eq!(submit(*handle, c, &tx), *status, "{says}");
        assert!(last_error().contains(says), "{says}: {}", last_error());
    }
    // SAFETY: NULL call / NULL done are refused before anything is read.
    let rc = unsafe { agent_submit(h, std::ptr::null(), Some(send), std::ptr::null_mut()) };
    assert_eq!(rc, AGENT_ERR_INVALID_ARGUMENT);
    assert!(last_error().contains("call is NULL"));
    // SAFETY: as above.
    let rc = unsafe { agent_submit(h, &ok, None, std::ptr::null_mut()) };
    assert_eq!(rc, AGENT_ERR_INVALID_ARGUMENT);
    assert!(last_error().contains("done is NULL"));
    // One accepted call after them: the first completion to arrive is its (tag 99), as every
    // refused call had tag 1, and nothing else is waiting.
    assert_eq!(submit(h, &AgentCall { tag: 99, ..ok }, &tx), AGENT_OK);
    assert_eq!(rx.recv().unwrap().tag, 99);
    assert!(rx.try_recv().is_err());
    // SAFETY: an open handle.
    assert_eq!(unsafe { agent_close(h) }, AGENT_OK);
}

/// Whether `fd` is readable, waiting up to `timeout_ms` (-1: without a limit).
fn poll_in(fd: i32, timeout_ms: i32) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: polls one descriptor of this process.
    let n = unsafe { libc::poll(&mut p, 1, timeout_ms) };
    assert!(n >= 0);
    n == 1
}

fn readable(fd: i32) -> bool {
    poll_in(fd, 0)
}

fn wait_readable(fd: i32) {
    assert!(poll_in(fd, -1));
}

fn take(q: u64, cap: usize) -> Vec<Got> {
    let mut out: Vec<AgentCompletion> = (0..cap).map(|_| empty_completion()).collect();
    let mut n = 0;
    // SAFETY: `out` has room for `cap` completions.
    let rc = unsafe { agent_queue_take(q, out.as_mut_ptr(), cap, &mut n) };
    assert_eq!(rc, AGENT_OK);
    out.iter_mut().take(n).map(got).collect()
}

#[test]
fn a_queue_is_readable_exactly_while_completions_wait() {
    let dir = temp("submit_queue");
    let h = open(&dir.join("s.db"));
    let (mut q, mut fd) = (0, -1);
    // SAFETY: valid out pointers.
    assert_eq!(unsafe { agent_queue_new(&mut q, &mut fd) }, AGENT_OK);
    assert!(fd >= 0 && !readable(fd));
    for i in 0..3u64 {
        let patch = format!(r#"{{"n{i}":{i}}}"#);
        let c = call(AGENT_OP_SET_STATE, AGENT_CALL_NO_STATE, patch.as_bytes(), i);
        let (mut now, mut done) = (empty_completion(), -1);
        // SAFETY: valid call and out pointers.
        let rc = unsafe { agent_queue_submit(q, h, &c, &mut now, &mut done) };
        assert_eq!((rc, done), (AGENT_OK, 0));
    }
    let mut all = Vec::new();
    while all.len() < 3 {
        wait_readable(fd);
        let taken = take(q, 1);
        assert_eq!(taken.len(), 1, "readable means one waits");
        all.extend(taken);
    }
    assert!(!readable(fd), "empty: not readable");
    let mut versions: Vec<u64> = all.iter().map(|g| g.version).collect();
    versions.sort_unstable();
    assert_eq!(versions, [1, 2, 3]);
    assert!(all
        .iter()
        .all(|g| g.status == AGENT_OK && g.committed == 1 && g.state.is_empty()));
    // A hot read completes into `now`, and nothing is queued.
    let mut b = AgentBuffer::EMPTY;
    // SAFETY: a valid out pointer; freed at once.
    assert_eq!(unsafe { agent_get_state(h, &mut b) }, AGENT_OK);
    // SAFETY: filled above.
    unsafe { agent_buffer_free(&mut b) };
    let (mut now, mut done) = (empty_completion(), 0);
    let c = call(AGENT_OP_GET_STATE, 0, b"", 42);
    // SAFETY: valid call and out pointers.
    let rc = unsafe { agent_queue_submit(q, h, &c, &mut now, &mut done) };
    assert_eq!(rc, AGENT_OK);
    assert_eq!(done, 1);
    let g = got(&mut now);
    assert_eq!((g.tag, g.version), (42, 3));
    assert!(!readable(fd) && take(q, 4).is_empty());
    // Freed with a completion waiting and calls in flight: no leak, no crash (valgrind in the C
    // suite), and the id is gone.
    let c = call(AGENT_OP_SET_STATE, 0, br#"{"z":1}"#, 1);
    for _ in 0..4 {
        let (mut now, mut done) = (empty_completion(), 0);
        // SAFETY: valid call and out pointers.
        let rc = unsafe { agent_queue_submit(q, h, &c, &mut now, &mut done) };
        assert_eq!(rc, AGENT_OK);
    }
    // SAFETY: a queue id; freed once, then refused.
    assert_eq!(unsafe { agent_queue_free(q) }, AGENT_OK);
    // SAFETY: as above.
    assert_eq!(unsafe { agent_queue_free(q) }, AGENT_ERR_BAD_HANDLE);
    assert!(take_status(q) == AGENT_ERR_BAD_HANDLE);
    // SAFETY: an open handle.
    assert_eq!(unsafe { agent_close(h) }, AGENT_OK);
}

fn take_status(q: u64) -> i32 {
    let mut n = 0;
    // SAFETY: cap 0, no output written but the count.
    unsafe { agent_queue_take(q, std::ptr::null_mut(), 0, &mut n) }
}

/// The threads a hook and a `done` ran on, in the order they ran.
static RAN_ON: Mutex<Vec<(&str, std::thread::ThreadId)>> = Mutex::new(Vec::new());

unsafe extern "C" fn hook(_user_data: *mut c_void, _change: *const AgentStateChange) -> i32 {
    RAN_ON
        .lock()
        .unwrap()
        .push(("hook", std::thread::current().id()));
    0
}

unsafe extern "C" fn done_after_hook(context: *mut c_void, c: *mut AgentCompletion) {
    RAN_ON
        .lock()
        .unwrap()
        .push(("done", std::thread::current().id()));
    // SAFETY: `c` is valid during the call and its buffers are ours; `context` is the channel's
    // sender, alive until the test received.
    unsafe {
        agent_buffer_free(&mut (*c).state);
        agent_buffer_free(&mut (*c).message);
        let tx = &*context.cast::<mpsc::Sender<()>>();
        tx.send(()).unwrap();
    }
}

#[test]
fn a_submitted_writes_hooks_run_on_its_worker_before_done() {
    let dir = temp("submit_hooks");
    let h = open(&dir.join("s.db"));
    let mut id = 0;
    // SAFETY: a valid hook and out pointer; no user data to free.
    let rc = unsafe { agent_on_state_changed(h, Some(hook), std::ptr::null_mut(), None, &mut id) };
    assert_eq!(rc, AGENT_OK);
    let (tx, rx) = mpsc::channel::<()>();
    let context = std::ptr::from_ref(&tx).cast_mut().cast::<c_void>();
    // SAFETY: a valid call and callback; the sender outlives the completion (received below).
    let rc = unsafe {
        agent_submit(
            h,
            &call(AGENT_OP_SET_STATE, AGENT_CALL_NO_STATE, br#"{"n":1}"#, 1),
            Some(done_after_hook),
            context,
        )
    };
    assert_eq!(rc, AGENT_OK);
    rx.recv().unwrap();
    let ran = RAN_ON.lock().unwrap().clone();
    assert_eq!(ran.len(), 2, "{ran:?}");
    assert_eq!((ran[0].0, ran[1].0), ("hook", "done"));
    assert_eq!(
        ran[0].1, ran[1].1,
        "the hook ran on the worker that completed the call"
    );
    assert_ne!(ran[0].1, std::thread::current().id());
    // SAFETY: an open handle.
    assert_eq!(unsafe { agent_close(h) }, AGENT_OK);
}
