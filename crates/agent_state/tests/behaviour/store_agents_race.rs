//! Deletion and expiry racing writers in other processes, on either backend (`#[each_backend]`,
//! crates/test-support): the writers are this test binary run again as child processes
//! (`race_child`), each acknowledging its writes on stdout; the parent deletes (or expires)
//! the agent meanwhile. Afterwards the state must be exactly the writes acknowledged after
//! the last deletion: none torn, none of an acknowledged write ordered after a deletion lost,
//! and none from before one left.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use agent_state::{delete_agent, expire_agents, OpenOptions};
use serde_json::{json, Value};

use test_support::{each_backend, open, opts, test_name, Place, TempDir};

const WRITERS: usize = 3;
const WRITES: usize = 150;

/// The child's part: writes `WRITES` merges to the agent of the place in its environment and
/// prints `ACK <key> <version>` once each is acknowledged. A no-op in an ordinary test run.
#[test]
fn race_child() {
    let Ok(spec) = std::env::var("AGENT_STATE_RACE_CHILD") else {
        return;
    };
    let spec: Value = serde_json::from_str(&spec).unwrap();
    let place = match spec["kind"].as_str().unwrap() {
        "sqlite" => Place::Sqlite {
            path: PathBuf::from(spec["path"].as_str().unwrap()),
            agent: Some(spec["agent"].as_str().unwrap().to_string()),
        },
        _ => Place::Postgres {
            uri: spec["path"].as_str().unwrap().to_string(),
            agent: spec["agent"].as_str().unwrap().to_string(),
        },
    };
    let writer = spec["writer"].as_u64().unwrap();
    let pause = Duration::from_millis(spec["pause_ms"].as_u64().unwrap_or(0));
    let a = open(&place, &opts(json!({"busy_timeout_ms": 30_000}))).unwrap();
    for i in 0..WRITES {
        let key = format!("w{writer}_{i}");
        let v = a
            .set_state_if(format!(r#"{{"{key}":true}}"#).as_bytes(), None)
            .unwrap();
        println!("ACK {key} {}", v.version);
        std::thread::sleep(pause);
    }
}

struct Race {
    place: Place,
    path: PathBuf,
    id: String,
    /// How long each writer pauses after each write (so that the agent is sometimes idle).
    pause_ms: u64,
}

impl Race {
    fn new(dir: &TempDir) -> Race {
        let place = dir.store("race.db").agent("contended");
        let (path, id) = match &place {
            Place::Sqlite { path, agent } => (path.clone(), agent.clone().unwrap()),
            Place::Postgres { uri, agent } => (PathBuf::from(uri), agent.clone()),
        };
        // The store exists before the first deletion or expiry looks at it.
        drop(open(&place, &opts(json!({}))).unwrap());
        Race {
            place,
            path,
            id,
            pause_ms: 0,
        }
    }

    fn spawn(&self, writer: usize) -> std::process::Child {
        let kind = if matches!(self.place, Place::Sqlite { .. }) {
            "sqlite"
        } else {
            "postgres"
        };
        let spec = json!({
            "kind": kind, "path": self.path, "agent": self.id, "writer": writer,
            "pause_ms": self.pause_ms,
        });
        Command::new(std::env::current_exe().unwrap())
            .args(["--exact", test_name(module_path!(), "race_child").as_str()])
            .args(["--nocapture", "--test-threads=1"])
            .env("AGENT_STATE_RACE_CHILD", spec.to_string())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Runs the writers while `remove` runs in a loop on this thread (returning the versions it
    /// deleted); then checks the state against what was acknowledged.
    fn run(&self, mut remove: impl FnMut() -> Vec<u64>) {
        let mut children: Vec<_> = (0..WRITERS).map(|w| self.spawn(w)).collect();
        let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let readers: Vec<_> = children
            .iter_mut()
            .map(|c| {
                let out = c.stdout.take().unwrap();
                let seen = seen.clone();
                std::thread::spawn(move || {
                    BufReader::new(out)
                        .lines()
                        .map_while(|l| l.ok())
                        .filter_map(|l| {
                            // (The harness's "test race_child ... " may start the first line.)
                            let rest = l.split_once("ACK ")?.1.to_string();
                            let (key, v) = rest.split_once(' ')?;
                            seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            Some((key.to_string(), v.parse::<u64>().unwrap()))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        // Deletions while two thirds of the writes are acknowledged; the rest come after the
        // last one, and must all be there.
        let mut deleted = Vec::new();
        while seen.load(std::sync::atomic::Ordering::Relaxed) < WRITERS * WRITES * 2 / 3
            && readers.iter().any(|r| !r.is_finished())
        {
            deleted.extend(remove());
            std::thread::sleep(Duration::from_millis(1));
        }
        for mut c in children {
            assert!(c.wait().unwrap().success(), "a writer failed");
        }
        let acked: Vec<(String, u64)> = readers
            .into_iter()
            .flat_map(|r| r.join().unwrap())
            .collect();
        assert_eq!(
            acked.len(),
            WRITERS * WRITES,
            "every write was acknowledged"
        );
        let last = deleted.iter().copied().max().unwrap_or(0);
        let state = open(&self.place, &opts(json!({})))
            .unwrap()
            .get_state()
            .unwrap();
        let state: Value = serde_json::from_str(&test_support::text(&state)).unwrap();
        let present: BTreeSet<String> = state.as_object().unwrap().keys().cloned().collect();
        let expected: BTreeSet<String> = acked
            .iter()
            .filter(|(_, v)| *v > last)
            .map(|(k, _)| k.clone())
            .collect();
        println!(
            "{} writes, {} deletions (last at version {last}), {} keys after it",
            acked.len(),
            deleted.len(),
            expected.len()
        );
        assert!(
            !deleted.is_empty(),
            "no deletion happened during the writes"
        );
        assert_eq!(
            present, expected,
            "the state is not the writes acknowledged after the last deletion"
        );
        // Versions never came back: each writer's versions only grew.
        for w in 0..WRITERS {
            let mine: Vec<u64> = acked
                .iter()
                .filter(|(k, _)| k.starts_with(&format!("w{w}_")))
                .map(|(_, v)| *v)
                .collect();
            assert!(
                mine.windows(2).all(|p| p[0] < p[1]),
                "writer {w}: {mine:?}; deletions at {deleted:?}"
            );
        }
    }
}

/// The two races run one after the other: on PostgreSQL the expiry (idle for 0 s) takes every
/// agent of the test database written before it, the other race's too.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn options() -> OpenOptions {
    opts(json!({"busy_timeout_ms": 30_000}))
}

#[each_backend]
fn a_deletion_racing_writers_in_other_processes_loses_no_acknowledged_later_write() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let dir = TempDir::new("race_delete");
    let race = Race::new(&dir);
    race.run(|| {
        delete_agent(&race.path, &options(), &race.id, None)
            .unwrap()
            .into_iter()
            .collect()
    });
}

// On the whole store: on PostgreSQL the expiry would take the agents of the tests running beside
// it in this process too.
#[each_backend(whole_store)]
fn expiry_racing_writers_in_other_processes_deletes_no_agent_written_during_it() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let dir = TempDir::new("race_expire");
    // Writers that pause after each write: expiry (idle for 0 s) then finds the agent idle
    // now and then, between writes that race it.
    let race = Race {
        pause_ms: 20,
        ..Race::new(&dir)
    };
    race.run(|| {
        // Idle for 0 s: whatever was written before the call (on PostgreSQL, the agents other
        // tests left in the database too, the longest idle first: the largest batch gets past
        // them; only this one's count here).
        let got = expire_agents(&race.path, &options(), Duration::ZERO, 10_000, false).unwrap();
        got.into_iter()
            .filter(|e| e.id == race.id)
            .map(|e| e.version)
            .collect()
    });
}
