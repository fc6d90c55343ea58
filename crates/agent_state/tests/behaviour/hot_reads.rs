//! Reads of a hot handle (agent/hot.rs): each thread's own copy of the state is trusted only
//! while nothing was committed since, so a read that starts after a commit returned sees it,
//! on every thread; and after the handle closed, no copy is trusted. On either backend
//! (`#[each_backend]`, crates/test-support).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};

use agent_state::{Agent, Error, OpenOptions};
use test_support::{each_backend, open, write_behind_the_back, Place, TempDir};

const THREADS: usize = 4;
const ROUNDS: u64 = 60;

/// The state's `n` and the version read with it (equal when both come from one commit).
fn read(agent: &Agent) -> (u64, u64) {
    let v = agent.get_state_versioned().unwrap();
    let n = serde_json::from_slice::<serde_json::Value>(v.state.json()).unwrap()["n"]
        .as_u64()
        .unwrap();
    (n, v.version)
}

/// `rounds` rounds: `write(round)` commits version `round` (through any handle or connection)
/// and returns; then each of the reader threads, holding a hot copy from the round before,
/// reads `reader` twice (the first read may refresh the copy, the second is hot again).
fn every_thread_sees_each_commit(reader: Arc<Agent>, rounds: u64, write: impl Fn(u64)) {
    reader.replace_state(br#"{"n":1}"#).unwrap();
    assert_eq!(read(&reader), (1, 1));
    let start = Arc::new(Barrier::new(THREADS + 1));
    let done = Arc::new(Barrier::new(THREADS + 1));
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            let (reader, start, done) = (reader.clone(), start.clone(), done.clone());
            std::thread::spawn(move || {
                // Wrong reads are collected, not asserted here: a thread that stopped would
                // leave the others waiting at the barrier.
                let mut wrong = Vec::new();
                for round in 1..=rounds {
                    start.wait(); // the round's commit has returned
                    for _ in 0..2 {
                        let seen = read(&reader);
                        if seen != (round, round) {
                            wrong.push((round, seen));
                        }
                    }
                    done.wait();
                }
                wrong
            })
        })
        .collect();
    for round in 1..=rounds {
        if round > 1 {
            write(round);
        }
        start.wait();
        done.wait();
    }
    for t in threads {
        let wrong = t.join().unwrap();
        assert!(
            wrong.is_empty(),
            "stale reads (round, (n, version)): {wrong:?}"
        );
    }
}

