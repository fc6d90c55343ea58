//! Failover: a primary and a streaming standby (tests/pg/server.sh), reached through one
//! multi-host URI with `target_session_attrs=read-write`. The primary is stopped at once
//! (`-m immediate`: a crash) and the standby promoted, while writers in several processes
//! commit with `synchronous: full`:
//! - with synchronous replication, every acknowledged write is on the new primary; each write
//!   whose outcome was unknown is resolved by reading the state; a write that failed
//!   otherwise is not there; the writers carry on without reopening; the old primary,
//!   restarted (writable, as a crashed primary comes back), gets no write from them;
//! - with asynchronous replication, what the standby had not received is lost, and the run
//!   says how much; no handle then serves the lost state from its cache, compare-and-set
//!   against a lost version fails, and a version number written again after the loss is not
//!   mistaken for the lost one.
//!
//! Its own servers (two per test, on Unix sockets in private directories), so it runs beside
//! the other suites. `AGENT_STATE_FAILOVER_WRITES` (default 20) sets how many writes each
//! writer must acknowledge in each phase (`make soak` runs it longer).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_state::{Agent, Error, OpenOptions};
use serde_json::{json, Value};
use test_support::test_name;

const CHILD: &str = "AGENT_STATE_TEST_FAILOVER_WRITER";
const WRITERS: usize = 3;

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/pg/server.sh")
}

fn writes_per_phase() -> usize {
    std::env::var("AGENT_STATE_FAILOVER_WRITES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20)
}

/// A primary and its standby, stopped and removed when dropped.
struct Pair {
    primary: String,
    standby: String,
}

fn server(args: &[&str]) -> Output {
    Command::new("bash")
        .arg(script())
        .args(args)
        .env("AGENT_STATE_PG_PORT", "5432")
        .output()
        .unwrap()
}

fn must(args: &[&str]) -> String {
    let out = server(args);
    assert!(
        out.status.success(),
        "server.sh {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

impl Pair {
    /// Both servers, the standby streaming from the primary; `None` (skipped) without
    /// PostgreSQL outside CI.
    fn start(name: &str, synchronous: bool) -> Option<Pair> {
        // `make check` runs with no server and starts none (no root, no PostgreSQL needed).
        if std::env::var_os("AGENT_STATE_TEST_NO_SERVERS").is_some() {
            eprintln!("skipped: AGENT_STATE_TEST_NO_SERVERS is set (make check starts no server)");
            return None;
        }
        let base = format!("/tmp/agent-state-{name}-{}", std::process::id());
        let pair = Pair {
            primary: format!("{base}-primary"),
            standby: format!("{base}-standby"),
        };
        let out = server(&["start", &pair.primary]);
        if !out.status.success() {
            let message = String::from_utf8_lossy(&out.stderr).to_string();
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "cannot start a server: {message}"
            );
            eprintln!("skipped: cannot start a server: {message}");
            return None;
        }
        must(&["standby", &pair.primary, &pair.standby]);
        // After the base backup, so the standby does not inherit it (promoted, it would wait
        // for a standby of its own that never comes).
        must(&[
            "sync",
            &pair.primary,
            if synchronous { "on" } else { "off" },
        ]);
        must(&["caught-up", &pair.primary]);
        Some(pair)
    }

    /// Both hosts, the primary first; only a writable one takes a connection.
    fn uri(&self) -> String {
        crate::in_exec_mode(format!(
            "postgresql:///postgres?host={},{}&port=5432&user=postgres&target_session_attrs=read-write",
            self.primary, self.standby
        ))
    }

    fn direct(dir: &str) -> postgres::Client {
        postgres::Client::connect(
            &format!("host={dir} port=5432 user=postgres dbname=postgres"),
            postgres::NoTls,
        )
        .unwrap()
    }

    /// The agent's stored state and version on the server in `dir`, behind the library's back.
    fn stored(dir: &str, agent: &str) -> (Value, i64) {
        let row = Pair::direct(dir)
            .query_opt(
                "SELECT value, version FROM agent_state WHERE agent = $1",
                &[&agent],
            )
            .unwrap();
        match row {
            None => (json!({}), 0),
            Some(r) => (
                r.get::<_, Option<String>>(0)
                    .map_or(json!({}), |v| serde_json::from_str(&v).unwrap()),
                r.get(1),
            ),
        }
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        server(&["stop", &self.primary]);
        server(&["stop", &self.standby]);
    }
}

fn open(uri: &str, agent: &str) -> Agent {
    let options = OpenOptions::from_json(
        json!({
            "agent_id": agent,
            "synchronous": "full",
            "busy_timeout_ms": 2000,
            "server_timeout_ms": 3000,
            "change_log": {"keep_last": 1_000_000},
        })
        .to_string()
        .as_bytes(),
    )
    .unwrap();
    Agent::open_with(Path::new(uri), &options).unwrap()
}

/// What a writer reported of one write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Acknowledged,
    Unknown,
    /// Failed with Unavailable (not "outcome unknown") or Busy: nothing written.
    Failed,
}

/// A writer process's reports: (write number, outcome), in order.
type Reports = Arc<Mutex<Vec<(usize, Outcome)>>>;

/// The writer, in a child process: merges `{"w<W>_<i>": i}` into the shared agent for i = 0,
/// 1, ... until the stop file exists, reporting each outcome on stdout.
fn writer(spec: &str) {
    let mut parts = spec.splitn(4, '|');
    let (uri, agent, w, stop) = (
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap(),
    );
    let a = open(uri, agent);
    for i in 0.. {
        if Path::new(stop).exists() {
            break;
        }
        let outcome = match a.set_state(format!(r#"{{"w{w}_{i}":{i}}}"#).as_bytes()) {
            Ok(_) => "ack",
            Err(Error::Unavailable(m)) if m.contains("outcome is unknown") => "unknown",
            Err(Error::Unavailable(_) | Error::Busy(_)) => "failed",
            Err(e) => panic!("write {i}: unexpected {e}"),
        };
        println!("{outcome} {i}");
        if outcome != "ack" {
            // The servers are changing over: no need to spin.
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn spawn_writer(
    uri: &str,
    agent: &str,
    w: usize,
    stop: &str,
) -> (Child, Reports, std::thread::JoinHandle<()>) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            test_name(
                module_path!(),
                "synchronous_replication_loses_no_acknowledged_write_across_a_failover",
            )
            .as_str(),
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, format!("{uri}|{agent}|{w}|{stop}"))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let reports: Reports = Arc::default();
    let out = child.stdout.take().unwrap();
    let sink = reports.clone();
    let reading = std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let line = line.unwrap();
            // The last two words: the test harness may have begun the line ("test NAME ...").
            let mut words = line.split_whitespace().rev();
            let (Some(i), Some(what)) = (words.next(), words.next()) else {
                continue;
            };
            let Ok(i) = i.parse() else { continue };
            let outcome = match what {
                "ack" => Outcome::Acknowledged,
                "unknown" => Outcome::Unknown,
                "failed" => Outcome::Failed,
                _ => continue,
            };
            sink.lock().unwrap().push((i, outcome));
        }
    });
    (child, reports, reading)
}

