//! The library's worker pool: where a call submitted to be completed later (the C ABI's
//! `agent_submit`) runs, so that a caller awaiting many calls needs neither a thread per call
//! nor a connection per call.
//!
//! Threads start on demand, one per job waiting while fewer than the cap run, and each exits
//! after [`IDLE`] without work: an idle process keeps no worker thread. Jobs wait their turn,
//! first in first out, while every worker is busy. The cap is 8 threads, or the value of the
//! environment variable `AGENT_STATE_WORKERS` (a whole number from 1 to [`MAX_WORKERS`]), read
//! once, at the first job.
//!
//! A job runs with the cancel token it was given bound to its worker thread, as
//! [`Cancel::scope`] binds one for a calling thread, and with none bound after. A job that
//! panics is caught: its worker goes on with the next job. A job reports its own result (the C
//! layer wraps each in its panic boundary, which turns a panic into a completion).
//!
//! Fork: a child process starts with an empty pool of its own (its first job starts its first
//! worker); the jobs queued or running in its parent at the fork never run in the child, and
//! are never dropped there (dropping one could run the parent's code in the child). Each fork
//! generation (`store::process::generation`) has its own pool, in a slot no process of an earlier
//! generation touches, so that a lock a parent's thread held at the fork is never waited for in
//! the child. A process [`MAX_GENERATIONS`] forks or more away from the one that loaded the
//! library has no pool: its jobs are refused with [`Error::Unavailable`].

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use crate::cancel::{self, Cancel};
use crate::error::{Error, Result};
use crate::store::process;

/// The cap on worker threads without `AGENT_STATE_WORKERS`.
pub const DEFAULT_WORKERS: usize = 8;

/// The largest cap `AGENT_STATE_WORKERS` may set.
pub const MAX_WORKERS: usize = 1024;

/// The environment variable that sets the cap.
pub const WORKERS_VAR: &str = "AGENT_STATE_WORKERS";

/// How long a worker waits for a job before it exits.
pub const IDLE: Duration = Duration::from_secs(3);

/// How many fork generations have a pool (see the module's text on fork).
pub const MAX_GENERATIONS: usize = 64;

type Job = Box<dyn FnOnce() + Send + 'static>;

/// One process's pool (one fork generation's).
struct Pool {
    /// The cap, or why `AGENT_STATE_WORKERS` was refused.
    cap: Result<usize>,
    state: Mutex<State>,
    /// Signalled once per job queued while a worker waits.
    ready: Condvar,
}

#[derive(Default)]
struct State {
    queue: VecDeque<(Option<Cancel>, Job)>,
    /// Worker threads alive (running a job or waiting for one).
    threads: usize,
    /// Of those, the ones waiting for a job.
    idle: usize,
}

static POOLS: [OnceLock<Pool>; MAX_GENERATIONS] = [const { OnceLock::new() }; MAX_GENERATIONS];

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    // Jobs run outside the lock and the pool's own code does not panic while holding it.
    state.lock().unwrap_or_else(|p| p.into_inner())
}

/// This process's pool, or why it has none.
fn pool() -> Result<&'static Pool> {
    process::watch();
    let generation = process::generation();
    let slot = usize::try_from(generation)
        .ok()
        .and_then(|g| POOLS.get(g))
        .ok_or_else(|| {
            Error::Unavailable(
                format!(
                    "this process is {generation} fork() generations away from the one that \
                     loaded the library, and only the first {MAX_GENERATIONS} have a worker \
                     pool: make the call synchronously"
                )
                .into(),
            )
        })?;
    Ok(slot.get_or_init(|| Pool {
        cap: read_cap(std::env::var_os(WORKERS_VAR)),
        state: Mutex::new(State::default()),
        ready: Condvar::new(),
    }))
}

/// The cap `AGENT_STATE_WORKERS` sets (`value`), or [`DEFAULT_WORKERS`] when it is unset.
fn read_cap(value: Option<std::ffi::OsString>) -> Result<usize> {
    let Some(value) = value else {
        return Ok(DEFAULT_WORKERS);
    };
    value
        .to_str()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|n| (1..=MAX_WORKERS).contains(n))
        .ok_or_else(|| {
            Error::InvalidArgument(format!(
                "the environment variable {WORKERS_VAR} is {value:?}; it must be a whole \
                 number of worker threads from 1 to {MAX_WORKERS} (unset: {DEFAULT_WORKERS})"
            ))
        })
}

