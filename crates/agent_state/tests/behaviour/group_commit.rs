//! Group commit on SQLite (`synchronous: full`): writers on their own handles share the WAL's
//! syncs; every write is acknowledged once, with its own version, and none is lost. (That an
//! acknowledged write survives power loss is tests/powercut's.)

use std::collections::BTreeSet;

use agent_state::Agent;
use serde_json::{json, Value};

use test_support::{opts, sqlite_only, TempDir};

#[test]
fn concurrent_durable_writers_each_get_their_own_version_and_keep_every_write() {
    sqlite_only!("SQLite's group commit");
    const THREADS: usize = 8;
    const WRITES: usize = 40;
    let dir = TempDir::new("group_commit");
    let path = dir.file("a.db");
    let options = opts(json!({"synchronous": "full"}));
    let handles: Vec<Agent> = (0..THREADS)
        .map(|_| Agent::open_with(&path, &options).unwrap())
        .collect();
    let versions: Vec<Vec<u64>> = std::thread::scope(|s| {
        let running: Vec<_> = handles
            .iter()
            .enumerate()
            .map(|(t, h)| {
                s.spawn(move || {
                    (0..WRITES)
                        .map(|i| {
                            let patch = json!({ format!("t{t}"): {format!("w{i}"): i} });
                            h.set_state_if(patch.to_string().as_bytes(), None)
                                .unwrap()
                                .version
                        })
                        .collect()
                })
            })
            .collect();
        running.into_iter().map(|r| r.join().unwrap()).collect()
    });
    let all: BTreeSet<u64> = versions.iter().flatten().copied().collect();
    assert_eq!(all.len(), THREADS * WRITES, "a version acknowledged twice");
    assert_eq!(all, (1..=(THREADS * WRITES) as u64).collect());
    for v in &versions {
        assert!(
            v.windows(2).all(|w| w[0] < w[1]),
            "each writer's versions grow"
        );
    }
    let reader = Agent::open_with(&path, &options).unwrap();
    let state: Value = serde_json::from_slice(reader.get_state().unwrap().json()).unwrap();
    for t in 0..THREADS {
        assert_eq!(state[format!("t{t}")].as_object().unwrap().len(), WRITES);
    }
}