fn state(n: u64) -> Vec<u8> {
    format!(r#"{{"n":{n}}}"#).into_bytes()
}

#[each_backend]
fn reads_on_many_threads_see_every_commit_of_another_handle() {
    let dir = TempDir::new("hot_other_handle");
    let place = dir.store("s.db");
    let reader = Arc::new(open(&place, &OpenOptions::default()).unwrap());
    let writer = open(&place, &OpenOptions::default()).unwrap();
    every_thread_sees_each_commit(reader, ROUNDS, |n| {
        writer.set_state(&state(n)).unwrap();
    });
}

/// The same with agent ids: both handles share one connection of this process.
#[each_backend]
fn reads_on_many_threads_see_every_commit_of_a_handle_on_the_same_connection() {
    let dir = TempDir::new("hot_shared_connection");
    let place = dir.store("s.db").agent("a");
    let reader = Arc::new(open(&place, &OpenOptions::default()).unwrap());
    let writer = open(&place, &OpenOptions::default()).unwrap();
    every_thread_sees_each_commit(reader, ROUNDS, |n| {
        writer.set_state(&state(n)).unwrap();
    });
}

#[each_backend]
fn reads_on_many_threads_see_every_commit_of_the_handle_itself() {
    let dir = TempDir::new("hot_own_handle");
    let reader = Arc::new(open(&dir.store("s.db"), &OpenOptions::default()).unwrap());
    let writer = Arc::clone(&reader);
    every_thread_sees_each_commit(reader, ROUNDS, |n| {
        writer.set_state(&state(n)).unwrap();
    });
}

#[each_backend]
fn reads_on_many_threads_see_a_commit_made_behind_the_librarys_back() {
    let dir = TempDir::new("hot_behind");
    let place = dir.store("s.db");
    let reader = Arc::new(open(&place, &OpenOptions::default()).unwrap());
    // Another connection, not the library: the version goes up by one.
    every_thread_sees_each_commit(reader, ROUNDS / 4, |n| {
        write_behind_the_back(&place, std::str::from_utf8(&state(n)).unwrap());
    });
}

#[each_backend]
fn reads_that_start_after_close_fail_on_every_thread() {
    let dir = TempDir::new("hot_close");
    let place = dir.store("s.db");
    let agent = Arc::new(open(&place, &OpenOptions::default()).unwrap());
    agent.replace_state(br#"{"n":1}"#).unwrap();
    let hot = Arc::new(Barrier::new(THREADS + 1));
    let closed = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            let (agent, hot, closed) = (agent.clone(), hot.clone(), closed.clone());
            std::thread::spawn(move || {
                let first = agent.get_state().unwrap();
                agent.get_state().unwrap(); // hot now
                hot.wait();
                // Reads racing the close succeed or fail Closed, until its return is seen.
                let mut other_errors = Vec::new();
                while !closed.load(Ordering::Acquire) {
                    match agent.get_state() {
                        Ok(_) | Err(Error::Closed) => {}
                        Err(e) => other_errors.push(e.to_string()),
                    }
                }
                let after = (
                    matches!(agent.get_state(), Err(Error::Closed)),
                    matches!(agent.get_state_versioned(), Err(Error::Closed)),
                );
                (other_errors, after, first)
            })
        })
        .collect();
    hot.wait();
    agent.close().unwrap();
    closed.store(true, Ordering::Release);
    for t in threads {
        let (other_errors, after, first) = t.join().unwrap();
        assert!(other_errors.is_empty(), "{other_errors:?}");
        assert_eq!(after, (true, true), "a read after close succeeded");
        // What was read before stays readable after the close.
        assert_eq!(first.json(), br#"{"n":1}"#);
    }
}

/// A thread that read many handles keeps copies of a few only; every handle still reads right.
#[each_backend]
fn a_thread_reading_many_handles_reads_each_right() {
    let dir = TempDir::new("hot_many");
    let agents: Vec<Agent> = (0..20)
        .map(|i| {
            let a = open(&dir.store(&format!("s{i}.db")), &OpenOptions::default()).unwrap();
            a.replace_state(format!(r#"{{"n":1,"i":{i}}}"#).as_bytes())
                .unwrap();
            a
        })
        .collect();
    for _ in 0..3 {
        for (i, a) in agents.iter().enumerate() {
            let v: serde_json::Value =
                serde_json::from_slice(a.get_state().unwrap().json()).unwrap();
            assert_eq!(v["i"], i);
        }
    }
}

/// A read's ticket, carried to another thread (as Node's JavaScript thread keeps the ticket of a
/// read that ran on the pool): current until a commit by this handle, another handle or behind
/// the library's back, and never after the handle closed; a ticket is checked on any thread.
#[each_backend]
fn a_read_ticket_is_current_until_anything_commits() {
    let dir = TempDir::new("hot_ticket");
    let place = dir.store("s.db");
    let reader = Arc::new(open(&place, &OpenOptions::default()).unwrap());
    let writer = open(&place, &OpenOptions::default()).unwrap();

    // Nothing stored: the initial state cannot be validated later.
    let (held, ticket) = reader.read_ticketed().unwrap();
    assert_eq!(held.version(), 0);
    assert!(ticket.is_none());

    let ticket_on_pool = |reader: &Arc<Agent>| {
        let reader = reader.clone();
        std::thread::spawn(move || reader.read_ticketed().unwrap())
            .join()
            .unwrap()
    };

    reader.replace_state(&state(1)).unwrap();
    let (held, ticket) = ticket_on_pool(&reader);
    assert_eq!(held.version(), 1);
    if !matches!(place, Place::Sqlite { .. }) {
        // PostgreSQL offers no commit watch (a commit is seen only by asking the server): no
        // ticket, so every read asks.
        assert!(ticket.is_none());
        return;
    }
    let ticket = ticket.expect("a stored state read through a commit watch has a ticket");
    assert!(
        reader.is_current(&ticket),
        "nothing committed since the read"
    );
    assert!(reader.is_current(&ticket), "checking does not use it up");

    // A commit of this handle.
    reader.set_state(&state(2)).unwrap();
    assert!(!reader.is_current(&ticket));
    let (_, ticket) = ticket_on_pool(&reader);
    let ticket = ticket.unwrap();
    assert!(reader.is_current(&ticket));

    // A commit of another handle.
    writer.set_state(&state(3)).unwrap();
    assert!(!reader.is_current(&ticket));
    let (held, ticket) = ticket_on_pool(&reader);
    assert_eq!(held.version(), 3);
    let ticket = ticket.unwrap();

    // A commit behind the library's back (another program's SQL).
    write_behind_the_back(&place, r#"{"n":4}"#);
    assert!(!reader.is_current(&ticket));
    let (held, ticket) = ticket_on_pool(&reader);
    assert_eq!(held.version(), 4);
    let ticket = ticket.unwrap();
    assert!(reader.is_current(&ticket));

    // A ticket names its handle: another handle never trusts it.
    assert!(!writer.is_current(&ticket));

    reader.close().unwrap();
    assert!(
        !reader.is_current(&ticket),
        "a closed handle trusts no ticket"
    );
    assert!(matches!(reader.read_ticketed(), Err(Error::Closed)));
}
