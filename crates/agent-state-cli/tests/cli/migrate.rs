//! migrate: every agent of a store upgraded to a schema version by declarative steps, on SQLite
//! files and, when AGENT_STATE_TEST_PG_URI names a server, on PostgreSQL too (the agents of a
//! PostgreSQL run under an id prefix of their own, which `migrate --prefix` selects).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agent_state::Agent;
use serde_json::{json, Value};

use crate::{arg, opts, run, Run, TempDir, BIN};

/// How many agents the tests' stores hold.
const AGENTS: usize = 300;

/// The steps of version 2: `messages` added (0 -> 1), `nick` renamed `name` (1 -> 2).
const STEPS: &str = r#"[
  {"from": 0, "ops": [{"op": "default", "path": "/messages", "value": []}]},
  {"from": 1, "ops": [{"op": "rename", "path": "/user/nick", "to": "name"}]}
]"#;

/// Where one run of a test's body keeps its agents.
struct Backend {
    store: String,
    /// The prefix of this run's agent ids ("" on SQLite, where the file is the test's own).
    ns: String,
    pg: bool,
    steps: PathBuf,
}

impl Backend {
    fn path(&self) -> &Path {
        Path::new(&self.store)
    }

    fn id(&self, i: usize) -> String {
        format!("{}a{i:04}", self.ns)
    }

    /// Opens agent `i` through the library with `extra` options.
    fn open(&self, i: usize, extra: Value) -> Agent {
        let mut options = json!({
            "synchronous": "normal",
            "busy_timeout_ms": 30_000,
            "agent_id": self.id(i),
        });
        for (k, v) in extra.as_object().unwrap() {
            options[k] = v.clone();
        }
        Agent::open_with(self.path(), &opts(options)).unwrap()
    }

    /// Agents 0..AGENTS written by a program of schema version 0 (each at version 1).
    fn fill(&self) {
        self.fill_with(AGENTS, json!({}));
    }