/// Waits until `done` holds for every writer's reports (a condition, not a time: the bound
/// only ends a run that would hang).
fn wait_for(what: &str, writers: &[Reports], done: impl Fn(&[(usize, Outcome)]) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(300);
    while !writers.iter().all(|r| done(&r.lock().unwrap())) {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn count(reports: &[(usize, Outcome)], from: usize, outcome: Outcome) -> usize {
    reports[from.min(reports.len())..]
        .iter()
        .filter(|(_, o)| *o == outcome)
        .count()
}

#[test]
fn synchronous_replication_loses_no_acknowledged_write_across_a_failover() {
    if let Ok(spec) = std::env::var(CHILD) {
        writer(&spec);
        return;
    }
    let Some(pair) = Pair::start("failover-sync", true) else {
        return;
    };
    let n = writes_per_phase();
    let uri = pair.uri();
    let agent = "shared";
    let stop = format!("{}-stop", pair.primary);
    let mut children = Vec::new();
    let mut writers = Vec::new();
    let mut readers = Vec::new();
    for w in 0..WRITERS {
        let (child, reports, reading) = spawn_writer(&uri, agent, w, &stop);
        children.push(child);
        writers.push(reports);
        readers.push(reading);
    }

    wait_for("the first writes", &writers, |r| {
        count(r, 0, Outcome::Acknowledged) >= n
    });
    let at_kill: Vec<usize> = writers.iter().map(|r| r.lock().unwrap().len()).collect();
    must(&["kill", &pair.primary]);
    // Every writer has seen the primary go before the standby takes over.
    let noticed = |r: &[(usize, Outcome)], from: usize| {
        count(r, from, Outcome::Failed) + count(r, from, Outcome::Unknown) > 0
    };
    let deadline = Instant::now() + Duration::from_secs(300);
    while !writers
        .iter()
        .zip(&at_kill)
        .all(|(r, &from)| noticed(&r.lock().unwrap(), from))
    {
        assert!(
            Instant::now() < deadline,
            "the writers did not notice the crash"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    must(&["promote", &pair.standby]);
    let promoted = Instant::now();
    let at_promote: Vec<usize> = writers.iter().map(|r| r.lock().unwrap().len()).collect();
    let resumed: Vec<Duration> = writers
        .iter()
        .zip(&at_promote)
        .map(|(r, &from)| {
            let deadline = Instant::now() + Duration::from_secs(300);
            while count(&r.lock().unwrap(), from, Outcome::Acknowledged) == 0 {
                assert!(Instant::now() < deadline, "a writer did not resume");
                std::thread::sleep(Duration::from_millis(5));
            }
            promoted.elapsed()
        })
        .collect();
    wait_for("writes on the new primary", &writers, |r| {
        count(r, 0, Outcome::Acknowledged) >= 2 * n
    });

    // The old primary comes back as it was: writable. No writer goes back to it.
    must(&["restart", &pair.primary]);
    // Without a standby of its own to wait for, so a write sent there would show.
    must(&["sync", &pair.primary, "off"]);
    let (_, old_version) = Pair::stored(&pair.primary, agent);
    // And the writers' connections to the new primary end (as when a pooler or a network
    // blip drops them): they connect again, and must not go back to the first host.
    Pair::direct(&pair.standby)
        .execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()",
            &[],
        )
        .unwrap();
    wait_for("writes after the old primary's return", &writers, |r| {
        count(r, 0, Outcome::Acknowledged) >= 3 * n
    });
    std::fs::write(&stop, b"").unwrap();
    for child in &mut children {
        assert!(child.wait().unwrap().success());
    }
    let _ = std::fs::remove_file(&stop);
    for reading in readers {
        reading.join().unwrap();
    }
    assert_eq!(Pair::stored(&pair.primary, agent).1, old_version);

    let (state, version) = Pair::stored(&pair.standby, agent);
    let present = |w: usize, i: usize| state.get(format!("w{w}_{i}")).is_some();
    let (mut acked, mut unknown_in, mut unknown_out, mut failed) = (0, 0, 0, 0);
    for (w, reports) in writers.iter().enumerate() {
        for &(i, outcome) in reports.lock().unwrap().iter() {
            match outcome {
                Outcome::Acknowledged => {
                    assert!(present(w, i), "acknowledged write w{w}_{i} was lost");
                    acked += 1;
                }
                Outcome::Unknown if present(w, i) => unknown_in += 1,
                Outcome::Unknown => unknown_out += 1,
                Outcome::Failed => {
                    assert!(!present(w, i), "w{w}_{i} failed, yet it was written");
                    failed += 1;
                }
            }
        }
    }
    // One version per committed write: nothing else was written, nothing twice (the log
    // says which write made each version).
    let logged: Vec<(i64, String)> = Pair::direct(&pair.standby)
        .query(
            "SELECT version, patch FROM agent_changes WHERE agent = $1 ORDER BY version",
            &[&agent],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get::<_, Option<String>>(1).unwrap_or_default()))
        .collect();
    let mut patches: Vec<&String> = logged.iter().map(|(_, p)| p).collect();
    patches.sort();
    for pair in patches.windows(2) {
        assert_ne!(pair[0], pair[1], "one write committed twice: {logged:?}");
    }
    let reported: std::collections::HashSet<String> = writers
        .iter()
        .enumerate()
        .flat_map(|(w, r)| {
            r.lock()
                .unwrap()
                .iter()
                .map(|(i, _)| format!("w{w}_{i}"))
                .collect::<Vec<_>>()
        })
        .collect();
    let unreported: Vec<&String> = state
        .as_object()
        .unwrap()
        .keys()
        .filter(|k| !reported.contains(*k))
        .collect();
    assert!(
        unreported.is_empty(),
        "written, never reported: {unreported:?}"
    );
    assert_eq!(version as usize, acked + unknown_in);
    assert_eq!(state.as_object().unwrap().len(), acked + unknown_in);
    eprintln!(
        "failover (synchronous replication, {WRITERS} writer processes): {acked} acknowledged, \
         0 lost; {} unknown outcomes resolved by reading the state ({unknown_in} committed, \
         {unknown_out} not); {failed} failed with nothing written; first write after the \
         promotion: {:?} ms; the restarted old primary stayed at version {old_version}",
        unknown_in + unknown_out,
        resumed.iter().map(|d| d.as_millis()).collect::<Vec<_>>()
    );
}

#[test]
fn asynchronous_replication_loses_what_the_standby_lacked_and_no_cache_hides_it() {
    let Some(pair) = Pair::start("failover-async", false) else {
        return;
    };
    let uri = pair.uri();
    let writer = open(&uri, "agent");
    let reader = open(&uri, "agent");
    // A second reader that reads nothing between the failover and the rewrite below.
    let idle = open(&uri, "agent");
    for i in 1..=5 {
        writer
            .set_state(format!(r#"{{"kept{i}":{i}}}"#).as_bytes())
            .unwrap();
    }
    must(&["caught-up", &pair.primary]);
    // The standby stops receiving; the primary, not waiting for it, acknowledges five more.
    must(&["kill", &pair.standby]);
    for i in 1..=5 {
        writer
            .set_state(format!(r#"{{"lost{i}":{i}}}"#).as_bytes())
            .unwrap();
    }
    let seen = reader.get_state_versioned().unwrap();
    assert_eq!(seen.version, 10);
    assert_eq!(idle.get_state_versioned().unwrap().version, 10);
    must(&["kill", &pair.primary]);
    must(&["restart", &pair.standby]);
    must(&["promote", &pair.standby]);

    // The reader's cache holds version 10; the server has 5.
    let now = reader.get_state_versioned().unwrap();
    let lost = seen.version - now.version;
    let state: Value = serde_json::from_slice(now.state.json()).unwrap();
    assert_eq!(now.version, 5);
    assert_eq!(
        state,
        json!({"kept1": 1, "kept2": 2, "kept3": 3, "kept4": 4, "kept5": 5})
    );
    // Compare-and-set against the lost version: the server does not have it.
    let err = writer
        .set_state_if(br#"{"cas":true}"#, Some(10))
        .unwrap_err();
    assert!(matches!(err, Error::Conflict { .. }), "{err}");
    // Versions 6 to 10 again, with other states. The reader must not take version 10 for the
    // one it had cached.
    for i in 1..=5 {
        writer
            .set_state(format!(r#"{{"again{i}":{i}}}"#).as_bytes())
            .unwrap();
    }
    let again = idle.get_state_versioned().unwrap();
    assert_eq!(
        reader.get_state_versioned().unwrap().state.json(),
        again.state.json()
    );
    assert_eq!(again.version, 10);
    let state: Value = serde_json::from_slice(again.state.json()).unwrap();
    assert!(state.get("again5").is_some(), "{state}");
    assert!(state.get("lost5").is_none(), "{state}");
    assert_eq!(
        writer.get_state_versioned().unwrap().state.json(),
        again.state.json()
    );
    eprintln!(
        "failover (asynchronous replication): {lost} acknowledged writes lost (the standby was \
         stopped before they were sent); no handle served them afterwards"
    );
}

#[test]
fn target_session_attrs_choose_the_host_as_libpq_does() {
    let Some(pair) = Pair::start("attrs", false) else {
        return;
    };
    let hosts = |attrs: &str| {
        format!(
            "postgresql:///postgres?host={},{}&port=5432&user=postgres&target_session_attrs={attrs}",
            pair.primary, pair.standby
        )
    };
    // The standby listed first, so `any` and `prefer-standby` would take it.
    let reversed = |attrs: &str| {
        format!(
            "postgresql:///postgres?host={},{}&port=5432&user=postgres&target_session_attrs={attrs}",
            pair.standby, pair.primary
        )
    };
    open(&hosts("read-write"), "attrs")
        .set_state(br#"{"on":"primary"}"#)
        .unwrap();
    must(&["caught-up", &pair.primary]);
    // The server a handle reached, asked behind its back would be circular: its writes say.
    for (more, (uri, writable)) in [
        (hosts("read-write"), true),
        (reversed("read-write"), true),
        (reversed("primary"), true),
        (hosts("any"), true),
        (reversed("any"), false),
        (hosts("read-only"), false),
        (hosts("standby"), false),
        (hosts("prefer-standby"), false),
    ]
    .into_iter()
    .enumerate()
    {
        let a = open(&uri, "attrs");
        let state: Value = serde_json::from_slice(a.get_state().unwrap().json()).unwrap();
        assert_eq!(state["on"], json!("primary"), "{uri}");
        // A write that changes something (one that changes nothing writes nothing, so it
        // would succeed on a standby too).
        match a.set_state(format!(r#"{{"more":{more}}}"#).as_bytes()) {
            Ok(_) => assert!(writable, "{uri}: wrote to the standby?"),
            Err(Error::Unavailable(m)) => {
                assert!(!writable, "{uri}: {m}");
                assert!(m.contains("does not accept writes"), "{m}");
            }
            Err(e) => panic!("{uri}: {e}"),
        }
    }
    // No standby up: prefer-standby falls back to the primary; standby finds none.
    must(&["kill", &pair.standby]);
    open(&hosts("prefer-standby"), "attrs")
        .set_state(br#"{"fallback":true}"#)
        .unwrap();
    let options =
        OpenOptions::from_json(br#"{"agent_id":"attrs","server_timeout_ms":3000}"#).unwrap();
    let err = Agent::open_with(Path::new(&hosts("standby")), &options)
        .and_then(|a| a.get_state().map(drop))
        .unwrap_err();
    assert!(
        matches!(&err, Error::Unavailable(m) if m.contains("a standby")),
        "{err}"
    );
    let err = Agent::open_with(Path::new(&hosts("sometimes")), &options).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
}
