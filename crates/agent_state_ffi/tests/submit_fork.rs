//! Awaited calls across `fork()`, alone in a test binary of their own (it forks: no other test's
//! thread may hold a lock of the library at that moment): a child refuses the completion queue
//! it inherited (its descriptor is shared with the parent) but frees it, makes its own, and its
//! submitted calls run on a pool of its own; the parent's queue and pool carry on.
// It calls the C ABI as a C program would, which takes `unsafe` (each block has its SAFETY note).
#![allow(unsafe_code)]

// Links the library, whose exported `agent_*` symbols the declarations resolve to.
extern crate agent_state_ffi;

#[path = "support/abi.rs"]
mod abi;
use abi::*;
#[path = "support/calls.rs"]
mod calls;
use calls::*;

fn write_call(patch: &'static [u8]) -> AgentCall {
    AgentCall {
        op: AGENT_OP_SET_STATE,
        flags: AGENT_CALL_NO_STATE,
        data: patch.as_ptr(),
        len: patch.len(),
        expected_version: 0,
        cancel: 0,
        tag: 1,
    }
}

fn new_queue() -> (u64, i32) {
    let (mut q, mut fd) = (0, -1);
    // SAFETY: valid out pointers.
    assert_eq!(unsafe { agent_queue_new(&mut q, &mut fd) }, AGENT_OK);
    (q, fd)
}

/// Submits `call` to queue `q` and waits (on its descriptor) for the completion's status and
/// version.
fn through_queue(q: u64, fd: i32, h: u64, call: &AgentCall) -> Result<(i32, u64), i32> {
    let (mut now, mut done) = (empty_completion(), 0);
    // SAFETY: valid call and out pointers.
    let rc = unsafe { agent_queue_submit(q, h, call, &mut now, &mut done) };
    if rc != AGENT_OK {
        return Err(rc);
    }
    assert_eq!(done, 0, "a write never completes at once");
    let mut c = empty_completion();
    let mut n = 0;
    while n == 0 {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: polls one descriptor of this process, without a time limit.
        assert_eq!(unsafe { libc::poll(&mut p, 1, -1) }, 1);
        // SAFETY: room for one completion.
        let rc = unsafe { agent_queue_take(q, &mut c, 1, &mut n) };
        assert_eq!(rc, AGENT_OK);
    }
    let got = (c.status, c.version);
    // SAFETY: the completion's buffers are ours, freed once.
    unsafe {
        agent_buffer_free(&mut c.state);
        agent_buffer_free(&mut c.message);
    }
    Ok(got)
}

#[test]
fn a_forked_child_refuses_the_inherited_queue_and_uses_its_own_pool_and_queue() {
    let dir = temp("submit_fork_queue");
    let path = dir.join("s.db");
    let h = open(&path);
    let (q, fd) = new_queue();
    // The parent's pool has a worker by now.
    assert_eq!(
        through_queue(q, fd, h, &write_call(br#"{"n":1}"#)),
        Ok((AGENT_OK, 1))
    );
    // SAFETY: the child runs only the library and this test's code (no other test runs in this
    // binary), and leaves with _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let ok = std::panic::catch_unwind(|| {
            let refused = through_queue(q, fd, h, &write_call(br#"{"child":1}"#));
            assert_eq!(refused, Err(AGENT_ERR_INVALID_ARGUMENT));
            assert!(last_error().contains("before fork()"), "{}", last_error());
            let (mut c, mut n) = (empty_completion(), 0);
            // SAFETY: room for one completion.
            let rc = unsafe { agent_queue_take(q, &mut c, 1, &mut n) };
            assert_eq!(rc, AGENT_ERR_INVALID_ARGUMENT);
            // SAFETY: a queue id; the child's copy of its descriptor is closed.
            assert_eq!(unsafe { agent_queue_free(q) }, AGENT_OK);
            // Its own queue; its calls run on its own pool (the handle reconnects).
            let (mine, my_fd) = new_queue();
            let written = through_queue(mine, my_fd, h, &write_call(br#"{"child":1}"#));
            assert_eq!(written, Ok((AGENT_OK, 2)));
            // SAFETY: the child's own queue, freed once.
            assert_eq!(unsafe { agent_queue_free(mine) }, AGENT_OK);
        })
        .is_ok();
        // SAFETY: ends the child at once, as a child of fork() should.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    let mut status = 0;
    // SAFETY: waits for the child this test forked.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the child failed: {status}"
    );
    // The parent's queue (its descriptor too) carries on.
    assert_eq!(
        through_queue(q, fd, h, &write_call(br#"{"n":3}"#)),
        Ok((AGENT_OK, 3))
    );
    // SAFETY: the parent's queue and handle, each freed once.
    unsafe {
        assert_eq!(agent_queue_free(q), AGENT_OK);
        assert_eq!(agent_close(h), AGENT_OK);
    }
}
