//! The library's worker pool (`agent_state::work`), where submitted calls run: jobs run, never
//! more than the cap at once (`AGENT_STATE_WORKERS`), idle workers exit, a panicking job leaves
//! its worker working, a job's cancel token is bound while it runs and only then, and a forked
//! child starts with an empty pool of its own. The tests that set the cap, count threads or
//! fork run alone in a process (`#[own_process]`); the read that never waits
//! (`Agent::read_now`) is here too, since the pool is what a read goes to when it cannot.
#![allow(unsafe_code)] // fork(), waitpid() and _exit(), to test the child's pool

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use agent_state::{work, Agent, Cancel, ErrorKind, OpenOptions};
use test_support::{own_process, text, TempDir};

/// Runs `job` on the pool and waits for what it sends.
fn on_pool<T: Send + 'static>(
    cancel: Option<Cancel>,
    job: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = mpsc::channel();
    work::spawn(cancel, move || {
        let _ = tx.send(job());
    })
    .unwrap();
    rx.recv().expect("the job ran and sent its result")
}

/// Sets the cap for this process, before its pool exists (tests alone in their process only).
fn set_cap(n: usize) {
    std::env::set_var(work::WORKERS_VAR, n.to_string());
    assert_eq!(work::cap().unwrap(), n);
}

#[test]
fn every_job_runs_once() {
    let (tx, rx) = mpsc::channel();
    for i in 0..200u32 {
        let tx = tx.clone();
        work::spawn(None, move || tx.send(i).unwrap()).unwrap();
    }
    drop(tx);
    let mut seen: Vec<u32> = rx.iter().collect();
    seen.sort_unstable();
    assert_eq!(seen, (0..200).collect::<Vec<_>>());
}

/// How many jobs run at once, counted by the jobs themselves.
#[derive(Default)]
struct Overlap {
    counts: Mutex<(usize, usize, usize)>, // (running, most ever running, started)
    changed: Condvar,
}

#[own_process]
fn never_more_than_the_cap_of_jobs_run_at_once_and_the_cap_is_reached() {
    set_cap(3);
    const JOBS: usize = 40;
    let overlap = Arc::new(Overlap::default());
    let (tx, rx) = mpsc::channel();
    for _ in 0..JOBS {
        let (overlap, tx) = (Arc::clone(&overlap), tx.clone());
        work::spawn(None, move || {
            let mut c = overlap.counts.lock().unwrap();
            c.0 += 1;
            c.1 = c.1.max(c.0);
            c.2 += 1;
            overlap.changed.notify_all();
            // Each job stays until the cap of jobs run together (or no job is left to start),
            // so that a pool without a cap, or one that ran jobs one by one, fails below.
            while c.0 < 3 && c.2 < JOBS {
                c = overlap.changed.wait(c).unwrap();
            }
            let threads = work::threads();
            c.0 -= 1;
            drop(c);
            tx.send(threads).unwrap();
        })
        .unwrap();
    }
    drop(tx);
    let threads: Vec<usize> = rx.iter().collect();
    assert_eq!(threads.len(), JOBS);
    assert!(threads.iter().all(|&n| n <= 3), "{threads:?}");
    assert_eq!(
        overlap.counts.lock().unwrap().1,
        3,
        "the most jobs running at once"
    );
}

/// This process's threads, from /proc/self/task.
fn process_threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