    /// Agents 0..n written by a program of schema version 0 (each at version 1), opened with
    /// `extra` options (a `change_log` there switches each agent's log on).
    fn fill_with(&self, n: usize, extra: Value) {
        for i in 0..n {
            let agent = self.open(i, extra.clone());
            let state = format!(r#"{{"user":{{"nick":"n{i}"}}}}"#);
            agent.replace_state(state.as_bytes()).unwrap();
        }
    }

    /// Agent `i` as stored: its version, state and schema version.
    fn stored(&self, i: usize) -> (u64, Value, u32) {
        let agent = self.open(i, json!({ "read_only": true }));
        let current = agent.get_state_versioned().unwrap();
        let (state, schema) = agent.state_at_stored(current.version).unwrap();
        (
            current.version,
            serde_json::from_slice(state.json()).unwrap(),
            schema,
        )
    }

    /// `agent-state migrate STORE --to N --steps FILE` with `args`, on this run's agents.
    fn migrate(&self, to: u32, args: &[&str]) -> Run {
        let to = to.to_string();
        let mut argv = vec![
            "migrate",
            &self.store,
            "--to",
            &to,
            "--steps",
            arg(&self.steps),
            "--compact",
        ];
        if self.pg {
            argv.extend(["--prefix", &self.ns]);
        }
        argv.extend(args);
        run(&argv)
    }
}

fn backends(dir: &TempDir, name: &str) -> Vec<Backend> {
    let steps = dir.file("steps.json");
    std::fs::write(&steps, STEPS).unwrap();
    let mut all = vec![Backend {
        store: arg(&dir.file(&format!("{name}.db"))).to_string(),
        ns: String::new(),
        pg: false,
        steps: steps.clone(),
    }];
    if let Some(uri) = std::env::var("AGENT_STATE_TEST_PG_URI")
        .ok()
        .filter(|u| !u.is_empty())
    {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        all.push(Backend {
            store: uri,
            ns: format!("cli_{name}_{}_{nanos}/", std::process::id()),
            pg: true,
            steps,
        });
    }
    all
}

fn summary(r: &Run) -> Value {
    serde_json::from_str(r.stdout().trim()).unwrap_or_else(|e| panic!("{e}: {r:?}"))
}

fn counts(s: &Value) -> (u64, u64, u64) {
    (
        s["migrated"].as_u64().unwrap(),
        s["current"].as_u64().unwrap(),
        s["failed"].as_u64().unwrap(),
    )
}

fn migrated_state(i: usize) -> Value {
    json!({ "user": { "name": format!("n{i}") }, "messages": [] })
}

#[test]
fn a_store_at_version_0_migrates_to_2_and_a_rerun_finds_all_current() {
    let dir = TempDir::new("cli-migrate");
    for b in backends(&dir, "all") {
        b.fill();
        let first = b.migrate(2, &["--batch", "64"]);
        let s = summary(&first);
        first.ok();
        assert_eq!(counts(&s), (AGENTS as u64, 0, 0), "{first:?}");
        assert_eq!(s["interrupted"], Value::Null);
        assert!(
            first.stderr.contains(&format!("{AGENTS}/{AGENTS} agents")),
            "{first:?}"
        );
        for i in 0..AGENTS {
            // One migration each: version 1 + 1, under schema 2.
            assert_eq!(b.stored(i), (2, migrated_state(i), 2), "agent {i}");
        }
        let again = b.migrate(2, &[]);
        again.ok();
        assert_eq!(counts(&summary(&again)), (0, AGENTS as u64, 0), "{again:?}");
        for i in 0..AGENTS {
            assert_eq!(b.stored(i).0, 2, "agent {i} written again");
        }
    }
}

#[test]
fn a_dry_run_writes_nothing_and_shows_a_sample() {
    let dir = TempDir::new("cli-migrate-dry");
    for b in backends(&dir, "dry") {
        b.fill();
        let r = b.migrate(2, &["--dry-run", "--sample", "2"]);
        r.ok();
        let s = summary(&r);
        assert_eq!(counts(&s), (AGENTS as u64, 0, 0), "{r:?}");
        assert_eq!(s["dry_run"], true);
        let sample = s["sample"].as_array().unwrap();
        assert_eq!(sample.len(), 2);
        assert_eq!(sample[0]["id"], b.id(0));
        assert_eq!(sample[0]["from"], 0);
        assert_eq!(sample[0]["before"], json!({ "user": { "nick": "n0" } }));
        assert_eq!(sample[0]["after"], migrated_state(0));
        assert_eq!(
            sample[0]["patch"],
            json!({ "user": { "nick": null, "name": "n0" }, "messages": [] })
        );
        for i in 0..AGENTS {
            assert_eq!(
                b.stored(i),
                (1, json!({ "user": { "nick": format!("n{i}") } }), 0)
            );
        }
    }
}

#[test]
fn an_agent_of_a_newer_schema_fails_and_is_left_alone() {
    let dir = TempDir::new("cli-migrate-newer");
    for b in backends(&dir, "newer") {
        for i in [0, 2] {
            b.open(i, json!({}))
                .replace_state(br#"{"user":{"nick":"x"}}"#)
                .unwrap();
        }
        b.open(1, json!({ "schema_version": 3 }))
            .replace_state(br#"{"v3":true}"#)
            .unwrap();
        let r = b.migrate(2, &[]);
        // The progress line comes first on stderr, then the failure.
        assert_eq!(r.code, crate::exit_code("AGENT_ERR_NEWER_SCHEMA"), "{r:?}");
        r.says(&format!(
            "\nagent-state: AGENT_ERR_NEWER_SCHEMA: migrate: 1 of 3 agents failed (left as they \
             were); the first, {:?}",
            b.id(1)
        ));
        let s = summary(&r);
        assert_eq!(counts(&s), (2, 0, 1), "{r:?}");
        assert_eq!(s["failures"][0]["id"], b.id(1));
        assert_eq!(s["failures"][0]["status"], "AGENT_ERR_NEWER_SCHEMA");
        assert_eq!(b.stored(1), (1, json!({ "v3": true }), 3));
        assert_eq!(b.stored(0).2, 2);
        assert_eq!(b.stored(2).2, 2);

        // `get` declaring an older version refuses it, in words that say what to do.
        let mut get = vec!["get", &b.store, "--schema-version", "2"];
        let id = b.id(1);
        get.extend(["--agent", &id]);
        run(&get)
            .failed("AGENT_ERR_NEWER_SCHEMA")
            .says("stored under schema version 3")
            .says("--schema-version");
    }
}

#[test]
fn a_bad_steps_file_is_refused_before_anything_is_done() {
    let dir = TempDir::new("cli-migrate-bad");
    for b in backends(&dir, "bad") {
        b.open(0, json!({})).replace_state(br#"{"a":1}"#).unwrap();
        for (text, says) in [
            ("{\"from\": 0}", "expected a JSON array of steps"),
            (
                "[{\"from\": 0, \"ops\": [{\"op\": \"frob\"}]}]",
                "unknown op \"frob\"",
            ),
            (
                "[{\"from\": 2, \"ops\": []}]",
                "upgrades past schema_version 2",
            ),
            ("[", "not JSON"),
        ] {
            std::fs::write(&b.steps, text).unwrap();
            b.migrate(2, &[])
                .failed("AGENT_ERR_INVALID_ARGUMENT")
                .says("--steps")
                .says(says);
        }
        std::fs::write(&b.steps, STEPS).unwrap();
        assert_eq!(b.stored(0).0, 1, "nothing written");
    }
}

/// Holds back every write to agent `i` (SQLite: the file's write lock; PostgreSQL: the
/// agent's row) until dropped.
enum Holder {
    Sqlite(rusqlite::Connection),
    Pg(Box<dyn FnOnce()>),
}

fn hold_writes(b: &Backend, i: usize) -> Holder {
    if b.pg {
        let (locked, unlock) = mpsc::channel::<()>();
        let (release, released) = mpsc::channel::<()>();
        let uri = b.store.clone();
        let id = b.id(i);
        thread::spawn(move || {
            let mut client = test_support::server_client(&uri);
            let mut txn = client.transaction().unwrap();
            let n = txn
                .execute(
                    "SELECT 1 FROM agent_state WHERE agent = $1 FOR UPDATE",
                    &[&id],
                )
                .unwrap();
            assert_eq!(n, 1);
            locked.send(()).unwrap();
            let _ = released.recv();
            txn.rollback().unwrap();
        });
        unlock.recv().unwrap();
        Holder::Pg(Box::new(move || {
            let _ = release.send(());
        }))
    } else {
        let conn = rusqlite::Connection::open(b.path()).unwrap();
        conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        Holder::Sqlite(conn)
    }
}

impl Holder {
    fn release(self) {
        match self {
            Holder::Sqlite(conn) => conn.execute_batch("ROLLBACK").unwrap(),
            Holder::Pg(release) => release(),
        }
    }
}

/// An interrupted run stops after the agent it was migrating, with a summary and exit 130; the
/// next run migrates the rest: every agent is migrated exactly once.
///
/// Without sleeps: the first 10 agents are already at version 2 (reading them writes nothing),
/// and the test holds back writes to agent 10. The run reports the first batch of 10 done and
/// goes on to agent 10, where it waits; the test sends SIGINT once it reads that line, then
/// lets the write through.
#[test]
fn an_interrupted_run_resumes_and_migrates_each_agent_once() {
    let dir = TempDir::new("cli-migrate-int");
    for b in backends(&dir, "int") {
        b.fill();
        let v2 = json!({ "schema_version": 2, "schema_steps": serde_json::from_str::<Value>(STEPS).unwrap() });
        for i in 0..10 {
            b.open(i, v2.clone()).get_state().unwrap();
        }
        let holder = hold_writes(&b, 10);
        let mut argv = vec![
            "migrate".to_string(),
            b.store.clone(),
            "--to".into(),
            "2".into(),
            "--steps".into(),
            arg(&b.steps).into(),
            "--batch".into(),
            "10".into(),
            "--busy-timeout-ms".into(),
            "60000".into(),
            "--compact".into(),
        ];
        if b.pg {
            argv.extend(["--prefix".into(), b.ns.clone()]);
        }
        let mut child = Command::new(BIN)
            .args(&argv)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = BufReader::new(child.stderr.take().unwrap());
        let (send, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in stderr.lines() {
                let Ok(line) = line else { return };
                if send.send(line).is_err() {
                    return;
                }
            }
        });
        let mut seen = Vec::new();
        loop {
            let line = lines
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|e| panic!("no progress line ({e}): {seen:?}"));
            seen.push(line.clone());
            if line.starts_with("agent-state migrate: 10/") {
                break;
            }
        }
        let status = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        holder.release();
        let output = child.wait_with_output().unwrap();
        let rest: Vec<String> = lines.iter().collect();
        let stdout = String::from_utf8(output.stdout).unwrap();
        assert_eq!(output.status.code(), Some(130), "{stdout} {rest:?}");
        let s: Value = serde_json::from_str(stdout.trim()).unwrap();
        assert_eq!(s["interrupted"], "SIGINT");
        // The progress line is printed before the run starts on agent 10, so the signal finds
        // it either waiting on agent 10 (which it finishes: one migrated, the last done) or
        // just before it (none migrated, agent 9 the last done). Either way it stops there.
        let first = match counts(&s) {
            (1, 10, 0) => {
                assert_eq!(s["last"], b.id(10), "{s}");
                1
            }
            (0, 10, 0) => {
                assert_eq!(s["last"], b.id(9), "{s}");
                0
            }
            other => panic!("stopped with {other:?}, not after agent 9 or 10: {s}"),
        };
        assert!(
            rest.iter().any(|l| l.contains("interrupted by SIGINT")),
            "{rest:?}"
        );

        let resumed = b.migrate(2, &[]);
        resumed.ok();
        assert_eq!(
            counts(&summary(&resumed)),
            (AGENTS as u64 - 10 - first, 10 + first, 0),
            "{resumed:?}"
        );
        for i in 0..AGENTS {
            // Each agent: written once at version 1, migrated once (+1), never twice.
            assert_eq!(b.stored(i), (2, migrated_state(i), 2), "agent {i}");
        }
    }
}

/// Two `migrate` processes started at once over the same agents: each agent is migrated by
/// exactly one of them (the library applies a migration once even with concurrent migrators;
/// the one that finds it done counts the agent as current), both succeed, and every agent ends
/// one version on, upgraded, with one migration entry in its change log.
#[test]
fn two_concurrent_runs_migrate_each_agent_exactly_once() {
    const N: usize = 400;
    let dir = TempDir::new("cli-migrate-two");
    for b in backends(&dir, "two") {
        b.fill_with(N, json!({ "change_log": { "keep_last": 100 } }));
        let mut argv = vec![
            "migrate".to_string(),
            b.store.clone(),
            "--to".into(),
            "2".into(),
            "--steps".into(),
            arg(&b.steps).into(),
            "--batch".into(),
            "50".into(),
            "--busy-timeout-ms".into(),
            "120000".into(),
            "--compact".into(),
        ];
        if b.pg {
            argv.extend(["--prefix".into(), b.ns.clone()]);
        }
        // Both started before either is waited for; each waited for on a thread of its own so
        // that neither blocks on a full pipe while the other is waited for.
        let children: Vec<_> = (0..2)
            .map(|_| {
                Command::new(BIN)
                    .args(&argv)
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let waiters: Vec<_> = children
            .into_iter()
            .map(|child| thread::spawn(move || child.wait_with_output().unwrap()))
            .collect();
        let summaries: Vec<Value> = waiters
            .into_iter()
            .map(|w| {
                let output = w.join().unwrap();
                let stdout = String::from_utf8(output.stdout).unwrap();
                let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
                assert_eq!(output.status.code(), Some(0), "{stdout} {stderr}");
                serde_json::from_str(stdout.trim())
                    .unwrap_or_else(|e| panic!("{e}: {stdout} {stderr}"))
            })
            .collect();
        let mut migrated = 0;
        for s in &summaries {
            let (m, c, f) = counts(s);
            assert_eq!(
                (m + c, f),
                (N as u64, 0),
                "every agent seen once, none failed: {s}"
            );
            assert_eq!(s["interrupted"], Value::Null, "{s}");
            migrated += m;
        }
        assert_eq!(
            migrated, N as u64,
            "each agent migrated by exactly one run: {summaries:?}"
        );
        for i in 0..N {
            // Written once at version 1, migrated once (+1), under schema 2.
            assert_eq!(b.stored(i), (2, migrated_state(i), 2), "agent {i}");
            let agent = b.open(i, json!({ "read_only": true }));
            let log: Value = serde_json::from_slice(&agent.changes_since(0).unwrap()).unwrap();
            let migrations: Vec<(u64, u64, u64)> = log
                .as_array()
                .unwrap()
                .iter()
                .filter(|c| !c["migrated_from"].is_null())
                .map(|c| {
                    (
                        c["version"].as_u64().unwrap(),
                        c["schema"].as_u64().unwrap(),
                        c["migrated_from"].as_u64().unwrap(),
                    )
                })
                .collect();
            assert_eq!(migrations, vec![(2, 2, 0)], "agent {i}: {log}");
        }
    }
}