/// Runs `job` on the worker pool, with `cancel` bound to its worker thread while it runs (the
/// library's calls inside it honour that token, as under [`Cancel::scope`]). Returns once the
/// job is queued; it runs later, on a worker thread, after the jobs queued before it have
/// started. Thread-safe; `job` must report its own outcome (a panic in it is caught, and its
/// worker goes on).
///
/// Errors, the job then dropped without running: [`Error::InvalidArgument`] when
/// `AGENT_STATE_WORKERS` is not a whole number from 1 to [`MAX_WORKERS`];
/// [`Error::Busy`] when no worker is running and none could be started (the system refused
/// a thread); [`Error::Unavailable`] in a process [`MAX_GENERATIONS`] or more forks away.
pub fn spawn(cancel: Option<Cancel>, job: impl FnOnce() + Send + 'static) -> Result<()> {
    let pool = pool()?;
    let cap = pool.cap.clone()?;
    let mut state = lock(&pool.state);
    state.queue.push_back((cancel, Box::new(job)));
    // Each queued job has a waiting worker to wake or, below the cap, a worker of its own.
    if state.queue.len() <= state.idle {
        drop(state);
        pool.ready.notify_one();
        return Ok(());
    }
    if state.threads >= cap {
        return Ok(()); // a busy worker takes it when its turn comes
    }
    // Started under the lock (the new worker waits for it), so that a failure finds the queue
    // as this call left it.
    let started = std::thread::Builder::new()
        .name("agent_state-worker".into())
        .spawn(move || work(pool));
    match started {
        Ok(_) => {
            state.threads += 1;
            Ok(())
        }
        // The workers running take the job in their turn.
        Err(_) if state.threads > 0 => Ok(()),
        Err(e) => {
            // No worker would ever take the job (the last one queued: this call's): refused.
            drop(state.queue.pop_back());
            drop(state);
            Err(Error::Busy(
                format!("the library could not start a worker thread ({e}); try again").into(),
            ))
        }
    }
}

/// The number of worker threads alive in this process's pool now (0 before the first job, and
/// again once all have been idle for [`IDLE`]). Thread-safe.
pub fn threads() -> usize {
    match pool() {
        Ok(pool) => lock(&pool.state).threads,
        Err(_) => 0,
    }
}

/// The cap on this process's worker threads ([`DEFAULT_WORKERS`], or `AGENT_STATE_WORKERS`).
/// Errors: those of [`spawn`] about the variable and the fork generation.
pub fn cap() -> Result<usize> {
    pool()?.cap.clone()
}

/// How many forks separate this process from the one that loaded the library (0 there): what
/// tells an object made before a fork (a completion queue of the C ABI) from one of this
/// process. One relaxed load after the first call. Thread-safe.
pub fn fork_generation() -> u64 {
    process::watch();
    process::generation()
}

/// One worker: takes jobs until none came for [`IDLE`].
fn work(pool: &'static Pool) {
    let mut state = lock(&pool.state);
    loop {
        if let Some((token, job)) = state.queue.pop_front() {
            drop(state);
            run(token, job);
            state = lock(&pool.state);
            continue;
        }
        state.idle += 1;
        let (next, waited) = pool
            .ready
            .wait_timeout(state, IDLE)
            .unwrap_or_else(|p| p.into_inner());
        state = next;
        state.idle -= 1;
        if waited.timed_out() && state.queue.is_empty() {
            state.threads -= 1;
            return;
        }
    }
}

/// Runs one job with its token bound, and none after, whatever the job does.
fn run(token: Option<Cancel>, job: Job) {
    struct Unbind;
    impl Drop for Unbind {
        fn drop(&mut self) {
            cancel::bind(None);
        }
    }
    cancel::bind(token);
    let _unbind = Unbind;
    // The job owns everything it touches; a panic leaves nothing of the pool's half-changed.
    let _ = catch_unwind(AssertUnwindSafe(job));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_is_the_default_or_a_whole_number_in_range() {
        assert_eq!(read_cap(None).unwrap(), DEFAULT_WORKERS);
        assert_eq!(read_cap(Some("3".into())).unwrap(), 3);
        assert_eq!(read_cap(Some(" 1024 ".into())).unwrap(), MAX_WORKERS);
        for bad in ["0", "1025", "-1", "eight", ""] {
            let e = read_cap(Some(bad.into())).unwrap_err();
            assert!(
                matches!(&e, Error::InvalidArgument(m) if m.contains(WORKERS_VAR)),
                "{bad:?}: {e:?}"
            );
        }
    }
}