#[own_process]
fn idle_workers_exit() {
    let before = process_threads();
    let (go, wait) = (Arc::new((Mutex::new(false), Condvar::new())), 4);
    let (tx, rx) = mpsc::channel();
    // Four jobs held together: four workers.
    for _ in 0..wait {
        let (go, tx) = (Arc::clone(&go), tx.clone());
        work::spawn(None, move || {
            tx.send(()).unwrap();
            let mut g = go.0.lock().unwrap();
            while !*g {
                g = go.1.wait(g).unwrap();
            }
        })
        .unwrap();
    }
    for _ in 0..wait {
        rx.recv().unwrap();
    }
    assert_eq!(work::threads(), wait);
    assert_eq!(process_threads(), before + wait);
    *go.0.lock().unwrap() = true;
    go.1.notify_all();
    // They exit once idle for work::IDLE; a generous bound for a loaded machine.
    let deadline = Instant::now() + work::IDLE * 20;
    while work::threads() > 0 || process_threads() > before {
        assert!(
            Instant::now() < deadline,
            "{} workers still alive, {} threads",
            work::threads(),
            process_threads()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // And the pool starts again.
    assert_eq!(on_pool(None, || 7), 7);
}

#[own_process]
fn a_panicking_job_leaves_its_worker_working() {
    set_cap(1);
    let first = on_pool(None, || std::thread::current().id());
    work::spawn(None, || panic!("a job's own panic")).unwrap();
    let after = on_pool(None, || std::thread::current().id());
    assert_eq!(after, first, "the one worker survived the panic");
    assert_eq!(work::threads(), 1);
}

#[own_process]
fn a_job_runs_under_its_token_and_the_next_job_under_none() {
    set_cap(1); // one worker: the second job runs on the thread the first one left
    let agent = Arc::new(Agent::open_with(":memory:", &OpenOptions::default()).unwrap());
    let fired = Cancel::new();
    fired.cancel();
    let a = Arc::clone(&agent);
    let err = on_pool(Some(fired), move || a.set_state(br#"{"n":1}"#))
        .expect_err("the fired token was bound to the job");
    assert_eq!(err.kind(), ErrorKind::Cancelled, "{err}");
    let a = Arc::clone(&agent);
    let written = on_pool(None, move || a.set_state(br#"{"n":2}"#)).unwrap();
    assert_eq!(text(&written), r#"{"n":2}"#);
    let live = Cancel::new();
    let a = Arc::clone(&agent);
    let written = on_pool(Some(live), move || a.set_state(br#"{"n":3}"#)).unwrap();
    assert_eq!(text(&written), r#"{"n":3}"#);
    assert_eq!(agent.get_state_versioned().unwrap().version, 2);
}

#[test]
fn a_job_on_a_worker_does_not_take_the_callers_token() {
    let fired = Cancel::new();
    fired.cancel();
    let agent = Arc::new(Agent::open_with(":memory:", &OpenOptions::default()).unwrap());
    let a = Arc::clone(&agent);
    let written = fired.scope(|| on_pool(None, move || a.set_state(br#"{"n":1}"#)));
    assert_eq!(text(&written.unwrap()), r#"{"n":1}"#);
}

#[own_process]
fn a_forked_child_starts_with_an_empty_pool_of_its_own() {
    // A worker busy in the parent at the fork, with a job queued behind it (cap 1).
    set_cap(1);
    let (started_tx, started) = mpsc::channel();
    let (release, released) = mpsc::channel::<()>();
    work::spawn(None, move || {
        started_tx.send(()).unwrap();
        released.recv().unwrap();
    })
    .unwrap();
    started.recv().unwrap();
    static QUEUED_RAN: AtomicBool = AtomicBool::new(false);
    let (ran_tx, ran) = mpsc::channel();
    work::spawn(None, move || {
        QUEUED_RAN.store(true, Ordering::SeqCst);
        ran_tx.send(()).unwrap();
    })
    .unwrap();
    assert_eq!(work::threads(), 1);
    // SAFETY: the child runs only the library and this test's code, and leaves with _exit,
    // running no destructor of the parent's state.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let ok = std::panic::catch_unwind(|| {
            assert_eq!(work::threads(), 0, "the child inherits no worker");
            // Its own pool runs its jobs, though the parent's worker was busy at the fork.
            assert_eq!(on_pool(None, || 5), 5);
            assert_eq!(work::threads(), 1);
            // The job queued in the parent (first in line) never ran here.
            assert!(!QUEUED_RAN.load(Ordering::SeqCst));
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
    // The parent's pool carries on: the queued job runs once the busy one ends.
    release.send(()).unwrap();
    ran.recv().unwrap();
    assert!(QUEUED_RAN.load(Ordering::SeqCst));
}

#[test]
fn read_now_answers_only_from_a_copy_that_is_still_current() {
    let dir = TempDir::new("read_now");
    let path = dir.file("a.db");
    let agent = Agent::open_with(&path, &OpenOptions::default()).unwrap();
    let other = Agent::open_with(&path, &OpenOptions::default()).unwrap();
    other.set_state(br#"{"n":1}"#).unwrap();
    assert!(agent.read_now().is_none(), "nothing read yet");
    agent.get_state().unwrap();
    let held = agent.read_now().expect("the copy the read left");
    assert_eq!(
        (text(held.state()), held.version()),
        (r#"{"n":1}"#.into(), 1)
    );
    other.set_state(br#"{"n":2}"#).unwrap();
    assert!(
        agent.read_now().is_none(),
        "another connection committed since"
    );
    assert_eq!(agent.get_state_versioned().unwrap().version, 2);
    assert_eq!(agent.read_now().unwrap().version(), 2);
    agent.set_state(br#"{"n":3}"#).unwrap();
    assert!(agent.read_now().is_none(), "its own write since");
    // A read on a worker thread (as a submitted read's): a thread that never read the handle
    // itself answers from it at once, while it is current.
    std::thread::scope(|s| s.spawn(|| agent.get_state().unwrap()).join().unwrap());
    let adopted = agent.read_now().expect("the worker's read, still current");
    assert_eq!(
        (text(adopted.state()), adopted.version()),
        (r#"{"n":3}"#.into(), 3)
    );
    other.set_state(br#"{"n":4}"#).unwrap();
    assert!(
        agent.read_now().is_none(),
        "not once something is committed"
    );
    std::thread::scope(|s| s.spawn(|| agent.get_state().unwrap()).join().unwrap());
    assert_eq!(agent.read_now().unwrap().version(), 4);
    agent.close().unwrap();
    assert!(agent.read_now().is_none(), "closed");
}
