//! Reads of a hot handle across `fork()`: the child never trusts the copy of the state its
//! parent's thread made (it reconnects and reads), and each process's next read sees the
//! other's commits (alone in a process of its own, `#[own_process]`: it forks).
#![allow(unsafe_code)] // fork(), pipe() and _exit(), to test the child's behaviour

use agent_state::{Agent, OpenOptions};
use test_support::{open, own_process, sqlite_only, TempDir};

fn version_of(agent: &Agent) -> u64 {
    let v = agent.get_state_versioned().unwrap();
    let n = serde_json::from_slice::<serde_json::Value>(v.state.json()).unwrap()["n"]
        .as_u64()
        .unwrap();
    assert_eq!(
        n, v.version,
        "the state and its version come from one commit"
    );
    v.version
}

/// One byte through a pipe: the other process's step is done (blocks until it is).
fn signal(fd: i32) {
    // SAFETY: writes one byte from a live buffer to a pipe this process holds open.
    assert_eq!(unsafe { libc::write(fd, [1u8].as_ptr().cast(), 1) }, 1);
}

fn wait_for(fd: i32) {
    let mut b = [0u8];
    // SAFETY: reads one byte into a live buffer from a pipe this process holds open.
    assert_eq!(unsafe { libc::read(fd, b.as_mut_ptr().cast(), 1) }, 1);
}

fn pipe() -> (i32, i32) {
    let mut fds = [0i32; 2];
    // SAFETY: pipe() writes two descriptors into the array.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    (fds[0], fds[1])
}

#[own_process]
fn a_forked_child_and_its_parent_see_each_others_commits_on_a_hot_handle() {
    sqlite_only!("fork and the SQLite commit mark");
    let dir = TempDir::new("hot_fork");
    let place = dir.store("s.db");
    let agent = open(&place, &OpenOptions::default()).unwrap();
    let writer = open(&place, &OpenOptions::default()).unwrap();
    agent.replace_state(br#"{"n":1}"#).unwrap();
    // Hot on this thread: the copy the child inherits.
    assert_eq!(version_of(&agent), 1);
    assert_eq!(version_of(&agent), 1);
    let (to_child_r, to_child_w) = pipe();
    let (to_parent_r, to_parent_w) = pipe();
    // SAFETY: the child only runs the library (which forgets inherited connections) and this
    // test's code, and leaves with _exit, running no destructor of the parent's state.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    // Each process keeps only its own ends: a process that exits early ends the other's wait.
    let close = |fds: [i32; 2]| {
        for fd in fds {
            // SAFETY: closes a descriptor of this process that nothing else uses.
            unsafe { libc::close(fd) };
        }
    };
    if pid == 0 {
        close([to_child_w, to_parent_r]);
        let ok = std::panic::catch_unwind(|| {
            assert_eq!(version_of(&agent), 1, "the child reads the state as it was");
            signal(to_parent_w);
            wait_for(to_child_r); // the parent committed version 2
            assert_eq!(version_of(&agent), 2, "the child saw a stale state");
            assert_eq!(version_of(&agent), 2);
            agent.set_state(br#"{"n":3}"#).unwrap();
            assert_eq!(version_of(&agent), 3);
            signal(to_parent_w);
        })
        .is_ok();
        // SAFETY: ends the child at once, as a child of fork() should.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    close([to_parent_w, to_child_r]);
    wait_for(to_parent_r);
    assert_eq!(version_of(&agent), 1);
    writer.set_state(br#"{"n":2}"#).unwrap();
    signal(to_child_w);
    wait_for(to_parent_r); // the child committed version 3
    assert_eq!(version_of(&agent), 3, "the parent saw a stale state");
    assert_eq!(version_of(&agent), 3);
    let mut status = 0;
    // SAFETY: waits for the child this test forked.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the child failed: {status}"
    );
}
