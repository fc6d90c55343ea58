//! Schema evolution across a fleet: a program of version 1 has written 10,000 agents of one
//! store; programs of version 2 are deployed and read them lazily while the
//! version-1 program still writes to them. Each version-1 write either commits (the agent not yet
//! migrated) or is refused with `NewerSchema` (after the migration), never lost: every write that
//! returned `Ok` is in the final, upgraded state. Two version-2 programs racing over the same
//! agents migrate each agent once (one migration entry in its change log). On either backend
//! (`#[each_backend]`, crates/test-support).

use std::collections::BTreeSet;
use std::sync::{Arc, Barrier, Mutex};

use agent_state::{ErrorKind, OpenOptions};
use serde_json::{json, Value};

use test_support::{each_backend, open, opts, Place, TempDir};

/// How many agents the store holds, on either backend. (On PostgreSQL each open and each write
/// is a round trip to the server: the test takes a minute or two there; tests/pg/pooler-suites.sh
/// does not run it again through the pooler.)
const AGENTS: usize = 10_000;

fn agents() -> usize {
    AGENTS
}

/// Threads of each program.
const THREADS: usize = 4;
/// The writes the version-1 program makes to each agent while version 2 rolls out.
const WRITES: usize = 2;

fn v1_options() -> OpenOptions {
    opts(json!({
        "schema_version": 1,
        "synchronous": "normal",
        "busy_timeout_ms": 120_000,
        "max_connections": 16
    }))
}

fn v2_options() -> OpenOptions {
    opts(json!({
        "schema_version": 2,
        "schema_steps": [{"from": 1, "ops": [{"op": "default", "path": "/messages", "value": []}]}],
        "synchronous": "normal",
        "busy_timeout_ms": 120_000,
        "max_connections": 16
    }))
}

fn id(i: usize) -> String {
    format!("agent-{i}")
}

fn agent(store: &Place, i: usize, options: &OpenOptions) -> agent_state::Agent {
    open(&store.agent(&id(i)), options).unwrap()
}

/// Starts `THREADS` threads that run `work(i)` for every agent `i` of `order`, in that order,
/// thread `t` taking the agents with `i % THREADS == t`.
fn fleet(
    order: Vec<usize>,
    work: impl Fn(usize) + Send + Sync + 'static,
) -> Vec<std::thread::JoinHandle<()>> {
    let work = Arc::new(work);
    let order = Arc::new(order);
    (0..THREADS)
        .map(|t| {
            let (work, order) = (work.clone(), order.clone());
            std::thread::spawn(move || {
                for &i in order.iter().filter(|&&i| i % THREADS == t) {
                    work(i);
                }
            })
        })
        .collect()
}

/// What the version-1 program saw of one agent's writes during the roll-out.
#[derive(Default, Clone)]
struct Seen {
    /// The keys of the writes that returned `Ok`.
    committed: Vec<String>,
    /// How many were refused with `NewerSchema`.
    refused: usize,
}

/// Version 1 writes `WRITES` keys of `w` to agent `i`, one write each: `Ok` or `NewerSchema`;
/// once refused, always refused (a migrated agent never goes back).
fn v1_writes(store: &Place, i: usize, round: &str, seen: &Mutex<Vec<Seen>>) {
    let a = agent(store, i, &v1_options());
    for k in 0..WRITES {
        let key = format!("{round}{k}");
        let patch = json!({"w": {&key: true}}).to_string();
        match a.set_state(patch.as_bytes()) {
            Ok(_) => {
                let mut seen = seen.lock().unwrap();
                assert_eq!(
                    seen[i].refused, 0,
                    "agent {i}: a write committed after one was refused"
                );
                seen[i].committed.push(key);
            }
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::NewerSchema, "agent {i}: {e}");
                seen.lock().unwrap()[i].refused += 1;
            }
        }
    }
    a.close().unwrap();
}

/// Version 2 reads agent `i` lazily: upgraded, whatever was stored.
fn v2_reads(store: &Place, i: usize) {
    let a = agent(store, i, &v2_options());
    let read = a.get_state().unwrap();
    let state: Value = serde_json::from_slice(read.json()).unwrap();
    assert_eq!(state["messages"], json!([]), "agent {i}: {state}");
    assert_eq!(state["id"], json!(i), "agent {i}: {state}");
    a.close().unwrap();
}

