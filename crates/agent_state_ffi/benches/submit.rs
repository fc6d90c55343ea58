//! Awaited calls through the C ABI against the synchronous calls they wrap, on one handle of a
//! SQLite file on disk (`synchronous` normal), 1 KiB states, in alternating rounds:
//!
//! - a `set_state` submitted to a completion queue (`agent_queue_submit`), its completion
//!   awaited on the queue's eventfd (`poll`) and taken (`agent_queue_take`), one call at a
//!   time: the hand-off to a worker thread and back, against `agent_set_state`;
//! - a `get_state` that the handle's validated copy answers, submitted with a callback
//!   (`agent_submit`, which completes it before it returns), against `agent_get_state`.
//!
//! Usage: `cargo bench -p agent_state_ffi --bench submit -- [--smoke] [--out FILE]`
//! (bench/run.sh runs it after the abi bench; the JSON is `target/bench/submit.json`).
// It calls the C ABI as a C program would, which takes `unsafe` (each block has its SAFETY note).
#![allow(unsafe_code)]
// The header's declarations are included twice: privately by `support` (which keeps them to
// itself) and here. The two copies declare the same C functions over the same C types (rustc
// sees two Rust types of each).
#![allow(clashing_extern_declarations, clippy::duplicate_mod)]

mod support;

// The header's declarations, as the tests and the other benches have them.
#[path = "../tests/support/abi.rs"]
mod abi;
// The tests' helpers of awaited calls (an empty completion).
#[path = "../tests/support/calls.rs"]
mod calls;

use std::ffi::{c_void, CString};

use abi::*;
use calls::empty_completion;
use support::{make_patches, make_state, print_table, race, write_json, Args, Row};

fn check(rc: i32, what: &str) {
    assert_eq!(rc, AGENT_OK, "{what} failed with {rc}");
}

fn open(path: &std::path::Path) -> u64 {
    let p = CString::new(path.to_str().unwrap()).unwrap();
    let o = CString::new(r#"{"synchronous":"normal"}"#).unwrap();
    let mut h = 0;
    // SAFETY: valid NUL-terminated strings and out pointer.
    check(
        unsafe { agent_open(p.as_ptr(), o.as_ptr(), &mut h) },
        "agent_open",
    );
    h
}

/// Frees a completion's buffers (a reader would have used the state).
fn release(c: &mut AgentCompletion) {
    check(c.status, "the submitted call");
    // SAFETY: the completion's buffers are the receiver's, freed once.
    unsafe {
        agent_buffer_free(&mut c.state);
        agent_buffer_free(&mut c.message);
    }
}

/// A `done` that counts completions and frees their buffers.
unsafe extern "C" fn counted(context: *mut c_void, c: *mut AgentCompletion) {
    // SAFETY: `context` is the bench's counter, alive while calls complete; `c` is valid
    // during the call.
    unsafe {
        *context.cast::<usize>() += 1;
        release(&mut *c);
    }
}

fn main() {
    let cfg = Args::parse("target/bench/submit.json");
    let dir = std::env::temp_dir().join(format!("agent_state_bench_submit_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let size = 1024;
    let h = open(&dir.join("submit.db"));
    let state = make_state(size);
    // SAFETY: `state` is valid for its length; no output requested.
    check(
        unsafe { agent_replace_state(h, state.as_ptr(), state.len(), std::ptr::null_mut()) },
        "agent_replace_state",
    );
    let patches = make_patches(64);
    let (mut q, mut fd) = (0, -1);
    // SAFETY: valid out pointers.
    check(
        unsafe { agent_queue_new(&mut q, &mut fd) },
        "agent_queue_new",
    );
    let ops = if cfg.smoke { 50 } else { 1000 };
    let rounds = cfg.rounds();
    let mut rows = Vec::new();

    // A write through the queue, one at a time, against the synchronous write.
    let mut sync_set = |i: usize| {
        let p = &patches[i % patches.len()];
        // SAFETY: `p` is valid for its length; no output requested.
        check(
            unsafe { agent_set_state(h, p.as_ptr(), p.len(), std::ptr::null_mut()) },
            "agent_set_state",
        );
    };
    let mut queued_set = |i: usize| {
        let p = &patches[i % patches.len()];
        let call = AgentCall {
            op: AGENT_OP_SET_STATE,
            flags: AGENT_CALL_NO_STATE,
            data: p.as_ptr(),
            len: p.len(),
            expected_version: 0,
            cancel: 0,
            tag: i as u64,
        };
        let (mut now, mut done) = (empty_completion(), 0);
        // SAFETY: a valid call and out pointers.
        let rc = unsafe { agent_queue_submit(q, h, &call, &mut now, &mut done) };
        check(rc, "agent_queue_submit");
        let (mut c, mut n) = (empty_completion(), 0);
        while n == 0 {
            let mut p = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: polls the queue's descriptor, without a time limit.
            unsafe { libc::poll(&mut p, 1, -1) };
            // SAFETY: room for one completion.
            check(
                unsafe { agent_queue_take(q, &mut c, 1, &mut n) },
                "agent_queue_take",
            );
        }
        release(&mut c);
    };
    let t = race(&mut [&mut queued_set, &mut sync_set], rounds, ops);
    rows.push(Row {
        op: "set_state submitted to a queue, awaited on its eventfd".into(),
        size,
        dir: "disk".into(),
        sync: "normal".into(),
        ours_ns: t[0],
        alternative: "agent_set_state".into(),
        alt_ns: t[1],
        note: format!(
            "the hand-off to a worker and back: {:.1} µs a call",
            (t[0] - t[1]) / 1e3
        ),
        ..Row::default()
    });

    // A read the handle's copy answers: completed inside agent_submit, on this thread.
    let mut b = AgentBuffer::EMPTY;
    // SAFETY: a valid out pointer; the buffer is freed at once.
    unsafe {
        check(agent_get_state(h, &mut b), "agent_get_state");
        agent_buffer_free(&mut b);
    }
    let mut completed = 0usize;
    let context = std::ptr::from_mut(&mut completed).cast::<c_void>();
    let get = AgentCall {
        op: AGENT_OP_GET_STATE,
        flags: 0,
        data: std::ptr::null(),
        len: 0,
        expected_version: 0,
        cancel: 0,
        tag: 0,
    };
    let mut submitted_get = |_: usize| {
        // SAFETY: a valid call; the callback's context outlives it (it completes before
        // agent_submit returns, which the count below checks).
        check(
            unsafe { agent_submit(h, &get, Some(counted), context) },
            "agent_submit",
        );
    };
    let mut sync_get = |_: usize| {
        let mut b = AgentBuffer::EMPTY;
        // SAFETY: a valid out pointer; the buffer is freed at once.
        unsafe {
            check(agent_get_state(h, &mut b), "agent_get_state");
            agent_buffer_free(&mut b);
        }
    };
    let t = race(&mut [&mut submitted_get, &mut sync_get], rounds, ops * 100);
    // SAFETY: every call completed before its agent_submit returned (no worker touches it).
    let completed = unsafe { *context.cast::<usize>() };
    assert_eq!(
        completed,
        1 + rounds * ops * 100,
        "every hot read completed at once"
    );
    rows.push(Row {
        op: "get_state submitted, answered by the handle's copy".into(),
        size,
        dir: "disk".into(),
        sync: "normal".into(),
        ours_ns: t[0],
        alternative: "agent_get_state".into(),
        alt_ns: t[1],
        note: "completes inside agent_submit, on the calling thread".into(),
        ..Row::default()
    });

    print_table(&rows, true);
    write_json(&cfg.out, cfg.smoke, &rows, true, "");
    // SAFETY: the bench's queue and handle, each freed once.
    unsafe {
        agent_queue_free(q);
        agent_close(h);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