#[each_backend]
fn a_fleet_rolls_forward_while_the_old_program_still_writes() {
    let dir = TempDir::new("schema-fleet");
    let store = dir.store("fleet.db");
    let agents = agents();

    // Version 1 writes every agent, its change log on (where the migrations are counted).
    let setup = {
        let store = store.clone();
        let setup_options = opts(json!({
            "schema_version": 1,
            "synchronous": "normal",
            "busy_timeout_ms": 120_000,
            "max_connections": 16,
            "change_log": {"keep_last": 100}
        }));
        fleet((0..agents).collect(), move |i| {
            let a = agent(&store, i, &setup_options);
            a.set_state(json!({"id": i, "w": {}}).to_string().as_bytes())
                .unwrap();
            a.close().unwrap();
        })
    };
    for t in setup {
        t.join().unwrap();
    }

    let seen = Arc::new(Mutex::new(vec![Seen::default(); agents]));
    // Both outcomes, whatever the threads' pace: agent 0 is written before version 2 starts,
    // the last agent migrated before version 1's roll-out writes start.
    v1_writes(&store, 0, "first", &seen);
    v2_reads(&store, agents - 1);

    // Version 1 goes on writing from the first agent up; two programs of version 2 read from
    // the last agent down, over the same agents, at once.
    let start = Arc::new(Barrier::new(3 * THREADS));
    let mut threads = Vec::new();
    {
        let (store, seen, start) = (store.clone(), seen.clone(), start.clone());
        threads.extend(fleet((0..agents).collect(), move |i| {
            if i < THREADS {
                start.wait();
            }
            v1_writes(&store, i, "w", &seen);
        }));
    }
    for _program in 0..2 {
        let (store, start) = (store.clone(), start.clone());
        threads.extend(fleet((0..agents).rev().collect(), move |i| {
            if i >= agents - THREADS {
                start.wait();
            }
            v2_reads(&store, i);
        }));
    }
    for t in threads {
        t.join().unwrap();
    }

    // Every agent: upgraded once; every write version 1 had committed is there, before the
    // migration; every refused one came after it.
    let seen = seen.lock().unwrap();
    assert!(
        !seen[0].committed.is_empty(),
        "agent 0 was written before version 2 started"
    );
    assert_eq!(
        seen[agents - 1].refused,
        WRITES,
        "the last agent was migrated before"
    );
    let checks = {
        let (store, seen) = (store.clone(), Arc::new(seen.clone()));
        fleet((0..agents).collect(), move |i| {
            let a = agent(&store, i, &v2_options());
            let read = a.get_state_versioned().unwrap();
            let state: Value = serde_json::from_slice(read.state.json()).unwrap();
            assert_eq!(state["messages"], json!([]), "agent {i}: {state}");
            let written: BTreeSet<&str> = state["w"]
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            let committed: BTreeSet<&str> = seen[i].committed.iter().map(String::as_str).collect();
            assert_eq!(
                written, committed,
                "agent {i}: every committed write, and only those"
            );

            let log: Value = serde_json::from_slice(&a.changes_since(0).unwrap()).unwrap();
            let log = log.as_array().unwrap();
            let migrations: Vec<&Value> = log
                .iter()
                .filter(|e| !e["migrated_from"].is_null())
                .collect();
            assert_eq!(migrations.len(), 1, "agent {i}: migrated once: {log:?}");
            let migration = migrations[0];
            assert_eq!(migration["migrated_from"], 1, "agent {i}");
            assert_eq!(migration["schema"], 2, "agent {i}");
            let at = migration["version"].as_u64().unwrap();
            for entry in log {
                let version = entry["version"].as_u64().unwrap();
                let expected = if version < at { 1 } else { 2 };
                assert_eq!(entry["schema"], expected, "agent {i}: {entry}");
            }
            // 1 (the set-up) + the committed writes + the migration: nothing else was written.
            assert_eq!(read.version, 1 + committed.len() as u64 + 1, "agent {i}");
            assert_eq!(log.len() as u64, read.version, "agent {i}");
            a.close().unwrap();
        })
    };
    for t in checks {
        t.join().unwrap();
    }
}
